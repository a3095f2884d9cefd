#include "node/detectors.h"

#include <unistd.h>
#include <algorithm>
#include <cstdlib>

#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/steady_timer.hpp>

#include "cgroups/detect.h"
#include "cgroups/notify.h"
#include "cgroups/readers.h"
#include "server/log.h"

namespace nodewarden::node {

namespace asio = boost::asio;
using policy::Signal;

namespace {

std::string keyText(const policy::ThresholdKey& key) {
  return std::string(policy::toString(key.signal)) + (key.hard ? "/hard" : "/soft");
}

}  // namespace

// A kernel notification source, watched by the loop through a duplicate of its descriptor.
struct Detectors::Notifier {
  std::string name;
  Trigger trigger = Trigger::Psi;
  std::optional<policy::ThresholdKey> key;  // a v1 memory threshold's
  std::optional<cgroups::MemoryThresholdNotifier> threshold;
  std::optional<cgroups::PsiTrigger> psi;
  std::optional<cgroups::FileModifiedWatcher> events;  // v2 memory.events
  asio::posix::stream_descriptor descriptor;
  explicit Notifier(asio::io_context& io) : descriptor(io) {}
};

struct Detectors::LinePoller {
  bool node = false;  // the root cgroup (memory.available), else kubepods
  std::string name;
  std::optional<cgroups::MemoryLinePoller> poller;
  asio::steady_timer timer;
  std::string buffer;
  bool scheduled = false;
  explicit LinePoller(asio::io_context& io) : timer(io) {}
};

Detectors::Detectors(asio::io_context& io, const cgroups::PodCgroups& pods, const Clock& clock,
                     DetectorOptions options, Wake wake)
    : io_(io), pods_(pods), clock_(clock), options_(std::move(options)), wake_(std::move(wake)) {}

Detectors::~Detectors() {
  *alive_ = false;
  stop();
}

void Detectors::stop() {
  setMemoryHigh(0);
  stopped_ = true;
  notifiers_.clear();
  for (const auto& poller : pollers_) poller->timer.cancel();
  pollers_.clear();
}

void Detectors::reportOnce(const std::string& what, const std::string& error,
                           const char* fallback) {
  if (reported_.size() > 1000) reported_.clear();  // bounded; may log again later
  if (!reported_.insert(error).second) return;
  server::logEvent(server::LogLevel::Warn, "notification-unavailable",
                   {{"what", what}, {"error", error}, {"fallback", fallback}});
}

void Detectors::armPressure() {
  if (!options_.kernelWakeups) return;
  // A system-wide memory PSI trigger wakes a cycle as soon as tasks stall on memory. Without
  // CAP_SYS_RESOURCE the kernel only accepts windows in multiples of 2 s.
  const std::uint64_t window = cgroups::hasCapSysResource() ? 1'000'000 : 2'000'000;
  addPsi(cgroups::PsiTrigger::arm(options_.procRoot + "/pressure/memory",
                                  cgroups::PressureKind::Some, 100'000, window),
         "PSI trigger");

  // On cgroup v2 the kubepods cgroup itself reports: a PSI trigger on its memory.pressure
  // (stalls of the pods only, not of the whole machine) and memory.events (high, max, oom,
  // oom_kill: the kernel reclaiming at the limit or killing) through inotify.
  const cgroups::CgroupDir& kubepods = pods_.kubepodsMemory();
  if (!kubepods.valid() || kubepods.version() != cgroups::Version::V2) return;
  addPsi(
      cgroups::PsiTrigger::armAt(kubepods, "memory", cgroups::PressureKind::Some, 100'000, window),
      "PSI trigger on kubepods");
  auto events = cgroups::FileModifiedWatcher::watch(kubepods.path() + "/memory.events");
  if (!events) {
    reportOnce("memory.events watch", events.error().message, "polling");
    return;
  }
  auto entry = std::make_shared<Notifier>(io_);
  entry->name = "inotify " + events->path();
  entry->trigger = Trigger::MemoryEvents;
  entry->events = std::move(events).value();
  entry->descriptor.assign(::dup(entry->events->fd()));
  notifiers_.push_back(entry);
  watch(entry);
}

void Detectors::addPsi(Result<cgroups::PsiTrigger> trigger, const char* what) {
  if (!trigger) {
    reportOnce(what, trigger.error().message, "polling");
    return;
  }
  auto entry = std::make_shared<Notifier>(io_);
  entry->name = "PSI " + trigger->path() + " \"" + trigger->trigger() + "\"";
  entry->trigger = Trigger::Psi;
  entry->psi = std::move(trigger).value();
  entry->descriptor.assign(::dup(entry->psi->fd()));
  notifiers_.push_back(entry);
  watch(entry);
}

void Detectors::follow(const policy::EvictionDecision& decision, const cgroups::NodeReading& node,
                       std::chrono::milliseconds pollCeiling) {
  if (stopped_) return;
  const cgroups::Hierarchy& h = pods_.hierarchy();
  const bool eventfds = h.memoryVersion == cgroups::Version::V1 && options_.kernelWakeups;
  if (h.memoryVersion != cgroups::Version::V1 && !v2NoticeLogged_) {
    v2NoticeLogged_ = true;
    server::logEvent(
        server::LogLevel::Info, "notification-unavailable",
        {{"what", "memory thresholds"},
         {"error", "cgroup v2 has no cgroup.event_control"},
         {"fallback", "PSI triggers, memory.events and adaptive polling of memory.current"}});
  }
  std::vector<std::uint64_t> nodeLines;
  std::vector<std::uint64_t> kubepodsLines;
  std::uint64_t highLine = 0;
  for (const policy::SignalStatus& status : decision.signals) {
    const bool onRoot = status.key.signal == Signal::MemoryAvailable;
    if (!onRoot && status.key.signal != Signal::AllocatableMemoryAvailable) continue;
    if (status.threshold <= 0 || status.capacity <= 0) continue;
    const cgroups::CgroupDir* dir = onRoot ? &pods_.rootMemory() : &pods_.kubepodsMemory();
    const std::optional<cgroups::MemoryReading>& memory = onRoot ? node.root : node.kubepods;
    if (!dir->valid() || !memory) continue;
    const std::int64_t usageLine =
        status.capacity - status.threshold + std::int64_t(memory->inactiveFile);
    if (usageLine <= 0) continue;
    (onRoot ? nodeLines : kubepodsLines).push_back(std::uint64_t(usageLine));
    // memory.high throttles past it: only where an eviction is due at once (a hard threshold;
    // a soft one waits out its grace period first).
    if (!onRoot && status.key.hard && (highLine == 0 || std::uint64_t(usageLine) < highLine)) {
      highLine = std::uint64_t(usageLine);
    }
    if (!eventfds) continue;
    auto armed = armedThresholds_.find(status.key);
    // Re-arm only when the point moved by more than 1 MiB (inactive_file drifts all the time),
    // or, far below it, by more than 1/64 of the way from the usage to it: a host's page cache
    // moves the root's point by megabytes a second, and each arming costs the loop an RCU
    // grace period in the kernel (~15 ms blocked). Near the point it stays within 1 MiB; the
    // poller places its lines exactly every cycle.
    const std::int64_t slack =
        std::max<std::int64_t>(1 << 20, (usageLine - std::int64_t(memory->usage)) / 64);
    if (armed != armedThresholds_.end() &&
        std::llabs(std::int64_t(armed->second) - usageLine) < slack) {
      continue;
    }
    auto notifier = cgroups::MemoryThresholdNotifier::arm(*dir, std::uint64_t(usageLine));
    if (!notifier) {
      reportOnce("memory threshold", notifier.error().message, "polling");
      continue;
    }
    auto entry = std::make_shared<Notifier>(io_);
    entry->name = "memory threshold " + keyText(status.key) + " at " + std::to_string(usageLine) +
                  " bytes on " + dir->path();
    entry->trigger = Trigger::MemoryThreshold;
    entry->key = status.key;
    entry->threshold = std::move(notifier).value();
    entry->descriptor.assign(::dup(entry->threshold->fd()));
    // Replace the old notifier for this threshold; arming first means no crossing is missed.
    std::erase_if(notifiers_,
                  [&](const std::shared_ptr<Notifier>& n) { return n->key == status.key; });
    notifiers_.push_back(entry);
    armedThresholds_[status.key] = std::uint64_t(usageLine);
    watch(entry);
    // v1 only reports crossings: usage already past the new point will never notify.
    if (memory->usage >= std::uint64_t(usageLine)) wake_(Trigger::MemoryThreshold, std::nullopt);
    server::logEvent(server::LogLevel::Debug, "notification-armed", {{"what", entry->name}});
  }
  if (options_.memoryHighEdge && options_.kernelWakeups &&
      pods_.kubepodsMemory().version() == cgroups::Version::V2) {
    setMemoryHigh(highLine);
  }
  setPollLines(true, std::move(nodeLines), pollCeiling,
               node.root ? std::optional(node.root->usage) : std::nullopt);
  setPollLines(false, std::move(kubepodsLines), pollCeiling,
               node.kubepods ? std::optional(node.kubepods->usage) : std::nullopt);
}

void Detectors::setMemoryHigh(std::uint64_t line) {
  if (line == memoryHighSet_) return;
  // Re-set only when the point moved by more than 1 MiB (inactive_file drifts all the time).
  if (line != 0 && memoryHighSet_ != 0 &&
      std::llabs(std::int64_t(line) - std::int64_t(memoryHighSet_)) < (1 << 20)) {
    return;
  }
  const cgroups::CgroupDir& kubepods = pods_.kubepodsMemory();
  if (!kubepods.valid()) return;
  if (!memoryHighFound_) {
    if (line == 0) return;
    auto found = kubepods.readOnce("memory.high");
    if (!found) {
      reportOnce("memory.high edge", found.error().message, "memory.events and polling");
      return;
    }
    std::string value = std::move(found).value();
    while (!value.empty() && (value.back() == '\n' || value.back() == ' ')) value.pop_back();
    memoryHighFound_ = std::move(value);
  }
  const std::string text = line == 0 ? *memoryHighFound_ : std::to_string(line);
  if (auto written = cgroups::writeFileAt(kubepods.fd(), "memory.high", text); !written) {
    reportOnce("memory.high edge", written.error().message, "memory.events and polling");
    return;
  }
  memoryHighSet_ = line;
  server::logEvent(server::LogLevel::Debug,
                   line == 0 ? "notification-disarmed" : "notification-armed",
                   {{"what", "memory.high " + text + " on " + kubepods.path()}});
}

void Detectors::setPollLines(bool node, std::vector<std::uint64_t> lines,
                             std::chrono::milliseconds ceiling,
                             std::optional<std::uint64_t> usage) {
  auto found = std::find_if(pollers_.begin(), pollers_.end(),
                            [&](const auto& poller) { return poller->node == node; });
  if (lines.empty()) {
    if (found != pollers_.end()) {
      (*found)->timer.cancel();
      pollers_.erase(found);
    }
    return;
  }
  const cgroups::CgroupDir& dir = node ? pods_.rootMemory() : pods_.kubepodsMemory();
  if (!dir.valid()) return;
  std::shared_ptr<LinePoller> poller;
  if (found != pollers_.end()) {
    poller = *found;
  } else {
    poller = std::make_shared<LinePoller>(io_);
    poller->node = node;
    poller->name =
        std::string("poll ") +
        (dir.version() == cgroups::Version::V2 ? "memory.current" : "memory.usage_in_bytes") +
        " of " + dir.path();
    LinePoller* raw = poller.get();
    // The directory is looked up at each poll: PodCgroups may reopen it.
    poller->poller.emplace(
        [this, raw]() -> Result<std::uint64_t> {
          const cgroups::CgroupDir& d = raw->node ? pods_.rootMemory() : pods_.kubepodsMemory();
          if (!d.valid()) return Error{"the cgroup is not open"};
          return cgroups::readMemoryUsage(d, raw->buffer);
        },
        cgroups::PollTuning{});
    pollers_.push_back(poller);
  }
  cgroups::PollTuning tuning;
  tuning.ceiling = ceiling;
  poller->poller->setTuning(tuning);
  poller->poller->setLines(std::move(lines));
  // The cycle just read the file, below every line (so no crossing to report: the cycle saw
  // that usage itself): that was the poll. Past a line the polls go on as they were.
  const std::vector<std::uint64_t>& placed = poller->poller->lines();
  if (usage && !placed.empty() && *usage < placed.front()) {
    const cgroups::MemoryLinePoller::Sample sample = poller->poller->observe(*usage, clock_.now());
    // At the ceiling the next cycle, due within one, reads it before a poll would: the poll
    // waits half an interval more, and only runs if no cycle came.
    const std::chrono::nanoseconds delay =
        sample.next < ceiling ? std::chrono::nanoseconds(sample.next) : ceiling + ceiling / 2;
    schedulePoll(poller, delay);
    return;
  }
  if (!poller->scheduled) schedulePoll(poller, std::chrono::nanoseconds(0));
}

void Detectors::schedulePoll(const std::shared_ptr<LinePoller>& poller,
                             std::chrono::nanoseconds delay) {
  poller->scheduled = true;
  poller->timer.expires_after(delay);
  std::weak_ptr<LinePoller> weak = poller;
  poller->timer.async_wait([this, alive = alive_, weak](const boost::system::error_code& ec) {
    auto self = weak.lock();
    if (ec || !*alive || stopped_ || !self) return;
    self->scheduled = false;
    auto sample = self->poller->poll(clock_.now());
    if (!sample) {
      // Stopped until the next cycle sets its lines again.
      reportOnce(self->name, sample.error().message, "timer");
      return;
    }
    if (sample->crossed) wake_(Trigger::MemoryPoll, sample->crossedAfter);
    schedulePoll(self, sample->next);
  });
}

void Detectors::watch(const std::shared_ptr<Notifier>& notifier) {
  const auto wait = notifier->threshold || notifier->events
                        ? asio::posix::stream_descriptor::wait_read
                        : asio::posix::stream_descriptor::wait_error;
  std::weak_ptr<Notifier> weak = notifier;
  notifier->descriptor.async_wait(
      wait, [this, alive = alive_, weak](const boost::system::error_code& ec) {
        auto self = weak.lock();
        if (ec || !*alive || stopped_ || !self) return;
        if (self->threshold) {
          (void)self->threshold->consume();
        } else if (self->psi) {
          auto event = self->psi->check();
          if (event && *event == cgroups::PsiTrigger::Event::Gone) return;  // dropped
        } else if (self->events) {
          if (!self->events->consume()) return;  // the watch was dropped (cgroup gone)
        }
        wake_(self->trigger, clock_.now());
        watch(self);
      });
}

std::vector<std::string> Detectors::armed() const {
  std::vector<std::string> names;
  for (const auto& notifier : notifiers_) names.push_back(notifier->name);
  for (const auto& poller : pollers_) names.push_back(poller->name);
  return names;
}

}  // namespace nodewarden::node
