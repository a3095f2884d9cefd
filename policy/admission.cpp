#include "policy/admission.h"

#include <algorithm>
#include <bit>
#include <cstring>
#include <limits>
#include <optional>

namespace nodewarden::policy {
namespace {

// Sums of requests are kept in 128 bits: pods may each request up to 2^63-1 (a quantity of
// exabytes), and a wrapped sum would read as room on a full node.
std::string toDecimal(Int128 value) {
  if (value == 0) return "0";
  // Most sums fit in 64 bits, where std::to_string gives the same digits without a 128-bit
  // division per digit.
  if (value >= std::numeric_limits<std::int64_t>::min() &&
      value <= std::numeric_limits<std::int64_t>::max()) {
    return std::to_string(std::int64_t(value));
  }
  const bool negative = value < 0;
  std::string digits;
  for (Int128 v = negative ? -value : value; v > 0; v /= 10) digits += char('0' + int(v % 10));
  if (negative) digits += '-';
  return {digits.rbegin(), digits.rend()};
}

// The resources an incoming pod competes for, in the order the scheduler's fitsRequest checks
// them: the pod count, cpu, memory, ephemeral-storage, then extended resources by name. Each
// has a bound, capacity − request: the pod fits while what the counted pods hold stays within
// every bound (fitsRequest's request > capacity − used, rearranged). The first four sit in
// fixed places, so counting a pod is four additions without a lookup.
constexpr int kCore = 4;
constexpr const char* kCoreNames[kCore] = {"pods", "cpu", "memory", "ephemeral-storage"};
// The same names as strings, for the maps' lookups (which would build each one per call).
const std::string& coreName(int i) {
  static const std::string names[kCore] = {kCoreNames[0], kCoreNames[1], kCoreNames[2],
                                           kCoreNames[3]};
  return names[i];
}
// The bound of a resource that is not checked (not requested, or the node states no pod
// limit): sums of 64-bit requests never reach it.
constexpr Int128 kUnbounded = Int128(1) << 120;

struct Fit {
  RequestConsumer consumer = RequestConsumer::Kubelet;  // how the other pods are counted
  Int128 bound[kCore] = {kUnbounded, kUnbounded, kUnbounded, kUnbounded};
  bool checked[kCore] = {};
  std::int64_t request[kCore] = {};   // the incoming pod's (desired)
  std::int64_t capacity[kCore] = {};  // the node's allocatable
  struct Extended {
    const std::string* name;  // a key of the incoming pod's requests
    std::int64_t request;
    std::int64_t capacity;
    Int128 bound;
  };
  std::vector<Extended> extended;
};

// What the counted pods hold of each resource of a Fit.
struct Held {
  Int128 core[kCore] = {};
  std::vector<Int128> extended;
};

// What `pod` asks for, as a Fit without a node yet (place() gives it one).
Fit demandOf(const Pod& pod, RequestConsumer consumer) {
  Fit f;
  f.consumer = consumer;
  for (int i = 1; i < kCore; ++i) {
    auto it = pod.requests.find(coreName(i));
    if (it != pod.requests.end() && it->second > 0) {
      f.checked[i] = true;
      f.request[i] = it->second;
    }
  }
  for (const auto& [name, amount] : pod.requests) {
    const std::string_view n = name;  // compared by length first, in place
    if (amount <= 0 || n == "cpu" || n == "memory" || n == "ephemeral-storage" || n == "pods") {
      continue;
    }
    f.extended.push_back({&name, amount, 0, 0});
  }
  return f;
}

// The demand `f` on `node`: the node's allocatable as capacities, and the bounds.
Fit place(Fit f, const Node& node) {
  auto pods = node.allocatable.find(coreName(0));
  f.checked[0] = pods != node.allocatable.end();
  f.request[0] = 1;
  f.capacity[0] = f.checked[0] ? pods->second.value() : 0;
  for (int i = 1; i < kCore; ++i) {
    if (f.checked[i]) f.capacity[i] = amountOf(node.allocatable, coreName(i));
  }
  for (int i = 0; i < kCore; ++i) {
    f.bound[i] = f.checked[i] ? Int128(f.capacity[i]) - f.request[i] : kUnbounded;
  }
  for (auto& e : f.extended) {
    e.capacity = amountOf(node.allocatable, *e.name);
    e.bound = Int128(e.capacity) - e.request;
  }
  return f;
}

Fit fitFor(const Pod& pod, const Node& node, RequestConsumer consumer) {
  return place(demandOf(pod, consumer), node);
}

Held noneHeld(const Fit& f) {
  Held h;
  h.extended.assign(f.extended.size(), 0);
  return h;
}

void countExtended(const Fit& f, const Pod& p, Held& h, int sign) {
  const ResourceAmounts& requests = p.requestsFor(f.consumer);
  for (std::size_t i = 0; i < f.extended.size(); ++i) {
    auto it = requests.find(*f.extended[i].name);
    if (it != requests.end()) h.extended[i] += Int128(sign) * it->second;
  }
}

// Counts (sign +1) or uncounts (−1) pod `p` holding `request` (its cpu, memory and
// ephemeral-storage as f.consumer counts them) and, when `extended`, its other requests.
[[gnu::always_inline]] inline void count(const Fit& f, const Pod& p, const std::int64_t* request,
                                         bool extended, Held& h, int sign) {
  if (sign > 0) {
    h.core[0] += 1;
    h.core[1] += request[0];
    h.core[2] += request[1];
    h.core[3] += request[2];
  } else {
    h.core[0] -= 1;
    h.core[1] -= request[0];
    h.core[2] -= request[1];
    h.core[3] -= request[2];
  }
  if (extended && !f.extended.empty()) countExtended(f, p, h, sign);
}

[[gnu::always_inline]] inline void hold(const Fit& f, const Pod& p, Held& h) {
  count(f, p, p.fitRequests[int(f.consumer)], p.extendedRequests, h, +1);
}

bool fits(const Fit& f, const Held& h) {
  bool ok = (h.core[0] <= f.bound[0]) & (h.core[1] <= f.bound[1]) & (h.core[2] <= f.bound[2]) &
            (h.core[3] <= f.bound[3]);
  for (std::size_t i = 0; ok && i < f.extended.size(); ++i) {
    ok = h.extended[i] <= f.extended[i].bound;
  }
  return ok;
}

// The first resource that does not fit, in fitsRequest's order (0-3 the core places, then
// kCore + i for extended[i]), or -1.
int firstMisfit(const Fit& f, const Held& h) {
  for (int i = 0; i < kCore; ++i) {
    if (f.checked[i] && h.core[i] > f.bound[i]) return i;
  }
  for (std::size_t i = 0; i < f.extended.size(); ++i) {
    if (h.extended[i] > f.extended[i].bound) return kCore + int(i);
  }
  return -1;
}

std::string resourceName(const Fit& f, int i) {
  return i < kCore ? kCoreNames[i] : *f.extended[std::size_t(i - kCore)].name;
}

std::string insufficientMessage(const Fit& f, const Held& h, int i) {
  const bool core = i < kCore;
  const auto e = std::size_t(core ? 0 : i - kCore);
  // Appended in one buffer, with room for what admitPod adds after it.
  std::string out;
  out.reserve(160);
  out += "Node didn't have enough resource: ";
  out += core ? std::string_view(kCoreNames[i]) : std::string_view(*f.extended[e].name);
  out += ", requested: ";
  out += std::to_string(core ? f.request[i] : f.extended[e].request);
  out += ", used: ";
  out += toDecimal(core ? h.core[i] : h.extended[e]);
  out += ", capacity: ";
  out += std::to_string(core ? f.capacity[i] : f.extended[e].capacity);
  return out;
}

// The n bytes at a and b are equal: eight at a time in place (fewer than eight as two
// overlapping loads of four or two), as the texts compared here (label keys and values, such
// as `app`, namespace names) are short and a memcmp call costs more. Kept out of line so that
// sameText(), which settles most calls before it, inlines.
[[gnu::noinline]] bool sameBytes(const char* a, const char* b, std::size_t n) {
  if (n < 8) {
    if (n >= 4) {  // the first and the last four bytes, overlapping
      std::uint32_t x, y, z, w;
      std::memcpy(&x, a, 4);
      std::memcpy(&y, b, 4);
      std::memcpy(&z, a + n - 4, 4);
      std::memcpy(&w, b + n - 4, 4);
      return ((x ^ y) | (z ^ w)) == 0;
    }
    if (n >= 2) {  // the first and the last two bytes, overlapping
      std::uint16_t x, y, z, w;
      std::memcpy(&x, a, 2);
      std::memcpy(&y, b, 2);
      std::memcpy(&z, a + n - 2, 2);
      std::memcpy(&w, b + n - 2, 2);
      return ((x ^ y) | (z ^ w)) == 0;
    }
    return n == 0 || a[0] == b[0];
  }
  std::uint64_t u, v;
  for (std::size_t i = 0; i + 8 < n; i += 8) {
    std::memcpy(&u, a + i, 8);
    std::memcpy(&v, b + i, 8);
    if (u != v) return false;
  }
  std::memcpy(&u, a + n - 8, 8);  // the last eight bytes, overlapping those before
  std::memcpy(&v, b + n - 8, 8);
  return u == v;
}

[[gnu::always_inline]] inline bool sameText(std::string_view a, std::string_view b) {
  // Called for every pod of a node, several times a decision: most UIDs differ in their
  // first character, which settles it without reading further.
  return a.size() == b.size() &&
         (a.empty() || (a[0] == b[0] && sameBytes(a.data(), b.data(), a.size())));
}

[[gnu::always_inline]] inline bool samePod(const Pod& a, const Pod& b) {
  if (&a == &b) return true;
  if (!a.uid.empty() && !b.uid.empty()) return sameText(a.uid, b.uid);
  return sameText(a.key, b.key);
}

// The scheduler's MoreImportantPod: higher priority, then the earlier start (a pod that has
// not started counts as newest); the key makes the order total.
bool moreImportant(const Pod* a, const Pod* b) {
  if (a->priority != b->priority) return a->priority > b->priority;
  const WallMicros kNever = std::numeric_limits<WallMicros>::max();
  WallMicros sa = a->startTime.value_or(kNever), sb = b->startTime.value_or(kNever);
  if (sa != sb) return sa < sb;
  return a->key < b->key;
}

bool selectorIsEmpty(const LabelSelector& s) {
  return s.matchLabels.empty() && s.matchExpressions.empty();
}

std::vector<const Pod*> sortedByKey(std::vector<const Pod*> pods) {
  std::sort(pods.begin(), pods.end(), [](const Pod* a, const Pod* b) { return a->key < b->key; });
  return pods;
}

std::vector<const Pod*> lowerPriorityNominated(const Pod& pod, const NodeInfo& node) {
  std::vector<const Pod*> out;
  for (const Pod* p : node.nominated) {
    if (!samePod(*p, pod) && p->priority < pod.priority) out.push_back(p);
  }
  return sortedByKey(std::move(out));
}

// The pressure conditions the kubelet's eviction manager admits against.
std::vector<std::string> pressureConditions(const Node& node) {
  std::vector<std::string> out;
  for (const auto& c : node.conditions) {
    if (c.status != "True") continue;
    if (c.type == "MemoryPressure" || c.type == "DiskPressure" || c.type == "PIDPressure") {
      out.push_back(c.type);
    }
  }
  return out;
}

bool selectorMatches(const Pod& pod, const Node& node) {
  for (const auto& [key, value] : pod.nodeSelector) {
    auto it = node.labels.find(key);
    if (it == node.labels.end() || it->second != value) return false;
  }
  return true;
}

// The first taint with one of `effects` that the pod does not tolerate.
const Taint* untoleratedTaint(const Pod& pod, const Node& node,
                              std::initializer_list<std::string_view> effects) {
  for (const auto& taint : node.taints) {
    if (std::find(effects.begin(), effects.end(), taint.effect) == effects.end()) continue;
    if (!tolerates(pod.tolerations, taint)) return &taint;
  }
  return nullptr;
}

// Nodes the scheduler would not even try for the pod: selector, taints, cordon.
bool filteredOut(const Pod& pod, const Node& node) {
  if (!selectorMatches(pod, node)) return true;
  if (untoleratedTaint(pod, node, {"NoSchedule", "NoExecute"}) != nullptr) return true;
  if (node.unschedulable) {
    Taint cordon{"node.kubernetes.io/unschedulable", "", "NoSchedule"};
    if (!tolerates(pod.tolerations, cordon)) return true;
  }
  return false;
}

template <typename Pods>
void appendKeys(OrderedJson& array, const Pods& pods) {
  for (const Pod* p : sortedByKey(pods)) array.push_back(p->key);
}

// SelectVictimsOnNode's first step: may the scheduler preempt `p` for `pod`, `p` not being
// the pod itself (samePod)?
bool isPotentialVictim(const Pod& p, const Pod& pod, const Policy& policy) {
  if (p.leaving() || p.priority >= pod.priority) return false;
  if (p.critical && !pod.critical) return false;
  return p.priority < policy.neverEvictPriority;
}

// A namespace name as PdbIndex's table keys it: its length and its first and last eight
// bytes, which are the whole name up to 16 bytes (names of one family, "team-a-2" and
// "team-a-3", differ at one end or the other).
struct NameKey {
  std::uint64_t head = 0, tail = 0;
  std::uint64_t hash() const {
    const std::uint64_t h = (head * 0x9e3779b97f4a7c15ULL ^ tail) * 0xc2b2ae3d27d4eb4fULL;
    return h ^ (h >> 29);
  }
};

[[gnu::always_inline]] inline NameKey nameKey(std::string_view name) {
  NameKey k;
  if (name.size() >= 8) {
    std::memcpy(&k.head, name.data(), 8);
    std::memcpy(&k.tail, name.data() + name.size() - 8, 8);
  } else if (name.size() >= 4) {  // two overlapping fixed-size loads, no memcpy call
    std::uint32_t first = 0, last = 0;
    std::memcpy(&first, name.data(), 4);
    std::memcpy(&last, name.data() + name.size() - 4, 4);
    k.head = std::uint64_t(first) << 32 | last;
  } else {
    for (char c : name) k.head = k.head << 8 | std::uint8_t(c);
  }
  k.tail += name.size();
  return k;
}

// The budget run of namespace `ns` in the index, or null.
const PdbIndex::Namespace* findNamespace(const PdbIndex& index, std::string_view ns,
                                         const NameKey& key) {
  if (index.namespaces.empty()) return nullptr;
  const std::uint64_t hash = key.hash();
  const std::size_t mask = index.namespaces.size() - 1;
  for (std::size_t i = hash & mask;; i = (i + 1) & mask) {
    const PdbIndex::Namespace& slot = index.namespaces[i];
    if (slot.count == 0) return nullptr;
    if (slot.head == key.head && slot.tail == key.tail && slot.name.size() == ns.size() &&
        (ns.size() <= 16 || sameText(slot.name, ns))) {
      return &slot;
    }
  }
}

static_assert(std::endian::native == std::endian::little, "textLess reads words");

// a < b as std::string's operator< orders them (bytes as unsigned), eight bytes at a time in
// place: names that share a long prefix (one rollout's pod keys, a cloud's node names) cost
// a memcmp call per comparison otherwise.
bool textLess(std::string_view a, std::string_view b) {
  const std::size_t n = std::min(a.size(), b.size());
  std::size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    std::uint64_t u, v;
    std::memcpy(&u, a.data() + i, 8);
    std::memcpy(&v, b.data() + i, 8);
    if (u != v) return __builtin_bswap64(u) < __builtin_bswap64(v);
  }
  for (; i < n; ++i) {
    if (a[i] != b[i]) return std::uint8_t(a[i]) < std::uint8_t(b[i]);
  }
  return a.size() < b.size();
}

// LabelSelector::matches' test of matchLabels, as one walk along the pod's labels (both maps
// are sorted by key) instead of a descent of the pod's tree per pair: a budget's pair is
// usually `app`, the first of a pod's labels.
bool matchLabelsHold(const std::map<std::string, std::string>& required,
                     const std::map<std::string, std::string>& labels) {
  auto it = labels.begin();
  const auto end = labels.end();
  for (const auto& [key, value] : required) {
    // Past the labels before `key` (the one found is most often the first looked at).
    while (it != end && !sameText(it->first, key)) {
      if (!textLess(it->first, key)) return false;  // after it: the pod has no such label
      ++it;
    }
    if (it == end || !sameText(it->second, value)) return false;
  }
  return true;
}

// A requirement's operator, told apart by its length and compared in place: the same answers
// as comparing with each name (a std::string == "literal" costs a strlen and a memcmp call).
enum class Op { In, NotIn, Exists, DoesNotExist, Other };
Op opOf(std::string_view op) {
  auto is = [&](std::string_view name) {
    return std::memcmp(op.data(), name.data(), name.size()) == 0;
  };
  switch (op.size()) {
    case 2:
      return is("In") ? Op::In : Op::Other;
    case 5:
      return is("NotIn") ? Op::NotIn : Op::Other;
    case 6:
      return is("Exists") ? Op::Exists : Op::Other;
    case 12:
      return is("DoesNotExist") ? Op::DoesNotExist : Op::Other;
    default:
      return Op::Other;
  }
}

// LabelSelector::matches' test of matchExpressions, its matchLabels being checked apart
// (matchLabelsHold): the same answer without checking matchLabels a second time.
bool expressionsHold(const std::vector<LabelSelectorRequirement>& requirements,
                     const std::map<std::string, std::string>& labels) {
  for (const auto& req : requirements) {
    // A walk along the pod's few labels costs less than the tree's string compares.
    auto it = labels.begin();
    while (it != labels.end() && !sameText(it->first, req.key)) ++it;
    const bool has = it != labels.end();
    const Op op = opOf(req.op);
    if (op == Op::Exists) {
      if (!has) return false;
      continue;
    }
    if (op == Op::DoesNotExist) {
      if (has) return false;
      continue;
    }
    const bool in = op == Op::In;
    if (!in && op != Op::NotIn) continue;  // matches() ignores any other operator
    bool inValues = false;
    for (std::size_t i = 0; has && !inValues && i < req.values.size(); ++i) {
      inValues = sameText(req.values[i], it->second);
    }
    if (in != inValues) return false;
  }
  return true;
}

// Whether budget `k` of the index counts `pod`: its selector matches the pod's labels (the
// blooms turn most pods away first) and the pod is not already being disrupted, as the API
// server recorded (such a pod is neither counted nor violating).
bool budgetCounts(const PdbIndex& index, std::size_t k, const Pod& pod) {
  const PdbIndex::Budget& budget = index.budgets[k];
  const std::uint64_t bloom = pod.labelsBloom;
  if (bloom != 0) {
    if ((budget.allOf & ~bloom) != 0) return false;
    for (std::uint32_t g = budget.firstGroup; g < budget.endGroup; ++g) {
      const auto [first, end] = index.groups[g];
      bool any = false;
      for (std::uint32_t i = first; i < end && !any; ++i) any = (index.anyOf[i] & ~bloom) == 0;
      if (!any) return false;
    }
  }
  const PodDisruptionBudget& pdb = (*index.pdbs)[budget.pdb];
  const LabelSelector& selector = *pdb.selector;
  // LabelSelector::matches, in two walks that each check their part once.
  if (!matchLabelsHold(selector.matchLabels, pod.labels)) return false;
  if (!expressionsHold(selector.matchExpressions, pod.labels)) return false;
  return pdb.disruptedPods.empty() || pdb.disruptedPods.count(pod.name) == 0;
}

// Requests in [−kSmallRequest, kSmallRequest) let the reprieve count in 64 bits (Rooms).
constexpr std::int64_t kSmallRequest = std::int64_t(1) << 40;

// A potential victim as the victim selection reads it, copied from the Pod once: what it
// holds (as the scheduler counts) and the budgets it counts against, so that sorting,
// charging budgets and reprieving never go back to the Pod.
struct Candidate {
  Candidate() {}  // add() sets every field: not zeroed first
  const Pod* pod;
  std::string_view key;
  std::int64_t request[3];                 // cpu, memory, ephemeral-storage
  std::uint32_t firstBudget, budgetCount;  // its entries of Workspace::budgets
  bool extended;
  bool violating;
};

// moreImportant()'s keys of a candidate: priority and start here, then the key.
// rankedBefore() answers every pair as moreImportant answers for the same pods.
struct Rank {
  Rank() {}                // add() sets every field: not zeroed first
  std::uint64_t start;     // the start (not started: the latest) as an unsigned order
  std::uint32_t priority;  // INT32_MAX − priority: smaller is more important
  std::uint32_t candidate;
};

// Buffers that one decision reuses on every node it selects victims on.
struct Workspace {
  std::vector<Candidate> candidates;
  std::vector<Rank> order;
  std::vector<std::uint32_t> victims;    // places in `order`
  std::vector<std::uint32_t> budgets;    // PdbIndex::budgets entries, per candidate
  std::vector<std::int64_t> left;        // per PdbIndex::budgets entry: disruptions still allowed
  std::vector<std::uint32_t> leftEpoch;  // `left` holds this selection's count when == epoch
  std::uint32_t epoch = 0;
  // The bits of every candidate's requests, each offset by kSmallRequest: below 2 kSmallRequest
  // (smallRequests()) when every request is in [−kSmallRequest, kSmallRequest).
  std::uint64_t requestBits = 0;
  bool smallRequests() const { return requestBits < 2 * std::uint64_t(kSmallRequest); }
  // The namespace of the last pod add() looked up, its key and its run (null: none).
  bool lastNsValid = false;
  NameKey lastNsKey;
  std::string_view lastNs;
  const PdbIndex::Namespace* lastNsRun = nullptr;

  void start(const PdbIndex& index, std::size_t pods) {
    candidates.clear();
    order.clear();
    budgets.clear();
    candidates.reserve(pods);
    order.reserve(pods);
    requestBits = 0;
    lastNsValid = false;
    if (leftEpoch.size() != index.budgets.size()) {
      left.assign(index.budgets.size(), 0);
      leftEpoch.assign(index.budgets.size(), 0);
      epoch = 0;
    }
    if (++epoch == 0) {  // wrapped: no entry may look current
      std::fill(leftEpoch.begin(), leftEpoch.end(), 0);
      epoch = 1;
    }
  }

  void add(const Pod& p, RequestConsumer consumer, const PdbIndex& index) {
    // Filled in place: a record built aside and copied in stalls on store forwarding.
    const WallMicros start = p.startTime.value_or(std::numeric_limits<WallMicros>::max());
    Rank& r = order.emplace_back();
    r.start = std::uint64_t(start) ^ (std::uint64_t(1) << 63);
    r.priority = std::uint32_t(std::int64_t(std::numeric_limits<std::int32_t>::max()) - p.priority);
    r.candidate = std::uint32_t(candidates.size());
    Candidate& c = candidates.emplace_back();
    c.pod = &p;
    c.key = p.key;
    const std::int64_t* fit = p.fitRequests[int(consumer)];
    c.request[0] = fit[0];
    c.request[1] = fit[1];
    c.request[2] = fit[2];
    // amount + kSmallRequest in [0, 2 kSmallRequest) as unsigned, a power of two: the union of
    // the offset amounts' bits stays below it exactly when each does.
    constexpr std::uint64_t kOffset = std::uint64_t(kSmallRequest);
    requestBits |= (std::uint64_t(c.request[0]) + kOffset) |
                   (std::uint64_t(c.request[1]) + kOffset) |
                   (std::uint64_t(c.request[2]) + kOffset);
    c.extended = p.extendedRequests;
    c.violating = false;
    c.firstBudget = std::uint32_t(budgets.size());
    if (!p.labels.empty()) {  // a pod without labels matches no budget
      // A node's pods come in runs of one namespace (the API lists them by namespace and
      // name): the run of the previous pod's namespace is kept and looked up again only when
      // the name differs (its key being the whole name up to 16 bytes, as in findNamespace).
      const NameKey key = nameKey(p.ns);
      if (!lastNsValid || key.head != lastNsKey.head || key.tail != lastNsKey.tail ||
          p.ns.size() != lastNs.size() || (p.ns.size() > 16 && !sameText(p.ns, lastNs))) {
        lastNsRun = findNamespace(index, p.ns, key);
        lastNsKey = key;
        lastNs = p.ns;
        lastNsValid = true;
      }
      if (const PdbIndex::Namespace* ns = lastNsRun) {
        // (The bounds in locals: a push_back could alias them, which would reload them.)
        for (std::uint32_t k = ns->first, end = ns->first + ns->count; k < end; ++k) {
          if (budgetCounts(index, k, p)) budgets.push_back(k);
        }
      }
    }
    c.budgetCount = std::uint32_t(budgets.size()) - c.firstBudget;
  }

  std::string_view keyOf(const Rank& r) const { return candidates[r.candidate].key; }
  bool rankedBefore(const Rank& a, const Rank& b) const {
    if (a.priority != b.priority) return a.priority < b.priority;
    if (a.start != b.start) return a.start < b.start;
    return keyOf(a) < keyOf(b);
  }
  void sort(std::vector<Rank>& ranks) const {
    std::sort(ranks.begin(), ranks.end(),
              [this](const Rank& a, const Rank& b) { return rankedBefore(a, b); });
  }

  // Puts `order` in moreImportant()'s order. When no two candidates are equivalent under it
  // (no key appears twice among equal priority and start), that order is unique, and it is
  // reached by sorting on priority and start, then each run of equal ones by key: strings
  // are compared only within such runs. Otherwise (returns false) the sequence is sorted
  // from where it started with the whole comparison, giving exactly std::sort's order with
  // moreImportant.
  bool sortByImportance() {
    if (packRanks()) {
      return sortByImportance([](const Rank& a, const Rank& b) { return a.start < b.start; });
    }
    // (priority, start) as one 128-bit number: compared without a branch, which the
    // sort's data-dependent comparisons would mispredict half the time.
    return sortByImportance([](const Rank& a, const Rank& b) {
      return (UInt128(a.priority) << 64 | a.start) < (UInt128(b.priority) << 64 | b.start);
    });
  }

  // When every candidate's (priority, start), offset by the smallest of each, fits in 64 bits
  // (the starts of a node's pods lie within years of each other; a pod not started counts as
  // one past the latest start), puts it in `start` as one number in the same order, every
  // priority then being 0: rankedBefore() answers as before, and the sort compares 64 bits.
  bool packRanks() {
    constexpr std::uint64_t kNotStarted =
        std::uint64_t(std::numeric_limits<WallMicros>::max()) ^ (std::uint64_t(1) << 63);
    std::uint64_t minStart = std::numeric_limits<std::uint64_t>::max(), maxStart = 0;
    std::uint32_t minPriority = std::numeric_limits<std::uint32_t>::max(), maxPriority = 0;
    for (const Rank& r : order) {
      if (r.start != kNotStarted) {
        minStart = std::min(minStart, r.start);
        maxStart = std::max(maxStart, r.start);
      }
      minPriority = std::min(minPriority, r.priority);
      maxPriority = std::max(maxPriority, r.priority);
    }
    if (minStart > maxStart) minStart = maxStart = 0;  // none started
    const std::uint64_t never = maxStart - minStart + 1;
    const int startBits = std::bit_width(never);
    const int priorityBits = std::bit_width(std::uint64_t(maxPriority - minPriority));
    if (startBits + priorityBits > 64) return false;
    for (Rank& r : order) {
      const std::uint64_t start = r.start == kNotStarted ? never : r.start - minStart;
      const std::uint64_t priority =
          priorityBits == 0 ? 0 : std::uint64_t(r.priority - minPriority) << startBits;
      r.start = priority | start;
      r.priority = 0;
    }
    return true;
  }

  // sortByImportance() with `before` ordering ranks by priority and start.
  template <typename Before>
  bool sortByImportance(Before before) {
    std::sort(order.begin(), order.end(), before);
    bool unique = true;
    const auto last = order.end();
    for (auto run = order.begin(); run != last && unique;) {
      // The ranks equal to *run (sorted: those that follow it until one ranks after it); a
      // plain loop, as most runs are one long.
      auto end = run + 1;
      while (end != last && !before(*run, *end)) ++end;
      if (end - run > 1) {
        std::sort(run, end,
                  [this](const Rank& a, const Rank& b) { return textLess(keyOf(a), keyOf(b)); });
        for (auto it = run + 1; it != end && unique; ++it) unique = keyOf(it[-1]) != keyOf(*it);
      }
      run = end;
    }
    if (unique) return true;
    std::sort(order.begin(), order.end(),
              [](const Rank& a, const Rank& b) { return a.candidate < b.candidate; });
    sort(order);
    return false;
  }

  // filterPodsWithPDBViolation over `order`: charges every budget each candidate counts
  // against, in order, and marks it violating when one of them goes below zero.
  void chargeBudgets(const PdbIndex& index) {
    // The buffers and the epoch in locals: the stores below could alias the members, which
    // would be reloaded on every step.
    const std::uint32_t current = epoch;
    const std::uint32_t* entries = budgets.data();
    std::int64_t* counts = left.data();
    std::uint32_t* epochs = leftEpoch.data();
    for (const Rank& r : order) {
      Candidate& c = candidates[r.candidate];
      bool violating = false;
      for (std::uint32_t i = c.firstBudget, end = c.firstBudget + c.budgetCount; i < end; ++i) {
        const std::uint32_t k = entries[i];
        if (epochs[k] != current) {
          epochs[k] = current;
          counts[k] = (*index.pdbs)[index.budgets[k].pdb].disruptionsAllowed;
        }
        violating |= --counts[k] < 0;
      }
      if (violating) c.violating = true;
    }
  }
};

// The workspace of the decisions made on this thread: its buffers keep their capacity from one
// decision to the next (start() clears them), so a decision allocates none of them again.
Workspace& threadWorkspace() {
  thread_local Workspace workspace;
  return workspace;
}

// The running sums of the reprieve: tryTake(c) adds candidate c back and answers whether
// the pod still fits, undoing the add when it does not. Rooms keeps, per core resource, the
// room left (bound − held) in 64 bits, which is exact while every value stays far inside
// that range (Rooms::exact() says when); AllSums is the general case.
struct Rooms {
  std::int64_t room[kCore];
  // With at most this many candidates, each asking within ±kSmallRequest, no sum of their
  // requests takes a room of at most ±2^62 out of 64 bits.
  static constexpr std::size_t kCandidateLimit = std::size_t(1) << 20;

  static std::optional<Rooms> exact(const Fit& f, const Held& held, const Workspace& w) {
    if (!f.extended.empty() || w.candidates.size() > kCandidateLimit || !w.smallRequests()) {
      return std::nullopt;
    }
    Rooms r;
    for (int i = 0; i < kCore; ++i) {
      const Int128 room = f.bound[i] - held.core[i];
      const Int128 limit = Int128(1) << 62;
      // An unchecked resource (kUnbounded) never runs out; any room this large cannot.
      r.room[i] = std::int64_t(room > limit ? limit : room < -limit ? -limit : room);
      if (room < -limit) return std::nullopt;
    }
    return r;
  }
  bool tryTake(const Candidate& c) {
    const std::int64_t pods = room[0] - 1, cpu = room[1] - c.request[0],
                       memory = room[2] - c.request[1], storage = room[3] - c.request[2];
    if ((pods | cpu | memory | storage) < 0) return false;
    room[0] = pods;
    room[1] = cpu;
    room[2] = memory;
    room[3] = storage;
    return true;
  }
};

struct AllSums {
  const Fit& f;
  Held& held;
  bool tryTake(const Candidate& c) {
    count(f, *c.pod, c.request, c.extended, held, +1);
    if (fits(f, held)) return true;
    count(f, *c.pod, c.request, c.extended, held, -1);
    return false;
  }
};

// SelectVictimsOnNode's reprieve: most important first, budget-violating pods before the
// others, each pod is offered back and stays if the pod still fits with it. Those that
// cannot stay are the victims (their places in w.order).
template <typename Sums>
void reprieve(Sums sums, Workspace& w, VictimSelection& result) {
  w.victims.clear();
  const auto candidates = std::uint32_t(w.order.size());
  for (const bool violating : {true, false}) {
    for (std::uint32_t at = 0; at < candidates; ++at) {
      const Candidate& c = w.candidates[w.order[at].candidate];
      if (c.violating != violating || sums.tryTake(c)) continue;
      w.victims.push_back(at);
      if (violating) ++result.numPDBViolations;
    }
  }
}

// A pass over a node's pods waits on each pod in turn when they are not in cache (the pods of
// a large cluster are not): the pass starts loading the fields it reads (Pod's block from ns
// to extendedRequests) kPodsAhead pods ahead, and the UID's characters, which samePod() reads,
// the key's and the first label's kUidsAhead pods ahead. (Written out in the loop: GCC drops a call
// to a function that only prefetches, as having no effect, before it would inline it.)
constexpr std::size_t kPodsAhead = 8;
constexpr std::size_t kUidsAhead = 4;
constexpr std::size_t kLine = 64;

// One pass over the pods bound to `node` for `pod`, whose fit there is `f`, as SelectVictimsOnNode
// makes it: with `potential`, the potential victims go to w (with the budgets each counts
// against), and what every other pod counted for `pod` holds (every pod bound there but the
// pod itself, and the pods nominated there with priority >= its own) is returned. Without,
// that is what all of them hold. `selfAbsent`: the caller has seen that no pod bound there is
// the pod itself (samePod), whose UID is then not read again.
Held survey(const Pod& pod, const NodeInfo& node, const Policy& policy, const Fit& f,
            bool potential, bool selfAbsent, const PdbIndex& pdbs, Workspace& w) {
  Held others = noneHeld(f);
  w.start(pdbs, node.pods.size());
  const Pod* self = nullptr;
  const std::size_t n = node.pods.size();
  for (std::size_t i = 0; i < n; ++i) {
    if (i + kPodsAhead < n) {
      const Pod& ahead = *node.pods[i + kPodsAhead];
      const char* line = reinterpret_cast<const char*>(&ahead.ns);
      const char* last = reinterpret_cast<const char*>(&ahead.extendedRequests);
      for (; line <= last; line += kLine) __builtin_prefetch(line);
    }
    if (i + kUidsAhead < n) {
      const Pod& ahead = *node.pods[i + kUidsAhead];
      if (!selfAbsent) __builtin_prefetch(ahead.uid.data());
      if (potential) {
        // What a potential victim's add() and the sort read next: the key's characters and
        // the first node of its labels (a budget's selector walks them).
        __builtin_prefetch(ahead.key.data());
        if (!ahead.labels.empty()) __builtin_prefetch(&*ahead.labels.begin());
      }
    }
    const Pod* p = node.pods[i];
    const bool isSelf = !selfAbsent && samePod(*p, pod);
    if (self == nullptr && isSelf) {
      self = p;
    } else if (potential && !isSelf && isPotentialVictim(*p, pod, policy)) {
      w.add(*p, f.consumer, pdbs);
    } else {
      hold(f, *p, others);
    }
  }
  for (const Pod* p : node.nominated) {
    if (p->priority >= pod.priority && !samePod(*p, pod)) hold(f, *p, others);
  }
  return others;
}

// What all the pods counted hold: `others` (from survey()) and every potential victim.
Held withCandidates(const Fit& f, Held others, const Workspace& w) {
  for (const Candidate& c : w.candidates) count(f, *c.pod, c.request, c.extended, others, +1);
  return others;
}

// SelectVictimsOnNode, from a survey with `potential` of the node (`others`, w).
VictimSelection selectVictims(const Fit& f, Held& others, const PdbIndex& pdbs, Workspace& w) {
  VictimSelection result;
  int misfit = firstMisfit(f, others);
  if (w.candidates.empty() || misfit >= 0) {
    if (misfit < 0) misfit = firstMisfit(f, withCandidates(f, others, w));
    result.failedResource = misfit >= 0 ? resourceName(f, misfit) : "";
    return result;
  }
  result.fits = true;
  const bool unique = w.sortByImportance();
  w.chargeBudgets(pdbs);
  if (const std::optional<Rooms> rooms = Rooms::exact(f, others, w)) {
    reprieve(*rooms, w, result);
  } else {
    reprieve(AllSums{f, others}, w, result);
  }
  // Most important first: with a unique order, by their places in it.
  if (unique) {
    std::sort(w.victims.begin(), w.victims.end());
  } else {
    std::sort(w.victims.begin(), w.victims.end(), [&](std::uint32_t a, std::uint32_t b) {
      return w.rankedBefore(w.order[a], w.order[b]);
    });
  }
  result.victims.reserve(w.victims.size());
  for (std::uint32_t at : w.victims) {
    result.victims.push_back(w.candidates[w.order[at].candidate].pod);
  }
  return result;
}

VictimSelection selectVictims(const Pod& pod, const NodeInfo& node, const PdbIndex& pdbs,
                              const Policy& policy, const Fit& f, bool selfAbsent, Workspace& w) {
  Held others = survey(pod, node, policy, f, true, selfAbsent, pdbs, w);
  return selectVictims(f, others, pdbs, w);
}

// The naive selection's steps, kept apart from the incremental ones above (which it checks):
// the potential victims, and the reprieve of SelectVictimsOnNode with `stays(p)` adding a
// pod back and answering whether the incoming pod still fits (undoing the add when not).
std::vector<const Pod*> potentialVictims(const Pod& pod, const NodeInfo& node,
                                         const Policy& policy) {
  std::vector<const Pod*> potential;
  for (const Pod* p : node.pods) {
    if (isPotentialVictim(*p, pod, policy) && !samePod(*p, pod)) potential.push_back(p);
  }
  return potential;
}

template <typename Stays>
void reprieveInOrder(std::vector<const Pod*> potential, const PdbIndex& pdbs, Stays stays,
                     VictimSelection& result) {
  std::sort(potential.begin(), potential.end(), moreImportant);
  std::vector<const Pod*> violating, nonViolating;
  filterPodsWithPdbViolation(potential, pdbs, violating, nonViolating);
  for (const Pod* p : violating) {
    if (stays(p)) continue;
    result.victims.push_back(p);
    ++result.numPDBViolations;
  }
  for (const Pod* p : nonViolating) {
    if (!stays(p)) result.victims.push_back(p);
  }
  std::sort(result.victims.begin(), result.victims.end(), moreImportant);
}

}  // namespace

const NodeInfo* ClusterIndex::find(std::string_view name) const {
  for (const auto& n : nodes) {
    if (n.node->name == name) return &n;
  }
  return nullptr;
}

ClusterIndex buildClusterIndex(const Snapshot& snapshot) {
  ClusterIndex index;
  index.nodes.reserve(snapshot.nodes.size());
  std::map<std::string_view, std::size_t> byName;
  for (const auto& node : snapshot.nodes) {
    byName.emplace(node.name, index.nodes.size());
    index.nodes.push_back(NodeInfo{&node, {}, {}});
  }
  for (const auto& pod : snapshot.pods) {
    if (pod.phase == "Succeeded" || pod.phase == "Failed") continue;
    if (!pod.nodeName.empty()) {
      if (auto it = byName.find(pod.nodeName); it != byName.end()) {
        index.nodes[it->second].pods.push_back(&pod);
      }
    } else if (!pod.nominatedNodeName.empty()) {
      if (auto it = byName.find(pod.nominatedNodeName); it != byName.end()) {
        index.nodes[it->second].nominated.push_back(&pod);
      }
    }
  }
  return index;
}

const char* verdictName(Verdict verdict) {
  switch (verdict) {
    case Verdict::Admit:
      return "admit";
    case Verdict::Reject:
      return "reject";
    case Verdict::Wait:
      return "wait";
    case Verdict::Preempt:
      return "preempt";
  }
  return "reject";
}

namespace {

// indexPdbs()'s working lists, kept by threadPdbIndex() from one decision to the next.
struct PdbScratch {
  std::vector<std::size_t> members;
  std::vector<std::pair<NameKey, std::size_t>> keyed;
};

// indexPdbs() into `index`, whose buffers keep their capacity (it is cleared first).
void fillPdbIndex(const std::vector<PodDisruptionBudget>& pdbs, PdbIndex& index,
                  PdbScratch& scratch) {
  index.pdbs = &pdbs;
  index.budgets.clear();
  index.groups.clear();
  index.anyOf.clear();
  index.namespaces.clear();
  // The budgets that can select anything, by namespace, each namespace's in their order.
  std::vector<std::size_t>& members = scratch.members;
  members.clear();
  for (std::size_t i = 0; i < pdbs.size(); ++i) {
    const auto& pdb = pdbs[i];
    if (pdb.selector && !selectorIsEmpty(*pdb.selector)) members.push_back(i);
  }
  // Grouped by namespace (the runs' own order does not matter: they are found by hash),
  // comparing the names' keys first and their text only when the keys are equal.
  std::vector<std::pair<NameKey, std::size_t>>& keyed = scratch.keyed;
  keyed.clear();
  for (const std::size_t i : members) keyed.emplace_back(nameKey(pdbs[i].ns), i);
  std::sort(keyed.begin(), keyed.end(), [&](const auto& a, const auto& b) {
    if (a.first.head != b.first.head) return a.first.head < b.first.head;
    if (a.first.tail != b.first.tail) return a.first.tail < b.first.tail;
    const int order = pdbs[a.second].ns.compare(pdbs[b.second].ns);
    return order != 0 ? order < 0 : a.second < b.second;
  });
  for (std::size_t m = 0; m < keyed.size(); ++m) members[m] = keyed[m].second;
  std::size_t runs = 0;
  for (std::size_t m = 0; m < members.size(); ++m) {
    if (m == 0 || pdbs[members[m]].ns != pdbs[members[m - 1]].ns) ++runs;
  }
  std::size_t slots = 1;
  while (slots < 2 * runs) slots *= 2;
  if (runs > 0) index.namespaces.resize(slots);
  index.budgets.reserve(members.size());
  for (std::size_t m = 0, end = 0; m < members.size(); m = end) {
    const std::string_view ns = pdbs[members[m]].ns;
    for (end = m + 1; end < members.size() && pdbs[members[end]].ns == ns; ++end) {
    }
    const NameKey key = nameKey(ns);
    const PdbIndex::Namespace run{key.head, key.tail, ns, std::uint32_t(index.budgets.size()),
                                  std::uint32_t(end - m)};
    std::size_t at = key.hash() & (slots - 1);
    while (index.namespaces[at].count != 0) at = (at + 1) & (slots - 1);
    index.namespaces[at] = run;
    for (std::size_t k = m; k < end; ++k) {
      const LabelSelector& selector = *pdbs[members[k]].selector;
      PdbIndex::Budget budget{members[k], selector.matchLabelsBloom,
                              std::uint32_t(index.groups.size()), 0};
      for (const auto& req : selector.matchExpressions) {
        if (opOf(req.op) != Op::In) continue;
        const auto first = std::uint32_t(index.anyOf.size());
        for (const auto& value : req.values) {
          index.anyOf.push_back(labelPairBloom(req.key, value));
        }
        index.groups.emplace_back(first, std::uint32_t(index.anyOf.size()));
      }
      budget.endGroup = std::uint32_t(index.groups.size());
      index.budgets.push_back(budget);
    }
  }
}

// indexPdbs(pdbs) for a decision made on this thread: the index and its working lists are
// the thread's, refilled on each call (no decision holds it past its return), so that a
// decision allocates none of them again.
const PdbIndex& threadPdbIndex(const std::vector<PodDisruptionBudget>& pdbs) {
  thread_local PdbIndex index;
  thread_local PdbScratch scratch;
  fillPdbIndex(pdbs, index, scratch);
  return index;
}

}  // namespace

PdbIndex indexPdbs(const std::vector<PodDisruptionBudget>& pdbs) {
  PdbIndex index;
  PdbScratch scratch;
  fillPdbIndex(pdbs, index, scratch);
  return index;
}

void filterPodsWithPdbViolation(const std::vector<const Pod*>& pods, const PdbIndex& index,
                                std::vector<const Pod*>& violating,
                                std::vector<const Pod*>& nonViolating) {
  Workspace w;
  w.start(index, pods.size());
  for (const Pod* p : pods) w.add(*p, RequestConsumer::Scheduler, index);
  w.chargeBudgets(index);
  for (const Candidate& c : w.candidates) (c.violating ? violating : nonViolating).push_back(c.pod);
}

void filterPodsWithPdbViolation(const std::vector<const Pod*>& pods,
                                const std::vector<PodDisruptionBudget>& pdbs,
                                std::vector<const Pod*>& violating,
                                std::vector<const Pod*>& nonViolating) {
  filterPodsWithPdbViolation(pods, threadPdbIndex(pdbs), violating, nonViolating);
}

VictimSelection selectVictimsOnNode(const Pod& pod, const NodeInfo& node,
                                    const std::vector<PodDisruptionBudget>& pdbs,
                                    const Policy& policy) {
  return selectVictimsOnNode(pod, node, threadPdbIndex(pdbs), policy);
}

VictimSelection selectVictimsOnNode(const Pod& pod, const NodeInfo& node, const PdbIndex& pdbs,
                                    const Policy& policy) {
  return selectVictims(pod, node, pdbs, policy, fitFor(pod, *node.node, RequestConsumer::Scheduler),
                       false, threadWorkspace());
}

VictimSelection selectVictimsOnNodeNaive(const Pod& pod, const NodeInfo& node,
                                         const std::vector<PodDisruptionBudget>& pdbs,
                                         const Policy& policy) {
  VictimSelection result;
  const PdbIndex index = indexPdbs(pdbs);
  const Fit f = fitFor(pod, *node.node, RequestConsumer::Scheduler);
  const std::vector<const Pod*> potential = potentialVictims(pod, node, policy);
  // Fit with `removed` gone, recomputed from every pod each time.
  auto fitsWithout = [&](const std::vector<const Pod*>& removed) {
    Held used = noneHeld(f);
    for (const Pod* p : node.pods) {
      if (samePod(*p, pod)) continue;
      if (std::find(removed.begin(), removed.end(), p) != removed.end()) continue;
      hold(f, *p, used);
    }
    for (const Pod* p : node.nominated) {
      if (!samePod(*p, pod) && p->priority >= pod.priority) hold(f, *p, used);
    }
    return firstMisfit(f, used);
  };
  int misfit = fitsWithout(potential);
  if (potential.empty() || misfit >= 0) {
    result.failedResource = misfit >= 0 ? resourceName(f, misfit) : "";
    return result;
  }
  result.fits = true;
  std::vector<const Pod*> removed = potential;
  reprieveInOrder(
      potential, index,
      [&](const Pod* p) {
        std::vector<const Pod*> without;
        for (const Pod* r : removed) {
          if (r != p) without.push_back(r);
        }
        if (fitsWithout(without) >= 0) return false;
        removed = std::move(without);
        return true;
      },
      result);
  return result;
}

AdmissionDecision admitPod(const Pod& pod, const NodeInfo& node,
                           const std::vector<PodDisruptionBudget>& pdbs, const Policy& policy) {
  AdmissionDecision out;
  out.pod = pod.key;
  out.node = node.node->name;
  auto reject = [&](std::string reason, std::string message) {
    out.verdict = Verdict::Reject;
    out.reason = std::move(reason);
    out.message = std::move(message);
    return out;
  };

  // 1. The priority class must exist.
  if (!pod.priorityClassFound) {
    return reject("PriorityClassNotFound",
                  "no PriorityClass with name " + pod.priorityClassName + " was found");
  }
  // 2. The kubelet's eviction admission.
  const std::vector<std::string> conditions = pressureConditions(*node.node);
  if (!conditions.empty() && !pod.critical) {
    bool onlyMemory = conditions.size() == 1 && conditions[0] == "MemoryPressure";
    Taint memoryPressure{"node.kubernetes.io/memory-pressure", "", "NoSchedule"};
    bool admitted = onlyMemory &&
                    (pod.qos != QosClass::BestEffort || tolerates(pod.tolerations, memoryPressure));
    if (!admitted) {
      std::string list;
      for (const auto& c : conditions) list += (list.empty() ? "" : " ") + c;
      return reject("Evicted", "The node had condition: [" + list + "]. ");
    }
  }
  // 3. Node selector and NoExecute taints (static pods skip the taint check, as in the kubelet).
  if (!selectorMatches(pod, *node.node)) {
    return reject("NodeAffinity",
                  "Predicate NodeAffinity failed: node(s) didn't match Pod's node "
                  "affinity/selector");
  }
  if (!isStaticPod(pod)) {
    // The kubelet's wording (its own ErrReasonNotMatch), not the scheduler plugin's.
    if (untoleratedTaint(pod, *node.node, {"NoExecute"}) != nullptr) {
      return reject("TaintToleration",
                    "Predicate TaintToleration failed: node(s) had taints that the pod didn't "
                    "tolerate");
    }
  }
  // 4. Resource fit, counting nominated pods of equal or higher priority; the pods already
  //    here count what the kubelet allocated or applied, whichever is larger.
  const Fit f = fitFor(pod, *node.node, RequestConsumer::Kubelet);
  Held used = noneHeld(f);
  Held leaving = noneHeld(f);  // what terminating pods will free
  const Pod* self = nullptr;
  for (const Pod* p : node.pods) {
    if (self == nullptr && samePod(*p, pod)) {
      self = p;
      continue;
    }
    hold(f, *p, used);
    if (p->leaving()) hold(f, *p, leaving);
  }
  for (const Pod* p : node.nominated) {
    if (p->priority >= pod.priority && !samePod(*p, pod)) hold(f, *p, used);
  }
  const int misfit = firstMisfit(f, used);
  if (misfit < 0) {
    out.verdict = Verdict::Admit;
    out.nominatedPodsToClear = lowerPriorityNominated(pod, node);
    return out;
  }
  std::string reason = "OutOf" + resourceName(f, misfit);
  std::string message = insufficientMessage(f, used, misfit);
  // 5. A pod that may not preempt is turned away.
  if (pod.preemptionPolicy == PreemptionPolicy::Never) {
    return reject(std::move(reason), std::move(message));
  }
  // 6. Room that terminating pods are about to free.
  Held staying = used;
  for (int i = 0; i < kCore; ++i) staying.core[i] -= leaving.core[i];
  for (std::size_t i = 0; i < staying.extended.size(); ++i) {
    staying.extended[i] -= leaving.extended[i];
  }
  if (fits(f, staying)) {
    out.verdict = Verdict::Wait;
    out.reason = std::move(reason);
    out.message = std::move(message) + "; it fits once the terminating pods on the node are gone";
    out.nominatedPodsToClear = lowerPriorityNominated(pod, node);
    return out;
  }
  // 7. The scheduler's victim selection: the same demand on the same node, the other pods
  //    counted as the scheduler counts them.
  Fit scheduler = f;
  scheduler.consumer = RequestConsumer::Scheduler;
  VictimSelection selection = selectVictims(pod, node, threadPdbIndex(pdbs), policy, scheduler,
                                            self == nullptr, threadWorkspace());
  if (!selection.fits) {
    return reject(
        std::move(reason),
        std::move(message) + "; preempting every lower-priority pod would not free enough");
  }
  out.verdict = Verdict::Preempt;
  out.reason = std::move(reason);
  out.message = std::move(message);
  out.message += "; preempting ";
  out.message += std::to_string(selection.victims.size());
  out.message += " lower-priority pod(s)";
  out.victims = sortedByKey(std::move(selection.victims));
  out.numPDBViolations = selection.numPDBViolations;
  out.nominatedPodsToClear = lowerPriorityNominated(pod, node);
  return out;
}

std::size_t pickOneNodeForPreemption(const std::vector<PreemptionCandidate>& candidates) {
  std::vector<std::size_t> best;
  for (std::size_t i = 0; i < candidates.size(); ++i) best.push_back(i);
  // Keeps only the candidates with the highest score.
  auto keepMax = [&](auto score) {
    if (best.size() <= 1) return;
    auto top = score(candidates[best[0]]);
    for (std::size_t i : best) top = std::max(top, score(candidates[i]));
    std::vector<std::size_t> kept;
    for (std::size_t i : best) {
      if (score(candidates[i]) == top) kept.push_back(i);
    }
    best = std::move(kept);
  };
  // 1. Fewest PDB violations.
  keepMax([](const PreemptionCandidate& c) { return -std::int64_t(c.numPDBViolations); });
  // 2. The lowest highest-priority victim (victims are most important first).
  keepMax([](const PreemptionCandidate& c) {
    return c.victims.empty() ? std::numeric_limits<std::int64_t>::max()
                             : -std::int64_t(c.victims[0]->priority);
  });
  // 3. The smallest sum of victim priorities, each offset by 2^31 so none is negative.
  keepMax([](const PreemptionCandidate& c) {
    std::int64_t sum = 0;
    for (const Pod* p : c.victims) sum += std::int64_t(p->priority) + (std::int64_t(1) << 31);
    return -sum;
  });
  // 4. The fewest victims.
  keepMax([](const PreemptionCandidate& c) { return -std::int64_t(c.victims.size()); });
  // 5. The latest start among each node's highest-priority victims (not started = newest).
  keepMax([](const PreemptionCandidate& c) {
    if (c.victims.empty()) return std::numeric_limits<WallMicros>::min();
    std::int32_t top = c.victims[0]->priority;
    WallMicros earliest = std::numeric_limits<WallMicros>::max();
    for (const Pod* p : c.victims) {
      if (p->priority == top) {
        earliest =
            std::min(earliest, p->startTime.value_or(std::numeric_limits<WallMicros>::max()));
      }
    }
    return earliest;
  });
  // 6. The node name, ascending, so the choice is repeatable.
  return *std::min_element(best.begin(), best.end(), [&](std::size_t a, std::size_t b) {
    return candidates[a].node->name < candidates[b].node->name;
  });
}

PreemptionDecision preemptCluster(const Pod& pod, const ClusterIndex& cluster,
                                  const std::vector<PodDisruptionBudget>& pdbs,
                                  const Policy& policy) {
  PreemptionDecision out;
  out.pod = pod.key;
  const Fit demand = demandOf(pod, RequestConsumer::Scheduler);
  const PdbIndex& pdbIndex = threadPdbIndex(pdbs);
  Workspace& workspace = threadWorkspace();
  // 1. A node where the pod fits as it is wins at once: its nominated node if it fits there
  //    (the scheduler tries that first), else the first by name.
  const NodeInfo* nominated =
      pod.nominatedNodeName.empty() ? nullptr : cluster.find(pod.nominatedNodeName);
  if (nominated != nullptr && !filteredOut(pod, *nominated->node)) {
    const Fit f = place(demand, *nominated->node);
    if (fits(f, survey(pod, *nominated, policy, f, false, false, pdbIndex, workspace))) {
      out.node = nominated->node;
      out.nominatedPodsToClear = lowerPriorityNominated(pod, *nominated);
      out.reason = "fits without preemption";
      return out;
    }
  }
  // 2. Eligibility to preempt, known before any node is surveyed.
  std::string ineligible;
  if (pod.preemptionPolicy == PreemptionPolicy::Never) {
    ineligible = "not eligible due to preemptionPolicy=Never";
  } else if (nominated != nullptr) {
    for (const Pod* p : nominated->pods) {
      if (p->terminating && p->priority < pod.priority) {
        ineligible = "not eligible due to a terminating pod on the nominated node";
        break;
      }
    }
  }
  // 1 and 3 in one pass over each node's pods: whether the pod fits there as it is and, while
  // no node is known to fit and the pod may preempt, the candidate the node would be.
  const NodeInfo* fitting = nullptr;
  std::vector<PreemptionCandidate> candidates;
  candidates.reserve(cluster.nodes.size());
  for (const NodeInfo& info : cluster.nodes) {
    if (filteredOut(pod, *info.node)) continue;
    const Fit f = place(demand, *info.node);
    const bool select = fitting == nullptr && ineligible.empty();
    Held others = survey(pod, info, policy, f, select, false, pdbIndex, workspace);
    if (fits(f, select ? withCandidates(f, others, workspace) : others)) {
      if (fitting == nullptr || info.node->name < fitting->node->name) fitting = &info;
      continue;
    }
    if (!select) continue;
    VictimSelection v = selectVictims(f, others, pdbIndex, workspace);
    if (!v.fits || v.victims.empty()) continue;
    candidates.push_back(PreemptionCandidate{info.node, std::move(v.victims), v.numPDBViolations});
  }
  if (fitting != nullptr) {
    out.node = fitting->node;
    out.nominatedPodsToClear = lowerPriorityNominated(pod, *fitting);
    out.reason = "fits without preemption";
    return out;
  }
  if (!ineligible.empty()) {
    out.reason = ineligible;
    return out;
  }
  // 3. The candidates, found above on every node.
  if (candidates.empty()) {
    out.reason = "preemption is not helpful for scheduling";
    return out;
  }
  // 4. The scheduler's choice.
  const std::size_t chosen = pickOneNodeForPreemption(candidates);
  out.node = candidates[chosen].node;
  out.victims = candidates[chosen].victims;
  out.numPDBViolations = candidates[chosen].numPDBViolations;
  out.nominatedPodsToClear = lowerPriorityNominated(pod, *cluster.find(out.node->name));
  out.candidates.reserve(candidates.size() - 1);
  for (std::size_t i = 0; i < candidates.size(); ++i) {
    if (i != chosen) out.candidates.push_back(std::move(candidates[i]));
  }
  std::sort(out.candidates.begin(), out.candidates.end(),
            [](const PreemptionCandidate& a, const PreemptionCandidate& b) {
              return textLess(a.node->name, b.node->name);
            });
  return out;
}

OrderedJson admissionToJson(const AdmissionDecision& decision) {
  OrderedJson out = OrderedJson::object();
  out["pod"] = decision.pod;
  out["node"] = decision.node;
  out["verdict"] = verdictName(decision.verdict);
  out["reason"] = decision.reason;
  out["message"] = decision.message;
  out["victims"] = OrderedJson::array();
  appendKeys(out["victims"], decision.victims);
  out["numPDBViolations"] = decision.numPDBViolations;
  out["nominatedPodsToClear"] = OrderedJson::array();
  appendKeys(out["nominatedPodsToClear"], decision.nominatedPodsToClear);
  return out;
}

OrderedJson preemptionToJson(const PreemptionDecision& decision) {
  OrderedJson out = OrderedJson::object();
  out["pod"] = decision.pod;
  out["node"] = decision.node == nullptr ? OrderedJson(nullptr) : OrderedJson(decision.node->name);
  out["victims"] = OrderedJson::array();
  appendKeys(out["victims"], decision.victims);
  out["numPDBViolations"] = decision.numPDBViolations;
  out["candidates"] = OrderedJson::array();
  for (const auto& c : decision.candidates) {
    OrderedJson item = OrderedJson::object();
    item["node"] = c.node->name;
    item["victims"] = OrderedJson::array();
    appendKeys(item["victims"], c.victims);
    item["numPDBViolations"] = c.numPDBViolations;
    out["candidates"].push_back(std::move(item));
  }
  out["nominatedPodsToClear"] = OrderedJson::array();
  appendKeys(out["nominatedPodsToClear"], decision.nominatedPodsToClear);
  return out;
}

}  // namespace nodewarden::policy
