// The GPT's batch sources: the synthetic motif task and text files.
#include "fpscope/gpu/sequence_data.hpp"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include "fpscope/core/printable_text.hpp"

namespace fpscope {

namespace {

std::string save_rng(const std::mt19937_64& rng) {
  std::ostringstream out;
  out << rng;
  return out.str();
}

std::mt19937_64 restore_rng(const std::string& state, const char* what) {
  std::istringstream in(state);
  std::mt19937_64 rng;
  in >> rng;
  if (!in) throw std::invalid_argument(std::string("the saved state of the ") + what + " does not parse");
  return rng;
}

// One sequence's context + 1 tokens into row `row` of the inputs and targets.
void put_sequence(const std::vector<int>& sequence, int row, int context, Eigen::MatrixXf& inputs, std::vector<int>& targets) {
  for (int t = 0; t < context; ++t) {
    inputs(row, t) = static_cast<float>(sequence[static_cast<std::size_t>(t)]);
    targets[static_cast<std::size_t>(row) * static_cast<std::size_t>(context) + static_cast<std::size_t>(t)] = sequence[static_cast<std::size_t>(t) + 1];
  }
}

}  // namespace

SyntheticSequences::SyntheticSequences(int context, int vocab, std::uint64_t seed)
    : context_(context), tokens_(std::min(vocab, 64)), rng_(seed) {
  if (context < 1 || vocab < 1) throw std::invalid_argument("the synthetic sequences need a context and a vocab of at least 1");
  std::uniform_int_distribution<int> pick(0, tokens_ - 1);
  successors_.resize(static_cast<std::size_t>(tokens_) * 3);
  for (int& s : successors_) s = pick(rng_);
}

void SyntheticSequences::next_batch(int rows, Eigen::MatrixXf& inputs, std::vector<int>& targets) {
  inputs.resize(rows, context_);
  targets.resize(static_cast<std::size_t>(rows) * static_cast<std::size_t>(context_));
  std::uniform_int_distribution<int> period(3, 8), first(0, tokens_ - 1);
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  std::vector<int> motif, sequence(static_cast<std::size_t>(context_) + 1);
  for (int row = 0; row < rows; ++row) {
    motif.assign(static_cast<std::size_t>(period(rng_)), 0);
    motif[0] = first(rng_);
    for (std::size_t i = 1; i < motif.size(); ++i) {
      const double u = unit(rng_);
      const int choice = u < 0.6 ? 0 : u < 0.9 ? 1 : 2;
      motif[i] = successors_[static_cast<std::size_t>(motif[i - 1]) * 3 + static_cast<std::size_t>(choice)];
    }
    for (std::size_t t = 0; t < sequence.size(); ++t) sequence[t] = motif[t % motif.size()];
    put_sequence(sequence, row, context_, inputs, targets);
  }
}

std::string SyntheticSequences::save_state() const { return save_rng(rng_); }
void SyntheticSequences::restore_state(const std::string& state) { rng_ = restore_rng(state, "synthetic sequences"); }

TextSequences::TextSequences(const std::filesystem::path& file, int context, int vocab, std::uint64_t seed)
    : file_(file), context_(context), rng_(seed) {
  const std::string name = printable_text(file.string(), 200);
  std::error_code error;
  if (std::filesystem::is_directory(file, error)) throw std::invalid_argument("text file " + name + " is a folder: name a file");
  std::ifstream in(file, std::ios::binary);
  if (!in) throw std::invalid_argument("cannot read text file " + name + ": " + std::strerror(errno));
  // Read in pieces up to a bound: a device (/dev/zero) or a FIFO may never end.
  constexpr std::size_t max_text_bytes = std::size_t{1} << 30;
  std::string piece(std::size_t{1} << 20, '\0');
  while (in) {
    in.read(piece.data(), static_cast<std::streamsize>(piece.size()));
    bytes_.append(piece.data(), static_cast<std::size_t>(in.gcount()));
    if (bytes_.size() > max_text_bytes)
      throw std::invalid_argument("text file " + name + " holds more than 1 GiB (or never ends, as a device may): give a smaller file");
  }
  if (in.bad()) throw std::invalid_argument("cannot read text file " + name);
  if (bytes_.size() < static_cast<std::size_t>(context) + 1)
    throw std::invalid_argument("text file " + name + " has " + std::to_string(bytes_.size()) + " bytes; a sequence of context " +
                                std::to_string(context) + " needs " + std::to_string(context + 1));
  for (std::size_t i = 0; i < bytes_.size(); ++i) {
    const int byte = static_cast<unsigned char>(bytes_[i]);
    if (byte >= vocab)
      throw std::invalid_argument("text file " + name + " has byte " + std::to_string(byte) + " at offset " + std::to_string(i) +
                                  ", beyond the model's vocab of " + std::to_string(vocab) + " (bytes need vocab=256)");
  }
}

void TextSequences::next_batch(int rows, Eigen::MatrixXf& inputs, std::vector<int>& targets) {
  inputs.resize(rows, context_);
  targets.resize(static_cast<std::size_t>(rows) * static_cast<std::size_t>(context_));
  std::uniform_int_distribution<std::size_t> start(0, bytes_.size() - static_cast<std::size_t>(context_) - 1);
  std::vector<int> sequence(static_cast<std::size_t>(context_) + 1);
  for (int row = 0; row < rows; ++row) {
    const std::size_t at = start(rng_);
    for (std::size_t t = 0; t < sequence.size(); ++t) sequence[t] = static_cast<unsigned char>(bytes_[at + t]);
    put_sequence(sequence, row, context_, inputs, targets);
  }
}

std::string TextSequences::save_state() const { return save_rng(rng_); }
void TextSequences::restore_state(const std::string& state) { rng_ = restore_rng(state, "text sequences"); }

}  // namespace fpscope
