// Typed access to Kubernetes JSON with JSON paths in every error. Never throws.
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"
#include "policy/quantity.h"

namespace nodewarden::policy {

using Json = nlohmann::json;
// For output: keeps members in the order they were added, as docs/reference.md shows them.
using OrderedJson = nlohmann::ordered_json;

// `parent.key`, or `parent["key"]` when the key is not a plain identifier
// (labels["app.kubernetes.io/name"], evictionHard["memory.available"]).
std::string childPath(std::string_view parent, std::string_view key);
// `parent[index]`.
std::string indexPath(std::string_view parent, std::size_t index);
// A short description of a JSON value for messages: `"9x"`, `12`, `an object`, `null`.
std::string describeJson(const Json& value);

class Diagnostics;

// Parses JSON text; a syntax error is reported with its line and column and nothing returned.
std::optional<Json> parseJsonText(std::string_view text, Diagnostics& diagnostics);

// Parses Kubernetes objects as kubectl prints them, keeping only the members nodewarden's
// parsers read: the rest (managedFields, containerStatuses, env, volumes, probes, node
// images, ...) is skipped while parsing instead of being built and thrown away. Keys inside
// maps of user data (labels, annotations, nodeSelector, resource lists, ...) are all kept,
// except the kubectl.kubernetes.io/last-applied-configuration annotation (a copy of the
// whole object).
std::optional<Json> parseKubernetesJsonText(std::string_view text, Diagnostics& diagnostics);

// Collects every error found while reading one document, each with its JSON path.
class Diagnostics {
 public:
  void add(std::string_view path, std::string_view message);
  bool empty() const { return errors_.empty(); }
  std::size_t size() const { return errors_.size(); }
  const std::vector<Error>& errors() const { return errors_; }
  // All messages, one per line.
  std::string joined() const;

 private:
  std::vector<Error> errors_;
};

// Reads members of one JSON object, reporting type mismatches to a Diagnostics. Absent or
// null members yield nothing and no error; "required" variants report absence too.
class JsonObject {
 public:
  // `value` must outlive the reader. A non-object value reports an error once.
  JsonObject(const Json& value, std::string path, Diagnostics& diagnostics);

  bool valid() const { return object_ != nullptr; }
  const std::string& path() const { return path_; }
  std::string pathOf(std::string_view key) const { return childPath(path_, key); }

  // The member, or null when absent.
  const Json* member(std::string_view key) const;
  JsonObject object(std::string_view key) const;  // an absent member gives an invalid reader

  std::optional<std::string> string(std::string_view key) const;
  std::string requiredString(std::string_view key) const;
  std::optional<bool> boolean(std::string_view key) const;
  std::optional<std::int64_t> integer(std::string_view key, std::int64_t min,
                                      std::int64_t max) const;
  std::optional<std::uint64_t> unsignedInteger(std::string_view key) const;
  std::optional<Quantity> quantity(std::string_view key) const;
  std::map<std::string, std::string> stringMap(std::string_view key) const;
  std::map<std::string, Quantity> quantityMap(std::string_view key, bool nonNegative) const;
  // Calls `each(element, path)` for every element of an array member.
  template <typename F>
  void forEach(std::string_view key, F&& each) const {
    const Json* array = member(key);
    if (array == nullptr) return;
    if (!array->is_array()) {
      diagnostics_->add(pathOf(key), "expected an array, got " + describeJson(*array));
      return;
    }
    std::string base = pathOf(key);
    for (std::size_t i = 0; i < array->size(); ++i) each((*array)[i], indexPath(base, i));
  }

  Diagnostics& diagnostics() const { return *diagnostics_; }

 private:
  JsonObject(std::string path, Diagnostics& diagnostics)
      : path_(std::move(path)), diagnostics_(&diagnostics) {}

  const Json* object_ = nullptr;
  std::string path_;
  Diagnostics* diagnostics_;
};

// Calls `each(element, path)` for every element of `value`, which may be a JSON array or a
// Kubernetes List object (`{"kind": "PodList", "items": [...]}`).
template <typename F>
void forEachListItem(const Json& value, const std::string& path, Diagnostics& diagnostics,
                     F&& each) {
  const Json* items = &value;
  std::string base = path;
  if (value.is_object()) {
    auto it = value.find("items");
    if (it == value.end()) {
      diagnostics.add(path, "expected an array or a List object with \"items\", got an object");
      return;
    }
    items = &*it;
    base = childPath(path, "items");
    if (items->is_null()) return;  // kubectl prints an empty list as "items": []
  }
  if (!items->is_array()) {
    diagnostics.add(base, "expected an array, got " + describeJson(*items));
    return;
  }
  for (std::size_t i = 0; i < items->size(); ++i) each((*items)[i], indexPath(base, i));
}

}  // namespace nodewarden::policy
