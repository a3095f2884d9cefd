// Where `explain` reads its objects from (docs/reference.md §1): a snapshot file, or a live
// cluster through the API server, optionally saved as a snapshot.
#pragma once

#include <iosfwd>
#include <optional>
#include <set>
#include <string>

#include "base/args.h"
#include "base/result.h"
#include "kube/client.h"
#include "kube/config.h"
#include "policy/model.h"
#include "policy/policy.h"

namespace nodewarden::cli {

// --policy FILE, or the built-in defaults; its warnings (values accepted and ignored or
// clamped) are printed on `err` as "warning: FILE: PATH: …".
Result<policy::Policy> loadPolicyOption(const Args& args, std::ostream& err);

// The SOURCE options every `explain` command accepts.
inline const std::set<std::string> kSourceOptions = {"snapshot", "kubeconfig", "context",
                                                     "save-snapshot"};

// Run as `kubectl nodewarden` (the binary named kubectl-nodewarden): without a source,
// explain reads the cluster as kubectl would — $KUBECONFIG's files merged, else
// ~/.kube/config (docs/reference.md §1.10). Set by main() from argv[0].
void setKubectlPluginMode(bool on);
bool kubectlPluginMode();

struct SourceChoice {
  bool ambient = false;                   // no source given, as a kubectl plugin
  bool stdinUsed = false;                 // --pod - or --snapshot -
  std::optional<std::string> snapshot;    // --snapshot FILE
  std::optional<std::string> kubeconfig;  // --kubeconfig FILE
  std::optional<std::string> context;     // --context NAME
  std::optional<std::string> saveTo;      // --save-snapshot FILE
  std::string name;                       // for messages: the file, or "the cluster (...)"
};

// Checks the combination (exactly one of --snapshot and --kubeconfig; --context and
// --save-snapshot only with --kubeconfig). The error is a usage error.
Result<SourceChoice> chooseSource(const Args& args);

// The cluster a source names (--kubeconfig FILE, or as a kubectl plugin $KUBECONFIG, else
// ~/.kube/config), found as kubectl finds it (docs/reference.md §1.10) and never through the
// in-cluster service account, which is for the daemons; errors name where it looked.
Result<kube::ClusterConfig> clusterOf(const SourceChoice& source);

// The client options of a command a person runs: an exec credential plugin may ask at the
// terminal (a browser login, up to 10 minutes) unless standard input carries a pod or a
// snapshot.
kube::ClientOptions interactiveClientOptions(const SourceChoice& source, std::string userAgent);

// The snapshot of docs/reference.md §2, from the file or from the cluster: nodes, pods,
// priority classes, disruption budgets and each node's kubelet summary (GET
// /api/v1/nodes/NODE/proxy/stats/summary; a node whose summary cannot be read is warned about
// on `err` and has no stats). With --save-snapshot what was read is written there first.
Result<policy::Snapshot> loadSource(const SourceChoice& source, std::ostream& err);

}  // namespace nodewarden::cli
