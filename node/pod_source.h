// Where the agent learns which pods run on its node (and their priority classes and PDBs).
// Usage always comes from cgroups; a source supplies the objects, matched by metadata.uid.
//
// Threading: sources are used from the agent's loop thread only.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "policy/model.h"

namespace nodewarden::node {

// What a source knows at one moment. Pods are resolved (priority, QoS, requests) and carry
// this node's name.
struct PodSet {
  std::vector<policy::Pod> pods;
  std::vector<policy::PriorityClass> priorityClasses;
  std::vector<policy::PodDisruptionBudget> podDisruptionBudgets;
  std::optional<policy::Node> node;  // the Node object, when the source has one
  // Pods not bound to any node yet (the Kubernetes source watches them), so that an
  // AdmissionReview for a binding to this node finds the pod; resolved like `pods`.
  std::vector<policy::Pod> pending;
};

class PodSource {
 public:
  virtual ~PodSource() = default;
  // Brings the set up to date. Cheap when nothing changed (the loop calls it every
  // housekeeping cycle). Returns true when the set changed.
  virtual bool refresh() = 0;
  virtual const PodSet& current() const = 0;
  // Problems found by the last refreshes that changed something (a file that does not
  // parse, …), each naming its file or object. Each is reported once until it changes.
  virtual std::vector<std::string> takeProblems() = 0;
  // "static manifests in /etc/nodewarden/pods.d", for logs and /v1/state.
  virtual std::string describe() const = 0;
};

// `--source static --manifests DIR`: every *.json file in DIR holds one Pod object, a pod of
// this node (docs/reference.md §1). Files are re-read when their size, mtime or inode change; a file
// that does not parse is reported and skipped while the others still count. Priority class
// names resolve against the built-in classes (system-node-critical, system-cluster-critical).
// A refresh stats only the directory unless its mtime changed or 10 s passed since the last
// walk over every file (an in-place edit that leaves the directory alone is seen then).
class StaticPodSource final : public PodSource {
 public:
  StaticPodSource(std::string directory, std::string nodeName);
  bool refresh() override;
  const PodSet& current() const override { return set_; }
  std::vector<std::string> takeProblems() override;
  std::string describe() const override;

 private:
  struct FileState {
    std::uint64_t inode = 0;
    std::int64_t mtimeNanos = 0;
    std::int64_t size = 0;
    std::optional<policy::Pod> pod;  // nullopt: the file did not parse
  };
  std::string directory_;
  std::string nodeName_;
  std::map<std::string, FileState> files_;  // by file name
  PodSet set_;
  std::vector<std::string> problems_;
  std::string directoryProblem_;  // reported once until it changes
  bool first_ = true;
  std::int64_t directoryMtime_ = -1;
  std::chrono::steady_clock::time_point lastWalk_{};
};

}  // namespace nodewarden::node
