// One eviction, as every step of the kill path passes it on:
//
//   policy::Eviction ─makeOrder─► EvictionOrder ─► Actuator::evict ─► EvictionOutcome
//                                      │                                  │
//                                      ├─► EvictionRecord (tracker, /metrics, the demo)
//                                      └─► JournalEntry (eviction_journal.h, a restart)
//
// The order is made once, from the decision, and referred to by the record and the journal
// entry instead of being copied field by field into each. Strings appear only where they are
// the value (the pod's UID and key, the kubelet's message); the signal travels as its
// threshold key and the kill as KillMethod, turned into words only for logs and metrics.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>

#include "base/clock.h"
#include "cgroups/kill.h"
#include "policy/eviction.h"

namespace nodewarden::node {

struct EvictionOrder {
  std::string uid;
  std::string pod;                                                        // "namespace/name"
  policy::ThresholdKey threshold{policy::Signal::MemoryAvailable, true};  // what it relieves
  std::int64_t gracePeriodSeconds = 0;  // 0: SIGKILL at once; else SIGTERM, then SIGKILL
  std::string message;                  // the kubelet's eviction message
  bool dryRun = false;                  // --dry-run: decided and logged, never acted on
  // Taken over from an agent that stopped in its middle (eviction_journal.h): SIGTERM was
  // sent then, so only what is left of the grace period is waited, then SIGKILL.
  bool resumed = false;
};

// The order for one of the decision's evictions.
EvictionOrder makeOrder(const policy::Eviction& eviction, bool dryRun);

// What the actuator did with an order (the order says which pod).
struct EvictionOutcome {
  bool emptied = false;  // no process of the pod is left
  // SIGTERM was sent first: by this run, or (order.resumed) by the one before the restart.
  bool terminated = false;
  std::optional<cgroups::KillMethod> killed;  // how SIGKILL reached the pod, when it had to
  std::string error;                          // why it could not be done, if it could not
  std::size_t processes = 0;                  // processes signalled
  std::chrono::microseconds elapsed{0};       // order → emptied (or given up)
};

// The log's words for how the pod was stopped: "cgroup.kill", "SIGTERM, then SIGKILL",
// "SIGTERM (before a restart), then freezer+SIGKILL", "dry-run", "none".
std::string methodText(const EvictionOrder& order, const EvictionOutcome& outcome);

// One eviction the agent ordered, for /metrics, logs, the demo's report and tests.
struct EvictionRecord {
  EvictionOrder order;
  SteadyTime crossedAt{};    // threshold crossing (kernel notification, or interpolated)
  SteadyTime signalledAt{};  // first signal sent to the pod's processes
  double latencyMs = 0;      // crossedAt → signalledAt
  std::optional<EvictionOutcome> outcome;  // once the actuator finished
};

}  // namespace nodewarden::node
