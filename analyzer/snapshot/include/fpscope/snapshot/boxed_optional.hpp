// BoxedOptional<T>: std::optional's value semantics with the value kept on the heap, for a large
// member that is usually absent. A TensorRecord's block statistics (two count arrays, 4.3 KB) held
// inline would be two thirds of every record, present or not, and of every snapshot the app keeps.
#pragma once

#include <memory>
#include <optional>
#include <utility>

namespace fpscope {

template <typename T>
class BoxedOptional {
 public:
  BoxedOptional() = default;
  BoxedOptional(std::nullopt_t) {}  // NOLINT(google-explicit-constructor): as std::optional
  BoxedOptional(const T& value) : value_(std::make_unique<T>(value)) {}  // NOLINT(google-explicit-constructor)
  BoxedOptional(T&& value) : value_(std::make_unique<T>(std::move(value))) {}  // NOLINT(google-explicit-constructor)
  BoxedOptional(const BoxedOptional& other) : value_(other.value_ ? std::make_unique<T>(*other.value_) : nullptr) {}
  BoxedOptional(BoxedOptional&&) noexcept = default;
  BoxedOptional& operator=(const BoxedOptional& other) {
    if (this != &other) value_ = other.value_ ? std::make_unique<T>(*other.value_) : nullptr;
    return *this;
  }
  BoxedOptional& operator=(BoxedOptional&&) noexcept = default;
  BoxedOptional& operator=(std::nullopt_t) {
    value_.reset();
    return *this;
  }
  BoxedOptional& operator=(const T& value) { return *this = BoxedOptional(value); }
  BoxedOptional& operator=(T&& value) { return *this = BoxedOptional(std::move(value)); }
  BoxedOptional& operator=(std::optional<T>&& value) {
    if (value) return *this = std::move(*value);
    return *this = std::nullopt;
  }

  bool has_value() const { return value_ != nullptr; }
  explicit operator bool() const { return has_value(); }
  T& operator*() { return *value_; }
  const T& operator*() const { return *value_; }
  T* operator->() { return value_.get(); }
  const T* operator->() const { return value_.get(); }
  template <typename... Args>
  T& emplace(Args&&... args) {
    value_ = std::make_unique<T>(std::forward<Args>(args)...);
    return *value_;
  }
  void reset() { value_.reset(); }

  // Equal when both are absent, or both hold equal values.
  friend bool operator==(const BoxedOptional& a, const BoxedOptional& b) {
    return a.has_value() == b.has_value() && (!a.has_value() || *a == *b);
  }
  friend bool operator==(const BoxedOptional& a, std::nullopt_t) { return !a.has_value(); }

 private:
  std::unique_ptr<T> value_;
};

}  // namespace fpscope
