// YAML documents as nlohmann JSON values, read with yaml-cpp's event parser, for the two YAML
// inputs of a node: kubeconfig files and the kubelet's static pod manifests.
//
// Threading: pure functions, no state.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"
#include "policy/json_reader.h"

namespace nodewarden::kube {

struct YamlOptions {
  // Only the block style kubectl writes for kubeconfigs (go-yaml's): flow collections other
  // than {} and [], block scalars, multi-line scalars, tags, tabs in indentation and several
  // documents are refused, each with its line. Without it, all of YAML 1.2 but anchors and
  // aliases (always refused: an alias expands into a copy, so ten lines can make gigabytes).
  bool kubectlSubset = false;
  // Plain scalars other than true/false/null stay strings (every kubeconfig value is a
  // string or a bool, and `token: 12345` is a string there). Without it, integers and floats
  // of YAML 1.2's core schema become JSON numbers.
  bool untypedScalars = false;
  // Members whose value is a map of strings (Kubernetes' map[string]string: labels,
  // annotations, nodeSelector): their plain scalars stay strings, as sigs.k8s.io/yaml keeps
  // them when it decodes into the Go type (`version: 1.10` is "1.10", not 1.1).
  std::vector<std::string> stringMapMembers;
  // Collections nested deeper than this are refused, so no input can exhaust the stack.
  std::size_t maxDepth = 100;
};

// Every document of `text` (none for an empty text). Errors are "line N: what" (1-based), or
// "line N: <yaml-cpp's message>" for syntax errors. Mapping keys must be scalars and unique.
// Never throws.
Result<std::vector<policy::Json>> readYamlDocuments(std::string_view text,
                                                    const YamlOptions& options);

}  // namespace nodewarden::kube
