// bench/support: how the benchmarks say what they measured — the environment lines every run
// opens with, a line of sample statistics, verdicts against targets, and the command-line
// values they take ("--name value" or "--name=value", comma-separated lists of bounded
// integers).
#pragma once

#include <sys/utsname.h>
#include <unistd.h>

#include <charconv>
#include <cstdio>
#include <deque>
#include <fstream>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "bench/support/measure.h"

namespace nodewarden::bench {

// For targets stated as limits the benchmark "meets" or "MISSES"...
inline const char* verdict(bool meets) {
  return meets ? "meets" : "MISSES";
}

// ... and for the decision cores' targets, PASS or MISS. Neither changes the exit status.
inline const char* passOrMiss(bool pass) {
  return pass ? "PASS" : "MISS";
}

inline std::string loadAverage() {
  std::ifstream in("/proc/loadavg");
  std::string one, five, fifteen;
  if (!(in >> one >> five >> fifteen)) return "unknown";
  return one + " " + five + " " + fifteen;
}

// The lines a run opens with: its title, the machine, the compiler and how this binary was
// built (`buildNote` says what else shares its flags); the load average and the kernel when
// asked; `compilerExtra` follows the compiler (", nlohmann_json 3.11.2"). The caller adds its own
// (hierarchy, mode) and the blank line.
inline void printEnvironment(const char* title, const char* buildNote, bool load, bool kernel,
                             const std::string& compilerExtra = "") {
  std::printf("%s\n", title);
  std::printf("  machine: nproc=%ld, cpu=%s\n", sysconf(_SC_NPROCESSORS_ONLN), cpuModel().c_str());
  if (load) {
    std::printf("  load average at start: %s (other work on the machine inflates medians)\n",
                loadAverage().c_str());
  }
  if (kernel) {
    utsname uts{};
    ::uname(&uts);
    std::printf("  kernel: %s %s %s %s\n", uts.sysname, uts.release, uts.version, uts.machine);
  }
  std::printf("  compiler: %s (C++ %ld)%s\n", __VERSION__, long(__cplusplus),
              compilerExtra.c_str());
  std::printf("  build: %s%s\n", buildFlavour().c_str(), buildNote);
}

// "    label   median … unit  p99 … unit  min …  n=…" in `unit` (nanoseconds / scale); with a
// reference, the median's share of it as a last column.
inline void printSamplesLine(int labelWidth, const char* label, const Samples& s, double scale,
                             const char* unit, double reference = 0) {
  std::printf("    %-*s median %10.3f %-2s  p99 %10.3f %-2s  min %10.3f  ", labelWidth, label,
              s.median() / scale, unit, s.p99() / scale, unit, s.min() / scale);
  if (reference > 0) {
    std::printf("n=%-6zu  %5.1f%%\n", s.count(), 100.0 * s.median() / reference);
  } else {
    std::printf("n=%zu\n", s.count());
  }
}

// ---------------------------------------------------------------------------------------------
// Command-line values.

// A whole integer in [lo, hi].
template <typename T = int>
std::optional<T> parseBounded(std::string_view text, T lo, T hi) {
  T v{};
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || end != text.data() + text.size() || v < lo || v > hi) {
    return std::nullopt;
  }
  return v;
}

// Calls f on each comma-separated item; false on an empty text or when f refuses an item.
template <typename F>
bool forEachItem(std::string_view text, F&& f) {
  if (text.empty()) return false;
  while (!text.empty()) {
    const auto comma = text.find(',');
    if (!f(text.substr(0, comma))) return false;
    if (comma == std::string_view::npos) break;
    text.remove_prefix(comma + 1);
  }
  return true;
}

// "110,1000,5000": at least one integer, each in [lo, hi].
template <typename T = int>
std::optional<std::vector<T>> parseBoundedList(std::string_view text, T lo, T hi) {
  std::vector<T> out;
  const bool ok = forEachItem(text, [&](std::string_view item) {
    auto v = parseBounded<T>(item, lo, hi);
    if (v) out.push_back(*v);
    return v.has_value();
  });
  if (!ok || out.empty()) return std::nullopt;
  return out;
}

// Matches argv[i] against "--name value" or "--name=value". `matched` says whether it is this
// option; the value is nullopt (after a message on stderr) when it is missing.
inline std::optional<std::string_view> optionValue(std::string_view name, int& i, int argc,
                                                   char** argv, bool& matched) {
  const std::string_view arg = argv[i];
  matched = false;
  if (arg == name) {
    matched = true;
    if (i + 1 >= argc) {
      std::fprintf(stderr, "%.*s needs a value\n", int(name.size()), name.data());
      return std::nullopt;
    }
    return std::string_view(argv[++i]);
  }
  if (arg.size() > name.size() && arg.substr(0, name.size()) == name && arg[name.size()] == '=') {
    matched = true;
    return arg.substr(name.size() + 1);
  }
  return std::nullopt;
}

// A program's whole command line: flags (run in order, so "--quick --minutes 1" keeps the
// minute), "--name value" / "--name=value" options, and --help / -h. parse() returns the exit
// status when the program should stop there: 0 after --help, 2 after a bad argument (with the
// reason, and the usage on stderr for an unknown one).
class Args {
 public:
  explicit Args(std::function<void(std::FILE*)> usage) : usage_(std::move(usage)) {}
  // A fixed usage text.
  explicit Args(const char* usage) : usage_([usage](std::FILE* to) { std::fputs(usage, to); }) {}

  Args& flag(const char* name, std::function<void()> action) {
    flags_.push_back({name, std::move(action)});
    return *this;
  }
  Args& flag(const char* name, bool& on) {
    return flag(name, [&on] { on = true; });
  }
  // `set` takes the value's text and says whether it is acceptable; `expected` completes
  // "NAME: expected ...".
  Args& value(const char* name, const char* expected, std::function<bool(std::string_view)> set) {
    values_.push_back({name, expected, std::move(set)});
    return *this;
  }
  template <typename T>
  Args& number(const char* name, T& out, T lo, T hi) {
    numbers_.push_back("a number from " + std::to_string(lo) + " to " + std::to_string(hi));
    return value(name, numbers_.back().c_str(), [&out, lo, hi](std::string_view text) {
      auto v = parseBounded<T>(text, lo, hi);
      if (v) out = *v;
      return v.has_value();
    });
  }

  std::optional<int> parse(int argc, char** argv) {
    for (int i = 1; i < argc; ++i) {
      const std::string_view arg = argv[i];
      if (arg == "--help" || arg == "-h") {
        usage_(stdout);
        return 0;
      }
      bool known = false;
      for (const Flag& f : flags_) {
        if (arg == f.name) {
          f.action();
          known = true;
          break;
        }
      }
      for (const Value& v : values_) {
        if (known) break;
        bool matched = false;
        auto text = optionValue(v.name, i, argc, argv, matched);
        if (!matched) continue;
        if (!text) return 2;
        if (!v.set(*text)) {
          std::fprintf(stderr, "%s: expected %s\n", v.name, v.expected);
          return 2;
        }
        known = true;
      }
      if (!known) {
        std::fprintf(stderr, "unknown argument: %s\n", argv[i]);
        usage_(stderr);
        return 2;
      }
    }
    return std::nullopt;
  }

 private:
  struct Flag {
    const char* name;
    std::function<void()> action;
  };
  struct Value {
    const char* name;
    const char* expected;
    std::function<bool(std::string_view)> set;
  };
  std::function<void(std::FILE*)> usage_;
  std::vector<Flag> flags_;
  std::vector<Value> values_;
  std::deque<std::string> numbers_;  // the "expected" texts of number() (stable addresses)
};

}  // namespace nodewarden::bench
