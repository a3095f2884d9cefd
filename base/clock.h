// The one place the node daemon reads the time: a Clock is handed to every unit that
// compares times (the eviction tracker, the loop, the routes), so a test can set it.
// Timers (Boost.Asio's steady_timer) still wait on the real monotonic clock; what a unit
// decides from a time always comes from its Clock.
#pragma once

#include <chrono>

#include "base/time.h"

namespace nodewarden {

class Clock {
 public:
  virtual ~Clock() = default;
  virtual SteadyTime now() const = 0;
};

// std::chrono::steady_clock.
class SteadyClock final : public Clock {
 public:
  SteadyTime now() const override { return std::chrono::steady_clock::now(); }
};

// The process-wide steady clock, for units built without one.
inline const Clock& steadyClock() {
  static const SteadyClock clock;
  return clock;
}

// A clock that moves only when told (tests).
class ManualClock final : public Clock {
 public:
  explicit ManualClock(SteadyTime start = SteadyTime{} + std::chrono::hours(1)) : now_(start) {}
  SteadyTime now() const override { return now_; }
  void advance(std::chrono::steady_clock::duration by) { now_ += by; }
  void set(SteadyTime to) { now_ = to; }

 private:
  SteadyTime now_;
};

}  // namespace nodewarden
