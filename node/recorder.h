// The agent's flight recorder (docs/recording.md), always on.
//
//   every cycle   cycle(): what the decision code saw — the candidate pods and every other pod
//                 of the snapshot with its figures, the node's figures, memory PSI and
//                 memory.events of the pods' cgroup, the thresholds' observations, the plan —
//                 goes into a ring bounded in time (the pre-roll) and bytes; new kernel OOM
//                 kills are found in the OOM counters (memory.events oom_kill on cgroup v2,
//                 /proc/vmstat then each pod's memory.oom_control on v1)
//   an episode    opens when a threshold is met, an eviction is ordered or a kernel OOM kill is
//                 seen, with the ring's samples of the pre-roll before it; ends when none of
//                 that has happened for `settle` (or is cut at `maxEpisode`, or at stop())
//   decisions     each eviction order (evicted()), outcome (outcome()), admission verdict and
//                 kernel OOM kill becomes a record (record/decisions.h): kept in memory for
//                 GET /v1/decisions, appended to STATE_DIR/decisions/, and written to the
//                 decision log
//
// Off the kill path: the agent calls cycle() after the cycle's kill signals went out, and
// evicted() only stashes; files are written by a thread of the recorder's own (episodes to
// STATE_DIR/episodes/NAME.nwep.tmp, renamed to NAME.nwep once whole and synced; records
// appended to segments). A crash leaves a .tmp, removed at the next start; a torn record
// segment is cut back to its last whole line.
//
// Threading: every member function on the agent's loop thread; the writer thread only
// touches what the jobs posted to it carry.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "base/clock.h"
#include "base/result.h"
#include "cgroups/fs.h"
#include "cgroups/pods.h"
#include "node/eviction_tracker.h"
#include "policy/eviction.h"
#include "policy/model.h"
#include "policy/policy.h"
#include "record/decisions.h"
#include "record/episode.h"

namespace nodewarden::node {

// One pod as a cycle's sample holds it: its object and its figures as the decision used them
// (nullptr: none, a pod without a cgroup).
struct RecordedPod {
  const policy::Pod* pod = nullptr;
  const policy::PodStats* figures = nullptr;
};

// The pods of a cycle's sample. `version` changes whenever the list or any of its objects may
// have (the figures aside, which are compared every cycle): while it stays, the recorder
// reuses what it derived from the objects. 0: unknown, nothing reused.
struct RecordedPods {
  std::vector<RecordedPod> pods;
  std::uint64_t version = 0;
};

struct RecorderOptions {
  std::string nodeName;
  // Episodes under STATE_DIR/episodes/, decision records under STATE_DIR/decisions/. "":
  // nothing on disk (the ring and the records in memory only).
  std::string stateDir;
  // Every decision record as a JSON line: "" none, "-" standard output, else a file
  // (appended).
  std::string decisionLog;
  std::string nodewardenVersion;
  bool dryRun = false;
  std::chrono::nanoseconds preroll = std::chrono::seconds(30);
  std::chrono::nanoseconds settle = std::chrono::seconds(10);
  std::chrono::nanoseconds maxEpisode = std::chrono::minutes(10);
  std::size_t ringBytes = 2u << 20;         // the ring's bound besides the pre-roll
  std::size_t maxEpisodeBytes = 16u << 20;  // one file; a longer episode continues in another
  std::size_t maxEpisodes = 100;            // files kept, oldest removed first
  std::size_t maxEpisodesBytes = 256u << 20;
  std::size_t maxRecordBytes = 1u << 20;  // the decision store, oldest segment removed first
  // Files waiting for the writer beyond this (a stalled disk): the episode is cut, and no new
  // one opens until the writer caught up.
  std::size_t maxQueueBytes = 4u << 20;
  std::size_t segmentBytes = 256u << 10;
  std::string procRoot = "/proc";
};

class Recorder {
 public:
  // `pods` must outlive the recorder (the agent's index, read for OOM counters).
  Recorder(RecorderOptions options, const cgroups::PodCgroups& pods, const Clock& clock);
  ~Recorder();
  Recorder(const Recorder&) = delete;
  Recorder& operator=(const Recorder&) = delete;

  // Creates the state directories, removes torn episodes (.tmp), loads the decision records
  // (cutting a torn segment back to its last whole line, setting a corrupt one aside as
  // .corrupt) and starts the writer. An error leaves the recorder in memory only, working.
  Result<void> open();

  // After a cycle acted: `candidates` is the view the cycle's decision was given (pods ordered
  // in this cycle count as candidates too; the recorder knows them from evicted()), matched
  // to `snapshot`'s pods by UID; `snapshot` holds the figures that decision used. `state` the
  // state the decision left, `now` the cycle's time (the `now` the decision was given).
  void cycle(const policy::NodeView& candidates, const policy::Snapshot& snapshot,
             const policy::EvictionState& state, const policy::EvictionDecision& decision,
             const policy::Policy& policy, SteadyTime now);
  // The same, given the pods a snapshot would hold (its objects in its order, each with its
  // figures) without one being copied: what the agent passes every cycle (LiveView::recorded).
  void cycle(const policy::NodeView& candidates, const RecordedPods& pods,
             const policy::EvictionState& state, const policy::EvictionDecision& decision,
             const policy::Policy& policy, SteadyTime now);
  // An eviction was ordered (its signal sent): stashed until cycle().
  void evicted(const EvictionRecord& record, const policy::Eviction& eviction,
               const policy::EvictionDecision& decision);
  // An ordered eviction ended.
  void outcome(const EvictionRecord& record);
  // Any other decision (admission verdicts, preemptions): recorded as given.
  void decision(record::DecisionRecord record);

  // The records of pod "ns/name", oldest first.
  std::vector<record::DecisionRecord> decisionsFor(const std::string& pod) const;

  // Ends the episode under way ("stopped") and waits (≤ `wait`) until everything posted is
  // on disk; what is not by then is finished when the recorder is destroyed. The recorder
  // records nothing afterwards.
  void stop(std::chrono::milliseconds wait = std::chrono::seconds(5));

  // Episode files this recorder finished (full paths), oldest first.
  std::vector<std::string> episodeFiles() const;
  bool episodeOpen() const { return open_.has_value(); }
  const std::string& stateDir() const { return options_.stateDir; }
  // What the recorder holds in memory now: the ring, the records, the writer's queue.
  std::size_t memoryBytes() const;
  std::size_t ringSamples() const { return ring_.size(); }

  struct PodSample;
  struct PodBlock;
  struct RingSample;
  struct Writer;

 private:
  struct Pending {
    EvictionRecord record;
    std::int64_t usage = 0;
    std::int64_t request = 0;
    std::int64_t observed = 0;
    std::int64_t threshold = 0;
    std::int64_t rank = 0;
  };
  struct OpenEpisode {
    std::string name;
    SteadyTime origin{};
    SteadyTime lastActive{};
  };

  std::shared_ptr<const record::PodInfo> infoFor(const policy::Pod& pod);
  std::shared_ptr<const PodBlock> podBlock(const policy::NodeView& candidates,
                                           const RecordedPods& pods);
  // PSI and memory.events into `sample`; the new kernel OOM kills, by pod UID ("" for kills
  // not tied to a pod).
  std::vector<std::pair<std::string, record::OomKill>> readKernel(RingSample& sample);
  void trimRing(SteadyTime now);
  void openEpisode(const std::string& reason, SteadyTime now);
  void closeEpisode(const std::string& reason, SteadyTime now);
  void keep(record::DecisionRecord record);
  std::int64_t wallMicros(SteadyTime t) const;
  std::string podKey(const std::string& uid, const std::vector<RecordedPod>& pods) const;

  RecorderOptions options_;
  const cgroups::PodCgroups& pods_;
  const Clock& clock_;
  std::unique_ptr<Writer> writer_;
  bool stopped_ = false;

  // The ring, oldest first.
  std::deque<std::shared_ptr<const RingSample>> ring_;
  std::size_t ringBytes_ = 0;
  policy::EvictionState lastState_;
  std::shared_ptr<const policy::Policy> policy_;
  std::optional<OpenEpisode> open_;
  std::uint64_t episodeSeq_ = 0;
  std::vector<std::string> written_;  // the writer's finished files, kept after stop()

  // Pods as last seen, by UID; the last pod block and what it was built from.
  std::unordered_map<std::string, std::shared_ptr<const record::PodInfo>> infos_;
  std::shared_ptr<const PodBlock> lastBlock_;
  // What lastBlock_ was built from: the pods' version and the candidates (by object).
  std::uint64_t lastVersion_ = 0;
  std::vector<const policy::Pod*> lastCandidates_;

  // Orders of the cycle under way, and orders whose pods are still exiting.
  std::vector<Pending> pending_;
  std::set<std::string> inFlight_;

  // Kernel readings.
  std::string buffer_;
  cgroups::UniqueFd systemPressure_;
  cgroups::UniqueFd vmstat_;
  std::optional<std::uint64_t> lastGlobalKills_;
  std::map<std::string, std::uint64_t> podKills_;  // UID → OOM kills counted so far
  std::map<std::string, std::uint64_t> podOoms_;   // UID → memory.events oom (v2)

  // The records in memory as their store lines (the newest, within maxRecordBytes, as on
  // disk); parsed when asked for.
  std::deque<std::string> records_;
  std::size_t recordBytes_ = 0;

  // Wall clock against the steady clock, taken once.
  SteadyTime steadyBase_{};
  std::int64_t wallBase_ = 0;
};

}  // namespace nodewarden::node
