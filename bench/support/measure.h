// bench/support: timing, a repeatable random source, samples and budgets — what every
// benchmark measures with.
#pragma once

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdint>
#include <fstream>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "base/time.h"

namespace nodewarden::bench {

// The time now on the monotonic clock, which every figure is timed with; a point of it is a
// SteadyTime (base/time.h). nodewarden::Clock (base/clock.h) is the daemon's injected clock:
// the benches read the real one directly.
inline SteadyTime steadyNow() {
  return std::chrono::steady_clock::now();
}

// Tells the optimiser that `value` is read, so the work producing it cannot be dropped
// (Google Benchmark's DoNotOptimize for non-trivially-copyable values).
template <typename T>
inline void doNotOptimize(const T& value) {
  __asm__ __volatile__("" : : "r"(&value) : "memory");
}

// Accumulates a figure from every result as a second guard against dead-code elimination.
inline volatile std::uint64_t gSink = 0;

inline double nanosSince(SteadyTime start) {
  return std::chrono::duration<double, std::nano>(steadyNow() - start).count();
}

class Random {
 public:
  explicit Random(std::uint64_t seed) : engine_(seed) {}

  // Uniform in [lo, hi].
  std::int64_t between(std::int64_t lo, std::int64_t hi) {
    return lo + std::int64_t(engine_() % std::uint64_t(hi - lo + 1));
  }
  double unit() { return double(engine_() >> 11) * 0x1.0p-53; }
  double betweenReal(double lo, double hi) { return lo + (hi - lo) * unit(); }
  bool chance(double p) { return unit() < p; }
  template <typename T, std::size_t N>
  const T& pick(const T (&items)[N]) {
    return items[engine_() % N];
  }
  std::string fromAlphabet(std::string_view alphabet, std::size_t n) {
    std::string out(n, ' ');
    for (auto& c : out) c = alphabet[engine_() % alphabet.size()];
    return out;
  }
  std::string hex(std::size_t n) { return fromAlphabet("0123456789abcdef", n); }
  std::string uuid() {
    return hex(8) + "-" + hex(4) + "-4" + hex(3) + "-" + fromAlphabet("89ab", 1) + hex(3) + "-" +
           hex(12);
  }

 private:
  std::mt19937_64 engine_;
};

struct Samples {
  std::vector<double> nanos;  // sorted

  static Samples from(std::vector<double> unsorted) {
    std::sort(unsorted.begin(), unsorted.end());
    return Samples{std::move(unsorted)};
  }

  std::size_t count() const { return nanos.size(); }
  double median() const {
    if (nanos.empty()) return 0;
    const std::size_t n = nanos.size();
    return n % 2 == 1 ? nanos[n / 2] : (nanos[n / 2 - 1] + nanos[n / 2]) / 2;
  }
  double min() const { return nanos.empty() ? 0 : nanos.front(); }
  // Nearest-rank p99; with fewer than 100 samples it is the maximum.
  double p99() const {
    if (nanos.empty()) return 0;
    std::size_t rank = (nanos.size() * 99 + 99) / 100;  // ceil(0.99 n)
    return nanos[std::max<std::size_t>(rank, 1) - 1];
  }
};

struct Budget {
  int minIterations;
  int maxIterations;
  double seconds;  // wall time, including untimed set-up and tear-down of each iteration
};

// SIGINT/SIGTERM only set this (installStopHandlers, bench/support/process.h); every loop
// checks stopped() and unwinds normally, so the sandbox's destructor and the subprocess
// handling clean up. Forked (not exec'd) children inherit the handler and leave their loops too.
inline volatile std::sig_atomic_t gStop = 0;

inline void requestStop() {
  gStop = 1;
}

inline bool stopped() {
  return gStop != 0;
}

// Calls `once` (which returns the nanoseconds of the part it times) `warmups` times untimed,
// then until the budget is spent: it stops before an iteration that would overrun the
// budget once minIterations are done, or at once when a stop is requested.
template <typename F>
Samples measure(const Budget& budget, int warmups, F&& once) {
  for (int i = 0; i < warmups && !stopped(); ++i) once();
  std::vector<double> nanos;
  const auto start = steadyNow();
  while (!stopped()) {
    nanos.push_back(once());
    const int done = int(nanos.size());
    if (done >= budget.maxIterations) break;
    const double elapsed = nanosSince(start) * 1e-9;
    if (done >= budget.minIterations && elapsed + elapsed / done > budget.seconds) break;
  }
  return Samples::from(std::move(nanos));
}

template <typename F>
Samples measure(const Budget& budget, F&& once) {
  return measure(budget, 0, std::forward<F>(once));
}

inline std::string withCommas(std::uint64_t v) {
  std::string digits = std::to_string(v);
  std::string out;
  for (std::size_t i = 0; i < digits.size(); ++i) {
    if (i != 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return out;
}

// How this benchmark binary was compiled: "optimized, NDEBUG defined (asserts off)".
// Functions defined in this header take the including binary's flags, which is the point.
inline std::string buildFlavour() {
#ifdef __OPTIMIZE__
  std::string flavour = "optimized";
#else
  std::string flavour = "NOT optimized";
#endif
#ifdef NDEBUG
  return flavour + ", NDEBUG defined (asserts off)";
#else
  return flavour + ", NDEBUG not defined (asserts on)";
#endif
}

inline std::string cpuModel() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("model name", 0) == 0) {
      auto colon = line.find(':');
      if (colon != std::string::npos) return line.substr(colon + 2);
    }
  }
  return "unknown";
}

}  // namespace nodewarden::bench
