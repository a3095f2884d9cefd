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

// How plain (unquoted, untagged) scalars other than mapping keys become JSON values.
enum class YamlScalars {
  // YAML 1.2's core schema: true/false, null, ~, integers and floats.
  Core,
  // As go-yaml v2 resolves them, which kubectl's kubeconfig loader uses (YAML 1.1): also y,
  // yes, on, n, no, off (in three casings) as booleans; integers with 0x, 0o, 0b or a leading
  // 0 (octal) and underscores. Timestamps stay text, as go-yaml leaves them for untyped values.
  GoYaml,
};

struct YamlOptions {
  YamlScalars scalars = YamlScalars::Core;
  // Members whose value is a map of strings (Kubernetes' map[string]string: labels,
  // annotations, nodeSelector): their plain scalars stay strings, as sigs.k8s.io/yaml keeps
  // them when it decodes into the Go type (`version: 1.10` is "1.10", not 1.1).
  std::vector<std::string> stringMapMembers;
  // Collections nested deeper than this are refused, so no input can exhaust the stack.
  std::size_t maxDepth = 100;
  // Anchors and aliases: refused (the default), or expanded — an alias is a copy of its
  // anchored node, with at most `maxAliasValues` values copied in all, so ten lines cannot make
  // gigabytes — with go-yaml's merge keys (`<<: *base`: the mapping's members set in order,
  // later ones replacing earlier ones).
  bool aliases = false;
  std::size_t maxAliasValues = 100000;
  // A key given twice in a mapping: refused (the default), or the last one wins, as go-yaml
  // decodes into a map.
  bool lastDuplicateKeyWins = false;
  // Read the first document only and stop (what follows is not parsed), as go-yaml's Unmarshal.
  bool firstDocumentOnly = false;
};

// Every document of `text` (none for an empty text). Errors are "line N: what" (1-based), or
// "line N: <yaml-cpp's message>" for syntax errors ("line N: tabs are not allowed for
// indentation" when a tab in the indentation is the likely cause). Mapping keys must be
// scalars. Tags other than the core ones (!!str, !!int, …) are refused. Never throws.
Result<std::vector<policy::Json>> readYamlDocuments(std::string_view text,
                                                    const YamlOptions& options);

}  // namespace nodewarden::kube
