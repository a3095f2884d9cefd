// node/pod_source.h's StaticPodSource: a refresh after files change gives the set a fresh
// source reading the whole directory gives — files added, edited in place, renamed into
// place, removed, made invalid, or given a UID another file has — while reading only the
// files its directory watch names.
#include <doctest/doctest.h>

#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <map>

#include "node/pod_source.h"
#include "tests/support/temp_dir.h"

using namespace nodewarden;
using namespace nodewarden::node;

namespace {

std::string manifest(const std::string& name, const std::string& uid, int priority) {
  return R"({"apiVersion":"v1","kind":"Pod","metadata":{"name":")" + name +
         R"(","namespace":"default","uid":")" + uid + R"("},"spec":{"priority":)" +
         std::to_string(priority) + R"(,"containers":[{"name":"c"}]}})";
}

// The set as UID → "key priority", order aside.
std::map<std::string, std::string> summary(const PodSet& set) {
  std::map<std::string, std::string> out;
  for (const policy::Pod& pod : set.pods) {
    out[pod.uid] = pod.key + " " + std::to_string(pod.priority) + " " + pod.nodeName;
  }
  return out;
}

// What a source that reads everything afresh sees now.
std::map<std::string, std::string> fresh(const testing::TempDir& dir) {
  StaticPodSource source(dir.path.string(), "node-1");
  source.refresh();
  return summary(source.current());
}

}  // namespace

TEST_CASE("a watched manifests directory is followed file by file, as a full read sees it") {
  testing::TempDir dir("nodewarden-pod-source");
  for (int i = 0; i < 20; ++i) {
    dir.write("p" + std::to_string(i) + ".json",
              manifest("p" + std::to_string(i), "uid-" + std::to_string(i), i));
  }
  StaticPodSource source(dir.path.string(), "node-1");
  REQUIRE(source.refresh());
  REQUIRE(source.changeFd() >= 0);
  CHECK(source.current().pods.size() == 20);
  CHECK_FALSE(source.refresh());  // nothing happened: no change

  dir.write("new.json", manifest("new", "uid-new", 7));  // added
  dir.write("p3.json", manifest("p3", "uid-3", 1000));   // edited
  std::filesystem::remove(dir.path / "p4.json");         // removed
  dir.write(".tmp-p5", manifest("p5", "uid-5", 55));
  std::filesystem::rename(dir.path / ".tmp-p5", dir.path / "p5.json");  // renamed in
  dir.write("p6.json", "{not json");                                    // broken
  dir.write("notes.txt", "not a manifest");                             // ignored
  CHECK(source.refresh());
  CHECK(summary(source.current()) == fresh(dir));
  CHECK(source.current().pods.size() == 19);  // 20 + new − p4 − p6
  bool reported = false;
  for (const std::string& problem : source.takeProblems()) {
    reported = reported || problem.find("p6.json") != std::string::npos;
  }
  CHECK(reported);

  // A second file with a UID already held: the first by name counts, as a full read says.
  dir.write("a-dup.json", manifest("dup", "uid-9", 99));
  CHECK(source.refresh());
  CHECK(summary(source.current()) == fresh(dir));
  std::filesystem::remove(dir.path / "a-dup.json");
  source.refresh();
  CHECK(summary(source.current()) == fresh(dir));

  // The broken file mended.
  dir.write("p6.json", manifest("p6", "uid-6", 6));
  CHECK(source.refresh());
  CHECK(summary(source.current()) == fresh(dir));
  CHECK(source.current().pods.size() == 20);
}
