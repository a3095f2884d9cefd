// bench/support: the cgroup sandbox the root benchmarks run in, from why a machine cannot run
// them (exit 77) to a teardown that says what was left.
#pragma once

#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <optional>
#include <string>

#include "bench/support/measure.h"
#include "cgroups/hierarchy.h"
#include "cgroups/sandbox.h"

namespace nodewarden::bench {

// The hierarchy to build the sandbox in, or nullopt after printing "<program>: skipped: why"
// (the caller exits 77): not root, or no usable cgroup hierarchy.
inline std::optional<cgroups::Hierarchy> hierarchyForSandbox(const char* program,
                                                             const char* whyRoot) {
  if (::geteuid() != 0) {
    std::printf("%s: skipped: needs root (%s)\n", program, whyRoot);
    return std::nullopt;
  }
  auto discovered = cgroups::discoverHierarchy({});
  if (!discovered) {
    std::printf("%s: skipped: no usable cgroup hierarchy: %s\n", program,
                discovered.error().message.c_str());
    return std::nullopt;
  }
  return std::move(discovered).value();
}

// The environment line about the hierarchy the sandbox is built in.
inline void printHierarchy(const cgroups::Hierarchy& h) {
  std::printf("  cgroups: %s; memory=%s (%s) cpuacct=%s pids=%s freezer=%s unified=%s\n",
              cgroups::toString(h.mode), h.memory.c_str(),
              h.memoryVersion == cgroups::Version::V1 ? "v1" : "v2", h.cpuacct.c_str(),
              h.pids.c_str(), h.freezer.empty() ? "-" : h.freezer.c_str(),
              h.unified.empty() ? "-" : h.unified.c_str());
}

// Removes the sandboxes of killed runs ("<prefix>-<pid>" of a dead process) and creates
// "<prefix>-<this pid>", `memoryLimit` on its kubepods; nullopt after saying why (exit 77).
inline std::optional<cgroups::Sandbox> openSandbox(const cgroups::Hierarchy& h, const char* program,
                                                   const char* prefix,
                                                   std::optional<std::uint64_t> memoryLimit = {}) {
  const int stale = cgroups::removeStaleSandboxes(h, prefix);
  if (stale > 0) std::printf("removed %d stale sandbox directories\n", stale);
  const std::string name = std::string(prefix) + "-" + std::to_string(::getpid());
  auto created = cgroups::Sandbox::create(h, {.name = name, .memoryLimit = memoryLimit});
  if (!created) {
    std::printf("%s: skipped: cannot create the sandbox: %s\n", program,
                created.error().message.c_str());
    return std::nullopt;
  }
  return std::move(created).value();
}

// Destroys the sandbox (children, then cgroups deepest first; bounded) and says how long it took
// and what was left; false when something was.
inline bool closeSandbox(cgroups::Sandbox& sandbox) {
  const auto teardown = steadyNow();
  auto destroyed = sandbox.destroy();
  std::printf("\nsandbox removed in %.2f s%s%s\n", nanosSince(teardown) * 1e-9,
              destroyed ? "" : ": ", destroyed ? "" : destroyed.error().message.c_str());
  return bool(destroyed);
}

// Roughly a busy node's mix: 2 guaranteed, 5 burstable and 3 besteffort in every 10.
inline const char* qosMix(std::size_t index) {
  static constexpr const char* kTiers[] = {"guaranteed", "burstable", "besteffort"};
  return kTiers["0121012112"[index % 10] - '0'];
}

}  // namespace nodewarden::bench
