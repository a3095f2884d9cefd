// What an admission verdict does beyond its answer: a `preempt` evicts its victims and
// nominates the pod to the node, and pods that lose their reservation have their nomination
// cleared. The real actions write to the API (ApiAdmissionActions); tests and the agent's
// static source record them (RecordingAdmissionActions).
#pragma once

#include <string>
#include <vector>

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

// Records every call, for tests and dry runs.
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

}  // namespace nodewarden::webhook
