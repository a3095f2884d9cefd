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

#include "cgroups/fs.h"
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

// What a source's list and watch of one API resource have done since the agent started:
// counters for /metrics (nodewarden_api_reflector_total).
struct WatchCounts {
  std::string resource;  // "Pod", "Node", "Pod (unscheduled)", …
  std::uint64_t lists = 0;
  std::uint64_t watches = 0;
  std::uint64_t events = 0;  // ADDED, MODIFIED and DELETED applied
  std::uint64_t bookmarks = 0;
  std::uint64_t relistsGone = 0;  // relists after a 410 Gone
  std::uint64_t badEvents = 0;    // malformed events skipped
  std::uint64_t failures = 0;     // requests that failed and were retried
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
  // A descriptor that becomes readable when the set may have changed, so the agent can bring
  // it up to date as soon as it does rather than in the cycle that must decide; -1 when the
  // source has none (refresh() is then cheap enough every cycle).
  virtual int changeFd() const { return -1; }
  // One entry per resource listed and watched from the API server; none for local sources.
  virtual std::vector<WatchCounts> watchCounts() const { return {}; }
};

// `--source static --manifests DIR`: every *.json file in DIR holds one Pod object, a pod of
// this node (docs/reference.md §1). Files are re-read when their size, mtime or inode change; a
// file that does not parse is reported and skipped while the others still count. Priority class
// names resolve against the built-in classes (system-node-critical, system-cluster-critical).
// The directory is watched (inotify): a refresh re-reads only the files named by its events
// and changes only their pods in the set, so its cost is that of the changes, not of the
// files; every file is walked again at the first refresh, when events were lost, and when two
// files share a UID. Without a watch (inotify unavailable) a refresh stats the directory, and
// walks every file when its mtime changed or 10 s passed since the last walk.
class StaticPodSource final : public PodSource {
 public:
  StaticPodSource(std::string directory, std::string nodeName);
  bool refresh() override;
  const PodSet& current() const override { return set_; }
  std::vector<std::string> takeProblems() override;
  std::string describe() const override;
  int changeFd() const override { return watch_.get(); }

 private:
  // A file as last read. Its pod object is kept once, in the set (the file holding a UID
  // that an earlier file by name holds too is read again if it comes to count).
  struct FileState {
    std::uint64_t inode = 0;
    std::int64_t mtimeNanos = 0;
    std::int64_t size = 0;
    std::optional<std::string> uid;  // nullopt: the file did not parse
    bool counted = false;            // its pod is the set's pod of that UID
  };
  bool walk();
  // Re-reads one file named by the watch; false when nothing changed. Sets `walk` when only a
  // walk over every file can say what the set is now.
  bool update(const std::string& name, bool& walkNeeded);
  // The file's state, and its pod (unresolved) into `pod` when it parses.
  FileState read(const std::string& path, std::int64_t inode, std::int64_t mtime, std::int64_t size,
                 std::optional<policy::Pod>& pod);

  std::string directory_;
  std::string nodeName_;
  std::map<std::string, FileState> files_;  // by file name
  std::map<std::string, int> uidFiles_;     // how many files hold each UID
  PodSet set_;
  cgroups::UniqueFd watch_;  // inotify on the directory
  std::vector<std::string> problems_;
  std::string directoryProblem_;  // reported once until it changes
  bool first_ = true;
  std::int64_t directoryMtime_ = -1;
  std::chrono::steady_clock::time_point lastWalk_{};
};

}  // namespace nodewarden::node
