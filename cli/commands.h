// The nodewarden commands: each takes its arguments and streams, returns the exit code
// (0 success, 1 bad input, 2 usage error).
#pragma once

#include <iosfwd>
#include <string>
#include <vector>

#include "policy/eviction.h"
#include "policy/policy.h"

namespace nodewarden::agent {

inline constexpr int kExitOk = 0;
inline constexpr int kExitBadInput = 1;
inline constexpr int kExitUsage = 2;

int runExplain(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);
int runExplainAdmission(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);
int runExplainPreemption(const std::vector<std::string>& args, std::ostream& out,
                         std::ostream& err);
int runCheckPolicy(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);
// `nodewarden agent` (agent/run_agent.cpp), `nodewarden demo` and its load generator
// (agent/demo.cpp). Declared here so main() does not compile Asio.
int runAgent(const std::vector<std::string>& args);
int runDemo(const std::vector<std::string>& args);
int runDemoLoad(const std::vector<std::string>& args);
// `nodewarden webhook` (agent/run_webhook.cpp): the binding admission webhook.
int runWebhook(const std::vector<std::string>& args);

// The human view of an eviction decision (`explain eviction -o table`).
std::string renderEvictionTable(const policy::EvictionDecision& decision,
                                const policy::Policy& policy);

// `nodewarden status`: a running agent's /v1/state for people or programs.
int runStatus(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);

// Rows as left-aligned columns two spaces apart, each line starting with `indent`.
std::string columns(const std::vector<std::vector<std::string>>& rows, const std::string& indent);

// "1.5Gi", "117.7Mi", "512": sizes for people.
std::string humanBytes(std::int64_t bytes);

}  // namespace nodewarden::agent
