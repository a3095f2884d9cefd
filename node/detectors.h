// Observe, part one: the detectors that wake the loop before the next housekeeping tick.
//   - PSI triggers on the node's memory pressure and, on cgroup v2, on kubepods';
//   - inotify on kubepods' memory.events (v2: high, max, oom, oom_kill);
//   - v1 memory threshold eventfds at the usage where each memory threshold is met;
//   - opt-in on v2 (memoryHighEdge): kubepods' memory.high set at the usage where the
//     allocatable memory threshold is met, so that memory.events' "high" is the edge;
//   - the adaptive poller of cgroups/detect.h on the same usage lines (the only fast
//     detector for a usage line on v2, and a second opinion on v1).
// Each wake-up calls `wake` with what woke it and, when the kernel dates it, when. The loop
// owns one Detectors and tells it, after each cycle, where the lines now are (follow()), from
// the figures that cycle read: the detectors read nothing twice.
//
// Threading: the io_context's thread only.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <boost/asio/io_context.hpp>

#include "base/clock.h"
#include "cgroups/notify.h"
#include "cgroups/pods.h"
#include "cgroups/readers.h"
#include "node/trigger.h"
#include "policy/eviction.h"

namespace nodewarden::node {

struct DetectorOptions {
  std::string procRoot = "/proc";  // for /proc/pressure/memory
  // false leaves out the kernel's own wake-ups (v1 threshold eventfds, PSI triggers,
  // memory.events) and keeps the adaptive memory poller alone.
  bool kernelWakeups = true;
  // cgroup v2, with kernelWakeups: sets kubepods' memory.high at the usage where the hard
  // allocatableMemory.available threshold is met (capacity − threshold + inactive_file), so
  // that the kernel's first charge past it raises memory.events' "high" and wakes the loop
  // at the crossing, as a v1 threshold eventfd does. Above memory.high the kernel reclaims
  // and throttles kubepods' allocations: only past the line, where an eviction is due. The
  // value found is written back by stop() and when the threshold goes away.
  bool memoryHighEdge = false;
};

class Detectors {
 public:
  // `notifiedAt`: when the kernel (or the poller) dates the crossing; nullopt when it does not.
  using Wake = std::function<void(Trigger, std::optional<SteadyTime> notifiedAt)>;

  Detectors(boost::asio::io_context& io, const cgroups::PodCgroups& pods, const Clock& clock,
            DetectorOptions options, Wake wake);
  ~Detectors();
  Detectors(const Detectors&) = delete;
  Detectors& operator=(const Detectors&) = delete;

  // Arms the PSI triggers and, on v2, the memory.events watch. Once, at start.
  void armPressure();
  // After a cycle: arms v1 thresholds and sets the poller's lines at the usage where each
  // memory threshold of `decision` is met (capacity − threshold + inactive_file, as the
  // kubelet's memory threshold notifier computes it), with the usage and inactive_file the
  // cycle read (`node`: the root's for memory.available, kubepods' for the allocatable one).
  // `pollCeiling`: the longest the poller waits between two reads (the housekeeping interval).
  // The cycle's own reading of a usage below every line counts as the poller's read: the next
  // poll is timed from it, and where that is at the ceiling the next cycle reads first — a
  // quiet node is read once an interval, by the cycle, and not woken again to poll.
  void follow(const policy::EvictionDecision& decision, const cgroups::NodeReading& node,
              std::chrono::milliseconds pollCeiling);
  // The policy changed: v1 thresholds are re-armed at the next follow().
  void forgetThresholds() { armedThresholds_.clear(); }
  void stop();

  // What is armed, for logs and tests ("memory threshold …", "PSI …", "poll …").
  std::vector<std::string> armed() const;
  std::size_t count() const { return notifiers_.size() + pollers_.size(); }

 private:
  struct Notifier;
  struct LinePoller;
  void addPsi(Result<cgroups::PsiTrigger> trigger, const char* what);
  void watch(const std::shared_ptr<Notifier>& notifier);
  // memoryHighEdge: kubepods' memory.high at `line` (0: back to the value found).
  void setMemoryHigh(std::uint64_t line);
  // `usage`: what the cycle read of the poller's file (nullopt: nothing).
  void setPollLines(bool node, std::vector<std::uint64_t> lines, std::chrono::milliseconds ceiling,
                    std::optional<std::uint64_t> usage);
  void schedulePoll(const std::shared_ptr<LinePoller>& poller, std::chrono::nanoseconds delay);
  // Logs a problem once per text (bounded).
  void reportOnce(const std::string& what, const std::string& error, const char* fallback);

  boost::asio::io_context& io_;
  const cgroups::PodCgroups& pods_;
  const Clock& clock_;
  DetectorOptions options_;
  Wake wake_;
  std::vector<std::shared_ptr<Notifier>> notifiers_;
  std::vector<std::shared_ptr<LinePoller>> pollers_;
  std::map<policy::ThresholdKey, std::uint64_t> armedThresholds_;  // usage armed per threshold
  std::set<std::string> reported_;
  bool v2NoticeLogged_ = false;
  std::optional<std::string> memoryHighFound_;  // kubepods' memory.high before the first set
  std::uint64_t memoryHighSet_ = 0;             // what is set now (0: nothing)
  bool stopped_ = false;
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

}  // namespace nodewarden::node
