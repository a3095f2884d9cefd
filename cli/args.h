// Command-line parsing shared by every nodewarden command.
#pragma once

#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "base/result.h"

namespace nodewarden::agent {

// Parsed options of one command: `--name value`, `--name=value`, `-o json`, `-ojson`, flags.
struct Args {
  std::map<std::string, std::string> values;
  std::set<std::string> flags;
  std::vector<std::string> positional;

  std::optional<std::string> value(const std::string& name) const;
  bool flag(const std::string& name) const { return flags.count(name) != 0; }
};

// Parses `argv` against the options a command accepts. `valueOptions` take an argument;
// `flagOptions` do not. "-o" is an alias of "--output", "-h" of "--help". An unknown option
// or a missing value is an error (a usage error, exit 2).
Result<Args> parseArgs(const std::vector<std::string>& argv,
                       const std::set<std::string>& valueOptions,
                       const std::set<std::string>& flagOptions);

}  // namespace nodewarden::agent
