// bench/support: the synthetic cluster the decision benchmarks run on, drawn from a fixed seed
// with our own Random (std::uniform_*_distribution differs between standard libraries). The
// figures of docs/performance.md were measured on this data: keep it byte for byte. At most one
// draw per expression (C++ leaves the order of arguments and of `+`'s operands open); where there
// were two, they are separate statements in the order GCC 12 evaluated them (right to left).
// A Planner draws the workloads and each node's pods (policy::Pod objects, with the usage only
// the kubelet's stats show); clusterCase() makes full nodes and a pod to admit of them
// (bench_admission), kubectlSnapshot() a node under memory pressure as kubectl prints it.
#pragma once

#include <algorithm>
#include <array>
#include <charconv>
#include <cstdint>
#include <ctime>
#include <initializer_list>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <tuple>
#include <unordered_set>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "bench/support/measure.h"
#include "policy/admission.h"
#include "policy/model.h"

namespace nodewarden::bench {

inline constexpr std::int64_t kKi = 1024, kMi = 1024 * kKi, kGi = 1024 * kMi, kMicros = 1'000'000;

// The alphabet of Kubernetes' generated name suffixes (rand.SafeEncodeString).
constexpr std::string_view kNameAlphabet = "bcdfghjklmnpqrstvwxz2456789";

// Cluster creation (2026-11-20T08:00:00Z); pods start after it, stats are read 30 days later.
inline constexpr std::int64_t kClusterBirth = 1'795'161'600;
inline constexpr std::int64_t kStatsTime = kClusterBirth + 30 * 86400;

inline std::string rfc3339(std::int64_t unixSeconds) {
  const std::time_t t = unixSeconds;
  std::tm tm{};
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", ::gmtime_r(&t, &tm));
  return buf;
}

// cpu in millicores, the others in bytes.
inline policy::Quantity quantity(std::string_view resource, std::int64_t v) {
  return resource == "cpu" ? policy::Quantity::fromMilli(v, policy::QuantityFormat::DecimalSI)
                           : policy::Quantity::fromValue(v, policy::QuantityFormat::BinarySI);
}

// The pod to admit is "urgent": it may preempt every class below it; the node agents and
// "critical-apps" are never its victims.
inline std::vector<policy::PriorityClass> priorityClasses() {
  return {{"system-node-critical", 2'000'001'000, false, {}},
          {"critical-apps", 1'000'000, false, {}},
          {"platform-daemon", 900'000, false, {}},
          {"urgent", 500'000, false, {}},
          {"high", 100'000, false, {}},
          {"business", 10'000, false, {}},
          {"standard", 1'000, false, {}},
          {"default-priority", 0, true, {}},
          {"preemptible-batch", -100, false, policy::PreemptionPolicy::Never}};
}

constexpr std::int64_t kCpuChoices[] = {50,  100, 100, 100, 200,  250,  250,  250, 300,
                                        500, 500, 500, 750, 1000, 1000, 1500, 2000};
constexpr std::int64_t kMemoryChoices[] = {
    64 * kMi,  128 * kMi, 128 * kMi,  256 * kMi, 256 * kMi, 500'000'000,
    384 * kMi, 512 * kMi, 512 * kMi,  512 * kMi, 768 * kMi, 1'000'000'000,
    kGi,       kGi,       1536 * kMi, 2 * kGi,   3 * kGi,   4 * kGi};
constexpr std::int64_t kEphemeralChoices[] = {500 * kMi, 1 * kGi, 2 * kGi};
constexpr const char* kNamespaces[] = {
    "payments", "checkout",   "search",        "catalog",       "recommendations", "ads",
    "identity", "web",        "api-gateway",   "notifications", "media",           "analytics",
    "batch",    "ml-serving", "data-pipeline", "reporting"};
constexpr const char* kAppStems[] = {
    "cart",    "ledger",  "invoice", "indexer", "ranker",    "feed",     "profile", "auth",
    "session", "gateway", "render",  "thumbs",  "mailer",    "notifier", "billing", "fraud",
    "geo",     "pricing", "stock",   "reviews", "bidder",    "etl",      "trainer", "exporter",
    "reports", "sync",    "query",   "tagger",  "collector", "router",   "cache",   "scorer"};
constexpr const char* kAppSuffixes[] = {"api", "worker", "svc", "consumer", "frontend", "backend"};
constexpr const char* kTeams[] = {"core", "growth", "platform", "data", "money", "discovery"};

enum class Kind { Deployment, StatefulSet, Job, DaemonSet };

struct Workload {
  std::string ns, app, uid;
  Kind kind = Kind::Deployment;
  std::string priorityClass;                        // "" = the global default
  char qos = 'B';                                   // 'G'uaranteed, 'B'urstable, 'E' (BestEffort)
  std::int64_t cpu = 0, memory = 0, ephemeral = 0;  // the main container's requests
  bool sidecar = false;                             // a native istio-proxy sidecar
  std::int64_t rollout = 0;                         // unix seconds of the current rollout
  std::string hash, team = "platform", tier = "node", version = "v1.30.4";
  int nextOrdinal = 0;  // StatefulSet pod names
};

// The node agents, first on every node of 20 pods or more.
struct Daemon {
  std::string_view ns, app, priorityClass;
  std::int64_t cpu, memory;
};
constexpr Daemon kDaemons[] = {
    {"kube-system", "kube-proxy", "system-node-critical", 100, 0},
    {"kube-system", "aws-node", "system-node-critical", 25, 0},
    {"kube-system", "ebs-csi-node", "system-node-critical", 10, 40 * kMi},
    {"monitoring", "node-exporter", "platform-daemon", 100, 64 * kMi},
    {"logging", "fluent-bit", "platform-daemon", 100, 128 * kMi}};

struct Usage {
  std::uint64_t workingSet = 0, rootfs = 0, logs = 0;
};

// One pod as drawn: the object as the API holds it, and what only the kubelet shows of it.
struct PodPlan {
  policy::Pod pod;
  const Workload* w = nullptr;         // in the Planner that drew it, which must outlive the plan
  bool admitted = true;                // spec.priority and status.qosClass filled in
  std::map<std::string, Usage> usage;  // by container name
  std::uint64_t processes = 0, ephemeralUsed = 0, inodesUsed = 0, nanoCores = 0;
};

inline constexpr std::int64_t kIncomingCpu = 4000, kIncomingMemory = 8 * kGi;  // the pod to admit

class Planner {
 public:
  // About 20 workloads per namespace: past the 16 named ones, tenants' copies ("search-7").
  Planner(std::uint64_t seed, int workloadCount) : rng_(seed) {
    for (const Daemon& d : kDaemons) {
      Workload& w = daemons_.emplace_back();
      w.ns = d.ns;
      w.app = d.app;
      w.priorityClass = d.priorityClass;
      w.cpu = d.cpu;
      w.memory = d.memory;
      w.kind = Kind::DaemonSet;
      w.uid = rng_.uuid();
      w.rollout = kClusterBirth + rng_.between(60, 3600);
    }
    std::vector<std::string> names(std::begin(kNamespaces), std::end(kNamespaces));
    for (int i = 0; int(names.size()) < workloadCount / 20; ++i) {
      names.push_back(std::string(kNamespaces[std::size_t(i) % std::size(kNamespaces)]) + "-" +
                      std::to_string(2 + i / int(std::size(kNamespaces))));
    }
    while (int(workloads_.size()) < workloadCount) {
      Workload w;
      w.ns = names[std::size_t(rng_.between(0, std::int64_t(names.size()) - 1))];
      const char* suffix = rng_.pick(kAppSuffixes);
      w.app = std::string(rng_.pick(kAppStems)) + "-" + suffix;
      if (!usedNames_.insert(w.ns + "/" + w.app).second) {
        w.app += "-" + std::to_string(rng_.between(2, 999));
        if (!usedNames_.insert(w.ns + "/" + w.app).second) continue;
      }
      w.uid = rng_.uuid();
      const bool batch = w.ns.rfind("batch", 0) == 0 || w.ns.rfind("data-pipeline", 0) == 0 ||
                         w.ns.rfind("analytics", 0) == 0;
      const double k = rng_.unit(), r = rng_.unit(), q = rng_.unit();
      w.kind = batch && k < 0.5 ? Kind::Job : k < 0.12 ? Kind::StatefulSet : Kind::Deployment;
      w.priorityClass = w.kind == Kind::Job ? (r < 0.6 ? "preemptible-batch" : "")
                        : r < 0.07          ? "critical-apps"
                        : r < 0.20          ? "high"
                        : r < 0.42          ? "business"
                        : r < 0.65          ? "standard"
                        : r < 0.93          ? ""
                                            : "preemptible-batch";
      w.qos = q < 0.25 ? 'G' : q < 0.92 ? 'B' : 'E';
      if (w.qos != 'E') {
        w.cpu = w.qos == 'B' && rng_.chance(0.1) ? 0 : rng_.pick(kCpuChoices);  // 0: memory only
        w.memory = rng_.pick(kMemoryChoices);
        w.ephemeral = rng_.chance(0.2) ? rng_.pick(kEphemeralChoices) : 0;
      }
      w.sidecar = w.kind != Kind::Job && rng_.chance(0.25);
      w.rollout = kClusterBirth + rng_.between(3600, 19 * 86400);
      w.hash = rng_.fromAlphabet(kNameAlphabet, 10);
      w.team = rng_.pick(kTeams);
      w.tier = rng_.chance(0.5) ? "backend" : "frontend";
      const std::int64_t patch = rng_.between(0, 9);
      w.version = "v1." + std::to_string(rng_.between(0, 60)) + "." + std::to_string(patch);
      workloads_.push_back(std::move(w));
    }
  }

  Random& rng() { return rng_; }
  std::string nodeName() {
    for (;;) {
      const std::int64_t d = rng_.between(1, 254), c = rng_.between(0, 255);
      std::string n = "ip-10-" + std::to_string(rng_.between(0, 255)) + "-" + std::to_string(c) +
                      "-" + std::to_string(d) + ".eu-west-1.compute.internal";
      if (usedNames_.insert(n).second) return n;
    }
  }

  // `count` pods on `node` (its agents first, a few pending or terminating), finished Job pods,
  // and on the first node and a few others three nominated to it (one above the pod to admit).
  std::vector<PodPlan> node(const std::string& node, int count) {
    std::vector<PodPlan> pods;
    for (std::size_t i = 0; count >= 20 && i < daemons_.size(); ++i)
      pods.push_back(pod(daemons_[i], node));
    int terminating = 0;
    while (int(pods.size()) < count) {
      PodPlan p = pod(some(rng_.chance(0.06)), node);
      if (rng_.chance(0.01)) {
        p.pod.phase = "Pending";  // containers still being created: no start time yet
        p.pod.startTime.reset();
      } else if (terminating < (count >= 100 ? 2 : 1) && p.w->cpu <= 500 && rng_.chance(0.02)) {
        p.pod.terminating = true;  // small: its going must not make room (fillNodes)
        ++terminating;
      }
      pods.push_back(std::move(p));
    }
    Workload& job = some(true);
    for (int i = 0; i < std::max(1, count / 40); ++i) {
      pods.push_back(pod(job, node));
      pods.back().pod.phase = rng_.chance(0.8) ? "Succeeded" : "Failed";
    }
    const bool nominate = std::exchange(firstNode_, false) || rng_.chance(0.02);
    for (int i = 0; nominate && i < 3; ++i) {
      policy::Pod& o = pods.emplace_back(pod(some(false), "")).pod;
      o.priorityClassName = i == 0 ? "critical-apps" : i == 1 ? "standard" : "business";
      o.phase = "Pending";
      o.nominatedNodeName = node;
      o.specPriority.reset();
      o.startTime.reset();
    }
    return pods;
  }

  // Budgets on a quarter of the services (three in ten allow no disruption), two select nothing.
  std::vector<policy::PodDisruptionBudget> pdbs() {
    std::vector<policy::PodDisruptionBudget> out;
    for (const Workload& w : workloads_) {
      if (w.kind == Kind::Job || !rng_.chance(0.25)) continue;
      policy::LabelSelector sel;  // the app's label, or one time in five expressions
      if (rng_.chance(0.8)) sel.matchLabels = {{"app", w.app}};
      if (sel.matchLabels.empty())
        sel.matchExpressions = {{"app", "In", {w.app, w.app + "-canary"}}, {"tier", "Exists", {}}};
      sel.matchLabelsBloom = policy::labelBloom(sel.matchLabels);  // as the parser sets it
      const double a = rng_.unit();
      const std::int64_t allowed = a < 0.3 ? 0 : a < 0.8 ? 1 : 2;
      out.push_back({w.app + "-pdb", w.ns, std::move(sel), allowed, {}});
    }
    out.push_back({"legacy-pdb", "web", std::nullopt, 0, {}});
    out.push_back({"everything-pdb", "reporting", policy::LabelSelector{}, 0, {}});
    return out;
  }

 private:
  // A service skewed to the first workloads (a few have many replicas), a Job uniformly.
  Workload& some(bool job) {
    for (int tries = 0;; ++tries) {
      const double u = rng_.unit();
      Workload& w = workloads_[std::size_t(double(workloads_.size()) * (job ? u : u * u))];
      if ((w.kind == Kind::Job) == job || (job && tries > 64)) return w;
    }
  }

  // A container, its requests and limits by QoS class, and its usage (BestEffort: any amount).
  void add(PodPlan& p, std::string name, bool init, bool sidecar, std::int64_t cpu,
           std::int64_t memory, std::int64_t ephemeral = 0) {
    const char qos = p.w->qos;
    policy::Container c;
    c.name = name;
    c.sidecar = sidecar;
    const std::int64_t requests[] = {cpu, memory, ephemeral};
    for (std::size_t r = 0; r < 3 && qos != 'E'; ++r) {
      const char* key = r == 0 ? "cpu" : r == 1 ? "memory" : "ephemeral-storage";
      if (requests[r] == 0) continue;
      c.requests[key] = quantity(key, requests[r]);
      const double chance = qos == 'G' || r == 2 ? 1.0 : r == 0 ? 0.2 : 0.6;
      const std::int64_t limit = qos == 'G' ? 1 : r == 1 ? rng_.between(1, 2) : 2;
      if (rng_.chance(chance)) c.limits[key] = quantity(key, requests[r] * limit);
    }
    const double ws = memory == 0 || qos == 'E' ? rng_.betweenReal(20.0, 600.0) * double(kMi)
                      : qos == 'G'              ? double(memory) * rng_.betweenReal(0.25, 0.97)
                                                : double(memory) * rng_.betweenReal(0.2, 1.8);
    if (!init || sidecar) {  // the kubelet reports running containers only
      Usage& u = p.usage[name];
      u.workingSet = std::uint64_t(ws) & ~std::uint64_t(4095);  // whole pages
      u.rootfs = std::uint64_t(rng_.between(16 * kKi, 300 * kMi));
      u.logs = std::uint64_t(rng_.between(4 * kKi, 200 * kMi));
      p.ephemeralUsed += u.rootfs + u.logs;
    }
    p.processes += std::uint64_t(rng_.between(1, 24));
    (init ? p.pod.initContainers : p.pod.containers).push_back(std::move(c));
  }

  PodPlan pod(Workload& w, const std::string& node) {
    PodPlan p;
    p.w = &w;
    policy::Pod& o = p.pod;
    o.ns = w.ns;
    o.uid = rng_.uuid();
    o.nodeName = node;
    o.phase = "Running";
    do {
      const std::string suffix = "-" + rng_.fromAlphabet(kNameAlphabet, 5);
      const std::string job = std::to_string(29'000'000 + rng_.between(0, 99'999));
      o.name = w.kind == Kind::StatefulSet ? w.app + "-" + std::to_string(w.nextOrdinal++)
               : w.kind == Kind::Job       ? w.app + "-" + job + suffix
               : w.kind == Kind::DaemonSet ? w.app + suffix
                                           : w.app + "-" + w.hash + suffix;
    } while (!usedNames_.insert(o.ns + "/" + o.name).second);
    o.labels = {{"app", w.app},
                {"app.kubernetes.io/name", w.app},
                {"app.kubernetes.io/part-of", w.ns},
                {"team", w.team},
                {"tier", w.tier}};
    if (w.kind == Kind::Deployment) o.labels["pod-template-hash"] = w.hash;
    if (w.kind == Kind::StatefulSet) o.labels["statefulset.kubernetes.io/pod-name"] = o.name;
    if (w.kind == Kind::Job) o.labels["job-name"] = o.name.substr(0, o.name.rfind('-'));
    o.annotations = {{"prometheus.io/scrape", "true"}};
    if (rng_.chance(0.3)) o.annotations["kubectl.kubernetes.io/restartedAt"] = "2026-12-01";
    o.priorityClassName = w.priorityClass;
    if (w.kind != Kind::DaemonSet && rng_.chance(0.03)) {  // hand-written: a number, no class
      o.specPriority = std::int32_t(rng_.between(0, 50'000));
      o.priorityClassName.clear();
    }
    p.admitted = !rng_.chance(0.05);
    o.terminationGracePeriodSeconds = rng_.chance(0.2) ? 60 : 30;
    const std::int64_t restart = rng_.chance(0.1) ? rng_.between(0, 10 * 86400) : 0;
    o.startTime = (w.rollout + rng_.between(0, 120) + restart) * kMicros;  // a rollout's tie
    add(p, w.app, false, false, w.cpu, w.memory, w.ephemeral);
    if (w.kind != Kind::DaemonSet && w.qos != 'E' && rng_.chance(0.2))
      add(p, "log-shipper", false, false, 50, 64 * kMi);
    if (w.sidecar) add(p, "istio-proxy", true, true, 100, 128 * kMi);
    // An init container that may ask more than the main one (the pod's init peak).
    if (w.kind != Kind::DaemonSet && rng_.chance(0.15)) add(p, "migrate", true, false, 500, kGi);
    if (rng_.chance(0.01)) p.processes += 800;                    // a fork-happy pod
    p.ephemeralUsed += std::uint64_t(rng_.between(0, 50 * kMi));  // emptyDirs
    p.inodesUsed = std::uint64_t(rng_.between(12, 6000));
    p.nanoCores = std::uint64_t(rng_.between(100'000, 1'800'000'000));
    return p;
  }

  Random rng_;
  std::vector<Workload> daemons_, workloads_;
  std::unordered_set<std::string> usedNames_;  // workloads', pods' (ns/name) and nodes' names
  bool firstNode_ = true;                      // gets nominated pods, as a few others do
};

// kubectl get pods -A lists by namespace, then name.
inline void sortByKey(std::vector<PodPlan>& pods) {
  std::sort(pods.begin(), pods.end(), [](const PodPlan& a, const PodPlan& b) {
    return a.pod.ns != b.pod.ns ? a.pod.ns < b.pod.ns : a.pod.name < b.pod.name;
  });
}

// The index points into the snapshot: a case lives behind a unique_ptr, never moved.
struct Case {
  policy::Snapshot snapshot;
  policy::Pod incoming;
  policy::ClusterIndex index;
};

// Allocatable = what the counted pods request plus a little slack, less than the incoming
// pod's request (so it does not fit) and leaving it short even once terminating pods go.
inline void fillNodes(Case& c, Random& rng) {
  std::map<std::string, std::array<std::int64_t, 5>> use;  // cpu, memory, pods, terminating's
  for (const policy::Pod& p : c.snapshot.pods) {
    const bool nominatedAbove = p.nodeName.empty() && p.priority >= c.incoming.priority;
    if (p.phase == "Succeeded" || p.phase == "Failed" || (p.nodeName.empty() && !nominatedAbove))
      continue;
    auto& u = use[nominatedAbove ? p.nominatedNodeName : p.nodeName];
    const std::int64_t cpu = p.requests.count("cpu") ? p.requests.at("cpu") : 0;
    const std::int64_t memory = p.requests.count("memory") ? p.requests.at("memory") : 0;
    u = {u[0] + cpu, u[1] + memory, u[2] + 1, u[3] + cpu * p.terminating,
         u[4] + memory * p.terminating};
  }
  for (policy::Node& n : c.snapshot.nodes) {
    const auto& u = use[n.name];
    const std::int64_t cpu =
        u[0] + rng.between(0, std::max<std::int64_t>(0, kIncomingCpu - u[3] - 1) / 2);
    const std::int64_t memory =
        u[1] + rng.between(0, std::max<std::int64_t>(0, kIncomingMemory - u[4] - 1) / 2);
    const std::int64_t disk = std::max<std::int64_t>(95 * kGi, u[2] * 4 * kGi);
    const auto pods = policy::Quantity::fromValue(u[2] + 2, policy::QuantityFormat::DecimalSI);
    auto resources = [&](std::int64_t cpuMilli, std::int64_t bytes, std::int64_t diskBytes) {
      return decltype(n.allocatable){{"cpu", quantity("cpu", cpuMilli)},
                                     {"memory", quantity("memory", bytes)},
                                     {"ephemeral-storage", quantity("", diskBytes)},
                                     {"pods", pods}};
    };
    n.allocatable = resources(cpu, memory, disk);
    n.capacity = resources(cpu + 500, memory + 2 * kGi, disk + 5 * kGi);
  }
}

// `nodeCount` nodes of `podsPerNode` pods, each full for the pod to admit ("urgent", 4 cores, 8
// GiB; bound if one node), a share `taintedNodes` tainted dedicated=gpu:NoSchedule (tolerated).
inline std::unique_ptr<Case> clusterCase(std::uint64_t seed, int nodeCount, int podsPerNode,
                                         double taintedNodes = 0) {
  auto out = std::make_unique<Case>();
  policy::Snapshot& s = out->snapshot;
  s.priorityClasses = priorityClasses();
  Planner plan(seed, std::max(12, nodeCount * podsPerNode / 6));
  s.podDisruptionBudgets = plan.pdbs();
  policy::Pod& in = out->incoming;
  in.ns = "checkout";
  in.priorityClassName = "urgent";
  in.phase = "Pending";
  in.name = "checkout-api-" + plan.rng().fromAlphabet(kNameAlphabet, 10) + "-" +
            plan.rng().fromAlphabet(kNameAlphabet, 5);
  in.uid = plan.rng().uuid();
  in.labels = {{"app", "checkout-api"}, {"team", "money"}};
  in.tolerations = {{"dedicated", "Equal", "gpu", "NoSchedule"},
                    {"node.kubernetes.io/not-ready", "Exists", "", "NoExecute"}};
  policy::Container& c = in.containers.emplace_back();
  c.name = "checkout-api";
  c.requests = c.limits = {{"cpu", quantity("cpu", kIncomingCpu)},
                           {"memory", quantity("memory", kIncomingMemory)}};
  policy::resolvePod(in, s.priorityClasses);
  std::vector<PodPlan> plans;
  for (int i = 0; i < nodeCount; ++i) {
    policy::Node& n = s.nodes.emplace_back();
    n.name = plan.nodeName();
    n.hasAllocatable = true;
    const bool tainted = plan.rng().chance(taintedNodes);
    n.labels = {{"kubernetes.io/hostname", n.name},
                {"node.kubernetes.io/instance-type", tainted ? "g5.12xlarge" : "m6i.8xlarge"}};
    if (tainted) n.taints.push_back({"dedicated", "gpu", "NoSchedule"});
    n.conditions = {{"MemoryPressure", "False"}, {"DiskPressure", "False"}, {"Ready", "True"}};
    for (PodPlan& p : plan.node(n.name, podsPerNode)) plans.push_back(std::move(p));
  }
  if (nodeCount == 1) in.nodeName = s.nodes[0].name;  // bound, as the kubelet sees it
  sortByKey(plans);
  for (PodPlan& p : plans) s.pods.push_back(std::move(p.pod));
  policy::resolvePods(s.pods, s.priorityClasses);
  fillNodes(*out, plan.rng());
  out->index = policy::buildClusterIndex(out->snapshot);
  return out;
}

// Below the 100Mi hard threshold of bench_eviction's policy, so that every run makes a plan.
constexpr std::uint64_t kNodeMemoryAvailable = 80 * kMi;

// `tpl` with each '@' replaced by the next of `args` (numbers and booleans as JSON writes them).
template <typename... Args>
std::string fill(std::string_view tpl, const Args&... args) {
  std::string out;
  std::size_t from = 0;
  auto put = [&](const auto& arg) {
    const std::size_t at = tpl.find('@', from);
    out.append(tpl, from, at - from);
    if constexpr (std::is_arithmetic_v<std::decay_t<decltype(arg)>>) {
      out += nlohmann::json(arg).dump();
    } else {
      out += arg;
    }
    from = at + 1;
  };
  (put(args), ...);
  return out.append(tpl.substr(from));
}

// One of the ways people write `q`: "250m" or "0.25" for cpu; "1Gi", "1024Mi", "0.5Gi", "1G",
// "500M", "65536Ki" or plain bytes for the others.
inline std::string spell(Random& rng, const std::string& resource, const policy::Quantity& q) {
  auto decimal = [](std::int64_t value, std::int64_t unit) {  // the shortest: exact for these
    char s[32];
    return std::string(s, std::to_chars(s, s + sizeof s, double(value) / double(unit)).ptr);
  };
  std::vector<std::string> all;
  if (resource == "cpu") {
    all = {std::to_string(q.milliValue()) + "m", decimal(q.milliValue(), 1000)};
  } else {
    const std::int64_t v = q.value();
    const std::pair<std::int64_t, const char*> units[] = {
        {kGi, "Gi"}, {kMi, "Mi"}, {kKi, "Ki"}, {1'000'000'000, "G"}, {1'000'000, "M"}};
    for (auto [unit, suffix] : units) {
      if (v % unit == 0 && v / unit <= 65536) all.push_back(std::to_string(v / unit) + suffix);
    }
    if (v % kGi != 0 && v % (kGi / 8) == 0) all.push_back(decimal(v, kGi) + "Gi");
    if (v <= 128 * kMi) all.push_back(std::to_string(v));
  }
  return all[std::size_t(rng.between(0, std::int64_t(all.size()) - 1))];
}

// The objects as kubectl and the kubelet print them, with '@' where the plan's values go.
constexpr std::string_view kPodJson = R"({"apiVersion": "v1", "kind": "Pod", "metadata": {
  "name": "@", "namespace": "@", "uid": "@", "resourceVersion": "@", "creationTimestamp": "@", @
  "labels": @, "annotations": @, "ownerReferences": [{"apiVersion": "apps/v1", "kind": "@",
    "name": "@", "uid": "@", "controller": true, "blockOwnerDeletion": true}]},
 "spec": {"volumes": [{"name": "config", "configMap": {"name": "@-config", "defaultMode": 420}},
    {"name": "kube-api-access", "projected": {"defaultMode": 420, "sources": [
      {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
      {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
      {"downwardAPI": {"items": [{"path": "namespace",
        "fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.namespace"}}]}}]}}],
  "initContainers": [@], "containers": [@], "restartPolicy": "@",
  "terminationGracePeriodSeconds": @, "dnsPolicy": "ClusterFirst", "nodeName": "@",
  "serviceAccountName": "default", "schedulerName": "default-scheduler", "tolerations": [
    {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute",
     "tolerationSeconds": 300},
    {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute",
     "tolerationSeconds": 300}], @"enableServiceLinks": true},
 "status": {"phase": "@", "conditions": [{"type": "Initialized", "status": "@"},
    {"type": "Ready", "status": "@"}, {"type": "ContainersReady", "status": "@",
     "lastTransitionTime": "@"}, {"type": "PodScheduled", "status": "True"}],
  "hostIP": "10.0.12.34", "podIP": "@", "podIPs": [{"ip": "@"}], "startTime": "@",
  "initContainerStatuses": [@], "containerStatuses": [@]@}})";
constexpr std::string_view kContainerJson = R"({"name": "@", "image": "@",
  "args": ["--config=/etc/@/config.yaml"], @"env": [{"name": "POD_NAME", "valueFrom":
    {"fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.name"}}},
    {"name": "LOG_LEVEL", "value": "info"}], "resources": {@}, "volumeMounts": [
    {"name": "config", "readOnly": true, "mountPath": "/etc/@"}, {"name": "kube-api-access",
     "readOnly": true, "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount"}],
  "terminationMessagePath": "/dev/termination-log", "terminationMessagePolicy": "File",
  "imagePullPolicy": "IfNotPresent"})";
constexpr std::string_view kPortsJson = R"("ports": [{"name": "http", "containerPort": 8080,
  "protocol": "TCP"}], "readinessProbe": {"httpGet": {"path": "/readyz", "port": 8080},
  "periodSeconds": 10}, )";
constexpr std::string_view kContainerStatusJson = R"({"containerID": "containerd://@",
  "image": "@", "imageID": "@", "lastState": {}, "name": "@",
  "ready": @, "restartCount": @, "started": @, "state": {@}})";
constexpr std::string_view kTerminatedJson = R"("terminated": {"exitCode": 0,
  "reason": "Completed", "startedAt": "@", "finishedAt": "@"})";
constexpr std::string_view kNodeJson = R"({"apiVersion": "v1", "kind": "Node", "metadata": {
  "name": "@", "uid": "@", "creationTimestamp": "2026-11-20T08:00:00Z", "labels": {
    "kubernetes.io/hostname": "@", "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64",
    "node.kubernetes.io/instance-type": "m6i.32xlarge"}},
 "spec": {"podCIDR": "10.244.0.0/18", "providerID": "aws:///eu-west-1a/i-0abc123def4567890"},
 "status": {"capacity": {"cpu": "@", "ephemeral-storage": "500056636Ki", "memory": "@Ki",
    "pods": "@"}, "allocatable": {"cpu": "@", "ephemeral-storage": "460858349521",
    "memory": "@Ki", "pods": "@"}, "conditions": [{"type": "MemoryPressure", "status": "False"},
    {"type": "DiskPressure", "status": "False"}, {"type": "PIDPressure", "status": "False"},
    {"type": "Ready", "status": "True"}], "nodeInfo": {"kubeletVersion": "v1.30.4",
    "containerRuntimeVersion": "containerd://1.7.20", "osImage": "Debian GNU/Linux 12"}}})";
constexpr std::string_view kPriorityClassJson = R"(@{"apiVersion": "scheduling.k8s.io/v1",
  "kind": "PriorityClass", "metadata": {"name": "@", "uid": "@"}, "value": @,
  "globalDefault": @, "preemptionPolicy": "@"})";
constexpr std::string_view kListJson = R"({"apiVersion": "v1", "items": [@], "kind": "List",
  "metadata": {"resourceVersion": ""}})";
constexpr std::string_view kSummaryJson = R"({"node": {"nodeName": "@", "startTime": "@",
  "systemContainers": [{"name": "pods", "cpu": @, "memory": @}], "cpu": @, "memory": @,
  "fs": @, "runtime": {"imageFs": @}, "rlimit": {"time": "@", "maxpid": 4194304, "curproc": @}},
 "pods": [@]})";
constexpr std::string_view kPodStatsJson = R"({"podRef": {"name": "@", "namespace": "@",
  "uid": "@"}, "startTime": "@", "containers": [@], "cpu": @, "memory": @,
  "ephemeral-storage": @, "process_stats": {"process_count": @}})";
constexpr std::string_view kContainerStatsJson = R"({"name": "@", "startTime": "@", "cpu": @,
  "memory": @, "rootfs": {"time": "@", "usedBytes": @, "inodesUsed": 40},
  "logs": {"time": "@", "usedBytes": @}})";
constexpr std::string_view kFsJson = R"({"time": "@", "availableBytes": 204823198105,
  "capacityBytes": 512057995264, "usedBytes": @, "inodesFree": @, "inodes": 31250000,
  "inodesUsed": @})";
constexpr std::string_view kMemoryJson = R"({"time": "@", @"usageBytes": @,
  "workingSetBytes": @, "rssBytes": @, "pageFaults": @, "majorPageFaults": @})";

struct KubectlSnapshot {
  std::string nodeName;
  std::string text;     // as kubectl prints it: four-space indent
  std::string compact;  // the same document without whitespace, as the API server sends it
};

// Renders plans as text, drawing what only the text shows (spellings, IDs) from its own Random.
class KubectlText {
 public:
  KubectlText(std::uint64_t seed, std::string node) : rng_(seed), node_(std::move(node)) {}

  std::string pod(const PodPlan& p) {
    const policy::Pod& o = p.pod;
    const std::int64_t created = o.startTime.value_or((kStatsTime - 30) * kMicros) / kMicros - 2;
    std::string specs[2], statuses[2], meta, spec, status;  // [0]: the init containers'
    for (int i = 0; i < 2; ++i) {
      for (const auto& c : i == 0 ? o.initContainers : o.containers) {
        const bool main = i == 1 && &c == &o.containers[0] && p.w->kind != Kind::Job;
        specs[i] += sep(specs[i]) + container(p, c, main);
        statuses[i] += sep(statuses[i]) + containerStatus(p, c, i == 0, created);
      }
    }
    if (o.terminating) {
      meta = fill(R"("deletionTimestamp": "@", "deletionGracePeriodSeconds": @, )",
                  rfc3339(kStatsTime - 5), o.terminationGracePeriodSeconds);
    }
    if (!o.priorityClassName.empty())
      spec = fill(R"("priorityClassName": "@", )", o.priorityClassName);
    if (p.admitted || o.specPriority) spec += fill(R"("priority": @, )", o.priority);
    if (!o.nominatedNodeName.empty())
      status = fill(R"(, "nominatedNodeName": "@")", o.nominatedNodeName);
    if (p.admitted) status += fill(R"(, "qosClass": "@")", policy::qosClassName(o.qos));
    const char* owner[] = {"ReplicaSet", "StatefulSet", "Job", "DaemonSet"};
    const std::int64_t host = rng_.between(2, 254);
    const std::string ip = fill("10.244.@.@", rng_.between(0, 63), host);
    const char* ready = o.phase == "Running" ? "True" : "False";
    return fill(kPodJson, o.name, o.ns, o.uid, rng_.between(1'000'000, 99'999'999),
                rfc3339(created), meta, nlohmann::json(o.labels).dump(),
                nlohmann::json(o.annotations).dump(), owner[int(p.w->kind)], p.w->app, p.w->uid,
                p.w->app, specs[0], specs[1], p.w->kind == Kind::Job ? "Never" : "Always",
                o.terminationGracePeriodSeconds, o.nodeName, spec, o.phase,
                o.phase == "Pending" ? "False" : "True", ready, ready, rfc3339(created + 9), ip, ip,
                rfc3339(created), statuses[0], statuses[1], status);
  }

  // The kubelet's Summary: every running pod, and a node whose memory holds their working sets
  // and the system's 3 GiB, and leaves less than the hard threshold.
  std::string summary(const std::vector<PodPlan>& plans) {
    std::uint64_t podsWorkingSet = 0, processes = 0;
    std::string pods;
    for (const PodPlan& p : plans) {
      if (p.pod.phase != "Running") continue;
      const std::string start = rfc3339(*p.pod.startTime / kMicros);
      std::string containers;
      for (const auto& [name, u] : p.usage) {
        const std::string memoryStats = memory(u.workingSet);
        containers += sep(containers) + fill(kContainerStatsJson, name, start, cpu(p.nanoCores / 2),
                                             memoryStats, now_, u.rootfs, now_, u.logs);
      }
      const std::string memoryStats = memory(workingSet(p));
      pods += sep(pods) + fill(kPodStatsJson, p.pod.name, p.pod.ns, p.pod.uid, start, containers,
                               cpu(p.nanoCores), memoryStats, fs(p.ephemeralUsed, p.inodesUsed),
                               p.processes);
      podsWorkingSet += workingSet(p);
      processes += p.processes;
    }
    const std::string nodeMemory = memory(podsWorkingSet + 3 * kGi, kNodeMemoryAvailable);
    const std::string nodeCpu = cpu(9'400'000'000);
    const std::string podsMemory = memory(podsWorkingSet, 1536 * kMi);
    return fill(kSummaryJson, node_, rfc3339(kClusterBirth), cpu(9'000'000'000), podsMemory,
                nodeCpu, nodeMemory, fs(307'234'797'158, 1'250'000), fs(61'000'000'000, 1'250'000),
                now_, processes + 412, pods);
  }

  // The NodeList: memory for every working set, the system's 3 GiB and what is still free.
  std::string nodeList(const std::vector<PodPlan>& plans) {
    std::uint64_t memory = 3 * kGi + kNodeMemoryAvailable;
    for (const PodPlan& p : plans) memory += workingSet(p);
    const std::size_t cpus = std::max<std::size_t>(8, plans.size() / 8);
    const std::size_t pods = std::max<std::size_t>(110, plans.size());
    return fill(kListJson, fill(kNodeJson, node_, rng_.uuid(), node_, cpus, memory / 1024, pods,
                                cpus, (memory - 2 * kGi) / 1024, pods));
  }

  std::string priorityClassList() {
    std::string items;
    for (const policy::PriorityClass& c : priorityClasses()) {
      items += fill(kPriorityClassJson, sep(items), c.name, rng_.uuid(), c.value, c.globalDefault,
                    c.preemptionPolicy ? "Never" : "PreemptLowerPriority");
    }
    return fill(kListJson, items);
  }

 private:
  static std::string sep(const std::string& list) { return list.empty() ? "" : ", "; }

  // A pod's memory as the kubelet reports it: its running containers' working sets.
  static std::uint64_t workingSet(const PodPlan& p) {
    std::uint64_t sum = 0;
    for (const auto& [name, u] : p.usage) sum += u.workingSet;
    return p.pod.phase == "Running" ? sum : 0;
  }

  std::string container(const PodPlan& p, const policy::Container& c, bool main) {
    std::string resources;
    for (const auto* list : {&c.limits, &c.requests}) {
      if (list->empty()) continue;
      std::map<std::string, std::string> spelled;
      for (const auto& [name, q] : *list) spelled[name] = spell(rng_, name, q);
      resources += fill(R"(@"@": @)", sep(resources), list == &c.limits ? "limits" : "requests",
                        nlohmann::json(spelled).dump());
    }
    const std::string_view extra = c.sidecar ? R"("restartPolicy": "Always", )"
                                   : main    ? kPortsJson
                                             : "";
    return fill(kContainerJson, c.name, image(p, c), c.name, extra, resources, c.name);
  }

  std::string containerStatus(const PodPlan& p, const policy::Container& c, bool init,
                              std::int64_t created) {
    const bool running = p.pod.phase == "Running" && (!init || c.sidecar);
    const std::string started = rfc3339(created + rng_.between(2, 40));
    const std::string state = p.pod.phase == "Pending"
                                  ? R"("waiting": {"reason": "ContainerCreating"})"
                              : running ? fill(R"("running": {"startedAt": "@"})", started)
                                        : fill(kTerminatedJson, started, rfc3339(created + 600));
    const std::string digest = "registry.example.com/" + c.name + "@sha256:" + rng_.hex(64);
    const std::int64_t restarts = running && rng_.chance(0.1) ? rng_.between(1, 7) : 0;
    return fill(kContainerStatusJson, rng_.hex(64), image(p, c), digest, c.name, running, restarts,
                running, state);
  }

  static std::string image(const PodPlan& p, const policy::Container& c) {
    return "registry.example.com/" + p.pod.ns + "/" + c.name + ":" + p.w->version;
  }

  std::string fs(std::uint64_t used, std::uint64_t inodesUsed) {
    return fill(kFsJson, now_, used, 31'250'000 - inodesUsed, inodesUsed);
  }
  std::string memory(std::uint64_t workingSet, std::uint64_t available = 0) {
    const std::int64_t majorFaults = rng_.between(0, 4000), faults = rng_.between(1000, 90'000'000);
    return fill(kMemoryJson, now_, available ? fill(R"("availableBytes": @, )", available) : "",
                workingSet + std::uint64_t(rng_.between(0, 64 * kMi)), workingSet,
                workingSet - workingSet / 8, faults, majorFaults);
  }
  std::string cpu(std::uint64_t nanoCores) {
    return fill(R"({"time": "@", "usageNanoCores": @, "usageCoreNanoSeconds": @})", now_, nanoCores,
                nanoCores * std::uint64_t(rng_.between(10'000, 2'000'000)));
  }

  Random rng_;
  std::string node_;
  const std::string now_ = rfc3339(kStatsTime);  // when the stats are read
};

// One node of `podCount` pods under memory pressure, with what every object and the stats carry.
inline KubectlSnapshot kubectlSnapshot(std::uint64_t seed, int podCount) {
  Planner plan(seed, std::max(12, podCount / 6));
  KubectlSnapshot out;
  out.nodeName = plan.nodeName();
  std::vector<PodPlan> plans = plan.node(out.nodeName, podCount);
  sortByKey(plans);
  KubectlText render(seed ^ 0x746578746b756265ULL, out.nodeName);  // "textkube"
  const std::vector<policy::PriorityClass> classes = priorityClasses();
  std::string pods;
  for (PodPlan& p : plans) {
    policy::resolvePod(p.pod, classes);  // for the priority and QoS classes printed
    pods += (pods.empty() ? "" : ", ") + render.pod(p);
  }
  const std::string stats = render.summary(plans), classList = render.priorityClassList();
  const auto doc = nlohmann::ordered_json::parse(
      fill(R"({"nodes": @, "pods": @, "priorityClasses": @, "stats": {"@": @}})",
           render.nodeList(plans), fill(kListJson, pods), classList, out.nodeName, stats));
  out.text = doc.dump(4);  // kubectl indents with four spaces
  out.compact = doc.dump();
  return out;
}

}  // namespace nodewarden::bench
