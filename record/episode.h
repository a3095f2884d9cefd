// A pressure episode as the agent's flight recorder keeps it (docs/recording.md): what the
// decision code saw, sample by sample, from some time before a threshold was first met until
// the node settled — and every decision with its inputs, every kernel OOM kill seen in
// memory.events, every eviction's outcome.
//
// The file format (version 1, docs/recording.md "The episode file") is a magic, then frames:
//   u8 type | u32 length (LE) | payload[length] | u32 CRC-32 (LE) of type, length and payload
// HEADER, POLICY, POD and EVENT payloads are JSON (rare; readable by any tool); SAMPLE
// payloads are binary, each figure a zigzag varint delta from the same figure of the sample
// before (a pod's from its own last figure), so a pod whose figures did not move costs one
// byte a sample. The file ends with an END frame; one without it, or with a frame whose CRC
// does not match, is torn or corrupt and is refused with the offset of the first bad byte.
//
// Pure: encoding and decoding only; the recorder (node/recorder.h) does the I/O.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"
#include "policy/eviction.h"
#include "policy/json_reader.h"
#include "policy/model.h"
#include "policy/policy.h"

namespace nodewarden::record {

inline constexpr std::uint16_t kEpisodeVersion = 1;
inline constexpr std::string_view kEpisodeMagic = "NWEPISOD";  // 8 bytes, then u16 version, u16 0
inline constexpr std::string_view kEpisodeSuffix = ".nwep";

enum class FrameType : std::uint8_t {
  Header = 1,
  Policy = 2,
  Pod = 3,
  State = 4,
  Sample = 5,
  Event = 6,
  End = 0x7f,
};

// A pod as the decision code saw it: what ranks it and what protects it. A pod whose fields
// change (terminating, an in-place resize) gets a new entry; samples name entries by index.
struct PodInfo {
  std::string uid;
  std::string ns;
  std::string name;
  std::int32_t priority = 0;
  policy::QosClass qos = policy::QosClass::BestEffort;
  bool critical = false;
  bool terminating = false;
  std::int64_t memoryRequest = 0;   // eviction's request (rankingRequests["memory"])
  std::int64_t storageRequest = 0;  // rankingRequests["ephemeral-storage"]
  std::int64_t terminationGracePeriodSeconds = 30;

  std::string key() const { return ns + "/" + name; }
  friend bool operator==(const PodInfo&, const PodInfo&) = default;
};

// One pod's figures in one sample (the subset of PodStats eviction reads, and usage).
struct PodFigures {
  std::uint32_t pod = 0;  // index into Episode::pods
  // A candidate of the decision (in the view evaluateEviction was given); pods being evicted,
  // evicted or backing off are not, but their memory still counts.
  bool candidate = true;
  std::optional<std::uint64_t> workingSet;
  std::optional<std::uint64_t> usage;  // memory.current / memory.usage_in_bytes
  std::optional<std::uint64_t> swap;
  std::optional<std::uint64_t> processes;
  std::optional<std::uint64_t> ephemeralStorage;
  std::optional<std::uint64_t> inodes;
};

struct NodeFigures {
  policy::NodeStats stats;
  // The Node object's memory capacity and allocatable (observeSignals' fallbacks).
  std::optional<std::int64_t> capacityMemory;
  std::optional<std::int64_t> allocatableMemory;
};

// Memory PSI of the pods' cgroup (or the node's, /proc/pressure/memory).
struct Pressure {
  double someAvg10 = 0;
  double fullAvg10 = 0;
  std::uint64_t someTotalMicros = 0;
  std::uint64_t fullTotalMicros = 0;
};

// memory.events of the pods' cgroup (v2, hierarchical).
struct MemoryEvents {
  std::uint64_t high = 0;
  std::uint64_t max = 0;
  std::uint64_t oom = 0;
  std::uint64_t oomKill = 0;
};

// A threshold against its observation, as the decision computed it.
struct SignalObservation {
  policy::Signal signal = policy::Signal::MemoryAvailable;
  bool hard = true;
  std::int64_t available = 0;
  std::int64_t capacity = 0;
  std::int64_t threshold = 0;
  bool met = false;
  bool actionable = false;
};

// One entry of the decision's plan (EvictionDecision::evict), and whether the agent ordered
// it (it may not: a victim for the same signal still exiting, or a dry run repeating itself).
struct PlannedEviction {
  std::uint32_t pod = 0;
  policy::Signal signal = policy::Signal::MemoryAvailable;
  bool hard = true;
  std::int64_t gracePeriodSeconds = 0;
  bool ordered = false;
};

struct Sample {
  std::int64_t t = 0;  // nanoseconds since the episode's origin (the agent's monotonic clock)
  NodeFigures node;
  std::optional<Pressure> pressure;
  std::optional<MemoryEvents> events;
  std::vector<PodFigures> pods;  // every pod of the node's snapshot
  std::vector<SignalObservation> signals;
  std::vector<PlannedEviction> plan;
};

// What the decision code remembered before the episode's first sample (EvictionState), its
// times relative to the origin.
struct InitialState {
  struct Since {
    policy::ThresholdKey key;
    std::int64_t t = 0;
  };
  std::vector<Since> firstObservedAt;
  std::vector<policy::ThresholdKey> met;
  std::vector<std::pair<std::string, std::int64_t>> conditionLastObservedAt;
};

// An eviction the agent ordered (the decision, with the figures it was taken on).
struct Order {
  std::size_t sample = 0;
  std::int64_t t = 0;
  std::uint32_t pod = 0;
  policy::Signal signal = policy::Signal::MemoryAvailable;
  bool hard = true;
  std::int64_t gracePeriodSeconds = 0;
  std::int64_t usage = 0;
  std::int64_t request = 0;
  std::int64_t observed = 0;   // the signal's available figure
  std::int64_t threshold = 0;  // resolved
  std::int64_t rank = 0;       // 1-based position in the ranking
  double latencyMs = 0;        // threshold crossing → signal sent
  bool dryRun = false;
  std::string message;
};

// A kernel OOM kill seen in memory.events (v2) or memory.oom_control (v1) counters.
struct OomKill {
  std::size_t sample = 0;
  std::int64_t t = 0;
  std::optional<std::uint32_t> pod;  // none: seen on the pods' cgroup, not tied to a pod
  std::uint64_t count = 1;           // kills since the last reading
  // "pod" when the pod's own (or a container's) limit was hit, "node" when the limit above
  // it was, "" when the kernel does not say (v1).
  std::string limit;
};

// How an ordered eviction ended.
struct Outcome {
  std::int64_t t = 0;
  std::uint32_t pod = 0;
  bool emptied = false;
  std::string method;
  double elapsedMs = 0;
};

struct PolicyChange {
  std::size_t sample = 0;  // applies from this sample on
  std::string json;        // the policy file, every default filled in (policyToJson)
  policy::Policy policy;
};

struct Episode {
  // HEADER.
  std::uint16_t version = kEpisodeVersion;
  std::string node;
  std::string nodewardenVersion;
  std::int64_t originWallMicros = 0;  // wall clock at the origin (Unix µs)
  std::string cgroups;                // "v1", "v2", "hybrid"
  bool dryRun = false;                // the agent only logged its decisions
  std::int64_t prerollNanos = 0;
  std::string reason;  // what opened it: "threshold", "eviction", "oom-kill"
  // POLICY, POD, STATE, SAMPLE, EVENT.
  std::vector<PolicyChange> policies;  // the first at sample 0
  std::vector<PodInfo> pods;
  InitialState state;
  std::vector<Sample> samples;
  std::vector<Order> orders;
  std::vector<OomKill> oomKills;
  std::vector<Outcome> outcomes;
  // END.
  std::string endReason;  // "settled", "cut" (too long or too large), "stopped"
  std::int64_t endT = 0;
};

// Encodes episodes frame by frame, so a recorder can hand finished frames to a writer while
// the episode goes on. Each append returns the frame's bytes (magic included in the first).
class EpisodeEncoder {
 public:
  std::string begin(const Episode& header);  // magic + HEADER
  std::string policy(std::size_t sample, const policy::Policy& policy);
  std::string pod(std::uint32_t index, const PodInfo& pod);
  std::string state(const InitialState& state);
  std::string sample(const Sample& sample);
  std::string order(const Order& order, const PodInfo& pod);
  std::string oomKill(const OomKill& kill, const PodInfo* pod);
  std::string outcome(const Outcome& outcome, const PodInfo& pod);
  std::string end(const std::string& reason, std::int64_t t, std::size_t samples,
                  std::size_t orders, std::size_t oomKills);

 private:
  // The previous sample's figures: what the next sample's deltas are taken from.
  Sample previous_;
  bool havePrevious_ = false;
  std::vector<PodFigures> lastByPod_;  // by pod index
  std::vector<bool> haveLastByPod_;
};

// The whole episode in one call (tests, tools).
std::string encodeEpisode(const Episode& episode);

// Decodes a whole file. An error names the byte offset of the first bad frame ("offset 1234:
// frame CRC mismatch"), or the end of the text for a file without its END frame; callers
// prefix the file name. Never throws, never reads outside `bytes`.
Result<Episode> decodeEpisode(std::string_view bytes);

// The first sample at or after `t`, for decisions and kills dated by time.
std::size_t sampleAt(const Episode& episode, std::int64_t t);

// The view the decision code saw at a sample: every candidate pod with its figures, built
// from the episode's pod table (priority, critical, QoS, requests, grace). The view points
// into this object: keep it in one place (not copied or moved once built); it is reused from
// sample to sample of one episode.
struct SampleView {
  const Episode* episode = nullptr;
  std::vector<policy::Pod> pods;  // one per Episode::pods entry
  policy::Node node;
  policy::NodeStats nodeStats;
  std::vector<policy::PodStats> stats;  // one per candidate
  policy::NodeView view;
  SampleView() = default;
  SampleView(const SampleView&) = delete;
  SampleView& operator=(const SampleView&) = delete;
};
void buildView(const Episode& episode, const Sample& sample, SampleView& out);
// The same from figures of one's own (a counterfactual's).
void buildView(const Episode& episode, const NodeFigures& node, const std::vector<PodFigures>& pods,
               SampleView& out);

// The EvictionState at the episode's first sample, on a time line where the origin is
// `origin`.
policy::EvictionState initialState(const Episode& episode, SteadyTime origin);

// CRC-32 (IEEE 802.3, as zlib's crc32) of `bytes`, continuing from `crc`.
std::uint32_t crc32(std::string_view bytes, std::uint32_t crc = 0);

// Two policies decide the same way (every field evaluateEviction reads).
bool samePolicy(const policy::Policy& a, const policy::Policy& b);

}  // namespace nodewarden::record
