// The node daemon (`nodewarden agent`): one single-threaded Boost.Asio loop that runs the
// pipeline of this folder, one cycle at a time:
//
//   observe   detectors.h wakes a cycle (kernel notification, poller) besides the timer; the
//             cycle reads the node's figures once (cgroups::readNodeFigures), and the pod
//             index and the pod source are brought up to date where they changed
//   decide    victims_first.h over the pods eviction_tracker.h still allows: the decision
//             a full scan would make, reading only the pods it can be about
//   act       one EvictionOrder per victim to actuator.h (the first signal at once), then
//             the eviction journal, then logs and metrics
//   publish   agent_metrics.h, the log, systemd's status, agent_surface.h (what routes.h
//             serves from, over run.cpp's HTTP server), and the
//             detectors' lines from the figures this cycle read
//
// The path of a threshold crossing (docs/reference.md §4.8) is therefore: detector wake-up →
// cycle → readNodeFigures → decideVictimsFirst → makeOrder → Actuator::evict (first signal)
// → journal. No disk is waited on before the first signal, and no pod is read that cannot
// change the decision.
//
// A cycle runs at every housekeepingInterval (the timer re-arms from its previous expiry) and
// at once when a detector fires. Every pod's figures are refreshed in the background, in
// slices the loop interleaves with wake-ups, after an eviction and every kRefreshEvery
// (/v1/state shows figures that old at most). After an eviction no new victim is chosen for
// the same signal until the evicted pod's cgroup is empty, and then the next cycle runs
// immediately with fresh figures; a pod being terminated is never chosen twice.
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

#include "base/clock.h"
#include "cgroups/pods.h"
#include "cgroups/readers.h"
#include "node/actuator.h"
#include "node/agent_metrics.h"
#include "node/agent_surface.h"
#include "node/detectors.h"
#include "node/eviction_journal.h"
#include "node/eviction_tracker.h"
#include "node/live_view.h"
#include "node/pod_source.h"
#include "node/recorder.h"
#include "node/trigger.h"
#include "node/victims_first.h"
#include "policy/eviction.h"
#include "policy/policy.h"

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
  // cgroup v2: kubepods' memory.high as the edge of the allocatable threshold
  // (DetectorOptions::memoryHighEdge; --memory-high-edge).
  bool memoryHighEdge = false;
  // Overrides the policy's housekeepingInterval when set (benchmarks: the kubelet's 10 s).
  std::optional<std::chrono::milliseconds> intervalOverride;
  bool systemdNotify = true;  // sd_notify READY/STATUS/WATCHDOG when under systemd
  // Evictions under way, kept on disk so that a restarted agent finishes them
  // (eviction_journal.h). nullopt: none kept.
  std::optional<std::string> journalPath;
  // The flight recorder (recorder.h): episodes and decision records. nullopt: none.
  std::optional<RecorderOptions> recorder;
  // The niceness start() gives the thread that calls it, the loop's (--nice; the unit's
  // Nice= does it for the whole process): a notification is then answered ahead of the
  // pods' busy processes instead of behind them (docs/performance.md). Refused (no
  // CAP_SYS_NICE): logged, and the agent runs at the niceness it has. nullopt: unchanged.
  std::optional<int> loopNice;
  // The realtime priority start() gives the same thread (--realtime): SCHED_FIFO at this
  // priority, 1..99, with SCHED_RESET_ON_FORK (threads and processes it starts are not
  // realtime). A woken realtime thread preempts every normal one on its core at once, where
  // nice -20 can still wait out the running task's slice; the kernel's realtime throttling
  // (sched_rt_runtime_us) bounds what a runaway loop could take. Refused (no CAP_SYS_NICE, a
  // seccomp filter, or a cgroup without realtime runtime): logged once, and the agent runs on
  // under loopNice. nullopt: no realtime policy.
  std::optional<int> loopRealtime;
};

// Makes the agent's actuator once the agent owns the pod index it acts on; the clock is the
// agent's.
using ActuatorFactory = std::function<std::unique_ptr<Actuator>(
    boost::asio::io_context&, cgroups::PodCgroups&, const Clock&)>;
ActuatorFactory cgroupActuator();  // the real one: SIGTERM, grace, SIGKILL through cgroups
ActuatorFactory dryRunActuator();  // --dry-run

class Agent final : public AgentSurface {
 public:
  Agent(boost::asio::io_context& io, AgentOptions options, policy::Policy policy,
        cgroups::PodCgroups pods, std::unique_ptr<PodSource> source,
        const ActuatorFactory& makeActuator, const Clock& clock = steadyClock());
  ~Agent();
  Agent(const Agent&) = delete;
  Agent& operator=(const Agent&) = delete;

  // Runs the first cycle, arms the detectors and the timer. An error leaves nothing running.
  // `listen`: where the routes are served ("ADDRESS:PORT" of run.cpp's HTTP server, routes.h),
  // for the agent-start log line.
  Result<void> start(const std::string& listen = "off");
  // Stops timers and detectors so io_context::run() can return.
  void stop();
  bool stopped() const { return stopped_; }

  // Re-reads the policy file. An invalid file is rejected with its errors logged, and the
  // last good policy stays. Returns whether the new policy was taken.
  bool reloadPolicy();

  // Runs one cycle now (tests and benchmarks drive time this way too).
  void cycle(Trigger trigger);

  // `explain eviction -o json` for this node, live.
  policy::OrderedJson stateJson() const override;
  std::string metricsText() const override { return metrics_.registry.render(); }

  const std::vector<EvictionRecord>& evictions() const { return tracker_.records(); }
  // Evictions ordered whose pod's processes are not gone yet.
  std::size_t inFlight() const { return tracker_.inFlightCount(); }
  // Called after every eviction order and every completion (the demo's live view).
  std::function<void(const EvictionRecord&)> onEviction;
  // Called after every cycle with its decision.
  std::function<void(const policy::EvictionDecision&)> onCycle;

  const AgentOptions& options() const { return options_; }
  const policy::Policy& policy() const override { return policy_; }
  const cgroups::PodCgroups& podCgroups() const { return pods_; }
  // The last cycle's snapshot, and the unscheduled pods the source knows (admission).
  // The node as a snapshot (for admission): built when asked, until the pods change.
  const policy::Snapshot& snapshot() const override;
  const std::vector<policy::Pod>& pendingPods() const override {
    return source_->current().pending;
  }
  AgentMetrics& metrics() override { return metrics_; }
  Recorder* recorder() override { return recorder_.get(); }
  const Clock& clock() const override { return clock_; }
  bool ready() const override { return ready_; }
  // Ready, not stopped, and a cycle within three intervals.
  bool healthy() const override;
  std::optional<SteadyTime> lastCycleAt() const override;
  std::uint64_t cycles() const { return cycles_; }
  // Reads of every pod's figures (the first cycle, background refreshes, fallbacks).
  std::uint64_t fullScans() const { return fullScans_; }
  // The last cycle's decision and, when it decided victims first, what that read.
  const policy::EvictionDecision& lastDecision() const { return lastDecision_; }
  const VictimsFirstDecision& lastVictimsFirst() const { return lastVictimsFirst_; }
  std::chrono::milliseconds interval() const;
  // Which detectors are armed, for logs and tests ("memory threshold …", "PSI …").
  std::vector<std::string> armedNotifications() const { return detectors_.armed(); }

 private:
  class FigureReader;  // victims_first.h's reader over this agent's cgroups and snapshot

  // The cycle's steps, in order.
  void observePods(Trigger trigger, SteadyTime now);
  cgroups::NodeReading observeNode();
  void readNewPods(SteadyTime now);
  policy::NodeView candidateView() const;
  // The candidate view a decision was made on (pointing into the snapshot as it is after the
  // decision's reads), and the decision.
  struct Decided {
    policy::NodeView view;
    policy::EvictionResult result;
  };
  Decided decide(const cgroups::NodeReading& node, SteadyTime now);
  std::optional<std::uint64_t> usageOfView(const cgroups::NodeReading& node);
  void followNotification(Trigger trigger);
  void act(const policy::EvictionDecision& decision, SteadyTime now);
  // `message`: the order's, when not the decision's ("": the decision's).
  std::size_t order(const policy::Eviction& eviction, std::string message, SteadyTime now);
  std::string containerMessage(const policy::Eviction& eviction,
                               const policy::EvictionDecision& decision);
  void journalOrders(const std::vector<std::size_t>& records);
  void reportOrder(std::size_t record, const policy::EvictionDecision& decision);
  void reportStuckThresholds(const policy::EvictionDecision& decision);
  void publish(const policy::EvictionDecision& decision, const cgroups::NodeReading& node,
               std::size_t pods);
  void onOutcome(std::size_t record, const EvictionOutcome& outcome);
  // At start: evictions a previous run left under way are taken over, once.
  void resumeJournal();
  void journal(const char* what, const Result<void>& written);

  // The view, kept in place: re-pointed when the pods on the node change, each pod's
  // figures overwritten where they are read (the views point at them).
  bool refreshPodCgroups(SteadyTime now, bool full);
  // Room in the descriptor table for every pod's descriptors and the server's connections,
  // made when pods arrive: an open on the way to a kill never grows the table (which waits
  // for an RCU grace period: cgroups::reserveDescriptorTable).
  void reserveDescriptors();
  void expireTracked(SteadyTime now);
  void rebuildView();
  // Reads one pod's figures into the view; nullptr when its cgroup is gone (forgotten then,
  // the view rebuilt at the next cycle).
  const policy::PodStats* readPod(const std::string& uid, SteadyTime now,
                                  std::optional<std::uint64_t>* usage = nullptr);
  void readAllPods(SteadyTime now);
  void forgetVanished(const std::vector<std::string>& uids);
  // The rest of the pods, read in slices between the loop's other work.
  void scheduleRefresh(SteadyTime now, bool evicted);
  void refreshSlice();

  // Pods that come and go between cycles are taken in as soon as the pod cgroups' watch or
  // the source says so (at most every kMaintainEvery), so that the cycle that must decide
  // finds the index and the view up to date.
  void watchPodChanges();
  void waitForChanges(boost::asio::posix::stream_descriptor& descriptor, bool& waiting);
  void maintain();

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

  // Every pod's figures are refreshed every kRefreshEvery (30 s: what /v1/state shows of an
  // idle node can be that old) and after an eviction, kRefreshSlice pods at a time; the pod
  // cgroups are listed again when their directories change, and every kRefreshEvery.
  static constexpr std::chrono::seconds kRefreshEvery{30};
  static constexpr std::size_t kRefreshSlice = 32;
  // New pod cgroups up to this many are read at once; more wait for a refresh.
  static constexpr std::size_t kReadNewAtOnce = 16;
  // Descriptors a pod cgroup holds at most (a directory and the files read, per hierarchy),
  // and those the rest of the agent may hold: the HTTP server's 64 + 1,024 connections, the
  // watches, the journal, a kill's listing.
  static constexpr std::uint64_t kDescriptorsPerPod = 10;
  static constexpr std::uint64_t kDescriptorsBesidePods = 1280;
  std::uint64_t descriptorsReserved_ = 0;
  SteadyTime lastFullScan_{};
  SteadyTime lastIndexed_{};
  bool fullScanDone_ = false;
  bool indexed_ = false;
  bool viewStale_ = true;            // the pods on the node changed: rebuild before deciding
  bool refreshWanted_ = false;       // many new pods: read them all in a refresh
  std::vector<std::string> unread_;  // new pod cgroups without figures yet
  struct Refresh {
    std::vector<std::string> uids;
    std::size_t next = 0;
    std::chrono::steady_clock::duration spent{0};
  };
  std::optional<Refresh> refresh_;
  static constexpr std::chrono::milliseconds kMaintainEvery{20};
  boost::asio::posix::stream_descriptor cgroupChanges_;
  boost::asio::posix::stream_descriptor sourceChanges_;
  int watchedCgroupFd_ = -1;
  bool cgroupWaiting_ = false;
  bool sourceWaiting_ = false;
  boost::asio::steady_timer maintainTimer_;
  bool maintainPending_ = false;
  std::string buffer_;  // reads of pod files

  // The pods decisions are made on, their figures written in place (live_view.h).
  LiveView view_;
  mutable std::optional<policy::Snapshot> admissionSnapshot_;
  double lastScanMs_ = 0;
  policy::EvictionState state_;
  policy::EvictionDecision lastDecision_;
  VictimsFirstDecision lastVictimsFirst_;
  std::set<FullScanReason> fallbackLogged_;
  std::optional<SteadyTime> notifiedAt_;   // a detector dated this cycle's wake-up
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
