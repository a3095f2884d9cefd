// What an admission verdict does beyond its answer: a `preempt` evicts its victims and
// nominates the pod to the node, and pods that lose their reservation have their nomination
// cleared. The real actions write to the API (ApiAdmissionActions); tests and the agent's
// static source record them (RecordingAdmissionActions). ActionMemory keeps a repeated review
// from asking for the same action twice.
#pragma once

#include <chrono>
#include <cstddef>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "base/clock.h"
#include "policy/model.h"

namespace nodewarden::kube {
class ApiWriter;
}  // namespace nodewarden::kube

namespace nodewarden::webhook {

// The side effects of admission verdicts; the real one writes to the API (ApiAdmissionActions),
// tests record. Calls happen on the webhook's thread and must not block.
class AdmissionActions {
 public:
  virtual ~AdmissionActions() = default;
  // `preemptor` preempts on `node`: evict each victim through the Eviction API (reason
  // Preempting) and set the preemptor's status.nominatedNodeName to `node`.
  virtual void preempt(const policy::Pod& preemptor, const std::string& node,
                       const std::vector<const policy::Pod*>& victims) = 0;
  // Clears `pod`'s status.nominatedNodeName (it lost its reservation to a more important pod).
  virtual void clearNomination(const policy::Pod& pod) = 0;
};

// Records every call: for tests, and for the agent when it may not act (--dry-run, or a
// static pod source without the API).
class RecordingAdmissionActions final : public AdmissionActions {
 public:
  struct Call {
    std::string what;  // "preempt" or "clearNomination"
    std::string pod;   // "ns/name" of the preemptor or of the pod losing its nomination
    std::string node;  // for preempt
    std::vector<std::string> victims;  // for preempt, "ns/name" in the order given
  };
  void preempt(const policy::Pod& preemptor, const std::string& node,
               const std::vector<const policy::Pod*>& victims) override;
  void clearNomination(const policy::Pod& pod) override;
  std::vector<Call> calls;
};

// The actions through kube::ApiWriter (which queues and retries, never blocking): preempt →
// ApiWriter::preempt (Eviction API per victim) and ApiWriter::nominate; clearNomination →
// ApiWriter::nominate(pod, ""). The writer must outlive this object.
class ApiAdmissionActions final : public AdmissionActions {
 public:
  explicit ApiAdmissionActions(kube::ApiWriter& writer) : writer_(writer) {}
  void preempt(const policy::Pod& preemptor, const std::string& node,
               const std::vector<const policy::Pod*>& victims) override;
  void clearNomination(const policy::Pod& pod) override;

 private:
  kube::ApiWriter& writer_;
};

// The key of an action in an ActionMemory, each pod named by its uid (by "namespace/name" when
// it has none): "evict/<preemptor>/<victim>" for the eviction of `victim` to make room for
// `preemptor`, "clear/<pod>/<node>" for clearing `pod`'s nomination to `node`. Pure.
std::string evictionKey(const policy::Pod& preemptor, const policy::Pod& victim);
std::string clearNominationKey(const policy::Pod& pod, std::string_view node);

// The actions requested recently. A review repeated before the cache shows an action's effect
// (a victim terminating, a nomination gone) would otherwise request it again; an action
// requested longer than `span` ago may be requested again (something went wrong with the
// first). Expired keys are dropped once more than 4,096 are held. One thread.
class ActionMemory {
 public:
  explicit ActionMemory(std::chrono::seconds span) : span_(span) {}

  // Whether `key` was remembered less than `span` before `now`.
  bool recent(const std::string& key, SteadyTime now) const;
  // Remembers `key` as requested at `now`.
  void remember(const std::string& key, SteadyTime now);
  std::size_t size() const { return requested_.size(); }

 private:
  std::chrono::seconds span_;
  std::unordered_map<std::string, SteadyTime> requested_;
};

}  // namespace nodewarden::webhook
