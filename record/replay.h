// Replay (docs/recording.md "Replay"): an episode's samples through the same decision code the
// agent runs (policy::evaluateEviction), with the policy that was in force or a candidate.
//
// Fidelity (the recorded policy): each sample's recorded inputs — the candidate pods with
// their figures, the node's figures, the state carried from the sample before — give the
// recorded plan again: the same victims, in the same order, at the same sample. The first
// sample where they differ is the divergence.
//
// The world (a candidate policy, or the recorded one on an episode the agent did not act on):
// a simulation over the recorded demand. Each pod's working set follows the recording while it
// is there; a pod the recording lost (evicted, or killed by the kernel) stays at its last
// figure unless the simulation removed it; a pod the simulation evicts frees its memory after
// its grace period and the kill latency the recording shows. The node's memory signals move by
// the difference. When the signal the kernel kills on (the tighter of memory.available and
// allocatableMemory.available) falls to the line where the kernel killed in the recording
// (0 when it never did), the simulated kernel kills the pod with the highest OOM score, as the
// kernel ranks the kubelet's pods (working set + oom_score_adj × limit / 1000).
//
// Bounds beside it: the kernel alone (the recording itself when no eviction was ordered in
// it, else the simulation without any eviction), and perfect foresight (the fewest pods, in the
// policy's ranking at the tightest moment, whose removal from the start keeps the simulated
// demand above the kill line throughout).
//
// Pure: no clock, no I/O. The caller times it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "policy/json_reader.h"
#include "policy/policy.h"
#include "record/episode.h"

namespace nodewarden::record {

struct ReplayOptions {
  // The policy to replay with; nullopt: the recorded one (at each sample, as it changed).
  std::optional<policy::Policy> policy;
  // How the output names it: "recorded" or the file.
  std::string policyName = "recorded";
};

struct ReplayedEviction {
  std::size_t sample = 0;
  std::int64_t t = 0;  // nanoseconds since the origin
  std::string pod;     // "ns/name"
  std::string uid;
  policy::Signal signal = policy::Signal::MemoryAvailable;
  bool hard = true;
  std::int64_t gracePeriodSeconds = 0;
  std::int64_t usage = 0;
};

struct KernelKill {
  std::int64_t t = 0;
  std::string pod;  // "" when the recording does not say which
};

struct KernelAloneBound {
  bool fromRecording = false;  // the recording itself (no eviction was ordered in it)
  std::vector<KernelKill> kills;
};

struct PerfectForesightBound {
  bool feasible = true;  // false: even every evictable pod would not have been enough
  std::vector<std::string> pods;
  std::int64_t evictedBytes = 0;
};

enum class Fidelity { Identical, Diverged, NotChecked };
std::string_view toString(Fidelity fidelity);

struct ReplayResult {
  std::string policyName;
  bool policyIsRecorded = false;
  Fidelity fidelity = Fidelity::NotChecked;
  struct Divergence {
    std::size_t sample = 0;
    std::int64_t t = 0;
    policy::OrderedJson recorded;
    policy::OrderedJson replayed;
  };
  std::optional<Divergence> divergence;
  // What the replayed policy ordered (the recorded orders reproduced, or the simulation's).
  std::vector<ReplayedEviction> decisions;
  bool simulated = false;  // decisions come from the simulation, not the recording
  std::size_t recordedOomKills = 0;
  std::vector<KernelKill> simulatedKills;  // the simulation's kernel OOM kills
  std::optional<bool> prevented;           // recorded kills > 0: none left in the simulation
  // Kernel OOM kills left under the policy: the simulation's, plus each recorded kill at a
  // pod's own limit whose pod the policy did not evict first (the recorded ones when the
  // recording itself is the answer).
  std::size_t killsLeft = 0;
  std::optional<double> leadTimeMs;
  std::optional<std::int64_t> referenceT;  // the kill (or tightest moment) lead time counts to
  std::int64_t evictedBytes = 0;
  // At the kernel alone's tightest moment: the policy's highest threshold on the limit signal
  // plus its minimum reclaim, less what was available (what its plan sets out to free); with
  // no threshold there, what keeps the node above the kill line.
  std::int64_t neededBytes = 0;
  KernelAloneBound kernelAlone;
  PerfectForesightBound perfectForesight;
  // The signal the kernel kills on, and the line it killed at.
  policy::Signal limitSignal = policy::Signal::MemoryAvailable;
  std::int64_t killLine = 0;
  // For --plot: that signal's used memory (capacity − available) per sample, as recorded and
  // in the simulation (empty when not simulated).
  std::vector<std::int64_t> recordedUsed;
  std::vector<std::int64_t> simulatedUsed;
  std::vector<std::int64_t> capacity;
  std::size_t evaluations = 0;  // evaluateEviction calls
};

ReplayResult replay(const Episode& episode, const ReplayOptions& options = {});

// docs/reference.md §8 `replay -o json`, one item of "episodes".
policy::OrderedJson replayJson(const ReplayResult& result, const Episode& episode,
                               const std::string& file);

// The signal the kernel kills on in this episode: allocatableMemory.available when the pods'
// cgroup has a limit and it got closer to it than the node to its memory, else
// memory.available.
policy::Signal limitSignalOf(const Episode& episode);

}  // namespace nodewarden::record
