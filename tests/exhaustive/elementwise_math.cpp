// Exhaustive: every float32 through exp, tanh and erf (elementwise_math.hpp) -- the scalar
// functions within their stated ulp of the exact ones (float64's exp, tanh and erf, each within an
// ulp of float64, far below float32's), and every instruction set's passes (elementwise_passes.hpp)
// the scalar functions' bits.
#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <string>
#include <vector>

#include "activation_pass.hpp"
#include "elementwise_passes.hpp"
#include "fpscope/core/bulk.hpp"
#include "float32_ulps.hpp"
#include "fpscope/gpu/elementwise_math.hpp"
#include "sweep.hpp"

using namespace fpscope;

namespace {

std::uint32_t bits(float x) {
  std::uint32_t b = 0;
  std::memcpy(&b, &x, sizeof b);
  return b;
}

using test::float32_ulps;


}  // namespace

int main() {
  using Pass = void (*)(const float*, float*, std::size_t);
  struct Named {
    const char* name;
    double bound;
    float (*scalar)(float);
    double (*exact)(double);
    Pass element::ElementwisePasses::*pass;
  };
  const Named functions[] = {
      {"exp", 1.0, [](float x) { return element::exp_of(x); }, [](double x) { return std::exp(x); }, &element::ElementwisePasses::exp},
      {"tanh", 1.5, [](float x) { return element::tanh_of(x); }, [](double x) { return std::tanh(x); }, &element::ElementwisePasses::tanh},
      {"erf", 1.5, [](float x) { return element::erf_of(x); }, [](double x) { return std::erf(x); }, &element::ElementwisePasses::erf},
  };
  std::vector<std::string> sets;
  for (const char* isa : {"avx2", "avx512"})
    if (bulk_isa_supported(isa)) sets.emplace_back(isa);
  std::uint64_t failed = 0;
  for (const Named& f : functions) {
    std::mutex lock;
    double worst = 0;
    float worst_at = 0;
    std::atomic<std::uint64_t> differ{0};
    const sweep::Result result = sweep::run(std::uint64_t{1} << 32, [&](std::uint64_t first, std::uint64_t last) {
      std::vector<float> in(last - first), reference(in.size()), out(in.size());
      for (std::uint64_t b = first; b < last; ++b) {
        const auto word = static_cast<std::uint32_t>(b);
        std::memcpy(&in[b - first], &word, sizeof word);
      }
      double local_worst = 0;
      float local_at = 0;
      for (std::size_t i = 0; i < in.size(); ++i) {
        reference[i] = f.scalar(in[i]);
        const double error = float32_ulps(reference[i], f.exact(in[i]));
        if (error > local_worst) local_worst = error, local_at = in[i];
      }
      std::uint64_t mismatches = 0;
      for (const std::string& isa : sets) {
        (elementwise_passes_for(isa).*(f.pass))(in.data(), out.data(), in.size());
        for (std::size_t i = 0; i < in.size(); ++i) mismatches += bits(out[i]) != bits(reference[i]);
      }
      differ += mismatches;
      std::lock_guard<std::mutex> guard(lock);
      if (local_worst > worst) worst = local_worst, worst_at = local_at;
      return std::uint64_t{local_worst > f.bound} + mismatches;
    });
    const bool ok = worst <= f.bound && differ == 0;
    std::printf("%s: every float32, largest error %.4f ulp (at %a; bound %.1f), %llu lanes differing from the scalar bits over %zu instruction sets, %.0f s: %s\n",
                f.name, worst, static_cast<double>(worst_at), f.bound, static_cast<unsigned long long>(differ.load()), sets.size(), result.seconds,
                ok ? "ok" : "FAILED");
    failed += !ok;
  }
  return failed == 0 ? 0 : 1;
}
