// The CUDA tests' verdicts: one readable line per check -- OK or FAIL, what was checked, and the
// size of the difference where there is one -- counted for the test's exit status.
#pragma once

#include <cstdio>
#include <string>

namespace fpscope::test {

inline int failures = 0;

inline void verdict(bool ok, const std::string& what, double value = 0) {
  std::printf("%s %-96s %g\n", ok ? "OK  " : "FAIL", what.c_str(), value);
  failures += ok ? 0 : 1;
}

}  // namespace fpscope::test
