#include "webhook/admission_actions.h"

#include <utility>

#include "kube/writer.h"

namespace nodewarden::webhook {

namespace {

// Above this many keys, remember() first drops the expired ones.
constexpr std::size_t kPruneAbove = 4096;

std::string uidOrKey(const policy::Pod& pod) {
  return pod.uid.empty() ? pod.key : pod.uid;
}

}  // namespace

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

std::string evictionKey(const policy::Pod& preemptor, const policy::Pod& victim) {
  return "evict/" + uidOrKey(preemptor) + "/" + uidOrKey(victim);
}

std::string clearNominationKey(const policy::Pod& pod, std::string_view node) {
  return "clear/" + uidOrKey(pod) + "/" + std::string(node);
}

bool ActionMemory::recent(const std::string& key, SteadyTime now) const {
  auto it = requested_.find(key);
  return it != requested_.end() && now - it->second < span_;
}

void ActionMemory::remember(const std::string& key, SteadyTime now) {
  if (requested_.size() > kPruneAbove) {
    std::erase_if(requested_, [&](const auto& entry) { return now - entry.second >= span_; });
  }
  requested_[key] = now;
}

}  // namespace nodewarden::webhook
