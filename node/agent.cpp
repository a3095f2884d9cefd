#include "node/agent.h"

#include <sched.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <thread>

#include <boost/asio/post.hpp>

#include "node/service_notify.h"
#include "node/snapshot_builder.h"
#include "policy/files.h"
#include "server/log.h"

namespace nodewarden::node {

namespace asio = boost::asio;
using namespace std::chrono_literals;
using policy::Signal;

namespace {

double millis(std::chrono::steady_clock::duration d) {
  return std::chrono::duration<double, std::milli>(d).count();
}

// A threshold is met or close: the next cycles read every pod. Close is within half the
// threshold (or the minimum reclaim, if larger) above it.
bool pressureNear(const policy::EvictionDecision& decision) {
  for (const policy::SignalStatus& status : decision.signals) {
    if (status.met) return true;
    const std::int64_t margin = std::max(status.threshold / 2, status.minReclaim);
    if (status.available < status.threshold + margin) return true;
  }
  return false;
}

bool anyMet(const policy::EvictionDecision& decision) {
  return std::any_of(decision.signals.begin(), decision.signals.end(),
                     [](const policy::SignalStatus& status) { return status.met; });
}

const policy::SignalStatus* statusOf(const policy::EvictionDecision& decision,
                                     const policy::ThresholdKey& key) {
  const policy::SignalStatus* found = nullptr;
  for (const policy::SignalStatus& s : decision.signals) {
    if (s.key == key) found = &s;
  }
  return found;
}

// AgentOptions::loopNice for the calling thread alone (Linux keeps a niceness per thread).
// Going below the current value needs CAP_SYS_NICE: refused, the agent runs on as it is.
void applyLoopNice(int nice) {
  const auto self = static_cast<id_t>(::gettid());
  if (::setpriority(PRIO_PROCESS, self, nice) == 0) {
    server::logEvent(server::LogLevel::Info, "loop-priority",
                     {{"nice", static_cast<std::int64_t>(nice)}});
    return;
  }
  const int error = errno;
  errno = 0;
  const int now = ::getpriority(PRIO_PROCESS, self);
  server::logEvent(server::LogLevel::Warn, "loop-priority",
                   {{"wanted", static_cast<std::int64_t>(nice)},
                    {"nice", static_cast<std::int64_t>(errno == 0 ? now : 0)},
                    {"error", std::string("setpriority: ") + std::strerror(error)},
                    {"fix",
                     "grant CAP_SYS_NICE, or set the niceness from outside (the "
                     "unit's Nice=)"}});
}

// AgentOptions::loopRealtime for the calling thread alone: SCHED_FIFO at `priority`, reset on
// fork so that no thread or process started from the loop inherits it. Refused: said once,
// and the thread keeps its policy and niceness (applyLoopNice's, when given).
void applyLoopRealtime(int priority) {
  const auto self = static_cast<pid_t>(::gettid());
  sched_param param{};
  param.sched_priority = priority;
  if (::sched_setscheduler(self, SCHED_FIFO | SCHED_RESET_ON_FORK, &param) == 0) {
    server::logEvent(
        server::LogLevel::Info, "loop-realtime",
        {{"policy", std::string("SCHED_FIFO")}, {"priority", static_cast<std::int64_t>(priority)}});
    return;
  }
  const int error = errno;
  server::logEvent(
      server::LogLevel::Warn, "loop-realtime",
      {{"wanted", static_cast<std::int64_t>(priority)},
       {"error", std::string("sched_setscheduler SCHED_FIFO: ") + std::strerror(error)},
       {"fix",
        "grant CAP_SYS_NICE (the unit: no RestrictRealtime=; cgroup v1 with "
        "realtime group scheduling: cpu.rt_runtime_us for the agent's cgroup); "
        "the loop runs on at its niceness"}});
}

}  // namespace

ActuatorFactory cgroupActuator() {
  return [](asio::io_context& io, cgroups::PodCgroups& pods,
            const Clock& clock) -> std::unique_ptr<Actuator> {
    return std::make_unique<CgroupActuator>(io, pods, clock);
  };
}

ActuatorFactory dryRunActuator() {
  return [](asio::io_context&, cgroups::PodCgroups&, const Clock&) -> std::unique_ptr<Actuator> {
    return std::make_unique<DryRunActuator>();
  };
}

Agent::Agent(asio::io_context& io, AgentOptions options, policy::Policy policy,
             cgroups::PodCgroups pods, std::unique_ptr<PodSource> source,
             const ActuatorFactory& makeActuator, const Clock& clock)
    : io_(io),
      clock_(clock),
      options_(std::move(options)),
      policy_(std::move(policy)),
      pods_(std::move(pods)),
      source_(std::move(source)),
      actuator_(makeActuator(io, pods_, clock)),
      detectors_(io, pods_, clock,
                 DetectorOptions{options_.scan.procRoot, options_.kernelWakeups,
                                 // Throttling pods is acting: --dry-run never writes memory.high.
                                 options_.memoryHighEdge && !options_.dryRun},
                 [this](Trigger trigger, std::optional<SteadyTime> at) { onWake(trigger, at); }),
      timer_(io),
      graceTimer_(io),
      followUpTimer_(io),
      cgroupChanges_(io),
      sourceChanges_(io),
      maintainTimer_(io) {
  if (options_.journalPath) journal_.emplace(*options_.journalPath);
  if (options_.recorder) recorder_ = std::make_unique<Recorder>(*options_.recorder, pods_, clock_);
}

Agent::~Agent() {
  *alive_ = false;
  stop();
}

std::chrono::milliseconds Agent::interval() const {
  if (options_.intervalOverride) return *options_.intervalOverride;
  return std::max(
      std::chrono::duration_cast<std::chrono::milliseconds>(policy_.housekeepingInterval), 10ms);
}

bool Agent::healthy() const {
  return ready_ && !stopped_ && clock_.now() - lastCycleAt_ <= 3 * interval();
}

std::optional<SteadyTime> Agent::lastCycleAt() const {
  if (!ready_) return std::nullopt;
  return lastCycleAt_;
}

Result<void> Agent::start(const std::string& listen) {
  if (options_.policyPath) (void)policyFileChanged();  // remember the file as loaded
  server::logEvent(server::LogLevel::Info, "agent-start",
                   {{"node", options_.nodeName},
                    {"source", source_->describe()},
                    {"kubepods", pods_.hierarchy().memory + "/" + pods_.kubepods()},
                    {"cgroups", cgroups::toString(pods_.hierarchy().mode)},
                    {"actuator", actuator_->name()},
                    {"interval_ms", static_cast<std::int64_t>(interval().count())},
                    {"listen", listen}});
  if (options_.memoryHighEdge && options_.dryRun) {
    server::logEvent(
        server::LogLevel::Warn, "memory-high-edge",
        {{"error", "--dry-run acts on nothing: kubepods' memory.high is left as it is"},
         {"fallback", "memory.events and polling"}});
  }
  if (recorder_) {
    if (auto opened = recorder_->open(); !opened) {
      server::logEvent(server::LogLevel::Warn, "recorder", {{"error", opened.error().message}});
    }
  }
  if (options_.loopNice) applyLoopNice(*options_.loopNice);
  if (options_.loopRealtime) applyLoopRealtime(*options_.loopRealtime);
  if (pods_.hierarchy().memoryVersion == cgroups::Version::V1) {
    // The kubelet's own words (CgroupV1MaintenanceModeWarning, since 1.31); from 1.35 the
    // kubelet refuses v1 unless failCgroupV1 is false. nodewarden keeps working on v1.
    server::logEvent(
        server::LogLevel::Warn, "cgroup-v1",
        {{"message", "cgroup v1 support is in maintenance mode, please migrate to cgroup v2"},
         {"cgroups", cgroups::toString(pods_.hierarchy().mode)}});
  }
  resumeJournal();
  cycle(Trigger::Start);
  if (options_.notifications) detectors_.armPressure();
  metrics_.kernelNotifications.set({}, double(detectors_.count()));
  std::string armed;
  for (const std::string& name : detectors_.armed()) armed += (armed.empty() ? "" : "; ") + name;
  server::logEvent(server::LogLevel::Info, "detectors",
                   {{"armed", armed.empty() ? std::string("none (timer only)") : armed},
                    {"interval_ms", static_cast<std::int64_t>(interval().count())}});
  nextTick_ = clock_.now();
  scheduleTimer();
  return {};
}

void Agent::stop() {
  if (stopped_) return;
  stopped_ = true;
  refresh_.reset();
  timer_.cancel();
  graceTimer_.cancel();
  followUpTimer_.cancel();
  maintainTimer_.cancel();
  boost::system::error_code ignored;
  cgroupChanges_.close(ignored);
  sourceChanges_.close(ignored);
  detectors_.stop();
  if (recorder_) recorder_->stop(std::chrono::seconds(1));
  notifySystemd("STOPPING=1");
}

// ---- the loop ----

void Agent::watchPodChanges() {
  if (stopped_) return;
  boost::system::error_code ignored;
  if (pods_.changeFd() != watchedCgroupFd_) {  // none yet, or a new kubepods directory
    cgroupChanges_.close(ignored);
    cgroupWaiting_ = false;
    watchedCgroupFd_ = pods_.changeFd();
    if (watchedCgroupFd_ >= 0) cgroupChanges_.assign(::dup(watchedCgroupFd_), ignored);
  }
  if (!sourceChanges_.is_open() && source_->changeFd() >= 0) {
    sourceChanges_.assign(::dup(source_->changeFd()), ignored);
  }
  if (cgroupChanges_.is_open() && !cgroupWaiting_) waitForChanges(cgroupChanges_, cgroupWaiting_);
  if (sourceChanges_.is_open() && !sourceWaiting_) waitForChanges(sourceChanges_, sourceWaiting_);
}

void Agent::waitForChanges(asio::posix::stream_descriptor& descriptor, bool& waiting) {
  waiting = true;
  descriptor.async_wait(
      asio::posix::stream_descriptor::wait_read,
      [this, alive = alive_, &waiting](const boost::system::error_code& ec) {
        if (!*alive) return;
        waiting = false;
        if (ec || stopped_ || maintainPending_) return;
        // Not sooner than kMaintainEvery: a burst of pods is taken in one go.
        maintainPending_ = true;
        maintainTimer_.expires_after(kMaintainEvery);
        maintainTimer_.async_wait([this, alive](const boost::system::error_code& e) {
          if (!e && *alive && !stopped_) maintain();
        });
      });
}

// What a cycle does before deciding, alone: the pod set and the view brought up to date.
void Agent::maintain() {
  maintainPending_ = false;
  const SteadyTime now = clock_.now();
  observePods(Trigger::Manual, now);
  if (viewStale_) rebuildView();
  readNewPods(now);
  watchPodChanges();  // the descriptor that fired waits again
}

void Agent::scheduleTimer() {
  if (stopped_) return;
  // Re-arm from the previous expiry so the cadence does not drift; after a stall, start afresh.
  const auto now = clock_.now();
  nextTick_ += interval();
  if (nextTick_ < now) nextTick_ = now + interval();
  timer_.expires_after(nextTick_ - now);
  timer_.async_wait([this, alive = alive_](const boost::system::error_code& ec) {
    if (ec || !*alive || stopped_) return;
    cycle(Trigger::Timer);
    scheduleTimer();
  });
}

void Agent::scheduleGraceTimer(const policy::EvictionDecision& decision, SteadyTime now) {
  // A soft threshold acts when its grace period ends, not at the next tick after that.
  std::optional<SteadyTime> due;
  for (const policy::SignalStatus& status : decision.signals) {
    if (status.key.hard || !status.met || status.actionable) continue;
    for (const policy::Threshold& threshold : policy_.thresholds) {
      if (threshold.signal != status.key.signal || threshold.hard()) continue;
      const SteadyTime when = now + (threshold.gracePeriod - status.metFor);
      if (!due || when < *due) due = when;
    }
  }
  if (!due) return;
  graceTimer_.expires_after(*due - now + 1ms);
  graceTimer_.async_wait([this, alive = alive_](const boost::system::error_code& ec) {
    if (!ec && *alive && !stopped_) requestCycle(Trigger::GraceElapsed);
  });
}

void Agent::requestCycle(Trigger trigger) {
  if (cyclePosted_ || stopped_) return;
  cyclePosted_ = true;
  asio::post(io_, [this, alive = alive_, trigger] {
    if (*alive && !stopped_) cycle(trigger);
  });
}

void Agent::onWake(Trigger trigger, std::optional<SteadyTime> notifiedAt) {
  // The earliest date a detector gives since the last cycle is the crossing's.
  if (notifiedAt) notifiedAt_ = notifiedAt_ ? std::min(*notifiedAt_, *notifiedAt) : *notifiedAt;
  requestCycle(trigger);
}

bool Agent::policyFileChanged() {
  if (!options_.policyPath) return false;
  struct stat st {};
  if (::stat(options_.policyPath->c_str(), &st) != 0) return false;  // kept; reported on reload
  const std::int64_t mtime = std::int64_t(st.st_mtim.tv_sec) * 1'000'000'000 + st.st_mtim.tv_nsec;
  const bool changed = policySize_ >= 0 && (mtime != policyMtime_ || st.st_ino != policyInode_ ||
                                            st.st_size != policySize_);
  policyMtime_ = mtime;
  policyInode_ = st.st_ino;
  policySize_ = st.st_size;
  return changed;
}

bool Agent::reloadPolicy() {
  if (!options_.policyPath) {
    server::logEvent(server::LogLevel::Info, "policy-reload-skipped",
                     {{"reason", "no --policy file; defaults"}});
    return false;
  }
  (void)policyFileChanged();
  auto loaded = policy::loadPolicy(&*options_.policyPath);
  if (!loaded) {
    metrics_.policyReloads.add({"rejected"});
    server::logEvent(server::LogLevel::Error, "policy-reload-rejected",
                     {{"file", *options_.policyPath},
                      {"errors", loaded.error().message},
                      {"kept", "the last good policy"}});
    return false;
  }
  for (const auto& warning : loaded.value().warnings) {
    server::logEvent(server::LogLevel::Warn, "policy-warning", {{"warning", warning}});
  }
  policy_ = std::move(loaded).value();
  detectors_.forgetThresholds();  // thresholds may have moved: re-arm at the next cycle
  metrics_.policyReloads.add({"applied"});
  server::logEvent(server::LogLevel::Info, "policy-reloaded",
                   {{"file", *options_.policyPath},
                    {"thresholds", static_cast<std::int64_t>(policy_.thresholds.size())},
                    {"interval_ms", static_cast<std::int64_t>(interval().count())}});
  return true;
}

void Agent::notifySystemd(const std::string& state) const {
  const char* socket = std::getenv("NOTIFY_SOCKET");
  if (!options_.systemdNotify || socket == nullptr) return;
  (void)notifyServiceManager(socket, state);  // as with sd_notify: the loop goes on regardless
}

void Agent::logOnce(const std::string& event, const Error& error) {
  if (reportedErrors_.size() > 1000) reportedErrors_.clear();  // bounded; may re-log later
  if (!reportedErrors_.insert(error.message).second) return;
  server::logEvent(
      event == "cgroup-refresh-failed" ? server::LogLevel::Error : server::LogLevel::Warn, event,
      {{"error", error.message}});
}

void Agent::journal(const char* what, const Result<void>& written) {
  if (!written) logOnce("eviction-journal-failed", written.error().withContext(what));
}

void Agent::resumeJournal() {
  if (!journal_ || options_.dryRun) return;
  auto entries = journal_->load();
  if (!entries) {
    if (entries.error().sysErrno != ENOENT) {
      server::logEvent(server::LogLevel::Warn, "eviction-journal-ignored",
                       {{"file", journal_->path()},
                        {"error", entries.error().message},
                        {"effect", "evictions of a previous run are not resumed"}});
    }
    return;
  }
  journal_->adopt(*entries);
  if (auto refreshed = pods_.refresh(); !refreshed) {
    logOnce("cgroup-refresh-failed", refreshed.error());
  }
  const auto wallNow = std::chrono::system_clock::now();
  const SteadyTime now = clock_.now();
  for (const JournalEntry& entry : *entries) {
    const EvictionOrder& taken = entry.order;
    const cgroups::PodCgroup* pod = pods_.find(taken.uid);
    auto processes = pod != nullptr ? cgroups::readProcsRecursive(pod->memory)
                                    : Result<std::vector<pid_t>>(std::vector<pid_t>{});
    const double agoSeconds = std::chrono::duration<double>(wallNow - entry.orderedAt).count();
    if (!processes || processes->empty()) {
      server::logEvent(server::LogLevel::Info, "eviction-finished-while-down",
                       {{"pod", taken.pod}, {"uid", taken.uid}, {"ordered_s_ago", agoSeconds}});
      journal("remove", journal_->remove(taken.uid));
      continue;
    }
    const auto left = std::chrono::ceil<std::chrono::seconds>(entry.killAt - wallNow);
    EvictionRecord record;
    record.order = taken;
    record.order.gracePeriodSeconds = std::max<std::int64_t>(0, left.count());
    record.order.resumed = true;
    record.crossedAt = now;
    record.signalledAt = now;
    const std::size_t index = tracker_.started(record);
    const EvictionOrder& order = tracker_.records()[index].order;
    server::logEvent(server::LogLevel::Warn, "evict-resumed",
                     {{"pod", order.pod},
                      {"uid", order.uid},
                      {"signal", std::string(policy::toString(order.threshold.signal))},
                      {"kind", order.threshold.hard ? "hard" : "soft"},
                      {"ordered_s_ago", agoSeconds},
                      {"grace_left_seconds", order.gracePeriodSeconds},
                      {"processes", static_cast<std::int64_t>(processes->size())},
                      {"reason", "ordered by the previous run, which stopped before it ended"}});
    actuator_->evict(order, [this, alive = alive_, index](const EvictionOutcome& outcome) {
      if (*alive) onOutcome(index, outcome);
    });
  }
}

// ---- one cycle: observe → decide → act → publish ----

void Agent::cycle(Trigger trigger) {
  if (stopped_) return;
  cyclePosted_ = false;
  const SteadyTime now = clock_.now();
  ++cycles_;
  metrics_.cycles.add({std::string(toString(trigger))});
  if (policyFileChanged()) reloadPolicy();

  observePods(trigger, now);
  const cgroups::NodeReading node = observeNode();
  if (viewStale_) rebuildView();
  readNewPods(now);
  auto [view, result] = decide(node, now);
  tracker_.noteSignals(result.decision.signals, state_, now, notifiedAt_);
  notifiedAt_.reset();
  state_ = std::move(result.next);
  lastDecision_ = std::move(result.decision);
  // Here the cycle's candidate view (`view`) and decision (`lastDecision_`) are final.

  followNotification(trigger);
  const std::size_t ordered = tracker_.records().size();
  act(lastDecision_, now);
  publish(lastDecision_, node, view.pods.size());
  scheduleGraceTimer(lastDecision_, now);
  scheduleRefresh(now, tracker_.records().size() > ordered);
  if (ready_) watchPodChanges();
  lastCycleAt_ = now;
  if (recorder_) {
    // Admission's copy would hold the figures of the cycle it was made in: made again when
    // asked. The recorder samples the view's own objects and figures, copying none.
    admissionSnapshot_.reset();
    recorder_->cycle(view, view_.recorded(), state_, lastDecision_, policy_, now);
  }
  if (onCycle) onCycle(lastDecision_);
}

// The pod objects and the pod cgroups, where they changed: the source says so itself; the
// cgroups' directories are watched (PodCgroups::mayHaveChanged), so an unchanged node costs a
// stat and a read here, whatever the number of pods.
void Agent::observePods(Trigger trigger, SteadyTime now) {
  if (source_->refresh()) viewStale_ = true;
  // Counters for /metrics, off the path a kernel notification takes.
  if (trigger == Trigger::Timer || trigger == Trigger::Start) {
    metrics_.publish(source_->watchCounts());
  }
  for (const std::string& problem : source_->takeProblems()) {
    server::logEvent(server::LogLevel::Warn, "pod-source-problem", {{"problem", problem}});
  }
  const bool listAll = !indexed_ || now - lastIndexed_ >= kRefreshEvery;
  if (listAll || pods_.mayHaveChanged()) {
    if (refreshPodCgroups(now, listAll)) viewStale_ = true;
  } else if (trigger == Trigger::Timer && !tracker_.empty()) {
    expireTracked(now);  // back-offs end on time, not only when cgroups change
  }
}

// Pods that appeared since the last listing: their figures now, when they are few (a pod
// never read counts 0 until it is; victims first bounds it by kubepods' usage meanwhile).
void Agent::readNewPods(SteadyTime now) {
  if (!fullScanDone_ || unread_.empty()) return;
  if (unread_.size() <= kReadNewAtOnce) {
    for (const std::string& uid : unread_) (void)readPod(uid, now);
  } else {
    refreshWanted_ = true;  // many at once: a refresh in slices reads them
  }
  unread_.clear();
}

// The pod cgroups that appeared or went (all listed again when `full`, else from what the
// directory watch saw); true when pods appeared or went.
bool Agent::refreshPodCgroups(SteadyTime now, bool full) {
  auto refreshed = full ? pods_.refresh() : pods_.update();
  if (!refreshed) {
    logOnce("cgroup-refresh-failed", refreshed.error());
    return false;
  }
  indexed_ = true;
  if (full) lastIndexed_ = now;
  for (const Error& error : refreshed->errors) logOnce("cgroup-problem", error);
  expireTracked(now);
  for (std::string& uid : refreshed->added) unread_.push_back(std::move(uid));
  if (!refreshed->added.empty()) reserveDescriptors();
  return !refreshed->added.empty() || !refreshed->removed.empty();
}

void Agent::reserveDescriptors() {
  const std::uint64_t wanted = kDescriptorsPerPod * pods_.size() + kDescriptorsBesidePods;
  if (wanted <= descriptorsReserved_) return;
  // Twice what is wanted now: pods arriving one by one grow it once per doubling.
  auto reserved = cgroups::reserveDescriptorTable(2 * wanted);
  if (!reserved) {
    logOnce("descriptor-table", reserved.error());
    return;
  }
  descriptorsReserved_ = *reserved;
}

void Agent::expireTracked(SteadyTime now) {
  const auto exists = [&](const std::string& uid) { return pods_.find(uid) != nullptr; };
  const auto isEmpty = [&](const std::string& uid) {
    auto busy = cgroups::hasProcesses(*pods_.find(uid));
    return busy && !*busy;
  };
  for (const std::string& uid : tracker_.expire(now, exists, isEmpty)) {
    server::logEvent(server::LogLevel::Info, "pod-running-again", {{"uid", uid}});
  }
}

// The view for the pods on the node now: the source's objects, a made-up one for each pod
// cgroup without one, each pod's figures as last read (none yet for a new one).
void Agent::rebuildView() {
  viewStale_ = false;
  admissionSnapshot_.reset();
  const auto withoutObject = view_.rebuild(source_->current(), pods_, options_.nodeName,
                                           std::thread::hardware_concurrency());
  for (const auto& [uid, path] : withoutObject) {
    if (!unknownReported_.insert(uid).second) continue;
    server::logEvent(server::LogLevel::Warn, "pod-without-object",
                     {{"uid", uid},
                      {"cgroup", path},
                      {"treated_as", "priority 0, no requests"},
                      {"source", source_->describe()}});
  }
  // Bounded by the pods on the node: a UID whose cgroup is gone is forgotten.
  std::erase_if(unknownReported_,
                [&](const std::string& uid) { return pods_.find(uid) == nullptr; });
  // The last decision's rankings pointed at the old view; its signals stay.
  lastDecision_.memory.pods.clear();
  lastDecision_.pids.reset();
  lastDecision_.ephemeralStorage.reset();
  lastDecision_.evict.clear();
}

const policy::Snapshot& Agent::snapshot() const {
  if (!admissionSnapshot_) {
    admissionSnapshot_ = view_.snapshot(source_->current(), lastDecision_.conditions);
  }
  return *admissionSnapshot_;
}

// The node's figures, read once a cycle (the detectors place their lines from them too).
cgroups::NodeReading Agent::observeNode() {
  cgroups::NodeReading node = cgroups::readNodeFigures(pods_, options_.scan);
  for (const Error& error : node.errors) logOnce("read-problem", error);
  node.errors.clear();
  view_.setNodeStats(node.stats);
  if (admissionSnapshot_ && !admissionSnapshot_->nodes.empty()) {
    admissionSnapshot_->stats[admissionSnapshot_->nodes[0].name].node = node.stats;
    admissionSnapshot_->nodes[0].conditions.clear();
    for (const std::string& condition : lastDecision_.conditions) {
      admissionSnapshot_->nodes[0].conditions.push_back({condition, "True"});
    }
  }
  return node;
}

// The pods that may be chosen: not in flight, evicted or backing off. The others' usage
// still counts for the node.
policy::NodeView Agent::candidateView() const {
  if (tracker_.empty()) return view_.all();
  return view_.only([this](std::string_view uid) { return tracker_.candidate(uid); });
}

// Victims first (victims_first.h) reads pods through this: into the snapshot, in place.
class Agent::FigureReader final : public PodFigureReader {
 public:
  FigureReader(Agent& agent, SteadyTime now) : agent_(agent), now_(now) {}
  Read read(const policy::Pod& pod) override {
    Read read;
    read.stats = agent_.readPod(pod.uid, now_, &read.usage);
    return read;
  }
  std::optional<std::uint64_t> usage(const policy::Pod& pod) override {
    const cgroups::PodCgroup* cgroup = agent_.pods_.find(pod.uid);
    if (cgroup == nullptr) return std::nullopt;
    auto usage = cgroups::readMemoryUsage(cgroup->memory, agent_.buffer_);
    if (!usage) return std::nullopt;
    return *usage;
  }

 private:
  Agent& agent_;
  SteadyTime now_;
};

Agent::Decided Agent::decide(const cgroups::NodeReading& node, SteadyTime now) {
  if (fullScanDone_) {
    policy::NodeView view = candidateView();
    FigureReader reader(*this, now);
    VictimsFirstOptions options;
    options.busy = tracker_.busySignals();
    // The last decision's ranking, over the same pods unless the view changed since (then it
    // was cleared): its order is where this one's sort starts.
    options.lastRanking = &lastDecision_.memory;
    VictimsFirstDecision decided =
        decideVictimsFirst(view, usageOfView(node), policy_, state_, now, reader, options);
    forgetVanished(decided.vanished);
    // Victims first left the pods it found gone out of the view it decided on: so does the
    // view the recorder is given, which must be what the decision saw.
    if (!decided.vanished.empty()) {
      for (std::size_t i = view.pods.size(); i-- > 0;) {
        if (std::find(decided.vanished.begin(), decided.vanished.end(), view.pods[i]->uid) ==
            decided.vanished.end()) {
          continue;
        }
        view.pods.erase(view.pods.begin() + std::ptrdiff_t(i));
        view.podStats.erase(view.podStats.begin() + std::ptrdiff_t(i));
        view.keyOrder.erase(view.keyOrder.begin() + std::ptrdiff_t(i));
      }
    }
    std::optional<policy::EvictionResult> result = std::move(decided.result);
    decided.result.reset();
    lastVictimsFirst_ = std::move(decided);
    if (result) return {std::move(view), std::move(*result)};
    if (fallbackLogged_.insert(lastVictimsFirst_.fullScan).second) {
      server::logEvent(server::LogLevel::Info, "full-scan",
                       {{"reason", std::string(toString(lastVictimsFirst_.fullScan))}});
    }
  }
  // The first cycle, or a decision victims first cannot make alone: read every pod.
  readAllPods(now);
  if (viewStale_) rebuildView();
  policy::NodeView view = candidateView();
  policy::EvictionResult result =
      policy::evaluateEviction(view, policy_, state_, now, policy::Rankings::Needed);
  return {std::move(view), std::move(result)};
}

// What the view's pods use together at most: kubepods' usage less that of the pods outside
// the view (in flight, evicted, backing off — read now, one read each: they are few).
std::optional<std::uint64_t> Agent::usageOfView(const cgroups::NodeReading& node) {
  if (!node.kubepods) return std::nullopt;
  std::uint64_t usage = node.kubepods->usage;
  for (const std::string& uid : tracker_.held()) {
    const cgroups::PodCgroup* cgroup = pods_.find(uid);
    if (cgroup == nullptr) continue;
    auto held = cgroups::readMemoryUsage(cgroup->memory, buffer_);
    if (held) usage -= std::min(usage, *held);
  }
  return usage;
}

const policy::PodStats* Agent::readPod(const std::string& uid, SteadyTime now,
                                       std::optional<std::uint64_t>* usage) {
  policy::PodStats* stats = view_.figures(uid);
  cgroups::PodCgroup* cgroup = pods_.find(uid);
  if (stats == nullptr || cgroup == nullptr) return nullptr;
  cgroups::PodReading reading = cgroups::readPodFigures(*cgroup, options_.scan, now, buffer_);
  for (const Error& error : reading.errors) logOnce("read-problem", error);
  if (reading.gone) {
    forgetVanished({uid});
    return nullptr;
  }
  if (usage != nullptr) *usage = reading.memoryUsage;
  *stats = std::move(reading.stats);
  if (const policy::Pod* pod = view_.pod(uid)) attributeToSoleContainer(*stats, *pod);
  return stats;
}

void Agent::readAllPods(SteadyTime now) {
  const auto started = std::chrono::steady_clock::now();
  std::vector<std::string> uids;
  uids.reserve(pods_.size());
  for (const auto& [uid, cgroup] : pods_.pods()) uids.push_back(uid);
  for (const std::string& uid : uids) (void)readPod(uid, now);
  lastScanMs_ = millis(std::chrono::steady_clock::now() - started);
  ++fullScans_;
  fullScanDone_ = true;
  lastFullScan_ = now;
  unread_.clear();
  metrics_.scanDuration.observe(
      {}, std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count());
}

// A pod cgroup removed between the listing and its figures is gone from the node: left in
// the index it would be a pod without stats, which the kubelet's order ranks first, and a
// node with pods coming and going would keep choosing such ghosts (e2e/churn).
void Agent::forgetVanished(const std::vector<std::string>& uids) {
  for (const std::string& uid : uids) {
    if (pods_.pods().erase(uid) > 0) viewStale_ = true;
  }
}

void Agent::scheduleRefresh(SteadyTime now, bool evicted) {
  if (refresh_ || stopped_) return;
  if (!evicted && !refreshWanted_ && now - lastFullScan_ < kRefreshEvery) return;
  refreshWanted_ = false;
  Refresh refresh;
  refresh.uids.reserve(pods_.size());
  for (const auto& [uid, cgroup] : pods_.pods()) refresh.uids.push_back(uid);
  refresh_ = std::move(refresh);
  asio::post(io_, [this, alive = alive_] {
    if (*alive) refreshSlice();
  });
}

void Agent::refreshSlice() {
  if (!refresh_ || stopped_) return;
  const auto started = std::chrono::steady_clock::now();
  const SteadyTime now = clock_.now();
  Refresh& refresh = *refresh_;
  for (std::size_t n = 0; n < kRefreshSlice && refresh.next < refresh.uids.size(); ++n) {
    (void)readPod(refresh.uids[refresh.next++], now);
  }
  refresh.spent += std::chrono::steady_clock::now() - started;
  if (refresh.next < refresh.uids.size()) {
    // Behind whatever the loop has ready (a detector's wake-up first).
    asio::post(io_, [this, alive = alive_] {
      if (*alive) refreshSlice();
    });
    return;
  }
  metrics_.scanDuration.observe({}, std::chrono::duration<double>(refresh.spent).count());
  refresh_.reset();
  ++fullScans_;
  lastFullScan_ = now;
}

// Follow a detector's wake-up closely while pressure is near and nothing is met yet.
void Agent::followNotification(Trigger trigger) {
  if (isKernelWakeup(trigger)) followUpsLeft_ = 25;
  if (anyMet(lastDecision_) || !pressureNear(lastDecision_)) followUpsLeft_ = 0;
  if (followUpsLeft_ <= 0) return;
  --followUpsLeft_;
  followUpTimer_.expires_after(20ms);
  followUpTimer_.async_wait([this, alive = alive_](const boost::system::error_code& ec) {
    if (!ec && *alive && !stopped_) requestCycle(Trigger::NotificationFollowUp);
  });
}

// Every victim's first signal goes out before anything else is done for any of them: the
// journal (one write for all, after the signals), then the logs and metrics.
void Agent::act(const policy::EvictionDecision& decision, SteadyTime now) {
  // An earlier victim for a signal still exiting: its memory is not free yet, and counting
  // it twice would evict more pods than the pressure needs.
  const std::set<Signal> busy = tracker_.busySignals();
  std::vector<std::size_t> ordered;
  for (const policy::Eviction& eviction : decision.evict) {
    if (busy.contains(eviction.signal) || tracker_.inFlight(eviction.pod->uid)) continue;
    if (options_.dryRun && tracker_.dryRunRepeat(eviction.pod->uid, now)) continue;
    ordered.push_back(order(eviction, containerMessage(eviction, decision), now));
  }
  journalOrders(ordered);
  for (std::size_t record : ordered) reportOrder(record, decision);
  reportStuckThresholds(decision);
}

// One order: made from the decision, handed to the actuator, dated when its first signal is
// out.
std::size_t Agent::order(const policy::Eviction& eviction, std::string message, SteadyTime now) {
  EvictionRecord record;
  record.order = makeOrder(eviction, options_.dryRun);
  if (!message.empty()) record.order.message = std::move(message);
  record.crossedAt = tracker_.crossedAt(record.order.threshold, now);
  const std::size_t index = tracker_.started(std::move(record));
  actuator_->evict(tracker_.records()[index].order,
                   [this, alive = alive_, index](const EvictionOutcome& outcome) {
                     if (*alive) onOutcome(index, outcome);
                   });
  EvictionRecord& stored = tracker_.record(index);
  stored.signalledAt = clock_.now();
  stored.latencyMs = millis(stored.signalledAt - stored.crossedAt);
  return index;
}

// The kubelet's message names each container using more than its request, with that
// container's working set (cAdvisor reads each container's cgroup). The scan reads one cgroup
// per pod; for a memory eviction the victim's container cgroups are read here, found by the
// runtime IDs of its status, just before its first signal while its processes still hold
// their memory: one directory listing and two reads per container. "" (the decision's
// message, its one container credited with the pod's working set) where the status names no
// container or none of their cgroups is found.
std::string Agent::containerMessage(const policy::Eviction& eviction,
                                    const policy::EvictionDecision& decision) {
  const policy::Pod& pod = *eviction.pod;
  if (policy::starvedResource(eviction.signal) != "memory") return {};
  std::vector<std::string_view> ids;
  for (const std::vector<policy::Container>* list : {&pod.initContainers, &pod.containers}) {
    for (const policy::Container& container : *list) {
      if (!container.runtimeId.empty()) ids.push_back(container.runtimeId);
    }
  }
  if (ids.empty()) return {};
  const cgroups::PodCgroup* cgroup = pods_.find(pod.uid);
  const policy::PodStats* figures = view_.figures(pod.uid);
  const policy::SignalStatus* status = statusOf(decision, {eviction.signal, eviction.hard});
  if (cgroup == nullptr || figures == nullptr || status == nullptr) return {};
  auto readings = cgroups::readContainerWorkingSets(cgroup->memory, ids, buffer_);
  if (!readings) {
    logOnce("read-problem", readings.error());
    return {};
  }
  policy::PodStats stats;
  stats.memoryWorkingSetBytes = figures->memoryWorkingSetBytes;
  // In the order the runtime starts them: the init containers (only sidecars still run), then
  // the containers.
  for (const std::vector<policy::Container>* list : {&pod.initContainers, &pod.containers}) {
    for (const policy::Container& container : *list) {
      if (container.runtimeId.empty()) continue;
      for (const cgroups::ContainerMemory& reading : *readings) {
        if (reading.runtimeId != container.runtimeId) continue;
        policy::ContainerStats cs;
        cs.name = container.name;
        cs.memoryWorkingSetBytes = reading.workingSet;
        stats.containers.push_back(std::move(cs));
      }
    }
  }
  if (stats.containers.empty()) return {};
  return policy::evictionMessage(*status, pod, &stats);
}

void Agent::journalOrders(const std::vector<std::size_t>& records) {
  if (!journal_ || options_.dryRun || records.empty()) return;
  const auto wallNow = std::chrono::system_clock::now();
  std::vector<JournalEntry> entries;
  for (std::size_t index : records) {
    const EvictionRecord& record = tracker_.records()[index];
    // An order the actuator already finished (refused at once) is not under way.
    if (record.outcome) continue;
    // The wall time of the first signal: the journal is written just after it.
    const WallTime orderedAt =
        wallNow - std::chrono::duration_cast<WallTime::duration>(clock_.now() - record.signalledAt);
    const std::chrono::seconds grace{std::max<std::int64_t>(0, record.order.gracePeriodSeconds)};
    entries.push_back({record.order, orderedAt, orderedAt + grace});
  }
  journal("record", journal_->record(entries));
}

void Agent::reportOrder(std::size_t index, const policy::EvictionDecision& decision) {
  const EvictionRecord& record = tracker_.records()[index];
  const EvictionOrder& order = record.order;
  const std::string signal(policy::toString(order.threshold.signal));
  const policy::Eviction* eviction = nullptr;
  for (const policy::Eviction& e : decision.evict) {
    if (e.pod->uid == order.uid) eviction = &e;
  }
  if (options_.dryRun) {
    metrics_.dryRunEvictions.add({signal});
  } else {
    metrics_.evictions.add({signal, order.threshold.hard ? "hard-threshold" : "soft-threshold"});
    metrics_.evictionLatency.observe({}, record.latencyMs / 1000.0);
  }
  const policy::SignalStatus* status = statusOf(decision, order.threshold);
  server::logEvent(server::LogLevel::Warn, options_.dryRun ? "evict-dry-run" : "evict",
                   {{"pod", order.pod},
                    {"uid", order.uid},
                    {"signal", signal},
                    {"kind", order.threshold.hard ? "hard" : "soft"},
                    {"available", status ? status->available : std::int64_t(0)},
                    {"threshold", status ? status->threshold : std::int64_t(0)},
                    {"usage", eviction ? eviction->usage : std::int64_t(0)},
                    {"request", eviction ? eviction->request : std::int64_t(0)},
                    {"priority", static_cast<std::int64_t>(eviction ? eviction->pod->priority : 0)},
                    {"grace_seconds", order.gracePeriodSeconds},
                    {"latency_ms", record.latencyMs},
                    {"reason", order.message}});
  if (recorder_ && eviction != nullptr) recorder_->evicted(record, *eviction, decision);
  if (onEviction) onEviction(record);
}

void Agent::reportStuckThresholds(const policy::EvictionDecision& decision) {
  // The kubelet says "unable to evict any pods from the node" when a threshold calls for an
  // eviction and no pod can go; say it once per episode, with each pod's reason.
  for (const policy::SignalStatus& status : decision.signals) {
    if (!status.actionable) {
      stuckLogged_.erase(status.key);
      continue;
    }
    const bool acted =
        std::any_of(decision.evict.begin(), decision.evict.end(),
                    [&](const policy::Eviction& e) { return e.signal == status.key.signal; });
    if (acted || tracker_.signalBusy(status.key.signal) || options_.dryRun ||
        !stuckLogged_.insert(status.key).second) {
      continue;
    }
    std::string reasons;
    for (const policy::RankedPod& ranked : policy::shownRanking(decision, status.key.signal).pods) {
      if (!reasons.empty()) reasons += "; ";
      reasons += ranked.pod->key + ": " +
                 (ranked.evictable ? std::string("evictable") : ranked.notEvictableReason);
    }
    if (reasons.empty()) reasons = "no pods on the node";
    server::logEvent(server::LogLevel::Warn, "no-evictable-pod",
                     {{"signal", std::string(policy::toString(status.key.signal))},
                      {"kind", status.key.hard ? "hard" : "soft"},
                      {"available", status.available},
                      {"threshold", status.threshold},
                      {"pods", reasons},
                      {"reason", "unable to evict any pods from the node"}});
  }
}

void Agent::onOutcome(std::size_t index, const EvictionOutcome& outcome) {
  tracker_.finished(index, outcome, clock_.now());
  const EvictionRecord& record = tracker_.records()[index];
  const EvictionOrder& order = record.order;
  if (!order.dryRun) {
    if (journal_) journal("remove", journal_->remove(order.uid));
    server::logEvent(outcome.emptied ? server::LogLevel::Info : server::LogLevel::Error,
                     outcome.emptied ? "evicted" : "eviction-failed",
                     {{"pod", order.pod},
                      {"uid", order.uid},
                      {"method", methodText(order, outcome)},
                      {"processes", static_cast<std::int64_t>(outcome.processes)},
                      {"elapsed_ms", outcome.elapsed.count() / 1000.0},
                      {"error", outcome.error}});
    // The pod's memory is back: decide again with fresh figures now instead of waiting for
    // the timer. A failure frees nothing; the next regular cycle goes on without that pod.
    if (outcome.emptied) requestCycle(Trigger::EvictionDone);
  }
  if (recorder_) recorder_->outcome(record);
  if (onEviction) onEviction(record);
}

void Agent::publish(const policy::EvictionDecision& decision, const cgroups::NodeReading& node,
                    std::size_t pods) {
  metrics_.publish(decision);
  if (options_.notifications) {
    detectors_.follow(decision, node, interval());
    metrics_.kernelNotifications.set({}, double(detectors_.count()));
  }
  if (!ready_) {
    ready_ = true;
    notifySystemd("READY=1\nSTATUS=watching " + std::to_string(pods) + " pods");
    server::logEvent(server::LogLevel::Info, "ready",
                     {{"pods", static_cast<std::int64_t>(pods)},
                      {"pod_cgroups", static_cast<std::int64_t>(pods_.size())},
                      {"scan_ms", lastScanMs_}});
    return;
  }
  std::string status = "watching " + std::to_string(pods) + " pods";
  if (!decision.conditions.empty()) {
    status += "; pressure:";
    for (const std::string& c : decision.conditions) status += " " + c;
  }
  notifySystemd("WATCHDOG=1\nSTATUS=" + status);
}

policy::OrderedJson Agent::stateJson() const {
  auto result = policy::evaluateEviction(candidateView(), policy_, state_, clock_.now(),
                                         policy::Rankings::All);
  return policy::evictionToJson(result.decision);
}

}  // namespace nodewarden::node
