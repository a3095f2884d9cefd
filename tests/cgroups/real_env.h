// Shared by the real-cgroup tests: the machine's hierarchy and a fresh sandbox per test.
#pragma once

#include <string>

#include "cgroups/hierarchy.h"
#include "cgroups/sandbox.h"

namespace nodewarden::test {

// The host's hierarchy (discovered once; the skip check guarantees it exists).
const cgroups::Hierarchy& realHierarchy();

// A sandbox named "nodewarden-test-<pid>-<n>" below every hierarchy root. Fails the test
// (REQUIRE) if it cannot be made.
cgroups::Sandbox makeSandbox(cgroups::Driver driver = cgroups::Driver::Cgroupfs,
                             bool useUnified = true, bool useFreezer = true,
                             std::optional<std::uint64_t> memoryLimit = std::nullopt);

// A child body: allocates `bytes` and touches every page, then sleeps until killed
// (bounded: it exits by itself after `lifetimeSeconds`).
int allocateAndSleep(std::size_t bytes, int lifetimeSeconds = 60);
// A child body: burns CPU until killed or `lifetimeSeconds` pass.
int burnCpu(int lifetimeSeconds = 60);

}  // namespace nodewarden::test
