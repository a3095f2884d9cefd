// Publish: every metric `nodewarden agent` exports, registered in one place
// (docs/reference.md §7 lists them). The loop and the routes write to these members; /metrics
// renders `registry`.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "node/pod_source.h"
#include "policy/eviction.h"
#include "server/metrics.h"

namespace nodewarden::node {

struct AgentMetrics {
  AgentMetrics();
  AgentMetrics(const AgentMetrics&) = delete;
  AgentMetrics& operator=(const AgentMetrics&) = delete;

  // A cycle's decision: the signals' available amounts, which thresholds are met, the node
  // conditions and the pods ranked.
  void publish(const policy::EvictionDecision& decision);
  // The pod source's list and watch counters (PodSource::watchCounts), added to
  // nodewarden_api_reflector_total as they grow.
  void publish(const std::vector<WatchCounts>& watches);

  // Every family exists from the start, so a scrape before the first event sees them.
  server::MetricsRegistry registry;
  server::CounterFamily& evictions;      // {signal, reason}
  server::CounterFamily& admissions;     // {verdict, reason}
  server::GaugeFamily& signalAvailable;  // {signal}
  server::GaugeFamily& thresholdMet;     // {signal, kind}
  server::GaugeFamily& nodeCondition;    // {condition}
  server::HistogramFamily& evictionLatency;
  server::HistogramFamily& scanDuration;
  server::GaugeFamily& pods;
  server::CounterFamily& cycles;           // {trigger}
  server::CounterFamily& policyReloads;    // {result}
  server::CounterFamily& dryRunEvictions;  // {signal}
  server::GaugeFamily& kernelNotifications;
  server::CounterFamily& apiReflector;  // {resource, event}

 private:
  std::map<std::pair<std::string, std::string>, std::uint64_t> apiReflectorSeen_;
};

}  // namespace nodewarden::node
