// Makes nodewarden's decisions stick in the API: after the local kill of an evicted pod its
// status is set like the kubelet's (Failed, reason Evicted, the DisruptionTarget condition),
// a Warning Event "Evicted" is created and the pod is deleted with the decided grace period;
// preemption victims chosen at admission are evicted through the Eviction API; pods get
// their nominatedNodeName; node pressure is published as nodewarden's own node condition.
//
// Every write is queued and retried with a jittered exponential backoff (0.5 s doubling to
// 30 s) for a bounded number of attempts (default 36, about 15 minutes), in order per pod,
// and never blocks the caller: the kill path does not wait on the network. Writes are
// idempotent: a pod evicted twice is written once (keyed by UID); DELETE carries the UID
// precondition so a same-named replacement is never touched; a 404 on delete, or a 409 on
// its precondition, means done. While the API server is unreachable writes wait in the queue
// and are sent in order when it answers again.
//
// Threading: the io_context's thread only.
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "kube/client.h"

namespace boost::asio {
class io_context;
}  // namespace boost::asio

namespace nodewarden::kube {

// nodewarden's own node condition types (the kubelet rewrites MemoryPressure & co. on every
// status update, so an agent must not write those). The webhook reads them as the kubelet's.
inline constexpr const char* kMemoryPressureCondition = "NodewardenMemoryPressure";
inline constexpr const char* kDiskPressureCondition = "NodewardenDiskPressure";
inline constexpr const char* kPidPressureCondition = "NodewardenPIDPressure";
// The kubelet condition a nodewarden condition stands for ("" when it is not one of ours).
std::string kubeletConditionFor(std::string_view nodewardenCondition);

struct PodRef {
  std::string ns;
  std::string name;
  std::string uid;
  std::string key() const { return ns + "/" + name; }
};

// One local eviction to record in the API (the kubelet's evictPod).
struct EvictedPod {
  PodRef pod;
  // The pod's metadata.generation (0: unknown). Like a kubelet of v1.35 or later
  // (PodObservedGenerationTracking), the status write carries it as status.observedGeneration
  // and as the DisruptionTarget condition's observedGeneration; 0 leaves both out, as the
  // kubelet's omitempty does.
  std::int64_t generation = 0;
  std::string signal;    // "memory.available"
  std::string resource;  // the starved resource: "memory", "ephemeral-storage", "pids"
  std::string message;   // the kubelet's eviction message
  std::int64_t gracePeriodSeconds = 0;
  // Event annotations as the kubelet sets them: offending_containers,
  // offending_containers_usage, starved_resource.
  std::map<std::string, std::string> annotations;
};

struct WriterOptions {
  std::string component = "nodewarden";  // Event source.component / reportingComponent
  std::string nodeName;                  // Event source.host / reportingInstance
  int maxAttempts = 36;
  std::chrono::milliseconds initialBackoff{500};
  std::chrono::milliseconds maxBackoff{30000};
  std::uint64_t seed = 0;  // jitter (0: from the clock)
  // Wall clock for timestamps (tests fix it).
  std::function<std::chrono::system_clock::time_point()> now;
};

// What happened to one write, for logs, metrics and tests.
struct WriteOutcome {
  std::string what;  // "status", "event", "delete", "eviction", "nominate", "node-condition"
  std::string pod;   // "ns/name" or the node name
  bool ok = false;
  int attempts = 0;
  unsigned status = 0;  // the last HTTP status (0: no answer)
  std::string detail;   // the API's message when it failed; "already gone" …
  // For onRetry only: how long until the next attempt.
  std::chrono::milliseconds retryIn{0};
};

class ApiWriter {
 public:
  ApiWriter(boost::asio::io_context& io, Client& client, WriterOptions options);
  ~ApiWriter();
  ApiWriter(const ApiWriter&) = delete;
  ApiWriter& operator=(const ApiWriter&) = delete;

  // After the local kill: status (Failed/Evicted/DisruptionTarget), then the Warning Event,
  // then DELETE with the grace period and the UID precondition. Ignored when this UID was
  // already handed over.
  void podEvicted(const EvictedPod& evicted);
  // Admission preemption: POST …/eviction (policy/v1) for each victim with the UID
  // precondition; a 429 (a disruption budget forbids it) is retried after Retry-After or
  // the backoff. Once the eviction succeeded, the scheduler's Normal "Preempted" Event on the
  // victim ("Preempted by pod NS/NAME (UID) on node NODE"); none for a victim the Eviction
  // API never let go (refused until the attempts ran out, already gone, replaced).
  void preempt(const PodRef& preemptor, const std::string& node,
               const std::vector<PodRef>& victims);
  // PATCH pods/NAME/status {"status":{"nominatedNodeName":node}} ("" clears it).
  void nominate(const PodRef& pod, const std::string& node);
  // PATCH nodes/NAME/status with the condition (strategic merge keyed by type).
  // lastTransitionTime changes only when the status flips; repeated identical calls are
  // coalesced.
  void setNodeCondition(const std::string& node, const std::string& type, bool status,
                        const std::string& reason, const std::string& message);

  // Writes queued or in flight.
  std::size_t pending() const;
  // Each write's final outcome (done, refused, or given up after the last attempt).
  std::function<void(const WriteOutcome&)> onOutcome;
  // Each answer that makes a write wait and try again (no answer, 408, 409 on a status write,
  // 429, 5xx): ok false, the answer's status and description (the Status' message and its
  // causes: "429 Too Many Requests: Cannot evict pod as it would violate the pod's disruption
  // budget. (The disruption budget web needs 2 healthy pods and has 2 currently)"), the
  // attempts so far and retryIn.
  std::function<void(const WriteOutcome&)> onRetry;

 private:
  struct Impl;
  std::shared_ptr<Impl> impl_;
};

}  // namespace nodewarden::kube
