#include "policy/json_reader.h"

#include <cctype>
#include <cmath>
#include <limits>
#include <unordered_set>

namespace nodewarden::policy {
namespace {

bool isIdentifier(std::string_view key) {
  if (key.empty()) return false;
  for (char c : key) {
    bool ok =
        (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
    if (!ok) return false;
  }
  return !(key[0] >= '0' && key[0] <= '9');
}

}  // namespace

std::string childPath(std::string_view parent, std::string_view key) {
  std::string out(parent);
  if (isIdentifier(key)) {
    if (!out.empty()) out += '.';
    out += key;
  } else {
    out += "[\"";
    out += key;
    out += "\"]";
  }
  return out;
}

std::string indexPath(std::string_view parent, std::size_t index) {
  return std::string(parent) + "[" + std::to_string(index) + "]";
}

std::string describeJson(const Json& value) {
  switch (value.type()) {
    case Json::value_t::null:
      return "null";
    case Json::value_t::object:
      return "an object";
    case Json::value_t::array:
      return "an array";
    case Json::value_t::string: {
      const auto& s = value.get_ref<const std::string&>();
      if (s.size() <= 60) return value.dump();
      std::size_t cut = 57;
      // Never cut inside a UTF-8 sequence: back up over continuation bytes.
      while (cut > 0 && (static_cast<unsigned char>(s[cut]) & 0xC0) == 0x80) --cut;
      return Json(s.substr(0, cut) + "...").dump();
    }
    default:
      return value.dump();
  }
}

namespace {

// Every member name the parsers in policy/ read (model.cpp); any other member of a Kubernetes
// object is skipped while parsing. A parser that starts reading a new member adds it here;
// the equivalence test in tests/policy/model_test.cpp catches a forgotten one.
bool isRead(std::string_view key) {
  static constexpr std::string_view kKeys[] = {
      // snapshot and lists
      "nodes",
      "pods",
      "priorityClasses",
      "podDisruptionBudgets",
      "stats",
      "items",
      // metadata
      "metadata",
      "name",
      "namespace",
      "uid",
      "generation",
      "labels",
      "annotations",
      "creationTimestamp",
      "deletionTimestamp",
      // pod and node spec
      "spec",
      "nodeName",
      "priority",
      "priorityClassName",
      "preemptionPolicy",
      "nodeSelector",
      "affinity",
      "tolerations",
      "key",
      "operator",
      "value",
      "effect",
      "tolerationSeconds",
      "terminationGracePeriodSeconds",
      "overhead",
      "containers",
      "initContainers",
      "resources",
      "requests",
      "limits",
      "restartPolicy",
      "volumes",
      "hostPath",
      "gitRepo",
      "configMap",
      "emptyDir",
      "medium",
      "unschedulable",
      "taints",
      // status
      "status",
      "phase",
      "startTime",
      "nominatedNodeName",
      "qosClass",
      "capacity",
      "allocatable",
      "conditions",
      "type",
      "reason",
      "containerStatuses",
      "initContainerStatuses",
      "containerID",
      "allocatedResources",
      // priority classes and disruption budgets
      "globalDefault",
      "selector",
      "matchLabels",
      "matchExpressions",
      "values",
      "disruptionsAllowed",
      "disruptedPods",
      // kubelet summary
      "node",
      "memory",
      "availableBytes",
      "workingSetBytes",
      "usageBytes",
      "fs",
      "capacityBytes",
      "inodesFree",
      "inodes",
      "runtime",
      "imageFs",
      "rlimit",
      "maxpid",
      "curproc",
      "systemContainers",
      "podRef",
      "cpu",
      "usageNanoCores",
      "process_stats",
      "process_count",
      "ephemeral-storage",
      "usedBytes",
      "inodesUsed",
      "rootfs",
      "logs",
      "volume",
      "swap",
      "swapUsageBytes",
  };
  static const std::unordered_set<std::string_view> kSet(std::begin(kKeys), std::end(kKeys));
  return kSet.count(key) != 0;
}

// Maps whose keys are user data: nothing inside them is ever skipped by name.
bool isUserMap(std::string_view key) {
  static constexpr std::string_view kKeys[] = {
      "labels", "annotations", "nodeSelector", "matchLabels", "disruptedPods", "requests",
      "limits", "overhead",    "capacity",     "allocatable", "stats",         "allocatedResources",
  };
  for (auto k : kKeys) {
    if (k == key) return true;
  }
  return false;
}

// A SAX consumer that builds the DOM like nlohmann's own, but only of the members read.
class FilteringDomBuilder {
 public:
  explicit FilteringDomBuilder(Json& root) : root_(root) {}

  bool null() { return value(nullptr); }
  bool boolean(bool v) { return value(v); }
  bool number_integer(Json::number_integer_t v) { return value(v); }
  bool number_unsigned(Json::number_unsigned_t v) { return value(v); }
  bool number_float(Json::number_float_t v, const Json::string_t&) { return value(v); }
  bool string(Json::string_t& v) { return value(std::move(v)); }
  bool binary(Json::binary_t& v) { return value(std::move(v)); }

  bool start_object(std::size_t) {
    if (enterSkipped()) return true;
    Json* object = place(Json::object());
    frames_.push_back(Frame{object, isUserMap(pendingKeyName_)});
    return true;
  }
  bool key(Json::string_t& k) {
    if (skipDepth_ > 0) return true;
    Frame& frame = frames_.back();
    // The kubectl apply annotation holds a whole copy of the object.
    if ((!frame.userMap && !isRead(k)) || k == "kubectl.kubernetes.io/last-applied-configuration") {
      skipNext_ = true;
      return true;
    }
    pendingKeyName_ = k;
    slot_ = &(*frame.container)[k];
    return true;
  }
  bool end_object() {
    if (leaveSkipped()) return true;
    frames_.pop_back();
    return true;
  }
  bool start_array(std::size_t) {
    if (enterSkipped()) return true;
    Json* array = place(Json::array());
    frames_.push_back(Frame{array, false});
    return true;
  }
  bool end_array() {
    if (leaveSkipped()) return true;
    frames_.pop_back();
    return true;
  }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception& e) {
    error_ = e.what();
    return false;
  }

  const std::string& error() const { return error_; }

 private:
  struct Frame {
    Json* container;
    bool userMap;
  };

  // A start of an object or array: inside or at the start of a skipped member?
  bool enterSkipped() {
    if (skipDepth_ > 0) {
      ++skipDepth_;
      return true;
    }
    if (skipNext_) {
      skipNext_ = false;
      skipDepth_ = 1;
      return true;
    }
    return false;
  }
  bool leaveSkipped() {
    if (skipDepth_ == 0) return false;
    --skipDepth_;
    return true;
  }
  template <typename T>
  bool value(T&& v) {
    if (skipDepth_ > 0) return true;
    if (skipNext_) {
      skipNext_ = false;
      return true;
    }
    place(Json(std::forward<T>(v)));
    return true;
  }
  // Puts a value where the parser is: the root, the next array element or the member whose
  // key came last.
  Json* place(Json&& v) {
    if (frames_.empty()) {
      root_ = std::move(v);
      pendingKeyName_.clear();
      return &root_;
    }
    Frame& frame = frames_.back();
    if (frame.container->is_array()) {
      frame.container->push_back(std::move(v));
      pendingKeyName_.clear();
      return &frame.container->back();
    }
    *slot_ = std::move(v);
    return slot_;
  }

  Json& root_;
  std::vector<Frame> frames_;
  Json* slot_ = nullptr;
  std::string pendingKeyName_;
  bool skipNext_ = false;
  std::size_t skipDepth_ = 0;
  std::string error_;
};

void reportSyntaxError(const std::string& what, Diagnostics& diagnostics) {
  // "[json.exception.parse_error.101] parse error at line 3, column 5: ..." -> from "line".
  auto at = what.find(" at line ");
  diagnostics.add("", "invalid JSON" + (at == std::string::npos ? ": " + what : what.substr(at)));
}

}  // namespace

std::optional<Json> parseJsonText(std::string_view text, Diagnostics& diagnostics) {
  // nlohmann reports syntax errors only by exception; they stop here.
  try {
    return Json::parse(text);
  } catch (const Json::exception& e) {
    std::string what = e.what();
    // "[json.exception.parse_error.101] parse error at line 3, column 5: ..." -> from "line".
    auto at = what.find(" at line ");
    diagnostics.add("", "invalid JSON" + (at == std::string::npos ? ": " + what : what.substr(at)));
    return std::nullopt;
  }
}

std::optional<Json> parseKubernetesJsonText(std::string_view text, Diagnostics& diagnostics) {
  Json root;
  FilteringDomBuilder builder(root);
  bool ok = false;
  try {
    ok = Json::sax_parse(text, &builder);
  } catch (const Json::exception& e) {
    reportSyntaxError(e.what(), diagnostics);
    return std::nullopt;
  }
  if (!ok) {
    reportSyntaxError(builder.error().empty() ? std::string("invalid JSON") : builder.error(),
                      diagnostics);
    return std::nullopt;
  }
  return root;
}

void Diagnostics::add(std::string_view path, std::string_view message) {
  errors_.push_back(
      Error{path.empty() ? std::string(message) : std::string(path) + ": " + std::string(message)});
}

std::string Diagnostics::joined() const {
  std::string out;
  for (const auto& e : errors_) {
    if (!out.empty()) out += '\n';
    out += e.message;
  }
  return out;
}

JsonObject::JsonObject(const Json& value, std::string path, Diagnostics& diagnostics)
    : path_(std::move(path)), diagnostics_(&diagnostics) {
  if (value.is_object()) {
    object_ = &value;
  } else {
    diagnostics.add(path_, "expected an object, got " + describeJson(value));
  }
}

const Json* JsonObject::member(std::string_view key) const {
  if (object_ == nullptr) return nullptr;
  auto it = object_->find(key);
  if (it == object_->end() || it->is_null()) return nullptr;
  return &*it;
}

JsonObject JsonObject::object(std::string_view key) const {
  const Json* value = member(key);
  if (value == nullptr) return JsonObject(pathOf(key), *diagnostics_);
  return JsonObject(*value, pathOf(key), *diagnostics_);
}

std::optional<std::string> JsonObject::string(std::string_view key) const {
  const Json* value = member(key);
  if (value == nullptr) return std::nullopt;
  if (!value->is_string()) {
    diagnostics_->add(pathOf(key), "expected a string, got " + describeJson(*value));
    return std::nullopt;
  }
  return value->get<std::string>();
}

std::string JsonObject::requiredString(std::string_view key) const {
  if (object_ == nullptr) return {};
  auto value = string(key);
  if (!value) {
    if (member(key) == nullptr) diagnostics_->add(pathOf(key), "missing (a string is required)");
    return {};
  }
  if (value->empty()) diagnostics_->add(pathOf(key), "must not be empty");
  return *value;
}

std::optional<bool> JsonObject::boolean(std::string_view key) const {
  const Json* value = member(key);
  if (value == nullptr) return std::nullopt;
  if (!value->is_boolean()) {
    diagnostics_->add(pathOf(key), "expected true or false, got " + describeJson(*value));
    return std::nullopt;
  }
  return value->get<bool>();
}

std::optional<std::int64_t> JsonObject::integer(std::string_view key, std::int64_t min,
                                                std::int64_t max) const {
  const Json* value = member(key);
  if (value == nullptr) return std::nullopt;
  std::int64_t result = 0;
  if (value->is_number_integer()) {
    if (value->is_number_unsigned() &&
        value->get<std::uint64_t>() >
            static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())) {
      result = std::numeric_limits<std::int64_t>::max();
    } else {
      result = value->get<std::int64_t>();
    }
  } else if (value->is_number_float() && std::fabs(value->get<double>()) < 9.2e18 &&
             value->get<double>() == double(std::int64_t(value->get<double>()))) {
    result = std::int64_t(value->get<double>());
  } else {
    diagnostics_->add(pathOf(key), "expected an integer, got " + describeJson(*value));
    return std::nullopt;
  }
  if (result < min || result > max) {
    diagnostics_->add(pathOf(key), "expected an integer from " + std::to_string(min) + " to " +
                                       std::to_string(max) + ", got " + describeJson(*value));
    return std::nullopt;
  }
  return result;
}

std::optional<std::uint64_t> JsonObject::unsignedInteger(std::string_view key) const {
  const Json* value = member(key);
  if (value == nullptr) return std::nullopt;
  constexpr auto kMax = std::uint64_t(std::numeric_limits<std::int64_t>::max());
  if (value->is_number_unsigned() && value->get<std::uint64_t>() <= kMax) {
    return value->get<std::uint64_t>();
  }
  if (value->is_number_integer() && !value->is_number_unsigned() &&
      value->get<std::int64_t>() >= 0) {
    return std::uint64_t(value->get<std::int64_t>());
  }
  diagnostics_->add(pathOf(key), "expected an integer from 0 to 9223372036854775807, got " +
                                     describeJson(*value));
  return std::nullopt;
}

std::optional<Quantity> JsonObject::quantity(std::string_view key) const {
  const Json* value = member(key);
  if (value == nullptr) return std::nullopt;
  Result<Quantity> parsed = Error{};
  if (value->is_string()) {
    // Quantity.UnmarshalJSON trims surrounding whitespace.
    std::string_view text = value->get_ref<const std::string&>();
    while (!text.empty() && std::isspace(static_cast<unsigned char>(text.front()))) {
      text.remove_prefix(1);
    }
    while (!text.empty() && std::isspace(static_cast<unsigned char>(text.back()))) {
      text.remove_suffix(1);
    }
    parsed = Quantity::parse(text);
  } else if (value->is_number()) {
    // Kubernetes also accepts a bare JSON number for a quantity.
    parsed = Quantity::parse(value->dump());
  } else {
    diagnostics_->add(pathOf(key), "expected a quantity, got " + describeJson(*value));
    return std::nullopt;
  }
  if (!parsed) {
    diagnostics_->add(pathOf(key), parsed.error().message);
    return std::nullopt;
  }
  return parsed.value();
}

std::map<std::string, std::string> JsonObject::stringMap(std::string_view key) const {
  std::map<std::string, std::string> out;
  const Json* value = member(key);
  if (value == nullptr) return out;
  if (!value->is_object()) {
    diagnostics_->add(pathOf(key), "expected an object of strings, got " + describeJson(*value));
    return out;
  }
  for (auto it = value->begin(); it != value->end(); ++it) {
    if (!it.value().is_string()) {
      diagnostics_->add(childPath(pathOf(key), it.key()),
                        "expected a string, got " + describeJson(it.value()));
      continue;
    }
    out.emplace(it.key(), it.value().get<std::string>());
  }
  return out;
}

std::map<std::string, Quantity> JsonObject::quantityMap(std::string_view key,
                                                        bool nonNegative) const {
  std::map<std::string, Quantity> out;
  JsonObject map = object(key);
  if (!map.valid()) return out;
  for (auto it = map.object_->begin(); it != map.object_->end(); ++it) {
    auto q = map.quantity(it.key());
    if (!q) continue;
    if (nonNegative && q->sign() < 0) {
      diagnostics_->add(map.pathOf(it.key()),
                        "must not be negative, got " + describeJson(it.value()));
      continue;
    }
    out.emplace(it.key(), *q);
  }
  return out;
}

}  // namespace nodewarden::policy
