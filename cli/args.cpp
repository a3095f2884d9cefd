#include "cli/args.h"

namespace nodewarden::agent {

std::optional<std::string> Args::value(const std::string& name) const {
  auto it = values.find(name);
  if (it == values.end()) return std::nullopt;
  return it->second;
}

Result<Args> parseArgs(const std::vector<std::string>& argv,
                       const std::set<std::string>& valueOptions,
                       const std::set<std::string>& flagOptions) {
  Args args;
  for (std::size_t i = 0; i < argv.size(); ++i) {
    std::string arg = argv[i];
    if (arg == "--") {
      for (++i; i < argv.size(); ++i) args.positional.push_back(argv[i]);
      break;
    }
    if (arg.size() < 2 || arg[0] != '-' || arg == "-") {
      args.positional.push_back(arg);
      continue;
    }
    std::string name;
    std::optional<std::string> inlineValue;
    if (arg.rfind("--", 0) == 0) {
      auto eq = arg.find('=');
      name = arg.substr(2, eq == std::string::npos ? std::string::npos : eq - 2);
      if (eq != std::string::npos) inlineValue = arg.substr(eq + 1);
    } else if (arg == "-h") {
      name = "help";
    } else if (arg.rfind("-o", 0) == 0) {
      name = "output";
      if (arg.size() > 2) inlineValue = arg.substr(arg[2] == '=' ? 3 : 2);
    } else {
      return Error{"unknown option " + arg};
    }
    if (valueOptions.count(name) != 0) {
      if (inlineValue) {
        args.values[name] = *inlineValue;
      } else if (i + 1 < argv.size()) {
        args.values[name] = argv[++i];
      } else {
        return Error{"option --" + name + " needs a value"};
      }
    } else if (flagOptions.count(name) != 0 || name == "help") {
      if (inlineValue) return Error{"option --" + name + " takes no value"};
      args.flags.insert(name);
    } else {
      return Error{"unknown option " + arg};
    }
  }
  return args;
}

}  // namespace nodewarden::agent
