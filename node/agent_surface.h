// What the agent shows its routes (routes.h): the narrow face of node/agent.h that the HTTP
// routes read, so that the routes and the agent do not include each other. The agent
// implements it; run.cpp hands the agent to the routes as one.
//
// Threading: as the agent's, every call on the loop thread.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "base/clock.h"
#include "node/agent_metrics.h"
#include "node/recorder.h"
#include "policy/json_reader.h"
#include "policy/model.h"
#include "policy/policy.h"

namespace nodewarden::node {

class AgentSurface {
 public:
  virtual ~AgentSurface() = default;

  // The first full scan is done.
  virtual bool ready() const = 0;
  // Ready, not stopped, and a cycle within three intervals.
  virtual bool healthy() const = 0;
  // When the last cycle ran (nullopt before the first), on clock()'s time line.
  virtual std::optional<SteadyTime> lastCycleAt() const = 0;
  virtual const Clock& clock() const = 0;

  // `explain eviction -o json` for this node, live (GET /v1/state).
  virtual policy::OrderedJson stateJson() const = 0;
  // The Prometheus text of the agent's metrics (GET /metrics).
  virtual std::string metricsText() const = 0;

  // The node as a snapshot, the unscheduled pods the source knows, and the policy in force:
  // what an admission is decided on.
  virtual const policy::Snapshot& snapshot() const = 0;
  virtual const std::vector<policy::Pod>& pendingPods() const = 0;
  virtual const policy::Policy& policy() const = 0;
  // Where an admission is counted and recorded (recorder: null when there is none).
  virtual AgentMetrics& metrics() = 0;
  virtual Recorder* recorder() = 0;
};

}  // namespace nodewarden::node
