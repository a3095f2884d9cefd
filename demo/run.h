// The command of demo/, declared apart so that main() does not compile Asio.
#pragma once

#include <string>
#include <vector>

namespace nodewarden::demo {

// `nodewarden demo …` and its load generator `nodewarden demo-load` (docs/reference.md §1).
// Return the exit code (base/args.h).
int runDemo(const std::vector<std::string>& args);
int runDemoLoad(const std::vector<std::string>& args);

}  // namespace nodewarden::demo
