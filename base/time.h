// The time types every room names: a point on the monotonic time line and a span of it.
// Pure: naming a type reads no clock. base/clock.h is the one place the daemon reads the time
// (the Clock interface); policy/ takes its "now" as a SteadyTime argument.
#pragma once

#include <chrono>

namespace nodewarden {

// A point on the monotonic time line (std::chrono::steady_clock's).
using SteadyTime = std::chrono::steady_clock::time_point;

// A span of time, in nanoseconds: grace periods, poll delays, timeouts.
using Duration = std::chrono::nanoseconds;

}  // namespace nodewarden
