// Token sequences for the GPT: the embedded synthetic task, or the bytes of any text file.
//
// A batch is `rows` sequences of context + 1 tokens: the first context of them are the inputs
// (rows x context, ids as float32 numbers, exact), the last context the targets (the next token at
// each position, row by row).
#pragma once

#include <Eigen/Core>
#include <cstdint>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

namespace fpscope {

// Sequences with two kinds of structure a small transformer can learn, from the seed alone:
// each sequence is a motif of 3 to 8 tokens repeated to its end, the motif drawn from a fixed
// random Markov chain over min(vocab, 64) tokens (each token has three successors, taken with
// probabilities 0.6, 0.3 and 0.1). The chain's statistics are learnt by the embeddings and MLPs
// (a bigram model gets the motif's tokens to about 0.9 nats); the repeats are exactly predictable
// only by attending back one period (an induction head), so the loss falls well below what
// bigrams reach only when attention works.
class SyntheticSequences {
 public:
  SyntheticSequences(int context, int vocab, std::uint64_t seed);
  void next_batch(int rows, Eigen::MatrixXf& inputs, std::vector<int>& targets);
  std::string save_state() const;
  void restore_state(const std::string& state);  // throws std::invalid_argument

 private:
  int context_;
  int tokens_;
  std::vector<int> successors_;  // 3 per token
  std::mt19937_64 rng_;
};

// Windows of context + 1 bytes of a file, each starting at a place drawn from the seed: bytes are
// the tokens, so the model's vocab must be 256 or more (or above the file's largest byte).
class TextSequences {
 public:
  // Throws std::invalid_argument with one sentence for an unreadable file, one shorter than
  // context + 1 bytes, or a byte beyond the vocab.
  TextSequences(const std::filesystem::path& file, int context, int vocab, std::uint64_t seed);
  void next_batch(int rows, Eigen::MatrixXf& inputs, std::vector<int>& targets);
  std::string save_state() const;
  void restore_state(const std::string& state);  // throws std::invalid_argument
  const std::filesystem::path& file() const { return file_; }

 private:
  std::filesystem::path file_;
  std::string bytes_;
  int context_;
  std::mt19937_64 rng_;
};

}  // namespace fpscope
