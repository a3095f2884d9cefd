// "Why did my pod die?": one record per decision the node took about a pod — an eviction, an
// admission verdict, a preemption — and per kernel OOM kill it saw (docs/recording.md "The
// decision records"). The same record is
//   - a line of the durable store under STATE_DIR/decisions/ (JSON, with a CRC-32 member),
//   - a line of --decision-log (JSON Lines for the OpenTelemetry Collector, Loki, Vector),
//   - an item of `why -o json` and of GET /v1/decisions.
// Pure: formatting and parsing only.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"
#include "policy/json_reader.h"
#include "policy/times.h"

namespace nodewarden::record {

inline constexpr int kDecisionsVersion = 1;
inline constexpr std::string_view kDecisionsSuffix = ".nwdr";

enum class DecisionKind { Eviction, Admission, Preemption, KernelOomKill };
std::string_view toString(DecisionKind kind);  // "eviction", "admission", …
std::optional<DecisionKind> parseDecisionKind(std::string_view text);

struct DecisionRecord {
  policy::WallMicros time = 0;
  DecisionKind kind = DecisionKind::Eviction;
  std::string node;
  std::string pod;  // "namespace/name"
  std::string uid;
  // What was measured against what: the signal's available figure and the threshold
  // (evictions), the pod's rank in the eviction order (1 = first).
  std::optional<std::string> signal;
  std::optional<std::int64_t> observed;
  std::optional<std::int64_t> threshold;
  std::optional<std::int64_t> rank;
  // The decision in one word: evict, evict-dry-run, admit, reject, wait, preempt, oom-kill.
  std::string action;
  std::string reason;   // why, in a sentence (the kubelet's eviction message, §5's reason…)
  std::string message;  // more detail when there is some (an admission's message)
  std::optional<double> latencyMs;  // threshold crossing → kill signal sent (evictions)
  std::optional<std::int64_t> gracePeriodSeconds;
  std::optional<std::string> episode;  // the episode file that holds its inputs
};

// RFC 3339 in UTC with milliseconds ("2026-05-01T10:00:00.123Z").
std::string formatRfc3339(policy::WallMicros micros);

// The record as `why -o json` lists it: time, kind, signal, observed, threshold, rank,
// reason, latencyMs, episode, then action, message, gracePeriodSeconds.
policy::OrderedJson recordJson(const DecisionRecord& record);
// A --decision-log line (no newline): the record with node, pod and uid after the time, flat,
// so that a log pipeline reads it without a parser of its own.
std::string logLine(const DecisionRecord& record);
// A line of the durable store: logLine's object with "v" and a trailing "crc32" member (the
// CRC-32 of the line up to that member, in 8 hex digits), and a newline.
std::string storeLine(const DecisionRecord& record);
// The first line of a store file.
std::string storeHeaderLine(const std::string& node);

// The records of one admission verdict (docs/reference.md §5): one for the pod, and for
// `preempt` one per victim ("preemption": the pod it makes room for, its priority).
std::vector<DecisionRecord> admissionRecords(policy::WallMicros time, const std::string& node,
                                             const std::string& pod, const std::string& uid,
                                             const std::string& verdict, const std::string& reason,
                                             const std::string& message,
                                             const std::vector<std::string>& victims, bool dryRun);

// A record from its JSON (any of the three shapes above; node/pod/uid optional).
Result<DecisionRecord> recordFromJson(const policy::Json& json);

// Every record of one store file. A line that does not end (a torn append), does not parse,
// or whose CRC does not match is an error naming its byte offset ("offset 812: …").
// `goodBytes` (optional) receives the length of the valid prefix (for repair).
Result<std::vector<DecisionRecord>> parseStoreFile(std::string_view text,
                                                   std::size_t* goodBytes = nullptr);

// The records of `pod` ("ns/name"), oldest first, as `why -o json` prints them:
// {"pod", "uid" (the newest record's), "records": [...]}.
policy::OrderedJson whyJson(const std::string& pod, const std::vector<DecisionRecord>& records);
// A `why` document (the route's answer or `why -o json`) back into records.
Result<std::vector<DecisionRecord>> parseWhyJson(std::string_view text);

}  // namespace nodewarden::record
