// `nodewarden explain --batch FILE`: many explain commands in one process, for programs that
// ask thousands of questions (a process start costs more than most answers).
#include <fstream>
#include <iostream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "base/args.h"
#include "cli/commands.h"

namespace nodewarden::cli {
namespace {

const char* kBatchUsage =
    "usage: nodewarden explain --batch FILE\n"
    "\n"
    "Runs many explain commands in one process. Each line of FILE (- for standard input) is a\n"
    "JSON array of the arguments of one `nodewarden explain` command, such as\n"
    "  [\"eviction\", \"--snapshot\", \"s.json\", \"--policy\", \"p.json\", \"-o\", \"json\"]\n"
    "and gets one line on standard output, as soon as it is read:\n"
    "  {\"exit\": N, \"stdout\": \"...\", \"stderr\": \"...\"}\n"
    "what that command prints and its exit status. Inside a batch, - (standard input) cannot\n"
    "be a file; a line that is not an array of strings gets exit 2. Empty lines are skipped.\n"
    "\n"
    "Exit status: 0 once every line is answered, 1 when FILE cannot be read, 2 usage error.\n";

// One line of the batch: its arguments, or a usage error.
int answer(const std::string& line, std::ostream& out, std::ostream& err) {
  const nlohmann::json request = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
  if (!request.is_array()) {
    err << "nodewarden explain --batch: expected a JSON array of arguments, got: " << line << "\n";
    return kExitUsage;
  }
  std::vector<std::string> args;
  for (const auto& item : request) {
    if (!item.is_string()) {
      err << "nodewarden explain --batch: every argument must be a string, got " << item.dump()
          << "\n";
      return kExitUsage;
    }
    args.push_back(item.get<std::string>());
    if (args.back() == "-") {
      err << "nodewarden explain --batch: standard input holds the batch; name a file instead "
             "of -\n";
      return kExitUsage;
    }
    if (args.back() == "--batch") {
      err << "nodewarden explain --batch: a batch cannot hold another batch\n";
      return kExitUsage;
    }
  }
  return runExplain(args, out, err);
}

}  // namespace

int runExplainBatch(const std::vector<std::string>& argv, std::ostream& out, std::ostream& err) {
  if (argv.size() == 1 && (argv[0] == "-h" || argv[0] == "--help")) {
    out << kBatchUsage;
    return kExitOk;
  }
  if (argv.size() != 1) {
    err << "nodewarden explain --batch: expected exactly one FILE\n\n" << kBatchUsage;
    return kExitUsage;
  }
  std::ifstream file;
  std::istream* in = &std::cin;
  if (argv[0] != "-") {
    file.open(argv[0]);
    if (!file) {
      err << argv[0] << ": cannot be read\n";
      return kExitBadInput;
    }
    in = &file;
  }
  std::string line;
  while (std::getline(*in, line)) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    std::ostringstream o, e;
    const int code = answer(line, o, e);
    nlohmann::json reply = {{"exit", code}, {"stdout", o.str()}, {"stderr", e.str()}};
    out << reply.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << "\n"
        << std::flush;
  }
  return kExitOk;
}

}  // namespace nodewarden::cli
