#include "base/args.h"

#include <ostream>

namespace nodewarden {

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
    } else if (arg.rfind("-n", 0) == 0) {
      name = "namespace";  // kubectl's -n
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

std::variant<Args, int> parseCommand(const std::string& command,
                                     const std::vector<std::string>& argv,
                                     const std::set<std::string>& valueOptions,
                                     const std::set<std::string>& flagOptions, const char* usage,
                                     std::ostream& out, std::ostream& err) {
  auto args = parseArgs(argv, valueOptions, flagOptions);
  if (!args) {
    err << "nodewarden " << command << ": " << args.error().message << "\n\n" << usage;
    return kExitUsage;
  }
  if (args->flag("help")) {
    out << usage;
    return kExitOk;
  }
  if (!args->positional.empty()) {
    err << "nodewarden " << command << ": unexpected argument \"" << args->positional[0] << "\"\n\n"
        << usage;
    return kExitUsage;
  }
  if (valueOptions.contains("log-format")) {
    const std::string format = args->value("log-format").value_or("text");
    if (format != "text" && format != "json") {
      err << "nodewarden " << command << ": --log-format must be text or json, got \"" << format
          << "\"\n";
      return kExitUsage;
    }
  }
  return std::move(args).value();
}

}  // namespace nodewarden
