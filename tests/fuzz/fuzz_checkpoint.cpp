// Fuzz target: training checkpoints. Whatever decodes must encode to the same bytes.
#include <cstdlib>
#include <string_view>

#include "fpscope/gpu/checkpoint.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  try {
    const fpscope::TrainingCheckpoint c = fpscope::decode_checkpoint(bytes, "fuzz");
    if (fpscope::encode_checkpoint(c) != bytes) std::abort();
  } catch (const fpscope::CheckpointError&) {
  }
  return 0;
}
