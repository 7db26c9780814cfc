// Picks and opens the batch source named by a --data spec.
#include "fpscope/gpu/training_data.hpp"
#include "fpscope/core/printable_text.hpp"

#include "fpscope/gpu/mlp.hpp"

#include <stdexcept>

namespace fpscope {

TrainingData::TrainingData(const std::string& spec, const std::vector<int>& layer_sizes, std::uint64_t seed) {
  if (layer_sizes.size() < 2) throw std::invalid_argument("a model needs an input and an output size");
  if (spec == "synthetic") {
    synthetic_.emplace(layer_sizes.front(), layer_sizes.back(), seed, 1.0f);
  } else if (spec.rfind("mnist:", 0) == 0) {
    const std::string folder = spec.substr(6);
    idx_.emplace(folder, seed);
    if (idx_->features() != layer_sizes.front() || idx_->classes() > layer_sizes.back())
      throw std::invalid_argument("model " + layer_sizes_name(layer_sizes) + " does not fit the data in " + folder + ": " +
                                  std::to_string(idx_->features()) + " features and " + std::to_string(idx_->classes()) +
                                  " classes");
  } else {
    throw std::invalid_argument("unknown data '" + printable_text(spec) + "': expected synthetic or mnist:DIR");
  }
}

TrainingData::TrainingData(const std::string& spec, const TrainingConfig& config) {
  if (!config.gpt) {
    if (spec.rfind("text:", 0) == 0) throw std::invalid_argument("text:FILE is data for a GPT (--model gpt:...), not for an MLP");
    *this = TrainingData(spec, config.layer_sizes, config.seed);
    return;
  }
  if (spec == "synthetic") sequences_.emplace(config.gpt->context, config.gpt->vocab, config.seed);
  else if (spec.rfind("text:", 0) == 0) text_.emplace(spec.substr(5), config.gpt->context, config.gpt->vocab, config.seed);
  else throw std::invalid_argument("unknown data '" + printable_text(spec) + "' for a GPT: expected synthetic or text:FILE");
}

void TrainingData::next_batch(int rows, Eigen::MatrixXf& inputs, std::vector<int>& labels) {
  if (synthetic_) synthetic_->next_batch(rows, inputs, labels);
  else if (idx_) idx_->next_batch(rows, inputs, labels);
  else if (sequences_) sequences_->next_batch(rows, inputs, labels);
  else text_->next_batch(rows, inputs, labels);
}

std::string TrainingData::save_state() const {
  return synthetic_ ? synthetic_->save_state() : idx_ ? idx_->save_state() : sequences_ ? sequences_->save_state() : text_->save_state();
}

void TrainingData::restore_state(const std::string& state) {
  if (synthetic_) synthetic_->restore_state(state);
  else if (idx_) idx_->restore_state(state);
  else if (sequences_) sequences_->restore_state(state);
  else text_->restore_state(state);
}

std::vector<std::filesystem::path> TrainingData::files() const {
  if (text_) return {text_->file()};
  return idx_ ? idx_->files() : std::vector<std::filesystem::path>{};
}

}  // namespace fpscope
