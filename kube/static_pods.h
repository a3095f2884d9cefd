// The kubelet's static pods: the pod manifests in its --pod-manifest-path directory
// (staticPodPath, /etc/kubernetes/manifests under kubeadm), which it runs without the API
// server, read as the kubelet's file source (pkg/kubelet/config/file.go) reads them.
//
// Threading: pure values and functions; readStaticPods does blocking file I/O.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"
#include "policy/model.h"

namespace nodewarden::kube {

inline constexpr const char* kDefaultStaticPodPath = "/etc/kubernetes/manifests";

// A manifest the kubelet would not run (skipped, never fatal), or one it runs only part of.
struct StaticPodProblem {
  std::string file;     // the manifest's path
  std::string message;  // "line 4: …" (YAML), "metadata.name: missing …" (the pod), …
  bool skipped = true;  // false: a warning, the file's pod is in StaticPods::pods
};

struct StaticPods {
  std::vector<policy::Pod> pods;  // in file name order
  std::vector<StaticPodProblem> problems;
};

// One manifest (YAML or JSON; a text starting with '{' is read as JSON), as the kubelet's
// applyDefaults (pkg/kubelet/config/common.go) turns it into a static pod of `nodeName`:
// - the name becomes <name>-<lowercased nodeName>, the name its mirror pod has in the API;
// - the namespace defaults to "default"; spec.nodeName is `nodeName`;
// - without metadata.uid, the uid is an MD5 of the manifest, the node and `file`. The
//   kubelet hashes its Go object instead, so this is stable but not the kubelet's uid (the
//   mirror pod's kubernetes.io/config.mirror annotation holds that one);
// - annotations kubernetes.io/config.source "file" (what policy::isStaticPod tests, so
//   resolvePod marks the pod critical) and kubernetes.io/config.hash (the uid);
// - a toleration {operator: Exists, effect: NoExecute} is added unless already there.
// The manifest must be apiVersion v1, kind Pod, with metadata.name. Only the first YAML
// document counts, as the kubelet decodes only that one (readStaticPods warns of the rest). The pod
// comes back resolved (policy::resolvePod) against the built-in priority classes only: resolve it
// again with the cluster's classes where they are known. Errors name no file (the caller adds it).
Result<policy::Pod> parseStaticPod(std::string_view text, const std::string& file,
                                   const std::string& nodeName);

// Every manifest in `path`, as the kubelet reads them: each regular file (symbolic links
// followed) whose name does not start with '.', whatever its extension (the kubelet reads
// "kube-apiserver.yaml.bak" too); subdirectories are not entered. A `path` that is a file is
// read alone; a `path` that does not exist gives no pods and no problems (the kubelet's
// "path does not exist, ignoring"). Files over 10 MiB are problems, not read.
StaticPods readStaticPods(const std::string& path, const std::string& nodeName);

}  // namespace nodewarden::kube
