// node/live_view.h: what the flight recorder samples every cycle (recorded()) is the pod list
// of the admission snapshot (snapshot()) — the same pods in the same order with the same
// figures — without a copy: the source's objects and the figures the agent writes in place.
// And the recorder, which reuses what it derived from those objects while their version
// stays: its samples still follow every figure and candidate that changed in place.
#include <doctest/doctest.h>

#include <chrono>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "base/clock.h"
#include "cgroups/hierarchy.h"
#include "cgroups/pods.h"
#include "node/live_view.h"
#include "node/recorder.h"
#include "record/episode.h"
#include "tests/support/cgroup_tree.h"

using namespace nodewarden;
using namespace nodewarden::node;
using namespace nodewarden::testing;

namespace {

constexpr std::uint64_t kMiB = 1024 * 1024;
const std::string kRunning = "00000000-0000-0000-0000-00000000000a";
const std::string kEnded = "00000000-0000-0000-0000-00000000000b";
const std::string kNoObject = "00000000-0000-0000-0000-00000000000c";
const std::string kNoCgroup = "00000000-0000-0000-0000-00000000000d";

policy::Pod pod(const std::string& name, const std::string& uid, const std::string& phase) {
  policy::Pod p;
  p.name = name;
  p.ns = "default";
  p.uid = uid;
  p.phase = phase;
  p.nodeName = "node-1";
  return p;
}

cgroups::Hierarchy hierarchyOf(const CgroupTree& tree) {
  cgroups::DiscoverOptions discover;
  discover.root = tree.path("cg").string();
  discover.useLibcgroup = false;
  auto h = cgroups::discoverHierarchy(discover);
  REQUIRE(h);
  return *h;
}

// The snapshot's figures of `uid`, nullptr when it has none.
const policy::PodStats* snapshotFigures(const policy::Snapshot& snapshot, const std::string& uid) {
  for (const policy::PodStats& s : snapshot.stats.at(snapshot.nodes.at(0).name).pods) {
    if (s.uid == uid) return &s;
  }
  return nullptr;
}

}  // namespace

TEST_CASE("the recorder's pods are the admission snapshot's, in its order, copying none") {
  // Three pod cgroups: one with a running pod's object, one whose object has ended, one with
  // no object; and a pod object with no cgroup.
  CgroupTree tree({dir("cg", {file("cgroup.controllers", "cpu memory pids\n"),
                              dir("kubepods", {file("cgroup.controllers", "cpu memory pids\n"),
                                               podV2(kRunning, podFiles(10 * kMiB)),
                                               podV2(kEnded, podFiles(20 * kMiB)),
                                               podV2(kNoObject, podFiles(30 * kMiB))})})});
  cgroups::PodCgroups index(hierarchyOf(tree), "kubepods");
  REQUIRE(index.refresh());
  REQUIRE(index.size() == 3);

  PodSet set;
  set.pods = {pod("no-cgroup", kNoCgroup, "Running"), pod("running", kRunning, "Running"),
              pod("ended", kEnded, "Succeeded")};
  policy::resolvePods(set.pods, set.priorityClasses);

  LiveView view;
  view.rebuild(set, index, "node-1", 2);
  REQUIRE(view.figures(kRunning) != nullptr);
  view.figures(kRunning)->memoryWorkingSetBytes = 10 * kMiB;
  view.figures(kEnded)->memoryWorkingSetBytes = 20 * kMiB;
  view.figures(kNoObject)->memoryWorkingSetBytes = 30 * kMiB;
  CHECK(view.figures(kNoCgroup) == nullptr);

  const policy::Snapshot snapshot = view.snapshot(set, {});
  const std::vector<RecordedPod>& recorded = view.recorded().pods;
  const std::uint64_t version = view.recorded().version;
  CHECK(version != 0);
  REQUIRE(recorded.size() == snapshot.pods.size());
  REQUIRE(recorded.size() == 4);
  for (std::size_t i = 0; i < recorded.size(); ++i) {
    CAPTURE(i);
    const policy::Pod& copy = snapshot.pods[i];
    CHECK(recorded[i].pod->uid == copy.uid);
    CHECK(recorded[i].pod->key == copy.key);
    CHECK(recorded[i].pod->priority == copy.priority);
    CHECK(recorded[i].pod->qos == copy.qos);
    const policy::PodStats* figures = snapshotFigures(snapshot, copy.uid);
    REQUIRE((recorded[i].figures == nullptr) == (figures == nullptr));
    if (figures != nullptr) {
      CHECK(recorded[i].figures->memoryWorkingSetBytes == figures->memoryWorkingSetBytes);
    }
  }
  // The set's objects themselves, in the set's order, then the made-up one.
  CHECK(recorded[0].pod == &set.pods[0]);
  CHECK(recorded[1].pod == &set.pods[1]);
  CHECK(recorded[2].pod == &set.pods[2]);  // ended: its object, as the snapshot has it
  CHECK(recorded[3].pod->uid == kNoObject);
  CHECK(recorded[3].pod->ns == "unknown");
  CHECK(recorded[0].figures == nullptr);  // no cgroup, no figures

  // A figure read anew is where the recorder looks, without a rebuild.
  view.figures(kRunning)->memoryWorkingSetBytes = 15 * kMiB;
  CHECK(view.recorded().pods[1].figures->memoryWorkingSetBytes == 15 * kMiB);
  CHECK(view.recorded().version == version);

  // A pod cgroup gone: the next rebuild leaves it out.
  tree.remove("cg/kubepods/pod" + kNoObject);
  REQUIRE(index.refresh());
  view.rebuild(set, index, "node-1", 2);
  CHECK(view.recorded().pods.size() == 3);
  CHECK(view.recorded().version != version);  // the objects may have changed
  CHECK(view.snapshot(set, {}).pods.size() == 3);
}

TEST_CASE("the recorder's samples follow figures and candidates that change in place") {
  CgroupTree tree({dir("cg", {file("cgroup.controllers", "cpu memory pids\n"),
                              dir("kubepods", {file("cgroup.controllers", "cpu memory pids\n"),
                                               podV2(kRunning, podFiles(10 * kMiB)),
                                               podV2(kEnded, podFiles(20 * kMiB))})})});
  cgroups::PodCgroups index(hierarchyOf(tree), "kubepods");
  REQUIRE(index.refresh());
  PodSet set;
  set.pods = {pod("a", kRunning, "Running"), pod("b", kEnded, "Running")};
  policy::resolvePods(set.pods, set.priorityClasses);
  LiveView view;
  view.rebuild(set, index, "node-1", 2);

  testing::TempDir state("nodewarden-recorder-state");
  ManualClock clock;
  RecorderOptions options;
  options.nodeName = "node-1";
  options.stateDir = state.path.string();
  options.procRoot = (state.path / "no-proc").string();
  Recorder recorder(options, index, clock);
  REQUIRE(recorder.open());

  // Every cycle meets a threshold: an episode is open throughout and holds every sample.
  policy::EvictionDecision decision;
  policy::SignalStatus met;
  met.key = {policy::Signal::MemoryAvailable, true};
  met.met = true;
  decision.signals.push_back(met);
  const policy::Policy policy;
  const policy::EvictionState evictionState;
  auto cycle = [&](const policy::NodeView& candidates) {
    clock.advance(std::chrono::seconds(1));
    recorder.cycle(candidates, view.recorded(), evictionState, decision, policy, clock.now());
  };
  const std::uint64_t version = view.recorded().version;
  view.figures(kRunning)->memoryWorkingSetBytes = 10 * kMiB;
  view.figures(kEnded)->memoryWorkingSetBytes = 20 * kMiB;
  cycle(view.all());  // 1: both candidates
  cycle(view.all());  // 2: nothing moved
  view.figures(kRunning)->memoryWorkingSetBytes = 11 * kMiB;
  cycle(view.all());  // 3: a figure moved in place
  cycle(view.only([](std::string_view uid) { return uid != kEnded; }));  // 4: one left
  cycle(view.all());                                                     // 5: back
  REQUIRE(view.recorded().version == version);  // the same objects throughout
  recorder.stop();

  const std::vector<std::string> files = recorder.episodeFiles();
  REQUIRE(files.size() == 1);
  std::ifstream in(files[0], std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(in)), {});
  auto episode = record::decodeEpisode(bytes);
  REQUIRE_MESSAGE(episode, (episode ? "" : episode.error().message));
  REQUIRE(episode->samples.size() == 5);
  REQUIRE(episode->pods.size() == 2);
  auto figure = [&](std::size_t sample, const std::string& uid) {
    for (const record::PodFigures& f : episode->samples[sample].pods) {
      if (episode->pods.at(f.pod).uid == uid) return f;
    }
    FAIL("no figures of " << uid << " in sample " << sample);
    return record::PodFigures{};
  };
  CHECK(figure(0, kRunning).workingSet == 10 * kMiB);
  CHECK(figure(1, kRunning).workingSet == 10 * kMiB);
  CHECK(figure(2, kRunning).workingSet == 11 * kMiB);
  CHECK(figure(2, kEnded).workingSet == 20 * kMiB);
  CHECK(figure(2, kEnded).candidate);
  CHECK_FALSE(figure(3, kEnded).candidate);
  CHECK(figure(3, kRunning).candidate);
  CHECK(figure(4, kEnded).candidate);
  CHECK(figure(4, kRunning).workingSet == 11 * kMiB);
}
