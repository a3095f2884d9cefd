#include <algorithm>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <limits>
#include <map>
#include <sstream>

#include "base/args.h"
#include "cli/commands.h"
#include "cli/source.h"
#include "policy/files.h"

namespace nodewarden::cli {
namespace {

using policy::EvictionDecision;
using policy::RankedPod;

const char* kExplainUsage =
    "usage: nodewarden explain eviction SOURCE [--node NAME] [--policy FILE]\n"
    "                                   [-o table|json] [--assume-grace-elapsed]\n"
    "       SOURCE: --snapshot FILE | --kubeconfig FILE [--context NAME] [--save-snapshot FILE]\n"
    "\n"
    "Says which pods on a node would be evicted under pressure, in what order and why, from a\n"
    "snapshot of kubectl output (docs/reference.md section 2):\n"
    "  {\"nodes\": kubectl get nodes -o json, \"pods\": kubectl get pods -A -o json,\n"
    "   \"priorityClasses\": ..., \"podDisruptionBudgets\": ...,\n"
    "   \"stats\": {\"NODE\": kubectl get --raw /api/v1/nodes/NODE/proxy/stats/summary}}\n"
    "\n"
    "  --snapshot FILE          the snapshot (- for standard input)\n"
    "  --kubeconfig FILE        instead, read the same objects from the cluster (its current\n"
    "                           context, or --context NAME), the stats through each node's\n"
    "                           proxy; --save-snapshot FILE keeps what was read as a snapshot\n"
    "  --node NAME              the node; may be omitted when the snapshot has one node\n"
    "  --policy FILE            an eviction policy (default: the kubelet's hard thresholds)\n"
    "  -o, --output FORMAT      table (default, for people) or json (for programs)\n"
    "  --assume-grace-elapsed   treat soft thresholds as met for their whole grace period\n"
    "\n"
    "Exit status: 0 whatever the verdict, 1 bad input, 2 usage error.\n";

std::string amountText(std::string_view resource, std::int64_t amount) {
  if (resource == "memory" || resource == "ephemeral-storage") return humanBytes(amount);
  return std::to_string(amount);
}

std::string signalAmount(policy::Signal signal, std::int64_t amount) {
  return amountText(policy::starvedResource(signal), amount);
}

void renderRanking(std::ostringstream& out, const policy::Ranking& ranking,
                   const EvictionDecision& decision, const std::string& title) {
  std::map<const policy::Pod*, const policy::Eviction*> evicted;
  for (const auto& e : decision.evict) evicted.emplace(e.pod, &e);
  out << title << " (first evicted at the top):\n";
  if (ranking.pods.empty()) {
    out << "  (no pods)\n\n";
    return;
  }
  const bool hasRequest = ranking.resource == "memory" || ranking.resource == "ephemeral-storage";
  // Swap (NodeSwap): shown beside memory when any pod reports it.
  const bool hasSwap =
      ranking.resource == "memory" &&
      std::any_of(ranking.pods.begin(), ranking.pods.end(), [](const RankedPod& r) {
        return r.stats != nullptr && r.stats->swapUsageBytes.has_value();
      });
  std::vector<std::vector<std::string>> rows;
  rows.push_back({"#", "POD", "PRIORITY", "QOS", "USAGE", hasSwap ? "SWAP" : "",
                  hasRequest ? "REQUEST" : "", "DECISION"});
  int index = 0;
  for (const RankedPod& r : ranking.pods) {
    ++index;
    std::string usage = r.hasUsage ? amountText(ranking.resource, r.usage) : "-";
    std::string swap;
    if (hasSwap) {
      swap = r.stats != nullptr && r.stats->swapUsageBytes
                 ? humanBytes(std::int64_t(*r.stats->swapUsageBytes))
                 : "-";
    }
    std::string request = hasRequest ? amountText(ranking.resource, r.request) : "";
    if (hasRequest && r.pod->midResize()) {
      // In-place resize under way: eviction counts what the kubelet allocated.
      auto desired = r.pod->requests.find(ranking.resource);
      request +=
          " (allocated; desired " +
          amountText(ranking.resource, desired == r.pod->requests.end() ? 0 : desired->second) +
          (r.pod->resizeState.empty() ? "" : ", " + r.pod->resizeState) + ")";
    }
    std::string why;
    if (auto it = evicted.find(r.pod); it != evicted.end()) {
      const auto& e = *it->second;
      why = std::string("EVICT: ") + std::string(policy::toString(e.signal)) +
            (e.hard ? " hard" : " soft") + ", grace " + std::to_string(e.gracePeriodSeconds) + "s";
    } else if (!r.evictable) {
      why = "never evicted: " + r.notEvictableReason;
    } else {
      why = "keep";
    }
    if (r.evictable && !r.hasUsage) {
      why += " (no usage data: ranked first within its priority)";
    } else if (r.evictable && hasRequest && r.hasUsage) {
      if (r.request != 0 && r.usage > r.request) {
        char ratio[32];
        std::snprintf(ratio, sizeof ratio, "%.2f", double(r.usage) / double(r.request));
        why += std::string(" (") + ratio + "x its request)";
      }
    }
    rows.push_back({std::to_string(index), r.pod->key, std::to_string(r.pod->priority),
                    policy::qosClassName(r.pod->qos), usage, swap, request, why});
  }
  if (!hasSwap) {
    for (auto& row : rows) row.erase(row.begin() + 5);
  }
  out << columns(rows, "  ") << "\n";
}

}  // namespace

static std::string pad(const std::string& s, std::size_t width) {
  return s.size() >= width ? s : s + std::string(width - s.size(), ' ');
}

std::string columns(const std::vector<std::vector<std::string>>& rows, const std::string& indent) {
  std::vector<std::size_t> widths;
  for (const auto& row : rows) {
    if (widths.size() < row.size()) widths.resize(row.size(), 0);
    for (std::size_t i = 0; i < row.size(); ++i) widths[i] = std::max(widths[i], row[i].size());
  }
  std::string out;
  for (const auto& row : rows) {
    std::string line = indent;
    for (std::size_t i = 0; i < row.size(); ++i) {
      line += i + 1 == row.size() ? row[i] : pad(row[i], widths[i] + 2);
    }
    while (!line.empty() && line.back() == ' ') line.pop_back();
    out += line + "\n";
  }
  return out;
}

std::string humanBytes(std::int64_t bytes) {
  static const char* kUnits[] = {"Ki", "Mi", "Gi", "Ti", "Pi", "Ei"};
  std::int64_t magnitude = bytes < 0 ? -bytes : bytes;
  if (magnitude < 1024) return std::to_string(bytes);
  double value = double(bytes);
  int unit = -1;
  while ((value >= 1024 || value <= -1024) && unit < 5) {
    value /= 1024;
    ++unit;
  }
  char buffer[32];
  if (value == double(std::int64_t(value))) {
    std::snprintf(buffer, sizeof buffer, "%lld%s", static_cast<long long>(value), kUnits[unit]);
  } else {
    std::snprintf(buffer, sizeof buffer, "%.1f%s", value, kUnits[unit]);
  }
  return buffer;
}

std::string renderEvictionTable(const EvictionDecision& decision, const policy::Policy& policy) {
  std::ostringstream out;
  out << "Node " << decision.node << ": " << decision.memory.pods.size() << " pods ranked, ranking "
      << (policy.ranking == policy::RankingMode::Priority ? "priority" : "kubelet") << "\n\n";
  if (decision.signals.empty()) {
    out << "Signals: none observed (the snapshot has no kubelet stats for this node)\n\n";
  } else {
    std::vector<std::vector<std::string>> rows;
    rows.push_back({"SIGNAL", "KIND", "AVAILABLE", "THRESHOLD", "CAPACITY", "MET"});
    for (const auto& st : decision.signals) {
      std::string met = st.met ? "yes" : "no";
      if (st.met && !st.actionable) {
        met = "yes, grace period running (" + policy::formatGoDuration(st.metFor) + " so far)";
      }
      if (st.met && st.minReclaim > 0) {
        // Both may be as large as int64 allows: add without wrapping.
        const policy::Int128 target = policy::Int128(st.threshold) + st.minReclaim;
        met += ", reclaim to " +
               signalAmount(st.key.signal, target > std::numeric_limits<std::int64_t>::max()
                                               ? std::numeric_limits<std::int64_t>::max()
                                               : std::int64_t(target));
      }
      rows.push_back({std::string(policy::toString(st.key.signal)), st.key.hard ? "hard" : "soft",
                      signalAmount(st.key.signal, st.available),
                      signalAmount(st.key.signal, st.threshold),
                      signalAmount(st.key.signal, st.capacity), met});
    }
    out << columns(rows, "") << "\n";
  }
  out << "Conditions: ";
  if (decision.conditions.empty()) {
    out << "none";
  } else {
    for (std::size_t i = 0; i < decision.conditions.size(); ++i) {
      out << (i ? ", " : "") << decision.conditions[i];
    }
  }
  out << "\n\n";
  renderRanking(out, decision.memory, decision, "Memory ranking");
  if (decision.pids) renderRanking(out, *decision.pids, decision, "PID ranking");
  if (decision.ephemeralStorage) {
    renderRanking(out, *decision.ephemeralStorage, decision, "Ephemeral-storage ranking");
  }
  if (decision.evict.empty()) {
    out << "Evict: nothing (no threshold is met";
    bool anyGrace = std::any_of(decision.signals.begin(), decision.signals.end(),
                                [](const auto& s) { return s.met && !s.actionable; });
    out << (anyGrace ? " past its grace period; see --assume-grace-elapsed)\n" : ")\n");
  } else {
    out << "Evict (" << decision.evict.size() << "):\n";
    for (const auto& e : decision.evict) {
      out << "  " << e.pod->key << "  " << policy::toString(e.signal) << "  grace "
          << e.gracePeriodSeconds << "s\n    " << e.message << "\n";
    }
  }
  return out.str();
}

int runExplain(const std::vector<std::string>& argv, std::ostream& out, std::ostream& err) {
  if (argv.empty() || argv[0] == "-h" || argv[0] == "--help") {
    (argv.empty() ? err : out) << "usage: nodewarden explain eviction|admission|preemption ...\n"
                                  "       nodewarden explain --batch FILE  (see --batch --help)\n\n"
                               << kExplainUsage;
    return argv.empty() ? kExitUsage : kExitOk;
  }
  if (argv[0] == "--batch") return runExplainBatch({argv.begin() + 1, argv.end()}, out, err);
  if (argv[0] == "admission") return runExplainAdmission({argv.begin() + 1, argv.end()}, out, err);
  if (argv[0] == "preemption") {
    return runExplainPreemption({argv.begin() + 1, argv.end()}, out, err);
  }
  if (argv[0] != "eviction") {
    err << "nodewarden explain: unknown question \"" << argv[0]
        << "\" (expected eviction, admission or preemption)\n\n"
        << kExplainUsage;
    return kExitUsage;
  }
  std::set<std::string> options{"node", "policy", "output"};
  options.insert(kSourceOptions.begin(), kSourceOptions.end());
  auto parsed = parseCommand("explain eviction", {argv.begin() + 1, argv.end()}, options,
                             {"assume-grace-elapsed"}, kExplainUsage, out, err);
  if (const int* exit = std::get_if<int>(&parsed)) return *exit;
  const Args& args = std::get<Args>(parsed);
  auto source = chooseSource(args);
  if (!source) {
    err << "nodewarden explain eviction: " << source.error().message << "\n\n" << kExplainUsage;
    return kExitUsage;
  }
  std::string output = args.value("output").value_or("table");
  if (output != "table" && output != "json") {
    err << "nodewarden explain eviction: -o must be table or json, got \"" << output << "\"\n\n"
        << kExplainUsage;
    return kExitUsage;
  }
  auto policy = loadPolicyOption(args, err);
  if (!policy) {
    err << policy.error().message << "\n";
    return kExitBadInput;
  }
  auto snapshot = loadSource(*source, err);
  if (!snapshot) {
    err << snapshot.error().message << "\n";
    return kExitBadInput;
  }

  // Nodes known to the snapshot: Node objects, else nodes with stats.
  std::vector<std::string> known;
  for (const auto& n : snapshot->nodes) known.push_back(n.name);
  for (const auto& [name, summary] : snapshot->stats) {
    if (std::find(known.begin(), known.end(), name) == known.end()) known.push_back(name);
  }
  auto list = [&] {
    std::string s;
    for (const auto& k : known) s += (s.empty() ? "" : ", ") + k;
    return s.empty() ? std::string("none") : s;
  };
  std::string node;
  if (auto n = args.value("node")) {
    node = *n;
    if (std::find(known.begin(), known.end(), node) == known.end()) {
      err << source->name << ": nodes: node \"" << node
          << "\" not found (nodes in the snapshot: " << list() << ")\n";
      return kExitBadInput;
    }
  } else if (known.size() == 1) {
    node = known[0];
  } else {
    err << source->name << ": nodes: --node is required when the snapshot does not have exactly "
        << "one node (nodes in the snapshot: " << list() << ")\n";
    return kExitBadInput;
  }

  // explain has no history: "now" is an arbitrary origin and the state is empty, unless the
  // user asks to treat soft thresholds as having been met for their whole grace period.
  const SteadyTime now{std::chrono::hours(24 * 365)};
  policy::EvictionState state;
  if (args.flag("assume-grace-elapsed")) state = policy::assumeGraceElapsed(*policy, now);
  policy::NodeView view = policy::makeNodeView(*snapshot, node);
  policy::EvictionResult result = policy::evaluateEviction(view, *policy, state, now);
  if (output == "json") {
    out << policy::evictionToJson(result.decision).dump(2) << "\n";
  } else {
    out << renderEvictionTable(result.decision, *policy);
  }
  return kExitOk;
}

int runCheckPolicy(const std::vector<std::string>& argv, std::ostream& out, std::ostream& err) {
  const char* usage =
      "usage: nodewarden check-policy FILE\n"
      "\n"
      "Validates an eviction policy file (docs/reference.md section 4) and prints the effective\n"
      "policy with every default filled in. Every error is listed with its JSON path.\n"
      "Exit status: 0 valid, 1 invalid or unreadable, 2 usage error.\n";
  auto args = parseArgs(argv, {}, {});
  if (!args) {
    err << "nodewarden check-policy: " << args.error().message << "\n\n" << usage;
    return kExitUsage;
  }
  if (args->flag("help")) {
    out << usage;
    return kExitOk;
  }
  if (args->positional.size() != 1) {
    err << "nodewarden check-policy: expected exactly one FILE\n\n" << usage;
    return kExitUsage;
  }
  const std::string& path = args->positional[0];
  auto policy = policy::loadPolicy(&path);
  if (!policy) {
    err << policy.error().message << "\n";
    return kExitBadInput;
  }
  for (const auto& warning : policy->warnings) err << "warning: " << warning << "\n";
  out << (path == "-" ? "<stdin>" : path) << ": valid\n"
      << policy::policyToJson(*policy).dump(2) << "\n";
  return kExitOk;
}

}  // namespace nodewarden::cli
