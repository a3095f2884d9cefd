// The node daemon (`nodewarden agent`): one single-threaded Boost.Asio loop that runs the
// pipeline of this folder, one cycle at a time:
//
//   observe   detectors.h wakes a cycle (kernel notification, poller) besides the timer;
//             cgroups/ scans the pods, snapshot_builder.h makes the snapshot
//   decide    policy::evaluateEviction over the pods eviction_tracker.h still allows
//   act       actuator.h kills through the cgroups (or, --dry-run, only says so)
//   publish   agent_metrics.h, the log, systemd's status, routes.h's /v1/state
//
// A cycle runs at every housekeepingInterval (the timer re-arms from its previous expiry) and
// at once when a detector fires. After an eviction no new victim is chosen for the same
// signal until the evicted pod's cgroup is empty, and then the next cycle runs immediately
// with fresh figures; a pod being terminated is never chosen twice.
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
#include <boost/asio/steady_timer.hpp>

#include "base/clock.h"
#include "cgroups/pods.h"
#include "cgroups/readers.h"
#include "node/actuator.h"
#include "node/agent_metrics.h"
#include "node/detectors.h"
#include "node/eviction_journal.h"
#include "node/eviction_tracker.h"
#include "node/pod_source.h"
#include "node/recorder.h"
#include "node/trigger.h"
#include "policy/eviction.h"
#include "policy/policy.h"
#include "server/http_server.h"

namespace nodewarden::webhook {
class AdmissionActions;  // webhook/admission_actions.h
}

namespace nodewarden::node {

struct AgentOptions {
  std::string nodeName;
  std::optional<std::string> policyPath;  // nullopt: the built-in defaults, never reloaded
  cgroups::ScanOptions scan;
  bool dryRun = false;
  // Kernel notifications and the poller (detectors.h). Off: the timer only, at the policy's
  // housekeepingInterval (for comparisons in the benchmarks).
  bool notifications = true;
  // With notifications on: false keeps the adaptive memory poller alone (DetectorOptions).
  bool kernelWakeups = true;
  // Overrides the policy's housekeepingInterval when set (benchmarks: the kubelet's 10 s).
  std::optional<std::chrono::milliseconds> intervalOverride;
  std::optional<server::HttpServerOptions> http;  // nullopt: no HTTP server
  // POST /v1/admit and /v1/admission-review can lead to evictions: served only when set
  // (otherwise 404), and, when http->tlsClientCaFile is set, only to a client whose
  // certificate verified (otherwise 403). docs/reference.md §7.
  bool admissionRoutes = false;
  bool systemdNotify = true;  // sd_notify READY/STATUS/WATCHDOG when under systemd
  // Evictions under way, kept on disk so that a restarted agent finishes them
  // (eviction_journal.h). nullopt: none kept.
  std::optional<std::string> journalPath;
  // What a `preempt` verdict at POST /v1/admission-review does (evict the victims, nominate
  // the pod): the API writer with --source kubernetes; null: verdicts only, nothing acts.
  webhook::AdmissionActions* admissionActions = nullptr;
  // The flight recorder (recorder.h): episodes and decision records. nullopt: none.
  std::optional<RecorderOptions> recorder;
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
        const ActuatorFactory& makeActuator, const Clock& clock = steadyClock());
  ~Agent();
  Agent(const Agent&) = delete;
  Agent& operator=(const Agent&) = delete;

  // Runs the first cycle, arms the detectors and the timer, starts the HTTP server. An error
  // (e.g. the port is taken) leaves nothing running.
  Result<void> start();
  // Stops timers, detectors and the HTTP server so io_context::run() can return.
  void stop();
  bool stopped() const { return stopped_; }

  // Re-reads the policy file. An invalid file is rejected with its errors logged, and the
  // last good policy stays. Returns whether the new policy was taken.
  bool reloadPolicy();

  // Runs one cycle now (tests and benchmarks drive time this way too).
  void cycle(Trigger trigger);

  // The HTTP routes of docs/reference.md §7 (routes.h).
  server::HttpResponse handle(const server::HttpRequest& request);
  // `explain eviction -o json` for this node, live.
  policy::OrderedJson stateJson() const;
  std::string metricsText() const { return metrics_.registry.render(); }

  const std::vector<EvictionRecord>& evictions() const { return tracker_.records(); }
  // Evictions ordered whose pod's processes are not gone yet.
  std::size_t inFlight() const { return tracker_.inFlightCount(); }
  // Called after every eviction order and every completion (the demo's live view).
  std::function<void(const EvictionRecord&)> onEviction;
  // Called after every cycle with its decision.
  std::function<void(const policy::EvictionDecision&)> onCycle;

  const AgentOptions& options() const { return options_; }
  const policy::Policy& policy() const { return policy_; }
  const cgroups::PodCgroups& podCgroups() const { return pods_; }
  // The last cycle's snapshot, and the unscheduled pods the source knows (admission).
  const policy::Snapshot& snapshot() const { return snapshot_; }
  const std::vector<policy::Pod>& pendingPods() const { return source_->current().pending; }
  AgentMetrics& metrics() { return metrics_; }
  Recorder* recorder() { return recorder_.get(); }
  const Clock& clock() const { return clock_; }
  std::uint16_t httpPort() const { return http_ ? http_->port() : 0; }
  bool ready() const { return ready_; }
  // Ready, not stopped, and a cycle within three intervals.
  bool healthy() const;
  std::optional<SteadyTime> lastCycleAt() const;
  std::uint64_t cycles() const { return cycles_; }
  std::uint64_t fullScans() const { return fullScans_; }
  std::chrono::milliseconds interval() const;
  // Which detectors are armed, for logs and tests ("memory threshold …", "PSI …").
  std::vector<std::string> armedNotifications() const { return detectors_.armed(); }

 private:
  // The cycle's steps, in order.
  bool wantsFullScan(Trigger trigger, SteadyTime now) const;
  policy::EvictionResult observe(bool full, SteadyTime now, cgroups::ScanResult& scan);
  void refreshPodCgroups(SteadyTime now);
  policy::NodeView candidateView() const;
  void followNotification(Trigger trigger);
  void act(const policy::EvictionDecision& decision, SteadyTime now);
  void evict(const policy::Eviction& eviction, const policy::EvictionDecision& decision,
             SteadyTime now);
  void reportStuckThresholds(const policy::EvictionDecision& decision);
  void publish(const policy::EvictionDecision& decision, const cgroups::ScanResult& scan,
               std::size_t pods);
  void onOutcome(std::size_t record, const EvictionOutcome& outcome);
  // At start: evictions a previous run left under way are taken over, once.
  void resumeJournal();
  void journal(const char* what, const Result<void>& written);

  // The loop.
  void scheduleTimer();
  void scheduleGraceTimer(const policy::EvictionDecision& decision, SteadyTime now);
  void requestCycle(Trigger trigger);
  void onWake(Trigger trigger, std::optional<SteadyTime> notifiedAt);
  bool policyFileChanged();
  void notifySystemd(const std::string& state) const;
  void logOnce(const std::string& event, const Error& error);

  boost::asio::io_context& io_;
  const Clock& clock_;
  AgentOptions options_;
  policy::Policy policy_;
  cgroups::PodCgroups pods_;
  std::unique_ptr<PodSource> source_;
  std::unique_ptr<Actuator> actuator_;
  std::unique_ptr<server::HttpServer> http_;
  AgentMetrics metrics_;
  EvictionTracker tracker_;
  std::optional<EvictionJournal> journal_;
  Detectors detectors_;
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
  std::optional<SteadyTime> notifiedAt_;  // a detector dated this cycle's wake-up
  std::set<std::string> unknownReported_;  // pod cgroups without a pod object, logged once
  std::set<std::string> reportedErrors_;   // read problems, logged once per text (bounded)
  // Thresholds that were actionable with no pod left to evict, logged once per episode.
  std::set<policy::ThresholdKey> stuckLogged_;

  // Policy file identity, to reload on change.
  std::int64_t policyMtime_ = 0;
  std::uint64_t policyInode_ = 0;
  std::int64_t policySize_ = -1;

  bool cyclePosted_ = false;
  bool ready_ = false;
  bool stopped_ = false;
  std::uint64_t cycles_ = 0;
  std::uint64_t fullScans_ = 0;
  SteadyTime lastCycleAt_{};
  std::unique_ptr<Recorder> recorder_;  // after pods_, which it reads
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

}  // namespace nodewarden::node
