// `nodewarden status`: a running agent's live decision (GET /v1/state), for people or programs.
#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <chrono>
#include <csignal>
#include <ctime>
#include <iostream>
#include <string>
#include <thread>
#include <vector>

#include "base/args.h"
#include "cli/agent_client.h"
#include "cli/commands.h"
#include "policy/json_reader.h"
#include "server/http_server.h"

namespace nodewarden::cli {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;

const char* kStatusUsage =
    "usage: nodewarden status [--agent URL] [--watch [--interval SECONDS] [--count N]]\n"
    "                         [-o table|json]\n"
    "\n"
    "Shows what a running agent sees and decides now: its signals against the thresholds, the\n"
    "node conditions, the memory ranking and the pods it is evicting (GET /v1/state).\n"
    "\n"
    "  --agent URL          the agent's HTTP address (default http://127.0.0.1:10290)\n"
    "  --watch              show it again every --interval seconds (default 2) until\n"
    "                       interrupted, or --count times\n"
    "  -o, --output FORMAT  table (default) or json (the agent's /v1/state, one document per\n"
    "                       line with --watch)\n"
    "\n"
    "Exit status: 0 shown, 1 the agent cannot be reached or answers with an error, 2 usage\n"
    "error.\n";

std::string amount(const std::string& signal, const policy::Json& value) {
  if (!value.is_number()) return "-";
  const auto number = value.get<std::int64_t>();
  if (signal.starts_with("memory") || signal.starts_with("allocatableMemory") ||
      signal.ends_with("fs.available")) {
    return humanBytes(number);
  }
  return std::to_string(number);
}

// The /v1/state JSON (docs/reference.md §4, "explain eviction -o json") for people.
Result<std::string> renderState(const std::string& body, const std::string& url) {
  policy::Diagnostics diagnostics;
  auto state = policy::parseJsonText(body, diagnostics);
  if (!state || !state->is_object()) {
    return Error{
        "the agent at " + url + " answered /v1/state with something that is not its " +
        "JSON: " + (diagnostics.empty() ? std::string("not an object") : diagnostics.joined())};
  }
  const policy::Json& s = *state;
  std::string out = "Agent " + url + ", node " + s.value("node", std::string("?")) + "\n\n";
  std::vector<std::vector<std::string>> rows{
      {"SIGNAL", "KIND", "AVAILABLE", "THRESHOLD", "CAPACITY", "MET"}};
  for (const auto& signal : s.value("signals", policy::Json::array())) {
    const std::string name = signal.value("signal", std::string("?"));
    rows.push_back({name, signal.value("kind", std::string("?")),
                    amount(name, signal.value("available", policy::Json())),
                    amount(name, signal.value("threshold", policy::Json())),
                    amount(name, signal.value("capacity", policy::Json())),
                    signal.value("met", false) ? "yes" : "no"});
  }
  if (rows.size() == 1) {
    out += "Signals: none observed yet\n";
  } else {
    out += columns(rows, "");
  }
  std::string conditions;
  for (const auto& c : s.value("conditions", policy::Json::array())) {
    if (c.is_string()) conditions += (conditions.empty() ? "" : ", ") + c.get<std::string>();
  }
  out += "\nConditions: " + (conditions.empty() ? std::string("none") : conditions) + "\n";
  const policy::Json ranking = s.value("ranking", policy::Json::object());
  const policy::Json memory = ranking.value("memory", policy::Json::array());
  out += "\nMemory ranking (first evicted at the top): ";
  if (memory.empty()) out += "no pods";
  out += "\n";
  int index = 0;
  for (const auto& pod : memory) {
    if (pod.is_string())
      out += "  " + std::to_string(++index) + ". " + pod.get<std::string>() + "\n";
  }
  const policy::Json evict = s.value("evict", policy::Json::array());
  out += "\nEvicting now: " + (evict.empty() ? std::string("nothing") : "") + "\n";
  for (const auto& e : evict) {
    out += "  " + e.value("pod", std::string("?")) + "  " + e.value("signal", std::string("?")) +
           ", grace " + std::to_string(e.value("gracePeriodSeconds", std::int64_t(0))) + "s\n";
    out += "    " + e.value("message", std::string()) + "\n";
  }
  return out;
}

volatile std::sig_atomic_t interrupted = 0;

}  // namespace

int runStatus(const std::vector<std::string>& argv, std::ostream& out, std::ostream& err) {
  auto parsed = parseCommand("status", argv, {"agent", "output", "interval", "count"},
                             {"watch", "help"}, kStatusUsage, out, err);
  if (const int* exit = std::get_if<int>(&parsed)) return *exit;
  const Args& args = std::get<Args>(parsed);
  const std::string output = args.value("output").value_or("table");
  if (output != "table" && output != "json") {
    err << "nodewarden status: -o must be table or json, got \"" << output << "\"\n\n"
        << kStatusUsage;
    return kExitUsage;
  }
  const bool watch = args.flag("watch");
  if (!watch && (args.value("interval") || args.value("count"))) {
    err << "nodewarden status: --interval and --count go with --watch\n\n" << kStatusUsage;
    return kExitUsage;
  }
  double interval = 2;
  long count = 0;  // 0: until interrupted
  if (auto text = args.value("interval")) {
    char* end = nullptr;
    interval = std::strtod(text->c_str(), &end);
    if (end == text->c_str() || *end != '\0' || !(interval >= 0.1 && interval <= 3600)) {
      err << "nodewarden status: --interval must be seconds between 0.1 and 3600, got \"" << *text
          << "\"\n";
      return kExitUsage;
    }
  }
  if (auto text = args.value("count")) {
    char* end = nullptr;
    count = std::strtol(text->c_str(), &end, 10);
    if (end == text->c_str() || *end != '\0' || count < 1) {
      err << "nodewarden status: --count must be a whole number of at least 1, got \"" << *text
          << "\"\n";
      return kExitUsage;
    }
  }
  const std::string url = args.value("agent").value_or("http://127.0.0.1:10290");
  auto endpoint = parseAgentUrl(url);
  if (!endpoint) {
    err << "nodewarden status: " << endpoint.error().message << "\n";
    return kExitUsage;
  }

  auto showOnce = [&]() -> bool {
    auto body = get(*endpoint, "/v1/state", url);
    if (!body) {
      err << "nodewarden status: " << body.error().message << "\n";
      return false;
    }
    if (output == "json") {
      policy::Diagnostics diagnostics;
      auto state = policy::parseJsonText(*body, diagnostics);
      if (!state) {
        err << "nodewarden status: the agent at " << url
            << " answered with invalid JSON: " << diagnostics.joined() << "\n";
        return false;
      }
      out << (watch ? state->dump() : state->dump(2)) << "\n" << std::flush;
      return true;
    }
    auto text = renderState(*body, url);
    if (!text) {
      err << "nodewarden status: " << text.error().message << "\n";
      return false;
    }
    if (watch) {
      const std::time_t now = std::time(nullptr);
      char stamp[32];
      std::strftime(stamp, sizeof stamp, "%Y-%m-%d %H:%M:%S", std::localtime(&now));
      out << "--- " << stamp << "\n";
    }
    out << *text << std::flush;
    return true;
  };

  if (!watch) return showOnce() ? kExitOk : kExitBadInput;
  interrupted = 0;
  auto previous = std::signal(SIGINT, [](int) { interrupted = 1; });
  bool ok = true;
  for (long shown = 0; !interrupted && (count == 0 || shown < count); ++shown) {
    // An agent that restarts is waited for: the next refresh tries again.
    ok = showOnce();
    if (count != 0 && shown + 1 >= count) break;
    const auto until = std::chrono::steady_clock::now() +
                       std::chrono::milliseconds(static_cast<long>(interval * 1000));
    while (!interrupted && std::chrono::steady_clock::now() < until) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  }
  std::signal(SIGINT, previous);
  return ok ? kExitOk : kExitBadInput;
}

}  // namespace nodewarden::cli
