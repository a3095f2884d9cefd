#include "node/agent.h"

#include <sys/stat.h>
#include <systemd/sd-daemon.h>
#include <unistd.h>
#include <algorithm>
#include <cerrno>
#include <cmath>
#include <thread>

#include <boost/asio/post.hpp>

#include "policy/files.h"
#include "server/log.h"
#include "webhook/webhook.h"
#include "policy/admission.h"

namespace nodewarden::agent {

namespace asio = boost::asio;
using namespace std::chrono_literals;
using policy::Signal;

namespace {

double millis(std::chrono::steady_clock::duration d) {
  return std::chrono::duration<double, std::milli>(d).count();
}

std::string thresholdKey(const policy::ThresholdKey& key) {
  return std::string(policy::toString(key.signal)) + (key.hard ? "/hard" : "/soft");
}

server::HttpResponse jsonResponse(unsigned status, const policy::OrderedJson& body) {
  // Replace, not throw, on bytes that are not UTF-8 (a request target echoed in an error).
  return server::HttpResponse{status, "application/json",
                      body.dump(2, ' ', false, policy::OrderedJson::error_handler_t::replace) +
                          "\n"};
}

server::HttpResponse errorResponse(unsigned status, const std::string& message) {
  policy::OrderedJson body;
  body["error"] = message;
  return jsonResponse(status, body);
}

}  // namespace

// A kernel notification source, watched by the loop through a duplicate of its descriptor.
struct Agent::Notifier {
  std::string name;
  std::optional<cgroups::MemoryThresholdNotifier> threshold;
  std::optional<cgroups::PsiTrigger> psi;
  std::optional<cgroups::FileModifiedWatcher> events;  // v2 memory.events
  asio::posix::stream_descriptor descriptor;
  explicit Notifier(asio::io_context& io) : descriptor(io) {}
};

struct Agent::LinePoller {
  bool node = false;  // the root cgroup (memory.available), else kubepods
  std::string name;
  std::optional<cgroups::MemoryLinePoller> poller;
  asio::steady_timer timer;
  std::string buffer;
  bool scheduled = false;
  explicit LinePoller(asio::io_context& io) : timer(io) {}
};

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
             const ActuatorFactory& makeActuator)
    : io_(io),
      options_(std::move(options)),
      policy_(std::move(policy)),
      pods_(std::move(pods)),
      source_(std::move(source)),
      actuator_(makeActuator(io, pods_)),
      timer_(io),
      graceTimer_(io),
      followUpTimer_(io) {
  // Every family exists from the start, so a scrape before the first event sees them.
  evictionsTotal_ =
      &metrics_.counter("nodewarden_evictions_total", "Evictions ordered, by signal and reason.",
                        {"signal", "reason"});
  admissionsTotal_ =
      &metrics_.counter("nodewarden_admissions_total", "Admission verdicts, by verdict and reason.",
                        {"verdict", "reason"});
  signalAvailable_ = &metrics_.gauge(
      "nodewarden_signal_available_bytes",
      "Available amount of each eviction signal (bytes, inodes or PIDs).", {"signal"});
  thresholdMet_ = &metrics_.gauge("nodewarden_threshold_met", "1 while a threshold is met.",
                                  {"signal", "kind"});
  nodeCondition_ = &metrics_.gauge("nodewarden_node_condition", "1 while the node condition holds.",
                                   {"condition"});
  evictionLatency_ = &metrics_.histogram(
      "nodewarden_eviction_latency_seconds",
      "Threshold crossing to the first signal sent to the pod's processes.", {}, server::latencyBuckets());
  scanDuration_ = &metrics_.histogram("nodewarden_scan_duration_seconds",
                                      "Time to read every pod cgroup and the node's figures.", {},
                                      server::latencyBuckets());
  podsGauge_ = &metrics_.gauge("nodewarden_pods", "Pods on the node the agent decides about.", {});
  cyclesTotal_ = &metrics_.counter("nodewarden_cycles_total",
                                   "Housekeeping cycles, by what started them.", {"trigger"});
  reloadsTotal_ = &metrics_.counter("nodewarden_policy_reloads_total", "Policy reloads, by result.",
                                    {"result"});
  dryRunTotal_ =
      &metrics_.counter("nodewarden_dry_run_evictions_total",
                        "Evictions decided but not carried out (--dry-run).", {"signal"});
  notificationsGauge_ =
      &metrics_.gauge("nodewarden_kernel_notifications", "Kernel notifications armed.", {});
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

Result<bool> Agent::start() {
  if (options_.policyPath) (void)policyFileChanged();  // remember the file as loaded
  if (options_.http) {
    if (!options_.http->onProblem) {
      options_.http->onProblem = [](const std::string& problem) {
        server::logEvent(server::LogLevel::Warn, "http-problem", {{"problem", problem}});
      };
    }
    http_ = std::make_unique<server::HttpServer>(io_, *options_.http,
                                         [this](const server::HttpRequest& r) { return handle(r); });
    auto started = http_->start();
    if (!started) {
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
  if (pods_.hierarchy().memoryVersion == cgroups::Version::V1) {
    // The kubelet's own words (CgroupV1MaintenanceModeWarning, since 1.31); from 1.35 the
    // kubelet refuses v1 unless failCgroupV1 is false. nodewarden keeps working on v1.
    server::logEvent(server::LogLevel::Warn, "cgroup-v1",
             {{"message", "cgroup v1 support is in maintenance mode, please migrate to cgroup v2"},
              {"cgroups", cgroups::toString(pods_.hierarchy().mode)}});
  }
  cycle("start");
  if (options_.notifications && options_.kernelWakeups) armPsi();
  {
    std::string detectors;
    for (const std::string& name : armedNotifications()) {
      detectors += (detectors.empty() ? "" : "; ") + name;
    }
    server::logEvent(server::LogLevel::Info, "detectors",
             {{"armed", detectors.empty() ? std::string("none (timer only)") : detectors},
              {"interval_ms", static_cast<std::int64_t>(interval().count())}});
  }
  nextTick_ = std::chrono::steady_clock::now();
  scheduleTimer();
  return true;
}

void Agent::stop() {
  if (stopped_) return;
  stopped_ = true;
  timer_.cancel();
  graceTimer_.cancel();
  followUpTimer_.cancel();
  notifiers_.clear();
  for (const auto& poller : pollers_) poller->timer.cancel();
  pollers_.clear();
  if (http_) http_->stop();
  notifySystemd("STOPPING=1");
}

void Agent::scheduleTimer() {
  if (stopped_) return;
  // Re-arm from the previous expiry so the cadence does not drift; after a stall, start afresh.
  const auto now = std::chrono::steady_clock::now();
  nextTick_ += interval();
  if (nextTick_ < now) nextTick_ = now + interval();
  timer_.expires_at(nextTick_);
  timer_.async_wait([this, alive = alive_](const boost::system::error_code& ec) {
    if (ec || !*alive || stopped_) return;
    cycle("timer");
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
  graceTimer_.expires_at(*due + std::chrono::milliseconds(1));
  graceTimer_.async_wait([this, alive = alive_](const boost::system::error_code& ec) {
    if (!ec && *alive && !stopped_) requestCycle("grace-elapsed");
  });
}

void Agent::requestCycle(const char* trigger) {
  if (cyclePosted_ || stopped_) return;
  cyclePosted_ = true;
  asio::post(io_, [this, alive = alive_, trigger] {
    if (*alive && !stopped_) cycle(trigger);
  });
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
    server::logEvent(server::LogLevel::Info, "policy-reload-skipped", {{"reason", "no --policy file; defaults"}});
    return false;
  }
  (void)policyFileChanged();
  auto loaded = policy::loadPolicy(&*options_.policyPath);
  if (!loaded) {
    reloadsTotal_->add({"rejected"});
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
  armedThresholds_.clear();  // thresholds may have moved: re-arm at the next cycle
  reloadsTotal_->add({"applied"});
  server::logEvent(server::LogLevel::Info, "policy-reloaded",
           {{"file", *options_.policyPath},
            {"thresholds", static_cast<std::int64_t>(policy_.thresholds.size())},
            {"interval_ms", static_cast<std::int64_t>(interval().count())}});
  return true;
}

void Agent::rebuildSnapshot(const cgroups::ScanResult& scan, bool pods) {
  const PodSet& set = source_->current();
  if (!pods && fullScanDone_ && !snapshot_.nodes.empty()) {
    // A node-only cycle: fresh node figures, the pods and their figures from the last full
    // scan (their objects only change on full cycles).
    snapshot_.stats[snapshot_.nodes[0].name].node = scan.summary.node;
    snapshot_.nodes[0].conditions.clear();
    for (const std::string& condition : lastDecision_.conditions) {
      snapshot_.nodes[0].conditions.push_back({condition, "True"});
    }
    return;
  }
  policy::Snapshot snapshot;
  snapshot.priorityClasses = set.priorityClasses;
  snapshot.podDisruptionBudgets = set.podDisruptionBudgets;

  policy::Node node;
  if (set.node) {
    node = *set.node;
  } else {
    // No Node object (static source): capacity from the kernel, allocatable from the
    // kubepods limit when there is one; the kubelet's default of 110 pods.
    node.name = options_.nodeName;
    node.hasAllocatable = true;
    const policy::NodeStats& stats = scan.summary.node;
    const std::int64_t cpus = std::max(1u, std::thread::hardware_concurrency());
    node.capacity["cpu"] = policy::Quantity::fromValue(cpus, policy::QuantityFormat::DecimalSI);
    node.capacity["pods"] = policy::Quantity::fromValue(110, policy::QuantityFormat::DecimalSI);
    if (stats.memoryAvailableBytes && stats.memoryWorkingSetBytes) {
      node.capacity["memory"] = policy::Quantity::fromValue(
          std::int64_t(*stats.memoryAvailableBytes + *stats.memoryWorkingSetBytes),
          policy::QuantityFormat::BinarySI);
    }
    node.allocatable = node.capacity;
    if (stats.podsMemoryAvailableBytes && stats.podsMemoryWorkingSetBytes) {
      node.allocatable["memory"] = policy::Quantity::fromValue(
          std::int64_t(*stats.podsMemoryAvailableBytes + *stats.podsMemoryWorkingSetBytes),
          policy::QuantityFormat::BinarySI);
    }
  }
  // The conditions this agent observes (for admission's node-pressure rules).
  for (const std::string& condition : lastDecision_.conditions) {
    auto it = std::find_if(node.conditions.begin(), node.conditions.end(),
                           [&](const policy::NodeCondition& c) { return c.type == condition; });
    if (it == node.conditions.end()) {
      node.conditions.push_back({condition, "True"});
    } else {
      it->status = "True";
    }
  }
  const std::string nodeName = node.name;
  snapshot.nodes.push_back(std::move(node));

  std::set<std::string, std::less<>> known;
  for (const policy::Pod& pod : set.pods) {
    policy::Pod copy = pod;
    copy.nodeName = nodeName;  // every pod of a static source is this node's
    known.insert(copy.uid);
    snapshot.pods.push_back(std::move(copy));
  }
  // Pod cgroups without a pod object still use memory: they rank as priority 0 with no
  // requests, and are reported once.
  std::vector<policy::Pod> unknown;
  for (const auto& [uid, cgroup] : pods_.pods()) {
    if (known.contains(uid)) continue;
    policy::Pod pod;
    pod.ns = "unknown";
    pod.name = uid;
    pod.uid = uid;
    pod.nodeName = nodeName;
    pod.phase = "Running";
    unknown.push_back(std::move(pod));
    if (unknownReported_.insert(uid).second) {
      server::logEvent(server::LogLevel::Warn, "pod-without-object",
               {{"uid", uid},
                {"cgroup", cgroup->relativePath},
                {"treated_as", "priority 0, no requests"},
                {"source", source_->describe()}});
    }
  }
  policy::resolvePods(unknown, snapshot.priorityClasses);
  for (policy::Pod& pod : unknown) snapshot.pods.push_back(std::move(pod));
  snapshot.stats[nodeName] = scan.summary;
  // The kubelet's eviction message names the containers over their request. cgroups give
  // usage per pod; a pod with one container used all of it in that container. (Pods with
  // several containers need the runtime's container IDs to split it: the Kubernetes source.)
  std::map<std::string_view, const policy::Pod*> byUid;
  for (const policy::Pod& pod : snapshot.pods) byUid.emplace(pod.uid, &pod);
  for (policy::PodStats& stats : snapshot.stats[nodeName].pods) {
    auto it = byUid.find(stats.uid);
    if (it == byUid.end() || !stats.memoryWorkingSetBytes || !stats.containers.empty()) continue;
    if (it->second->containers.size() != 1) continue;
    policy::ContainerStats container;
    container.name = it->second->containers[0].name;
    container.memoryWorkingSetBytes = stats.memoryWorkingSetBytes;
    stats.containers.push_back(std::move(container));
  }
  snapshot_ = std::move(snapshot);
}

policy::NodeView Agent::currentView() const {
  const std::string name = snapshot_.nodes.empty() ? options_.nodeName : snapshot_.nodes[0].name;
  policy::NodeView view = policy::makeNodeView(snapshot_, name);
  if (!inFlight_.empty() || !evicted_.empty() || !backOff_.empty() || fullScanDone_) {
    // Pods being terminated are never chosen again; their usage still counts for the node.
    policy::NodeView kept = view;
    kept.pods.clear();
    kept.podStats.clear();
    for (std::size_t i = 0; i < view.pods.size(); ++i) {
      const std::string& uid = view.pods[i]->uid;
      // In flight, evicted, backing off after a failed eviction, or not running here (a
      // manifest whose cgroup does not exist): not a candidate. Their usage still counts.
      if (inFlight_.contains(uid) || evicted_.contains(uid) || backOff_.contains(uid) ||
          pods_.find(uid) == nullptr) {
        continue;
      }
      kept.pods.push_back(view.pods[i]);
      kept.podStats.push_back(view.podStats[i]);
    }
    policy::assignKeyOrder(kept);
    return kept;
  }
  return view;
}

void Agent::refreshPodCgroups() {
  auto refreshed = pods_.refresh();
  if (!refreshed) {
    const std::string& message = refreshed.error().message;
    if (reportedErrors_.emplace(message, "").second) {
      server::logEvent(server::LogLevel::Error, "cgroup-refresh-failed", {{"error", message}});
    }
    return;
  }
  for (const Error& error : refreshed->errors) {
    if (reportedErrors_.emplace(error.message, "").second) {
      server::logEvent(server::LogLevel::Warn, "cgroup-problem", {{"error", error.message}});
    }
  }
  const SteadyTime now = std::chrono::steady_clock::now();
  std::erase_if(backOff_, [&](const auto& entry) { return entry.second <= now; });
  // An evicted pod is a candidate again once its cgroup is gone or runs processes again.
  for (auto it = evicted_.begin(); it != evicted_.end();) {
    const cgroups::PodCgroup* pod = pods_.find(*it);
    auto processes = pod ? cgroups::readProcsRecursive(pod->memory)
                         : Result<std::vector<pid_t>>(std::vector<pid_t>{});
    if (pod != nullptr && processes && processes->empty()) {
      ++it;
      continue;
    }
    if (pod != nullptr) server::logEvent(server::LogLevel::Info, "pod-running-again", {{"uid", *it}});
    it = evicted_.erase(it);
  }
}

policy::EvictionResult Agent::observe(bool full, SteadyTime now, cgroups::ScanResult& scan) {
  if (full) refreshPodCgroups();
  cgroups::ScanOptions scanOptions = options_.scan;
  scanOptions.podFigures = full;
  scan = cgroups::scanNode(pods_, scanOptions, now);
  for (const Error& error : scan.errors) {
    if (reportedErrors_.emplace(error.message, "").second) {
      server::logEvent(server::LogLevel::Warn, "read-problem", {{"error", error.message}});
    }
  }
  if (reportedErrors_.size() > 1000) reportedErrors_.clear();  // bounded; may re-log later
  rebuildSnapshot(scan, full);
  if (full) {
    ++fullScans_;
    fullScanDone_ = true;
    lastFullScan_ = now;
    scanDuration_->observe({}, std::chrono::duration<double>(scan.duration).count());
  }
  return policy::evaluateEviction(currentView(), policy_, state_, now, policy::Rankings::Needed);
}

bool Agent::pressureNear(const policy::EvictionDecision& decision) const {
  for (const policy::SignalStatus& status : decision.signals) {
    if (status.met) return true;
    // Within half the threshold (or the minimum reclaim, if larger) above it.
    const std::int64_t margin = std::max(status.threshold / 2, status.minReclaim);
    if (status.available < status.threshold + margin) return true;
  }
  return false;
}

void Agent::cycle(const char* trigger) {
  if (stopped_) return;
  cyclePosted_ = false;
  const SteadyTime now = std::chrono::steady_clock::now();
  ++cycles_;
  cyclesTotal_->add({trigger});

  if (policyFileChanged()) reloadPolicy();
  const bool sourceChanged = source_->refresh();
  for (const std::string& problem : source_->takeProblems()) {
    server::logEvent(server::LogLevel::Warn, "pod-source-problem", {{"problem", problem}});
  }
  // Every pod is read on the first cycle, on anything but the plain timer (a kernel
  // notification, an eviction that completed, a grace period that ended), while evictions
  // are in flight or a threshold is near, and every kFullScanEvery.
  bool full = !fullScanDone_ || sourceChanged || std::string_view(trigger) != "timer" ||
              !inFlight_.empty() || now - lastFullScan_ >= kFullScanEvery ||
              pressureNear(lastDecision_);
  cgroups::ScanResult scan;
  policy::EvictionResult result = observe(full, now, scan);
  if (!full && pressureNear(result.decision)) {
    full = true;
    result = observe(true, now, scan);
  }
  const policy::NodeView view = currentView();

  // When did each newly met threshold start being met?
  for (const policy::SignalStatus& status : result.decision.signals) {
    const std::string key = thresholdKey(status.key);
    const bool wasMet = state_.met.contains(status.key);
    if (status.met && !wasMet) {
      // A kernel notification dates the crossing exactly. With polling the agent only knows
      // it happened since the last observation below the threshold: that time is used, so
      // the latency figure is an upper bound, never flattering.
      SteadyTime crossed = now;
      if (notifiedAt_) {
        crossed = *notifiedAt_;
      } else if (auto last = lastObserved_.find(key); last != lastObserved_.end()) {
        crossed = last->second.at;
      }
      crossedAt_[key] = crossed;
    } else if (!status.met) {
      crossedAt_.erase(key);
    }
    lastObserved_[key] = {status.available, now};
  }
  notifiedAt_.reset();
  state_ = std::move(result.next);
  lastDecision_ = std::move(result.decision);

  // Follow a kernel notification closely while pressure is near and nothing is met yet.
  const std::string_view why(trigger);
  const bool anyMet = std::any_of(lastDecision_.signals.begin(), lastDecision_.signals.end(),
                                  [](const policy::SignalStatus& st) { return st.met; });
  if (why == "memory-threshold" || why == "psi" || why == "memory-poll" ||
      why == "memory-events") {
    followUpsLeft_ = 25;
  }
  if (anyMet || !pressureNear(lastDecision_)) followUpsLeft_ = 0;
  if (followUpsLeft_ > 0) {
    --followUpsLeft_;
    followUpTimer_.expires_after(std::chrono::milliseconds(20));
    followUpTimer_.async_wait([this, alive = alive_](const boost::system::error_code& ec) {
      if (!ec && *alive && !stopped_) requestCycle("notification-follow-up");
    });
  }
  act(lastDecision_, now);
  updateMetrics(lastDecision_, scan);
  if (options_.notifications) armNotifications(lastDecision_);
  scheduleGraceTimer(lastDecision_, now);

  lastCycleAt_ = now;
  if (!ready_) {
    ready_ = true;
    notifySystemd("READY=1\nSTATUS=watching " + std::to_string(view.pods.size()) + " pods");
    server::logEvent(server::LogLevel::Info, "ready",
             {{"pods", static_cast<std::int64_t>(view.pods.size())},
              {"pod_cgroups", static_cast<std::int64_t>(pods_.size())},
              {"scan_ms", millis(scan.duration)}});
  } else {
    std::string status = "watching " + std::to_string(view.pods.size()) + " pods";
    if (!lastDecision_.conditions.empty()) {
      status += "; pressure:";
      for (const std::string& c : lastDecision_.conditions) status += " " + c;
    }
    notifySystemd("WATCHDOG=1\nSTATUS=" + status);
  }
  if (onCycle) onCycle(lastDecision_);
}

void Agent::act(const policy::EvictionDecision& decision, SteadyTime now) {
  std::set<std::string> busySignals;
  for (const auto& [uid, signal] : inFlight_) busySignals.insert(signal);
  for (const policy::Eviction& eviction : decision.evict) {
    const std::string signal(policy::toString(eviction.signal));
    const policy::Pod& pod = *eviction.pod;
    if (busySignals.contains(signal)) {
      // An earlier victim for this signal is still exiting: its memory is not free yet, and
      // counting it twice would evict more pods than the pressure needs.
      continue;
    }
    if (inFlight_.contains(pod.uid)) continue;
    if (options_.dryRun) {
      auto logged = dryRunLogged_.find(pod.uid);
      if (logged != dryRunLogged_.end() && now - logged->second < 30s) continue;
      dryRunLogged_[pod.uid] = now;
    }
    const policy::SignalStatus* status = nullptr;
    for (const policy::SignalStatus& s : decision.signals) {
      if (s.key.signal == eviction.signal && s.key.hard == eviction.hard) status = &s;
    }
    EvictionOrder order{
        pod.uid, pod.key, signal, eviction.hard, eviction.gracePeriodSeconds, eviction.message};
    EvictionRecord record;
    record.pod = pod.key;
    record.uid = pod.uid;
    record.signal = signal;
    record.hard = eviction.hard;
    record.gracePeriodSeconds = eviction.gracePeriodSeconds;
    record.message = eviction.message;
    record.dryRun = options_.dryRun;
    const std::string key = signal + (eviction.hard ? "/hard" : "/soft");
    record.crossedAt = crossedAt_.contains(key) ? crossedAt_[key] : now;
    const std::size_t index = evictions_.size();
    evictions_.push_back(record);
    if (!options_.dryRun) inFlight_[pod.uid] = signal;

    actuator_->evict(order, [this, alive = alive_, index](const EvictionOutcome& outcome) {
      if (!*alive) return;
      evictions_[index].outcome = outcome;
      onOutcome(outcome);
      if (onEviction) onEviction(evictions_[index]);
    });
    EvictionRecord& stored = evictions_[index];
    stored.signalledAt = std::chrono::steady_clock::now();
    stored.latencyMs = millis(stored.signalledAt - stored.crossedAt);
    if (options_.dryRun) {
      dryRunTotal_->add({signal});
    } else {
      evictionsTotal_->add({signal, eviction.hard ? "hard-threshold" : "soft-threshold"});
      evictionLatency_->observe({}, stored.latencyMs / 1000.0);
    }
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
    if (onEviction) onEviction(stored);
  }
  reportStuckThresholds(decision);
}

void Agent::reportStuckThresholds(const policy::EvictionDecision& decision) {
  // The kubelet says "unable to evict any pods from the node" when a threshold calls for an
  // eviction and no pod can go; say it once per episode, with each pod's reason.
  for (const policy::SignalStatus& status : decision.signals) {
    const std::string key = thresholdKey(status.key);
    if (!status.actionable) {
      stuckLogged_.erase(key);
      continue;
    }
    const bool acted =
        std::any_of(decision.evict.begin(), decision.evict.end(),
                    [&](const policy::Eviction& e) { return e.signal == status.key.signal; });
    const std::string signal(policy::toString(status.key.signal));
    const bool waiting = std::any_of(inFlight_.begin(), inFlight_.end(),
                                     [&](const auto& entry) { return entry.second == signal; });
    if (acted || waiting || options_.dryRun || !stuckLogged_.insert(key).second) continue;
    const policy::Ranking* ranking = &decision.memory;
    if (status.key.signal == Signal::PidAvailable && decision.pids) ranking = &*decision.pids;
    if (status.key.signal != Signal::PidAvailable && status.key.signal != Signal::MemoryAvailable &&
        status.key.signal != Signal::AllocatableMemoryAvailable && decision.ephemeralStorage) {
      ranking = &*decision.ephemeralStorage;
    }
    std::string reasons;
    for (const policy::RankedPod& ranked : ranking->pods) {
      if (!reasons.empty()) reasons += "; ";
      reasons += ranked.pod->key + ": " +
                 (ranked.evictable ? std::string("evictable") : ranked.notEvictableReason);
    }
    if (reasons.empty()) reasons = "no pods on the node";
    server::logEvent(server::LogLevel::Warn, "no-evictable-pod",
             {{"signal", signal},
              {"kind", status.key.hard ? "hard" : "soft"},
              {"available", status.available},
              {"threshold", status.threshold},
              {"pods", reasons},
              {"reason", "unable to evict any pods from the node"}});
  }
}

void Agent::onOutcome(const EvictionOutcome& outcome) {
  inFlight_.erase(outcome.uid);
  if (outcome.dryRun) return;
  if (outcome.emptied) {
    evicted_.insert(outcome.uid);
  } else {
    backOff_[outcome.uid] = std::chrono::steady_clock::now() + kBackOff;
  }
  server::logEvent(outcome.emptied ? server::LogLevel::Info : server::LogLevel::Error,
           outcome.emptied ? "evicted" : "eviction-failed",
           {{"pod", outcome.pod},
            {"uid", outcome.uid},
            {"method", outcome.method},
            {"processes", static_cast<std::int64_t>(outcome.processes)},
            {"elapsed_ms", outcome.elapsed.count() / 1000.0},
            {"error", outcome.error}});
  // The pod's memory is back: decide again with fresh figures now instead of waiting for the
  // timer. A failure frees nothing; the next regular cycle goes on without that pod.
  if (outcome.emptied) requestCycle("eviction-done");
}

void Agent::armPsi() {
  // A system-wide memory PSI trigger wakes a cycle as soon as tasks stall on memory. Without
  // CAP_SYS_RESOURCE the kernel only accepts windows in multiples of 2 s.
  const std::uint64_t window = cgroups::hasCapSysResource() ? 1'000'000 : 2'000'000;
  const std::string path = options_.scan.procRoot + "/pressure/memory";
  addPsiNotifier(cgroups::PsiTrigger::arm(path, cgroups::PressureKind::Some, 100'000, window),
                 "PSI trigger");

  // On cgroup v2 the kubepods cgroup itself reports: a PSI trigger on its memory.pressure
  // (stalls of the pods only, not of the whole machine) and memory.events (high, max, oom,
  // oom_kill: the kernel reclaiming at the limit or killing) through inotify.
  const cgroups::CgroupDir& kubepods = pods_.kubepodsMemory();
  if (kubepods.valid() && kubepods.version() == cgroups::Version::V2) {
    addPsiNotifier(
        cgroups::PsiTrigger::armAt(kubepods, "memory", cgroups::PressureKind::Some, 100'000, window),
        "PSI trigger on kubepods");
    auto events = cgroups::FileModifiedWatcher::watch(kubepods.path() + "/memory.events");
    if (events) {
      auto entry = std::make_shared<Notifier>(io_);
      entry->name = "inotify " + events->path();
      entry->events = std::move(events).value();
      entry->descriptor.assign(::dup(entry->events->fd()));
      notifiers_.push_back(entry);
      watchNotifier(entry);
    } else {
      server::logEvent(server::LogLevel::Warn, "notification-unavailable",
               {{"what", "memory.events watch"},
                {"error", events.error().message},
                {"fallback", "polling"}});
    }
  }
  notificationsGauge_->set({}, double(notifiers_.size()));
}

void Agent::addPsiNotifier(Result<cgroups::PsiTrigger> trigger, const char* what) {
  if (!trigger) {
    server::logEvent(server::LogLevel::Warn, "notification-unavailable",
             {{"what", what}, {"error", trigger.error().message}, {"fallback", "polling"}});
    return;
  }
  auto entry = std::make_shared<Notifier>(io_);
  entry->name = "PSI " + trigger->path() + " \"" + trigger->trigger() + "\"";
  entry->psi = std::move(trigger).value();
  entry->descriptor.assign(::dup(entry->psi->fd()));
  notifiers_.push_back(entry);
  watchNotifier(entry);
}

void Agent::armNotifications(const policy::EvictionDecision& decision) {
  // v1 memory thresholds at the usage where each memory threshold would be met, as the
  // kubelet's memory threshold notifier computes it: capacity − threshold + inactive_file.
  // The same usage lines are polled (cgroups/detect.h): the only fast detector on v2, and a
  // second opinion on v1.
  const cgroups::Hierarchy& h = pods_.hierarchy();
  const bool eventfds = h.memoryVersion == cgroups::Version::V1 && options_.kernelWakeups;
  if (h.memoryVersion != cgroups::Version::V1 && !thresholdsUnsupportedLogged_) {
    thresholdsUnsupportedLogged_ = true;
    server::logEvent(server::LogLevel::Info, "notification-unavailable",
             {{"what", "memory thresholds"},
              {"error", "cgroup v2 has no cgroup.event_control"},
              {"fallback", "PSI triggers, memory.events and adaptive polling of memory.current"}});
  }
  std::vector<std::uint64_t> nodeLines;
  std::vector<std::uint64_t> kubepodsLines;
  std::string buffer;
  for (const policy::SignalStatus& status : decision.signals) {
    const bool node = status.key.signal == Signal::MemoryAvailable;
    if (!node && status.key.signal != Signal::AllocatableMemoryAvailable) continue;
    if (status.threshold <= 0 || status.capacity <= 0) continue;
    const cgroups::CgroupDir* dir = node ? &pods_.rootMemory() : &pods_.kubepodsMemory();
    if (!dir->valid()) continue;
    auto memory = cgroups::readMemory(*dir, buffer);
    if (!memory) continue;
    const std::int64_t usageThreshold =
        status.capacity - status.threshold + std::int64_t(memory->inactiveFile);
    if (usageThreshold <= 0) continue;
    (node ? nodeLines : kubepodsLines).push_back(std::uint64_t(usageThreshold));
    if (!eventfds) continue;
    const std::string key = thresholdKey(status.key);
    auto armed = armedThresholds_.find(key);
    // Re-arm only when the point moved by more than 1 MiB (inactive_file drifts all the time).
    if (armed != armedThresholds_.end() &&
        std::llabs(std::int64_t(armed->second) - usageThreshold) < (1 << 20)) {
      continue;
    }
    auto notifier = cgroups::MemoryThresholdNotifier::arm(*dir, std::uint64_t(usageThreshold));
    if (!notifier) {
      if (reportedErrors_.emplace(notifier.error().message, "").second) {
        server::logEvent(server::LogLevel::Warn, "notification-unavailable",
                 {{"what", "memory threshold"},
                  {"error", notifier.error().message},
                  {"fallback", "polling"}});
      }
      continue;
    }
    auto entry = std::make_shared<Notifier>(io_);
    entry->name = "memory threshold " + key + " at " + std::to_string(usageThreshold) +
                  " bytes on " + dir->path();
    entry->threshold = std::move(notifier).value();
    entry->descriptor.assign(::dup(entry->threshold->fd()));
    // Replace the old notifier for this key; arming first means no crossing is missed.
    std::erase_if(notifiers_, [&](const std::shared_ptr<Notifier>& n) {
      return n->threshold && n->name.starts_with("memory threshold " + key + " ");
    });
    notifiers_.push_back(entry);
    armedThresholds_[key] = std::uint64_t(usageThreshold);
    watchNotifier(entry);
    // v1 only reports crossings: usage already past the new point will never notify.
    if (memory->usage >= std::uint64_t(usageThreshold)) requestCycle("memory-threshold");
    server::logEvent(server::LogLevel::Debug, "notification-armed", {{"what", entry->name}});
  }
  setPollLines(true, std::move(nodeLines));
  setPollLines(false, std::move(kubepodsLines));
  notificationsGauge_->set({}, double(notifiers_.size() + pollers_.size()));
}

void Agent::setPollLines(bool node, std::vector<std::uint64_t> lines) {
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
    poller->name = std::string("poll ") + (dir.version() == cgroups::Version::V2
                                               ? "memory.current"
                                               : "memory.usage_in_bytes") +
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
  tuning.ceiling = interval();
  poller->poller->setTuning(tuning);
  poller->poller->setLines(std::move(lines));
  if (!poller->scheduled) schedulePoll(poller, std::chrono::nanoseconds(0));
}

void Agent::schedulePoll(const std::shared_ptr<LinePoller>& poller,
                         std::chrono::nanoseconds delay) {
  poller->scheduled = true;
  poller->timer.expires_after(delay);
  std::weak_ptr<LinePoller> weak = poller;
  poller->timer.async_wait([this, alive = alive_, weak](const boost::system::error_code& ec) {
    auto self = weak.lock();
    if (ec || !*alive || stopped_ || !self) return;
    self->scheduled = false;
    auto sample = self->poller->poll(std::chrono::steady_clock::now());
    if (!sample) {
      // Stopped until the next cycle sets its lines again; logged once per error text.
      if (reportedErrors_.emplace(sample.error().message, "").second) {
        server::logEvent(server::LogLevel::Warn, "notification-unavailable",
                 {{"what", self->name}, {"error", sample.error().message}, {"fallback", "timer"}});
      }
      return;
    }
    if (sample->crossed) {
      notifiedAt_ = notifiedAt_ ? std::min(*notifiedAt_, sample->crossedAfter)
                                : sample->crossedAfter;
      requestCycle("memory-poll");
    }
    schedulePoll(self, sample->next);
  });
}

void Agent::watchNotifier(const std::shared_ptr<Notifier>& notifier) {
  const auto wait = notifier->threshold || notifier->events ? asio::posix::stream_descriptor::wait_read
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
          auto changes = self->events->consume();
          if (!changes) return;  // the watch was dropped (the cgroup went away)
        }
        notifiedAt_ = std::chrono::steady_clock::now();
        requestCycle(self->threshold ? "memory-threshold"
                     : self->psi     ? "psi"
                                     : "memory-events");
        watchNotifier(self);
      });
}

std::vector<std::string> Agent::armedNotifications() const {
  std::vector<std::string> names;
  for (const auto& notifier : notifiers_) names.push_back(notifier->name);
  for (const auto& poller : pollers_) names.push_back(poller->name);
  return names;
}

void Agent::updateMetrics(const policy::EvictionDecision& decision,
                          const cgroups::ScanResult& scan) {
  auto& available = (*signalAvailable_);
  auto& met = (*thresholdMet_);
  available.clear();
  met.clear();
  for (const policy::SignalStatus& status : decision.signals) {
    const std::string signal(policy::toString(status.key.signal));
    available.set({signal}, double(status.available));
    met.set({signal, status.key.hard ? "hard" : "soft"}, status.met ? 1 : 0);
  }
  auto& conditions = (*nodeCondition_);
  for (const char* condition : {"MemoryPressure", "DiskPressure", "PIDPressure"}) {
    const bool holds = std::find(decision.conditions.begin(), decision.conditions.end(),
                                 condition) != decision.conditions.end();
    conditions.set({condition}, holds ? 1 : 0);
  }
  podsGauge_->set({}, double(decision.memory.pods.size()));
  (void)scan;
}

void Agent::notifySystemd(const std::string& state) const {
  if (!options_.systemdNotify || std::getenv("NOTIFY_SOCKET") == nullptr) return;
  ::sd_notify(0, state.c_str());
}

policy::OrderedJson Agent::stateJson() {
  const policy::NodeView view = currentView();
  auto result = policy::evaluateEviction(view, policy_, state_, std::chrono::steady_clock::now(),
                                         policy::Rankings::All);
  return policy::evictionToJson(result.decision);
}

server::HttpResponse Agent::reviewBinding(const server::HttpRequest& request) {
  // This node as the agent sees it (its pods, its live pressure conditions) plus the
  // unscheduled pods its source knows (the pod under review is one of them). A binding to
  // another node is not this agent's to judge: the webhook fails open and says so.
  policy::Snapshot cluster;
  cluster.nodes = snapshot_.nodes;
  cluster.pods = snapshot_.pods;
  const PodSet& set = source_->current();
  cluster.pods.insert(cluster.pods.end(), set.pending.begin(), set.pending.end());
  cluster.priorityClasses = snapshot_.priorityClasses;
  cluster.podDisruptionBudgets = snapshot_.podDisruptionBudgets;
  SnapshotClusterCache cache(std::move(cluster));
  RecordingAdmissionActions recorder;  // static source: decided, not acted on
  AdmissionActions& actions =
      options_.admissionActions != nullptr ? *options_.admissionActions : recorder;
  BindingWebhookOptions webhookOptions;
  webhookOptions.onReview = [this](const ReviewRecord& record) {
    if (record.verdict != "allow-unchecked")
      admissionsTotal_->add({record.verdict, record.reason});
    std::string victims;
    for (const auto& victim : record.victims) victims += (victims.empty() ? "" : ",") + victim;
    server::logEvent(record.allowed ? server::LogLevel::Info : server::LogLevel::Warn, "admission-review",
             {{"pod", record.pod},
              {"node", record.node},
              {"verdict", record.verdict},
              {"reason", record.reason},
              {"message", record.message},
              {"victims", victims},
              {"dry_run", record.dryRun},
              {"acted", record.acted && options_.admissionActions != nullptr}});
  };
  BindingWebhook webhook(cache, actions, policy_, nullptr, std::move(webhookOptions));
  return webhook.handle(request);
}

server::HttpResponse Agent::handle(const server::HttpRequest& request) {
  std::string path = request.target.substr(0, request.target.find('?'));
  const bool get = request.method == "GET" || request.method == "HEAD";
  auto methodNotAllowed = [&] {
    return errorResponse(405, request.method + " is not allowed on " + path);
  };
  if (path == "/healthz") {
    if (!get) return methodNotAllowed();
    const auto age = std::chrono::steady_clock::now() - lastCycleAt_;
    policy::OrderedJson body;
    const bool healthy = ready_ && !stopped_ && age <= 3 * interval();
    body["status"] = healthy ? "ok" : "stalled";
    body["lastCycleSecondsAgo"] = ready_ ? std::chrono::duration<double>(age).count() : -1.0;
    return jsonResponse(healthy ? 200 : 503, body);
  }
  if (path == "/readyz") {
    if (!get) return methodNotAllowed();
    policy::OrderedJson body;
    body["status"] = ready_ ? "ready" : "not ready: no full scan yet";
    return jsonResponse(ready_ ? 200 : 503, body);
  }
  if (path == "/metrics") {
    if (!get) return methodNotAllowed();
    return server::HttpResponse{200, "text/plain; version=0.0.4; charset=utf-8", metrics_.render()};
  }
  if (path == "/v1/state") {
    if (!get) return methodNotAllowed();
    if (!ready_) return errorResponse(503, "no full scan yet");
    return jsonResponse(200, stateJson());
  }
  if (path == "/v1/admit" || path == "/v1/admission-review") {
    if (!options_.admissionRoutes) {
      return errorResponse(404, "no such path: " + path +
                                    " (the admission routes are off: start the agent with "
                                    "--admission-routes)");
    }
    if (options_.http && !options_.http->tlsClientCaFile.empty() &&
        !request.clientCertificateVerified) {
      return errorResponse(403, request.method + " " + path +
                                    " needs a client certificate signed by the --tls-client-ca "
                                    "authority");
    }
  }
  if (path == "/v1/admit") {
    if (request.method != "POST") return methodNotAllowed();
    if (!ready_) return errorResponse(503, "no full scan yet");
    policy::Diagnostics diagnostics;
    auto json = policy::parseKubernetesJsonText(request.body, diagnostics);
    std::optional<policy::Pod> pod;
    if (json) pod = policy::parsePod(*json, "", diagnostics);
    if (!pod) return errorResponse(400, "request body: " + diagnostics.joined());
    policy::resolvePod(*pod, snapshot_.priorityClasses);
    const policy::ClusterIndex cluster = policy::buildClusterIndex(snapshot_);
    const policy::NodeInfo* node = cluster.find(snapshot_.nodes.at(0).name);
    if (node == nullptr) return errorResponse(503, "this node is not known yet");
    const policy::AdmissionDecision decision =
        policy::admitPod(*pod, *node, snapshot_.podDisruptionBudgets, policy_);
    admissionsTotal_->add({policy::verdictName(decision.verdict), decision.reason});
    server::logEvent(server::LogLevel::Info, "admission",
             {{"pod", decision.pod},
              {"verdict", policy::verdictName(decision.verdict)},
              {"reason", decision.reason},
              {"message", decision.message}});
    return jsonResponse(200, policy::admissionToJson(decision));
  }
  if (path == "/v1/admission-review") {
    if (request.method != "POST") return methodNotAllowed();
    if (!ready_) return errorResponse(503, "no full scan yet");
    return reviewBinding(request);
  }
  return errorResponse(404, "no such path: " + path +
                                (options_.admissionRoutes
                                     ? " (try /healthz, /readyz, /metrics, /v1/state, POST "
                                       "/v1/admit, POST /v1/admission-review)"
                                     : " (try /healthz, /readyz, /metrics, /v1/state)"));
}

}  // namespace nodewarden::agent
