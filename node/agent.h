// The agent daemon (`nodewarden agent`): one single-threaded Boost.Asio loop that watches the
// node's cgroups, evaluates the policy, evicts before the kernel has to, and serves its state.
//
//   kernel notification ─┐
//   housekeeping timer ──┴─► cycle: refresh pods + cgroups → scan → policy/ evaluate → actuator
//
// A cycle runs at every housekeepingInterval (the timer re-arms from its previous expiry) and
// at once when the kernel reports a memory threshold crossing or PSI pressure. After an
// eviction no new victim is chosen for the same signal until the evicted pod's cgroup is
// empty, and then the next cycle runs immediately with fresh figures; a pod being terminated
// is never chosen twice.
//
// Threading: every member function must be called on the loop thread (the io_context's).
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
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/steady_timer.hpp>

#include "node/actuator.h"
#include "server/http_server.h"
#include "server/metrics.h"
#include "node/pod_source.h"
#include "cgroups/detect.h"
#include "cgroups/notify.h"
#include "cgroups/pods.h"
#include "cgroups/readers.h"
#include "policy/eviction.h"
#include "policy/policy.h"

namespace nodewarden::agent {

class AdmissionActions;  // agent/webhook.h

struct AgentOptions {
  std::string nodeName;
  std::optional<std::string> policyPath;  // nullopt: the built-in defaults, never reloaded
  cgroups::ScanOptions scan;
  bool dryRun = false;
  // Kernel notifications (v1 memory thresholds, PSI triggers). Off: polling only, at the
  // policy's housekeepingInterval (for comparisons in the benchmarks).
  bool notifications = true;
  // With notifications on: false leaves out the kernel's own wake-ups (v1 threshold
  // eventfds, PSI triggers, memory.events) and keeps the adaptive memory poller alone, which
  // is all cgroup v2 offers for a usage line (benchmarks measure that path on v1 hosts).
  bool kernelWakeups = true;
  // Overrides the policy's housekeepingInterval when set (benchmarks: the kubelet's 10 s).
  std::optional<std::chrono::milliseconds> intervalOverride;
  std::optional<server::HttpServerOptions> http;  // nullopt: no HTTP server
  // POST /v1/admit and /v1/admission-review can lead to evictions: served only when set
  // (otherwise 404), and, when http->tlsClientCaFile is set, only to a client whose
  // certificate verified (otherwise 403). docs/reference.md §7.
  bool admissionRoutes = false;
  bool systemdNotify = true;              // sd_notify READY/STATUS/WATCHDOG when under systemd
  // What a `preempt` verdict at POST /v1/admission-review does (evict the victims, nominate
  // the pod): the API writer with --source kubernetes; null: verdicts only, nothing acts.
  AdmissionActions* admissionActions = nullptr;
};

// One eviction the agent ordered, for /metrics, logs, the demo's report and tests.
struct EvictionRecord {
  std::string pod;
  std::string uid;
  std::string signal;
  bool hard = true;
  std::int64_t gracePeriodSeconds = 0;
  std::string message;
  bool dryRun = false;
  SteadyTime crossedAt{};    // threshold crossing (kernel notification, or interpolated)
  SteadyTime signalledAt{};  // first signal sent to the pod's processes
  double latencyMs = 0;      // crossedAt → signalledAt
  std::optional<EvictionOutcome> outcome;  // once the actuator finished
};

// Makes the agent's actuator once the agent owns the pod index it acts on.
using ActuatorFactory =
    std::function<std::unique_ptr<Actuator>(boost::asio::io_context&, cgroups::PodCgroups&)>;
ActuatorFactory cgroupActuator();  // the real one: SIGTERM, grace, SIGKILL through cgroups
ActuatorFactory dryRunActuator();  // --dry-run

class Agent {
 public:
  Agent(boost::asio::io_context& io, AgentOptions options, policy::Policy policy,
        cgroups::PodCgroups pods, std::unique_ptr<PodSource> source,
        const ActuatorFactory& makeActuator);
  ~Agent();
  Agent(const Agent&) = delete;
  Agent& operator=(const Agent&) = delete;

  // Runs the first cycle, arms notifications and the timer, starts the HTTP server. An error
  // (e.g. the port is taken) leaves nothing running.
  Result<bool> start();
  // Stops timers, notifications and the HTTP server so io_context::run() can return.
  void stop();
  bool stopped() const { return stopped_; }

  // Re-reads the policy file. An invalid file is rejected with its errors logged, and the
  // last good policy stays. Returns whether the new policy was taken.
  bool reloadPolicy();

  // Runs one cycle now (tests and benchmarks drive time this way too).
  void cycle(const char* trigger);

  // The HTTP routes of docs/reference.md §7.
  server::HttpResponse handle(const server::HttpRequest& request);
  // `explain eviction -o json` for this node, live.
  policy::OrderedJson stateJson();
  std::string metricsText() const { return metrics_.render(); }

  const std::vector<EvictionRecord>& evictions() const { return evictions_; }
  // Called after every eviction order and every completion (the demo's live view).
  std::function<void(const EvictionRecord&)> onEviction;
  // Called after every cycle with its decision.
  std::function<void(const policy::EvictionDecision&)> onCycle;

  const policy::Policy& policy() const { return policy_; }
  const cgroups::PodCgroups& podCgroups() const { return pods_; }
  std::uint16_t httpPort() const { return http_ ? http_->port() : 0; }
  bool ready() const { return ready_; }
  std::uint64_t cycles() const { return cycles_; }
  std::uint64_t fullScans() const { return fullScans_; }
  // Which kernel notifications are armed, for logs and tests ("memory threshold …", "PSI …").
  std::vector<std::string> armedNotifications() const;

 private:
  struct Notifier;
  struct LinePoller;
  server::HttpResponse reviewBinding(const server::HttpRequest& request);
  void scheduleTimer();
  void scheduleGraceTimer(const policy::EvictionDecision& decision, SteadyTime now);
  void requestCycle(const char* trigger);
  // Reads the kernel (every pod when `full`, else the node only) and evaluates the policy.
  policy::EvictionResult observe(bool full, SteadyTime now, cgroups::ScanResult& scan);
  // A threshold is met or close: the next cycles read every pod.
  bool pressureNear(const policy::EvictionDecision& decision) const;
  void refreshPodCgroups();
  void rebuildSnapshot(const cgroups::ScanResult& scan, bool pods);
  policy::NodeView currentView() const;
  void act(const policy::EvictionDecision& decision, SteadyTime now);
  void onOutcome(const EvictionOutcome& outcome);
  void reportStuckThresholds(const policy::EvictionDecision& decision);
  void armNotifications(const policy::EvictionDecision& decision);
  void armPsi();
  void addPsiNotifier(Result<cgroups::PsiTrigger> trigger, const char* what);
  void watchNotifier(const std::shared_ptr<Notifier>& notifier);
  // Polls the root (`node`) or kubepods memory usage against `lines` (usages at which
  // thresholds are met); no lines stops it.
  void setPollLines(bool node, std::vector<std::uint64_t> lines);
  void schedulePoll(const std::shared_ptr<LinePoller>& poller, std::chrono::nanoseconds delay);
  void updateMetrics(const policy::EvictionDecision& decision, const cgroups::ScanResult& scan);
  void notifySystemd(const std::string& state) const;
  bool policyFileChanged();
  std::chrono::milliseconds interval() const;

  boost::asio::io_context& io_;
  AgentOptions options_;
  policy::Policy policy_;
  cgroups::PodCgroups pods_;
  std::unique_ptr<PodSource> source_;
  std::unique_ptr<Actuator> actuator_;
  std::unique_ptr<server::HttpServer> http_;
  boost::asio::steady_timer timer_;
  boost::asio::steady_timer graceTimer_;  // wakes a cycle when a soft grace period ends
  // After a kernel notification that did not (yet) show a threshold met — page cache charged
  // at the same moment can hold the working set just below it — cycles follow every 20 ms
  // for up to 500 ms, so the crossing is not left to the next tick.
  boost::asio::steady_timer followUpTimer_;
  int followUpsLeft_ = 0;
  SteadyTime nextTick_{};
  // Pod figures are read every cycle only while a threshold is near; otherwise every
  // kFullScanEvery (30 s: what /v1/state shows of an idle node can be that old), so an idle
  // node costs a handful of reads a second.
  static constexpr std::chrono::seconds kFullScanEvery{30};
  SteadyTime lastFullScan_{};
  bool fullScanDone_ = false;

  // The last cycle's inputs, kept so views and HTTP answers point into live data.
  policy::Snapshot snapshot_;
  policy::EvictionState state_;
  policy::EvictionDecision lastDecision_;
  std::set<std::string> unknownReported_;  // pod cgroups without a pod object, logged once
  std::map<std::string, std::string> reportedErrors_;  // error text → last time logged (dedup)

  // Evictions in flight: UID → signal. Their pods are left out of new decisions.
  std::map<std::string, std::string> inFlight_;
  // Evicted pods whose (now empty) cgroup is still there: not candidates again until their
  // cgroup goes away or processes return to it (a restarted static pod).
  std::set<std::string, std::less<>> evicted_;
  // Pods whose eviction failed (refused: e.g. the pod holds this agent; or nothing to kill):
  // left out of decisions until the time given, so the ranking moves on to other pods.
  std::map<std::string, SteadyTime, std::less<>> backOff_;
  static constexpr std::chrono::seconds kBackOff{60};
  // Thresholds that were actionable with no pod left to evict, logged once per episode.
  std::set<std::string> stuckLogged_;
  std::map<std::string, SteadyTime> dryRunLogged_;
  std::vector<EvictionRecord> evictions_;

  // Threshold-crossing estimates per signal.
  struct LastObservation {
    std::int64_t available = 0;
    SteadyTime at{};
  };
  std::map<std::string, LastObservation> lastObserved_;
  std::map<std::string, SteadyTime> crossedAt_;
  std::optional<SteadyTime> notifiedAt_;  // a kernel notification woke this cycle

  std::vector<std::shared_ptr<Notifier>> notifiers_;
  std::vector<std::shared_ptr<LinePoller>> pollers_;
  std::map<std::string, std::uint64_t> armedThresholds_;  // signal → usage threshold armed
  bool thresholdsUnsupportedLogged_ = false;

  // Policy file identity, to reload on change.
  std::int64_t policyMtime_ = 0;
  std::uint64_t policyInode_ = 0;
  std::int64_t policySize_ = -1;

  server::MetricsRegistry metrics_;
  server::CounterFamily* evictionsTotal_ = nullptr;
  server::CounterFamily* admissionsTotal_ = nullptr;
  server::CounterFamily* cyclesTotal_ = nullptr;
  server::CounterFamily* reloadsTotal_ = nullptr;
  server::CounterFamily* dryRunTotal_ = nullptr;
  server::GaugeFamily* signalAvailable_ = nullptr;
  server::GaugeFamily* thresholdMet_ = nullptr;
  server::GaugeFamily* nodeCondition_ = nullptr;
  server::GaugeFamily* podsGauge_ = nullptr;
  server::GaugeFamily* notificationsGauge_ = nullptr;
  server::HistogramFamily* evictionLatency_ = nullptr;
  server::HistogramFamily* scanDuration_ = nullptr;
  bool cyclePosted_ = false;
  bool ready_ = false;
  bool stopped_ = false;
  std::uint64_t cycles_ = 0;
  std::uint64_t fullScans_ = 0;
  SteadyTime lastCycleAt_{};
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

// `nodewarden agent …`: parses the options (docs/reference.md §1), builds the agent and runs the loop
// until SIGTERM/SIGINT. Returns the exit code.
int runAgent(const std::vector<std::string>& args);

}  // namespace nodewarden::agent
