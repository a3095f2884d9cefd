#include "node/agent.h"

#include <sys/stat.h>
#include <systemd/sd-daemon.h>
#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <thread>

#include <boost/asio/post.hpp>

#include "node/routes.h"
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
                                     const policy::Eviction& eviction) {
  const policy::SignalStatus* found = nullptr;
  for (const policy::SignalStatus& s : decision.signals) {
    if (s.key.signal == eviction.signal && s.key.hard == eviction.hard) found = &s;
  }
  return found;
}

// The ranking that was asked to relieve a signal.
const policy::Ranking& rankingFor(const policy::EvictionDecision& decision, Signal signal) {
  if (signal == Signal::PidAvailable && decision.pids) return *decision.pids;
  if (signal != Signal::PidAvailable && signal != Signal::MemoryAvailable &&
      signal != Signal::AllocatableMemoryAvailable && decision.ephemeralStorage) {
    return *decision.ephemeralStorage;
  }
  return decision.memory;
}

}  // namespace

ActuatorFactory cgroupActuator() {
  return [](asio::io_context& io, cgroups::PodCgroups& pods) -> std::unique_ptr<Actuator> {
    return std::make_unique<CgroupActuator>(io, pods);
  };
}

ActuatorFactory dryRunActuator() {
  return [](asio::io_context&, cgroups::PodCgroups&) -> std::unique_ptr<Actuator> {
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
      actuator_(makeActuator(io, pods_)),
      detectors_(io, pods_, clock,
                 DetectorOptions{options_.scan.procRoot, options_.kernelWakeups},
                 [this](Trigger trigger, std::optional<SteadyTime> at) { onWake(trigger, at); }),
      timer_(io),
      graceTimer_(io),
      followUpTimer_(io) {
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

Result<void> Agent::start() {
  if (options_.policyPath) (void)policyFileChanged();  // remember the file as loaded
  if (options_.http) {
    if (!options_.http->onProblem) {
      options_.http->onProblem = [](const std::string& problem) {
        server::logEvent(server::LogLevel::Warn, "http-problem", {{"problem", problem}});
      };
    }
    http_ = std::make_unique<server::HttpServer>(
        io_, *options_.http, [this](const server::HttpRequest& r) { return handle(r); });
    if (auto started = http_->start(); !started) {
      http_.reset();
      return started.error();
    }
  }
  server::logEvent(server::LogLevel::Info, "agent-start",
                   {{"node", options_.nodeName},
                    {"source", source_->describe()},
                    {"kubepods", pods_.hierarchy().memory + "/" + pods_.kubepods()},
                    {"cgroups", cgroups::toString(pods_.hierarchy().mode)},
                    {"actuator", actuator_->name()},
                    {"interval_ms", static_cast<std::int64_t>(interval().count())},
                    {"listen", http_ ? options_.http->address + ":" + std::to_string(http_->port())
                                     : std::string("off")}});
  if (recorder_) {
    if (auto opened = recorder_->open(); !opened) {
      server::logEvent(server::LogLevel::Warn, "recorder", {{"error", opened.error().message}});
    }
  }
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
  timer_.cancel();
  graceTimer_.cancel();
  followUpTimer_.cancel();
  detectors_.stop();
  if (http_) http_->stop();
  if (recorder_) recorder_->stop(std::chrono::seconds(1));
  notifySystemd("STOPPING=1");
}

// ---- the loop ----

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
  if (!options_.systemdNotify || std::getenv("NOTIFY_SOCKET") == nullptr) return;
  ::sd_notify(0, state.c_str());
}

void Agent::logOnce(const std::string& event, const Error& error) {
  if (reportedErrors_.size() > 1000) reportedErrors_.clear();  // bounded; may re-log later
  if (!reportedErrors_.insert(error.message).second) return;
  server::logEvent(event == "cgroup-refresh-failed" ? server::LogLevel::Error
                                                    : server::LogLevel::Warn,
                   event, {{"error", error.message}});
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
  if (auto refreshed = pods_.refresh(); !refreshed) logOnce("cgroup-refresh-failed", refreshed.error());
  const auto wallNow = std::chrono::system_clock::now();
  const SteadyTime now = clock_.now();
  for (const JournalEntry& entry : *entries) {
    const cgroups::PodCgroup* pod = pods_.find(entry.uid);
    auto processes = pod != nullptr ? cgroups::readProcsRecursive(pod->memory)
                                    : Result<std::vector<pid_t>>(std::vector<pid_t>{});
    const double agoSeconds = std::chrono::duration<double>(wallNow - entry.orderedAt).count();
    if (!processes || processes->empty()) {
      server::logEvent(server::LogLevel::Info, "eviction-finished-while-down",
                       {{"pod", entry.pod}, {"uid", entry.uid}, {"ordered_s_ago", agoSeconds}});
      journal("remove", journal_->remove(entry.uid));
      continue;
    }
    const auto left = std::chrono::ceil<std::chrono::seconds>(entry.killAt - wallNow);
    EvictionRecord record;
    record.pod = entry.pod;
    record.uid = entry.uid;
    record.signal = entry.signal;
    record.hard = entry.hard;
    record.gracePeriodSeconds = std::max<std::int64_t>(0, left.count());
    record.message = entry.message;
    record.crossedAt = now;
    record.signalledAt = now;
    const std::size_t index = tracker_.started(record);
    EvictionOrder order{entry.uid, entry.pod, entry.signal, entry.hard,
                        record.gracePeriodSeconds, entry.message};
    order.resumed = true;
    server::logEvent(server::LogLevel::Warn, "evict-resumed",
                     {{"pod", entry.pod},
                      {"uid", entry.uid},
                      {"signal", std::string(policy::toString(entry.signal))},
                      {"kind", entry.hard ? "hard" : "soft"},
                      {"ordered_s_ago", agoSeconds},
                      {"grace_left_seconds", record.gracePeriodSeconds},
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
  const bool sourceChanged = source_->refresh();
  for (const std::string& problem : source_->takeProblems()) {
    server::logEvent(server::LogLevel::Warn, "pod-source-problem", {{"problem", problem}});
  }
  bool full = sourceChanged || wantsFullScan(trigger, now);
  cgroups::ScanResult scan;
  policy::EvictionResult result = observe(full, now, scan);
  if (!full && pressureNear(result.decision)) {
    full = true;
    result = observe(true, now, scan);
  }
  const std::size_t candidates = candidateView().pods.size();

  tracker_.noteSignals(result.decision.signals, state_, now, notifiedAt_);
  notifiedAt_.reset();
  state_ = std::move(result.next);
  lastDecision_ = std::move(result.decision);

  followNotification(trigger);
  act(lastDecision_, now);
  publish(lastDecision_, scan, candidates);
  scheduleGraceTimer(lastDecision_, now);
  lastCycleAt_ = now;
  if (recorder_) recorder_->cycle(candidateView(), snapshot_, state_, lastDecision_, policy_, now);
  if (onCycle) onCycle(lastDecision_);
}

// Every pod is read on the first cycle, on anything but the plain timer (a detector, an
// eviction that completed, a grace period that ended), while evictions are in flight or a
// threshold is near, and every kFullScanEvery.
bool Agent::wantsFullScan(Trigger trigger, SteadyTime now) const {
  return !fullScanDone_ || trigger != Trigger::Timer || tracker_.anyInFlight() ||
         now - lastFullScan_ >= kFullScanEvery || pressureNear(lastDecision_);
}

// Reads the kernel (every pod when `full`, else the node only), rebuilds the snapshot and
// evaluates the policy over the pods that may be chosen.
policy::EvictionResult Agent::observe(bool full, SteadyTime now, cgroups::ScanResult& scan) {
  if (full) refreshPodCgroups(now);
  cgroups::ScanOptions scanOptions = options_.scan;
  scanOptions.podFigures = full;
  scan = cgroups::scanNode(pods_, scanOptions, now);
  for (const Error& error : scan.errors) logOnce("read-problem", error);
  // A pod cgroup removed between the refresh and its figures is gone from the node: left in
  // the index it would be a pod without stats, which the kubelet's order ranks first, and a
  // node with pods coming and going would keep choosing such ghosts (e2e/churn).
  for (const std::string& uid : scan.vanished) pods_.pods().erase(uid);

  if (!full && fullScanDone_ && !snapshot_.nodes.empty()) {
    refreshNodeFigures(snapshot_, scan.summary.node, lastDecision_.conditions);
  } else {
    SnapshotInputs inputs;
    inputs.pods = &source_->current();
    inputs.summary = &scan.summary;
    for (const auto& [uid, cgroup] : pods_.pods()) inputs.podCgroups.emplace(uid, cgroup->relativePath);
    inputs.nodeName = options_.nodeName;
    inputs.conditions = lastDecision_.conditions;
    inputs.cpus = std::thread::hardware_concurrency();
    BuiltSnapshot built = buildSnapshot(inputs);
    for (const auto& [uid, path] : built.withoutObject) {
      if (!unknownReported_.insert(uid).second) continue;
      server::logEvent(server::LogLevel::Warn, "pod-without-object",
                       {{"uid", uid},
                        {"cgroup", path},
                        {"treated_as", "priority 0, no requests"},
                        {"source", source_->describe()}});
    }
    snapshot_ = std::move(built.snapshot);
    // Bounded by the pods on the node: a UID whose cgroup is gone is forgotten.
    if (full) {
      std::erase_if(unknownReported_,
                    [&](const std::string& uid) { return pods_.find(uid) == nullptr; });
    }
  }
  if (full) {
    ++fullScans_;
    fullScanDone_ = true;
    lastFullScan_ = now;
    metrics_.scanDuration.observe({}, std::chrono::duration<double>(scan.duration).count());
  }
  return policy::evaluateEviction(candidateView(), policy_, state_, now, policy::Rankings::Needed);
}

void Agent::refreshPodCgroups(SteadyTime now) {
  auto refreshed = pods_.refresh();
  if (!refreshed) {
    logOnce("cgroup-refresh-failed", refreshed.error());
    return;
  }
  for (const Error& error : refreshed->errors) logOnce("cgroup-problem", error);
  const auto exists = [&](const std::string& uid) { return pods_.find(uid) != nullptr; };
  const auto isEmpty = [&](const std::string& uid) {
    const cgroups::PodCgroup* pod = pods_.find(uid);
    auto processes = cgroups::readProcsRecursive(pod->memory);
    return processes && processes->empty();
  };
  for (const std::string& uid : tracker_.expire(now, exists, isEmpty)) {
    server::logEvent(server::LogLevel::Info, "pod-running-again", {{"uid", uid}});
  }
}

// The pods that may be chosen: not in flight, evicted or backing off, and running here (a
// manifest whose cgroup does not exist is not). The others' usage still counts for the node.
policy::NodeView Agent::candidateView() const {
  const std::string name = snapshot_.nodes.empty() ? options_.nodeName : snapshot_.nodes[0].name;
  policy::NodeView view = policy::makeNodeView(snapshot_, name);
  if (tracker_.empty() && !fullScanDone_) return view;
  policy::NodeView kept = view;
  kept.pods.clear();
  kept.podStats.clear();
  for (std::size_t i = 0; i < view.pods.size(); ++i) {
    const std::string& uid = view.pods[i]->uid;
    if (!tracker_.candidate(uid) || pods_.find(uid) == nullptr) continue;
    kept.pods.push_back(view.pods[i]);
    kept.podStats.push_back(view.podStats[i]);
  }
  policy::assignKeyOrder(kept);
  return kept;
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

void Agent::act(const policy::EvictionDecision& decision, SteadyTime now) {
  // An earlier victim for a signal still exiting: its memory is not free yet, and counting
  // it twice would evict more pods than the pressure needs.
  const std::set<Signal> busy = tracker_.busySignals();
  for (const policy::Eviction& eviction : decision.evict) {
    if (busy.contains(eviction.signal) || tracker_.inFlight(eviction.pod->uid)) continue;
    if (options_.dryRun && tracker_.dryRunRepeat(eviction.pod->uid, now)) continue;
    evict(eviction, decision, now);
  }
  reportStuckThresholds(decision);
}

void Agent::evict(const policy::Eviction& eviction, const policy::EvictionDecision& decision,
                  SteadyTime now) {
  const policy::Pod& pod = *eviction.pod;
  const std::string signal(policy::toString(eviction.signal));
  EvictionRecord record;
  record.pod = pod.key;
  record.uid = pod.uid;
  record.signal = eviction.signal;
  record.hard = eviction.hard;
  record.gracePeriodSeconds = eviction.gracePeriodSeconds;
  record.message = eviction.message;
  record.dryRun = options_.dryRun;
  record.crossedAt = tracker_.crossedAt({eviction.signal, eviction.hard}, now);
  const std::size_t index = tracker_.started(std::move(record));
  if (journal_ && !options_.dryRun) {
    const auto wallNow = std::chrono::system_clock::now();
    journal("record", journal_->record({pod.uid, pod.key, eviction.signal, eviction.hard,
                                        eviction.message, wallNow,
                                        wallNow + std::chrono::seconds(std::max<std::int64_t>(
                                                      0, eviction.gracePeriodSeconds))}));
  }

  const EvictionOrder order{pod.uid,          pod.key,
                            eviction.signal,  eviction.hard,
                            eviction.gracePeriodSeconds, eviction.message};
  actuator_->evict(order, [this, alive = alive_, index](const EvictionOutcome& outcome) {
    if (*alive) onOutcome(index, outcome);
  });
  EvictionRecord& stored = tracker_.record(index);
  stored.signalledAt = clock_.now();
  stored.latencyMs = millis(stored.signalledAt - stored.crossedAt);
  if (options_.dryRun) {
    metrics_.dryRunEvictions.add({signal});
  } else {
    metrics_.evictions.add({signal, eviction.hard ? "hard-threshold" : "soft-threshold"});
    metrics_.evictionLatency.observe({}, stored.latencyMs / 1000.0);
  }
  const policy::SignalStatus* status = statusOf(decision, eviction);
  server::logEvent(server::LogLevel::Warn, options_.dryRun ? "evict-dry-run" : "evict",
                   {{"pod", pod.key},
                    {"uid", pod.uid},
                    {"signal", signal},
                    {"kind", eviction.hard ? "hard" : "soft"},
                    {"available", status ? status->available : std::int64_t(0)},
                    {"threshold", status ? status->threshold : std::int64_t(0)},
                    {"usage", eviction.usage},
                    {"request", eviction.request},
                    {"priority", static_cast<std::int64_t>(pod.priority)},
                    {"grace_seconds", eviction.gracePeriodSeconds},
                    {"latency_ms", stored.latencyMs},
                    {"reason", eviction.message}});
  if (recorder_) recorder_->evicted(stored, eviction, decision);
  if (onEviction) onEviction(stored);
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
    for (const policy::RankedPod& ranked : rankingFor(decision, status.key.signal).pods) {
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

void Agent::onOutcome(std::size_t record, const EvictionOutcome& outcome) {
  tracker_.finished(record, outcome, clock_.now());
  if (!outcome.dryRun) {
    if (journal_) journal("remove", journal_->remove(outcome.uid));
    server::logEvent(outcome.emptied ? server::LogLevel::Info : server::LogLevel::Error,
                     outcome.emptied ? "evicted" : "eviction-failed",
                     {{"pod", outcome.pod},
                      {"uid", outcome.uid},
                      {"method", outcome.method},
                      {"processes", static_cast<std::int64_t>(outcome.processes)},
                      {"elapsed_ms", outcome.elapsed.count() / 1000.0},
                      {"error", outcome.error}});
    // The pod's memory is back: decide again with fresh figures now instead of waiting for
    // the timer. A failure frees nothing; the next regular cycle goes on without that pod.
    if (outcome.emptied) requestCycle(Trigger::EvictionDone);
  }
  if (recorder_) recorder_->outcome(tracker_.records()[record]);
  if (onEviction) onEviction(tracker_.records()[record]);
}

void Agent::publish(const policy::EvictionDecision& decision, const cgroups::ScanResult& scan,
                    std::size_t pods) {
  metrics_.publish(decision);
  if (options_.notifications) {
    detectors_.follow(decision, interval());
    metrics_.kernelNotifications.set({}, double(detectors_.count()));
  }
  if (!ready_) {
    ready_ = true;
    notifySystemd("READY=1\nSTATUS=watching " + std::to_string(pods) + " pods");
    server::logEvent(server::LogLevel::Info, "ready",
                     {{"pods", static_cast<std::int64_t>(pods)},
                      {"pod_cgroups", static_cast<std::int64_t>(pods_.size())},
                      {"scan_ms", millis(scan.duration)}});
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

server::HttpResponse Agent::handle(const server::HttpRequest& request) {
  return serveAgent(*this, request);
}

}  // namespace nodewarden::node
