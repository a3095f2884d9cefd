#include "kube/yaml.h"

#include <yaml-cpp/eventhandler.h>
#include <yaml-cpp/exceptions.h>
#include <yaml-cpp/parser.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <optional>
#include <sstream>

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

// YAML 1.2's core schema for integers and floats (the JSON-compatible part of it; .inf and
// .nan have no JSON form and stay strings).
std::optional<Json> resolveNumber(const std::string& s) {
  if (s.empty()) return std::nullopt;
  const char* begin = s.data();
  const char* end = s.data() + s.size();
  auto integer = [&](const char* from, int base, bool negative) -> std::optional<Json> {
    if (from == end) return std::nullopt;
    std::uint64_t v = 0;
    auto [at, ec] = std::from_chars(from, end, v, base);
    if (at != end) return std::nullopt;
    if (ec != std::errc()) return std::nullopt;  // out of range: keep the text
    if (!negative) return Json(v);
    if (v > std::uint64_t(1) << 63) return std::nullopt;
    return Json(v == std::uint64_t(1) << 63 ? INT64_MIN : -static_cast<std::int64_t>(v));
  };
  if (s.size() > 2 && s[0] == '0' && s[1] == 'x') return integer(begin + 2, 16, false);
  if (s.size() > 2 && s[0] == '0' && s[1] == 'o') return integer(begin + 2, 8, false);
  bool negative = s[0] == '-';
  const char* digits = begin + (s[0] == '-' || s[0] == '+' ? 1 : 0);
  if (digits != end && std::all_of(digits, end, [](char c) { return c >= '0' && c <= '9'; }))
    return integer(digits, 10, negative);
  // [-+]? ( \. [0-9]+ | [0-9]+ ( \. [0-9]* )? ) ( [eE] [-+]? [0-9]+ )?
  const char* p = digits;
  std::size_t before = 0, after = 0;
  while (p != end && *p >= '0' && *p <= '9') ++p, ++before;
  if (p != end && *p == '.') {
    ++p;
    while (p != end && *p >= '0' && *p <= '9') ++p, ++after;
  }
  if (before == 0 && after == 0) return std::nullopt;
  if (p != end && (*p == 'e' || *p == 'E')) {
    ++p;
    if (p != end && (*p == '-' || *p == '+')) ++p;
    if (p == end) return std::nullopt;
    while (p != end && *p >= '0' && *p <= '9') ++p;
  }
  if (p != end) return std::nullopt;
  double v = 0;
  // from_chars rejects a leading '+'.
  auto [at, ec] = std::from_chars(s[0] == '+' ? begin + 1 : begin, end, v);
  if (at != end || ec != std::errc() || !std::isfinite(v)) return std::nullopt;
  return Json(v);
}

// JSON text is UTF-8 and nlohmann's dump() throws on anything else, so the values made here
// must be too (RFC 3629: no overlongs, no surrogates, nothing above U+10FFFF).
bool validUtf8(std::string_view s) {
  for (std::size_t i = 0; i < s.size();) {
    auto c = static_cast<unsigned char>(s[i]);
    if (c < 0x80) {
      ++i;
      continue;
    }
    std::size_t length = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC2 ? 2 : 0;
    if (length == 0 || c > 0xF4 || i + length > s.size()) return false;
    auto at = [&](std::size_t k) { return static_cast<unsigned char>(s[i + k]); };
    for (std::size_t k = 1; k < length; ++k) {
      if ((at(k) & 0xC0) != 0x80) return false;
    }
    if (c == 0xE0 && at(1) < 0xA0) return false;  // overlong
    if (c == 0xED && at(1) > 0x9F) return false;  // surrogate
    if (c == 0xF0 && at(1) < 0x90) return false;  // overlong
    if (c == 0xF4 && at(1) > 0x8F) return false;  // above U+10FFFF
    i += length;
  }
  return true;
}

class JsonBuilder final : public YAML::EventHandler {
 public:
  JsonBuilder(std::string_view text, const YamlOptions& options) : text_(text), options_(options) {}

  std::vector<Json> take() { return std::move(documents_); }

  void OnDocumentStart(const YAML::Mark& mark) override {
    if (!documents_.empty() && options_.kubectlSubset)
      stop(mark, "multiple YAML documents are not supported");
    documents_.emplace_back(nullptr);
  }
  void OnDocumentEnd() override {}

  void OnNull(const YAML::Mark& mark, YAML::anchor_t anchor) override {
    node(mark, anchor);
    if (inKeyPosition()) stop(mark, "empty mapping key");
    add(mark, Json(nullptr));
  }

  void OnAlias(const YAML::Mark& mark, YAML::anchor_t) override {
    node(mark, 0);
    stop(mark, "anchors and aliases are not supported");
  }

  void OnScalar(const YAML::Mark& mark, const std::string& tag, YAML::anchor_t anchor,
                const std::string& value) override {
    node(mark, anchor);
    // yaml-cpp tags plain scalars "?" and quoted or block scalars "!".
    bool plain = tag == "?";
    if (options_.kubectlSubset) subsetScalar(mark, tag, value);
    if (!validUtf8(value)) stop(mark, "invalid UTF-8");
    if (inKeyPosition()) {
      Frame& map = frames_.back();
      if (map.value.contains(value)) stop(mark, "duplicate key \"" + value + "\"");
      map.key = value;
      return;
    }
    if (!plain && tag != "!") {
      if (tag == "tag:yaml.org,2002:str") return add(mark, Json(value));
      if (!isOneOf(tag, {"tag:yaml.org,2002:int", "tag:yaml.org,2002:float",
                         "tag:yaml.org,2002:bool", "tag:yaml.org,2002:null"}))
        stop(mark, "tags other than !!str, !!int, !!float, !!bool and !!null are not supported");
      plain = true;
    }
    add(mark, plain ? resolvePlain(value) : Json(value));
  }

  void OnSequenceStart(const YAML::Mark& mark, const std::string& tag, YAML::anchor_t anchor,
                       YAML::EmitterStyle::value style) override {
    open(mark, tag, anchor, style, Json::array());
  }
  void OnSequenceEnd() override { close(); }
  void OnMapStart(const YAML::Mark& mark, const std::string& tag, YAML::anchor_t anchor,
                  YAML::EmitterStyle::value style) override {
    open(mark, tag, anchor, style, Json::object());
  }
  void OnMapEnd() override { close(); }

 private:
  struct Frame {
    Json value;
    std::size_t line;      // where the collection starts, 1-based
    bool flow;
    bool stringMap;        // its plain scalar values stay strings
    std::optional<std::string> key;  // a mapping's key waiting for its value
    std::string name;      // the key this collection is the value of ("" if none)
  };

  [[noreturn]] static void stop(const YAML::Mark& mark, std::string message) {
    throw Stop{static_cast<std::size_t>(mark.line) + 1, std::move(message)};
  }

  bool inKeyPosition() const {
    return !frames_.empty() && frames_.back().value.is_object() && !frames_.back().key;
  }

  // Checks common to every node.
  void node(const YAML::Mark& mark, YAML::anchor_t anchor) {
    if (options_.kubectlSubset && !frames_.empty() && frames_.back().flow)
      throw Stop{frames_.back().line, "flow collections are not supported (only {} and [])"};
    if (anchor != YAML::NullAnchor) stop(mark, "anchors and aliases are not supported");
  }

  // What kubectl never writes, refused as the hand-written reader before yaml-cpp did; the
  // source text at the scalar's mark tells its style, which the events do not.
  void subsetScalar(const YAML::Mark& mark, const std::string& tag, const std::string& value) {
    if (tag != "?" && tag != "!") stop(mark, "tags are not supported");
    auto pos = static_cast<std::size_t>(mark.pos);
    char first = pos < text_.size() ? text_[pos] : '\0';
    if (tag == "!" && (first == '|' || first == '>')) stop(mark, "block scalars are not supported");
    if (tag == "!" && (first == '"' || first == '\'')) {
      if (!closesOnItsLine(pos)) stop(mark, "multi-line quoted scalars are not supported");
      return;
    }
    // A plain scalar on one line is its own text; a folded one differs at the line break.
    if (tag == "?" && text_.substr(pos, value.size()) != value) {
      YAML::Mark next = mark;
      ++next.line;
      stop(next, "multi-line scalars are not supported");
    }
  }

  bool closesOnItsLine(std::size_t pos) const {
    char quote = text_[pos];
    for (std::size_t i = pos + 1; i < text_.size() && text_[i] != '\n'; ++i) {
      if (quote == '"' && text_[i] == '\\') {
        ++i;
        continue;
      }
      if (text_[i] != quote) continue;
      if (quote == '\'' && i + 1 < text_.size() && text_[i + 1] == '\'') {
        ++i;
        continue;
      }
      return true;
    }
    return false;
  }

  Json resolvePlain(const std::string& v) const {
    if (isOneOf(v, {"true", "True", "TRUE"})) return Json(true);
    if (isOneOf(v, {"false", "False", "FALSE"})) return Json(false);
    if (isOneOf(v, {"null", "Null", "NULL", "~", ""})) return Json(nullptr);
    bool keepText = options_.untypedScalars || (!frames_.empty() && frames_.back().stringMap);
    if (!keepText) {
      if (auto number = resolveNumber(v)) return std::move(*number);
    }
    return Json(v);
  }

  void open(const YAML::Mark& mark, const std::string& tag, YAML::anchor_t anchor,
            YAML::EmitterStyle::value style, Json empty) {
    node(mark, anchor);
    if (frames_.size() >= options_.maxDepth)
      stop(mark, "nested deeper than " + std::to_string(options_.maxDepth) + " levels");
    if (inKeyPosition()) stop(mark, "mapping keys must be scalars");
    if (tag != "?" && tag != "!" && tag != "tag:yaml.org,2002:map" &&
        tag != "tag:yaml.org,2002:seq")
      stop(mark, options_.kubectlSubset ? "tags are not supported" : "unsupported tag " + tag);
    std::string name;
    if (!frames_.empty() && frames_.back().key) name = *frames_.back().key;
    bool stringMap = empty.is_object() &&
                     std::find(options_.stringMapMembers.begin(), options_.stringMapMembers.end(),
                               name) != options_.stringMapMembers.end();
    frames_.push_back(Frame{std::move(empty), static_cast<std::size_t>(mark.line) + 1,
                            style == YAML::EmitterStyle::Flow, stringMap, std::nullopt,
                            std::move(name)});
  }

  void close() {
    Frame done = std::move(frames_.back());
    frames_.pop_back();
    place(std::move(done.value));
  }

  void add(const YAML::Mark&, Json value) { place(std::move(value)); }

  void place(Json value) {
    if (frames_.empty()) {
      documents_.back() = std::move(value);
      return;
    }
    Frame& top = frames_.back();
    if (top.value.is_array()) {
      top.value.push_back(std::move(value));
    } else {
      top.value[*top.key] = std::move(value);
      top.key.reset();
    }
  }

  std::string_view text_;
  const YamlOptions& options_;
  std::vector<Frame> frames_;
  std::vector<Json> documents_;
};

std::optional<std::size_t> tabIndentedLine(std::string_view text) {
  std::size_t number = 0;
  std::size_t start = 0;
  while (start < text.size()) {
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
  // yaml-cpp's marks count from after a byte order mark; the style checks index the text.
  if (text.substr(0, 3) == "\xEF\xBB\xBF") text.remove_prefix(3);
  // yaml-cpp's own message for a tab in the indentation depends on where it is ("illegal map
  // value", "illegal tab when looking for indentation"); say what is wrong instead.
  if (options.kubectlSubset) {
    if (auto line = tabIndentedLine(text))
      return Error{"line " + std::to_string(*line) + ": tabs are not allowed for indentation"};
  }
  try {
    std::istringstream in{std::string(text)};
    YAML::Parser parser(in);
    JsonBuilder builder(text, options);
    while (parser.HandleNextDocument(builder)) {
    }
    return builder.take();
  } catch (const Stop& stop) {
    return Error{"line " + std::to_string(stop.line) + ": " + stop.message};
  } catch (const YAML::Exception& e) {
    if (e.mark.is_null()) return Error{e.msg};
    return Error{"line " + std::to_string(e.mark.line + 1) + ": " + e.msg};
  } catch (const std::exception& e) {
    // std::bad_alloc and the like: a value, as every error here.
    return Error{std::string("reading YAML: ") + e.what()};
  }
}

}  // namespace nodewarden::kube
