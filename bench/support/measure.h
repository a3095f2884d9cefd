// bench/support: timing, a repeatable random source, samples, budgets and the stop flag — what
// every benchmark measures with.
#pragma once

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdint>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "base/time.h"

namespace nodewarden::bench {

// The monotonic clock every figure is timed with (not the daemon's injected Clock).
inline SteadyTime steadyNow() {
  return std::chrono::steady_clock::now();
}
inline double nanosSince(SteadyTime start) {
  return std::chrono::duration<double, std::nano>(steadyNow() - start).count();
}
// Keep the work producing a result from being optimised away.
template <typename T>
inline void doNotOptimize(const T& value) {
  __asm__ __volatile__("" : : "r"(&value) : "memory");
}
inline volatile std::uint64_t gSink = 0;

class Random {
 public:
  explicit Random(std::uint64_t seed) : engine_(seed) {}

  std::int64_t between(std::int64_t lo, std::int64_t hi) {  // uniform in [lo, hi]
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
    std::string out;
    while (out.size() < n) out += alphabet[engine_() % alphabet.size()];
    return out;
  }
  std::string hex(std::size_t n) { return fromAlphabet("0123456789abcdef", n); }
  // Drawn last part first, as GCC 12 evaluated the one expression this was (see generator.h).
  std::string uuid() {
    const std::string e = hex(12), d = hex(3), variant = fromAlphabet("89ab", 1), c = hex(3);
    const std::string b = hex(4);
    return hex(8) + "-" + b + "-4" + c + "-" + variant + d + "-" + e;
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
    const std::size_t n = nanos.size();
    return n == 0 ? 0 : n % 2 == 1 ? nanos[n / 2] : (nanos[n / 2 - 1] + nanos[n / 2]) / 2;
  }
  double min() const { return nanos.empty() ? 0 : nanos.front(); }
  double max() const { return nanos.empty() ? 0 : nanos.back(); }
  // Nearest rank, ceil(0.99 n): the maximum below 100 samples.
  double p99() const {
    return nanos.empty() ? 0 : nanos[std::max<std::size_t>((nanos.size() * 99 + 99) / 100, 1) - 1];
  }
};

struct Budget {
  int minIterations, maxIterations;
  double seconds;  // wall time, including untimed set-up and tear-down of each iteration
};

// SIGINT/SIGTERM only set gStop (process.h): every loop checks stopped() and unwinds.
inline volatile std::sig_atomic_t gStop = 0;
inline bool stopped() {
  return gStop != 0;
}

// Calls `once` (returning the nanoseconds it timed) `warmups` times untimed, then until the
// budget is spent (before an iteration that would overrun it, once minIterations are done).
template <typename F>
Samples measure(const Budget& budget, int warmups, F&& once) {
  for (int i = 0; i < warmups && !stopped(); ++i) once();
  std::vector<double> nanos;
  const auto start = steadyNow();
  for (int done = 1; !stopped(); ++done) {
    nanos.push_back(once());
    const double elapsed = nanosSince(start) * 1e-9;
    if (done >= budget.maxIterations ||
        (done >= budget.minIterations && elapsed + elapsed / done > budget.seconds))
      break;
  }
  return Samples::from(std::move(nanos));
}
template <typename F>
Samples measure(const Budget& budget, F&& once) {
  return measure(budget, 0, std::forward<F>(once));
}

// A measure() step that times `call` alone: its result is freed after the clock stops.
template <typename F>
auto timed(F call) {
  return [call]() mutable {
    const auto t0 = steadyNow();
    auto result = call();
    const double ns = nanosSince(t0);
    doNotOptimize(result);
    return ns;
  };
}

inline std::string withCommas(std::uint64_t v) {  // 1,234,567
  std::string out = std::to_string(v);
  for (int at = int(out.size()) - 3; at > 0; at -= 3) out.insert(std::size_t(at), ",");
  return out;
}

}  // namespace nodewarden::bench
