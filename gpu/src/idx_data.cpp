// IDX reading through zlib's gz* functions, which read plain and gzipped files alike.
#include "fpscope/gpu/idx_data.hpp"

#include <sstream>

#include <zlib.h>

#include <algorithm>
#include <numeric>
#include <string>

namespace fpscope {

IdxArray read_idx(const std::filesystem::path& path) {
  gzFile file = gzopen(path.c_str(), "rb");
  if (file == nullptr) throw IdxError(path.string() + ": cannot open");
  struct Closer {
    gzFile f;
    ~Closer() { gzclose(f); }
  } closer{file};
  unsigned char magic[4];
  if (gzread(file, magic, 4) != 4 || magic[0] != 0 || magic[1] != 0)
    throw IdxError(path.string() + ": not an IDX file (bad magic number)");
  if (magic[2] != 0x08) throw IdxError(path.string() + ": IDX element type " + std::to_string(magic[2]) + " is not unsigned bytes (0x08)");
  IdxArray array;
  std::uint64_t count = 1;
  for (int d = 0; d < magic[3]; ++d) {
    unsigned char b[4];
    if (gzread(file, b, 4) != 4) throw IdxError(path.string() + ": truncated header");
    array.dimensions.push_back(static_cast<std::uint32_t>(b[0]) << 24 | static_cast<std::uint32_t>(b[1]) << 16 |
                               static_cast<std::uint32_t>(b[2]) << 8 | b[3]);
    count *= array.dimensions.back();
  }
  if (count > (std::uint64_t{1} << 34)) throw IdxError(path.string() + ": dimensions too large");
  array.data.resize(static_cast<std::size_t>(count));
  std::size_t done = 0;
  while (done < array.data.size()) {
    const unsigned want = static_cast<unsigned>(std::min<std::size_t>(array.data.size() - done, 1u << 30));
    const int got = gzread(file, array.data.data() + done, want);
    if (got <= 0) throw IdxError(path.string() + ": truncated: expected " + std::to_string(count) + " bytes of data");
    done += static_cast<std::size_t>(got);
  }
  return array;
}

namespace {
std::filesystem::path find(const std::filesystem::path& folder, const std::string& name) {
  for (const std::string& candidate : {name, name + ".gz"})
    if (std::filesystem::exists(folder / candidate)) return folder / candidate;
  throw IdxError((folder / name).string() + "(.gz): not found: expected MNIST-format IDX files in " + folder.string());
}
}  // namespace

IdxClassification::IdxClassification(const std::filesystem::path& folder, std::uint64_t seed) : rng_(seed) {
  files_ = {find(folder, "train-images-idx3-ubyte"), find(folder, "train-labels-idx1-ubyte")};
  const IdxArray images = read_idx(files_[0]);
  const IdxArray labels = read_idx(files_[1]);
  if (images.dimensions.size() < 2 || labels.dimensions.size() != 1 || images.dimensions[0] != labels.dimensions[0] ||
      images.dimensions[0] == 0)
    throw IdxError(folder.string() + ": the images and labels files do not describe the same number of examples");
  const std::size_t n = images.dimensions[0];
  const std::size_t features = images.data.size() / n;
  images_.resize(static_cast<Eigen::Index>(n), static_cast<Eigen::Index>(features));
  for (std::size_t i = 0; i < images.data.size(); ++i) images_.data()[i] = static_cast<float>(images.data[i]) / 255.0f;
  labels_.assign(labels.data.begin(), labels.data.end());
  classes_ = *std::max_element(labels_.begin(), labels_.end()) + 1;
  order_.resize(n);
  std::iota(order_.begin(), order_.end(), std::size_t{0});
  std::shuffle(order_.begin(), order_.end(), rng_);
}

void IdxClassification::next_batch(int rows, Eigen::MatrixXf& inputs, std::vector<int>& labels) {
  inputs.resize(rows, features());
  labels.resize(static_cast<std::size_t>(rows));
  for (int r = 0; r < rows; ++r) {
    if (next_ == order_.size()) {  // a new epoch, in a new order
      std::shuffle(order_.begin(), order_.end(), rng_);
      next_ = 0;
    }
    const std::size_t example = order_[next_++];
    inputs.row(r) = images_.row(static_cast<Eigen::Index>(example));
    labels[static_cast<std::size_t>(r)] = labels_[example];
  }
}

std::string IdxClassification::save_state() const {
  std::ostringstream out;
  out << rng_ << ' ' << next_ << ' ' << order_.size();
  for (std::size_t i : order_) out << ' ' << i;
  return out.str();
}

void IdxClassification::restore_state(const std::string& state) {
  std::istringstream in(state);
  std::mt19937_64 rng;
  std::size_t next = 0, count = 0;
  in >> rng >> next >> count;
  std::vector<std::size_t> order(in && count == order_.size() ? count : 0);
  for (std::size_t& i : order) in >> i;
  bool valid = in && count == order_.size() && next <= count;
  for (std::size_t i : order) valid = valid && i < count;
  if (!valid) throw std::invalid_argument("the saved state of the IDX data does not fit these files");
  rng_ = rng;
  next_ = next;
  order_ = std::move(order);
}

}  // namespace fpscope
