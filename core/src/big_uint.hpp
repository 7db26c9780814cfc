// A minimal arbitrary-precision unsigned integer: just what exact decimal <-> binary needs.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "fpscope/core/hd.hpp"

namespace fpscope::detail {

class BigUint {
 public:
  BigUint() = default;
  explicit BigUint(u128 value) {
    while (value != 0) {
      limbs_.push_back(static_cast<std::uint32_t>(value));
      value >>= 32;
    }
  }

  bool is_zero() const { return limbs_.empty(); }
  // Number of significant bits; 0 for zero.
  int bit_length() const {
    if (limbs_.empty()) return 0;
    return static_cast<int>(32 * (limbs_.size() - 1)) + msb64(limbs_.back()) + 1;
  }
  bool bit(int index) const {
    const auto limb = static_cast<std::size_t>(index / 32);
    return limb < limbs_.size() && ((limbs_[limb] >> (index % 32)) & 1) != 0;
  }
  // True when any bit below `index` is set.
  bool any_bit_below(int index) const {
    for (std::size_t limb = 0; limb < limbs_.size(); ++limb) {
      const int low = static_cast<int>(limb * 32);
      if (low >= index) break;
      const std::uint32_t mask = index - low >= 32 ? ~0u : (1u << (index - low)) - 1;
      if ((limbs_[limb] & mask) != 0) return true;
    }
    return false;
  }
  // Bits [low, low + 128) as a number.
  u128 bits_from(int low) const {
    u128 result = 0;
    for (int i = 127; i >= 0; --i) result = (result << 1) | (bit(low + i) ? 1 : 0);
    return result;
  }

  void multiply_add(std::uint32_t factor, std::uint32_t addend) {
    std::uint64_t carry = addend;
    for (std::uint32_t& limb : limbs_) {
      const std::uint64_t product = std::uint64_t{limb} * factor + carry;
      limb = static_cast<std::uint32_t>(product);
      carry = product >> 32;
    }
    if (carry != 0) limbs_.push_back(static_cast<std::uint32_t>(carry));
    trim();
  }
  void multiply_pow5(long long exponent) {
    constexpr std::uint32_t five13 = 1220703125;  // 5^13, the largest power of 5 below 2^32
    for (; exponent >= 13; exponent -= 13) multiply_add(five13, 0);
    std::uint32_t rest = 1;
    for (; exponent > 0; --exponent) rest *= 5;
    multiply_add(rest, 0);
  }
  void multiply_pow10(long long exponent) {
    multiply_pow5(exponent);
    shift_left(static_cast<int>(exponent));
  }
  void shift_left(int bits) {
    if (limbs_.empty() || bits == 0) return;
    const int limb_shift = bits / 32, bit_shift = bits % 32;
    std::vector<std::uint32_t> shifted(limbs_.size() + static_cast<std::size_t>(limb_shift) + 1, 0);
    for (std::size_t i = 0; i < limbs_.size(); ++i) {
      const std::uint64_t wide = std::uint64_t{limbs_[i]} << bit_shift;
      shifted[i + static_cast<std::size_t>(limb_shift)] |= static_cast<std::uint32_t>(wide);
      shifted[i + static_cast<std::size_t>(limb_shift) + 1] |= static_cast<std::uint32_t>(wide >> 32);
    }
    limbs_ = std::move(shifted);
    trim();
  }
  // Divides in place by a small divisor, returning the remainder.
  std::uint32_t divide_small(std::uint32_t divisor) {
    std::uint64_t remainder = 0;
    for (std::size_t i = limbs_.size(); i-- > 0;) {
      const std::uint64_t current = (remainder << 32) | limbs_[i];
      limbs_[i] = static_cast<std::uint32_t>(current / divisor);
      remainder = current % divisor;
    }
    trim();
    return static_cast<std::uint32_t>(remainder);
  }

  friend int compare(const BigUint& a, const BigUint& b) {
    if (a.limbs_.size() != b.limbs_.size()) return a.limbs_.size() < b.limbs_.size() ? -1 : 1;
    for (std::size_t i = a.limbs_.size(); i-- > 0;)
      if (a.limbs_[i] != b.limbs_[i]) return a.limbs_[i] < b.limbs_[i] ? -1 : 1;
    return 0;
  }
  // this -= other. Precondition: *this >= other.
  void subtract(const BigUint& other) {
    std::int64_t borrow = 0;
    for (std::size_t i = 0; i < limbs_.size(); ++i) {
      std::int64_t difference = std::int64_t{limbs_[i]} - borrow - (i < other.limbs_.size() ? std::int64_t{other.limbs_[i]} : 0);
      borrow = difference < 0 ? 1 : 0;
      limbs_[i] = static_cast<std::uint32_t>(difference + (borrow << 32));
    }
    trim();
  }

  // Quotient of numerator / divisor (divisor nonzero), and whether the remainder is nonzero.
  // Bit by bit: used where the quotient has about 130 bits.
  static BigUint divide(BigUint numerator, const BigUint& divisor, bool& remainder_nonzero) {
    BigUint quotient;
    const int top = numerator.bit_length() - divisor.bit_length();
    for (int position = top; position >= 0; --position) {
      BigUint shifted = divisor;
      shifted.shift_left(position);
      if (compare(numerator, shifted) >= 0) {
        numerator.subtract(shifted);
        BigUint one(1);
        one.shift_left(position);
        quotient.add(one);
      }
    }
    remainder_nonzero = !numerator.is_zero();
    return quotient;
  }
  void add(const BigUint& other) {
    if (limbs_.size() < other.limbs_.size()) limbs_.resize(other.limbs_.size(), 0);
    std::uint64_t carry = 0;
    for (std::size_t i = 0; i < limbs_.size(); ++i) {
      const std::uint64_t sum = std::uint64_t{limbs_[i]} + (i < other.limbs_.size() ? other.limbs_[i] : 0) + carry;
      limbs_[i] = static_cast<std::uint32_t>(sum);
      carry = sum >> 32;
    }
    if (carry != 0) limbs_.push_back(static_cast<std::uint32_t>(carry));
  }

  std::string to_decimal() const {
    if (limbs_.empty()) return "0";
    BigUint rest = *this;
    std::string reversed;
    while (!rest.is_zero()) {
      std::uint32_t chunk = rest.divide_small(1000000000);
      for (int i = 0; i < 9; ++i) {
        reversed.push_back(static_cast<char>('0' + chunk % 10));
        chunk /= 10;
        if (rest.is_zero() && chunk == 0) break;
      }
    }
    while (reversed.size() > 1 && reversed.back() == '0') reversed.pop_back();
    return {reversed.rbegin(), reversed.rend()};
  }

 private:
  void trim() {
    while (!limbs_.empty() && limbs_.back() == 0) limbs_.pop_back();
  }
  std::vector<std::uint32_t> limbs_;  // little-endian base 2^32
};

}  // namespace fpscope::detail
