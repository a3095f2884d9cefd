// bench/support: the synthetic Kubernetes data the benchmarks run on, generated from a fixed
// seed so that every run and every machine sees the same bytes (own draws from Random rather
// than std::uniform_*_distribution, whose output differs between standard libraries).
//
// One vocabulary (units, the name alphabet of generated suffixes, the cluster's birth,
// RFC 3339 timestamps, quantities) and two renderings of a node's workloads:
//   kubectl::SnapshotGenerator  one node as kubectl and the kubelet print it: Pods, the
//                               NodeList, PriorityClasses and the kubelet Summary as JSON text
//                               (bench_eviction times parsing it, then the plan);
//   objects::ClusterGenerator   nodes full of bound pods as policy::Snapshot objects, resolved
//                               as parsing would (bench_admission times admission and
//                               preemption on them).
// Each draws its values in its own fixed order: a seed gives the same snapshot as before these
// two lived here, so figures stay comparable across versions.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <unordered_set>
#include <vector>

#include <nlohmann/json.hpp>

#include "bench/support/measure.h"
#include "policy/admission.h"
#include "policy/model.h"

namespace nodewarden::bench {

inline constexpr std::int64_t kKi = 1024;
inline constexpr std::int64_t kMi = 1024 * kKi;
inline constexpr std::int64_t kGi = 1024 * kMi;
inline constexpr std::int64_t kMicros = 1'000'000;

// The alphabet of Kubernetes' generated name suffixes (rand.SafeEncodeString).
constexpr std::string_view kNameAlphabet = "bcdfghjklmnpqrstvwxz2456789";

// RFC 3339 in UTC, as the API server prints timestamps.
inline std::string rfc3339(std::int64_t unixSeconds) {
  using namespace std::chrono;
  const sys_seconds tp{seconds{unixSeconds}};
  const auto day = floor<days>(tp);
  const year_month_day ymd{day};
  const hh_mm_ss hms{tp - day};
  char buf[32];
  std::snprintf(buf, sizeof buf, "%04d-%02u-%02uT%02d:%02d:%02dZ", int(ymd.year()),
                unsigned(ymd.month()), unsigned(ymd.day()), int(hms.hours().count()),
                int(hms.minutes().count()), int(hms.seconds().count()));
  return buf;
}

// 2026-11-20T08:00:00Z: cluster creation; pods start after it, stats are read 30 days later.
inline const std::int64_t kClusterBirth =
    std::chrono::sys_seconds{std::chrono::sys_days{std::chrono::year{2026} / 11 / 20}}
        .time_since_epoch()
        .count() +
    8 * 3600;

inline policy::Quantity cpuQuantity(std::int64_t milli) {
  return policy::Quantity::fromMilli(milli, policy::QuantityFormat::DecimalSI);
}
inline policy::Quantity bytesQuantity(std::int64_t bytes) {
  return policy::Quantity::fromValue(bytes, policy::QuantityFormat::BinarySI);
}
inline policy::Quantity countQuantity(std::int64_t n) {
  return policy::Quantity::fromValue(n, policy::QuantityFormat::DecimalSI);
}

// ---------------------------------------------------------------------------------------------
// One node as kubectl prints it.

namespace kubectl {

using OJson = nlohmann::ordered_json;  // keeps members in the order kubectl prints them

const std::string kNodeName = "ip-10-0-12-34.eu-west-1.compute.internal";
// Below the 100Mi hard threshold, so every run produces a plan.
constexpr std::uint64_t kNodeMemoryAvailable = 80 * kMi;
const std::int64_t kStatsTime = kClusterBirth + 30 * 86400;

// ---------------------------------------------------------------------------------------------
// Resource quantities in the spellings people write. Equal values appear under several
// spellings so a Guaranteed pod's limit can be spelled differently from its request.

struct Spelled {
  const char* text;
  std::int64_t value;  // millicores for cpu, bytes otherwise
};

constexpr Spelled kCpuSpellings[] = {
    {"50m", 50},     {"100m", 100}, {"0.1", 100},    {"200m", 200}, {"250m", 250},
    {"0.25", 250},   {"500m", 500}, {"0.5", 500},    {"750m", 750}, {"1", 1000},
    {"1000m", 1000}, {"1.5", 1500}, {"1500m", 1500}, {"2", 2000},   {"2000m", 2000},
};
constexpr Spelled kMemorySpellings[] = {
    {"64Mi", 64 * kMi},   {"65536Ki", 64 * kMi}, {"128Mi", 128 * kMi},   {"134217728", 128 * kMi},
    {"256Mi", 256 * kMi}, {"0.25Gi", 256 * kMi}, {"500M", 500'000'000},  {"512Mi", 512 * kMi},
    {"0.5Gi", 512 * kMi}, {"768Mi", 768 * kMi},  {"1G", 1'000'000'000},  {"1Gi", kGi},
    {"1024Mi", kGi},      {"1.5Gi", 1536 * kMi}, {"1536Mi", 1536 * kMi}, {"2Gi", 2 * kGi},
    {"2048Mi", 2 * kGi},  {"3Gi", 3 * kGi},
};
constexpr Spelled kEphemeralSpellings[] = {
    {"500Mi", 500 * kMi}, {"1Gi", kGi}, {"2Gi", 2 * kGi}, {"2048Mi", 2 * kGi}, {"4Gi", 4 * kGi},
};

// A spelling of exactly `value` (or, with `orMore`, of at least it), drawn from `table`.
template <std::size_t N>
const Spelled& spelling(Random& rng, const Spelled (&table)[N], std::int64_t value,
                        bool orMore = false) {
  std::vector<const Spelled*> candidates;
  for (const auto& s : table) {
    if (s.value == value || (orMore && s.value > value)) candidates.push_back(&s);
  }
  return *candidates[std::size_t(rng.between(0, std::int64_t(candidates.size()) - 1))];
}

// ---------------------------------------------------------------------------------------------
// The synthetic node. A plan per pod first, then the JSON objects built from the plans.

enum class ContainerKind { Main, Helper, Init, Sidecar };

struct ContainerPlan {
  ContainerKind kind = ContainerKind::Main;
  std::string name;
  std::string image;
  int port = 0;
  OJson resources = OJson::object();
  std::int64_t memoryRequest = 0;  // bytes; 0 when none
  std::uint64_t workingSet = 0;
  std::uint64_t rootfsUsed = 0;
  std::uint64_t logsUsed = 0;
  std::string containerId;
  std::string imageDigest;
};

struct PodPlan {
  std::string name;
  std::string generateName;
  std::string ns;
  std::string uid;
  std::string app;
  std::string ownerKind;  // ReplicaSet, DaemonSet, Job, or Node for a static pod's mirror
  std::string ownerName;
  std::string ownerUid;
  std::map<std::string, std::string> labels;
  std::map<std::string, std::string> annotations;
  std::string priorityClassName;
  std::optional<std::int32_t> priority;
  std::string preemptionPolicy;
  std::string qos;  // empty: status.qosClass left out (a hand-written snapshot)
  std::string phase = "Running";
  bool terminating = false;
  bool hasStats = true;
  bool daemon = false;
  bool hostNetwork = false;
  std::string restartPolicy = "Always";
  std::int64_t grace = 30;
  bool kata = false;  // runtimeClassName kata, with a pod overhead
  std::int64_t created = 0;
  std::string ip;
  std::vector<ContainerPlan> containers;
  std::vector<ContainerPlan> initContainers;
  std::uint64_t processCount = 0;
  std::uint64_t ephemeralUsed = 0;
  std::uint64_t inodesUsed = 0;
  std::uint64_t cpuNanoCores = 0;
};

struct PriorityClassSpec {
  const char* name;
  std::int32_t value;
  bool globalDefault;
  const char* preemptionPolicy;
  const char* description;
};

constexpr PriorityClassSpec kPriorityClasses[] = {
    {"system-node-critical", 2'000'001'000, false, "PreemptLowerPriority",
     "Used for system critical pods that must not be moved from their current node."},
    {"system-cluster-critical", 2'000'000'000, false, "PreemptLowerPriority",
     "Used for system critical pods that must run in the cluster, but can be moved to another "
     "node if necessary."},
    {"platform-high", 100'000, false, "PreemptLowerPriority",
     "Customer-facing services with an SLO."},
    {"standard", 1'000, true, "PreemptLowerPriority", "Default for every workload."},
    {"batch-low", 10, false, "Never", "Batch jobs: never preempt, evicted before services."},
    {"preemptible", -10, false, "PreemptLowerPriority", "Best-effort work, first to go."},
};

// The node's conditions: no pressure reported yet, ready.
struct NodeCondition {
  const char* type;
  const char* status;
  const char* reason;
  const char* message;
};

constexpr NodeCondition kNodeConditions[] = {
    {"MemoryPressure", "False", "KubeletHasSufficientMemory",
     "kubelet has sufficient memory available"},
    {"DiskPressure", "False", "KubeletHasNoDiskPressure", "kubelet has no disk pressure"},
    {"PIDPressure", "False", "KubeletHasSufficientPID", "kubelet has sufficient PID available"},
    {"Ready", "True", "KubeletReady", "kubelet is posting ready status"},
};

struct Workload {
  const char* ns;
  const char* app;
  const char* image;
  int port;
};

constexpr Workload kWorkloads[] = {
    {"shop", "checkout", "registry.example.com/shop/checkout", 8080},
    {"shop", "cart", "registry.example.com/shop/cart", 8080},
    {"shop", "catalog", "registry.example.com/shop/catalog", 8080},
    {"shop", "frontend", "registry.example.com/shop/frontend", 3000},
    {"payments", "payments-api", "registry.example.com/payments/api", 8443},
    {"payments", "ledger", "registry.example.com/payments/ledger", 9090},
    {"search", "search-indexer", "registry.example.com/search/indexer", 8080},
    {"search", "search-query", "registry.example.com/search/query", 8080},
    {"analytics", "event-collector", "registry.example.com/analytics/collector", 4317},
    {"analytics", "sessionizer", "registry.example.com/analytics/sessionizer", 8080},
    {"identity", "auth-server", "registry.example.com/identity/auth", 8443},
    {"identity", "user-profile", "registry.example.com/identity/profile", 8080},
    {"media", "thumbnailer", "registry.example.com/media/thumbnailer", 8080},
    {"media", "transcoder", "registry.example.com/media/transcoder", 8080},
    {"notifications", "mailer", "registry.example.com/notify/mailer", 8080},
    {"notifications", "push-gateway", "registry.example.com/notify/push", 8080},
    {"ml-serving", "recommender", "registry.example.com/ml/recommender", 8500},
    {"ml-serving", "feature-store", "registry.example.com/ml/features", 6566},
};

constexpr Workload kJobs[] = {
    {"batch", "nightly-report", "registry.example.com/batch/report", 0},
    {"batch", "db-backup", "registry.example.com/batch/backup", 0},
    {"ci", "build-runner", "registry.example.com/ci/runner", 0},
};

struct GeneratedSnapshot {
  std::string text;     // as kubectl prints it: four-space indent
  std::string compact;  // the same document without whitespace, as the API server sends it
  std::size_t podsCompactBytes = 0;   // the "pods" member alone, compact
  std::size_t statsCompactBytes = 0;  // the "stats" member alone, compact
  int podsTotal = 0;
  std::map<std::string, int> qosCounts;
};

class SnapshotGenerator {
 public:
  explicit SnapshotGenerator(std::uint64_t seed) : rng_(seed) {}

  GeneratedSnapshot generate(int podCount) {
    std::vector<PodPlan> plans = planPods(podCount);
    OJson doc = OJson::object();
    doc["nodes"] = nodeList(plans);
    OJson items = OJson::array();
    for (const auto& p : plans) items.push_back(podJson(p));
    doc["pods"] = listOf(std::move(items));
    doc["priorityClasses"] = priorityClassList();
    OJson stats = OJson::object();
    stats[kNodeName] = summaryJson(plans);
    doc["stats"] = std::move(stats);

    GeneratedSnapshot out;
    out.text = doc.dump(4);  // kubectl indents with four spaces
    out.compact = doc.dump();
    out.podsCompactBytes = doc["pods"].dump().size();
    out.statsCompactBytes = doc["stats"].dump().size();
    out.podsTotal = podCount;
    for (const auto& p : plans) {
      ++out.qosCounts[p.qos.empty() ? "(computed)" : p.qos];
    }
    return out;
  }

 private:
  std::string uniqueSuffix(std::size_t n) {
    for (;;) {
      std::string s = rng_.fromAlphabet(kNameAlphabet, n);
      if (usedNames_.insert(s).second) return s;
    }
  }

  std::string podIp() {
    return "10.244." + std::to_string(rng_.between(0, 63)) + "." +
           std::to_string(rng_.between(2, 254));
  }

  ContainerPlan container(ContainerKind kind, std::string name, std::string image, int port) {
    ContainerPlan c;
    c.kind = kind;
    c.name = std::move(name);
    c.image = std::move(image);
    c.port = port;
    c.containerId = "containerd://" + rng_.hex(64);
    c.imageDigest = rng_.hex(64);
    return c;
  }

  // Requests and limits for one container of a pod in QoS class `qos`; `small` is for
  // helpers, init containers and sidecars.
  void assignResources(ContainerPlan& c, const std::string& qos, bool small, bool ephemeral) {
    if (qos == "BestEffort") return;
    const Spelled& cpu =
        small ? kCpuSpellings[rng_.between(0, 4)] : kCpuSpellings[rng_.between(1, 14)];
    const Spelled& memory =
        small ? kMemorySpellings[rng_.between(0, 5)] : kMemorySpellings[rng_.between(2, 17)];
    OJson requests = OJson::object();
    OJson limits = OJson::object();
    requests["cpu"] = cpu.text;
    requests["memory"] = memory.text;
    c.memoryRequest = memory.value;
    if (qos == "Guaranteed") {
      // Equal values, possibly spelled differently ("0.5" and "500m", "1.5Gi" and "1536Mi").
      limits["cpu"] = spelling(rng_, kCpuSpellings, cpu.value).text;
      limits["memory"] = spelling(rng_, kMemorySpellings, memory.value).text;
    } else {
      // Burstable: a memory limit at or above the request, rarely a cpu limit.
      if (rng_.chance(0.6))
        limits["memory"] = spelling(rng_, kMemorySpellings, memory.value, true).text;
      // A cpu limit above the request keeps the pod Burstable even with memory limit == request.
      if (cpu.value < 2000 && rng_.chance(0.2)) {
        limits["cpu"] = spelling(rng_, kCpuSpellings, cpu.value + 1, true).text;
      }
    }
    if (ephemeral) {
      const Spelled& e = kEphemeralSpellings[rng_.between(0, 3)];
      requests["ephemeral-storage"] = e.text;
      limits["ephemeral-storage"] = spelling(rng_, kEphemeralSpellings, e.value, true).text;
    }
    if (!limits.empty()) c.resources["limits"] = std::move(limits);
    c.resources["requests"] = std::move(requests);
  }

  // Working set: BestEffort pods use what they like; others spread around their request so
  // that some are well over it and some well under.
  void assignUsage(ContainerPlan& c, const std::string& qos) {
    double ws = 0;
    if (c.memoryRequest == 0) {
      ws = rng_.betweenReal(20.0, 600.0) * double(kMi);
    } else if (qos == "Guaranteed") {
      ws = double(c.memoryRequest) * rng_.betweenReal(0.25, 0.97);
    } else {
      ws = double(c.memoryRequest) * rng_.betweenReal(0.2, 1.8);
    }
    c.workingSet = std::uint64_t(ws) & ~std::uint64_t(4095);  // whole pages
    c.rootfsUsed = std::uint64_t(rng_.between(std::int64_t(16 * kKi), std::int64_t(300 * kMi)));
    c.logsUsed = std::uint64_t(rng_.between(std::int64_t(4 * kKi), std::int64_t(200 * kMi)));
  }

  void finishPod(PodPlan& p) {
    p.processCount = 0;
    for (std::size_t i = 0; i < p.containers.size(); ++i) {
      p.processCount += std::uint64_t(rng_.between(1, 24));
    }
    if (rng_.chance(0.01)) p.processCount += 800;  // a fork-happy pod
    p.ephemeralUsed = 0;
    for (const auto& c : p.containers) p.ephemeralUsed += c.rootfsUsed + c.logsUsed;
    p.ephemeralUsed += std::uint64_t(rng_.between(0, std::int64_t(50 * kMi)));  // emptyDirs
    p.inodesUsed = std::uint64_t(rng_.between(12, 6000));
    p.cpuNanoCores = std::uint64_t(rng_.between(100'000, 1'800'000'000));
  }

  PodPlan staticPod(const char* component, int port) {
    PodPlan p;
    p.app = component;
    p.name = std::string(component) + "-" + kNodeName;
    p.ns = "kube-system";
    p.uid = rng_.uuid();
    p.ownerKind = "Node";
    p.ownerName = kNodeName;
    p.ownerUid = nodeUid_;
    p.labels = {{"component", component}, {"tier", "control-plane"}};
    std::string hash = rng_.hex(32);
    p.annotations = {{"kubernetes.io/config.hash", hash},
                     {"kubernetes.io/config.mirror", hash},
                     {"kubernetes.io/config.seen", rfc3339(kClusterBirth) + ".512345678Z"},
                     {"kubernetes.io/config.source", "file"}};
    p.priorityClassName = "system-node-critical";
    p.priority = 2'000'001'000;
    p.preemptionPolicy = "PreemptLowerPriority";
    p.qos = "Burstable";
    p.hostNetwork = true;
    p.created = kClusterBirth + rng_.between(0, 120);
    p.ip = "10.0.12.34";
    ContainerPlan c = container(ContainerKind::Main, component,
                                std::string("registry.k8s.io/") + component + ":v1.30.4", port);
    assignResources(c, "Burstable", false, false);
    assignUsage(c, "Burstable");
    p.containers.push_back(std::move(c));
    finishPod(p);
    return p;
  }

  PodPlan daemonPod(const char* ns, const char* app, const char* image, const char* priorityClass,
                    std::int32_t priority) {
    PodPlan p;
    p.app = app;
    p.generateName = std::string(app) + "-";
    p.name = p.generateName + uniqueSuffix(5);
    p.ns = ns;
    p.uid = rng_.uuid();
    p.ownerKind = "DaemonSet";
    p.ownerName = app;
    p.ownerUid = rng_.uuid();
    p.daemon = true;
    p.labels = {{"app.kubernetes.io/name", app},
                {"controller-revision-hash", rng_.fromAlphabet(kNameAlphabet, 10)},
                {"pod-template-generation", "3"}};
    p.priorityClassName = priorityClass;
    p.priority = priority;
    p.preemptionPolicy = "PreemptLowerPriority";
    p.qos = "Burstable";
    p.hostNetwork = std::string_view(app) == "kube-proxy";
    p.created = kClusterBirth + rng_.between(60, 3600);
    p.ip = p.hostNetwork ? "10.0.12.34" : podIp();
    ContainerPlan c = container(ContainerKind::Main, app, image, 9100);
    assignResources(c, "Burstable", true, false);
    assignUsage(c, "Burstable");
    p.containers.push_back(std::move(c));
    finishPod(p);
    return p;
  }

  PodPlan workloadPod(bool job) {
    const Workload& w = job ? rng_.pick(kJobs) : rng_.pick(kWorkloads);
    PodPlan p;
    p.app = w.app;
    p.ns = w.ns;
    p.uid = rng_.uuid();
    const std::string version =
        "v1." + std::to_string(rng_.between(0, 60)) + "." + std::to_string(rng_.between(0, 9));
    if (job) {
      p.ownerKind = "Job";
      p.ownerName = std::string(w.app) + "-" + std::to_string(29'000'000 + rng_.between(0, 99999));
      p.ownerUid = rng_.uuid();
      p.generateName = p.ownerName + "-";
      p.restartPolicy = "Never";
      p.labels = {{"batch.kubernetes.io/controller-uid", p.ownerUid},
                  {"batch.kubernetes.io/job-name", p.ownerName},
                  {"controller-uid", p.ownerUid},
                  {"job-name", p.ownerName}};
      if (rng_.chance(0.5)) p.phase = "Succeeded";
    } else {
      const std::string hash = rng_.fromAlphabet(kNameAlphabet, 10);
      p.ownerKind = "ReplicaSet";
      p.ownerName = std::string(w.app) + "-" + hash;
      p.ownerUid = rng_.uuid();
      p.generateName = p.ownerName + "-";
      p.labels = {{"app.kubernetes.io/name", w.app},
                  {"app.kubernetes.io/version", version},
                  {"pod-template-hash", hash},
                  {"tier", rng_.chance(0.5) ? "backend" : "frontend"}};
      p.annotations = {{"prometheus.io/port", std::to_string(w.port)},
                       {"prometheus.io/scrape", "true"}};
      if (rng_.chance(0.3)) {
        p.annotations["kubectl.kubernetes.io/restartedAt"] =
            rfc3339(kClusterBirth + rng_.between(0, 2'000'000));
      }
      if (rng_.chance(0.3)) p.annotations["checksum/config"] = rng_.hex(64);
    }
    p.name = p.generateName + uniqueSuffix(5);
    p.created = kClusterBirth + rng_.between(3600, 29 * 86400);
    p.ip = podIp();
    p.grace = job ? 30 : rng_.pick({30, 30, 30, 60, 120});

    // Priority: mostly set by admission from a class; a few hand-written objects lack
    // spec.priority (and status.qosClass) so the class lookup and QoS computation run.
    const double r = rng_.unit();
    const PriorityClassSpec& cls = job ? (r < 0.6 ? kPriorityClasses[4] : kPriorityClasses[5])
                                   : r < 0.15 ? kPriorityClasses[2]
                                   : r < 0.80 ? kPriorityClasses[3]
                                   : r < 0.90 ? kPriorityClasses[4]
                                              : kPriorityClasses[5];
    const bool defaulted = !job && cls.globalDefault && rng_.chance(0.25);
    if (!defaulted) p.priorityClassName = cls.name;
    const bool handWritten = rng_.chance(0.05);
    if (!handWritten) p.priority = cls.value;
    p.preemptionPolicy = cls.preemptionPolicy;

    const double q = rng_.unit();
    const std::string qos = q < 0.25 ? "Guaranteed" : q < 0.85 ? "Burstable" : "BestEffort";
    if (!handWritten) p.qos = qos;
    const bool ephemeral = rng_.chance(0.3);

    ContainerPlan main =
        container(ContainerKind::Main, w.app, std::string(w.image) + ":" + version, w.port);
    assignResources(main, qos, false, ephemeral);
    assignUsage(main, qos);
    p.containers.push_back(std::move(main));
    if (!job && rng_.chance(0.25)) {
      ContainerPlan helper = container(ContainerKind::Helper, "log-shipper",
                                       "registry.example.com/infra/fluent-bit:3.1.4", 2020);
      assignResources(helper, qos, true, false);
      assignUsage(helper, qos);
      p.containers.push_back(std::move(helper));
    }
    if (!job && rng_.chance(0.08)) {
      ContainerPlan helper = container(ContainerKind::Helper, "config-reloader",
                                       "registry.example.com/infra/reloader:0.14.0", 9533);
      assignResources(helper, qos, true, false);
      assignUsage(helper, qos);
      p.containers.push_back(std::move(helper));
    }
    if (rng_.chance(0.2)) {
      ContainerPlan init = container(ContainerKind::Init, "wait-for-deps",
                                     "registry.example.com/infra/wait-for:2.2.4", 0);
      assignResources(init, qos, true, false);
      p.initContainers.push_back(std::move(init));
    }
    if (!job && rng_.chance(0.12)) {
      // A native sidecar: an init container with restartPolicy Always.
      ContainerPlan sidecar =
          container(ContainerKind::Sidecar, "istio-proxy", "docker.io/istio/proxyv2:1.23.2", 15090);
      assignResources(sidecar, qos, true, false);
      assignUsage(sidecar, qos);
      p.initContainers.push_back(std::move(sidecar));
    }
    if (!job && rng_.chance(0.02)) p.kata = true;
    if (!job && rng_.chance(0.01)) p.terminating = true;
    if (!job && rng_.chance(0.01)) {
      p.phase = "Pending";  // just scheduled: no stats yet
      p.hasStats = false;
    }
    if (p.phase == "Succeeded") p.hasStats = false;
    finishPod(p);
    return p;
  }

  std::vector<PodPlan> planPods(int podCount) {
    nodeUid_ = rng_.uuid();
    std::vector<PodPlan> plans;
    plans.reserve(std::size_t(podCount));
    plans.push_back(staticPod("etcd", 2381));
    plans.push_back(staticPod("kube-apiserver", 6443));
    plans.push_back(staticPod("kube-controller-manager", 10257));
    plans.push_back(staticPod("kube-scheduler", 10259));
    plans.push_back(daemonPod("kube-system", "kube-proxy", "registry.k8s.io/kube-proxy:v1.30.4",
                              "system-node-critical", 2'000'001'000));
    plans.push_back(daemonPod("kube-system", "calico-node", "docker.io/calico/node:v3.28.1",
                              "system-node-critical", 2'000'001'000));
    plans.push_back(daemonPod("kube-system", "coredns", "registry.k8s.io/coredns/coredns:v1.11.1",
                              "system-cluster-critical", 2'000'000'000));
    plans.push_back(daemonPod("monitoring", "node-exporter",
                              "quay.io/prometheus/node-exporter:v1.8.2", "system-node-critical",
                              2'000'001'000));
    plans.push_back(daemonPod("logging", "fluent-bit", "cr.fluentbit.io/fluent/fluent-bit:3.1.4",
                              "platform-high", 100'000));
    while (int(plans.size()) < podCount) plans.push_back(workloadPod(rng_.chance(0.05)));
    return plans;
  }

  OJson containerJson(const PodPlan& p, const ContainerPlan& c) {
    OJson j = OJson::object();
    j["name"] = c.name;
    j["image"] = c.image;
    if (c.kind == ContainerKind::Init) {
      j["command"] = {"/bin/sh", "-c", "until nc -z " + p.app + "-db 5432; do sleep 2; done"};
    } else if (c.kind == ContainerKind::Sidecar) {
      j["args"] = {"proxy", "sidecar", "--concurrency", "2"};
    } else if (c.kind == ContainerKind::Main) {
      j["args"] = {"--config=/etc/" + c.name + "/config.yaml"};
    }
    if (c.port != 0) {
      OJson port = {{"name", c.kind == ContainerKind::Main ? "http" : "metrics"},
                    {"containerPort", c.port},
                    {"protocol", "TCP"}};
      j["ports"] = OJson::array({port});
    }
    if (c.kind == ContainerKind::Main || c.kind == ContainerKind::Sidecar) {
      OJson env = OJson::array();
      env.push_back(
          {{"name", "POD_NAME"},
           {"valueFrom", {{"fieldRef", {{"apiVersion", "v1"}, {"fieldPath", "metadata.name"}}}}}});
      if (c.kind == ContainerKind::Main) {
        env.push_back({{"name", "LOG_LEVEL"}, {"value", rng_.chance(0.8) ? "info" : "debug"}});
      }
      j["env"] = std::move(env);
    }
    j["resources"] = c.resources;
    if (c.kind == ContainerKind::Sidecar) j["restartPolicy"] = "Always";
    OJson mounts = OJson::array();
    if (c.kind == ContainerKind::Main && p.ownerKind != "Node") {
      mounts.push_back({{"name", "config"}, {"readOnly", true}, {"mountPath", "/etc/" + c.name}});
    }
    mounts.push_back({{"name", "kube-api-access-" + p.name.substr(p.name.size() - 5)},
                      {"readOnly", true},
                      {"mountPath", "/var/run/secrets/kubernetes.io/serviceaccount"}});
    j["volumeMounts"] = std::move(mounts);
    if (c.kind == ContainerKind::Main && c.port != 0) {
      j["readinessProbe"] = {{"httpGet", {{"path", "/readyz"}, {"port", c.port}}},
                             {"periodSeconds", 10}};
    }
    j["terminationMessagePath"] = "/dev/termination-log";
    j["terminationMessagePolicy"] = "File";
    j["imagePullPolicy"] = "IfNotPresent";
    return j;
  }

  OJson containerStatusJson(const PodPlan& p, const ContainerPlan& c) {
    OJson j = OJson::object();
    const std::string started = rfc3339(p.created + rng_.between(2, 40));
    j["containerID"] = c.containerId;
    j["image"] = c.image;
    j["imageID"] = c.image.substr(0, c.image.rfind(':')) + "@sha256:" + c.imageDigest;
    j["lastState"] = OJson::object();
    j["name"] = c.name;
    const bool pending = p.phase == "Pending";
    const bool running = !pending && c.kind != ContainerKind::Init && p.phase != "Succeeded";
    j["ready"] = running;
    j["restartCount"] = running && rng_.chance(0.1) ? rng_.between(1, 7) : 0;
    j["started"] = running;
    if (pending) {
      j["state"] = {{"waiting", {{"reason", "ContainerCreating"}}}};
      j.erase("containerID");
      j.erase("imageID");
    } else if (!running) {
      j["state"] = {{"terminated",
                     {{"containerID", c.containerId},
                      {"exitCode", 0},
                      {"finishedAt", rfc3339(p.created + 600)},
                      {"reason", "Completed"},
                      {"startedAt", started}}}};
    } else {
      j["state"] = {{"running", {{"startedAt", started}}}};
    }
    return j;
  }

  OJson podJson(const PodPlan& p) {
    OJson meta = OJson::object();
    meta["name"] = p.name;
    if (!p.generateName.empty()) meta["generateName"] = p.generateName;
    meta["namespace"] = p.ns;
    meta["uid"] = p.uid;
    meta["resourceVersion"] = std::to_string(rng_.between(1'000'000, 99'999'999));
    meta["creationTimestamp"] = rfc3339(p.created);
    if (p.terminating) {
      meta["deletionTimestamp"] = rfc3339(kStatsTime - 5);
      meta["deletionGracePeriodSeconds"] = p.grace;
    }
    meta["labels"] = p.labels;
    if (!p.annotations.empty()) meta["annotations"] = p.annotations;
    meta["ownerReferences"] = OJson::array({{{"apiVersion", p.ownerKind == "Node"  ? "v1"
                                                            : p.ownerKind == "Job" ? "batch/v1"
                                                                                   : "apps/v1"},
                                             {"kind", p.ownerKind},
                                             {"name", p.ownerName},
                                             {"uid", p.ownerUid},
                                             {"controller", true},
                                             {"blockOwnerDeletion", p.ownerKind != "Node"}}});

    const std::string tokenVolume = "kube-api-access-" + p.name.substr(p.name.size() - 5);
    OJson spec = OJson::object();
    OJson volumes = OJson::array();
    if (p.ownerKind != "Node") {
      volumes.push_back(
          {{"name", "config"}, {"configMap", {{"name", p.app + "-config"}, {"defaultMode", 420}}}});
    }
    static const OJson kTokenVolume = OJson::parse(R"({"name": "", "projected": {"sources": [
        {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
        {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
        {"downwardAPI": {"items": [{"path": "namespace",
            "fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.namespace"}}]}}],
        "defaultMode": 420}})");
    volumes.push_back(kTokenVolume);
    volumes.back()["name"] = tokenVolume;
    spec["volumes"] = std::move(volumes);
    if (!p.initContainers.empty()) {
      OJson inits = OJson::array();
      for (const auto& c : p.initContainers) inits.push_back(containerJson(p, c));
      spec["initContainers"] = std::move(inits);
    }
    OJson containers = OJson::array();
    for (const auto& c : p.containers) containers.push_back(containerJson(p, c));
    spec["containers"] = std::move(containers);
    spec["restartPolicy"] = p.restartPolicy;
    spec["terminationGracePeriodSeconds"] = p.grace;
    spec["dnsPolicy"] = p.hostNetwork ? "ClusterFirstWithHostNet" : "ClusterFirst";
    spec["serviceAccountName"] = p.daemon ? p.app : "default";
    spec["serviceAccount"] = p.daemon ? p.app : "default";
    spec["nodeName"] = kNodeName;
    if (p.hostNetwork) spec["hostNetwork"] = true;
    spec["schedulerName"] = "default-scheduler";
    // Node agents tolerate everything; workloads the defaults, ml-serving's the GPU nodes too.
    static const OJson kAgentTolerations = OJson::parse(R"([
        {"operator": "Exists", "effect": "NoSchedule"}, {"operator": "Exists", "effect": "NoExecute"},
        {"key": "node.kubernetes.io/disk-pressure", "operator": "Exists", "effect": "NoSchedule"},
        {"key": "node.kubernetes.io/memory-pressure", "operator": "Exists", "effect": "NoSchedule"}])");
    static const OJson kTolerations = OJson::parse(R"([
        {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute",
         "tolerationSeconds": 300},
        {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute",
         "tolerationSeconds": 300}])");
    static const OJson kGpuToleration = OJson::parse(R"(
        {"key": "nvidia.com/gpu", "operator": "Equal", "value": "present", "effect": "NoSchedule"})");
    const bool agent = p.daemon || p.ownerKind == "Node";
    spec["tolerations"] = agent ? kAgentTolerations : kTolerations;
    if (!agent && p.ns == "ml-serving") spec["tolerations"].push_back(kGpuToleration);
    if (!p.priorityClassName.empty()) spec["priorityClassName"] = p.priorityClassName;
    if (p.priority) spec["priority"] = *p.priority;
    if (p.kata) spec["runtimeClassName"] = "kata";
    spec["enableServiceLinks"] = true;
    spec["preemptionPolicy"] = p.preemptionPolicy;
    if (p.kata) spec["overhead"] = {{"cpu", "250m"}, {"memory", "160Mi"}};

    OJson status = OJson::object();
    status["phase"] = p.phase;
    const bool running = p.phase == "Running";
    const std::string t0 = rfc3339(p.created + 1);
    const std::string t1 = rfc3339(p.created + 9);
    auto condition = [&](const char* type, bool ok, const std::string& at) {
      OJson c = OJson::object();
      c["lastProbeTime"] = nullptr;
      c["lastTransitionTime"] = at;
      if (!ok && p.phase == "Succeeded") c["reason"] = "PodCompleted";
      c["status"] = ok ? "True" : "False";
      c["type"] = type;
      return c;
    };
    OJson conditions = OJson::array();
    conditions.push_back(condition("Initialized", p.phase != "Pending", t0));
    conditions.push_back(condition("Ready", running, t1));
    conditions.push_back(condition("ContainersReady", running, t1));
    conditions.push_back(condition("PodScheduled", true, rfc3339(p.created)));
    status["conditions"] = std::move(conditions);
    status["hostIP"] = "10.0.12.34";
    status["hostIPs"] = OJson::array({{{"ip", "10.0.12.34"}}});
    if (p.phase != "Pending") {
      status["podIP"] = p.ip;
      status["podIPs"] = OJson::array({{{"ip", p.ip}}});
    }
    status["startTime"] = rfc3339(p.created);
    if (!p.initContainers.empty()) {
      OJson inits = OJson::array();
      for (const auto& c : p.initContainers) inits.push_back(containerStatusJson(p, c));
      status["initContainerStatuses"] = std::move(inits);
    }
    OJson statuses = OJson::array();
    for (const auto& c : p.containers) statuses.push_back(containerStatusJson(p, c));
    status["containerStatuses"] = std::move(statuses);
    if (!p.qos.empty()) status["qosClass"] = p.qos;

    OJson pod = OJson::object();
    pod["apiVersion"] = "v1";
    pod["kind"] = "Pod";
    pod["metadata"] = std::move(meta);
    pod["spec"] = std::move(spec);
    pod["status"] = std::move(status);
    return pod;
  }

  static std::uint64_t nodeMemoryCapacity(const std::vector<PodPlan>& plans) {
    std::uint64_t sum = 0;
    for (const auto& p : plans) {
      for (const auto& c : p.containers) sum += c.workingSet;
      for (const auto& c : p.initContainers) sum += c.workingSet;
    }
    // System daemons and the kernel, plus what is still free.
    return sum + std::uint64_t(3 * kGi) + kNodeMemoryAvailable;
  }

  // The NodeList: one node whose memory holds every pod's working set and leaves less than the
  // hard threshold; its three nodeInfo identifiers drawn here, in this order.
  OJson nodeList(const std::vector<PodPlan>& plans) {
    static const OJson kNode = OJson::parse(R"json({"apiVersion": "v1", "kind": "Node",
      "metadata": {"annotations": {"node.alpha.kubernetes.io/ttl": "0",
          "volumes.kubernetes.io/controller-managed-attach-detach": "true"},
        "creationTimestamp": "", "labels": {"beta.kubernetes.io/arch": "amd64",
          "kubernetes.io/arch": "amd64", "kubernetes.io/hostname": "", "kubernetes.io/os": "linux",
          "node.kubernetes.io/instance-type": "m6i.32xlarge",
          "topology.kubernetes.io/region": "eu-west-1", "topology.kubernetes.io/zone": "eu-west-1a"},
        "name": "", "resourceVersion": "48213377", "uid": ""},
      "spec": {"podCIDR": "10.244.0.0/18", "podCIDRs": ["10.244.0.0/18"],
        "providerID": "aws:///eu-west-1a/i-0abc123def4567890"},
      "status": {"addresses": [{"address": "10.0.12.34", "type": "InternalIP"},
          {"address": "", "type": "Hostname"}],
        "allocatable": {"cpu": "", "ephemeral-storage": "460858349521", "hugepages-2Mi": "0",
          "memory": "", "pods": ""},
        "capacity": {"cpu": "", "ephemeral-storage": "500056636Ki", "hugepages-2Mi": "0",
          "memory": "", "pods": ""},
        "conditions": [], "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
        "nodeInfo": {"architecture": "amd64", "bootID": "",
          "containerRuntimeVersion": "containerd://1.7.20", "kernelVersion": "6.1.0-25-cloud-amd64",
          "kubeProxyVersion": "v1.30.4", "kubeletVersion": "v1.30.4", "machineID": "",
          "operatingSystem": "linux", "osImage": "Debian GNU/Linux 12 (bookworm)",
          "systemUUID": ""}}})json");
    const std::uint64_t memory = nodeMemoryCapacity(plans);
    const std::size_t cpus = std::max<std::size_t>(8, plans.size() / 8);
    const std::string podsCap = std::to_string(std::max<std::size_t>(110, plans.size()));
    OJson node = kNode;
    OJson& meta = node["metadata"];
    meta["creationTimestamp"] = rfc3339(kClusterBirth);
    meta["labels"]["kubernetes.io/hostname"] = meta["name"] = kNodeName;
    meta["uid"] = nodeUid_;
    OJson& status = node["status"];
    status["addresses"][1]["address"] = kNodeName;
    status["allocatable"]["cpu"] = std::to_string(cpus - 1) + "900m";
    status["allocatable"]["memory"] =
        std::to_string((memory - std::uint64_t(2 * kGi)) / 1024) + "Ki";
    status["capacity"]["cpu"] = std::to_string(cpus);
    status["capacity"]["memory"] = std::to_string(memory / 1024) + "Ki";
    status["allocatable"]["pods"] = status["capacity"]["pods"] = podsCap;
    const std::string heartbeat = rfc3339(kStatsTime - 7);
    for (const NodeCondition& c : kNodeConditions) {
      status["conditions"].push_back({{"lastHeartbeatTime", heartbeat},
                                      {"lastTransitionTime", rfc3339(kClusterBirth + 40)},
                                      {"message", c.message},
                                      {"reason", c.reason},
                                      {"status", c.status},
                                      {"type", c.type}});
    }
    status["nodeInfo"]["bootID"] = rng_.uuid();
    status["nodeInfo"]["machineID"] = rng_.hex(32);
    status["nodeInfo"]["systemUUID"] = rng_.uuid();
    return listOf(OJson::array({std::move(node)}));
  }

  OJson priorityClassList() {
    OJson items = OJson::array();
    for (const auto& c : kPriorityClasses) {
      OJson pc = OJson::object();
      pc["apiVersion"] = "scheduling.k8s.io/v1";
      pc["kind"] = "PriorityClass";
      pc["metadata"] = {{"creationTimestamp", rfc3339(kClusterBirth)},
                        {"generation", 1},
                        {"name", c.name},
                        {"resourceVersion", std::to_string(rng_.between(70, 9000))},
                        {"uid", rng_.uuid()}};
      pc["value"] = c.value;
      if (c.globalDefault) pc["globalDefault"] = true;
      pc["description"] = c.description;
      pc["preemptionPolicy"] = c.preemptionPolicy;
      items.push_back(std::move(pc));
    }
    return listOf(std::move(items));
  }

  // A List, as `kubectl get -o json` wraps the objects it prints.
  static OJson listOf(OJson items) {
    OJson list = OJson::object();
    list["apiVersion"] = "v1";
    list["items"] = std::move(items);
    list["kind"] = "List";
    list["metadata"] = {{"resourceVersion", ""}};
    return list;
  }

  static OJson fsJson(const std::string& time, std::uint64_t available, std::uint64_t capacity,
                      std::uint64_t used, std::uint64_t inodesFree, std::uint64_t inodes) {
    return {{"time", time},
            {"availableBytes", available},
            {"capacityBytes", capacity},
            {"usedBytes", used},
            {"inodesFree", inodesFree},
            {"inodes", inodes},
            {"inodesUsed", inodes - inodesFree}};
  }

  OJson memoryJson(const std::string& time, std::uint64_t workingSet) {
    const std::uint64_t usage = workingSet + std::uint64_t(rng_.between(0, 64 * kMi));
    return {{"time", time},
            {"usageBytes", usage},
            {"workingSetBytes", workingSet},
            {"rssBytes", workingSet - workingSet / 8},
            {"pageFaults", rng_.between(1000, 90'000'000)},
            {"majorPageFaults", rng_.between(0, 4000)}};
  }

  OJson cpuJson(const std::string& time, std::uint64_t nanoCores) {
    return {{"time", time},
            {"usageNanoCores", nanoCores},
            {"usageCoreNanoSeconds", nanoCores * std::uint64_t(rng_.between(10'000, 2'000'000))}};
  }

  OJson summaryJson(const std::vector<PodPlan>& plans) {
    const std::string now = rfc3339(kStatsTime);
    std::uint64_t podsWorkingSet = 0;
    std::uint64_t processes = 0;
    OJson pods = OJson::array();
    const std::uint64_t fsCapacity = 512'057'995'264;
    const std::uint64_t fsAvailable = fsCapacity / 10 * 4;  // 40% free: no disk pressure
    for (const auto& p : plans) {
      if (!p.hasStats) continue;
      OJson ps = OJson::object();
      ps["podRef"] = {{"name", p.name}, {"namespace", p.ns}, {"uid", p.uid}};
      ps["startTime"] = rfc3339(p.created);
      OJson containers = OJson::array();
      std::uint64_t workingSet = 0;
      auto addContainer = [&](const ContainerPlan& c) {
        if (c.kind == ContainerKind::Init) return;  // finished: the kubelet reports nothing
        workingSet += c.workingSet;
        OJson cs = OJson::object();
        cs["name"] = c.name;
        cs["startTime"] = rfc3339(p.created + 3);
        cs["cpu"] = {{"time", now}, {"usageNanoCores", p.cpuNanoCores / 2}};
        cs["memory"] = {{"time", now},
                        {"usageBytes", c.workingSet + 4 * kMi},
                        {"workingSetBytes", c.workingSet}};
        cs["rootfs"] = {{"time", now}, {"usedBytes", c.rootfsUsed}, {"inodesUsed", 40}};
        cs["logs"] = {{"time", now}, {"usedBytes", c.logsUsed}};
        containers.push_back(std::move(cs));
      };
      for (const auto& c : p.initContainers) addContainer(c);
      for (const auto& c : p.containers) addContainer(c);
      ps["containers"] = std::move(containers);
      ps["cpu"] = cpuJson(now, p.cpuNanoCores);
      ps["memory"] = memoryJson(now, workingSet);
      ps["ephemeral-storage"] = fsJson(now, fsAvailable, fsCapacity, p.ephemeralUsed, 30'000'000,
                                       30'000'000 + p.inodesUsed);
      ps["process_stats"] = {{"process_count", p.processCount}};
      pods.push_back(std::move(ps));
      podsWorkingSet += workingSet;
      processes += p.processCount;
    }

    const std::uint64_t capacity = nodeMemoryCapacity(plans);
    OJson node = OJson::object();
    node["nodeName"] = kNodeName;
    node["systemContainers"] = OJson::array({{{"name", "kubelet"},
                                              {"startTime", rfc3339(kClusterBirth)},
                                              {"cpu", cpuJson(now, 40'000'000)},
                                              {"memory", memoryJson(now, 180 * kMi)}},
                                             {{"name", "runtime"},
                                              {"startTime", rfc3339(kClusterBirth)},
                                              {"cpu", cpuJson(now, 90'000'000)},
                                              {"memory", memoryJson(now, 420 * kMi)}},
                                             {{"name", "pods"},
                                              {"startTime", rfc3339(kClusterBirth)},
                                              {"cpu", cpuJson(now, 9'000'000'000)},
                                              {"memory",
                                               {{"time", now},
                                                {"availableBytes", 1536 * kMi},
                                                {"usageBytes", podsWorkingSet + 800 * kMi},
                                                {"workingSetBytes", podsWorkingSet}}}}});
    node["startTime"] = rfc3339(kClusterBirth);
    node["cpu"] = cpuJson(now, 9'400'000'000);
    node["memory"] = {{"time", now},
                      {"availableBytes", kNodeMemoryAvailable},
                      {"usageBytes", capacity - kNodeMemoryAvailable + 900 * kMi},
                      {"workingSetBytes", capacity - kNodeMemoryAvailable},
                      {"rssBytes", (capacity - kNodeMemoryAvailable) / 10 * 9},
                      {"pageFaults", 9'184'772'311},
                      {"majorPageFaults", 41'223}};
    node["fs"] =
        fsJson(now, fsAvailable, fsCapacity, fsCapacity - fsAvailable, 30'000'000, 31'250'000);
    node["runtime"] = {
        {"imageFs", fsJson(now, fsAvailable, fsCapacity, 61'000'000'000, 30'000'000, 31'250'000)}};
    node["rlimit"] = {{"time", now}, {"maxpid", 4'194'304}, {"curproc", processes + 412}};
    OJson summary = OJson::object();
    summary["node"] = std::move(node);
    summary["pods"] = std::move(pods);
    return summary;
  }

  Random rng_;
  std::unordered_set<std::string> usedNames_;
  std::string nodeUid_;
};

}  // namespace kubectl

// ---------------------------------------------------------------------------------------------
// A cluster of full nodes as policy objects.

namespace objects {

// ---------------------------------------------------------------------------------------------
// The synthetic cluster.

struct ClassSpec {
  const char* name;
  std::int32_t value;
  bool globalDefault;
  bool never;  // preemptionPolicy: Never
};

// The incoming pod's class is "urgent": it may preempt everything below 500,000.
constexpr ClassSpec kClasses[] = {
    {"critical-apps", 1'000'000, false, false},  // above the incoming pod: never a victim
    {"platform-daemon", 900'000, false, false},  // node agents: never a victim
    {"urgent", 500'000, false, false},          {"high", 100'000, false, false},
    {"business", 10'000, false, false},         {"standard", 1'000, false, false},
    {"default-priority", 0, true, false},       {"preemptible-batch", -100, false, true},
};

constexpr std::int64_t kCpuChoices[] = {50,  100, 100, 100, 200,  250,  250,  250, 300,
                                        500, 500, 500, 750, 1000, 1000, 1500, 2000};
constexpr std::int64_t kMemoryChoices[] = {64 * kMi,  128 * kMi, 128 * kMi, 256 * kMi,  256 * kMi,
                                           256 * kMi, 384 * kMi, 512 * kMi, 512 * kMi,  512 * kMi,
                                           768 * kMi, 1 * kGi,   1 * kGi,   1536 * kMi, 2 * kGi,
                                           3 * kGi,   4 * kGi};

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

enum class Kind { Deployment, StatefulSet, Job };

struct Workload {
  std::string ns;
  std::string app;
  Kind kind = Kind::Deployment;
  std::string priorityClass;  // "" = the global default
  std::int64_t cpu = 0;       // main container, millicores; 0 with memory 0 = BestEffort
  std::int64_t memory = 0;    // main container, bytes
  char qos = 'B';             // 'G'uaranteed, 'B'urstable, 'E' (BestEffort)
  bool sidecar = false;       // a native istio-proxy sidecar
  bool ephemeral = false;
  std::string templateHash;
  std::string team;
  std::string tier;
  std::int64_t rollout = 0;  // unix seconds of the current rollout
  int nextOrdinal = 0;       // StatefulSet pod names
};

// What one generated case holds. The index points into the snapshot: the case is never moved
// after generate() returns it (it lives behind a unique_ptr).
struct Case {
  policy::Snapshot snapshot;
  policy::Pod incoming;
  policy::ClusterIndex index;
  int pdbsAllowingNone = 0;
  std::size_t namespaces = 0;
  std::size_t workloads = 0;
};

struct GenParams {
  double pdbCoverage = 0.25;  // share of Deployments/StatefulSets with a PDB
  double pdbNone = 0.3;       // share of those PDBs that allow no disruption
  std::int64_t incomingCpu = 4000;
  std::int64_t incomingMemory = 8 * kGi;
  double taintedNodes = 0.0;  // share of nodes tainted dedicated=gpu:NoSchedule (tolerated)
};

class ClusterGenerator {
 public:
  ClusterGenerator(std::uint64_t seed, GenParams params) : rng_(seed), params_(params) {}

  // `nodeCount` nodes with `podsPerNode` bound, active pods each, every node full for the
  // incoming pod.
  std::unique_ptr<Case> generate(int nodeCount, int podsPerNode) {
    auto out = std::make_unique<Case>();
    policy::Snapshot& s = out->snapshot;
    for (const auto& c : kClasses) {
      policy::PriorityClass pc;
      pc.name = c.name;
      pc.value = c.value;
      pc.globalDefault = c.globalDefault;
      if (c.never) pc.preemptionPolicy = policy::PreemptionPolicy::Never;
      s.priorityClasses.push_back(std::move(pc));
    }
    out->incoming = incomingPod();
    policy::resolvePod(out->incoming, s.priorityClasses);

    const int totalPods = nodeCount * podsPerNode;
    makeWorkloads(std::max(12, totalPods / 6));
    out->pdbsAllowingNone = makePdbs(s.podDisruptionBudgets);
    out->namespaces = namespaces_;
    out->workloads = workloads_.size();

    for (int n = 0; n < nodeCount; ++n) {
      s.nodes.push_back(node(rng_.chance(params_.taintedNodes)));
      const std::string& nodeName = s.nodes.back().name;
      podsForNode(s.pods, nodeName, podsPerNode);
    }
    if (nodeCount == 1) out->incoming.nodeName = s.nodes[0].name;  // bound, as the kubelet sees it
    // kubectl get pods -A lists by namespace, then name.
    std::sort(s.pods.begin(), s.pods.end(), [](const policy::Pod& a, const policy::Pod& b) {
      return a.ns != b.ns ? a.ns < b.ns : a.name < b.name;
    });
    policy::resolvePods(s.pods, s.priorityClasses);
    fillNodes(*out);
    out->index = policy::buildClusterIndex(out->snapshot);
    return out;
  }

 private:
  policy::Pod incomingPod() {
    policy::Pod p;
    p.ns = "checkout";
    p.name = "checkout-api-" + rng_.fromAlphabet(kNameAlphabet, 10) + "-" +
             rng_.fromAlphabet(kNameAlphabet, 5);
    p.uid = rng_.uuid();
    p.labels = {{"app", "checkout-api"},
                {"app.kubernetes.io/name", "checkout-api"},
                {"pod-template-hash", rng_.fromAlphabet(kNameAlphabet, 10)},
                {"team", "money"}};
    p.priorityClassName = "urgent";
    p.phase = "Pending";
    p.tolerations = {
        {"dedicated", "Equal", "gpu", "NoSchedule"},
        {"node.kubernetes.io/not-ready", "Exists", "", "NoExecute"},
        {"node.kubernetes.io/unreachable", "Exists", "", "NoExecute"},
    };
    policy::Container c;
    c.name = "checkout-api";
    c.requests = {{"cpu", cpuQuantity(params_.incomingCpu)},
                  {"memory", bytesQuantity(params_.incomingMemory)}};
    c.limits = c.requests;
    p.containers.push_back(std::move(c));
    return p;
  }

  // True the first time `ns`/`name` is seen.
  bool claimName(const std::string& ns, const std::string& name) {
    return usedPodNames_.insert(ns + "/" + name).second;
  }

  // About 20 workloads per namespace: past the 16 named ones, tenants' copies ("search-7").
  void makeWorkloads(int count) {
    std::vector<std::string> namespaces(std::begin(kNamespaces), std::end(kNamespaces));
    for (int i = 0; int(namespaces.size()) < count / 20; ++i) {
      namespaces.push_back(std::string(kNamespaces[std::size_t(i) % std::size(kNamespaces)]) + "-" +
                           std::to_string(2 + i / int(std::size(kNamespaces))));
    }
    namespaces_ = namespaces.size();
    std::set<std::string> used;
    workloads_.clear();
    while (int(workloads_.size()) < count) {
      Workload w;
      w.ns = namespaces[std::size_t(rng_.between(0, std::int64_t(namespaces.size()) - 1))];
      w.app = std::string(rng_.pick(kAppStems)) + "-" + rng_.pick(kAppSuffixes);
      if (!used.insert(w.ns + "/" + w.app).second) {
        w.app += "-" + std::to_string(rng_.between(2, 999));
        if (!used.insert(w.ns + "/" + w.app).second) continue;
      }
      const bool batchNs = w.ns.rfind("batch", 0) == 0 || w.ns.rfind("data-pipeline", 0) == 0 ||
                           w.ns.rfind("analytics", 0) == 0;
      const double k = rng_.unit();
      w.kind = batchNs && k < 0.5 ? Kind::Job : k < 0.12 ? Kind::StatefulSet : Kind::Deployment;
      const double r = rng_.unit();
      if (w.kind == Kind::Job) {
        w.priorityClass = r < 0.6 ? "preemptible-batch" : "";
      } else {
        w.priorityClass = r < 0.07   ? "critical-apps"
                          : r < 0.20 ? "high"
                          : r < 0.42 ? "business"
                          : r < 0.65 ? "standard"
                          : r < 0.93 ? ""
                                     : "preemptible-batch";
      }
      const double q = rng_.unit();
      w.qos = q < 0.25 ? 'G' : q < 0.92 ? 'B' : 'E';
      if (w.qos != 'E') {
        w.cpu = rng_.pick(kCpuChoices);
        w.memory = rng_.pick(kMemoryChoices);
        if (w.qos == 'B' && rng_.chance(0.1)) w.cpu = 0;  // memory request only
      }
      w.sidecar = w.kind != Kind::Job && rng_.chance(0.25);
      w.ephemeral = rng_.chance(0.2);
      w.templateHash = rng_.fromAlphabet(kNameAlphabet, 10);
      w.team = rng_.pick(kTeams);
      w.tier = rng_.chance(0.5) ? "backend" : "frontend";
      w.rollout = kClusterBirth + rng_.between(0, 29 * 86400);
      workloads_.push_back(std::move(w));
    }
  }

  // PDBs on a share of the Deployments and StatefulSets; returns how many allow no disruption.
  int makePdbs(std::vector<policy::PodDisruptionBudget>& out) {
    int none = 0;
    for (const auto& w : workloads_) {
      if (w.kind == Kind::Job || !rng_.chance(params_.pdbCoverage)) continue;
      policy::PodDisruptionBudget pdb;
      pdb.name = w.app + "-pdb";
      pdb.ns = w.ns;
      policy::LabelSelector sel;
      if (rng_.chance(0.8)) {
        sel.matchLabels = {{"app", w.app}};
      } else {
        sel.matchExpressions = {{"app", "In", {w.app, w.app + "-canary"}}, {"tier", "Exists", {}}};
      }
      sel.matchLabelsBloom = policy::labelBloom(sel.matchLabels);  // as parsePodDisruptionBudget
      pdb.selector = std::move(sel);
      const double a = rng_.unit();
      pdb.disruptionsAllowed = a < params_.pdbNone ? 0 : a < 0.8 ? 1 : 2;
      if (pdb.disruptionsAllowed == 0) ++none;
      out.push_back(std::move(pdb));
    }
    // Budgets that select nothing: no selector, and an empty one (the scheduler skips both).
    policy::PodDisruptionBudget unset;
    unset.name = "legacy-pdb";
    unset.ns = "web";
    out.push_back(unset);
    policy::PodDisruptionBudget empty;
    empty.name = "everything-pdb";
    empty.ns = "reporting";
    empty.selector = policy::LabelSelector{};
    out.push_back(std::move(empty));
    return none;
  }

  policy::Node node(bool tainted) {
    policy::Node n;
    for (;;) {
      n.name = "ip-10-" + std::to_string(rng_.between(0, 255)) + "-" +
               std::to_string(rng_.between(0, 255)) + "-" + std::to_string(rng_.between(1, 254)) +
               ".eu-west-1.compute.internal";
      if (nodeNames_.insert(n.name).second) break;
    }
    const char* zones[] = {"eu-west-1a", "eu-west-1b", "eu-west-1c"};
    n.labels = {{"kubernetes.io/arch", "amd64"},
                {"kubernetes.io/hostname", n.name},
                {"kubernetes.io/os", "linux"},
                {"node.kubernetes.io/instance-type", tainted ? "g5.12xlarge" : "m6i.8xlarge"},
                {"topology.kubernetes.io/zone", rng_.pick(zones)}};
    if (tainted) {
      n.labels["dedicated"] = "gpu";
      n.taints.push_back({"dedicated", "gpu", "NoSchedule"});
    }
    n.conditions = {{"MemoryPressure", "False"},
                    {"DiskPressure", "False"},
                    {"PIDPressure", "False"},
                    {"Ready", "True"}};
    return n;  // capacity and allocatable are filled once the pods are resolved
  }

  policy::Pod basePod(const std::string& ns, const std::string& nodeName) {
    policy::Pod p;
    p.ns = ns;
    p.uid = rng_.uuid();
    p.nodeName = nodeName;
    p.phase = "Running";
    return p;
  }

  static policy::Container container(std::string name, std::int64_t cpu, std::int64_t memory,
                                     char qos, bool ephemeral = false) {
    policy::Container c;
    c.name = std::move(name);
    if (qos == 'E') return c;
    if (cpu > 0) c.requests["cpu"] = cpuQuantity(cpu);
    if (memory > 0) c.requests["memory"] = bytesQuantity(memory);
    if (ephemeral) c.requests["ephemeral-storage"] = bytesQuantity(2 * kGi);
    if (qos == 'G') {
      c.limits = c.requests;
    } else if (memory > 0) {
      c.limits["memory"] = bytesQuantity(memory * 2);
    }
    return c;
  }

  policy::Pod daemonPod(const char* ns, const char* app, const char* cls, std::int64_t cpu,
                        std::int64_t memory, const std::string& nodeName) {
    policy::Pod p = basePod(ns, nodeName);
    for (;;) {
      p.name = std::string(app) + "-" + rng_.fromAlphabet(kNameAlphabet, 5);
      if (claimName(p.ns, p.name)) break;
    }
    p.labels = {{"app.kubernetes.io/name", app},
                {"controller-revision-hash", rng_.fromAlphabet(kNameAlphabet, 10)},
                {"k8s-app", app},
                {"pod-template-generation", "4"}};
    p.priorityClassName = cls;
    p.startTime = (kClusterBirth + rng_.between(60, 3600)) * kMicros;
    p.containers.push_back(container(app, cpu, memory, 'B'));
    return p;
  }

  policy::Pod workloadPod(Workload& w, const std::string& nodeName) {
    policy::Pod p = basePod(w.ns, nodeName);
    for (;;) {
      if (w.kind == Kind::StatefulSet) {
        p.name = w.app + "-" + std::to_string(w.nextOrdinal++);
      } else if (w.kind == Kind::Job) {
        p.name = w.app + "-" + std::to_string(29'000'000 + rng_.between(0, 99'999)) + "-" +
                 rng_.fromAlphabet(kNameAlphabet, 5);
      } else {
        p.name = w.app + "-" + w.templateHash + "-" + rng_.fromAlphabet(kNameAlphabet, 5);
      }
      if (claimName(p.ns, p.name)) break;
    }
    p.labels = {{"app", w.app},
                {"app.kubernetes.io/name", w.app},
                {"app.kubernetes.io/part-of", w.ns},
                {"team", w.team},
                {"tier", w.tier}};
    if (w.kind == Kind::Deployment) p.labels["pod-template-hash"] = w.templateHash;
    if (w.kind == Kind::StatefulSet) p.labels["statefulset.kubernetes.io/pod-name"] = p.name;
    if (w.kind == Kind::Job) p.labels["job-name"] = p.name.substr(0, p.name.rfind('-'));
    p.annotations = {{"prometheus.io/scrape", "true"}};
    if (rng_.chance(0.3)) p.annotations["kubectl.kubernetes.io/restartedAt"] = "2026-12-01";
    p.priorityClassName = w.priorityClass;
    if (rng_.chance(0.03)) {
      // A hand-written object: spec.priority set, no class name.
      p.specPriority = std::int32_t(rng_.between(0, 50'000));
      p.priorityClassName.clear();
    }
    p.terminationGracePeriodSeconds = rng_.chance(0.2) ? 60 : 30;
    // Pods of one rollout start within two minutes, at whole seconds, so ties happen; some
    // were restarted later.
    const std::int64_t start = rng_.chance(0.1) ? w.rollout + rng_.between(0, 10 * 86400)
                                                : w.rollout + rng_.between(0, 120);
    p.startTime = start * kMicros;
    p.containers.push_back(container(w.app, w.cpu, w.memory, w.qos, w.ephemeral));
    if (w.qos != 'E' && rng_.chance(0.2)) {
      p.containers.push_back(container("log-shipper", 50, 64 * kMi, w.qos));
    }
    if (w.sidecar) {
      policy::Container sc = container("istio-proxy", 100, 128 * kMi, w.qos);
      sc.sidecar = true;
      p.initContainers.push_back(std::move(sc));
    }
    if (rng_.chance(0.15)) {
      // An init container whose request may exceed the main container's (the init peak).
      p.initContainers.push_back(container("migrate", 500, 1 * kGi, w.qos));
    }
    return p;
  }

  // Skewed towards the first workloads, so some have many replicas and most have few.
  Workload& someWorkload(Kind notKind) {
    for (;;) {
      const double u = rng_.unit();
      Workload& w = workloads_[std::size_t(double(workloads_.size()) * u * u)];
      if (w.kind != notKind) return w;
    }
  }
  Workload* someJob() {
    for (int tries = 0; tries < 64; ++tries) {
      Workload& w = workloads_[std::size_t(rng_.between(0, std::int64_t(workloads_.size()) - 1))];
      if (w.kind == Kind::Job) return &w;
    }
    return nullptr;
  }

  void podsForNode(std::vector<policy::Pod>& pods, const std::string& nodeName, int count) {
    int placed = 0;
    if (count >= 20) {
      pods.push_back(
          daemonPod("kube-system", "kube-proxy", "system-node-critical", 100, 0, nodeName));
      pods.push_back(daemonPod("kube-system", "aws-node", "system-node-critical", 25, 0, nodeName));
      pods.push_back(
          daemonPod("kube-system", "ebs-csi-node", "system-node-critical", 10, 40 * kMi, nodeName));
      pods.push_back(
          daemonPod("monitoring", "node-exporter", "platform-daemon", 100, 64 * kMi, nodeName));
      pods.push_back(
          daemonPod("logging", "fluent-bit", "platform-daemon", 100, 128 * kMi, nodeName));
      placed = 5;
    }
    int terminating = 0;
    const int maxTerminating = count >= 100 ? 2 : 1;
    for (; placed < count; ++placed) {
      Workload* job = rng_.chance(0.06) ? someJob() : nullptr;
      Workload& w = job ? *job : someWorkload(Kind::Job);
      policy::Pod p = workloadPod(w, nodeName);
      if (rng_.chance(0.01)) {
        p.phase = "Pending";  // bound, containers still being created: no start time yet
        p.startTime.reset();
      } else if (terminating < maxTerminating && w.cpu <= 500 && rng_.chance(0.02)) {
        // Terminating pods hold their resources but are never victims. Small ones, and
        // fillNodes leaves less slack than the incoming pod needs beyond what they free, so
        // their going does not make room (the verdict would be wait, not preempt).
        p.terminating = true;
        ++terminating;
      }
      pods.push_back(std::move(p));
    }
    // Finished Job pods: bound here but not counted (buildClusterIndex drops them).
    if (Workload* job = someJob()) {
      for (int i = 0; i < std::max(1, count / 40); ++i) {
        policy::Pod p = workloadPod(*job, nodeName);
        p.phase = rng_.chance(0.8) ? "Succeeded" : "Failed";
        pods.push_back(std::move(p));
      }
    }
    // Nominated pods, not bound: on every single-node case, on a few cluster nodes. One of
    // higher priority than the incoming pod (it counts against it), two lower (to clear).
    if (nominatedBudget_-- > 0 || rng_.chance(0.02)) {
      const char* classes[] = {"critical-apps", "standard", "business"};
      for (const char* cls : classes) {
        policy::Pod p = workloadPod(someWorkload(Kind::Job), "");
        p.priorityClassName = cls;
        p.specPriority.reset();
        p.phase = "Pending";
        p.startTime.reset();
        p.nominatedNodeName = nodeName;
        p.containers = {container("app", 100, 128 * kMi, 'B')};
        p.initContainers.clear();
        pods.push_back(std::move(p));
      }
    }
  }

  // Allocatable = what the counted pods request plus a little slack, less than the incoming
  // pod's request (so it does not fit) and leaving it short even once terminating pods go.
  void fillNodes(Case& c) {
    struct Use {
      std::int64_t cpu = 0, memory = 0, pods = 0, termCpu = 0, termMemory = 0;
    };
    std::map<std::string, Use> use;
    for (const auto& p : c.snapshot.pods) {
      if (p.phase == "Succeeded" || p.phase == "Failed") continue;
      const std::string* on = nullptr;
      if (!p.nodeName.empty()) {
        on = &p.nodeName;
      } else if (!p.nominatedNodeName.empty() && p.priority >= c.incoming.priority) {
        on = &p.nominatedNodeName;
      }
      if (on == nullptr) continue;
      Use& u = use[*on];
      auto get = [&](const char* r) {
        auto it = p.requests.find(r);
        return it == p.requests.end() ? std::int64_t(0) : it->second;
      };
      u.cpu += get("cpu");
      u.memory += get("memory");
      u.pods += 1;
      if (p.terminating) {
        u.termCpu += get("cpu");
        u.termMemory += get("memory");
      }
    }
    for (auto& n : c.snapshot.nodes) {
      const Use& u = use[n.name];
      const std::int64_t cpuRoom = std::max<std::int64_t>(0, params_.incomingCpu - u.termCpu - 1);
      const std::int64_t memRoom =
          std::max<std::int64_t>(0, params_.incomingMemory - u.termMemory - 1);
      const std::int64_t cpu = u.cpu + rng_.between(0, cpuRoom / 2);
      const std::int64_t memory = u.memory + rng_.between(0, memRoom / 2);
      n.allocatable = {
          {"cpu", cpuQuantity(cpu)},
          {"memory", bytesQuantity(memory)},
          {"ephemeral-storage", bytesQuantity(std::max<std::int64_t>(95 * kGi, u.pods * 4 * kGi))},
          {"pods", countQuantity(u.pods + 2)}};
      n.capacity = {{"cpu", cpuQuantity(cpu + 500)},
                    {"memory", bytesQuantity(memory + 2 * kGi)},
                    {"ephemeral-storage",
                     bytesQuantity(std::max<std::int64_t>(100 * kGi, u.pods * 4 * kGi + 5 * kGi))},
                    {"pods", countQuantity(u.pods + 2)}};
    }
  }

  Random rng_;
  GenParams params_;
  std::vector<Workload> workloads_;
  std::unordered_set<std::string> usedPodNames_;
  std::unordered_set<std::string> nodeNames_;
  int nominatedBudget_ = 1;  // the first node always gets nominated pods
  std::size_t namespaces_ = 0;
};

}  // namespace objects
}  // namespace nodewarden::bench
