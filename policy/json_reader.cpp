#include "policy/json_reader.h"

#include <limits>

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
      if (s.size() > 60) return Json(s.substr(0, 57) + "...").dump();
      return value.dump();
    }
    default:
      return value.dump();
  }
}

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
  } else if (value->is_number_float() &&
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
  if (value->is_number_unsigned()) return value->get<std::uint64_t>();
  if (value->is_number_integer() && value->get<std::int64_t>() >= 0) {
    return std::uint64_t(value->get<std::int64_t>());
  }
  diagnostics_->add(pathOf(key), "expected a non-negative integer, got " + describeJson(*value));
  return std::nullopt;
}

std::optional<Quantity> JsonObject::quantity(std::string_view key) const {
  const Json* value = member(key);
  if (value == nullptr) return std::nullopt;
  Result<Quantity> parsed = Error{};
  if (value->is_string()) {
    parsed = Quantity::parse(value->get_ref<const std::string&>());
  } else if (value->is_number_integer()) {
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
