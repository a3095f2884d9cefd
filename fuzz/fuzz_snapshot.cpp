// A whole snapshot (Nodes, Pods, PriorityClasses, PDBs, kubelet stats) and every decision
// over it: eviction on each node, admission of each pending pod, cluster preemption. The
// sums and differences of quantities run under UBSan here.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "policy/admission.h"
#include "policy/eviction.h"

namespace policy = nodewarden::policy;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  policy::Diagnostics diagnostics;
  auto snapshot = policy::parseSnapshotText(
      std::string_view(reinterpret_cast<const char*>(data), size), diagnostics);
  if (!snapshot) return 0;
  const policy::Policy rules = policy::Policy::defaults();
  for (const auto& node : snapshot->nodes) {
    const policy::NodeView view = policy::makeNodeView(*snapshot, node.name);
    auto result =
        policy::evaluateEviction(view, rules, policy::EvictionState{}, nodewarden::SteadyTime{});
    (void)policy::evictionToJson(result.decision).dump();
  }
  const policy::ClusterIndex cluster = policy::buildClusterIndex(*snapshot);
  int decided = 0;
  for (const auto& pod : snapshot->pods) {
    if (!pod.nodeName.empty() || decided++ > 4) continue;
    for (const auto& info : cluster.nodes) {
      if (!info.node->hasAllocatable) continue;
      (void)policy::admissionToJson(
          policy::admitPod(pod, info, snapshot->podDisruptionBudgets, rules));
    }
    (void)policy::preemptionToJson(
        policy::preemptCluster(pod, cluster, snapshot->podDisruptionBudgets, rules));
  }
  return 0;
}
