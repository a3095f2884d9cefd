// One Kubernetes object as the API server or kubectl sends it: a Pod, Node, PriorityClass,
// PodDisruptionBudget or kubelet stats Summary (each input is tried as every kind), parsed
// the way the agent parses watch events (trimmed) and resolved as a decision would use it.
// Checks: a label selector's bloom shortcut never rejects labels the selector matches.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "policy/model.h"

namespace policy = nodewarden::policy;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  policy::Diagnostics diagnostics;
  auto json = policy::parseKubernetesJsonText(
      std::string_view(reinterpret_cast<const char*>(data), size), diagnostics);
  if (!json) return 0;
  auto pod = policy::parsePod(*json, "pod", diagnostics);
  auto node = policy::parseNode(*json, "node", diagnostics);
  auto priorityClass = policy::parsePriorityClass(*json, "pc", diagnostics);
  auto pdb = policy::parsePodDisruptionBudget(*json, "pdb", diagnostics);
  (void)policy::parseSummary(*json, "summary", diagnostics);
  (void)diagnostics.joined();
  if (pod) {
    std::vector<policy::PriorityClass> classes;
    if (priorityClass) classes.push_back(*priorityClass);
    policy::resolvePod(*pod, classes);
    for (auto set :
         {policy::RequestSet::Desired, policy::RequestSet::Allocated, policy::RequestSet::Actual}) {
      (void)policy::podRequests(*pod, set, false);
      (void)policy::podRequests(*pod, set, true);
    }
    (void)policy::computeQos(*pod);
    (void)policy::isStaticPod(*pod);
    (void)policy::isMirrorPod(*pod);
    (void)policy::hasPodLevelResources(*pod);
    if (pod->labelsBloom != policy::labelBloom(pod->labels)) std::abort();
    if (node) {
      for (const auto& taint : node->taints) (void)policy::tolerates(pod->tolerations, taint);
    }
    if (pdb && pdb->selector) {
      const bool plain = pdb->selector->matches(pod->labels);
      const bool quick = pdb->selector->matches(pod->labels, pod->labelsBloom);
      if (plain != quick) std::abort();
    }
  }
  return 0;
}
