// Command-line parsing and exit codes shared by every nodewarden command (docs/reference.md §1).
#pragma once

#include <iosfwd>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <variant>
#include <vector>

#include "base/result.h"

namespace nodewarden {

// Every command's exit codes: 0 success, 1 bad input, 2 usage error.
inline constexpr int kExitOk = 0;
inline constexpr int kExitBadInput = 1;
inline constexpr int kExitUsage = 2;

// Parsed options of one command: `--name value`, `--name=value`, `-o json`, `-ojson`, flags.
struct Args {
  std::map<std::string, std::string> values;
  std::set<std::string> flags;
  std::vector<std::string> positional;

  std::optional<std::string> value(const std::string& name) const;
  bool flag(const std::string& name) const { return flags.count(name) != 0; }
};

// Parses `argv` against the options a command accepts. `valueOptions` take an argument;
// `flagOptions` do not. "-o" is an alias of "--output", "-n" of "--namespace" (kubectl's),
// "-h" of "--help". An unknown option
// or a missing value is an error (a usage error, exit 2).
Result<Args> parseArgs(const std::vector<std::string>& argv,
                       const std::set<std::string>& valueOptions,
                       const std::set<std::string>& flagOptions);

// The start every daemon command shares: parse `argv`; --help prints `usage` to `out` (exit
// 0); an unknown option, a missing value or a positional argument prints the error and the
// usage to `err` (exit 2); a --log-format other than text or json is refused (exit 2) and
// the log is configured by the caller from Args. Returns the Args, or the exit code to
// return now.
std::variant<Args, int> parseCommand(const std::string& command,
                                     const std::vector<std::string>& argv,
                                     const std::set<std::string>& valueOptions,
                                     const std::set<std::string>& flagOptions, const char* usage,
                                     std::ostream& out, std::ostream& err);

}  // namespace nodewarden
