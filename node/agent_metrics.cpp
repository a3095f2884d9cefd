#include "node/agent_metrics.h"

#include <algorithm>
#include <string>

namespace nodewarden::node {

AgentMetrics::AgentMetrics()
    : evictions(registry.counter("nodewarden_evictions_total",
                                 "Evictions ordered, by signal and reason.", {"signal", "reason"})),
      admissions(registry.counter("nodewarden_admissions_total",
                                  "Admission verdicts, by verdict and reason.",
                                  {"verdict", "reason"})),
      signalAvailable(registry.gauge(
          "nodewarden_signal_available_bytes",
          "Available amount of each eviction signal (bytes, inodes or PIDs).", {"signal"})),
      thresholdMet(registry.gauge("nodewarden_threshold_met", "1 while a threshold is met.",
                                  {"signal", "kind"})),
      nodeCondition(registry.gauge("nodewarden_node_condition", "1 while the node condition holds.",
                                   {"condition"})),
      evictionLatency(
          registry.histogram("nodewarden_eviction_latency_seconds",
                             "Threshold crossing to the first signal sent to the pod's processes.",
                             {}, server::latencyBuckets())),
      scanDuration(registry.histogram("nodewarden_scan_duration_seconds",
                                      "Time to read every pod cgroup and the node's figures.", {},
                                      server::latencyBuckets())),
      pods(registry.gauge("nodewarden_pods", "Pods on the node the agent decides about.", {})),
      cycles(registry.counter("nodewarden_cycles_total",
                              "Housekeeping cycles, by what started them.", {"trigger"})),
      policyReloads(registry.counter("nodewarden_policy_reloads_total",
                                     "Policy reloads, by result.", {"result"})),
      dryRunEvictions(registry.counter("nodewarden_dry_run_evictions_total",
                                       "Evictions decided but not carried out (--dry-run).",
                                       {"signal"})),
      kernelNotifications(
          registry.gauge("nodewarden_kernel_notifications", "Kernel notifications armed.", {})),
      apiReflector(registry.counter(
          "nodewarden_api_reflector_total",
          "What the list and watch of each API resource did: lists, watches started, events "
          "applied, bookmarks, relists after 410 Gone, malformed events skipped, failed requests.",
          {"resource", "event"})) {}

void AgentMetrics::publish(const std::vector<WatchCounts>& watches) {
  for (const WatchCounts& counts : watches) {
    for (const auto& [event, value] :
         {std::pair{"list", counts.lists}, std::pair{"watch", counts.watches},
          std::pair{"event", counts.events}, std::pair{"bookmark", counts.bookmarks},
          std::pair{"relist_gone", counts.relistsGone}, std::pair{"bad_event", counts.badEvents},
          std::pair{"failure", counts.failures}}) {
      std::uint64_t& seen = apiReflectorSeen_[{counts.resource, event}];
      // Every series exists from the first publish, at 0 until it counts something.
      apiReflector.add({counts.resource, event}, double(value - std::min(value, seen)));
      seen = std::max(seen, value);
    }
  }
}

void AgentMetrics::publish(const policy::EvictionDecision& decision) {
  signalAvailable.clear();
  thresholdMet.clear();
  for (const policy::SignalStatus& status : decision.signals) {
    const std::string signal(policy::toString(status.key.signal));
    signalAvailable.set({signal}, double(status.available));
    thresholdMet.set({signal, status.key.hard ? "hard" : "soft"}, status.met ? 1 : 0);
  }
  for (const char* condition : {"MemoryPressure", "DiskPressure", "PIDPressure"}) {
    const bool holds = std::find(decision.conditions.begin(), decision.conditions.end(),
                                 condition) != decision.conditions.end();
    nodeCondition.set({condition}, holds ? 1 : 0);
  }
  pods.set({}, double(decision.memory.pods.size()));
}

}  // namespace nodewarden::node
