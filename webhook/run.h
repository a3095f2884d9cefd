// The command of webhook/, declared apart so that main() does not compile Asio.
#pragma once

#include <string>
#include <vector>

namespace nodewarden::webhook {

// `nodewarden webhook …`: the binding admission webhook (docs/reference.md §1). Returns the
// exit code (base/args.h).
int runWebhook(const std::vector<std::string>& args);

}  // namespace nodewarden::webhook
