// The command of node/, declared apart so that main() does not compile Asio.
#pragma once

#include <string>
#include <vector>

namespace nodewarden::node {

// `nodewarden agent …`: parses the options (docs/reference.md §1), builds the agent and runs
// the loop until SIGTERM/SIGINT. Returns the exit code (base/args.h).
int runAgent(const std::vector<std::string>& args);

}  // namespace nodewarden::node
