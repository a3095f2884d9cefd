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

// Prints "<program>: skipped: <why>"; nullopt, for a caller that then exits 77.
inline std::nullopt_t skipped(const char* program, const std::string& why) {
  std::printf("%s: skipped: %s\n", program, why.c_str());
  return std::nullopt;
}

// The hierarchy to build the sandbox in, or nullopt once skipped(): not root, or no usable
// cgroup hierarchy.
inline std::optional<cgroups::Hierarchy> hierarchyForSandbox(const char* program,
                                                             const char* whyRoot) {
  if (::geteuid() != 0) return skipped(program, "needs root (" + std::string(whyRoot) + ")");
  auto discovered = cgroups::discoverHierarchy({});
  if (!discovered)
    return skipped(program, "no usable cgroup hierarchy: " + discovered.error().message);
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
// "<prefix>-<this pid>", `memoryLimit` on its kubepods; nullopt once skipped().
inline std::optional<cgroups::Sandbox> openSandbox(const cgroups::Hierarchy& h, const char* program,
                                                   const char* prefix,
                                                   std::optional<std::uint64_t> memoryLimit = {}) {
  const int stale = cgroups::removeStaleSandboxes(h, prefix);
  if (stale > 0) std::printf("removed %d stale sandbox directories\n", stale);
  const std::string name = std::string(prefix) + "-" + std::to_string(::getpid());
  auto created = cgroups::Sandbox::create(h, {.name = name, .memoryLimit = memoryLimit});
  if (!created) return skipped(program, "cannot create the sandbox: " + created.error().message);
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
  static constexpr int kTierOf[10] = {0, 1, 2, 1, 0, 1, 2, 1, 1, 2};
  return kTiers[kTierOf[index % 10]];
}

}  // namespace nodewarden::bench
