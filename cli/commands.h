// The commands of cli/ (they only read): each takes its arguments and streams and returns an
// exit code of base/args.h. The daemons' commands are declared in node/run.h, webhook/run.h
// and demo/run.h.
#pragma once

#include <iosfwd>
#include <string>
#include <vector>

#include "base/args.h"
#include "policy/eviction.h"
#include "policy/policy.h"

namespace nodewarden::cli {

int runExplain(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);
// `explain --batch FILE`: each line a JSON array of explain arguments, each answered with
// one line {"exit", "stdout", "stderr"} (docs/reference.md §1.5).
int runExplainBatch(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);
int runExplainAdmission(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);
int runExplainPreemption(const std::vector<std::string>& args, std::ostream& out,
                         std::ostream& err);
int runCheckPolicy(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);
// The human view of an eviction decision (`explain eviction -o table`).
std::string renderEvictionTable(const policy::EvictionDecision& decision,
                                const policy::Policy& policy);

// `nodewarden status`: a running agent's /v1/state for people or programs.
int runStatus(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);

// `nodewarden replay`, `nodewarden tune` and `nodewarden why` (docs/reference.md §8).
int runReplay(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);
int runTune(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);
int runWhy(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);

// Rows as left-aligned columns two spaces apart, each line starting with `indent`.
std::string columns(const std::vector<std::vector<std::string>>& rows, const std::string& indent);

// "1.5Gi", "117.7Mi", "512": sizes for people.
std::string humanBytes(std::int64_t bytes);

}  // namespace nodewarden::cli
