// What the node daemon remembers between cycles about the pods it evicts: orders in flight,
// pods evicted whose cgroup is still there, pods backing off after a failed eviction, and
// when each threshold was crossed. No I/O and no clock of its own: every time comes in as an
// argument, so each rule below is tested alone (tests/node/eviction_tracker_test.cpp).
//
//   a threshold met          → noteSignals() dates the crossing
//   an eviction ordered      → started(): the pod is in flight, its signal busy
//   the actuator finished    → finished(): evicted (cgroup empty) or backing off (failed)
//   the pod cgroups re-read  → expire(): back-offs that ended, evicted pods gone or running
//
// A pod in flight, evicted or backing off is never a candidate again (candidate()); its usage
// still counts for the node. No second victim is chosen for a signal while one is in flight
// for it (signalBusy()): the first victim's memory is not free yet.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "base/clock.h"
#include "node/eviction_order.h"
#include "policy/eviction.h"

namespace nodewarden::node {

class EvictionTracker {
 public:
  // A failed eviction (refused, or nothing to kill) keeps the pod out of decisions this long,
  // so the ranking moves on to other pods.
  static constexpr std::chrono::seconds kBackOff{60};
  // --dry-run logs the same decision for the same pod at most this often.
  static constexpr std::chrono::seconds kDryRunRepeat{30};

  // Dates the crossing of each threshold met now and not at the previous cycle. A kernel
  // notification (`notifiedAt`) dates it exactly; with polling the crossing happened since
  // the last observation below the threshold, and that time is used: the latency figure is
  // an upper bound, never flattering.
  void noteSignals(const std::vector<policy::SignalStatus>& signals,
                   const policy::EvictionState& before, SteadyTime now,
                   std::optional<SteadyTime> notifiedAt);
  // When the threshold was crossed (now if it was never seen below it).
  SteadyTime crossedAt(const policy::ThresholdKey& key, SteadyTime now) const;

  // Whether the pod may be chosen: not in flight, not evicted, not backing off.
  bool candidate(std::string_view uid) const;
  // Whether nothing is remembered (the view needs no filtering).
  bool empty() const { return inFlight_.empty() && evicted_.empty() && backOff_.empty(); }
  // The pods that are not candidates: in flight, evicted or backing off.
  std::vector<std::string> held() const;
  // Whether a victim for this signal is still exiting.
  bool signalBusy(policy::Signal signal) const;
  // The signals with a victim still exiting.
  std::set<policy::Signal> busySignals() const;
  bool inFlight(std::string_view uid) const { return inFlight_.contains(uid); }
  bool anyInFlight() const { return !inFlight_.empty(); }
  std::size_t inFlightCount() const { return inFlight_.size(); }
  // --dry-run: whether this pod's decision was logged within kDryRunRepeat (and remembers
  // that it is now).
  bool dryRunRepeat(const std::string& uid, SteadyTime now);

  // An order was sent; returns the record's index in records(). A dry run is recorded, never
  // in flight.
  std::size_t started(EvictionRecord record);
  // The actuator finished the order of records()[index].
  void finished(std::size_t index, const EvictionOutcome& outcome, SteadyTime now);

  // After the pod cgroups were re-read: back-offs that ended are dropped, and an evicted pod
  // is a candidate again once its cgroup is gone (`exists` false) or runs processes again
  // (`empty` false: a restarted static pod). Returns the UIDs running again.
  std::vector<std::string> expire(SteadyTime now,
                                  const std::function<bool(const std::string&)>& exists,
                                  const std::function<bool(const std::string&)>& isEmpty);

  const std::vector<EvictionRecord>& records() const { return records_; }
  EvictionRecord& record(std::size_t index) { return records_.at(index); }

 private:
  std::map<std::string, policy::Signal, std::less<>> inFlight_;  // UID → signal
  std::set<std::string, std::less<>> evicted_;
  std::map<std::string, SteadyTime, std::less<>> backOff_;  // UID → until
  std::map<std::string, SteadyTime> dryRunLogged_;
  std::vector<EvictionRecord> records_;

  struct LastObservation {
    std::int64_t available = 0;
    SteadyTime at{};
  };
  std::map<policy::ThresholdKey, LastObservation> lastObserved_;
  std::map<policy::ThresholdKey, SteadyTime> crossedAt_;
};

}  // namespace nodewarden::node
