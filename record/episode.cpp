#include "record/episode.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>

#include "record/binary.h"

namespace nodewarden::record {
namespace {

using policy::Json;
using policy::OrderedJson;
using policy::Signal;

constexpr std::size_t kSignalCount = std::size(policy::kAllSignals);
// A frame larger than this is corrupt, whatever its CRC says (a sample of 10,000 pods is
// about 100 KB).
constexpr std::uint32_t kMaxFrame = 64u << 20;
// Times stay within ±2^62 ns of the origin (146 years) and a pod's figures below 2^46 (64
// TiB), so that differences and sums over a sample's pods never overflow.
constexpr std::int64_t kMaxTime = std::int64_t(1) << 62;
constexpr std::uint64_t kMaxPodFigure = std::uint64_t(1) << 46;
constexpr std::size_t kMaxPods = 1 << 16;

std::array<std::uint32_t, 256> makeCrcTable() {
  std::array<std::uint32_t, 256> table{};
  for (std::uint32_t i = 0; i < 256; ++i) {
    std::uint32_t c = i;
    for (int k = 0; k < 8; ++k) c = (c & 1) ? 0xedb88320u ^ (c >> 1) : c >> 1;
    table[i] = c;
  }
  return table;
}

std::string frame(FrameType type, std::string_view payload) {
  std::string out;
  out.reserve(payload.size() + 9);
  ByteWriter w(out);
  w.u8(std::uint8_t(type));
  w.u32(std::uint32_t(payload.size()));
  out.append(payload);
  w.u32(crc32(out));
  return out;
}

std::string jsonFrame(FrameType type, const OrderedJson& json) {
  return frame(type, json.dump());
}

std::uint8_t signalCode(Signal signal) {
  return std::uint8_t(signal);
}
std::optional<Signal> signalFromCode(unsigned code) {
  if (code >= kSignalCount) return std::nullopt;
  return policy::kAllSignals[code];
}

const char* qosText(policy::QosClass qos) {
  return policy::qosClassName(qos);
}
std::optional<policy::QosClass> qosFromText(const std::string& text) {
  for (policy::QosClass qos :
       {policy::QosClass::Guaranteed, policy::QosClass::Burstable, policy::QosClass::BestEffort}) {
    if (text == policy::qosClassName(qos)) return qos;
  }
  return std::nullopt;
}

// ---- node figures: a fixed list of optional fields, each a delta from the sample before ----

constexpr int kNodeFields = 17;
constexpr int kPressureBit = 17;
constexpr int kEventsBit = 18;

// A copy of the node figures in the uniform shape above (capacity and allocatable as u64).
struct FlatNode {
  std::array<std::optional<std::uint64_t>, kNodeFields> v;
  bool imageFs = false;
};

FlatNode flatten(const NodeFigures& n) {
  FlatNode f;
  const policy::NodeStats& s = n.stats;
  f.v[0] = s.memoryAvailableBytes;
  f.v[1] = s.memoryWorkingSetBytes;
  f.v[2] = s.podsMemoryAvailableBytes;
  f.v[3] = s.podsMemoryWorkingSetBytes;
  f.v[4] = s.nodeFs.availableBytes;
  f.v[5] = s.nodeFs.capacityBytes;
  f.v[6] = s.nodeFs.inodesFree;
  f.v[7] = s.nodeFs.inodes;
  f.imageFs = s.imageFs.has_value();
  if (s.imageFs) {
    f.v[9] = s.imageFs->availableBytes;
    f.v[10] = s.imageFs->capacityBytes;
    f.v[11] = s.imageFs->inodesFree;
    f.v[12] = s.imageFs->inodes;
  }
  f.v[13] = s.maxPid;
  f.v[14] = s.curProc;
  if (n.capacityMemory) f.v[15] = std::uint64_t(*n.capacityMemory);
  if (n.allocatableMemory) f.v[16] = std::uint64_t(*n.allocatableMemory);
  return f;
}

NodeFigures unflatten(const FlatNode& f) {
  NodeFigures n;
  policy::NodeStats& s = n.stats;
  s.memoryAvailableBytes = f.v[0];
  s.memoryWorkingSetBytes = f.v[1];
  s.podsMemoryAvailableBytes = f.v[2];
  s.podsMemoryWorkingSetBytes = f.v[3];
  s.nodeFs.availableBytes = f.v[4];
  s.nodeFs.capacityBytes = f.v[5];
  s.nodeFs.inodesFree = f.v[6];
  s.nodeFs.inodes = f.v[7];
  if (f.imageFs) {
    s.imageFs.emplace();
    s.imageFs->availableBytes = f.v[9];
    s.imageFs->capacityBytes = f.v[10];
    s.imageFs->inodesFree = f.v[11];
    s.imageFs->inodes = f.v[12];
  }
  s.maxPid = f.v[13];
  s.curProc = f.v[14];
  if (f.v[15]) n.capacityMemory = std::int64_t(*f.v[15]);
  if (f.v[16]) n.allocatableMemory = std::int64_t(*f.v[16]);
  return n;
}

// ---- pod figures ----

constexpr int kPodFields = 6;
std::array<std::optional<std::uint64_t>, kPodFields> podFields(const PodFigures& p) {
  return {p.workingSet, p.usage, p.swap, p.processes, p.ephemeralStorage, p.inodes};
}
void setPodFields(PodFigures& p, const std::array<std::optional<std::uint64_t>, kPodFields>& v) {
  p.workingSet = v[0];
  p.usage = v[1];
  p.swap = v[2];
  p.processes = v[3];
  p.ephemeralStorage = v[4];
  p.inodes = v[5];
}
std::uint8_t presenceOf(const std::array<std::optional<std::uint64_t>, kPodFields>& v) {
  std::uint8_t mask = 0;
  for (int i = 0; i < kPodFields; ++i) {
    if (v[i]) mask |= std::uint8_t(1u << i);
  }
  return mask;
}

std::int64_t hundredths(double value) {
  return std::llround(value * 100.0);
}

OrderedJson keyJson(const policy::ThresholdKey& key) {
  return {{"signal", std::string(policy::toString(key.signal))},
          {"kind", key.hard ? "hard" : "soft"}};
}

// ---- JSON readers for the frames: every field checked, never a throw ----

struct JsonFields {
  const Json& json;
  std::string problem;

  bool has(const char* key) const { return json.is_object() && json.contains(key); }
  std::int64_t integer(const char* key, std::int64_t fallback = 0) {
    if (!has(key)) return fallback;
    const Json& v = json[key];
    if (v.is_number_integer()) {
      if (v.is_number_unsigned() && v.get<std::uint64_t>() > std::uint64_t(INT64_MAX)) {
        problem = std::string(key) + ": out of range";
        return fallback;
      }
      return v.get<std::int64_t>();
    }
    problem = std::string(key) + ": expected an integer";
    return fallback;
  }
  double number(const char* key, double fallback = 0) {
    if (!has(key)) return fallback;
    const Json& v = json[key];
    if (v.is_number()) return v.get<double>();
    problem = std::string(key) + ": expected a number";
    return fallback;
  }
  std::string string(const char* key) {
    if (!has(key)) return {};
    const Json& v = json[key];
    if (v.is_string()) return v.get<std::string>();
    if (!v.is_null()) problem = std::string(key) + ": expected a string";
    return {};
  }
  bool boolean(const char* key) {
    if (!has(key)) return false;
    const Json& v = json[key];
    if (v.is_boolean()) return v.get<bool>();
    problem = std::string(key) + ": expected true or false";
    return false;
  }
  std::optional<policy::ThresholdKey> key(const Json& item) {
    if (!item.is_object() || !item.contains("signal") || !item["signal"].is_string()) {
      problem = "expected {\"signal\", \"kind\"}";
      return std::nullopt;
    }
    auto signal = policy::parseSignal(item["signal"].get<std::string>());
    if (!signal) {
      problem = "unknown signal " + item["signal"].dump();
      return std::nullopt;
    }
    const bool hard = !(item.contains("kind") && item["kind"] == "soft");
    return policy::ThresholdKey{*signal, hard};
  }
};

}  // namespace

std::uint32_t crc32(std::string_view bytes, std::uint32_t crc) {
  static const std::array<std::uint32_t, 256> table = makeCrcTable();
  crc = ~crc;
  for (char c : bytes) crc = table[(crc ^ std::uint8_t(c)) & 0xff] ^ (crc >> 8);
  return ~crc;
}

bool samePolicy(const policy::Policy& a, const policy::Policy& b) {
  if (a.thresholds.size() != b.thresholds.size()) return false;
  for (std::size_t i = 0; i < a.thresholds.size(); ++i) {
    const policy::Threshold& x = a.thresholds[i];
    const policy::Threshold& y = b.thresholds[i];
    if (x.signal != y.signal || x.gracePeriod != y.gracePeriod ||
        x.value.quantity != y.value.quantity || x.value.percentage != y.value.percentage ||
        x.value.text != y.value.text || x.minReclaim.quantity != y.minReclaim.quantity ||
        x.minReclaim.percentage != y.minReclaim.percentage) {
      return false;
    }
  }
  return a.maxPodGracePeriodSeconds == b.maxPodGracePeriodSeconds &&
         a.pressureTransitionPeriod == b.pressureTransitionPeriod &&
         a.maxPodsPerCycle == b.maxPodsPerCycle && a.ranking == b.ranking &&
         a.housekeepingInterval == b.housekeepingInterval &&
         a.neverEvictPriority == b.neverEvictPriority &&
         a.memoryRankingCountsSwap == b.memoryRankingCountsSwap;
}

// ---- encoding ----

std::string EpisodeEncoder::begin(const Episode& header) {
  std::string out(kEpisodeMagic);
  ByteWriter w(out);
  w.u16(kEpisodeVersion);
  w.u16(0);
  OrderedJson json;
  json["format"] = "nodewarden-episode";
  json["version"] = kEpisodeVersion;
  json["node"] = header.node;
  json["nodewarden"] = header.nodewardenVersion;
  json["originWallMicros"] = header.originWallMicros;
  json["cgroups"] = header.cgroups;
  json["dryRun"] = header.dryRun;
  json["prerollNanos"] = header.prerollNanos;
  json["reason"] = header.reason;
  out += jsonFrame(FrameType::Header, json);
  previous_ = Sample{};
  havePrevious_ = false;
  lastByPod_.clear();
  haveLastByPod_.clear();
  return out;
}

std::string EpisodeEncoder::policy(std::size_t sample, const policy::Policy& p) {
  OrderedJson json;
  json["sample"] = sample;
  json["policy"] = policy::policyToJson(p);
  return jsonFrame(FrameType::Policy, json);
}

std::string EpisodeEncoder::pod(std::uint32_t index, const PodInfo& pod) {
  OrderedJson json;
  json["index"] = index;
  json["uid"] = pod.uid;
  json["namespace"] = pod.ns;
  json["name"] = pod.name;
  json["priority"] = pod.priority;
  json["qos"] = qosText(pod.qos);
  json["critical"] = pod.critical;
  json["terminating"] = pod.terminating;
  json["requests"] = {{"memory", pod.memoryRequest}, {"ephemeral-storage", pod.storageRequest}};
  json["terminationGracePeriodSeconds"] = pod.terminationGracePeriodSeconds;
  return jsonFrame(FrameType::Pod, json);
}

std::string EpisodeEncoder::state(const InitialState& state) {
  OrderedJson json;
  json["firstObservedAt"] = OrderedJson::array();
  for (const auto& since : state.firstObservedAt) {
    OrderedJson item = keyJson(since.key);
    item["t"] = since.t;
    json["firstObservedAt"].push_back(item);
  }
  json["met"] = OrderedJson::array();
  for (const auto& key : state.met) json["met"].push_back(keyJson(key));
  json["conditionLastObservedAt"] = OrderedJson::object();
  for (const auto& [condition, t] : state.conditionLastObservedAt) {
    json["conditionLastObservedAt"][condition] = t;
  }
  return jsonFrame(FrameType::State, json);
}

std::string EpisodeEncoder::sample(const Sample& s) {
  std::string payload;
  ByteWriter w(payload);
  w.svarint(s.t - (havePrevious_ ? previous_.t : 0));

  // Node figures.
  const FlatNode now = flatten(s.node);
  const FlatNode before = havePrevious_ ? flatten(previous_.node) : FlatNode{};
  std::uint64_t mask = 0;
  for (int i = 0; i < kNodeFields; ++i) {
    if (i == 8 ? now.imageFs : now.v[i].has_value()) mask |= 1ull << i;
  }
  if (s.pressure) mask |= 1ull << kPressureBit;
  if (s.events) mask |= 1ull << kEventsBit;
  w.varint(mask);
  for (int i = 0; i < kNodeFields; ++i) {
    if (i == 8 || !now.v[i]) continue;
    w.delta(*now.v[i], before.v[i].value_or(0));
  }
  if (s.pressure) {
    const Pressure prev = (havePrevious_ && previous_.pressure) ? *previous_.pressure : Pressure{};
    w.svarint(hundredths(s.pressure->someAvg10));
    w.svarint(hundredths(s.pressure->fullAvg10));
    w.delta(s.pressure->someTotalMicros, prev.someTotalMicros);
    w.delta(s.pressure->fullTotalMicros, prev.fullTotalMicros);
  }
  if (s.events) {
    const MemoryEvents prev =
        (havePrevious_ && previous_.events) ? *previous_.events : MemoryEvents{};
    w.delta(s.events->high, prev.high);
    w.delta(s.events->max, prev.max);
    w.delta(s.events->oom, prev.oom);
    w.delta(s.events->oomKill, prev.oomKill);
  }

  // Pods: the list of pod entries when it changed, then a bitmap of the pods whose figures
  // or candidacy changed, then their changes.
  bool sameList = havePrevious_ && previous_.pods.size() == s.pods.size();
  for (std::size_t i = 0; sameList && i < s.pods.size(); ++i) {
    sameList = previous_.pods[i].pod == s.pods[i].pod;
  }
  w.u8(sameList ? 0 : 1);
  if (!sameList) {
    w.varint(s.pods.size());
    std::int64_t last = 0;
    for (const PodFigures& p : s.pods) {
      w.svarint(std::int64_t(p.pod) - last);
      last = p.pod;
    }
  }
  std::string bitmap((s.pods.size() + 7) / 8, '\0');
  std::string changes;
  ByteWriter c(changes);
  for (std::size_t i = 0; i < s.pods.size(); ++i) {
    const PodFigures& p = s.pods[i];
    if (p.pod >= lastByPod_.size()) {
      lastByPod_.resize(p.pod + 1);
      haveLastByPod_.resize(p.pod + 1, false);
    }
    const auto fields = podFields(p);
    const bool have = haveLastByPod_[p.pod];
    const PodFigures last = have ? lastByPod_[p.pod] : PodFigures{};
    const auto lastFields = podFields(last);
    std::uint8_t head = p.candidate ? 0x40 : 0;
    for (int f = 0; f < kPodFields; ++f) {
      if (fields[f] != lastFields[f]) head |= std::uint8_t(1u << f);
    }
    const bool presenceChanged = !have || presenceOf(fields) != presenceOf(lastFields);
    if (presenceChanged) head |= 0x80;
    const bool candidacyChanged = !have || last.candidate != p.candidate;
    if ((head & 0xbf) == 0 && !candidacyChanged) continue;
    bitmap[i / 8] = char(std::uint8_t(bitmap[i / 8]) | (1u << (i % 8)));
    c.u8(head);
    if (presenceChanged) c.u8(presenceOf(fields));
    for (int f = 0; f < kPodFields; ++f) {
      if ((head & (1u << f)) && fields[f]) c.delta(*fields[f], lastFields[f].value_or(0));
    }
    lastByPod_[p.pod] = p;
    haveLastByPod_[p.pod] = true;
  }
  const bool anyChange = changes.size() > 0;
  w.u8(anyChange ? 1 : 0);
  if (anyChange) {
    payload += bitmap;
    payload += changes;
  }

  // The thresholds' observations.
  w.varint(s.signals.size());
  for (std::size_t i = 0; i < s.signals.size(); ++i) {
    const SignalObservation& o = s.signals[i];
    const SignalObservation* prev = nullptr;
    if (havePrevious_ && i < previous_.signals.size() && previous_.signals[i].signal == o.signal &&
        previous_.signals[i].hard == o.hard) {
      prev = &previous_.signals[i];
    }
    w.u8(std::uint8_t(signalCode(o.signal) | (o.hard ? 0x08 : 0) | (o.met ? 0x10 : 0) |
                      (o.actionable ? 0x20 : 0)));
    w.delta(std::uint64_t(o.available), prev ? std::uint64_t(prev->available) : 0);
    w.delta(std::uint64_t(o.capacity), prev ? std::uint64_t(prev->capacity) : 0);
    w.delta(std::uint64_t(o.threshold), prev ? std::uint64_t(prev->threshold) : 0);
  }

  // The plan.
  w.varint(s.plan.size());
  for (const PlannedEviction& e : s.plan) {
    w.varint(e.pod);
    w.u8(std::uint8_t(signalCode(e.signal) | (e.hard ? 0x08 : 0) | (e.ordered ? 0x10 : 0)));
    w.svarint(e.gracePeriodSeconds);
  }

  previous_ = s;
  havePrevious_ = true;
  return frame(FrameType::Sample, payload);
}

std::string EpisodeEncoder::order(const Order& o, const PodInfo& pod) {
  OrderedJson json;
  json["kind"] = "order";
  json["sample"] = o.sample;
  json["t"] = o.t;
  json["pod"] = o.pod;
  json["key"] = pod.key();
  json["uid"] = pod.uid;
  json["signal"] = std::string(policy::toString(o.signal));
  json["hard"] = o.hard;
  json["gracePeriodSeconds"] = o.gracePeriodSeconds;
  json["usage"] = o.usage;
  json["request"] = o.request;
  json["observed"] = o.observed;
  json["threshold"] = o.threshold;
  json["rank"] = o.rank;
  json["latencyMs"] = o.latencyMs;
  json["dryRun"] = o.dryRun;
  json["message"] = o.message;
  return jsonFrame(FrameType::Event, json);
}

std::string EpisodeEncoder::oomKill(const OomKill& k, const PodInfo* pod) {
  OrderedJson json;
  json["kind"] = "oom-kill";
  json["sample"] = k.sample;
  json["t"] = k.t;
  if (k.pod && pod != nullptr) {
    json["pod"] = *k.pod;
    json["key"] = pod->key();
    json["uid"] = pod->uid;
  } else {
    json["pod"] = nullptr;
  }
  json["count"] = k.count;
  json["limit"] = k.limit;
  return jsonFrame(FrameType::Event, json);
}

std::string EpisodeEncoder::outcome(const Outcome& o, const PodInfo& pod) {
  OrderedJson json;
  json["kind"] = "outcome";
  json["t"] = o.t;
  json["pod"] = o.pod;
  json["key"] = pod.key();
  json["emptied"] = o.emptied;
  json["method"] = o.method;
  json["elapsedMs"] = o.elapsedMs;
  return jsonFrame(FrameType::Event, json);
}

std::string EpisodeEncoder::end(const std::string& reason, std::int64_t t, std::size_t samples,
                                std::size_t orders, std::size_t oomKills) {
  OrderedJson json;
  json["reason"] = reason;
  json["t"] = t;
  json["samples"] = samples;
  json["orders"] = orders;
  json["oomKills"] = oomKills;
  return jsonFrame(FrameType::End, json);
}

std::string encodeEpisode(const Episode& episode) {
  EpisodeEncoder encoder;
  std::string out = encoder.begin(episode);
  std::size_t nextPolicy = 0, nextOrder = 0, nextKill = 0, nextOutcome = 0;
  out += encoder.state(episode.state);
  for (std::uint32_t i = 0; i < episode.pods.size(); ++i) out += encoder.pod(i, episode.pods[i]);
  for (std::size_t i = 0; i < episode.samples.size(); ++i) {
    while (nextPolicy < episode.policies.size() && episode.policies[nextPolicy].sample <= i) {
      out += encoder.policy(i, episode.policies[nextPolicy++].policy);
    }
    out += encoder.sample(episode.samples[i]);
    // Events belong after their sample.
    while (nextOrder < episode.orders.size() && episode.orders[nextOrder].sample <= i) {
      const Order& o = episode.orders[nextOrder++];
      if (o.pod < episode.pods.size()) out += encoder.order(o, episode.pods[o.pod]);
    }
    while (nextKill < episode.oomKills.size() && episode.oomKills[nextKill].sample <= i) {
      const OomKill& k = episode.oomKills[nextKill++];
      const PodInfo* pod = k.pod && *k.pod < episode.pods.size() ? &episode.pods[*k.pod] : nullptr;
      out += encoder.oomKill(k, pod);
    }
    while (nextOutcome < episode.outcomes.size() &&
           sampleAt(episode, episode.outcomes[nextOutcome].t) <= i) {
      const Outcome& o = episode.outcomes[nextOutcome++];
      if (o.pod < episode.pods.size()) out += encoder.outcome(o, episode.pods[o.pod]);
    }
  }
  while (nextOutcome < episode.outcomes.size()) {
    const Outcome& o = episode.outcomes[nextOutcome++];
    if (o.pod < episode.pods.size()) out += encoder.outcome(o, episode.pods[o.pod]);
  }
  out += encoder.end(episode.endReason, episode.endT, episode.samples.size(), episode.orders.size(),
                     episode.oomKills.size());
  return out;
}

// ---- decoding ----

namespace {

class Decoder {
 public:
  explicit Decoder(std::string_view bytes) : bytes_(bytes) {}

  Result<Episode> run() {
    if (bytes_.size() < kEpisodeMagic.size() + 4 ||
        bytes_.substr(0, kEpisodeMagic.size()) != kEpisodeMagic) {
      return Error{"offset 0: not a nodewarden episode (no \"NWEPISOD\" magic)"};
    }
    ByteReader head(bytes_.substr(kEpisodeMagic.size(), 4));
    episode_.version = head.u16();
    if (episode_.version != kEpisodeVersion) {
      return Error{"offset 8: episode format version " + std::to_string(episode_.version) +
                   " (this nodewarden reads version " + std::to_string(kEpisodeVersion) + ")"};
    }
    std::size_t offset = kEpisodeMagic.size() + 4;
    bool ended = false, headerSeen = false;
    while (offset < bytes_.size()) {
      if (ended) return at(offset, "bytes after the END frame");
      if (bytes_.size() - offset < 9) return at(offset, "truncated frame (the file is torn)");
      ByteReader r(bytes_.substr(offset, 5));
      const std::uint8_t type = r.u8();
      const std::uint32_t length = r.u32();
      if (length > kMaxFrame)
        return at(offset, "frame length " + std::to_string(length) + " is too large");
      if (bytes_.size() - offset - 9 < length)
        return at(offset, "truncated frame (the file is torn)");
      const std::string_view whole = bytes_.substr(offset, 5 + length);
      ByteReader crcReader(bytes_.substr(offset + 5 + length, 4));
      if (crc32(whole) != crcReader.u32()) return at(offset, "frame CRC mismatch (corrupt)");
      const std::string_view payload = whole.substr(5);
      if (!headerSeen && type != std::uint8_t(FrameType::Header)) {
        return at(offset, "the first frame is not the HEADER");
      }
      Result<void> done = Error{""};
      switch (FrameType(type)) {
        case FrameType::Header:
          if (headerSeen) return at(offset, "a second HEADER frame");
          headerSeen = true;
          done = header(payload);
          break;
        case FrameType::Policy:
          done = policyFrame(payload);
          break;
        case FrameType::Pod:
          done = pod(payload);
          break;
        case FrameType::State:
          done = state(payload);
          break;
        case FrameType::Sample:
          done = sample(payload);
          break;
        case FrameType::Event:
          done = event(payload);
          break;
        case FrameType::End:
          done = end(payload);
          ended = true;
          break;
        default:
          return at(offset, "unknown frame type " + std::to_string(type));
      }
      if (!done) return at(offset, done.error().message);
      offset += 9 + length;
    }
    if (!ended) return at(bytes_.size(), "the file ends without its END frame (torn)");
    return std::move(episode_);
  }

 private:
  static Error at(std::size_t offset, const std::string& what) {
    return Error{"offset " + std::to_string(offset) + ": " + what};
  }

  static std::optional<Json> parse(std::string_view payload) {
    Json json = Json::parse(payload, nullptr, /*allow_exceptions=*/false);
    if (json.is_discarded() || !json.is_object()) return std::nullopt;
    return json;
  }

  Result<void> header(std::string_view payload) {
    auto json = parse(payload);
    if (!json) return Error{"HEADER: not a JSON object"};
    JsonFields f{*json, {}};
    if (f.string("format") != "nodewarden-episode")
      return Error{"HEADER: format is not nodewarden-episode"};
    episode_.node = f.string("node");
    episode_.nodewardenVersion = f.string("nodewarden");
    episode_.originWallMicros = f.integer("originWallMicros");
    episode_.cgroups = f.string("cgroups");
    episode_.dryRun = f.boolean("dryRun");
    episode_.prerollNanos = f.integer("prerollNanos");
    episode_.reason = f.string("reason");
    if (!f.problem.empty()) return Error{"HEADER: " + f.problem};
    return {};
  }

  Result<void> policyFrame(std::string_view payload) {
    auto json = parse(payload);
    if (!json) return Error{"POLICY: not a JSON object"};
    JsonFields f{*json, {}};
    const std::int64_t sample = f.integer("sample", -1);
    if (!f.problem.empty() || sample < 0 || std::size_t(sample) != episode_.samples.size()) {
      return Error{"POLICY: sample must be the next sample's index (" +
                   std::to_string(episode_.samples.size()) + ")"};
    }
    if (!json->contains("policy")) return Error{"POLICY: no policy"};
    policy::Diagnostics diagnostics;
    auto parsed = policy::parsePolicy((*json)["policy"], diagnostics);
    if (!parsed) return Error{"POLICY: " + diagnostics.joined()};
    episode_.policies.push_back(
        PolicyChange{std::size_t(sample), (*json)["policy"].dump(), std::move(*parsed)});
    return {};
  }

  Result<void> pod(std::string_view payload) {
    auto json = parse(payload);
    if (!json) return Error{"POD: not a JSON object"};
    JsonFields f{*json, {}};
    const std::int64_t index = f.integer("index", -1);
    if (index != std::int64_t(episode_.pods.size())) {
      return Error{"POD: index must be " + std::to_string(episode_.pods.size())};
    }
    PodInfo pod;
    pod.uid = f.string("uid");
    pod.ns = f.string("namespace");
    pod.name = f.string("name");
    const std::int64_t priority = f.integer("priority");
    if (priority < INT32_MIN || priority > INT32_MAX) return Error{"POD: priority out of range"};
    pod.priority = std::int32_t(priority);
    auto qos = qosFromText(f.string("qos"));
    if (!qos) return Error{"POD: qos must be Guaranteed, Burstable or BestEffort"};
    pod.qos = *qos;
    pod.critical = f.boolean("critical");
    pod.terminating = f.boolean("terminating");
    if (json->contains("requests")) {
      JsonFields requests{(*json)["requests"], {}};
      pod.memoryRequest = requests.integer("memory");
      pod.storageRequest = requests.integer("ephemeral-storage");
      if (!requests.problem.empty()) return Error{"POD: requests." + requests.problem};
    }
    pod.terminationGracePeriodSeconds = f.integer("terminationGracePeriodSeconds", 30);
    if (!f.problem.empty()) return Error{"POD: " + f.problem};
    if (pod.uid.empty() || pod.name.empty()) return Error{"POD: uid and name are required"};
    episode_.pods.push_back(std::move(pod));
    return {};
  }

  Result<void> state(std::string_view payload) {
    auto json = parse(payload);
    if (!json) return Error{"STATE: not a JSON object"};
    if (!episode_.samples.empty()) return Error{"STATE: after the first sample"};
    JsonFields f{*json, {}};
    InitialState& s = episode_.state;
    s = InitialState{};
    if (json->contains("firstObservedAt") && (*json)["firstObservedAt"].is_array()) {
      for (const Json& item : (*json)["firstObservedAt"]) {
        auto key = f.key(item);
        if (!key) return Error{"STATE: firstObservedAt: " + f.problem};
        JsonFields t{item, {}};
        s.firstObservedAt.push_back({*key, t.integer("t")});
        if (!t.problem.empty()) return Error{"STATE: firstObservedAt: " + t.problem};
        const std::int64_t since = s.firstObservedAt.back().t;
        if (since > kMaxTime || since < -kMaxTime) return Error{"STATE: a time beyond 2^62 ns"};
      }
    }
    if (json->contains("met") && (*json)["met"].is_array()) {
      for (const Json& item : (*json)["met"]) {
        auto key = f.key(item);
        if (!key) return Error{"STATE: met: " + f.problem};
        s.met.push_back(*key);
      }
    }
    if (json->contains("conditionLastObservedAt") &&
        (*json)["conditionLastObservedAt"].is_object()) {
      for (const auto& [condition, value] : (*json)["conditionLastObservedAt"].items()) {
        if (!value.is_number_integer() ||
            (value.is_number_unsigned() && value.get<std::uint64_t>() > std::uint64_t(kMaxTime))) {
          return Error{"STATE: conditionLastObservedAt: expected integers"};
        }
        const std::int64_t t = value.get<std::int64_t>();
        if (t > kMaxTime || t < -kMaxTime) return Error{"STATE: a time beyond 2^62 ns"};
        s.conditionLastObservedAt.emplace_back(condition, t);
      }
    }
    return {};
  }

  Result<void> sample(std::string_view payload) {
    if (episode_.policies.empty()) return Error{"SAMPLE: before any POLICY frame"};
    ByteReader r(payload);
    Sample s;
    const Sample* prev = episode_.samples.empty() ? nullptr : &episode_.samples.back();
    const std::int64_t dt = r.svarint();
    if (__builtin_add_overflow(prev ? prev->t : 0, dt, &s.t) || s.t > kMaxTime || s.t < -kMaxTime) {
      return Error{"SAMPLE: a time beyond 2^62 ns"};
    }

    const std::uint64_t mask = r.varint();
    if (mask >> (kEventsBit + 1)) return Error{"SAMPLE: unknown node figures in the mask"};
    const FlatNode before = prev ? flatten(prev->node) : FlatNode{};
    FlatNode now;
    now.imageFs = (mask >> 8) & 1;
    for (int i = 0; i < kNodeFields; ++i) {
      if (i == 8 || !((mask >> i) & 1)) continue;
      now.v[i] = r.delta(before.v[i].value_or(0));
    }
    s.node = unflatten(now);
    if ((mask >> kPressureBit) & 1) {
      const Pressure p = (prev && prev->pressure) ? *prev->pressure : Pressure{};
      Pressure pressure;
      pressure.someAvg10 = double(r.svarint()) / 100.0;
      pressure.fullAvg10 = double(r.svarint()) / 100.0;
      pressure.someTotalMicros = r.delta(p.someTotalMicros);
      pressure.fullTotalMicros = r.delta(p.fullTotalMicros);
      s.pressure = pressure;
    }
    if ((mask >> kEventsBit) & 1) {
      const MemoryEvents e = (prev && prev->events) ? *prev->events : MemoryEvents{};
      MemoryEvents events;
      events.high = r.delta(e.high);
      events.max = r.delta(e.max);
      events.oom = r.delta(e.oom);
      events.oomKill = r.delta(e.oomKill);
      s.events = events;
    }

    // Pods.
    const std::uint8_t listMode = r.u8();
    if (listMode == 0) {
      if (prev == nullptr) return Error{"SAMPLE: the first sample must list its pods"};
      s.pods.resize(prev->pods.size());
      for (std::size_t i = 0; i < s.pods.size(); ++i) s.pods[i].pod = prev->pods[i].pod;
    } else if (listMode == 1) {
      const std::uint64_t count = r.varint();
      if (count > r.remaining() || count > kMaxPods)
        return Error{"SAMPLE: pod count beyond the frame"};
      s.pods.resize(count);
      std::int64_t last = 0;
      for (PodFigures& p : s.pods) {
        last += r.svarint();
        if (last < 0 || std::uint64_t(last) >= episode_.pods.size()) {
          return Error{"SAMPLE: pod index " + std::to_string(last) + " without a POD frame"};
        }
        p.pod = std::uint32_t(last);
      }
    } else {
      return Error{"SAMPLE: unknown pod list mode " + std::to_string(listMode)};
    }
    if (!r.ok()) return Error{"SAMPLE: truncated"};
    // Every pod starts from its last figures (its candidacy included).
    for (PodFigures& p : s.pods) {
      const std::uint32_t index = p.pod;
      if (index < last_.size() && haveLast_[index]) {
        p = last_[index];
      } else {
        p = PodFigures{};
        p.pod = index;
      }
    }
    const std::uint8_t changed = r.u8();
    if (changed > 1) return Error{"SAMPLE: unknown pod change mode"};
    if (changed == 1) {
      const std::string_view bitmap = r.bytes((s.pods.size() + 7) / 8);
      if (!r.ok()) return Error{"SAMPLE: truncated pod bitmap"};
      for (std::size_t i = 0; i < s.pods.size(); ++i) {
        if (!((std::uint8_t(bitmap[i / 8]) >> (i % 8)) & 1)) continue;
        PodFigures& p = s.pods[i];
        const std::uint8_t head = r.u8();
        auto fields = podFields(p);
        std::uint8_t presence = presenceOf(fields);
        if (head & 0x80) presence = r.u8();
        if (presence >> kPodFields) return Error{"SAMPLE: unknown pod figures"};
        p.candidate = (head & 0x40) != 0;
        for (int f = 0; f < kPodFields; ++f) {
          const bool present = (presence >> f) & 1;
          if (!present) {
            fields[f].reset();
            continue;
          }
          if (head & (1u << f))
            fields[f] = r.delta(fields[f].value_or(0));
          else if (!fields[f])
            return Error{"SAMPLE: a pod figure present without a value"};
          if (*fields[f] >= kMaxPodFigure) return Error{"SAMPLE: a pod figure beyond 2^46"};
        }
        setPodFields(p, fields);
      }
    }
    if (!r.ok()) return Error{"SAMPLE: truncated pod figures"};
    for (const PodFigures& p : s.pods) {
      if (p.pod >= last_.size()) {
        last_.resize(p.pod + 1);
        haveLast_.resize(p.pod + 1, false);
      }
      last_[p.pod] = p;
      haveLast_[p.pod] = true;
    }

    // Signals.
    const std::uint64_t signals = r.varint();
    if (signals > 64) return Error{"SAMPLE: too many signals"};
    for (std::uint64_t i = 0; i < signals; ++i) {
      const std::uint8_t bits = r.u8();
      auto signal = signalFromCode(bits & 0x07);
      if (!signal || (bits & 0xc0)) return Error{"SAMPLE: unknown signal code"};
      SignalObservation o;
      o.signal = *signal;
      o.hard = bits & 0x08;
      o.met = bits & 0x10;
      o.actionable = bits & 0x20;
      const SignalObservation* p = nullptr;
      if (prev && i < prev->signals.size() && prev->signals[i].signal == o.signal &&
          prev->signals[i].hard == o.hard) {
        p = &prev->signals[i];
      }
      o.available = std::int64_t(r.delta(p ? std::uint64_t(p->available) : 0));
      o.capacity = std::int64_t(r.delta(p ? std::uint64_t(p->capacity) : 0));
      o.threshold = std::int64_t(r.delta(p ? std::uint64_t(p->threshold) : 0));
      s.signals.push_back(o);
    }
    // The plan.
    const std::uint64_t planned = r.varint();
    if (planned > r.remaining()) return Error{"SAMPLE: plan beyond the frame"};
    for (std::uint64_t i = 0; i < planned; ++i) {
      PlannedEviction e;
      const std::uint64_t pod = r.varint();
      if (pod >= episode_.pods.size()) return Error{"SAMPLE: plan names an unknown pod"};
      e.pod = std::uint32_t(pod);
      const std::uint8_t bits = r.u8();
      auto signal = signalFromCode(bits & 0x07);
      if (!signal || (bits & 0xe0)) return Error{"SAMPLE: unknown plan entry"};
      e.signal = *signal;
      e.hard = bits & 0x08;
      e.ordered = bits & 0x10;
      e.gracePeriodSeconds = r.svarint();
      s.plan.push_back(e);
    }
    if (!r.ok()) return Error{"SAMPLE: truncated"};
    if (!r.atEnd()) return Error{"SAMPLE: bytes left over"};
    if (prev != nullptr && s.t < prev->t) return Error{"SAMPLE: time goes backwards"};
    episode_.samples.push_back(std::move(s));
    return {};
  }

  Result<void> event(std::string_view payload) {
    auto json = parse(payload);
    if (!json) return Error{"EVENT: not a JSON object"};
    JsonFields f{*json, {}};
    const std::string kind = f.string("kind");
    auto podIndex = [&](bool optional) -> std::optional<std::uint32_t> {
      if (!json->contains("pod") || (*json)["pod"].is_null()) {
        if (!optional) f.problem = "pod: required";
        return std::nullopt;
      }
      const std::int64_t pod = f.integer("pod", -1);
      if (pod < 0 || std::uint64_t(pod) >= episode_.pods.size()) {
        f.problem = "pod: not a POD frame's index";
        return std::nullopt;
      }
      return std::uint32_t(pod);
    };
    auto sampleIndex = [&]() -> std::size_t {
      const std::int64_t sample = f.integer("sample", -1);
      if (sample < 0 || std::size_t(sample) >= episode_.samples.size()) {
        f.problem = "sample: not a recorded sample";
        return 0;
      }
      return std::size_t(sample);
    };
    auto signalOf = [&]() {
      auto signal = policy::parseSignal(f.string("signal"));
      if (!signal) f.problem = "signal: unknown";
      return signal.value_or(Signal::MemoryAvailable);
    };
    if (kind == "order") {
      Order o;
      o.sample = sampleIndex();
      o.t = f.integer("t");
      if (o.t > kMaxTime || o.t < -kMaxTime) f.problem = "t: beyond 2^62 ns";
      o.pod = podIndex(false).value_or(0);
      o.signal = signalOf();
      o.hard = f.boolean("hard");
      o.gracePeriodSeconds = f.integer("gracePeriodSeconds");
      o.usage = f.integer("usage");
      o.request = f.integer("request");
      o.observed = f.integer("observed");
      o.threshold = f.integer("threshold");
      o.rank = f.integer("rank");
      o.latencyMs = f.number("latencyMs");
      o.dryRun = f.boolean("dryRun");
      o.message = f.string("message");
      if (!f.problem.empty()) return Error{"EVENT order: " + f.problem};
      episode_.orders.push_back(std::move(o));
    } else if (kind == "oom-kill") {
      OomKill k;
      k.sample = sampleIndex();
      k.t = f.integer("t");
      if (k.t > kMaxTime || k.t < -kMaxTime) f.problem = "t: beyond 2^62 ns";
      k.pod = podIndex(true);
      const std::int64_t count = f.integer("count", 1);
      k.count = count < 1 ? 1 : std::uint64_t(count);
      k.limit = f.string("limit");
      if (!f.problem.empty()) return Error{"EVENT oom-kill: " + f.problem};
      episode_.oomKills.push_back(std::move(k));
    } else if (kind == "outcome") {
      Outcome o;
      o.t = f.integer("t");
      if (o.t > kMaxTime || o.t < -kMaxTime) f.problem = "t: beyond 2^62 ns";
      o.pod = podIndex(false).value_or(0);
      o.emptied = f.boolean("emptied");
      o.method = f.string("method");
      o.elapsedMs = f.number("elapsedMs");
      if (!f.problem.empty()) return Error{"EVENT outcome: " + f.problem};
      episode_.outcomes.push_back(std::move(o));
    } else {
      return Error{"EVENT: unknown kind \"" + kind + "\""};
    }
    return {};
  }

  Result<void> end(std::string_view payload) {
    auto json = parse(payload);
    if (!json) return Error{"END: not a JSON object"};
    JsonFields f{*json, {}};
    episode_.endReason = f.string("reason");
    episode_.endT = f.integer("t");
    const std::int64_t samples = f.integer("samples", -1);
    if (!f.problem.empty()) return Error{"END: " + f.problem};
    if (samples != std::int64_t(episode_.samples.size())) {
      return Error{"END: says " + std::to_string(samples) + " samples, the file holds " +
                   std::to_string(episode_.samples.size())};
    }
    return {};
  }

  std::string_view bytes_;
  Episode episode_;
  std::vector<PodFigures> last_;
  std::vector<bool> haveLast_;
};

}  // namespace

Result<Episode> decodeEpisode(std::string_view bytes) {
  return Decoder(bytes).run();
}

std::size_t sampleAt(const Episode& episode, std::int64_t t) {
  auto it = std::lower_bound(episode.samples.begin(), episode.samples.end(), t,
                             [](const Sample& s, std::int64_t value) { return s.t < value; });
  return std::size_t(it - episode.samples.begin());
}

void buildView(const Episode& episode, const NodeFigures& node, const std::vector<PodFigures>& pods,
               SampleView& out) {
  if (out.episode != &episode || out.pods.size() != episode.pods.size()) {
    // One Pod object per pod entry, ranked by key once (ties by entry): what the agent's pods
    // carry from resolvePods, so rankings end their ties the same way.
    out.episode = &episode;
    out.pods.clear();
    out.pods.reserve(episode.pods.size());
    for (const PodInfo& info : episode.pods) {
      policy::Pod pod;
      pod.uid = info.uid;
      pod.ns = info.ns;
      pod.name = info.name;
      pod.key = info.key();
      pod.nodeName = episode.node;
      pod.phase = "Running";
      pod.priority = info.priority;
      pod.qos = info.qos;
      pod.critical = info.critical;
      pod.terminating = info.terminating;
      pod.terminationGracePeriodSeconds = info.terminationGracePeriodSeconds;
      if (info.memoryRequest != 0) pod.rankingRequests["memory"] = info.memoryRequest;
      if (info.storageRequest != 0) pod.rankingRequests["ephemeral-storage"] = info.storageRequest;
      out.pods.push_back(std::move(pod));
    }
    std::vector<std::uint32_t> order(out.pods.size());
    for (std::uint32_t i = 0; i < order.size(); ++i) order[i] = i;
    std::stable_sort(order.begin(), order.end(), [&](std::uint32_t a, std::uint32_t b) {
      return out.pods[a].key < out.pods[b].key;
    });
    for (std::uint32_t rank = 0; rank < order.size(); ++rank) out.pods[order[rank]].keyOrder = rank;
    out.node = policy::Node{};
    out.node.name = episode.node;
  }
  policy::Node& n = out.node;
  auto setMemory = [](policy::ResourceList& list, const std::optional<std::int64_t>& value) {
    if (!value) {
      list.erase("memory");
    } else if (auto it = list.find("memory"); it == list.end() || it->second.value() != *value) {
      list["memory"] = policy::Quantity::fromValue(*value, policy::QuantityFormat::BinarySI);
    }
  };
  setMemory(n.capacity, node.capacityMemory);
  setMemory(n.allocatable, node.allocatableMemory);
  out.nodeStats = node.stats;

  policy::NodeView& view = out.view;
  view.name = episode.node;
  view.node = &out.node;
  view.stats = &out.nodeStats;
  view.pods.clear();
  view.podStats.clear();
  std::size_t candidates = 0;
  for (const PodFigures& p : pods) candidates += (p.candidate && p.pod < out.pods.size()) ? 1 : 0;
  out.stats.resize(candidates);
  std::size_t next = 0;
  for (const PodFigures& p : pods) {
    if (!p.candidate || p.pod >= out.pods.size()) continue;
    policy::PodStats& stats = out.stats[next++];
    stats.memoryWorkingSetBytes = p.workingSet;
    stats.memoryUsageBytes = p.usage;
    stats.swapUsageBytes = p.swap;
    stats.processCount = p.processes;
    stats.ephemeralStorageUsedBytes = p.ephemeralStorage;
    stats.ephemeralStorageInodesUsed = p.inodes;
    view.pods.push_back(&out.pods[p.pod]);
    view.podStats.push_back(&stats);
  }
  policy::assignKeyOrder(view);
}

void buildView(const Episode& episode, const Sample& sample, SampleView& out) {
  buildView(episode, sample.node, sample.pods, out);
}

policy::EvictionState initialState(const Episode& episode, SteadyTime origin) {
  policy::EvictionState state;
  for (const auto& since : episode.state.firstObservedAt) {
    state.firstObservedAt[since.key] = origin + std::chrono::nanoseconds(since.t);
  }
  for (const auto& key : episode.state.met) state.met.insert(key);
  for (const auto& [condition, t] : episode.state.conditionLastObservedAt) {
    state.conditionLastObservedAt[condition] = origin + std::chrono::nanoseconds(t);
  }
  return state;
}

}  // namespace nodewarden::record
