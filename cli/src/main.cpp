// fpscope: the command-line entry point; prints errors, nothing else prints them.
#include <fmt/core.h>

#include <fcntl.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cerrno>
#include <cstring>
#include <new>
#include <filesystem>
#include <algorithm>
#include <cctype>
#include <string_view>
#include <csignal>
#include <cstdio>
#include <exception>
#include <string>
#include <vector>

#include "commands.hpp"
#include "fpscope/core/decimal.hpp"
#include "fpscope/core/names.hpp"
#include "fpscope/core/printable_text.hpp"
#include "fpscope/gpu/gemm.hpp"
#include "fpscope/gpu/training_session.hpp"

namespace {

// The arguments as CLI11 should see them.
// TestFloat's testfloat_ver spells options with one dash and glued values (-rnear_even,
// -tininessbefore); `fpscope verify` accepts them by rewriting them into long options.
// A negative special or hex float ("-inf", "-nan", "-snan", "-0x1p-3") reads to CLI11 as short
// options (it knows negative decimals only), even behind "--" once a multi-value option such as
// --format came first. `inspect` takes them as --value=ARG, and takes what follows "--" likewise.
bool negative_special_value(std::string_view arg) {
  if (arg.size() < 3 || arg[0] != '-' || arg[1] == '-') return false;
  std::string rest(arg.substr(1));
  for (char& c : rest) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return rest == "inf" || rest == "infinity" || rest == "nan" || rest == "qnan" || rest == "snan" || rest.rfind("0x", 0) == 0;
}

std::vector<std::string> translate_arguments(int argc, char** argv) {
  std::vector<std::string> args(argv, argv + argc);
  if (args.size() >= 2 && args[1] == "inspect") {
    std::vector<std::string> out(args.begin(), args.begin() + 2);
    bool positional_only = false;
    for (std::size_t i = 2; i < args.size(); ++i) {
      if (!positional_only && args[i] == "--") positional_only = true;
      else if (positional_only || negative_special_value(args[i])) out.push_back("--value=" + args[i]);
      else out.push_back(args[i]);
    }
    return out;
  }
  if (args.size() < 2 || args[1] != "verify") return args;
  for (std::size_t i = 2; i < args.size(); ++i) {
    std::string& a = args[i];
    if (a.rfind("-r", 0) == 0 && a.size() > 2 && a[2] != '-') a = "--round=" + a.substr(2);
    else if (a == "-tininessbefore") a = "--tininess=before";
    else if (a == "-tininessafter") a = "--tininess=after";
    else if (a == "-exact") a = "--exact";
    else if (a == "-notexact") a = "--not-exact";
    else if (a == "-checkNaNs") a = "--check-nans";
    else if (a == "-checkInvInts") a = "--check-invalid-integers";
    else if (a == "-checkAll") a = "--check-all";
  }
  return args;
}

}  // namespace

// Results go to standard output: a closed one would lose them (and let the next file opened take
// descriptor 1), a full disk or a closed pipe would cut them short. Both are errors.
// Every error is one line on stderr: whatever of the user's text is in it (a file's bytes, an
// argument) is escaped, so no control character breaks the line or drives the terminal.
// Never throws: an error message that cannot be written (stderr on a full disk) is lost, and the
// status still says what happened -- where {fmt}'s throwing print would abort.
static void print_error(std::string_view message) {
  const std::string line = "fpscope: " + fpscope::printable_text(message, 4096) + "\n";
  std::fwrite(line.data(), 1, line.size(), stderr);
  std::fflush(stderr);
}

static bool standard_output_open() { return ::fcntl(STDOUT_FILENO, F_GETFD) != -1 || errno != EBADF; }

static int finish_standard_output(int status) {
  if (std::fflush(stdout) != 0 || std::ferror(stdout) != 0 || std::fclose(stdout) != 0) {
    const int error = errno;
    print_error(std::string("cannot write to standard output: ") + std::strerror(error != 0 ? error : EIO));
    return status == 0 ? 1 : status;
  }
  return status;
}

static int run(int argc, char** argv);

int main(int argc, char** argv) {
  fpscope::start_without_blas_workers(argv);
  fpscope::keep_step_memory_mapped();
  // A file-size limit (ulimit -f) makes a write fail with EFBIG, said in one sentence, rather
  // than killing the process silently mid-write.
  std::signal(SIGXFSZ, SIG_IGN);
  if (!standard_output_open()) {
    print_error("standard output is closed: fpscope writes its results there (redirect it to /dev/null to drop them)");
    return 1;
  }
  return finish_standard_output(run(argc, argv));
}

static int run(int argc, char** argv) {
  CLI::App app{"fpscope: makes floating-point precision visible"};
  app.require_subcommand(1);
  fpscope::cli::add_inspect(app);
  fpscope::cli::add_table(app);
  fpscope::cli::add_convert(app);
  fpscope::cli::add_verify(app);
  fpscope::cli::add_analyze(app);
  fpscope::cli::add_export(app);
  fpscope::cli::add_train(app);
  fpscope::cli::add_quantize(app);

  const auto subcommands = app.get_subcommands([](CLI::App*) { return true; });
  const bool known = argc < 2 || argv[1][0] == '-' ||
                     std::any_of(subcommands.begin(), subcommands.end(), [&](const CLI::App* sub) { return sub->get_name() == argv[1]; });
  if (!known) {
    std::string names;
    for (const CLI::App* sub : subcommands) names += (names.empty() ? "" : ", ") + sub->get_name();
    print_error(fmt::format("unknown command '{}': expected one of {}", argv[1], names));
    return 2;
  }
  const std::vector<std::string> args = translate_arguments(argc, argv);
  std::vector<const char*> pointers;
  for (const auto& a : args) pointers.push_back(a.c_str());
  try {
    app.parse(static_cast<int>(pointers.size()), pointers.data());
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    // One sentence, like every other error (CLI11 would add a second line).
    print_error(std::string(e.what()) + " (see fpscope --help)");
    return 2;
  } catch (const fpscope::cli::UsageError& e) {
    std::fflush(stdout);
    print_error(e.what());
    return e.status();
  } catch (const fpscope::ParseError& e) {
    std::fflush(stdout);
    print_error(e.what());
    return 2;
  } catch (const fpscope::UnknownNameError& e) {
    std::fflush(stdout);
    print_error(e.what());
    return 2;
  } catch (const std::bad_alloc&) {
    std::fflush(stdout);
    print_error("out of memory");
    return 1;
  } catch (const std::filesystem::filesystem_error& e) {
    // The library's wording ("filesystem error: status: ...") made a sentence about the path.
    std::fflush(stdout);
    std::string message = e.code().message();
    if (!message.empty()) message[0] = static_cast<char>(std::tolower(static_cast<unsigned char>(message[0])));
    print_error("cannot use " + fpscope::printable_text(e.path1().string(), 200) + ": " + message);
    return 1;
  } catch (const std::length_error&) {
    std::fflush(stdout);
    print_error("an input asks for more memory than can be addressed");
    return 1;
  } catch (const std::exception& e) {
    // A write to standard output that failed part way ({fmt} throws once its buffer cannot be
    // flushed, as on a full disk): finish_standard_output says so, in one sentence.
    if (std::ferror(stdout) != 0) return 1;
    std::fflush(stdout);
    print_error(e.what());
    return 1;
  }
  return 0;
}
