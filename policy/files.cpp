#include "policy/files.h"

#include "base/files.h"

namespace nodewarden::policy {
namespace {

Error prefixed(const std::string& file, const Diagnostics& diagnostics) {
  std::string out;
  for (const auto& e : diagnostics.errors()) {
    if (!out.empty()) out += '\n';
    out += file + ": " + e.message;
  }
  return Error{out};
}

}  // namespace

Result<Policy> loadPolicy(const std::string* path) {
  if (path == nullptr) return Policy::defaults();
  auto text = readFile(*path);
  if (!text) return text.error();
  Diagnostics diagnostics;
  auto parsed = parsePolicyText(text.value(), diagnostics);
  const std::string name = *path == "-" ? "<stdin>" : *path;
  if (!parsed) return prefixed(name, diagnostics);
  for (auto& warning : parsed->warnings) warning = name + ": " + warning;
  return *parsed;
}

Result<Snapshot> loadSnapshot(const std::string& path) {
  auto text = readFile(path);
  if (!text) return text.error();
  Diagnostics diagnostics;
  auto parsed = parseSnapshotText(text.value(), diagnostics);
  if (!parsed) return prefixed(path == "-" ? "<stdin>" : path, diagnostics);
  return std::move(*parsed);
}

Result<Pod> loadPod(const std::string& path, const Snapshot& snapshot) {
  auto text = readFile(path);
  if (!text) return text.error();
  const std::string name = path == "-" ? "<stdin>" : path;
  Diagnostics diagnostics;
  auto json = parseKubernetesJsonText(text.value(), diagnostics);
  if (!json) return prefixed(name, diagnostics);
  auto pod = parsePod(*json, "", diagnostics);
  if (!pod) return prefixed(name, diagnostics);
  resolvePod(*pod, snapshot.priorityClasses);
  return std::move(*pod);
}

}  // namespace nodewarden::policy
