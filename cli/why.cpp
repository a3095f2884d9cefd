// `nodewarden why POD` and `kubectl nodewarden why POD` (docs/reference.md §8): the decision
// records of a pod — evictions, admission verdicts, preemptions, kernel OOM kills — from the
// agent of its node, its state directory, or, as a kubectl plugin, the agent of the node it
// ran on through the API server's node proxy (GET /api/v1/nodes/NODE:PORT/proxy/v1/decisions).
#include <sys/stat.h>

#include <algorithm>
#include <boost/asio/io_context.hpp>
#include <cerrno>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "base/args.h"
#include "base/files.h"
#include "cli/agent_client.h"
#include "cli/commands.h"
#include "cli/source.h"
#include "kube/client.h"
#include "kube/config.h"
#include "record/decisions.h"

namespace nodewarden::cli {
namespace {

namespace fs = std::filesystem;

const char* kWhyUsage =
    "usage: nodewarden why POD [-n NAMESPACE] [--agent URL | --state-dir DIR] [-o table|json]\n"
    "       kubectl nodewarden why POD [-n NAMESPACE] [--kubeconfig FILE] [--context NAME]\n"
    "                                  [--agent-port PORT] [-o table|json]\n"
    "\n"
    "Why did my pod die? Every decision the node took about the pod — an eviction (what was\n"
    "measured, the threshold, its rank, the latency, the episode file that holds the inputs),\n"
    "an admission verdict, a preemption — and every kernel OOM kill seen in its cgroup (a\n"
    "container's or a child process's), kept by the agent across restarts.\n"
    "\n"
    "  POD                  NAME or NAMESPACE/NAME\n"
    "  -n, --namespace NS   the pod's namespace (default: default)\n"
    "  --agent URL          ask this agent (GET /v1/decisions; default http://127.0.0.1:10290,\n"
    "                       then, if it cannot be reached, /var/lib/nodewarden)\n"
    "  --state-dir DIR      read the agent's records from its state directory\n"
    "  -o, --output FORMAT  table (default) or json\n"
    "\n"
    "As `kubectl nodewarden why` (or with --kubeconfig) the cluster is asked, found as kubectl\n"
    "finds it (--kubeconfig, else $KUBECONFIG, else ~/.kube/config; --context): the pod's node if\n"
    "the pod still exists, else every node; on each, the agent through the API server's proxy\n"
    "to its port (--agent-port, default 10290): the DaemonSet's agent pod (label\n"
    "app.kubernetes.io/name=nodewarden, component agent) through the pod proxy, else an agent\n"
    "on the host through the node proxy (it must then listen on the node's address). The\n"
    "caller needs get on pods and pods/proxy (or nodes/proxy), list on nodes and pods.\n"
    "\n"
    "Exit status: 0 answered (with or without records), 1 no source could be read, or a record\n"
    "file is truncated or corrupt (named with its byte offset), 2 usage error.\n";

constexpr const char* kDefaultAgent = "http://127.0.0.1:10290";
constexpr const char* kDefaultStateDir = "/var/lib/nodewarden";

Result<std::vector<record::DecisionRecord>> fromStateDir(const std::string& dir,
                                                         const std::string& pod) {
  const std::string decisions = dir + "/decisions";
  std::error_code ec;
  if (!fs::is_directory(decisions, ec)) {
    return Error{"--state-dir " + dir +
                 ": no decisions/ directory (is it the agent's state directory?)"};
  }
  std::vector<std::string> files;
  for (const auto& entry : fs::directory_iterator(decisions, ec)) {
    if (entry.path().filename().string().ends_with(record::kDecisionsSuffix)) {
      files.push_back(entry.path().string());
    }
  }
  std::sort(files.begin(), files.end());
  std::vector<record::DecisionRecord> out;
  for (const std::string& file : files) {
    auto text = readFile(file);
    if (!text) return text.error();
    auto records = record::parseStoreFile(*text);
    if (!records) return records.error().withContext(file);
    for (auto& r : *records) {
      if (r.pod == pod) out.push_back(std::move(r));
    }
  }
  return out;
}

Result<std::vector<record::DecisionRecord>> fromAgent(const std::string& url,
                                                      const std::string& pod) {
  auto endpoint = parseAgentUrl(url);
  if (!endpoint) return endpoint.error();
  auto body = get(*endpoint, "/v1/decisions?pod=" + kube::queryEscape(pod), url);
  if (!body) return body.error();
  auto records = record::parseWhyJson(*body);
  if (!records)
    return records.error().withContext("the agent at " + url + " answered /v1/decisions");
  return records;
}

// One GET through the API server, run to its end.
kube::ApiResponse apiGet(boost::asio::io_context& io, kube::Client& client,
                         const std::string& target) {
  kube::ApiResponse answer;
  bool done = false;
  client.request("GET", target, "", "", [&](kube::ApiResponse response) {
    answer = std::move(response);
    done = true;
  });
  io.restart();
  io.run();
  if (!done) answer.error = "no answer";
  return answer;
}

// The pod's node if the pod still exists, else every node; each node's agent through the API
// server's pod proxy (the DaemonSet's agent) or node proxy (an agent on the host). The
// cluster is found as kubectl finds it (docs/reference.md §1.10), never in-cluster.
Result<std::vector<record::DecisionRecord>> fromCluster(const SourceChoice& source,
                                                        const std::string& port,
                                                        const std::string& pod, std::ostream& err) {
  auto config = clusterOf(source);
  if (!config) return config.error();
  boost::asio::io_context io;
  kube::Client client(io, *config, interactiveClientOptions(source, "nodewarden-why"));
  const std::string ns = pod.substr(0, pod.find('/'));
  const std::string name = pod.substr(pod.find('/') + 1);
  std::vector<std::string> nodes;
  const kube::ApiResponse found = apiGet(io, client, "/api/v1/namespaces/" + ns + "/pods/" + name);
  if (found.status == 200) {
    policy::Json object = policy::Json::parse(found.body, nullptr, false);
    if (object.is_object()) {
      const std::string node =
          object.value("spec", policy::Json::object()).value("nodeName", std::string());
      if (!node.empty()) nodes.push_back(node);
    }
  } else if (found.status != 404) {
    return Error{"GET pod " + pod + ": " + found.describe()}.withContext(source.name);
  }
  if (nodes.empty()) {
    const kube::ApiResponse list = apiGet(io, client, "/api/v1/nodes");
    if (list.status != 200) {
      return Error{"GET /api/v1/nodes: " + list.describe()}.withContext(source.name);
    }
    policy::Json json = policy::Json::parse(list.body, nullptr, false);
    if (json.is_object() && json.contains("items") && json["items"].is_array()) {
      for (const auto& node : json["items"]) {
        const std::string nodeName =
            node.value("metadata", policy::Json::object()).value("name", std::string());
        if (!nodeName.empty()) nodes.push_back(nodeName);
      }
    }
  }
  std::vector<record::DecisionRecord> out;
  std::size_t answered = 0;
  std::string lastProblem;
  const std::string query = "/proxy/v1/decisions?pod=" + kube::queryEscape(pod);
  for (const std::string& node : nodes) {
    // The DaemonSet's agent listens on its pod's address: through the API server's pod proxy.
    // An agent on the host (the systemd unit): through the node proxy to the node's address.
    std::string target = "/api/v1/nodes/" + node + ":" + port + query;
    const kube::ApiResponse onNode = apiGet(
        io, client, "/api/v1/pods?fieldSelector=" + kube::queryEscape("spec.nodeName=" + node));
    if (onNode.status == 200) {
      policy::Json list = policy::Json::parse(onNode.body, nullptr, false);
      if (list.is_object() && list.contains("items") && list["items"].is_array()) {
        for (const auto& item : list["items"]) {
          const policy::Json meta = item.value("metadata", policy::Json::object());
          const policy::Json labels = meta.value("labels", policy::Json::object());
          if (labels.value("app.kubernetes.io/name", std::string()) != "nodewarden" ||
              labels.value("app.kubernetes.io/component", std::string()) != "agent" ||
              item.value("status", policy::Json::object()).value("phase", std::string()) !=
                  "Running") {
            continue;
          }
          target = "/api/v1/namespaces/" + meta.value("namespace", std::string()) + "/pods/" +
                   meta.value("name", std::string()) + ":" + port + query;
          break;
        }
      }
    }
    const kube::ApiResponse answer = apiGet(io, client, target);
    if (answer.status != 200) {
      lastProblem = "node " + node + ": " + answer.describe();
      err << "warning: the agent of node " << node << " did not answer: " << answer.describe()
          << (answer.status == 403 ? " (needs get on pods/proxy, or nodes/proxy for an agent "
                                     "on the host)"
                                   : "")
          << "\n";
      continue;
    }
    ++answered;
    auto records = record::parseWhyJson(answer.body);
    if (!records) {
      err << "warning: node " << node << ": " << records.error().message << "\n";
      continue;
    }
    for (auto& r : *records) {
      r.node = node;
      out.push_back(std::move(r));
    }
  }
  if (answered == 0) {
    return Error{nodes.empty() ? "the cluster has no nodes"
                               : "no agent answered (" + lastProblem + ")"}
        .withContext(source.name);
  }
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.time < b.time; });
  return out;
}

std::string render(const std::string& pod, const std::vector<record::DecisionRecord>& records,
                   const std::string& from) {
  std::string out;
  if (records.empty()) {
    return "No decision about " + pod + " on record (" + from + ").\n";
  }
  out += "Pod " + pod + " (uid " + (records.back().uid.empty() ? "?" : records.back().uid) +
         "): " + std::to_string(records.size()) + " record(s) from " + from + "\n\n";
  for (const record::DecisionRecord& r : records) {
    out += record::formatRfc3339(r.time) + "  " + std::string(record::toString(r.kind)) + "  " +
           r.action + (r.node.empty() ? "" : "  node " + r.node) + "\n";
    if (r.signal) {
      out += "  measured: " + *r.signal + " " +
             (r.observed ? humanBytes(*r.observed) : std::string("?")) + " available, threshold " +
             (r.threshold ? humanBytes(*r.threshold) : std::string("?")) + "\n";
    }
    if (r.rank)
      out += "  ranking: " + std::to_string(*r.rank) +
             (*r.rank == 1   ? "st"
              : *r.rank == 2 ? "nd"
              : *r.rank == 3 ? "rd"
                             : "th") +
             " to go\n";
    if (r.gracePeriodSeconds)
      out += "  grace period: " + std::to_string(*r.gracePeriodSeconds) + " s\n";
    if (r.latencyMs) {
      char latency[64];
      std::snprintf(latency, sizeof latency, "%.1f ms", *r.latencyMs);
      out += std::string("  latency (crossing to kill signal): ") + latency + "\n";
    }
    out += "  reason: " + r.reason + "\n";
    if (!r.message.empty()) out += "  detail: " + r.message + "\n";
    if (r.episode) out += "  episode: " + *r.episode + " (nodewarden replay it)\n";
  }
  return out;
}

}  // namespace

int runWhy(const std::vector<std::string>& argv, std::ostream& out, std::ostream& err) {
  auto args = parseArgs(
      argv, {"namespace", "agent", "state-dir", "output", "agent-port", "kubeconfig", "context"},
      {"help"});
  if (!args) {
    err << "nodewarden why: " << args.error().message << "\n\n" << kWhyUsage;
    return kExitUsage;
  }
  if (args->flag("help")) {
    out << kWhyUsage;
    return kExitOk;
  }
  if (args->positional.size() != 1) {
    err << "nodewarden why: give one POD (NAME or NAMESPACE/NAME)\n\n" << kWhyUsage;
    return kExitUsage;
  }
  const std::string output = args->value("output").value_or("table");
  if (output != "table" && output != "json") {
    err << "nodewarden why: -o must be table or json, got \"" << output << "\"\n\n" << kWhyUsage;
    return kExitUsage;
  }
  std::string pod = args->positional[0];
  const auto ns = args->value("namespace");
  if (pod.find('/') == std::string::npos) {
    pod = ns.value_or("default") + "/" + pod;
  } else if (ns && pod.substr(0, pod.find('/')) != *ns) {
    err << "nodewarden why: " << pod << " and -n " << *ns << " name two namespaces\n";
    return kExitUsage;
  }
  if (pod.front() == '/' || pod.back() == '/' || std::count(pod.begin(), pod.end(), '/') != 1) {
    err << "nodewarden why: \"" << pod << "\" is not NAMESPACE/NAME\n";
    return kExitUsage;
  }
  const auto agent = args->value("agent");
  const auto stateDir = args->value("state-dir");
  if (agent && stateDir) {
    err << "nodewarden why: --agent and --state-dir are two sources: give one\n\n" << kWhyUsage;
    return kExitUsage;
  }
  const bool cluster = !agent && !stateDir && (kubectlPluginMode() || args->value("kubeconfig"));
  if (!cluster) {
    // The cluster's options without the cluster: say so rather than ignore them.
    for (const char* option : {"kubeconfig", "context", "agent-port"}) {
      if (!args->value(option)) continue;
      err << "nodewarden why: --" << option
          << (agent || stateDir ? " asks the cluster: not with --agent or --state-dir"
                                : " goes with --kubeconfig (or kubectl nodewarden why)")
          << "\n\n"
          << kWhyUsage;
      return kExitUsage;
    }
  }
  Result<std::vector<record::DecisionRecord>> records = Error{""};
  std::string from;
  if (stateDir) {
    from = *stateDir;
    records = fromStateDir(*stateDir, pod);
  } else if (cluster) {
    auto source = chooseSource(*args);  // as explain: --kubeconfig, or kubectl's resolution
    if (!source) {
      err << "nodewarden why: " << source.error().message << "\n\n" << kWhyUsage;
      return kExitUsage;
    }
    from = "the agents of " + source->name;
    records = fromCluster(*source, args->value("agent-port").value_or("10290"), pod, err);
  } else {
    from = agent.value_or(kDefaultAgent);
    records = fromAgent(from, pod);
    std::error_code ec;
    if (!records && !agent && records.error().sysErrno != 0 &&
        fs::is_directory(std::string(kDefaultStateDir) + "/decisions", ec)) {
      err << "note: " << records.error().message << "; reading " << kDefaultStateDir << "\n";
      from = kDefaultStateDir;
      records = fromStateDir(kDefaultStateDir, pod);
    }
  }
  if (!records) {
    err << "nodewarden why: " << records.error().message << "\n";
    return kExitBadInput;
  }
  if (output == "json") {
    out << record::whyJson(pod, *records).dump(2) << "\n";
  } else {
    out << render(pod, *records, from);
  }
  return kExitOk;
}

}  // namespace nodewarden::cli
