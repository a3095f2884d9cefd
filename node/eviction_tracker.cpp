#include "node/eviction_tracker.h"

#include <algorithm>

namespace nodewarden::node {

void EvictionTracker::noteSignals(const std::vector<policy::SignalStatus>& signals,
                                  const policy::EvictionState& before, SteadyTime now,
                                  std::optional<SteadyTime> notifiedAt) {
  for (const policy::SignalStatus& status : signals) {
    const bool wasMet = before.met.contains(status.key);
    if (status.met && !wasMet) {
      SteadyTime crossed = now;
      if (notifiedAt) {
        crossed = *notifiedAt;
      } else if (auto last = lastObserved_.find(status.key); last != lastObserved_.end()) {
        crossed = last->second.at;
      }
      crossedAt_[status.key] = crossed;
    } else if (!status.met) {
      crossedAt_.erase(status.key);
    }
    lastObserved_[status.key] = {status.available, now};
  }
}

SteadyTime EvictionTracker::crossedAt(const policy::ThresholdKey& key, SteadyTime now) const {
  auto it = crossedAt_.find(key);
  return it == crossedAt_.end() ? now : it->second;
}

bool EvictionTracker::candidate(std::string_view uid) const {
  return !inFlight_.contains(uid) && !evicted_.contains(uid) && !backOff_.contains(uid);
}

std::vector<std::string> EvictionTracker::held() const {
  std::vector<std::string> uids;
  for (const auto& [uid, signal] : inFlight_) uids.push_back(uid);
  for (const std::string& uid : evicted_) uids.push_back(uid);
  for (const auto& [uid, until] : backOff_) uids.push_back(uid);
  return uids;
}

bool EvictionTracker::signalBusy(policy::Signal signal) const {
  return std::any_of(inFlight_.begin(), inFlight_.end(),
                     [&](const auto& entry) { return entry.second == signal; });
}

std::set<policy::Signal> EvictionTracker::busySignals() const {
  std::set<policy::Signal> busy;
  for (const auto& [uid, signal] : inFlight_) busy.insert(signal);
  return busy;
}

bool EvictionTracker::dryRunRepeat(const std::string& uid, SteadyTime now) {
  auto logged = dryRunLogged_.find(uid);
  if (logged != dryRunLogged_.end() && now - logged->second < kDryRunRepeat) return true;
  dryRunLogged_[uid] = now;
  return false;
}

std::size_t EvictionTracker::started(EvictionRecord record) {
  if (!record.order.dryRun) inFlight_[record.order.uid] = record.order.threshold.signal;
  records_.push_back(std::move(record));
  return records_.size() - 1;
}

void EvictionTracker::finished(std::size_t index, const EvictionOutcome& outcome, SteadyTime now) {
  EvictionRecord& record = records_.at(index);
  record.outcome = outcome;
  const std::string& uid = record.order.uid;
  inFlight_.erase(uid);
  if (record.order.dryRun) return;
  if (outcome.emptied) {
    evicted_.insert(uid);
  } else {
    backOff_[uid] = now + kBackOff;
  }
}

std::vector<std::string> EvictionTracker::expire(
    SteadyTime now, const std::function<bool(const std::string&)>& exists,
    const std::function<bool(const std::string&)>& isEmpty) {
  std::erase_if(backOff_, [&](const auto& entry) { return entry.second <= now; });
  std::vector<std::string> runningAgain;
  for (auto it = evicted_.begin(); it != evicted_.end();) {
    if (exists(*it) && isEmpty(*it)) {
      ++it;
      continue;
    }
    if (exists(*it)) runningAgain.push_back(*it);
    it = evicted_.erase(it);
  }
  return runningAgain;
}

}  // namespace nodewarden::node
