// record/: the episode file (round trip, torn and corrupt files named by offset), replay
// (fidelity and the simulated world with its bounds), tune, and the decision records.
// record_test links record/ and policy/ only: I/O creeping into record/ fails to link.
#include <doctest/doctest.h>

#include <algorithm>
#include <set>
#include <string>
#include <vector>

#include "record/decisions.h"
#include "record/episode.h"
#include "record/replay.h"
#include "record/tune.h"

using namespace nodewarden;
using namespace nodewarden::record;
using namespace std::chrono_literals;
using policy::Signal;

namespace {

constexpr std::int64_t kMi = 1024 * 1024;
constexpr std::int64_t kSecond = 1'000'000'000;

policy::Policy parsePolicy(const std::string& text) {
  policy::Diagnostics diagnostics;
  auto parsed = policy::parsePolicyText(text, diagnostics);
  REQUIRE_MESSAGE(parsed, diagnostics.joined());
  return *parsed;
}

PodInfo pod(const std::string& ns, const std::string& name, int priority, std::int64_t requestMi,
            policy::QosClass qos = policy::QosClass::Burstable) {
  PodInfo p;
  p.uid = "uid-" + ns + "-" + name;
  p.ns = ns;
  p.name = name;
  p.priority = priority;
  p.qos = qos;
  p.memoryRequest = requestMi * kMi;
  p.critical = priority >= policy::kSystemCriticalPriority;
  return p;
}

// A sandbox node of `limitMi` (the pods' cgroup) whose pods' working sets follow `usage(pod,
// t)` in MiB (≤ 0: gone). Samples every `stepMs`; with `agent` set, an agent with that policy
// runs over it as the real one does (its plan recorded, each plan entry ordered unless a
// victim of the same signal is still exiting, a victim freed at the next sample); without
// it, the policy is recorded but nothing acts, and the kernel kills the pod with the most
// memory when the limit is reached.
struct World {
  std::int64_t limitMi = 1024;
  std::vector<PodInfo> pods;
  std::function<double(std::size_t, double)> usage;
  int samples = 100;
  int stepMs = 100;
};

Episode recordWorld(const World& world, const policy::Policy& recorded, bool acting) {
  Episode e;
  e.node = "node-1";
  e.nodewardenVersion = "test";
  e.originWallMicros = 1'780'000'000'000'000;
  e.cgroups = "v2";
  e.dryRun = !acting;
  e.reason = "threshold";
  e.pods = world.pods;
  e.policies.push_back(PolicyChange{0, policy::policyToJson(recorded).dump(), recorded});
  std::set<std::size_t> gone;
  std::vector<std::size_t> inFlight;  // freed at the next sample
  policy::EvictionState state;
  SampleView view;
  const SteadyTime origin = SteadyTime{} + std::chrono::hours(1);
  for (int i = 0; i < world.samples; ++i) {
    for (std::size_t p : inFlight) gone.insert(p);
    inFlight.clear();
    Sample s;
    s.t = std::int64_t(i) * world.stepMs * 1'000'000;
    const double seconds = double(s.t) / 1e9;
    std::int64_t used = 0;
    for (std::size_t p = 0; p < world.pods.size(); ++p) {
      if (gone.count(p) != 0) continue;
      const double mib = world.usage(p, seconds);
      if (mib <= 0) continue;
      PodFigures f;
      f.pod = std::uint32_t(p);
      f.workingSet = std::uint64_t(mib * double(kMi));
      f.usage = *f.workingSet + 4096;
      used += std::int64_t(*f.workingSet);
      s.pods.push_back(f);
    }
    const std::int64_t limit = world.limitMi * kMi;
    if (!acting && used >= limit) {
      // The kernel: the pod with the most memory dies.
      auto victim = std::max_element(
          s.pods.begin(), s.pods.end(),
          [](const auto& a, const auto& b) { return *a.workingSet < *b.workingSet; });
      OomKill kill;
      kill.sample = std::size_t(i);
      kill.t = s.t;
      kill.pod = victim->pod;
      kill.limit = "node";
      e.oomKills.push_back(kill);
      gone.insert(victim->pod);
      used -= std::int64_t(*victim->workingSet);
      s.pods.erase(victim);
    }
    s.node.stats.podsMemoryWorkingSetBytes = std::uint64_t(used);
    s.node.stats.podsMemoryAvailableBytes = std::uint64_t(std::max<std::int64_t>(0, limit - used));
    s.node.stats.memoryWorkingSetBytes = std::uint64_t(used + 500 * kMi);
    s.node.stats.memoryAvailableBytes = std::uint64_t(16384 * kMi - used - 500 * kMi);
    s.node.capacityMemory = 16384 * kMi;
    s.node.allocatableMemory = limit;
    buildView(e, s, view);
    auto evaluated =
        policy::evaluateEviction(view.view, recorded, state, origin + std::chrono::nanoseconds(s.t),
                                 policy::Rankings::Needed);
    for (const auto& st : evaluated.decision.signals) {
      s.signals.push_back({st.key.signal, st.key.hard, st.available, st.capacity, st.threshold,
                           st.met, st.actionable});
    }
    bool busy = false;
    for (const policy::Eviction& ev : evaluated.decision.evict) {
      PlannedEviction planned;
      planned.pod = std::uint32_t(ev.pod - view.pods.data());
      planned.signal = ev.signal;
      planned.hard = ev.hard;
      planned.gracePeriodSeconds = ev.gracePeriodSeconds;
      planned.ordered = !busy;
      if (planned.ordered) {
        Order o;
        o.sample = std::size_t(i);
        o.t = s.t;
        o.pod = planned.pod;
        o.signal = ev.signal;
        o.hard = ev.hard;
        o.usage = ev.usage;
        o.dryRun = !acting;
        o.message = ev.message;
        e.orders.push_back(o);
        if (acting) inFlight.push_back(planned.pod);
      }
      s.plan.push_back(planned);
    }
    // Like the agent: victims of the same signal in one cycle all go; later cycles wait.
    busy = acting && !inFlight.empty();
    (void)busy;
    state = std::move(evaluated.next);
    e.samples.push_back(std::move(s));
  }
  e.endReason = "settled";
  e.endT = e.samples.back().t;
  return e;
}

// The demo's shape: a critical agent, a growing production pod, two batch pods.
World demoWorld() {
  World w;
  w.limitMi = 512;
  w.pods = {pod("kube-system", "agent", policy::kSystemNodeCriticalPriority, 32),
            pod("prod", "api", 10000, 256), pod("batch", "big", 0, 0, policy::QosClass::BestEffort),
            pod("batch", "small", 0, 0, policy::QosClass::BestEffort)};
  w.usage = [](std::size_t p, double t) {
    switch (p) {
      case 0:
        return 24.0;
      case 1:
        return std::min(380.0, 100.0 + 40.0 * std::max(0.0, t - 1.0));
      case 2:
        return 64.0;
      default:
        return 48.0;
    }
  };
  w.samples = 120;
  return w;
}

const char* kDemoPolicy = R"({
  "evictionHard": { "allocatableMemory.available": "64Mi" },
  "evictionMinimumReclaim": { "allocatableMemory.available": "16Mi" },
  "evictionMaxPodsPerCycle": 5
})";
// Nothing on the pods' cgroup: the kernel decides.
const char* kNoPolicy = R"({ "evictionHard": { "memory.available": "100Mi" } })";

}  // namespace

TEST_CASE("episode: encoded and decoded, every figure comes back") {
  const Episode e = recordWorld(demoWorld(), parsePolicy(kDemoPolicy), true);
  const std::string bytes = encodeEpisode(e);
  auto decoded = decodeEpisode(bytes);
  REQUIRE_MESSAGE(decoded, decoded.error().message);
  CHECK(decoded->node == e.node);
  CHECK(decoded->originWallMicros == e.originWallMicros);
  REQUIRE(decoded->pods.size() == e.pods.size());
  for (std::size_t i = 0; i < e.pods.size(); ++i) CHECK(decoded->pods[i] == e.pods[i]);
  REQUIRE(decoded->samples.size() == e.samples.size());
  for (std::size_t i = 0; i < e.samples.size(); ++i) {
    const Sample& a = e.samples[i];
    const Sample& b = decoded->samples[i];
    CHECK(a.t == b.t);
    CHECK(a.node.stats.podsMemoryAvailableBytes == b.node.stats.podsMemoryAvailableBytes);
    CHECK(a.node.stats.memoryWorkingSetBytes == b.node.stats.memoryWorkingSetBytes);
    CHECK(a.node.allocatableMemory == b.node.allocatableMemory);
    REQUIRE(a.pods.size() == b.pods.size());
    for (std::size_t p = 0; p < a.pods.size(); ++p) {
      CHECK(a.pods[p].pod == b.pods[p].pod);
      CHECK(a.pods[p].candidate == b.pods[p].candidate);
      CHECK(a.pods[p].workingSet == b.pods[p].workingSet);
      CHECK(a.pods[p].usage == b.pods[p].usage);
      CHECK(a.pods[p].swap == b.pods[p].swap);
    }
    REQUIRE(a.plan.size() == b.plan.size());
    for (std::size_t p = 0; p < a.plan.size(); ++p) {
      CHECK(a.plan[p].pod == b.plan[p].pod);
      CHECK(a.plan[p].ordered == b.plan[p].ordered);
    }
    REQUIRE(a.signals.size() == b.signals.size());
    for (std::size_t k = 0; k < a.signals.size(); ++k) {
      CHECK(a.signals[k].available == b.signals[k].available);
      CHECK(a.signals[k].met == b.signals[k].met);
    }
  }
  CHECK(decoded->orders.size() == e.orders.size());
  CHECK(samePolicy(decoded->policies.front().policy, e.policies.front().policy));
  CHECK(decoded->endReason == "settled");
}

TEST_CASE("episode: compact — a pod whose figures did not move costs under a byte a sample") {
  World w;
  w.limitMi = 65536;
  for (int i = 0; i < 110; ++i) w.pods.push_back(pod("ns", "pod-" + std::to_string(i), i % 3, 64));
  // Five pods grow; the others hold still.
  w.usage = [](std::size_t p, double t) { return p < 5 ? 100.0 + 10.0 * t : 50.0 + double(p); };
  // What each sample adds, the pod table (a JSON frame per pod, once) aside.
  w.samples = 100;
  const std::size_t shorter = encodeEpisode(recordWorld(w, parsePolicy(kNoPolicy), false)).size();
  w.samples = 200;
  const std::size_t longer = encodeEpisode(recordWorld(w, parsePolicy(kNoPolicy), false)).size();
  const double perPodSample = double(longer - shorter) / (110.0 * 100.0);
  MESSAGE(shorter << " bytes for 110 pods x 100 samples, " << longer << " for 200: " << perPodSample
                  << " bytes per pod-sample");
  CHECK(perPodSample < 1.0);
}

TEST_CASE("episode: a torn or corrupt file is refused with its offset, never a crash") {
  const std::string bytes = encodeEpisode(recordWorld(demoWorld(), parsePolicy(kDemoPolicy), true));
  // Every truncation: refused, naming an offset.
  for (std::size_t cut = 0; cut < bytes.size();
       cut += std::max<std::size_t>(1, bytes.size() / 300)) {
    auto decoded = decodeEpisode(std::string_view(bytes).substr(0, cut));
    REQUIRE_FALSE(decoded);
    CHECK(decoded.error().message.starts_with("offset "));
  }
  // A flipped byte in a frame: the CRC catches it, at that frame's offset.
  std::string corrupt = bytes;
  corrupt[bytes.size() / 2] ^= 0x40;
  auto decoded = decodeEpisode(corrupt);
  REQUIRE_FALSE(decoded);
  CHECK(decoded.error().message.find("CRC mismatch") != std::string::npos);
  // Not an episode at all.
  CHECK_FALSE(decodeEpisode("{\"format\": 1}"));
  CHECK(decodeEpisode("").error().message.starts_with("offset 0"));
}

TEST_CASE(
    "replay: the recorded policy gives the recorded decisions again; a changed plan diverges") {
  const Episode e = recordWorld(demoWorld(), parsePolicy(kDemoPolicy), true);
  auto decoded = decodeEpisode(encodeEpisode(e));
  REQUIRE(decoded);
  const ReplayResult r = replay(*decoded);
  CHECK((r.fidelity == Fidelity::Identical));
  CHECK_FALSE(r.divergence);
  REQUIRE(r.decisions.size() == e.orders.size());
  for (std::size_t i = 0; i < r.decisions.size(); ++i) {
    CHECK(r.decisions[i].sample == e.orders[i].sample);
    CHECK(r.decisions[i].pod == e.pods[e.orders[i].pod].key());
  }
  std::set<std::string> victims;
  for (const auto& d : r.decisions) victims.insert(d.pod);
  CHECK(victims == std::set<std::string>{"batch/big", "batch/small"});
  CHECK_FALSE(r.simulated);

  // A recorded plan that the decision code would not make is found, at its sample.
  Episode tampered = *decoded;
  std::size_t at = 0;
  for (; at < tampered.samples.size() && tampered.samples[at].plan.empty(); ++at) {
  }
  REQUIRE(at < tampered.samples.size());
  tampered.samples[at].plan.front().pod = 1;  // prod/api instead of a batch pod
  const ReplayResult diverged = replay(tampered);
  CHECK((diverged.fidelity == Fidelity::Diverged));
  REQUIRE(diverged.divergence);
  CHECK(diverged.divergence->sample == at);
  CHECK(diverged.divergence->recorded[0]["pod"] == "prod/api");
}

TEST_CASE("replay: a candidate policy on the kernel's episode — prevented, lead time, bounds") {
  // Recorded with nothing acting: the kernel kills prod/api when the 512Mi are used up.
  const Episode e = recordWorld(demoWorld(), parsePolicy(kNoPolicy), false);
  REQUIRE_FALSE(e.oomKills.empty());
  CHECK(e.pods[*e.oomKills.front().pod].key() == "prod/api");

  ReplayOptions options;
  options.policy = parsePolicy(kDemoPolicy);
  options.policyName = "demo.json";
  const ReplayResult r = replay(e, options);
  CHECK((r.fidelity == Fidelity::NotChecked));
  CHECK(r.simulated);
  CHECK((r.limitSignal == Signal::AllocatableMemoryAvailable));
  CHECK(r.recordedOomKills == 1);
  REQUIRE(r.prevented);
  CHECK(*r.prevented);
  // The batch pods go first (priority 0), the production pod never: the recording lost
  // prod/api at 376Mi (the kernel killed it), so the simulation holds it there, and evicting
  // batch/big alone already keeps the node under the line.
  std::set<std::string> victims;
  for (const auto& d : r.decisions) victims.insert(d.pod);
  CHECK(victims.count("batch/big") == 1);
  CHECK(victims.count("prod/api") == 0);
  CHECK(victims.count("kube-system/agent") == 0);
  CHECK(r.simulatedKills.empty());
  REQUIRE(r.leadTimeMs);
  CHECK(*r.leadTimeMs > 0);
  // Its goal at the tightest moment (64Mi + 16Mi above what was left), and what it freed.
  CHECK(r.neededBytes > 64 * kMi);
  CHECK(r.evictedBytes >= 64 * kMi);
  CHECK(r.kernelAlone.fromRecording);
  CHECK(r.kernelAlone.kills.size() == 1);
  // Perfect foresight in the policy's ranking: the batch pods go first, and they suffice.
  CHECK(r.perfectForesight.feasible);
  CHECK_FALSE(r.perfectForesight.pods.empty());
  CHECK(r.perfectForesight.pods.front().starts_with("batch/"));

  // A threshold too low to act in time does not prevent it.
  ReplayOptions late;
  late.policy = parsePolicy(R"({ "evictionHard": { "allocatableMemory.available": "1Ki" } })");
  const ReplayResult tooLate = replay(e, late);
  REQUIRE(tooLate.prevented);
  CHECK_FALSE(*tooLate.prevented);
  CHECK(tooLate.killsLeft >= 1);
}

TEST_CASE("tune: the threshold that prevents every recorded kill, least disruptive first") {
  const Episode e = recordWorld(demoWorld(), parsePolicy(kNoPolicy), false);
  const TuneResult t = tune({&e});
  CHECK((t.signal == Signal::AllocatableMemoryAvailable));
  CHECK(t.recordedOomKills == 1);
  REQUIRE(t.recommended);
  const TuneSetting& best = t.settings[*t.recommended];
  CHECK(best.oomKillsLeft == 0);
  for (const TuneSetting& s : t.settings) {
    if (s.oomKillsLeft == 0) CHECK(best.evictions <= s.evictions);
  }
  CHECK(best.evictions <= t.kubeletDefault.evictions);
  // The recommendation as a policy file that parses back to the same policy.
  policy::Diagnostics diagnostics;
  auto reparsed = policy::parsePolicy(tuneJson(t)["policy"], diagnostics);
  REQUIRE_MESSAGE(reparsed, diagnostics.joined());
  CHECK(samePolicy(*reparsed, best.policy));
}

TEST_CASE("decision records: store lines round trip; torn and corrupt lines name their offset") {
  DecisionRecord r;
  r.time = 1'780'000'000'123'456;
  r.kind = DecisionKind::Eviction;
  r.node = "node-1";
  r.pod = "batch/big";
  r.uid = "u-1";
  r.signal = "allocatableMemory.available";
  r.observed = 60 * kMi;
  r.threshold = 64 * kMi;
  r.rank = 1;
  r.action = "evict";
  r.reason = "The node was low on resource: memory. \"quoted\"";
  r.latencyMs = 12.5;
  r.gracePeriodSeconds = 0;
  r.episode = "x.nwep";
  CHECK(formatRfc3339(r.time) == "2026-05-28T20:26:40.123Z");
  const std::string file = storeHeaderLine("node-1") + storeLine(r) + storeLine(r);
  std::size_t good = 0;
  auto parsed = parseStoreFile(file, &good);
  REQUIRE_MESSAGE(parsed, parsed.error().message);
  REQUIRE(parsed->size() == 2);
  CHECK(good == file.size());
  const DecisionRecord& back = parsed->front();
  CHECK(back.pod == r.pod);
  CHECK(back.time == 1'780'000'000'123'000);  // milliseconds are kept
  CHECK(back.observed == r.observed);
  CHECK(back.reason == r.reason);
  CHECK(back.episode == r.episode);

  // A torn append: the whole lines before it are good.
  auto torn = parseStoreFile(std::string_view(file).substr(0, file.size() - 7), &good);
  REQUIRE_FALSE(torn);
  CHECK(torn.error().message == "offset " + std::to_string(file.size() - storeLine(r).size()) +
                                    ": a record without its end (a torn append)");
  CHECK(good == file.size() - storeLine(r).size());
  std::string corrupt = file;
  corrupt[file.size() - 40] = 'X';
  auto bad = parseStoreFile(corrupt);
  REQUIRE_FALSE(bad);
  CHECK(bad.error().message.find("CRC mismatch") != std::string::npos);

  // The decision log's line: flat, with node, pod and uid.
  const policy::Json line = policy::Json::parse(logLine(r));
  CHECK(line["node"] == "node-1");
  CHECK(line["pod"] == "batch/big");
  CHECK(line["kind"] == "eviction");
  CHECK(line["time"] == "2026-05-28T20:26:40.123Z");

  // why -o json and back.
  auto again = parseWhyJson(whyJson("batch/big", *parsed).dump());
  REQUIRE(again);
  CHECK(again->size() == 2);
  CHECK(again->front().uid == "u-1");
}

TEST_CASE("decision records: a preemption records the pod and each victim") {
  const auto records = admissionRecords(1'780'000'000'000'000, "node-1", "prod/new", "u", "preempt",
                                        "", "", {"batch/a", "batch/b"}, false);
  REQUIRE(records.size() == 3);
  CHECK((records[0].kind == DecisionKind::Admission));
  CHECK((records[1].kind == DecisionKind::Preemption));
  CHECK(records[1].pod == "batch/a");
  CHECK(records[2].reason.find("prod/new") != std::string::npos);
}
