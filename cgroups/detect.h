// Polling a memory cgroup's usage against the usage lines where thresholds are met: the fast
// detector where the kernel has no memory threshold eventfd (cgroup v2), and a cheap second
// opinion beside it on v1.
//
// One poll is one pread of memory.current (v2) or memory.usage_in_bytes (v1), about a
// microsecond. The period shrinks as usage nears the closest line and as it grows faster:
// the time to reach the line at the current rate, divided by a safety factor, never below a
// floor of a few milliseconds and never above the housekeeping interval. A pod allocating at
// 1–2 GiB/s crosses a 300 MiB head room in 150–300 ms; at 1 s polling the kernel's OOM
// killer wins that race, at this period the agent does.
//
// No clock is read here: every call takes `now`, so tests drive it with made-up times and a
// fake reader (docs/conventions.md §2).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <vector>

#include "base/result.h"
#include "base/time.h"

namespace nodewarden::cgroups {

struct PollTuning {
  Duration floor = std::chrono::milliseconds(2);
  Duration ceiling = std::chrono::seconds(1);  // the housekeeping interval
  // Polls before the line is reached at the current rate.
  double safety = 4.0;
  // The growth assumed when the measured one is lower: a process can start allocating at any
  // moment, at about this rate on a real node.
  double assumedBytesPerSecond = 1024.0 * 1024 * 1024;
};

// The delay until the next poll with `headroomBytes` left before the closest line (≤ 0: at or
// past it) at `growthBytesPerSecond`.
Duration pollDelay(std::int64_t headroomBytes, double growthBytesPerSecond,
                   const PollTuning& tuning);

class MemoryLinePoller {
 public:
  using ReadUsage = std::function<Result<std::uint64_t>()>;

  MemoryLinePoller(ReadUsage read, PollTuning tuning);

  // The usages at which thresholds are met (any order; empty: nothing to watch).
  void setLines(std::vector<std::uint64_t> lines);
  const std::vector<std::uint64_t>& lines() const { return lines_; }
  void setTuning(const PollTuning& tuning) { tuning_ = tuning; }

  struct Sample {
    std::uint64_t usage = 0;
    // A line was crossed upwards since the previous poll (or usage is past a line that
    // was just set): the moment to run a cycle. Reported once per crossing.
    bool crossed = false;
    // When the crossing happened at the latest: the previous poll below the line is the
    // earliest, this poll the latest; the earliest is reported, so latency figures built on
    // it are upper bounds.
    SteadyTime crossedAfter{};
    Duration next{};  // when to poll again
    double growthBytesPerSecond = 0;
  };
  Result<Sample> poll(SteadyTime now);
  // A poll of `usage`, read elsewhere at `now` (the agent's cycle reads the same file): the
  // growth counts it and the next poll is timed from it, as after poll().
  Sample observe(std::uint64_t usage, SteadyTime now);

 private:
  ReadUsage read_;
  PollTuning tuning_;
  std::vector<std::uint64_t> lines_;  // ascending
  std::optional<std::uint64_t> lastUsage_;
  SteadyTime lastAt_{};
  double growth_ = 0;   // smoothed bytes per second, ≥ 0
  bool fresh_ = false;  // lines changed: a usage already past one counts as a crossing
};

}  // namespace nodewarden::cgroups
