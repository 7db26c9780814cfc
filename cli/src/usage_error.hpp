// UsageError: a user's mistake or bad input, which main prints as "fpscope: <what>" before exiting
// with its status. Apart from commands.hpp so that the units that only throw it do not compile
// CLI11 (about 5 s of each at -O3).
#pragma once

#include <stdexcept>
#include <string>

namespace fpscope::cli {

class UsageError : public std::runtime_error {
 public:
  explicit UsageError(const std::string& what, int status = 2) : std::runtime_error(what), status_(status) {}
  int status() const { return status_; }

 private:
  int status_;
};

}  // namespace fpscope::cli
