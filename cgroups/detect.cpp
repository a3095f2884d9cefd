#include "cgroups/detect.h"

#include <algorithm>
#include <cmath>
#include <utility>

namespace nodewarden::cgroups {

Duration pollDelay(std::int64_t headroomBytes, double growthBytesPerSecond,
                   const PollTuning& tuning) {
  if (headroomBytes <= 0) return tuning.floor;
  const double rate = std::max(growthBytesPerSecond, tuning.assumedBytesPerSecond);
  if (!(rate > 0) || !(tuning.safety > 0)) return tuning.ceiling;
  const double seconds = double(headroomBytes) / rate / tuning.safety;
  const double ceiling = std::chrono::duration<double>(tuning.ceiling).count();
  if (!(seconds < ceiling)) return std::max(tuning.floor, tuning.ceiling);
  const Duration delay(static_cast<std::int64_t>(seconds * 1e9));
  return std::clamp(delay, tuning.floor, std::max(tuning.floor, tuning.ceiling));
}

MemoryLinePoller::MemoryLinePoller(ReadUsage read, PollTuning tuning)
    : read_(std::move(read)), tuning_(tuning) {}

void MemoryLinePoller::setLines(std::vector<std::uint64_t> lines) {
  std::sort(lines.begin(), lines.end());
  lines.erase(std::unique(lines.begin(), lines.end()), lines.end());
  if (lines != lines_) fresh_ = true;
  lines_ = std::move(lines);
}

Result<MemoryLinePoller::Sample> MemoryLinePoller::poll(SteadyTime now) {
  auto usage = read_();
  if (!usage) return usage.error();
  return observe(*usage, now);
}

MemoryLinePoller::Sample MemoryLinePoller::observe(std::uint64_t usage, SteadyTime now) {
  Sample sample;
  sample.usage = usage;

  // Growth: fast attack (a burst counts at once), slow decay (one quiet poll does not make
  // the next period long).
  if (lastUsage_ && now > lastAt_) {
    const double seconds = std::chrono::duration<double>(now - lastAt_).count();
    const double instant = std::max(0.0, (double(usage) - double(*lastUsage_)) / seconds);
    growth_ = instant > growth_ ? instant : 0.8 * growth_ + 0.2 * instant;
  }
  sample.growthBytesPerSecond = growth_;

  const bool sinceStart = fresh_ || !lastUsage_;
  const std::uint64_t before = sinceStart ? 0 : *lastUsage_;
  for (std::uint64_t line : lines_) {
    const bool pastNow = usage >= line;
    const bool pastBefore = !sinceStart && before >= line;
    if (pastNow && !pastBefore) {
      sample.crossed = true;
      break;
    }
  }
  sample.crossedAfter = lastUsage_ && !fresh_ ? lastAt_ : now;

  // The next line above today's usage sets the pace; past every line the agent is acting
  // on it already, and a poll every few floors notices a fall and a new rise.
  auto next = std::upper_bound(lines_.begin(), lines_.end(), usage);
  if (lines_.empty()) {
    sample.next = tuning_.ceiling;
  } else if (next == lines_.end()) {
    sample.next = std::min(std::max(tuning_.ceiling, tuning_.floor), 10 * tuning_.floor);
  } else {
    sample.next = pollDelay(std::int64_t(*next - usage), growth_, tuning_);
  }

  lastUsage_ = usage;
  lastAt_ = now;
  fresh_ = false;
  return sample;
}

}  // namespace nodewarden::cgroups
