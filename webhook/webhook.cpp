#include "webhook/webhook.h"

#include <algorithm>
#include <set>

#include "kube/writer.h"
#include "policy/json_reader.h"
#include "server/http_json.h"
#include "server/metrics.h"

namespace nodewarden::webhook {

namespace {

using policy::Diagnostics;
using policy::Json;
using policy::JsonObject;
using policy::OrderedJson;

constexpr std::string_view kApiVersion = "admission.k8s.io/v1";
// Victim names in a denial message beyond this many are summarized ("and 12 more").
constexpr std::size_t kMaxNamedVictims = 20;

std::string dumpJson(const OrderedJson& json) {
  // Replace rather than throw on invalid UTF-8 (everything here came from parsed JSON, so
  // this is belt and braces).
  return json.dump(-1, ' ', false, Json::error_handler_t::replace);
}

// `object.key` must be the string `expected` (or absent when `optional`).
void expectValue(const JsonObject& object, std::string_view key, std::string_view expected,
                 bool required) {
  const Json* value = object.member(key);
  if (value == nullptr) {
    if (required) {
      object.diagnostics().add(object.pathOf(key),
                               "missing (expected \"" + std::string(expected) + "\")");
    }
    return;
  }
  if (!value->is_string() || value->get_ref<const std::string&>() != expected) {
    object.diagnostics().add(object.pathOf(key), "expected \"" + std::string(expected) +
                                                     "\", got " + policy::describeJson(*value));
  }
}

std::string joinedWith(const Diagnostics& diagnostics, std::string_view separator) {
  std::string out;
  for (const Error& e : diagnostics.errors()) {
    if (!out.empty()) out += separator;
    out += e.message;
  }
  return out;
}

std::string victimList(const std::vector<const policy::Pod*>& victims) {
  std::string out;
  for (std::size_t i = 0; i < victims.size() && i < kMaxNamedVictims; ++i) {
    if (i > 0) out += ", ";
    out += victims[i]->key;
  }
  if (victims.size() > kMaxNamedVictims) {
    out += " and " + std::to_string(victims.size() - kMaxNamedVictims) + " more";
  }
  return out;
}

std::string uidOrKey(const policy::Pod& pod) {
  return pod.uid.empty() ? pod.key : pod.uid;
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// Parsing and answering

Result<BindingReview> parseBindingReview(std::string_view body) {
  Diagnostics diagnostics;
  const std::optional<Json> json = policy::parseJsonText(body, diagnostics);
  if (!json) return Error{"the body is not JSON: " + diagnostics.joined()};
  if (!json->is_object()) {
    return Error{"the body: expected an AdmissionReview object, got " +
                 policy::describeJson(*json)};
  }
  JsonObject root(*json, "", diagnostics);
  expectValue(root, "apiVersion", kApiVersion, true);
  expectValue(root, "kind", "AdmissionReview", true);
  BindingReview out;
  const JsonObject request = root.object("request");
  if (!request.valid()) {
    if (root.member("request") == nullptr)
      diagnostics.add("request", "missing (an object is required)");
  } else {
    out.uid = request.requiredString("uid");
    const JsonObject kind = request.object("kind");
    if (kind.valid()) {
      out.kindGroup = kind.string("group").value_or("");
      out.kindVersion = kind.string("version").value_or("");
      out.kind = kind.string("kind").value_or("");
    }
    const JsonObject resource = request.object("resource");
    if (resource.valid()) {
      out.resourceGroup = resource.string("group").value_or("");
      out.resourceVersion = resource.string("version").value_or("");
      out.resource = resource.string("resource").value_or("");
    }
    out.subResource = request.string("subResource").value_or("");
    out.operation = request.string("operation").value_or("");
    out.ns = request.string("namespace").value_or("");
    out.name = request.string("name").value_or("");
    out.dryRun = request.boolean("dryRun").value_or(false);
    out.isBinding = out.resourceGroup.empty() && out.resource == "pods" &&
                    out.subResource == "binding" && out.operation == "CREATE";
    if (out.isBinding && diagnostics.empty()) {
      const JsonObject object = request.object("object");
      if (!object.valid() && request.member("object") == nullptr) {
        diagnostics.add(request.pathOf("object"), "missing (a Binding is required)");
      }
      if (object.valid()) {
        expectValue(object, "kind", "Binding", false);
        const JsonObject metadata = object.object("metadata");
        if (metadata.valid()) {
          out.podNamespace = metadata.string("namespace").value_or("");
          out.podName = metadata.string("name").value_or("");
          out.podUid = metadata.string("uid").value_or("");
        }
        if (out.podNamespace.empty()) out.podNamespace = out.ns;
        if (out.podName.empty()) out.podName = out.name;
        if (out.podName.empty()) {
          diagnostics.add(object.pathOf("metadata") + ".name",
                          "missing, and request.name is empty: which pod is bound?");
        }
        if (out.podNamespace.empty()) {
          diagnostics.add(object.pathOf("metadata") + ".namespace",
                          "missing, and request.namespace is empty: which pod is bound?");
        }
        const JsonObject target = object.object("target");
        if (!target.valid()) {
          if (object.member("target") == nullptr) {
            diagnostics.add(object.pathOf("target"), "missing (an object is required)");
          }
        } else {
          expectValue(target, "kind", "Node", true);
          out.node = target.requiredString("name");
          out.targetApiVersion = target.string("apiVersion").value_or("");
        }
      }
    }
  }
  if (!diagnostics.empty()) return Error{joinedWith(diagnostics, "; ")};
  return out;
}

std::string admissionReviewResponse(const std::string& uid, const ReviewAnswer& answer) {
  OrderedJson response = OrderedJson::object();
  response["uid"] = uid;
  response["allowed"] = answer.allowed;
  if (!answer.allowed) {
    OrderedJson status = OrderedJson::object();
    status["code"] = answer.code;
    if (!answer.reason.empty()) status["reason"] = answer.reason;
    status["message"] = answer.message;
    if (!answer.detail.empty()) {
      OrderedJson cause = OrderedJson::object();
      cause["reason"] = answer.reason;
      cause["message"] = answer.detail;
      status["details"]["causes"] = OrderedJson::array({std::move(cause)});
    }
    response["status"] = std::move(status);
  }
  if (!answer.warnings.empty()) response["warnings"] = answer.warnings;
  OrderedJson review = OrderedJson::object();
  review["apiVersion"] = kApiVersion;
  review["kind"] = "AdmissionReview";
  review["response"] = std::move(response);
  return dumpJson(review);
}

// ---------------------------------------------------------------------------------------------
// Caches

bool applyNodewardenConditions(policy::Node& node) {
  std::vector<std::string> pressing;
  for (const policy::NodeCondition& c : node.conditions) {
    if (c.status != "True") continue;
    std::string kubelet = kube::kubeletConditionFor(c.type);
    if (!kubelet.empty()) pressing.push_back(std::move(kubelet));
  }
  if (pressing.empty()) return false;
  for (const std::string& type : pressing) {
    auto it = std::find_if(node.conditions.begin(), node.conditions.end(),
                           [&](const policy::NodeCondition& c) { return c.type == type; });
    if (it == node.conditions.end()) {
      node.conditions.push_back({type, "True"});
    } else {
      it->status = "True";
    }
  }
  return true;
}

SnapshotClusterCache::SnapshotClusterCache(policy::Snapshot snapshot)
    : snapshot_(std::move(snapshot)) {
  build();
}

void SnapshotClusterCache::reset(policy::Snapshot snapshot) {
  snapshot_ = std::move(snapshot);
  build();
}

void SnapshotClusterCache::build() {
  policy::resolvePods(snapshot_.pods, snapshot_.priorityClasses);
  for (policy::Node& node : snapshot_.nodes) applyNodewardenConditions(node);
  index_ = policy::buildClusterIndex(snapshot_);
  nodeByName_.clear();
  for (std::size_t i = 0; i < index_.nodes.size(); ++i) {
    nodeByName_.emplace(index_.nodes[i].node->name, i);
  }
  podByKey_.clear();
  for (const policy::Pod& pod : snapshot_.pods) podByKey_.emplace(pod.key, &pod);
}

const policy::Pod* SnapshotClusterCache::findPod(std::string_view key) const {
  auto it = podByKey_.find(key);
  return it == podByKey_.end() ? nullptr : it->second;
}

std::optional<policy::NodeInfo> SnapshotClusterCache::nodeInfo(std::string_view node) const {
  auto it = nodeByName_.find(node);
  if (it == nodeByName_.end()) return std::nullopt;
  return index_.nodes[it->second];
}

// One resolved pod and where it is indexed.
struct StoreClusterCache::Entry {
  policy::Pod pod;
  std::string boundTo;      // the node whose bound_ list holds it, or ""
  std::string nominatedTo;  // the node whose nominated_ list holds it, or ""
};

// Stands between the pods reflector and the pod store: forwards every change and notes
// which keys changed, so refresh() can update those pods alone.
class StoreClusterCache::PodSink final : public kube::StoreSink {
 public:
  explicit PodSink(kube::Store<policy::Pod>& store) : store_(store) {}

  void replace(std::vector<policy::Json> items) override {
    store_.replace(std::move(items));
    relisted = true;
    dirty.clear();
    seenVersion = store_.version();
  }
  void apply(const std::string& type, const policy::Json& object) override {
    const bool current = seenVersion == store_.version();
    const std::uint64_t before = store_.version();
    store_.apply(type, object);
    if (store_.version() != before) {
      std::string key = keyOf(object);
      if (key.empty()) {
        relisted = true;  // cannot tell which pod: rebuild (cannot happen for a stored pod)
      } else {
        dirty.insert(std::move(key));
      }
    }
    // Only when every earlier change went through here too is the dirty set complete.
    if (current) seenVersion = store_.version();
  }

  static std::string keyOf(const policy::Json& object) {
    if (!object.is_object()) return {};
    auto meta = object.find("metadata");
    if (meta == object.end() || !meta->is_object()) return {};
    auto name = meta->find("name");
    auto ns = meta->find("namespace");
    if (name == meta->end() || !name->is_string()) return {};
    if (ns == meta->end() || !ns->is_string()) return {};
    return ns->get<std::string>() + "/" + name->get<std::string>();
  }

  kube::Store<policy::Pod>& store_;
  std::set<std::string> dirty;
  bool relisted = false;
  std::uint64_t seenVersion = 0;
};

StoreClusterCache::StoreClusterCache(kube::Store<policy::Pod>& pods,
                                     kube::Store<policy::Node>& nodes,
                                     kube::Store<policy::PriorityClass>& priorityClasses,
                                     kube::Store<policy::PodDisruptionBudget>& pdbs)
    : podStore_(pods),
      nodeStore_(nodes),
      classStore_(priorityClasses),
      pdbStore_(pdbs),
      sink_(std::make_unique<PodSink>(pods)) {
  sink_->seenVersion = pods.version();
}

StoreClusterCache::~StoreClusterCache() = default;

kube::StoreSink& StoreClusterCache::podSink() {
  return *sink_;
}

void StoreClusterCache::refresh() {
  if (nodeStore_.version() != mappedNodesVersion_) {
    mappedNodes_.clear();
    mappedNodesVersion_ = nodeStore_.version();
  }
  if (!built_ || pdbStore_.version() != pdbsVersion_) {
    pdbs_.clear();
    pdbs_.reserve(pdbStore_.objects().size());
    for (const auto& [key, pdb] : pdbStore_.objects()) pdbs_.push_back(pdb);
    pdbsVersion_ = pdbStore_.version();
  }
  bool rebuild = !built_;
  if (!built_ || classStore_.version() != classesVersion_) {
    classes_.clear();
    classes_.reserve(classStore_.objects().size());
    for (const auto& [name, cls] : classStore_.objects()) classes_.push_back(cls);
    classesVersion_ = classStore_.version();
    rebuild = true;  // every pod's priority may change
  }
  if (!rebuild && podStore_.version() != podsVersion_) {
    // The dirty set is complete only when the sink saw every change up to now.
    rebuild = sink_->relisted || sink_->seenVersion != podStore_.version();
    if (!rebuild) {
      for (const std::string& key : sink_->dirty) updatePod(key);
    }
  }
  if (rebuild) rebuildPods();
  sink_->dirty.clear();
  sink_->relisted = false;
  sink_->seenVersion = podStore_.version();
  podsVersion_ = podStore_.version();
  built_ = true;
}

void StoreClusterCache::rebuildPods() {
  ++fullRebuilds_;
  pods_.clear();
  bound_.clear();
  nominated_.clear();
  pods_.reserve(podStore_.objects().size());
  for (const auto& [key, pod] : podStore_.objects()) {
    auto entry = std::make_unique<Entry>();
    entry->pod = pod;
    policy::resolvePod(entry->pod, classes_);
    index(*entry);
    pods_.emplace(key, std::move(entry));
  }
}

void StoreClusterCache::updatePod(const std::string& key) {
  ++podUpdates_;
  auto it = pods_.find(key);
  if (it != pods_.end()) unindex(*it->second);
  auto stored = podStore_.objects().find(key);
  if (stored == podStore_.objects().end()) {
    if (it != pods_.end()) pods_.erase(it);
    return;
  }
  if (it == pods_.end()) it = pods_.emplace(key, std::make_unique<Entry>()).first;
  Entry& entry = *it->second;
  entry.pod = stored->second;
  policy::resolvePod(entry.pod, classes_);
  index(entry);
}

void StoreClusterCache::index(Entry& entry) {
  const policy::Pod& pod = entry.pod;
  entry.boundTo.clear();
  entry.nominatedTo.clear();
  if (pod.phase == "Succeeded" || pod.phase == "Failed") return;
  if (!pod.nodeName.empty()) {
    entry.boundTo = pod.nodeName;
    bound_[pod.nodeName].push_back(&pod);
  } else if (!pod.nominatedNodeName.empty()) {
    entry.nominatedTo = pod.nominatedNodeName;
    nominated_[pod.nominatedNodeName].push_back(&pod);
  }
}

void StoreClusterCache::unindex(Entry& entry) {
  auto drop = [&](std::unordered_map<std::string, std::vector<const policy::Pod*>>& lists,
                  const std::string& node) {
    if (node.empty()) return;
    auto list = lists.find(node);
    if (list == lists.end()) return;
    auto& pods = list->second;
    pods.erase(std::remove(pods.begin(), pods.end(), &entry.pod), pods.end());
    if (pods.empty()) lists.erase(list);
  };
  drop(bound_, entry.boundTo);
  drop(nominated_, entry.nominatedTo);
  entry.boundTo.clear();
  entry.nominatedTo.clear();
}

const policy::Pod* StoreClusterCache::findPod(std::string_view key) const {
  auto it = pods_.find(std::string(key));
  return it == pods_.end() ? nullptr : &it->second->pod;
}

std::optional<policy::NodeInfo> StoreClusterCache::nodeInfo(std::string_view name) const {
  const std::string key(name);
  auto mapped = mappedNodes_.find(key);
  if (mapped == mappedNodes_.end()) {
    auto stored = nodeStore_.objects().find(key);
    if (stored == nodeStore_.objects().end()) return std::nullopt;
    // A copy: the store may change before the next refresh().
    policy::Node node = stored->second;
    applyNodewardenConditions(node);
    mapped = mappedNodes_.emplace(key, std::move(node)).first;
  }
  policy::NodeInfo info;
  info.node = &mapped->second;
  if (auto it = bound_.find(key); it != bound_.end()) info.pods = it->second;
  if (auto it = nominated_.find(key); it != nominated_.end()) info.nominated = it->second;
  return info;
}

// ---------------------------------------------------------------------------------------------
// Actions

void RecordingAdmissionActions::preempt(const policy::Pod& preemptor, const std::string& node,
                                        const std::vector<const policy::Pod*>& victims) {
  Call call{"preempt", preemptor.key, node, {}};
  for (const policy::Pod* victim : victims) call.victims.push_back(victim->key);
  calls.push_back(std::move(call));
}

void RecordingAdmissionActions::clearNomination(const policy::Pod& pod) {
  calls.push_back(Call{"clearNomination", pod.key, "", {}});
}

namespace {
kube::PodRef refOf(const policy::Pod& pod) {
  return kube::PodRef{pod.ns, pod.name, pod.uid};
}
}  // namespace

void ApiAdmissionActions::preempt(const policy::Pod& preemptor, const std::string& node,
                                  const std::vector<const policy::Pod*>& victims) {
  std::vector<kube::PodRef> refs;
  refs.reserve(victims.size());
  for (const policy::Pod* victim : victims) refs.push_back(refOf(*victim));
  writer_.preempt(refOf(preemptor), node, refs);
  writer_.nominate(refOf(preemptor), node);
}

void ApiAdmissionActions::clearNomination(const policy::Pod& pod) {
  writer_.nominate(refOf(pod), "");
}

// ---------------------------------------------------------------------------------------------
// The webhook

std::vector<double> reviewDurationBuckets() {
  return {0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005,
          0.01,    0.025,  0.05,    0.1,    0.25,  0.5,    1};
}

BindingWebhook::BindingWebhook(ClusterCache& cache, AdmissionActions& actions,
                               policy::Policy policy, server::MetricsRegistry* metrics,
                               BindingWebhookOptions options)
    : cache_(cache), actions_(actions), policy_(std::move(policy)), options_(std::move(options)) {
  if (!options_.now) options_.now = [] { return std::chrono::steady_clock::now(); };
  if (metrics != nullptr) {
    admissions_ =
        &metrics->counter("nodewarden_admissions_total",
                          "Admission verdicts, by verdict and reason.", {"verdict", "reason"});
    errors_ = &metrics->counter("nodewarden_admission_review_errors_total",
                                "Admission review requests answered 400 or 405.");
    duration_ =
        &metrics->histogram("nodewarden_admission_review_duration_seconds",
                            "Time to decide one AdmissionReview.", {}, reviewDurationBuckets());
  }
}

server::HttpResponse BindingWebhook::handle(const server::HttpRequest& request) {
  const auto started = std::chrono::steady_clock::now();
  if (request.method != "POST") {
    if (errors_ != nullptr) errors_->add({});
    return server::errorResponse(405, request.method + " is not allowed: POST an AdmissionReview");
  }
  Result<BindingReview> parsed = parseBindingReview(request.body);
  if (!parsed) {
    if (errors_ != nullptr) errors_->add({});
    return server::errorResponse(
        400, "not an admission.k8s.io/v1 AdmissionReview: " + parsed.error().message);
  }
  ReviewAnswer answer;
  ReviewRecord record = review(*parsed, answer);
  record.seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  if (admissions_ != nullptr) admissions_->add({record.verdict, record.reason});
  if (duration_ != nullptr) duration_->observe({}, record.seconds);
  if (options_.onReview) options_.onReview(record);
  return server::HttpResponse{200, "application/json", admissionReviewResponse(parsed->uid, answer)};
}

bool BindingWebhook::recentlyDone(const std::string& key,
                                  std::chrono::steady_clock::time_point now) {
  if (done_.size() > 4096) {
    for (auto it = done_.begin(); it != done_.end();) {
      it = now - it->second >= options_.actionMemory ? done_.erase(it) : std::next(it);
    }
  }
  auto it = done_.find(key);
  return it != done_.end() && now - it->second < options_.actionMemory;
}

ReviewRecord BindingWebhook::review(const BindingReview& r, ReviewAnswer& answer) {
  ReviewRecord record;
  record.uid = r.uid;
  record.dryRun = r.dryRun;
  auto failOpen = [&](std::string reason, std::string warning) {
    record.verdict = "allow-unchecked";
    record.reason = std::move(reason);
    record.message = warning;
    answer.allowed = true;
    answer.warnings.push_back(std::move(warning));
    return record;
  };
  if (!r.isBinding) {
    return failOpen("NotABinding", "nodewarden only reviews pods/binding (got " +
                                       (r.resource.empty() ? std::string("?") : r.resource) +
                                       (r.subResource.empty() ? "" : "/" + r.subResource) + " " +
                                       (r.operation.empty() ? std::string("?") : r.operation) +
                                       ")");
  }
  record.pod = r.podKey();
  record.node = r.node;

  cache_.refresh();
  const policy::Pod* pod = cache_.findPod(record.pod);
  if (pod == nullptr) {
    return failOpen("PodNotFound", "nodewarden: pod " + record.pod +
                                       " is not in its cache yet; allowed unchecked");
  }
  if (!r.podUid.empty() && !pod->uid.empty() && pod->uid != r.podUid) {
    return failOpen("PodNotFound", "nodewarden: its cache has an older pod " + record.pod +
                                       " (uid " + pod->uid + "); allowed unchecked");
  }
  if (!pod->nodeName.empty()) {
    return failOpen("AlreadyBound", "nodewarden: pod " + record.pod + " is bound to " +
                                        pod->nodeName + " already; allowed unchecked");
  }
  const std::optional<policy::NodeInfo> node = cache_.nodeInfo(r.node);
  if (!node) {
    return failOpen("NodeNotFound",
                    "nodewarden: node " + r.node + " is not in its cache yet; allowed unchecked");
  }
  if (!node->node->hasAllocatable) {
    return failOpen("NodeNotFound", "nodewarden: node " + r.node +
                                        " has no status.allocatable yet; allowed unchecked");
  }

  const policy::AdmissionDecision decision =
      policy::admitPod(*pod, *node, cache_.podDisruptionBudgets(), policy_);
  record.verdict = policy::verdictName(decision.verdict);
  record.reason = decision.reason;
  record.message = decision.message;
  for (const policy::Pod* victim : decision.victims) record.victims.push_back(victim->key);
  for (const policy::Pod* p : decision.nominatedPodsToClear) {
    record.nominationsCleared.push_back(p->key);
  }
  answer.allowed = decision.verdict == policy::Verdict::Admit;
  record.allowed = answer.allowed;
  if (!answer.allowed) {
    answer.code = 403;
    answer.reason = decision.reason;
    // docs/reference.md §7: the §5 reason is status.message; the whole story is in the details.
    answer.message = decision.reason;
    answer.detail = decision.reason + ": " + decision.message;
    if (decision.verdict == policy::Verdict::Preempt) {
      answer.detail += ": " + victimList(decision.victims);
    }
  }
  if (r.dryRun) return record;

  const auto now = options_.now();
  if (decision.verdict == policy::Verdict::Preempt) {
    // Victims already asked to leave for this pod: the cache may not show them terminating
    // yet, and a second eviction would only repeat the first.
    std::vector<const policy::Pod*> fresh;
    for (const policy::Pod* victim : decision.victims) {
      const std::string key = "evict/" + uidOrKey(*pod) + "/" + uidOrKey(*victim);
      if (!recentlyDone(key, now)) fresh.push_back(victim);
    }
    if (!fresh.empty()) {
      actions_.preempt(*pod, r.node, fresh);
      record.acted = true;
      for (const policy::Pod* victim : fresh) {
        done_["evict/" + uidOrKey(*pod) + "/" + uidOrKey(*victim)] = now;
      }
    }
  }
  for (const policy::Pod* p : decision.nominatedPodsToClear) {
    const std::string key = "clear/" + uidOrKey(*p) + "/" + r.node;
    if (recentlyDone(key, now)) continue;
    actions_.clearNomination(*p);
    record.acted = true;
    done_[key] = now;
  }
  return record;
}

}  // namespace nodewarden::webhook
