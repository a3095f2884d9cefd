#include "policy/eviction.h"

#include <algorithm>
#include <array>
#include <limits>

namespace nodewarden::policy {
namespace {

bool onNode(const Pod& pod, std::string_view node) {
  return pod.nodeName == node && pod.phase != "Succeeded" && pod.phase != "Failed";
}

// Adds without overflowing: figures from a snapshot can be as large as int64 allows.
std::int64_t satAdd(std::int64_t a, std::int64_t b) {
  std::int64_t out = 0;
  if (__builtin_add_overflow(a, b, &out)) {
    return b > 0 ? std::numeric_limits<std::int64_t>::max()
                 : std::numeric_limits<std::int64_t>::min();
  }
  return out;
}

// The image filesystem is another device than the node filesystem. The kubelet asks cAdvisor;
// a summary says it by the figures: one filesystem is reported twice with the same size.
bool dedicatedImageFs(const NodeStats* s) {
  return s != nullptr && s->imageFs &&
         (s->imageFs->capacityBytes != s->nodeFs.capacityBytes ||
          s->imageFs->inodes != s->nodeFs.inodes);
}

// Which figures of a pod count toward a disk signal, as the kubelet's podDiskUsage measures
// them for the rank function buildSignalToRankFunc gives the signal: on one filesystem the
// containers' writable layers and logs and the pod's local volumes; with a dedicated image
// filesystem the logs and local volumes for nodefs.*, the writable layers for imagefs.*.
struct DiskMeasure {
  bool rootfs = true;
  bool logs = true;
  bool volumes = true;
  bool inodes = false;
};

DiskMeasure diskMeasure(Signal signal, bool dedicated) {
  DiskMeasure m;
  m.inodes = signal == Signal::NodeFsInodesFree || signal == Signal::ImageFsInodesFree;
  if (dedicated) {
    const bool image = signal == Signal::ImageFsAvailable || signal == Signal::ImageFsInodesFree;
    m.rootfs = image;
    m.logs = !image;
    m.volumes = !image;
  }
  return m;
}

// The summary has the pod's per-container or per-volume disk figures.
bool hasDiskDetail(const PodStats& stats) {
  if (!stats.volumes.empty()) return true;
  return std::any_of(stats.containers.begin(), stats.containers.end(), [](const ContainerStats& c) {
    return c.rootfsUsedBytes || c.logsUsedBytes || c.rootfsInodesUsed || c.logsInodesUsed;
  });
}

bool hasDiskUsage(const PodStats& stats) {
  return hasDiskDetail(stats) || stats.ephemeralStorageUsedBytes ||
         stats.ephemeralStorageInodesUsed;
}

// A pod's usage of a disk signal's filesystem (bytes or inodes). A summary without the
// per-container and per-volume figures (a snapshot written by hand) counts the pod's own
// ephemeral-storage total.
std::int64_t diskUsage(const Pod& pod, const PodStats& stats, DiskMeasure m) {
  if (!hasDiskDetail(stats)) {
    const auto& total =
        m.inodes ? stats.ephemeralStorageInodesUsed : stats.ephemeralStorageUsedBytes;
    return total ? std::int64_t(*total) : 0;
  }
  std::int64_t sum = 0;
  auto add = [&](const std::optional<std::uint64_t>& v) {
    if (v) sum = satAdd(sum, std::int64_t(*v));
  };
  for (const auto& c : stats.containers) {
    if (m.rootfs) add(m.inodes ? c.rootfsInodesUsed : c.rootfsUsedBytes);
    if (m.logs) add(m.inodes ? c.logsInodesUsed : c.logsUsedBytes);
  }
  if (m.volumes) {
    for (const auto& name : pod.localVolumes) {
      auto v = std::find_if(stats.volumes.begin(), stats.volumes.end(),
                            [&](const VolumeStats& vs) { return vs.name == name; });
      if (v != stats.volumes.end()) add(m.inodes ? v->inodesUsed : v->usedBytes);
    }
  }
  return sum;
}

// What a pod uses of the resource a signal starves, as the kubelet measures it for that
// signal: the working set, the process count, or its usage of the signal's filesystem. This
// is also what evicting the pod gives back.
std::int64_t usageFor(Signal signal, const Pod& pod, const PodStats& stats, bool dedicated) {
  const std::string_view resource = starvedResource(signal);
  if (resource == "memory") {
    return stats.memoryWorkingSetBytes ? std::int64_t(*stats.memoryWorkingSetBytes) : 0;
  }
  if (resource == "pids") return stats.processCount ? std::int64_t(*stats.processCount) : 0;
  return diskUsage(pod, stats, diskMeasure(signal, dedicated));
}

// Three-way comparisons; negative puts `a` first (evicted earlier).
template <typename T>
int cmpAsc(T a, T b) {
  return a < b ? -1 : (a > b ? 1 : 0);
}
// The kubelet's cmpBool: true before false.
int trueFirst(bool a, bool b) {
  return a == b ? 0 : (a ? -1 : 1);
}

// What a ranking sorts: small records, so the sort moves 40 bytes rather than a RankedPod.
struct SortRecord {
  std::int64_t usage;
  std::int64_t request;
  std::int64_t exceedRequest;  // what "usage exceeds its request" compares with
  std::int32_t priority;
  std::uint32_t keyOrder;  // the pod key's position among the view's pods
  std::uint32_t index;     // into the view
  bool hasUsage;
  bool evictable;
};

// usage/request, larger first; a zero request is infinitely over.
int ratioDesc(const SortRecord& a, const SortRecord& b) {
  bool aInf = a.request == 0, bInf = b.request == 0;
  if (aInf || bInf) return aInf == bInf ? 0 : (aInf ? -1 : 1);
  Int128 lhs = Int128(a.usage) * b.request;
  Int128 rhs = Int128(b.usage) * a.request;
  return lhs > rhs ? -1 : (lhs < rhs ? 1 : 0);
}

enum class Style { PriorityRatio, KubeletExceeds, PriorityCount };

// The order of one ranking; ties end on the pod key, so the order is total.
bool rankedBefore(const SortRecord& a, const SortRecord& b, Style style) {
  int c = 0;
  switch (style) {
    case Style::PriorityRatio:
      c = cmpAsc(a.priority, b.priority);
      if (c == 0) c = trueFirst(!a.hasUsage, !b.hasUsage);
      if (c == 0 && a.hasUsage) c = ratioDesc(a, b);
      if (c == 0) c = -cmpAsc(a.usage, b.usage);
      break;
    case Style::KubeletExceeds:
      // exceedRequests, priority, usage - request (rankMemoryPressure / rankDiskPressure).
      if (!a.hasUsage || !b.hasUsage) {
        c = trueFirst(!a.hasUsage, !b.hasUsage);
      } else {
        c = trueFirst(a.usage > a.exceedRequest, b.usage > b.exceedRequest);
      }
      if (c == 0) c = cmpAsc(a.priority, b.priority);
      if (c == 0) c = trueFirst(!a.hasUsage, !b.hasUsage);
      if (c == 0) c = -cmpAsc(a.usage - a.request, b.usage - b.request);
      break;
    case Style::PriorityCount:
      // rankPIDPressure: priority, then the larger count; no stats first.
      c = cmpAsc(a.priority, b.priority);
      if (c == 0) c = trueFirst(!a.hasUsage, !b.hasUsage);
      if (c == 0) c = -cmpAsc(a.usage, b.usage);
      break;
  }
  if (c != 0) return c < 0;
  return a.keyOrder < b.keyOrder;
}

std::string notEvictableReason(const Pod& pod, const Policy& policy) {
  if (pod.critical) return "critical pod";
  if (pod.priority >= policy.neverEvictPriority) {
    return "priority " + std::to_string(pod.priority) + " >= neverEvictPriority " +
           std::to_string(policy.neverEvictPriority);
  }
  return {};
}

// Eviction counts the allocated requests, the pod level alone where it is set, overhead
// only on a non-zero value (docs/reference.md §3; the kubelet's GetResourceRequestQuantity).
std::int64_t requestOf(const Pod& pod, const std::string& resource) {
  // A walk over a pod's few resources, lengths compared first: a ranking looks up every pod's
  // request every cycle, and a tree search compared the strings' bytes at every node.
  for (const auto& [name, amount] : pod.rankingRequests) {
    if (name == resource) return amount;
  }
  return 0;
}

// The ranking's whole order: evictable pods first, then rankedBefore (what sorting by
// rankedBefore and then moving the pods that may not be evicted last gives: the order is total).
bool rankedBeforeEvictableFirst(const SortRecord& a, const SortRecord& b, Style style) {
  if (a.evictable != b.evictable) return a.evictable;
  return rankedBefore(a, b, style);
}

// Sorts `records`, nearly in order already, by insertion: a pass when nothing moved, a few
// shifts for the pods whose figures moved them. False (`records` a permutation still, not
// sorted) once more shifts than `budget` would be needed: a sort is then cheaper.
bool repairOrder(std::vector<SortRecord>& records, Style style, std::size_t budget) {
  std::size_t shifts = 0;
  for (std::size_t i = 1; i < records.size(); ++i) {
    if (!rankedBeforeEvictableFirst(records[i], records[i - 1], style)) continue;
    const SortRecord moving = records[i];
    std::size_t j = i;
    while (j > 0 && rankedBeforeEvictableFirst(moving, records[j - 1], style)) {
      records[j] = records[j - 1];
      --j;
      if (++shifts > budget) {
        records[j] = moving;
        return false;
      }
    }
    records[j] = moving;
  }
  return true;
}

// Ranks the view's pods. A pod in the summary has usage data (the figure it lacks counts 0,
// as the kubelet's memoryUsage, processUsage and podDiskUsage count it); a pod absent from the
// summary has none. `requestResource` names the request subtracted from the usage (none:
// 0); the "exceeds its request" test compares with it too unless `exceedsZero` (inodes,
// which no pod requests: the kubelet's exceedDiskRequests compares with 0).
//
// `reuse`: an earlier ranking of the same resource (taken: its entries are written over).
// When it ranks exactly the view's pods, the records are made in its order and put in order
// by insertion — a pass when no pod moved, a few shifts for the pods whose figures moved them
// — instead of sorted. The result is the same either way, the order being total.
template <typename Usage>
Ranking buildRanking(const NodeView& view, const Policy& policy, std::string resource,
                     const std::string& requestResource, bool exceedsZero, Style style,
                     Usage usageOf, Ranking* reuse = nullptr) {
  auto recordOf = [&](std::size_t i) {
    const Pod& pod = *view.pods[i];
    SortRecord r{};
    r.priority = pod.priority;
    r.keyOrder = view.keyOrder[i];
    r.index = std::uint32_t(i);
    r.evictable = !pod.critical && pod.priority < policy.neverEvictPriority;
    if (const PodStats* stats = view.podStats[i]) {
      r.hasUsage = true;
      r.usage = usageOf(pod, *stats);
    }
    if (!requestResource.empty()) r.request = requestOf(pod, requestResource);
    r.exceedRequest = exceedsZero ? 0 : r.request;
    return r;
  };
  std::vector<SortRecord> records;
  records.reserve(view.pods.size());
  // The earlier ranking's pods found in the view by their key positions (a linear pass): each
  // once, every pod of the view that is ranked among them.
  auto inEarlierOrder = [&]() {
    const std::size_t n = view.pods.size();
    if (reuse == nullptr || reuse->pods.empty() || reuse->pods.size() > n) return false;
    std::uint32_t maxOrder = 0;
    std::size_t ranked = 0;
    for (std::size_t i = 0; i < n; ++i) {
      maxOrder = std::max(maxOrder, view.keyOrder[i]);
      if (!view.pods[i]->terminating) ++ranked;
    }
    // A snapshot's key positions when the view is one node's among many: too sparse to index.
    if (ranked != reuse->pods.size() || std::size_t(maxOrder) > 4 * n + 1024) return false;
    constexpr std::uint32_t kNone = std::numeric_limits<std::uint32_t>::max();
    std::vector<std::uint32_t> byKey(std::size_t(maxOrder) + 1, kNone);
    for (std::size_t i = 0; i < n; ++i) byKey[view.keyOrder[i]] = std::uint32_t(i);
    for (const RankedPod& entry : reuse->pods) {
      const std::uint32_t i = entry.keyOrder <= maxOrder ? byKey[entry.keyOrder] : kNone;
      if (i == kNone || view.pods[i] != entry.pod || entry.pod->terminating) {
        records.clear();
        return false;
      }
      byKey[entry.keyOrder] = kNone;  // each pod once
      records.push_back(recordOf(i));
    }
    return true;
  };
  const bool earlierOrder = inEarlierOrder();
  if (!earlierOrder) {
    for (std::size_t i = 0; i < view.pods.size(); ++i) {
      if (view.pods[i]->terminating) continue;  // already on its way out
      records.push_back(recordOf(i));
    }
  }
  if (earlierOrder) {
    if (!repairOrder(records, style, 4 * records.size() + 64)) {
      std::sort(records.begin(), records.end(), [style](const SortRecord& a, const SortRecord& b) {
        return rankedBeforeEvictableFirst(a, b, style);
      });
    }
  } else {
    std::sort(records.begin(), records.end(), [style](const SortRecord& a, const SortRecord& b) {
      return rankedBefore(a, b, style);
    });
    // Pods that may not be evicted go last, keeping their order.
    std::stable_partition(records.begin(), records.end(),
                          [](const SortRecord& r) { return r.evictable; });
  }
  Ranking ranking;
  // The earlier entries' storage (their reasons' strings too) is written over.
  if (reuse != nullptr) ranking.pods = std::move(reuse->pods);
  ranking.resource = std::move(resource);
  ranking.pods.resize(records.size());
  for (std::size_t i = 0; i < records.size(); ++i) {
    const SortRecord& r = records[i];
    RankedPod& out = ranking.pods[i];
    out.pod = view.pods[r.index];
    out.stats = view.podStats[r.index];
    out.hasUsage = r.hasUsage;
    out.usage = r.usage;
    out.request = r.request;
    out.evictable = r.evictable;
    out.keyOrder = r.keyOrder;
    if (!r.evictable) {
      out.notEvictableReason = notEvictableReason(*out.pod, policy);
    } else {
      out.notEvictableReason.clear();
    }
  }
  return ranking;
}

std::string quantityText(std::int64_t value, QuantityFormat format) {
  return Quantity::fromValue(value, format).toString();
}

QuantityFormat formatFor(Signal s) {
  auto resource = starvedResource(s);
  return resource == "memory" || resource == "ephemeral-storage" ? QuantityFormat::BinarySI
                                                                 : QuantityFormat::DecimalSI;
}

const Container* findContainer(const Pod& pod, std::string_view name) {
  for (const auto& c : pod.containers) {
    if (c.name == name) return &c;
  }
  for (const auto& c : pod.initContainers) {
    if (c.name == name) return &c;
  }
  return nullptr;
}

// A sum of quantities as resource.Quantity.Add makes it: the first one added gives the format,
// and a later one replaces it while the sum is still zero.
struct QuantitySum {
  bool present = false;
  Int128 nanos = 0;
  QuantityFormat format = QuantityFormat::DecimalSI;
  void add(const Quantity& q) {
    if (!present || nanos == 0) format = q.format();
    present = true;
    nanos += q.nanoValue();
  }
  // maxResourceList: the larger one, as it is.
  void max(const QuantitySum& other) {
    if (other.present && (!present || other.nanos > nanos)) *this = other;
  }
};

// The memory request the API server writes for a pod whose spec.resources names a memory
// limit and no request (defaultPodLevelRequests in pkg/api/pod/util.go): the containers'
// aggregate (AggregateContainerRequests, each container's request defaulted from its limit)
// when one of them requests memory, else the limit itself; printed as the stored object's
// JSON gives it back (the canonical text of that value in that format, read again).
std::optional<Quantity> defaultedPodLevelMemoryRequest(const Pod& pod) {
  auto requestOf = [](const Container& c) -> const Quantity* {
    if (auto it = c.requests.find("memory"); it != c.requests.end()) return &it->second;
    if (auto it = c.limits.find("memory"); it != c.limits.end()) return &it->second;
    return nullptr;
  };
  QuantitySum total, sidecars, initPeak;
  for (const auto& c : pod.containers) {
    if (const Quantity* q = requestOf(c)) total.add(*q);
  }
  for (const auto& c : pod.initContainers) {
    const Quantity* q = requestOf(c);
    QuantitySum candidate;
    if (c.sidecar) {
      if (q != nullptr) {
        total.add(*q);
        sidecars.add(*q);
      }
      candidate = sidecars;
    } else {
      if (q != nullptr) candidate.add(*q);
      if (sidecars.present) {
        candidate.present = true;
        if (candidate.nanos == 0) candidate.format = sidecars.format;
        candidate.nanos += sidecars.nanos;
      }
    }
    initPeak.max(candidate);
  }
  total.max(initPeak);
  if (!total.present) {
    auto limit = pod.podLevelLimits.find("memory");
    if (limit == pod.podLevelLimits.end()) return std::nullopt;
    return limit->second;
  }
  const std::int64_t bytes = std::int64_t((total.nanos + 999'999'999) / 1'000'000'000);
  auto reread = Quantity::parse(Quantity::fromValue(bytes, total.format).toString());
  if (!reread.ok()) return std::nullopt;
  return reread.value();
}

// The pod-level memory request as the allocated pod states it, if it has one.
std::optional<Quantity> podLevelMemoryRequest(const Pod& pod) {
  if (!hasPodLevelResources(pod)) return std::nullopt;
  const ResourceList& requests =
      pod.podLevelAllocated ? *pod.podLevelAllocated : pod.podLevelRequests;
  if (auto it = requests.find("memory"); it != requests.end()) return it->second;
  if (pod.podLevelAllocated || pod.podLevelLimits.count("memory") == 0) return std::nullopt;
  // A limit alone (a snapshot written by hand): what the API server would have stored.
  return defaultedPodLevelMemoryRequest(pod);
}

}  // namespace

std::string evictionMessage(const SignalStatus& status, const Pod& pod, const PodStats* stats) {
  const std::string resource(starvedResource(status.key.signal));
  std::string message = "The node was low on resource: " + resource + ". ";
  message += "Threshold quantity: " + status.thresholdText +
             ", available: " + quantityText(status.available, formatFor(status.key.signal)) + ". ";
  if (stats == nullptr || (resource != "memory" && resource != "ephemeral-storage")) {
    return message;
  }
  if (resource == "memory" && stats->memoryWorkingSetBytes) {
    // Written whatever the usage, as the kubelet does.
    if (auto request = podLevelMemoryRequest(pod)) {
      message +=
          "Pod " + pod.name + " was using " +
          quantityText(std::int64_t(*stats->memoryWorkingSetBytes), QuantityFormat::BinarySI) +
          ", request is " + request->toString() + ", has larger consumption of memory. ";
    }
  }
  for (const auto& cs : stats->containers) {
    const Container* spec = findContainer(pod, cs.name);
    if (spec == nullptr) continue;
    std::optional<std::int64_t> usage;
    if (resource == "memory") {
      if (cs.memoryWorkingSetBytes) usage = std::int64_t(*cs.memoryWorkingSetBytes);
    } else if (cs.rootfsUsedBytes && cs.logsUsedBytes) {
      // The kubelet writes a container's disk usage only when it has both figures.
      usage = satAdd(std::int64_t(*cs.rootfsUsedBytes), std::int64_t(*cs.logsUsedBytes));
    }
    if (!usage) continue;
    const ResourceList& requests = spec->allocated ? *spec->allocated : spec->requests;
    auto req = requests.find(resource);
    Quantity request = req == requests.end() ? Quantity() : req->second;
    Quantity used = Quantity::fromValue(*usage, QuantityFormat::BinarySI);
    if (used > request) {
      message += "Container " + cs.name + " was using " + used.toString() + ", request is " +
                 request.toString() + ", has larger consumption of " + resource + ". ";
    }
  }
  return message;
}

namespace {

int signalOrder(Signal s) {
  // byEvictionPriority: memory first, then the rest in a fixed order.
  switch (s) {
    case Signal::MemoryAvailable:
      return 0;
    case Signal::AllocatableMemoryAvailable:
      return 1;
    default:
      return 2 + int(s);
  }
}

}  // namespace

NodeView makeNodeView(const Snapshot& snapshot, std::string_view nodeName) {
  NodeView view;
  view.name = std::string(nodeName);
  view.node = snapshot.findNode(nodeName);
  const Summary* summary = nullptr;
  if (auto it = snapshot.stats.find(view.name); it != snapshot.stats.end()) {
    summary = &it->second;
    view.stats = &summary->node;
  }
  // Stats are matched by UID, else by namespace and name.
  struct KeyHash {
    std::size_t operator()(const std::pair<std::string_view, std::string_view>& k) const {
      return std::hash<std::string_view>()(k.first) * 31 + std::hash<std::string_view>()(k.second);
    }
  };
  std::unordered_map<std::string_view, const PodStats*> byUid;
  std::unordered_map<std::pair<std::string_view, std::string_view>, const PodStats*, KeyHash>
      byName;
  if (summary != nullptr) {
    byUid.reserve(summary->pods.size());
    byName.reserve(summary->pods.size());
    for (const auto& ps : summary->pods) {
      if (!ps.uid.empty()) byUid.emplace(ps.uid, &ps);
      byName.emplace(std::make_pair(std::string_view(ps.ns), std::string_view(ps.name)), &ps);
    }
  }
  for (const auto& pod : snapshot.pods) {
    if (!onNode(pod, nodeName)) continue;
    const PodStats* stats = nullptr;
    if (!pod.uid.empty()) {
      if (auto it = byUid.find(pod.uid); it != byUid.end()) stats = it->second;
    }
    if (stats == nullptr && summary != nullptr) {
      auto it = byName.find({std::string_view(pod.ns), std::string_view(pod.name)});
      // A UID mismatch means another pod of the same name: not this one's stats.
      if (it != byName.end() &&
          (pod.uid.empty() || it->second->uid.empty() || it->second->uid == pod.uid)) {
        stats = it->second;
      }
    }
    view.pods.push_back(&pod);
    view.podStats.push_back(stats);
  }
  assignKeyOrder(view);
  return view;
}

void assignKeyOrder(NodeView& view) {
  // resolvePods gave every pod of a snapshot a distinct position by key; use it when the
  // view's pods all have distinct ones, else order the view's own keys.
  const std::size_t n = view.pods.size();
  view.keyOrder.resize(n);
  std::uint32_t maxOrder = 0;
  for (std::size_t i = 0; i < n; ++i) {
    view.keyOrder[i] = view.pods[i]->keyOrder;
    maxOrder = std::max(maxOrder, view.keyOrder[i]);
  }
  std::vector<bool> seen(std::size_t(maxOrder) + 1, false);
  bool distinct = true;
  for (std::uint32_t order : view.keyOrder) {
    if (seen[order]) {
      distinct = false;
      break;
    }
    seen[order] = true;
  }
  if (distinct) return;
  std::vector<std::uint32_t> byKey(n);
  for (std::size_t i = 0; i < n; ++i) byKey[i] = std::uint32_t(i);
  std::stable_sort(byKey.begin(), byKey.end(), [&](std::uint32_t a, std::uint32_t b) {
    return view.pods[a]->key < view.pods[b]->key;
  });
  for (std::size_t rank = 0; rank < n; ++rank) view.keyOrder[byKey[rank]] = std::uint32_t(rank);
}

std::vector<Observation> observeSignals(const NodeView& view) {
  std::vector<Observation> out;
  const NodeStats* s = view.stats;
  if (s == nullptr) return out;
  auto i64 = [](std::uint64_t v) { return std::int64_t(v); };
  if (s->memoryAvailableBytes && s->memoryWorkingSetBytes) {
    out.push_back({Signal::MemoryAvailable, i64(*s->memoryAvailableBytes),
                   satAdd(i64(*s->memoryAvailableBytes), i64(*s->memoryWorkingSetBytes))});
  } else if (s->memoryAvailableBytes) {
    std::int64_t capacity = i64(*s->memoryAvailableBytes);
    if (view.node != nullptr)
      capacity = std::max(capacity, amountOf(view.node->capacity, "memory"));
    out.push_back({Signal::MemoryAvailable, i64(*s->memoryAvailableBytes), capacity});
  }
  if (s->podsMemoryAvailableBytes && s->podsMemoryWorkingSetBytes) {
    out.push_back({Signal::AllocatableMemoryAvailable, i64(*s->podsMemoryAvailableBytes),
                   satAdd(i64(*s->podsMemoryAvailableBytes), i64(*s->podsMemoryWorkingSetBytes))});
  } else if (view.node != nullptr && view.node->allocatable.count("memory") != 0) {
    // No kubepods figures: the node's allocatable memory minus the pods' working sets.
    std::int64_t capacity = amountOf(view.node->allocatable, "memory");
    std::int64_t workingSet = 0;
    bool any = false;
    if (s->podsMemoryWorkingSetBytes) {
      workingSet = i64(*s->podsMemoryWorkingSetBytes);
      any = true;
    } else {
      for (const auto* ps : view.podStats) {
        if (ps != nullptr && ps->memoryWorkingSetBytes) {
          workingSet = satAdd(workingSet, i64(*ps->memoryWorkingSetBytes));
          any = true;
        }
      }
    }
    if (any) out.push_back({Signal::AllocatableMemoryAvailable, capacity - workingSet, capacity});
  }
  auto fs = [&](const FsStats& f, Signal bytes, Signal inodes) {
    if (f.availableBytes && f.capacityBytes) {
      out.push_back({bytes, i64(*f.availableBytes), i64(*f.capacityBytes)});
    }
    if (f.inodesFree && f.inodes) out.push_back({inodes, i64(*f.inodesFree), i64(*f.inodes)});
  };
  fs(s->nodeFs, Signal::NodeFsAvailable, Signal::NodeFsInodesFree);
  if (s->imageFs) fs(*s->imageFs, Signal::ImageFsAvailable, Signal::ImageFsInodesFree);
  if (s->maxPid && s->curProc) {
    out.push_back({Signal::PidAvailable, i64(*s->maxPid) - i64(*s->curProc), i64(*s->maxPid)});
  }
  return out;
}

EvictionState assumeGraceElapsed(const Policy& policy, SteadyTime now) {
  EvictionState state;
  for (const auto& t : policy.thresholds) {
    state.firstObservedAt[ThresholdKey{t.signal, t.hard()}] = now - t.gracePeriod;
  }
  return state;
}

namespace {

Style memoryStyle(const Policy& policy) {
  return policy.ranking == RankingMode::Kubelet ? Style::KubeletExceeds : Style::PriorityRatio;
}

// What the memory ranking counts of a pod: its working set, and its swap when the policy says.
std::int64_t memoryRankingUsage(const PodStats& s, bool withSwap) {
  std::int64_t usage = s.memoryWorkingSetBytes ? std::int64_t(*s.memoryWorkingSetBytes) : 0;
  if (withSwap && s.swapUsageBytes) usage += std::int64_t(*s.swapUsageBytes);
  return usage;
}

// The record a memory ranking sorted its entry by (the request is also what "exceeds its
// request" compares with: buildRanking's exceedsZero is false for memory).
SortRecord memoryRecord(const RankedPod& r) {
  SortRecord record{};
  record.usage = r.usage;
  record.request = r.request;
  record.exceedRequest = r.request;
  record.priority = r.pod->priority;
  record.keyOrder = r.keyOrder;
  record.hasUsage = r.hasUsage;
  record.evictable = r.evictable;
  return record;
}

}  // namespace

Ranking rankMemoryPressure(const NodeView& view, const Policy& policy, Ranking* reuse) {
  const bool withSwap = policy.memoryRankingCountsSwap;
  return buildRanking(
      view, policy, "memory", "memory", false, memoryStyle(policy),
      [withSwap](const Pod&, const PodStats& s) -> std::int64_t {
        return memoryRankingUsage(s, withSwap);
      },
      reuse);
}

bool memoryRankedBefore(const RankedPod& a, const RankedPod& b, const Policy& policy) {
  // buildRanking sorts by rankedBefore, then moves the pods that may not be evicted last
  // keeping their order: the same as ordering by evictable first, then rankedBefore.
  if (a.evictable != b.evictable) return a.evictable;
  return rankedBefore(memoryRecord(a), memoryRecord(b), memoryStyle(policy));
}

bool rerankMemoryPressure(Ranking& ranking, const Pod& pod, const PodStats* stats,
                          const Policy& policy) {
  auto& pods = ranking.pods;
  auto at =
      std::find_if(pods.begin(), pods.end(), [&](const RankedPod& r) { return r.pod == &pod; });
  if (at == pods.end()) return false;
  // What buildRanking records of a pod's figures; its request and evictability stay.
  at->stats = stats;
  at->hasUsage = stats != nullptr;
  at->usage = stats != nullptr ? memoryRankingUsage(*stats, policy.memoryRankingCountsSwap) : 0;
  auto before = [&](const RankedPod& a, const RankedPod& b) {
    return memoryRankedBefore(a, b, policy);
  };
  // The others are still in order: the entry moves forward past those it now ranks before,
  // or back past those that now rank before it.
  if (at != pods.begin() && before(*at, *(at - 1))) {
    auto to = std::upper_bound(pods.begin(), at, *at, before);
    std::rotate(to, at, at + 1);
  } else if (at + 1 != pods.end() && before(*(at + 1), *at)) {
    auto to = std::lower_bound(at + 1, pods.end(), *at, before);
    std::rotate(at, at + 1, to);
  }
  return true;
}

Ranking rankPidPressure(const NodeView& view, const Policy& policy) {
  return buildRanking(view, policy, "pids", "", false, Style::PriorityCount,
                      [](const Pod&, const PodStats& s) -> std::int64_t {
                        return s.processCount ? std::int64_t(*s.processCount) : 0;
                      });
}

Ranking rankDiskPressure(const NodeView& view, const Policy& policy, Signal signal) {
  const bool kubelet = policy.ranking == RankingMode::Kubelet;
  const DiskMeasure m = diskMeasure(signal, dedicatedImageFs(view.stats));
  auto usage = [m](const Pod& pod, const PodStats& s) { return diskUsage(pod, s, m); };
  if (m.inodes) {
    // No pod requests inodes: the kubelet's exceedDiskRequests compares the inodes used with
    // 0, and its disk comparator subtracts the ephemeral-storage request (in bytes) from them.
    return buildRanking(view, policy, "inodes", kubelet ? "ephemeral-storage" : "", true,
                        kubelet ? Style::KubeletExceeds : Style::PriorityCount, usage);
  }
  return buildRanking(view, policy, "ephemeral-storage", "ephemeral-storage", false,
                      kubelet ? Style::KubeletExceeds : Style::PriorityRatio, usage);
}

namespace {

// Step 1: each threshold against its signal's observation — met now, or still being
// reclaimed (met until threshold + minimum reclaim); actionable once met for its grace
// period. Records in `next` when each met threshold was first seen met.
std::vector<SignalStatus> thresholdStatuses(const std::vector<Observation>& observations,
                                            const Policy& policy, const EvictionState& state,
                                            SteadyTime now, EvictionState& next) {
  std::vector<SignalStatus> statuses;
  for (const auto& t : policy.thresholds) {
    auto o = std::find_if(observations.begin(), observations.end(),
                          [&](const Observation& obs) { return obs.signal == t.signal; });
    if (o == observations.end()) continue;  // the kubelet skips signals it cannot observe
    SignalStatus st;
    st.key = ThresholdKey{t.signal, t.hard()};
    st.available = o->available;
    st.capacity = o->capacity;
    Quantity threshold = t.value.resolve(o->capacity);
    st.threshold = threshold.value();
    st.thresholdText = threshold.toString();
    st.minReclaim = t.minReclaim.isZero() ? 0 : t.minReclaim.resolve(o->capacity).value();
    bool reclaiming = state.met.count(st.key) != 0;
    st.met =
        st.available < st.threshold || (reclaiming && st.available < st.threshold + st.minReclaim);
    if (st.met) {
      auto first = state.firstObservedAt.find(st.key);
      SteadyTime since = first == state.firstObservedAt.end() ? now : first->second;
      next.firstObservedAt[st.key] = since;
      st.metFor = now - since;
      st.actionable = st.metFor >= t.gracePeriod;
      next.met.insert(st.key);
    }
    statuses.push_back(std::move(st));
  }
  return statuses;
}

// Step 2: node conditions — set at once when a threshold of theirs is met, held for the
// transition period after last being observed.
std::vector<std::string> nodeConditions(const std::vector<SignalStatus>& statuses,
                                        const Policy& policy, const EvictionState& state,
                                        SteadyTime now, EvictionState& next) {
  std::set<std::string> observedNow;
  for (const SignalStatus& st : statuses) {
    if (st.met) observedNow.insert(std::string(nodeConditionFor(st.key.signal)));
  }
  next.conditionLastObservedAt = state.conditionLastObservedAt;
  for (const auto& c : observedNow) next.conditionLastObservedAt[c] = now;
  std::erase_if(next.conditionLastObservedAt, [&](const auto& entry) {
    return now - entry.second >= policy.pressureTransitionPeriod;
  });
  std::vector<std::string> conditions;
  for (std::string_view c : {"MemoryPressure", "DiskPressure", "PIDPressure"}) {
    // Observed now, or within the transition period (which may be zero).
    if (observedNow.count(std::string(c)) != 0 ||
        next.conditionLastObservedAt.count(std::string(c)) != 0) {
      conditions.emplace_back(c);
    }
  }
  return conditions;
}

// Step 3: the rankings the decision shows — memory always; PIDs and ephemeral storage when a
// threshold needs them (or, with Rankings::All, whenever the node has that usage).
void rankPods(const NodeView& view, const Policy& policy, Rankings rankings,
              EvictionDecision& decision, Ranking* memoryReuse) {
  decision.memory = rankMemoryPressure(view, policy, memoryReuse);
  bool needPids = false, needDisk = false;
  // The disk ranking shown measures for the first disk (bytes) threshold that acts, else for
  // nodefs.available: with a dedicated image filesystem the two measure different figures.
  std::optional<Signal> diskSignal;
  for (const auto& st : decision.signals) {
    if (!st.actionable) continue;
    needPids |= starvedResource(st.key.signal) == "pids";
    if (starvedResource(st.key.signal) == "ephemeral-storage") {
      needDisk = true;
      if (!diskSignal || st.key.signal < *diskSignal) diskSignal = st.key.signal;
    }
  }
  const bool all = rankings == Rankings::All;
  // Whether any pod has that usage: looked at only where the ranking may be wanted (not in a
  // quiet cycle's Needed).
  bool anyProcesses = false, anyDisk = false;
  if (all || needPids || needDisk) {
    for (const auto* ps : view.podStats) {
      if (ps == nullptr) continue;
      anyProcesses |= ps->processCount.has_value();
      anyDisk |= hasDiskUsage(*ps);
    }
  }
  if (anyProcesses && (all || needPids)) decision.pids = rankPidPressure(view, policy);
  if (anyDisk && (all || needDisk)) {
    decision.ephemeralStorageSignal = diskSignal.value_or(Signal::NodeFsAvailable);
    decision.ephemeralStorage = rankDiskPressure(view, policy, decision.ephemeralStorageSignal);
  }
}

// Actionable thresholds, most urgent first: by signal (memory before disk before PIDs), a
// hard threshold before a soft one of the same signal.
std::vector<const SignalStatus*> actionableByUrgency(const std::vector<SignalStatus>& statuses) {
  std::vector<const SignalStatus*> actionable;
  for (const auto& st : statuses) {
    if (st.actionable) actionable.push_back(&st);
  }
  std::stable_sort(actionable.begin(), actionable.end(),
                   [](const SignalStatus* a, const SignalStatus* b) {
                     int oa = signalOrder(a->key.signal), ob = signalOrder(b->key.signal);
                     if (oa != ob) return oa < ob;
                     return a->key.hard && !b->key.hard;
                   });
  return actionable;
}

}  // namespace

// Step 4: the plan. For each actionable threshold, most urgent first, the shortest prefix of
// its ranking (skipping pods that may not be evicted or are already chosen) whose usage
// covers threshold + minimum reclaim - available, counting what earlier choices already free.
std::vector<Eviction> planEvictions(const NodeView& view, const Policy& policy,
                                    const EvictionDecision& decision) {
  std::vector<Eviction> plan;
  std::set<const Pod*> chosen;
  const bool dedicated = dedicatedImageFs(view.stats);
  // What the pods chosen so far give back, for each signal.
  std::map<Signal, std::int64_t> freed;
  // A ranking the decision does not show (no pod has that usage) is still built for the plan:
  // pods without usage data rank first and are evicted first, as the kubelet does.
  std::optional<Ranking> pidRanking;
  std::map<Signal, Ranking> diskRankings;
  auto rankingFor = [&](Signal s) -> const Ranking* {
    std::string_view r = starvedResource(s);
    if (r == "memory") return &decision.memory;
    if (r == "pids") {
      if (decision.pids) return &*decision.pids;
      if (!pidRanking) pidRanking = rankPidPressure(view, policy);
      return &*pidRanking;
    }
    if (decision.ephemeralStorage && decision.ephemeralStorageSignal == s) {
      return &*decision.ephemeralStorage;
    }
    auto it = diskRankings.find(s);
    if (it == diskRankings.end())
      it = diskRankings.emplace(s, rankDiskPressure(view, policy, s)).first;
    return &it->second;
  };
  auto usage = [&](Signal s, const RankedPod& r) -> std::int64_t {
    return r.stats == nullptr ? 0 : usageFor(s, *r.pod, *r.stats, dedicated);
  };
  for (const SignalStatus* st : actionableByUrgency(decision.signals)) {
    if (int(plan.size()) >= policy.maxPodsPerCycle) break;
    const Ranking* ranking = rankingFor(st->key.signal);
    if (ranking == nullptr) continue;
    // In 128 bits: every term may be as large as int64 allows.
    Int128 need = Int128(st->threshold) + st->minReclaim - st->available - freed[st->key.signal];
    for (const RankedPod& r : ranking->pods) {
      if (need <= 0 || int(plan.size()) >= policy.maxPodsPerCycle) break;
      if (!r.evictable || chosen.count(r.pod) != 0) continue;
      chosen.insert(r.pod);
      for (Signal s : kAllSignals) freed[s] = satAdd(freed[s], usage(s, r));
      need -= usage(st->key.signal, r);
      Eviction e;
      e.pod = r.pod;
      e.signal = st->key.signal;
      e.hard = st->key.hard;
      e.gracePeriodSeconds = st->key.hard ? 0
                                          : std::min(policy.maxPodGracePeriodSeconds,
                                                     r.pod->terminationGracePeriodSeconds);
      e.usage = r.usage;
      e.request = r.request;
      e.message = evictionMessage(*st, *r.pod, r.stats);
      plan.push_back(std::move(e));
    }
  }
  return plan;
}

// As the kubelet's eviction manager synchronizes: observe the signals, compare them with the
// thresholds, update the node conditions, rank the pods, and pick the victims.
const Ranking& shownRanking(const EvictionDecision& decision, Signal signal) {
  if (signal == Signal::PidAvailable && decision.pids) return *decision.pids;
  if (signal != Signal::PidAvailable && signal != Signal::MemoryAvailable &&
      signal != Signal::AllocatableMemoryAvailable && decision.ephemeralStorage) {
    return *decision.ephemeralStorage;
  }
  return decision.memory;
}

EvictionResult evaluateEviction(const NodeView& view, const Policy& policy,
                                const EvictionState& state, SteadyTime now, Rankings rankings,
                                Ranking* memoryReuse) {
  EvictionResult result;
  EvictionDecision& decision = result.decision;
  decision.node = view.name;
  const std::vector<Observation> observations = observeSignals(view);
  decision.signals = thresholdStatuses(observations, policy, state, now, result.next);
  decision.conditions = nodeConditions(decision.signals, policy, state, now, result.next);
  rankPods(view, policy, rankings, decision, memoryReuse);
  decision.evict = planEvictions(view, policy, decision);
  return result;
}

std::vector<std::string> addDerivedPressureConditions(Snapshot& snapshot, std::string_view nodeName,
                                                      const Policy& policy) {
  std::vector<std::string> derived;
  {
    const NodeView view = makeNodeView(snapshot, nodeName);
    derived = evaluateEviction(view, policy, EvictionState{}, SteadyTime{}, Rankings::Needed)
                  .decision.conditions;
  }
  std::vector<std::string> added;
  for (Node& node : snapshot.nodes) {
    if (node.name != nodeName) continue;
    for (const std::string& type : derived) {
      auto it = std::find_if(node.conditions.begin(), node.conditions.end(),
                             [&](const NodeCondition& c) { return c.type == type; });
      if (it != node.conditions.end() && it->status == "True") continue;
      if (it != node.conditions.end()) {
        it->status = "True";
      } else {
        node.conditions.push_back(NodeCondition{type, "True"});
      }
      added.push_back(type);
    }
  }
  return added;
}

OrderedJson evictionToJson(const EvictionDecision& decision) {
  OrderedJson out = OrderedJson::object();
  out["node"] = decision.node;
  OrderedJson signals = OrderedJson::array();
  for (const auto& st : decision.signals) {
    signals.push_back({{"signal", std::string(toString(st.key.signal))},
                       {"available", st.available},
                       {"capacity", st.capacity},
                       {"threshold", st.threshold},
                       {"kind", st.key.hard ? "hard" : "soft"},
                       {"met", st.met}});
  }
  out["signals"] = std::move(signals);
  out["conditions"] = decision.conditions;
  auto keys = [](const Ranking& r) {
    OrderedJson list = OrderedJson::array();
    for (const auto& p : r.pods) list.push_back(p.pod->key);
    return list;
  };
  OrderedJson ranking = OrderedJson::object();
  ranking["memory"] = keys(decision.memory);
  if (decision.pids) ranking["pids"] = keys(*decision.pids);
  if (decision.ephemeralStorage) ranking["ephemeral-storage"] = keys(*decision.ephemeralStorage);
  out["ranking"] = std::move(ranking);
  OrderedJson evict = OrderedJson::array();
  for (const auto& e : decision.evict) {
    evict.push_back({{"pod", e.pod->key},
                     {"signal", std::string(toString(e.signal))},
                     {"gracePeriodSeconds", e.gracePeriodSeconds},
                     {"message", e.message}});
  }
  out["evict"] = std::move(evict);
  // Beyond docs/reference.md §4, present only when there is something to say: pods in the middle of
  // an in-place resize (eviction counts their allocated requests) and swap per pod.
  OrderedJson resizing = OrderedJson::array();
  OrderedJson swap = OrderedJson::object();
  for (const auto& r : decision.memory.pods) {
    if (r.pod->midResize()) {
      OrderedJson item = OrderedJson::object();
      item["pod"] = r.pod->key;
      item["state"] = r.pod->resizeState;
      item["desired"] = r.pod->requests;
      item["allocated"] = r.pod->allocatedRequests;
      item["counted"] = "allocated";
      resizing.push_back(std::move(item));
    }
    if (r.stats != nullptr && r.stats->swapUsageBytes) swap[r.pod->key] = *r.stats->swapUsageBytes;
  }
  if (!resizing.empty()) out["resizing"] = std::move(resizing);
  if (!swap.empty()) out["swapUsageBytes"] = std::move(swap);
  return out;
}

}  // namespace nodewarden::policy
