// A running pod with one container and an optional memory request, as the victims-first
// decision meets them (node/victims_first.h): its test and bench/bench_victims_first build
// their nodes from these. Unresolved: the caller runs policy::resolvePods.
#pragma once

#include <cstdint>
#include <string>

#include "policy/model.h"

namespace nodewarden::testing {

// "<ns>/pod-<index>" with UID "uid-<index>", spec.priority `priority`, and a memory request
// of `request` bytes unless it is 0.
inline policy::Pod memoryPod(const std::string& ns, int index, std::int32_t priority,
                             std::int64_t request) {
  policy::Pod pod;
  pod.ns = ns;
  pod.name = "pod-" + std::to_string(index);
  pod.uid = "uid-" + std::to_string(index);
  pod.phase = "Running";
  pod.specPriority = priority;
  policy::Container container;
  container.name = "c";
  if (request > 0) {
    container.requests["memory"] =
        policy::Quantity::fromValue(request, policy::QuantityFormat::BinarySI);
  }
  pod.containers.push_back(container);
  return pod;
}

}  // namespace nodewarden::testing
