// Durations and timestamps as Kubernetes writes them. Pure: nothing here reads a clock.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>

#include "base/result.h"
#include "base/time.h"

namespace nodewarden::policy {

// Durations are nodewarden::Duration and the decision core's "now" a nodewarden::SteadyTime
// (base/time.h): any monotonic time line chosen by the caller. Time is an input to policy/,
// never read inside it.

// Wall-clock instants from Kubernetes objects (startTime, creationTimestamp), in microseconds
// since the Unix epoch.
using WallMicros = std::int64_t;

// A Go duration string as in KubeletConfiguration: "30s", "1m30s", "1.5h", "300ms", "-1s".
// Units: ns, us, µs, ms, s, m, h. A bare "0" is allowed; any other number needs a unit.
Result<Duration> parseGoDuration(std::string_view text);

// Prints as Go's time.Duration.String() does: "30s", "5m0s", "1h30m0s", "1.5s", "0s".
std::string formatGoDuration(Duration d);

// An RFC 3339 timestamp ("2024-05-01T10:00:00Z", "2024-05-01T12:00:00.123+02:00").
Result<WallMicros> parseRfc3339(std::string_view text);

}  // namespace nodewarden::policy
