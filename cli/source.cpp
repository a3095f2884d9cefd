#include "cli/source.h"

#include <unistd.h>

#include <boost/asio/io_context.hpp>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <ostream>
#include <string>

#include "kube/client.h"
#include "kube/config.h"
#include "policy/files.h"

namespace nodewarden::cli {
namespace {

// One GET, run to its end on a private loop; the body parsed as JSON.
Result<policy::Json> getJson(boost::asio::io_context& io, kube::Client& client,
                             const std::string& target) {
  std::optional<kube::ApiResponse> answer;
  client.request("GET", target, "", "",
                 [&](kube::ApiResponse response) { answer = std::move(response); });
  io.restart();
  io.run();
  if (!answer) return Error{"GET " + target + ": no answer"};
  if (answer->status == 401) {
    // Authentication, not RBAC: no right would help (kubectl auth can-i is refused too).
    return Error{"GET " + target + ": " + answer->describe() +
                 " (the cluster did not accept the kubeconfig's credentials: renew the user's "
                 "token or certificate; kubectl with the same kubeconfig says \"You must be "
                 "logged in to the server\")"};
  }
  if (answer->status == 403) {
    // RBAC: say which right is missing, in kubectl's words.
    const bool proxy = target.find("/proxy/") != std::string::npos;
    std::string resource = target.substr(0, target.find('?'));
    resource = resource.substr(resource.rfind('/') + 1);
    const std::string needed = proxy ? "get on nodes/proxy" : "list on " + resource;
    return Error{"GET " + target + ": " + answer->describe() + " (nodewarden needs " + needed +
                 "; check with: kubectl auth can-i " +
                 (proxy ? std::string("get nodes/proxy") : "list " + resource) + ")"};
  }
  if (answer->status != 200) return Error{"GET " + target + ": " + answer->describe()};
  policy::Json json = policy::Json::parse(answer->body, nullptr, /*allow_exceptions=*/false);
  if (json.is_discarded()) return Error{"GET " + target + ": the answer is not JSON"};
  return json;
}

// Every item of a list, 500 at a time (as kubectl pages).
Result<policy::Json> listAll(boost::asio::io_context& io, kube::Client& client,
                             const std::string& path) {
  policy::Json items = policy::Json::array();
  std::string continueToken;
  for (int page = 0; page < 100000; ++page) {
    std::string target = path + "?limit=500";
    if (!continueToken.empty()) target += "&continue=" + continueToken;
    auto list = getJson(io, client, target);
    if (!list) return list.error();
    if (!list->is_object() || !list->contains("items") || !(*list)["items"].is_array()) {
      return Error{"GET " + target + ": expected a List with items"};
    }
    for (auto& item : (*list)["items"]) items.push_back(std::move(item));
    continueToken.clear();
    if (auto meta = list->find("metadata"); meta != list->end() && meta->is_object()) {
      if (auto c = meta->find("continue"); c != meta->end() && c->is_string()) {
        continueToken = c->get<std::string>();
      }
    }
    if (continueToken.empty()) return items;
  }
  return Error{"GET " + path + ": the list did not end"};
}

bool kubectlPlugin = false;

}  // namespace

void setKubectlPluginMode(bool on) {
  kubectlPlugin = on;
}
bool kubectlPluginMode() {
  return kubectlPlugin;
}

Result<policy::Policy> loadPolicyOption(const Args& args, std::ostream& err) {
  const auto path = args.value("policy");
  auto policy = policy::loadPolicy(path ? &*path : nullptr);
  if (policy) {
    for (const auto& warning : policy->warnings) err << "warning: " << warning << "\n";
  }
  return policy;
}

Result<SourceChoice> chooseSource(const Args& args) {
  SourceChoice source;
  source.snapshot = args.value("snapshot");
  source.kubeconfig = args.value("kubeconfig");
  source.context = args.value("context");
  source.saveTo = args.value("save-snapshot");
  source.stdinUsed = args.value("pod") == std::optional<std::string>("-") ||
                     source.snapshot == std::optional<std::string>("-");
  if (source.snapshot && source.kubeconfig) {
    return Error{"--snapshot and --kubeconfig are two sources: give one"};
  }
  if (!source.snapshot && !source.kubeconfig && kubectlPlugin) {
    // kubectl's own resolution (docs/reference.md §1.10): $KUBECONFIG's files merged, else
    // ~/.kube/config.
    source.ambient = true;
    const char* env = std::getenv("KUBECONFIG");
    source.name = env != nullptr && *env != '\0'
                      ? "the cluster of $KUBECONFIG (" + std::string(env) + ")"
                      : std::string("the cluster of ~/.kube/config");
    if (source.context) source.name += " (context " + *source.context + ")";
    return source;
  }
  if (!source.snapshot && !source.kubeconfig) {
    return Error{"a source is required: --snapshot FILE or --kubeconfig FILE"};
  }
  if (source.snapshot && (source.context || source.saveTo)) {
    return Error{std::string(source.context ? "--context" : "--save-snapshot") +
                 " goes with --kubeconfig, not --snapshot"};
  }
  if (source.snapshot) {
    source.name = *source.snapshot == "-" ? "<stdin>" : *source.snapshot;
  } else {
    source.name = "the cluster of " + *source.kubeconfig +
                  (source.context ? " (context " + *source.context + ")" : "");
  }
  return source;
}

Result<kube::ClusterConfig> clusterOf(const SourceChoice& source) {
  kube::ResolveOptions resolve;
  resolve.context = source.context;
  resolve.inClusterFallback = false;  // for the daemons only
  return kube::resolveClusterConfig(source.kubeconfig, resolve);
}

kube::ClientOptions interactiveClientOptions(const SourceChoice& source, std::string userAgent) {
  kube::ClientOptions options;
  options.userAgent = std::move(userAgent);
  // An exec credential plugin may ask the person at the terminal (a browser login), unless
  // standard input carries a pod or a snapshot.
  options.terminal = ::isatty(STDIN_FILENO) == 1 && !source.stdinUsed;
  if (options.terminal) options.execTimeout = std::chrono::minutes(10);
  return options;
}

Result<policy::Snapshot> loadSource(const SourceChoice& source, std::ostream& err) {
  if (source.snapshot) return policy::loadSnapshot(*source.snapshot);
  auto config = clusterOf(source);
  if (!config) return config.error();
  boost::asio::io_context io;
  kube::Client client(io, *config, interactiveClientOptions(source, "nodewarden-explain"));
  policy::Json snapshot = policy::Json::object();
  const std::pair<const char*, const char*> lists[] = {
      {"nodes", "/api/v1/nodes"},
      {"pods", "/api/v1/pods"},
      {"priorityClasses", "/apis/scheduling.k8s.io/v1/priorityclasses"},
      {"podDisruptionBudgets", "/apis/policy/v1/poddisruptionbudgets"},
  };
  // A progress line on stderr once reading takes longer than a moment.
  const auto began = std::chrono::steady_clock::now();
  bool told = false;
  auto progress = [&](const std::string& what) {
    if (std::chrono::steady_clock::now() - began < std::chrono::seconds(1)) return;
    err << (told ? "" : "reading " + source.name + ": ") << what << " " << std::flush;
    told = true;
  };
  for (const auto& [member, path] : lists) {
    auto items = listAll(io, client, path);
    if (!items) return items.error().withContext(source.name);
    progress(std::to_string(items->size()) + " " + member + ",");
    snapshot[member] = std::move(items).value();
  }
  snapshot["stats"] = policy::Json::object();
  for (const auto& node : snapshot["nodes"]) {
    const auto name = node.value("metadata", policy::Json::object()).value("name", std::string());
    if (name.empty()) continue;
    auto summary = getJson(io, client, "/api/v1/nodes/" + name + "/proxy/stats/summary");
    if (!summary) {
      err << "warning: " << source.name << ": node " << name
          << ": no kubelet stats, its signals are not observed (" << summary.error().message
          << ")\n";
      continue;
    }
    snapshot["stats"][name] = std::move(summary).value();
  }
  progress(std::to_string(snapshot["stats"].size()) + " kubelet summaries");
  if (told) err << "\n";
  if (source.saveTo) {
    std::ofstream out(*source.saveTo, std::ios::binary | std::ios::trunc);
    out << snapshot.dump(2) << "\n";
    out.close();
    if (!out) return Error{"--save-snapshot " + *source.saveTo + ": cannot write the file"};
  }
  // The same parser as a snapshot file, so both sources give the same answers.
  policy::Diagnostics diagnostics;
  auto parsed = policy::parseSnapshot(snapshot, diagnostics);
  if (!parsed) {
    std::string message;
    for (const auto& e : diagnostics.errors()) {
      message += (message.empty() ? "" : "\n") + source.name + ": " + e.message;
    }
    return Error{message};
  }
  return std::move(*parsed);
}

}  // namespace nodewarden::cli
