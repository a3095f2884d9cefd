#include "record/decisions.h"

#include <cinttypes>
#include <cstdio>

#include "record/episode.h"

namespace nodewarden::record {
namespace {

using policy::Json;
using policy::OrderedJson;

constexpr std::string_view kCrcMember = ",\"crc32\":\"";

// Days since 1970-01-01 → year, month, day (H. Hinnant's civil_from_days).
void civilFromDays(std::int64_t z, std::int64_t& y, unsigned& m, unsigned& d) {
  z += 719468;
  const std::int64_t era = (z >= 0 ? z : z - 146096) / 146097;
  const unsigned doe = unsigned(z - era * 146097);
  const unsigned yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
  y = std::int64_t(yoe) + era * 400;
  const unsigned doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
  const unsigned mp = (5 * doy + 2) / 153;
  d = doy - (153 * mp + 2) / 5 + 1;
  m = mp < 10 ? mp + 3 : mp - 9;
  if (m <= 2) ++y;
}

std::string hex8(std::uint32_t value) {
  char buffer[9];
  std::snprintf(buffer, sizeof buffer, "%08" PRIx32, value);
  return buffer;
}

// The members in their order, identity first when asked.
OrderedJson recordObject(const DecisionRecord& r, bool identity) {
  OrderedJson out;
  out["time"] = formatRfc3339(r.time);
  if (identity) {
    out["node"] = r.node;
    out["pod"] = r.pod;
    out["uid"] = r.uid;
  }
  out["kind"] = std::string(toString(r.kind));
  out["signal"] = r.signal ? OrderedJson(*r.signal) : OrderedJson(nullptr);
  out["observed"] = r.observed ? OrderedJson(*r.observed) : OrderedJson(nullptr);
  out["threshold"] = r.threshold ? OrderedJson(*r.threshold) : OrderedJson(nullptr);
  out["rank"] = r.rank ? OrderedJson(*r.rank) : OrderedJson(nullptr);
  out["reason"] = r.reason;
  out["latencyMs"] = r.latencyMs ? OrderedJson(*r.latencyMs) : OrderedJson(nullptr);
  out["episode"] = r.episode ? OrderedJson(*r.episode) : OrderedJson(nullptr);
  out["action"] = r.action;
  out["message"] = r.message;
  out["gracePeriodSeconds"] =
      r.gracePeriodSeconds ? OrderedJson(*r.gracePeriodSeconds) : OrderedJson(nullptr);
  return out;
}

std::string withCrc(std::string prefix) {
  // prefix is a JSON object without its closing brace.
  const std::uint32_t crc = crc32(prefix);
  prefix += kCrcMember;
  prefix += hex8(crc);
  prefix += "\"}\n";
  return prefix;
}

// Checks one store line (without its newline); returns its JSON.
Result<Json> checkLine(std::string_view line) {
  const std::size_t at = line.rfind(kCrcMember);
  if (at == std::string_view::npos || line.size() != at + kCrcMember.size() + 10 ||
      line.substr(line.size() - 2) != "\"}") {
    return Error{"a line without its crc32 member"};
  }
  const std::string_view hex = line.substr(at + kCrcMember.size(), 8);
  std::uint32_t expected = 0;
  for (char c : hex) {
    expected <<= 4;
    if (c >= '0' && c <= '9')
      expected |= std::uint32_t(c - '0');
    else if (c >= 'a' && c <= 'f')
      expected |= std::uint32_t(c - 'a' + 10);
    else
      return Error{"a crc32 that is not 8 hex digits"};
  }
  if (crc32(line.substr(0, at)) != expected) return Error{"CRC mismatch (corrupt)"};
  Json json = Json::parse(line, nullptr, /*allow_exceptions=*/false);
  if (json.is_discarded() || !json.is_object()) return Error{"not a JSON object"};
  return json;
}

std::optional<std::string> optionalString(const Json& json, const char* key, std::string& problem) {
  auto it = json.find(key);
  if (it == json.end() || it->is_null()) return std::nullopt;
  if (!it->is_string()) {
    problem = std::string(key) + ": expected a string";
    return std::nullopt;
  }
  return it->get<std::string>();
}

std::optional<std::int64_t> optionalInteger(const Json& json, const char* key,
                                            std::string& problem) {
  auto it = json.find(key);
  if (it == json.end() || it->is_null()) return std::nullopt;
  if (!it->is_number_integer() ||
      (it->is_number_unsigned() && it->get<std::uint64_t>() > std::uint64_t(INT64_MAX))) {
    problem = std::string(key) + ": expected an integer";
    return std::nullopt;
  }
  return it->get<std::int64_t>();
}

}  // namespace

std::string_view toString(DecisionKind kind) {
  switch (kind) {
    case DecisionKind::Eviction:
      return "eviction";
    case DecisionKind::Admission:
      return "admission";
    case DecisionKind::Preemption:
      return "preemption";
    case DecisionKind::KernelOomKill:
      return "kernel-oom-kill";
  }
  return "eviction";
}

std::optional<DecisionKind> parseDecisionKind(std::string_view text) {
  for (DecisionKind kind : {DecisionKind::Eviction, DecisionKind::Admission,
                            DecisionKind::Preemption, DecisionKind::KernelOomKill}) {
    if (toString(kind) == text) return kind;
  }
  return std::nullopt;
}

std::string formatRfc3339(policy::WallMicros micros) {
  std::int64_t seconds = micros / 1'000'000;
  std::int64_t rest = micros % 1'000'000;
  if (rest < 0) {
    rest += 1'000'000;
    --seconds;
  }
  std::int64_t days = seconds / 86400;
  std::int64_t secondOfDay = seconds % 86400;
  if (secondOfDay < 0) {
    secondOfDay += 86400;
    --days;
  }
  std::int64_t year = 0;
  unsigned month = 0, day = 0;
  civilFromDays(days, year, month, day);
  char buffer[64];
  std::snprintf(buffer, sizeof buffer, "%04lld-%02u-%02uT%02d:%02d:%02d.%03dZ",
                static_cast<long long>(year), month, day, int(secondOfDay / 3600),
                int(secondOfDay / 60 % 60), int(secondOfDay % 60), int(rest / 1000));
  return buffer;
}

OrderedJson recordJson(const DecisionRecord& record) {
  return recordObject(record, false);
}

std::string logLine(const DecisionRecord& record) {
  return recordObject(record, true).dump();
}

std::string storeLine(const DecisionRecord& record) {
  OrderedJson object;
  object["v"] = kDecisionsVersion;
  const OrderedJson fields = recordObject(record, true);
  for (const auto& [key, value] : fields.items()) object[key] = value;
  std::string text = object.dump();
  text.pop_back();  // the closing brace: the CRC member goes last
  return withCrc(std::move(text));
}

std::string storeHeaderLine(const std::string& node) {
  OrderedJson header;
  header["format"] = "nodewarden-decisions";
  header["v"] = kDecisionsVersion;
  header["node"] = node;
  std::string text = header.dump();
  text.pop_back();
  return withCrc(std::move(text));
}

std::vector<DecisionRecord> admissionRecords(policy::WallMicros time, const std::string& node,
                                             const std::string& pod, const std::string& uid,
                                             const std::string& verdict, const std::string& reason,
                                             const std::string& message,
                                             const std::vector<std::string>& victims, bool dryRun) {
  std::vector<DecisionRecord> out;
  DecisionRecord r;
  r.time = time;
  r.kind = DecisionKind::Admission;
  r.node = node;
  r.pod = pod;
  r.uid = uid;
  r.action = verdict + (dryRun ? "-dry-run" : "");
  r.reason = reason.empty() ? verdict : reason;
  r.message = message;
  out.push_back(r);
  if (verdict != "preempt") return out;
  std::string list;
  for (const std::string& victim : victims) list += (list.empty() ? "" : ", ") + victim;
  for (const std::string& victim : victims) {
    DecisionRecord v;
    v.time = time;
    v.kind = DecisionKind::Preemption;
    v.node = node;
    v.pod = victim;
    v.action = std::string("preempt") + (dryRun ? "-dry-run" : "");
    v.reason = "preempted to make room for " + pod + " on " + node +
               " (the scheduler's SelectVictimsOnNode: lower priority, fewest PDB violations)";
    v.message = "victims: " + list + (message.empty() ? "" : "; " + message);
    out.push_back(std::move(v));
  }
  return out;
}

Result<DecisionRecord> recordFromJson(const Json& json) {
  if (!json.is_object()) return Error{"a record is a JSON object"};
  DecisionRecord r;
  std::string problem;
  auto kindText = optionalString(json, "kind", problem);
  auto kind = kindText ? parseDecisionKind(*kindText) : std::nullopt;
  if (!kind) return Error{"kind: expected eviction, admission, preemption or kernel-oom-kill"};
  r.kind = *kind;
  auto time = optionalString(json, "time", problem);
  if (!time) return Error{"time: expected an RFC 3339 timestamp"};
  auto parsed = policy::parseRfc3339(*time);
  if (!parsed) return Error{"time: " + parsed.error().message};
  r.time = *parsed;
  r.node = optionalString(json, "node", problem).value_or("");
  r.pod = optionalString(json, "pod", problem).value_or("");
  r.uid = optionalString(json, "uid", problem).value_or("");
  r.signal = optionalString(json, "signal", problem);
  r.observed = optionalInteger(json, "observed", problem);
  r.threshold = optionalInteger(json, "threshold", problem);
  r.rank = optionalInteger(json, "rank", problem);
  r.action = optionalString(json, "action", problem).value_or("");
  r.reason = optionalString(json, "reason", problem).value_or("");
  r.message = optionalString(json, "message", problem).value_or("");
  if (auto it = json.find("latencyMs"); it != json.end() && !it->is_null()) {
    if (!it->is_number())
      problem = "latencyMs: expected a number";
    else
      r.latencyMs = it->get<double>();
  }
  r.gracePeriodSeconds = optionalInteger(json, "gracePeriodSeconds", problem);
  r.episode = optionalString(json, "episode", problem);
  if (!problem.empty()) return Error{problem};
  return r;
}

Result<std::vector<DecisionRecord>> parseStoreFile(std::string_view text, std::size_t* goodBytes) {
  std::vector<DecisionRecord> records;
  std::size_t offset = 0;
  if (goodBytes != nullptr) *goodBytes = 0;
  bool header = true;
  while (offset < text.size()) {
    const std::size_t newline = text.find('\n', offset);
    auto at = [&](const std::string& what) {
      return Error{"offset " + std::to_string(offset) + ": " + what};
    };
    if (newline == std::string_view::npos) return at("a record without its end (a torn append)");
    auto json = checkLine(text.substr(offset, newline - offset));
    if (!json) return at(json.error().message);
    if (header) {
      if (json->value("format", std::string()) != "nodewarden-decisions") {
        return at("not a nodewarden decision store (no header line)");
      }
      if (json->value("v", 0) != kDecisionsVersion) {
        return at("decision store version " + json->value("v", Json()).dump() +
                  " (this nodewarden reads version " + std::to_string(kDecisionsVersion) + ")");
      }
      header = false;
    } else {
      auto record = recordFromJson(*json);
      if (!record) return at(record.error().message);
      records.push_back(std::move(record).value());
    }
    offset = newline + 1;
    if (goodBytes != nullptr) *goodBytes = offset;
  }
  if (header) return Error{"offset 0: an empty file (no header line)"};
  return records;
}

OrderedJson whyJson(const std::string& pod, const std::vector<DecisionRecord>& records) {
  OrderedJson out;
  out["pod"] = pod;
  out["uid"] = records.empty() ? OrderedJson(nullptr) : OrderedJson(records.back().uid);
  out["records"] = OrderedJson::array();
  for (const DecisionRecord& r : records) out["records"].push_back(recordJson(r));
  return out;
}

Result<std::vector<DecisionRecord>> parseWhyJson(std::string_view text) {
  Json json = Json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (json.is_discarded() || !json.is_object() || !json.contains("records") ||
      !json["records"].is_array()) {
    return Error{"expected {\"pod\": …, \"records\": [...]}"};
  }
  std::vector<DecisionRecord> out;
  const std::string pod = json.value("pod", std::string());
  const std::string uid =
      json.contains("uid") && json["uid"].is_string() ? json["uid"].get<std::string>() : "";
  for (std::size_t i = 0; i < json["records"].size(); ++i) {
    auto record = recordFromJson(json["records"][i]);
    if (!record) return Error{"records[" + std::to_string(i) + "]: " + record.error().message};
    if (record->pod.empty()) record->pod = pod;
    if (record->uid.empty()) record->uid = uid;
    out.push_back(std::move(record).value());
  }
  return out;
}

}  // namespace nodewarden::record
