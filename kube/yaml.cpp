#include "kube/yaml.h"

#include <yaml-cpp/eventhandler.h>
#include <yaml-cpp/exceptions.h>
#include <yaml-cpp/parser.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <map>
#include <optional>
#include <sstream>

#include "kube/utf8.h"

namespace nodewarden::kube {

namespace {

using policy::Json;

// Thrown by the handler to stop yaml-cpp's parser; caught in readYamlDocuments, so it never
// leaves this file. yaml-cpp unwinds through RAII only.
struct Stop {
  std::size_t line;  // 1-based
  std::string message;
};

bool isOneOf(std::string_view s, std::initializer_list<std::string_view> options) {
  return std::find(options.begin(), options.end(), s) != options.end();
}

bool isDigit(char c) {
  return c >= '0' && c <= '9';
}

// An integer in `base` from [from, end) with its sign, or nothing (out of range: nothing, the
// text is kept).
std::optional<Json> parseInteger(const char* from, const char* end, int base, bool negative) {
  if (from == end) return std::nullopt;
  std::uint64_t v = 0;
  auto [at, ec] = std::from_chars(from, end, v, base);
  if (at != end || ec != std::errc()) return std::nullopt;
  if (!negative) return Json(v);
  if (v > std::uint64_t(1) << 63) return std::nullopt;
  return Json(v == std::uint64_t(1) << 63 ? INT64_MIN : -static_cast<std::int64_t>(v));
}

// [-+]? ( \. [0-9]+ | [0-9]+ ( \. [0-9]* )? ) ( [eE] [-+]? [0-9]+ )? as a finite double.
std::optional<Json> parseFloat(const std::string& s) {
  const char* begin = s.data();
  const char* end = s.data() + s.size();
  const char* p = begin + (!s.empty() && (s[0] == '-' || s[0] == '+') ? 1 : 0);
  std::size_t before = 0, after = 0;
  while (p != end && isDigit(*p)) ++p, ++before;
  if (p != end && *p == '.') {
    ++p;
    while (p != end && isDigit(*p)) ++p, ++after;
  }
  if (before == 0 && after == 0) return std::nullopt;
  if (p != end && (*p == 'e' || *p == 'E')) {
    ++p;
    if (p != end && (*p == '-' || *p == '+')) ++p;
    if (p == end || !isDigit(*p)) return std::nullopt;
    while (p != end && isDigit(*p)) ++p;
  }
  if (p != end) return std::nullopt;
  double v = 0;
  // from_chars rejects a leading '+'.
  auto [at, ec] = std::from_chars(s[0] == '+' ? begin + 1 : begin, end, v);
  if (at != end || ec != std::errc() || !std::isfinite(v)) return std::nullopt;
  return Json(v);
}

// YAML 1.2's core schema for integers and floats (the JSON-compatible part of it; .inf and
// .nan have no JSON form and stay strings).
std::optional<Json> resolveCoreNumber(const std::string& s) {
  if (s.empty()) return std::nullopt;
  const char* begin = s.data();
  const char* end = s.data() + s.size();
  if (s.size() > 2 && s[0] == '0' && s[1] == 'x') return parseInteger(begin + 2, end, 16, false);
  if (s.size() > 2 && s[0] == '0' && s[1] == 'o') return parseInteger(begin + 2, end, 8, false);
  bool negative = s[0] == '-';
  const char* digits = begin + (s[0] == '-' || s[0] == '+' ? 1 : 0);
  if (digits != end && std::all_of(digits, end, isDigit))
    return parseInteger(digits, end, 10, negative);
  return parseFloat(s);
}

// go-yaml v2's resolve() for a plain scalar that starts with a digit or a sign: a timestamp
// (kept as text for untyped values), then Go's strconv.ParseInt with base 0 after removing
// underscores (0x, 0o, 0b, a leading 0 for octal), then its float pattern.
std::optional<Json> resolveGoNumber(const std::string& s) {
  // 2006-1-2 and what follows it: a timestamp.
  std::size_t year = 0;
  while (year < s.size() && isDigit(s[year])) ++year;
  if (year == 4 && s.size() > 5 && s[4] == '-' && isDigit(s[5])) return std::nullopt;
  std::string plain;
  for (char c : s) {
    if (c != '_') plain += c;
  }
  if (plain.empty()) return std::nullopt;
  bool negative = plain[0] == '-';
  std::size_t at = plain[0] == '-' || plain[0] == '+' ? 1 : 0;
  const char* end = plain.data() + plain.size();
  const char* digits = plain.data() + at;
  std::string_view rest(digits, static_cast<std::size_t>(end - digits));
  auto prefixed = [&](char lower) {
    return rest.size() > 2 && rest[0] == '0' && (rest[1] == lower || rest[1] == lower - 32);
  };
  std::optional<Json> integer;
  if (prefixed('x')) {
    integer = parseInteger(digits + 2, end, 16, negative);
  } else if (prefixed('o')) {
    integer = parseInteger(digits + 2, end, 8, negative);
  } else if (prefixed('b')) {
    integer = parseInteger(digits + 2, end, 2, negative);
  } else if (rest.size() > 1 && rest[0] == '0') {
    integer = parseInteger(digits + 1, end, 8, negative);
  } else if (!rest.empty() && std::all_of(rest.begin(), rest.end(), isDigit)) {
    integer = parseInteger(digits, end, 10, negative);
  }
  if (integer) return integer;
  return parseFloat(plain);
}

std::size_t countValues(const Json& value) {
  std::size_t n = 1;
  if (value.is_structured()) {
    for (const auto& item : value) n += countValues(item);
  }
  return n;
}

class JsonBuilder final : public YAML::EventHandler {
 public:
  explicit JsonBuilder(const YamlOptions& options) : options_(options) {}

  std::vector<Json> take() { return std::move(documents_); }

  void OnDocumentStart(const YAML::Mark&) override { documents_.emplace_back(nullptr); }
  void OnDocumentEnd() override {}

  void OnNull(const YAML::Mark& mark, YAML::anchor_t anchor) override {
    node(mark, anchor);
    if (inKeyPosition()) stop(mark, "empty mapping key");
    place(mark, Json(nullptr), anchor);
  }

  void OnAlias(const YAML::Mark& mark, YAML::anchor_t anchor) override {
    if (!options_.aliases) stop(mark, "anchors and aliases are not supported");
    auto it = anchors_.find(anchor);
    if (it == anchors_.end()) stop(mark, "an alias inside the node it names");
    aliasValues_ += it->second.values;
    if (aliasValues_ > options_.maxAliasValues)
      stop(mark,
           "aliases expand to more than " + std::to_string(options_.maxAliasValues) + " values");
    if (inKeyPosition()) {
      if (!it->second.value.is_string()) stop(mark, "mapping keys must be scalars");
      return setKey(mark, it->second.value.get<std::string>(), false);
    }
    place(mark, it->second.value, YAML::NullAnchor);
  }

  void OnScalar(const YAML::Mark& mark, const std::string& tag, YAML::anchor_t anchor,
                const std::string& value) override {
    node(mark, anchor);
    // yaml-cpp tags plain scalars "?" and quoted or block scalars "!".
    bool plain = tag == "?";
    if (!validUtf8(value)) stop(mark, "invalid UTF-8");
    if (inKeyPosition()) {
      if (anchor != YAML::NullAnchor) anchors_[anchor] = Anchored{Json(value), 1};
      return setKey(mark, value, plain && value == "<<");
    }
    if (!plain && tag != "!") {
      if (tag == "tag:yaml.org,2002:str") return place(mark, Json(value), anchor);
      if (!isOneOf(tag, {"tag:yaml.org,2002:int", "tag:yaml.org,2002:float",
                         "tag:yaml.org,2002:bool", "tag:yaml.org,2002:null"}))
        stop(mark, "tags other than !!str, !!int, !!float, !!bool and !!null are not supported");
      plain = true;
    }
    place(mark, plain ? resolvePlain(value) : Json(value), anchor);
  }

  void OnSequenceStart(const YAML::Mark& mark, const std::string& tag, YAML::anchor_t anchor,
                       YAML::EmitterStyle::value) override {
    open(mark, tag, anchor, Json::array());
  }
  void OnSequenceEnd() override { close(); }
  void OnMapStart(const YAML::Mark& mark, const std::string& tag, YAML::anchor_t anchor,
                  YAML::EmitterStyle::value) override {
    open(mark, tag, anchor, Json::object());
  }
  void OnMapEnd() override { close(); }

 private:
  struct Frame {
    Json value;
    YAML::Mark mark;                 // where the collection starts
    YAML::anchor_t anchor;           // its anchor, recorded when it closes
    bool stringMap;                  // its plain scalar values stay strings
    std::optional<std::string> key;  // a mapping's key waiting for its value
    bool mergeKey = false;           // that key is go-yaml's merge key "<<"
    std::string name;                // the key this collection is the value of ("" if none)
  };
  struct Anchored {
    Json value;
    std::size_t values;  // countValues(value)
  };

  [[noreturn]] static void stop(const YAML::Mark& mark, std::string message) {
    throw Stop{static_cast<std::size_t>(mark.line) + 1, std::move(message)};
  }

  bool inKeyPosition() const {
    return !frames_.empty() && frames_.back().value.is_object() && !frames_.back().key;
  }

  // Checks common to every node.
  void node(const YAML::Mark& mark, YAML::anchor_t anchor) {
    if (anchor != YAML::NullAnchor && !options_.aliases)
      stop(mark, "anchors and aliases are not supported");
  }

  void setKey(const YAML::Mark& mark, const std::string& key, bool merge) {
    Frame& map = frames_.back();
    if (!merge && !options_.lastDuplicateKeyWins && map.value.contains(key))
      stop(mark, "duplicate key \"" + key + "\"");
    map.key = key;
    map.mergeKey = merge && options_.aliases;
  }

  Json resolvePlain(const std::string& v) const {
    bool keepText = !frames_.empty() && frames_.back().stringMap;
    if (isOneOf(v, {"true", "True", "TRUE"})) return Json(true);
    if (isOneOf(v, {"false", "False", "FALSE"})) return Json(false);
    if (isOneOf(v, {"null", "Null", "NULL", "~", ""})) return Json(nullptr);
    if (options_.scalars == YamlScalars::GoYaml) {
      if (isOneOf(v, {"y", "Y", "yes", "Yes", "YES", "on", "On", "ON"})) return Json(true);
      if (isOneOf(v, {"n", "N", "no", "No", "NO", "off", "Off", "OFF"})) return Json(false);
      if (keepText) return Json(v);
      if (isDigit(v[0]) || v[0] == '-' || v[0] == '+') {
        if (auto number = resolveGoNumber(v)) return std::move(*number);
      } else if (v[0] == '.') {
        if (auto number = parseFloat(v)) return std::move(*number);
      }
      return Json(v);
    }
    if (!keepText) {
      if (auto number = resolveCoreNumber(v)) return std::move(*number);
    }
    return Json(v);
  }

  void open(const YAML::Mark& mark, const std::string& tag, YAML::anchor_t anchor, Json empty) {
    node(mark, anchor);
    if (frames_.size() >= options_.maxDepth)
      stop(mark, "nested deeper than " + std::to_string(options_.maxDepth) + " levels");
    if (inKeyPosition()) stop(mark, "mapping keys must be scalars");
    if (tag != "?" && tag != "!" && tag != "tag:yaml.org,2002:map" &&
        tag != "tag:yaml.org,2002:seq")
      stop(mark, "unsupported tag " + tag);
    std::string name;
    if (!frames_.empty() && frames_.back().key) name = *frames_.back().key;
    bool stringMap = empty.is_object() &&
                     std::find(options_.stringMapMembers.begin(), options_.stringMapMembers.end(),
                               name) != options_.stringMapMembers.end();
    frames_.push_back(
        Frame{std::move(empty), mark, anchor, stringMap, std::nullopt, false, std::move(name)});
  }

  void close() {
    Frame done = std::move(frames_.back());
    frames_.pop_back();
    place(done.mark, std::move(done.value), done.anchor);
  }

  void place(const YAML::Mark& mark, Json value, YAML::anchor_t anchor) {
    if (anchor != YAML::NullAnchor) anchors_[anchor] = Anchored{value, countValues(value)};
    if (frames_.empty()) {
      documents_.back() = std::move(value);
      return;
    }
    Frame& top = frames_.back();
    if (top.value.is_array()) {
      top.value.push_back(std::move(value));
      return;
    }
    if (top.mergeKey) {
      merge(mark, top.value, value);
    } else {
      top.value[*top.key] = std::move(value);
    }
    top.key.reset();
    top.mergeKey = false;
  }

  // go-yaml v2's merge: a mapping's members are set into `into` in order (replacing what is
  // there); for a sequence of mappings the last is set first, so the first wins.
  static void merge(const YAML::Mark& mark, Json& into, const Json& from) {
    auto mergeOne = [&](const Json& map) {
      if (!map.is_object()) stop(mark, "a merge key (<<) needs a mapping or a list of mappings");
      for (const auto& [key, item] : map.items()) into[key] = item;
    };
    if (from.is_array()) {
      for (auto it = from.rbegin(); it != from.rend(); ++it) mergeOne(*it);
      return;
    }
    mergeOne(from);
  }

  const YamlOptions& options_;
  std::vector<Frame> frames_;
  std::vector<Json> documents_;
  std::map<YAML::anchor_t, Anchored> anchors_;
  std::size_t aliasValues_ = 0;
};

// The first line (1-based) at or before `limit` whose indentation holds a tab.
std::optional<std::size_t> tabIndentedLine(std::string_view text, std::size_t limit) {
  std::size_t number = 0;
  std::size_t start = 0;
  while (start < text.size() && number < limit) {
    std::size_t end = std::min(text.find('\n', start), text.size());
    std::string_view line = text.substr(start, end - start);
    ++number;
    std::size_t content = line.find_first_not_of(" \t\r");
    if (content != std::string_view::npos &&
        line.substr(0, content).find('\t') != std::string_view::npos)
      return number;
    start = end + 1;
  }
  return std::nullopt;
}

}  // namespace

Result<std::vector<Json>> readYamlDocuments(std::string_view text, const YamlOptions& options) {
  // yaml-cpp's marks count from after a byte order mark.
  if (text.substr(0, 3) == "\xEF\xBB\xBF") text.remove_prefix(3);
  std::istringstream in{std::string(text)};
  JsonBuilder builder(options);
  try {
    YAML::Parser parser(in);
    while (parser.HandleNextDocument(builder)) {
      if (options.firstDocumentOnly) break;
    }
    return builder.take();
  } catch (const Stop& stop) {
    return Error{"line " + std::to_string(stop.line) + ": " + stop.message};
  } catch (const YAML::Exception& e) {
    if (e.mark.is_null()) return Error{e.msg};
    auto line = static_cast<std::size_t>(e.mark.line) + 1;
    // yaml-cpp's message for a tab in the indentation depends on where it is ("illegal map
    // value", "illegal tab when looking for indentation"); say what is wrong instead.
    if (auto tab = tabIndentedLine(text, line))
      return Error{"line " + std::to_string(*tab) + ": tabs are not allowed for indentation"};
    return Error{"line " + std::to_string(line) + ": " + e.msg};
  } catch (const std::exception& e) {
    // std::bad_alloc and the like: a value, as every error here.
    return Error{std::string("reading YAML: ") + e.what()};
  }
}

}  // namespace nodewarden::kube
