// bench/support: how the benchmarks say what they measured — the environment lines a run opens
// with, sample statistics, verdicts against targets, the heap in use — and their command lines.
#pragma once

#include <malloc.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <fstream>
#include <functional>
#include <optional>
#include <string_view>

#include "bench/support/measure.h"

namespace nodewarden::bench {

// Verdicts against targets (limits; the decision cores' targets); not in the exit status.
inline const char* verdict(bool meets) {
  return meets ? "meets" : "MISSES";
}
inline const char* passOrMiss(bool pass) {
  return pass ? "PASS" : "MISS";
}

inline std::string loadAverage() {
  std::ifstream in("/proc/loadavg");
  std::string one, five, fifteen;
  return in >> one >> five >> fifteen ? one + " " + five + " " + fifteen : "unknown";
}
inline std::string cpuModel() {
  std::ifstream in("/proc/cpuinfo");  // "model name\t: Intel(R) ..."
  for (std::string key, value; std::getline(in, key, ':') && std::getline(in, value);) {
    if (key.starts_with("model name") && !value.empty()) return value.substr(1);
  }
  return "unknown";
}

// How the including binary was compiled ("optimized, NDEBUG defined (asserts off)").
inline std::string buildFlavour() {
  std::string flavour = "optimized, NDEBUG ";
#ifndef __OPTIMIZE__
  flavour.insert(0, "NOT ");
#endif
#ifdef NDEBUG
  return flavour + "defined (asserts off)";
#else
  return flavour + "not defined (asserts on)";
#endif
}

// The lines a run opens with: its title, the machine, the compiler (then `compilerExtra`, as
// ", nlohmann_json 3.11.2") and this binary's build (then `buildNote`); the load average and
// the kernel when asked. The caller adds its own lines and the blank one.
inline void printEnvironment(const char* title, const char* buildNote, bool load, bool kernel,
                             const std::string& compilerExtra = "") {
  std::printf("%s\n", title);
  std::printf("  machine: nproc=%ld, cpu=%s\n", sysconf(_SC_NPROCESSORS_ONLN), cpuModel().c_str());
  if (load)
    std::printf("  load average at start: %s (other work on the machine inflates medians)\n",
                loadAverage().c_str());
  utsname uts{};
  if (kernel && ::uname(&uts) == 0)
    std::printf("  kernel: %s %s %s %s\n", uts.sysname, uts.release, uts.version, uts.machine);
  std::printf("  compiler: %s (C++ %ld)%s\n  build: %s%s\n", __VERSION__, long(__cplusplus),
              compilerExtra.c_str(), buildFlavour().c_str(), buildNote);
}

// "    label   median … unit  p99 … unit  min …  n=…" in `unit` (nanoseconds / scale).
inline void printSamplesLine(int labelWidth, const char* label, const Samples& s, double scale,
                             const char* unit) {
  std::printf("    %-*s median %10.3f %-2s  p99 %10.3f %-2s  min %10.3f  n=%zu\n", labelWidth,
              label, s.median() / scale, unit, s.p99() / scale, unit, s.min() / scale, s.count());
}

// Heap bytes in use (mallinfo2) for a before/after difference, after malloc_trim if `trim`.
inline std::size_t heapInUse(bool trim) {
  if (trim) ::malloc_trim(0);
  const struct mallinfo2 info = ::mallinfo2();
  return info.uordblks + info.hblkhd;
}

// A whole integer in [lo, hi].
template <typename T = int>
std::optional<T> parseBounded(std::string_view text, T lo, T hi) {
  T v{};
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  const bool whole = ec == std::errc() && end == text.data() + text.size();
  return whole && v >= lo && v <= hi ? std::optional<T>(v) : std::nullopt;
}

// Calls f on each comma-separated item; false on an empty text or when f refuses an item.
template <typename F>
bool forEachItem(std::string_view text, F&& f) {
  if (text.empty()) return false;
  for (std::size_t comma = 0; comma != std::string_view::npos;) {
    comma = text.find(',');
    if (!f(text.substr(0, comma))) return false;
    text.remove_prefix(comma == std::string_view::npos ? text.size() : comma + 1);
  }
  return true;
}

// A program's whole command line: "--name value" / "--name=value" options and flags, in order
// (so "--quick --minutes 1" keeps the minute), and --help / -h. parse() returns the exit status
// when the program should stop there: 0 after --help, 2 after a bad or missing argument (with
// the reason, and the usage on stderr for an unknown one).
class Args {
 public:
  explicit Args(std::function<void(std::FILE*)> usage) : usage_(std::move(usage)) {}
  explicit Args(const char* usage) : usage_([usage](std::FILE* to) { std::fputs(usage, to); }) {}

  Args& flag(const char* name, std::function<void()> action) {
    return value(name, "", [action](std::string_view) {
      action();
      return true;
    });
  }
  Args& flag(const char* name, bool& on) {
    return flag(name, [&on] { on = true; });
  }
  // `set` takes the value's text and says whether it is acceptable; `expected` completes
  // "NAME: expected ..." ("" for a flag, which takes no value).
  Args& value(const char* name, std::string expected, std::function<bool(std::string_view)> set) {
    options_.push_back({name, std::move(expected), std::move(set)});
    return *this;
  }
  template <typename T>
  Args& number(const char* name, T& out, T lo, T hi) {
    return value(name, "a number from " + std::to_string(lo) + " to " + std::to_string(hi),
                 [&out, lo, hi](std::string_view text) {
                   auto v = parseBounded<T>(text, lo, hi);
                   if (v) out = *v;
                   return v.has_value();
                 });
  }
  // "110,1000,5000": at least one number, each in [lo, hi].
  template <typename T>
  Args& numbers(const char* name, std::vector<T>& out, T lo, T hi) {
    const std::string range = std::to_string(lo) + " to " + std::to_string(hi);
    return value(name, "numbers from " + range + " separated by commas",
                 [&out, lo, hi](std::string_view text) {
                   out.clear();  // refused, it is left half-read: parse() stops the program
                   return forEachItem(text, [&](std::string_view item) {
                     auto v = parseBounded<T>(item, lo, hi);
                     if (v) out.push_back(*v);
                     return v.has_value();
                   });
                 });
  }

  std::optional<int> parse(int argc, char** argv) {
    for (int i = 1; i < argc; ++i) {
      const std::string_view arg = argv[i], name = arg.substr(0, arg.find('='));
      const bool joined = name != arg;  // "--name=value"
      if (arg == "--help" || arg == "-h") {
        usage_(stdout);
        return 0;
      }
      auto o = std::ranges::find(options_, name, &Option::name);
      if (o == options_.end() || (o->expected.empty() && joined)) {
        std::fprintf(stderr, "unknown argument: %s\n", argv[i]);
        usage_(stderr);
        return 2;
      }
      if (o->expected.empty()) {
        o->set("");
      } else if ((!joined && i + 1 == argc) ||
                 !o->set(joined ? arg.substr(name.size() + 1) : argv[++i])) {
        std::fprintf(stderr, "%s: expected %s\n", o->name.data(), o->expected.c_str());
        return 2;
      }
    }
    return std::nullopt;
  }

 private:
  struct Option {
    std::string_view name;
    std::string expected;  // empty for a flag
    std::function<bool(std::string_view)> set;
  };
  std::function<void(std::FILE*)> usage_;
  std::vector<Option> options_;
};

}  // namespace nodewarden::bench
