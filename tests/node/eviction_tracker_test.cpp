// node/eviction_tracker.h alone: crossing times, in flight, evicted, back-off, dry-run repeats.
#include <doctest/doctest.h>

#include "node/eviction_tracker.h"

using namespace nodewarden;
using namespace nodewarden::node;
using namespace std::chrono_literals;
using policy::Signal;

namespace {

policy::SignalStatus status(Signal signal, bool met, std::int64_t available) {
  policy::SignalStatus s;
  s.key = {signal, true};
  s.met = met;
  s.available = available;
  return s;
}

EvictionRecord record(const std::string& uid, Signal signal, bool dryRun = false) {
  EvictionRecord r;
  r.order.pod = "default/" + uid;
  r.order.uid = uid;
  r.order.threshold = {signal, true};
  r.order.dryRun = dryRun;
  return r;
}

// The actuator's outcome (the order it belongs to is the record's).
EvictionOutcome outcome(const std::string&, bool emptied) {
  EvictionOutcome o;
  o.emptied = emptied;
  return o;
}

const auto kAlways = [](const std::string&) { return true; };
const auto kNever = [](const std::string&) { return false; };

}  // namespace

TEST_CASE("a crossing seen by polling is dated at the last observation below the threshold") {
  ManualClock clock;
  EvictionTracker tracker;
  policy::EvictionState before;
  const SteadyTime t0 = clock.now();
  tracker.noteSignals({status(Signal::MemoryAvailable, false, 500)}, before, t0, std::nullopt);
  clock.advance(1s);
  tracker.noteSignals({status(Signal::MemoryAvailable, true, 50)}, before, clock.now(),
                      std::nullopt);
  CHECK(tracker.crossedAt({Signal::MemoryAvailable, true}, clock.now()) == t0);
}

TEST_CASE(
    "a kernel notification dates the crossing exactly; a threshold no longer met forgets it") {
  ManualClock clock;
  EvictionTracker tracker;
  policy::EvictionState before;
  tracker.noteSignals({status(Signal::MemoryAvailable, false, 500)}, before, clock.now(),
                      std::nullopt);
  clock.advance(1s);
  const SteadyTime notified = clock.now() - 300ms;
  tracker.noteSignals({status(Signal::MemoryAvailable, true, 50)}, before, clock.now(), notified);
  CHECK(tracker.crossedAt({Signal::MemoryAvailable, true}, clock.now()) == notified);

  // Already met before: the first crossing stays.
  before.met.insert({Signal::MemoryAvailable, true});
  clock.advance(1s);
  tracker.noteSignals({status(Signal::MemoryAvailable, true, 40)}, before, clock.now(),
                      std::nullopt);
  CHECK(tracker.crossedAt({Signal::MemoryAvailable, true}, clock.now()) == notified);

  tracker.noteSignals({status(Signal::MemoryAvailable, false, 900)}, before, clock.now(),
                      std::nullopt);
  CHECK(tracker.crossedAt({Signal::MemoryAvailable, true}, clock.now()) == clock.now());
}

TEST_CASE("a pod in flight is no candidate and keeps its signal busy until it finishes") {
  ManualClock clock;
  EvictionTracker tracker;
  CHECK(tracker.empty());
  const std::size_t index = tracker.started(record("a", Signal::MemoryAvailable));
  CHECK_FALSE(tracker.candidate("a"));
  CHECK(tracker.candidate("b"));
  CHECK(tracker.inFlight("a"));
  CHECK(tracker.signalBusy(Signal::MemoryAvailable));
  CHECK_FALSE(tracker.signalBusy(Signal::PidAvailable));
  CHECK(tracker.busySignals() == std::set<Signal>{Signal::MemoryAvailable});

  tracker.finished(index, outcome("a", true), clock.now());
  CHECK_FALSE(tracker.inFlight("a"));
  CHECK_FALSE(tracker.signalBusy(Signal::MemoryAvailable));
  REQUIRE(tracker.records()[index].outcome.has_value());
  CHECK(tracker.records()[index].outcome->emptied);
  // Evicted, its empty cgroup still there: still no candidate.
  CHECK_FALSE(tracker.candidate("a"));
}

TEST_CASE("an evicted pod is a candidate again once its cgroup is gone or runs processes") {
  ManualClock clock;
  EvictionTracker tracker;
  tracker.finished(tracker.started(record("gone", Signal::MemoryAvailable)), outcome("gone", true),
                   clock.now());
  tracker.finished(tracker.started(record("back", Signal::MemoryAvailable)), outcome("back", true),
                   clock.now());
  tracker.finished(tracker.started(record("idle", Signal::MemoryAvailable)), outcome("idle", true),
                   clock.now());
  const auto exists = [](const std::string& uid) { return uid != "gone"; };
  const auto isEmpty = [](const std::string& uid) { return uid == "idle"; };
  const std::vector<std::string> again = tracker.expire(clock.now(), exists, isEmpty);
  CHECK(again == std::vector<std::string>{"back"});
  CHECK(tracker.candidate("gone"));
  CHECK(tracker.candidate("back"));
  CHECK_FALSE(tracker.candidate("idle"));
}

TEST_CASE("a failed eviction backs the pod off for kBackOff, then it is a candidate again") {
  ManualClock clock;
  EvictionTracker tracker;
  tracker.finished(tracker.started(record("a", Signal::MemoryAvailable)), outcome("a", false),
                   clock.now());
  CHECK_FALSE(tracker.candidate("a"));
  clock.advance(EvictionTracker::kBackOff - 1s);
  (void)tracker.expire(clock.now(), kAlways, kAlways);
  CHECK_FALSE(tracker.candidate("a"));
  clock.advance(1s);
  (void)tracker.expire(clock.now(), kAlways, kAlways);
  CHECK(tracker.candidate("a"));
  CHECK(tracker.empty());
}

TEST_CASE("a dry run is recorded, never in flight, and repeats at most every kDryRunRepeat") {
  ManualClock clock;
  EvictionTracker tracker;
  const std::size_t index = tracker.started(record("a", Signal::MemoryAvailable, true));
  CHECK(tracker.candidate("a"));
  CHECK_FALSE(tracker.signalBusy(Signal::MemoryAvailable));
  tracker.finished(index, outcome("a", false), clock.now());
  CHECK(tracker.candidate("a"));  // a dry run neither evicts nor backs off
  CHECK(tracker.records().size() == 1);

  CHECK_FALSE(tracker.dryRunRepeat("a", clock.now()));
  clock.advance(EvictionTracker::kDryRunRepeat - 1s);
  CHECK(tracker.dryRunRepeat("a", clock.now()));
  clock.advance(1s);
  CHECK_FALSE(tracker.dryRunRepeat("a", clock.now()));
  (void)kNever;
}
