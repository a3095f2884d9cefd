// `nodewarden demo`: the agent guarding a sandbox "node" on this machine with real processes,
// and `nodewarden demo-load`, the memory/CPU load generator the demo runs as each pod.
#pragma once

#include <string>
#include <vector>

namespace nodewarden::demo {

// Returns the exit code (0 after the report; 1 bad input or no cgroups; 2 usage error).
int runDemo(const std::vector<std::string>& args);
// The load generator (hidden; the demo re-executes the binary with it).
int runDemoLoad(const std::vector<std::string>& args);

}  // namespace nodewarden::demo
