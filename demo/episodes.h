// The demo's last words on its episodes: each replayed with the policy it recorded
// (record/replay.h). Only `nodewarden demo` prints this summary; `nodewarden replay` has
// its own, fuller table (cli/replay.cpp).
#pragma once

#include <ostream>
#include <string>
#include <vector>

#include "policy/json_reader.h"

namespace nodewarden::demo {

// Each episode replayed with the policy it recorded (fidelity, and, for an episode the agent
// did not act on, whether that policy would have prevented the kernel's OOM kills), a few
// lines each on `out`; the same as a JSON array
// [{"file", "fidelity", "decisions", "simulated", "kernelOomKills", "prevented", "speedup"}].
policy::OrderedJson summarizeEpisodes(const std::vector<std::string>& files, std::ostream& out);

}  // namespace nodewarden::demo
