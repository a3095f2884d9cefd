#include "webhook/admission_actions.h"

#include <utility>

#include "kube/writer.h"

namespace nodewarden::webhook {

void RecordingAdmissionActions::preempt(const policy::Pod& preemptor, const std::string& node,
                                        const std::vector<const policy::Pod*>& victims) {
  Call call{"preempt", preemptor.key, node, {}};
  for (const policy::Pod* victim : victims) call.victims.push_back(victim->key);
  calls.push_back(std::move(call));
}

void RecordingAdmissionActions::clearNomination(const policy::Pod& pod) {
  calls.push_back(Call{"clearNomination", pod.key, "", {}});
}

namespace {
kube::PodRef refOf(const policy::Pod& pod) {
  return kube::PodRef{pod.ns, pod.name, pod.uid};
}
}  // namespace

void ApiAdmissionActions::preempt(const policy::Pod& preemptor, const std::string& node,
                                  const std::vector<const policy::Pod*>& victims) {
  std::vector<kube::PodRef> refs;
  refs.reserve(victims.size());
  for (const policy::Pod* victim : victims) refs.push_back(refOf(*victim));
  writer_.preempt(refOf(preemptor), node, refs);
  writer_.nominate(refOf(preemptor), node);
}

void ApiAdmissionActions::clearNomination(const policy::Pod& pod) {
  writer_.nominate(refOf(pod), "");
}

}  // namespace nodewarden::webhook
