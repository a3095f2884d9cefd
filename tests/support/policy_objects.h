// Snapshots and pods from JSON text, for the tests of policy/. Decisions point into the
// snapshots, so every snapshot made here lives for the whole test run.
#pragma once

#include <doctest/doctest.h>

#include <deque>
#include <string>
#include <vector>

#include "policy/model.h"

namespace nodewarden::testing {

inline const policy::Snapshot& keep(policy::Snapshot&& snapshot) {
  static std::deque<policy::Snapshot> kept;
  kept.push_back(std::move(snapshot));
  return kept.back();
}

// A snapshot (docs/reference.md §2) that must parse; the test stops with the errors if not.
inline const policy::Snapshot& snapshotFrom(const std::string& text) {
  policy::Diagnostics d;
  auto snapshot = policy::parseSnapshotText(text, d);
  REQUIRE_MESSAGE(snapshot.has_value(), (d.joined() + "\n" + text));
  return keep(std::move(*snapshot));
}

// A Pod object that must parse, resolved against `classes` (priority, QoS, requests).
inline policy::Pod podFrom(const std::string& text,
                           const std::vector<policy::PriorityClass>& classes = {}) {
  policy::Diagnostics d;
  auto json = policy::parseJsonText(text, d);
  REQUIRE_MESSAGE(json.has_value(), d.joined());
  auto pod = policy::parsePod(*json, "", d);
  REQUIRE_MESSAGE(pod.has_value(), d.joined());
  policy::resolvePod(*pod, classes);
  return *pod;
}

inline policy::Pod podFrom(const std::string& text, const policy::Snapshot& snapshot) {
  return podFrom(text, snapshot.priorityClasses);
}

}  // namespace nodewarden::testing
