// Discovery, the pod index and the scan on the checked-in cgroup trees of
// tests/fixtures/cgroup/ (see its README.md for the figures). Tests that change a tree work on
// a private copy in a fresh temporary directory.
#include <doctest/doctest.h>
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "cgroups/hierarchy.h"
#include "cgroups/parsers.h"
#include "cgroups/pods.h"
#include "cgroups/readers.h"

namespace nodewarden::cgroups {
namespace {

namespace fs = std::filesystem;
using std::chrono::steady_clock;

#define REQUIRE_OK(expr)                                                                     \
  [&]() {                                                                                    \
    auto result_ = (expr);                                                                   \
    REQUIRE_MESSAGE(result_.ok(), (result_.ok() ? std::string() : result_.error().message)); \
    return std::move(result_).value();                                                       \
  }()

const std::string kFixtures = std::string(NODEWARDEN_SOURCE_ROOT) + "/tests/fixtures/cgroup";
const std::string kProcRoot = kFixtures + "/proc";

// Pod UIDs of the trees (README.md).
constexpr const char* kSystemdBurstable = "1f2e3d4c-aaaa-bbbb-cccc-0123456789ab";
constexpr const char* kSystemdBestEffort = "7c0d5a2e-3b1f-4e8a-9d2c-5f6e7a8b9c0d";
constexpr const char* kSystemdGuaranteed = "a0b1c2d3-e4f5-4a6b-8c7d-9e0f1a2b3c4d";
constexpr const char* kCgroupfsBurstable = "5b6c7d8e-1111-2222-3333-444455556666";
constexpr const char* kCgroupfsBestEffort = "9a8b7c6d-5e4f-4a3b-2c1d-0e9f8a7b6c5d";
constexpr const char* kCgroupfsGuaranteed = "c4d5e6f7-0a1b-4c2d-8e3f-5a6b7c8d9e0f";
constexpr const char* kV1Burstable = "3e4f5a6b-7c8d-4e9f-a0b1-c2d3e4f5a6b7";
constexpr const char* kV1BestEffort = "d1e2f3a4-b5c6-4d7e-8f9a-0b1c2d3e4f5a";
constexpr const char* kV1Guaranteed = "6f7a8b9c-0d1e-4f2a-b3c4-d5e6f7a8b9c0";
constexpr const char* kMalformedGood = "11111111-2222-4333-8444-555555555555";

// A private copy of a fixture tree in a fresh temporary directory, removed on destruction.
class TempTree {
 public:
  explicit TempTree(const std::string& tree) {
    std::string pattern = (fs::temp_directory_path() / "nodewarden-fixtures-XXXXXX").string();
    REQUIRE(::mkdtemp(pattern.data()) != nullptr);
    path_ = pattern;
    if (!tree.empty()) fs::copy(kFixtures + "/" + tree, path_, fs::copy_options::recursive);
  }
  TempTree(const TempTree&) = delete;
  TempTree& operator=(const TempTree&) = delete;
  ~TempTree() {
    std::error_code ignored;
    fs::remove_all(path_, ignored);
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

DiscoverOptions fixtureOptions(const std::string& root) {
  // The fixture is a plain directory, not a mount: mountinfo lists nothing below it and the
  // layout is read from the tree.
  return DiscoverOptions{
      .root = root, .mountInfoPath = "/proc/self/mountinfo", .useLibcgroup = false};
}

Hierarchy discover(const std::string& root) {
  return REQUIRE_OK(discoverHierarchy(fixtureOptions(root)));
}

// Rewrites a file in place (same inode), as the kernel regenerates a control file: descriptors
// the CgroupDir already holds see the new text.
void overwrite(const std::string& path, const std::string& text) {
  REQUIRE(fs::exists(path));
  std::ofstream out(path, std::ios::out | std::ios::trunc);
  out << text;
  REQUIRE(out.good());
}

const PodStats* findPod(const Summary& summary, std::string_view uid) {
  for (const PodStats& pod : summary.pods) {
    if (pod.uid == uid) return &pod;
  }
  return nullptr;
}

std::set<std::string> asSet(const std::vector<std::string>& list) {
  return {list.begin(), list.end()};
}

std::string errorsText(const std::vector<Error>& errors) {
  std::string out;
  for (const Error& error : errors) out += "\n  " + error.message;
  return out;
}

ScanOptions fixtureScanOptions() {
  ScanOptions options;
  options.procRoot = kProcRoot;
  options.nodeFsPath = "";
  return options;
}

const steady_clock::time_point kT0{std::chrono::hours(1)};

// Node capacity from tests/fixtures/cgroup/proc/meminfo: MemTotal 16384000 kB.
constexpr std::uint64_t kMemTotal = 16384000ULL * 1024;

// ------------------------------------------------------------------------------------------

TEST_CASE("fixtures: discoverHierarchy reads a cgroup v2 tree from its files") {
  for (const char* tree : {"v2-systemd", "v2-cgroupfs", "malformed"}) {
    CAPTURE(tree);
    const std::string root = kFixtures + "/" + tree;
    const Hierarchy h = discover(root);
    CHECK((h.mode == Mode::Unified));
    CHECK(h.root == root);
    CHECK(h.memory == root);
    CHECK(h.cpuacct == root);
    CHECK(h.pids == root);
    CHECK(h.unified == root);
    CHECK(h.freezer.empty());
    CHECK((h.memoryVersion == Version::V2));
    CHECK((h.cpuVersion == Version::V2));
    CHECK((h.pidsVersion == Version::V2));
    CHECK(h.unifiedControllers == std::vector<std::string>{"cpuset", "cpu", "io", "memory",
                                                           "hugetlb", "pids", "rdma", "misc"});
    REQUIRE_FALSE(h.notes.empty());
    CHECK(h.notes.back().find("layout read from the directory tree") != std::string::npos);
  }
  // A trailing slash on the root changes nothing below it.
  const Hierarchy slashed = discover(kFixtures + "/v2-systemd/");
  CHECK(slashed.memory == kFixtures + "/v2-systemd");
}

TEST_CASE("fixtures: discoverHierarchy reads a hybrid v1 tree from its directories") {
  const std::string root = kFixtures + "/v1-cgroupfs";
  const Hierarchy h = discover(root);
  CHECK((h.mode == Mode::Hybrid));
  CHECK(h.memory == root + "/memory");
  CHECK(h.cpuacct == root + "/cpu,cpuacct");
  CHECK(h.pids == root + "/pids");
  CHECK(h.freezer == root + "/freezer");
  CHECK(h.unified == root + "/unified");
  CHECK((h.memoryVersion == Version::V1));
  CHECK((h.cpuVersion == Version::V1));
  CHECK((h.pidsVersion == Version::V1));
  CHECK(h.unifiedControllers.empty());  // unified/cgroup.controllers is empty on hybrid hosts
}

TEST_CASE("fixtures: discoverHierarchy without a memory hierarchy is an error") {
  CHECK_FALSE(discoverHierarchy(fixtureOptions(kFixtures + "/does-not-exist")).ok());
  TempTree empty("");
  auto none = discoverHierarchy(fixtureOptions(empty.path()));
  REQUIRE_FALSE(none.ok());
  CHECK(none.error().message.find("no memory cgroup hierarchy below " + empty.path()) !=
        std::string::npos);
  CHECK(none.error().message.find("(no cgroup mounts there)") != std::string::npos);

  // v1 controllers, but not memory: the message lists what was found.
  fs::create_directories(empty.path() + "/cpu,cpuacct/kubepods");
  fs::create_directories(empty.path() + "/pids");
  auto noMemory = discoverHierarchy(fixtureOptions(empty.path()));
  REQUIRE_FALSE(noMemory.ok());
  CHECK(noMemory.error().message.find("cpuacct=" + empty.path() + "/cpu,cpuacct") !=
        std::string::npos);

  // An unreadable mountinfo is a note, not a failure, for a directory tree.
  DiscoverOptions options = fixtureOptions(kFixtures + "/v2-cgroupfs");
  options.mountInfoPath = kFixtures + "/no-such-mountinfo";
  const Hierarchy h = REQUIRE_OK(discoverHierarchy(options));
  CHECK(h.memory == kFixtures + "/v2-cgroupfs");
  CHECK(h.notes.front().find("cannot read " + options.mountInfoPath) != std::string::npos);
}

TEST_CASE("fixtures: findKubepods defaults, overrides and errors") {
  const Hierarchy systemd = discover(kFixtures + "/v2-systemd");
  const Hierarchy cgroupfs = discover(kFixtures + "/v2-cgroupfs");
  const Hierarchy v1 = discover(kFixtures + "/v1-cgroupfs");
  CHECK(REQUIRE_OK(PodCgroups::findKubepods(systemd, std::nullopt)) == "kubepods.slice");
  CHECK(REQUIRE_OK(PodCgroups::findKubepods(cgroupfs, std::nullopt)) == "kubepods");
  CHECK(REQUIRE_OK(PodCgroups::findKubepods(v1, std::nullopt)) == "kubepods");

  CHECK(REQUIRE_OK(PodCgroups::findKubepods(systemd, "kubepods.slice/kubepods-burstable.slice")) ==
        "kubepods.slice/kubepods-burstable.slice");
  CHECK(REQUIRE_OK(PodCgroups::findKubepods(systemd, "/kubepods.slice/")) == "kubepods.slice");
  CHECK(REQUIRE_OK(PodCgroups::findKubepods(v1, "kubepods/burstable")) == "kubepods/burstable");

  auto missing = PodCgroups::findKubepods(cgroupfs, "kubepods.slice");
  REQUIRE_FALSE(missing.ok());
  CHECK(missing.error().message ==
        "--kubepods-cgroup: " + cgroupfs.memory + "/kubepods.slice does not exist");
  // A file is not a cgroup.
  CHECK_FALSE(PodCgroups::findKubepods(cgroupfs, "kubepods/memory.current").ok());
  for (const char* bad : {"", "/", "../v2-systemd/kubepods.slice", "kubepods/.."}) {
    CAPTURE(bad);
    auto result = PodCgroups::findKubepods(cgroupfs, std::string(bad));
    REQUIRE_FALSE(result.ok());
    CHECK(result.error().message.find("expected a cgroup path below the hierarchy root") !=
          std::string::npos);
  }

  TempTree bare("");
  std::ofstream(bare.path() + "/cgroup.controllers") << "cpu memory pids\n";
  const Hierarchy noKubepods = discover(bare.path());
  auto none = PodCgroups::findKubepods(noKubepods, std::nullopt);
  REQUIRE_FALSE(none.ok());
  CHECK(none.error().message.find("no kubepods cgroup") != std::string::npos);
  CHECK(none.error().message.find("--kubepods-cgroup") != std::string::npos);
}

TEST_CASE("fixtures: refresh indexes the pods of a systemd v2 tree") {
  const Hierarchy h = discover(kFixtures + "/v2-systemd");
  PodCgroups pods(h, "kubepods.slice");
  CHECK((pods.driver() == Driver::Systemd));
  const RefreshResult first = REQUIRE_OK(pods.refresh());
  CHECK(first.errors.empty());
  CHECK(first.removed.empty());
  CHECK(asSet(first.added) ==
        std::set<std::string>{kSystemdBurstable, kSystemdBestEffort, kSystemdGuaranteed});
  REQUIRE(pods.size() == 3);
  CHECK(pods.kubepodsMemory().valid());
  CHECK(pods.kubepodsMemory().path() == h.memory + "/kubepods.slice");
  CHECK(pods.kubepodsUnified().has_value());

  const PodCgroup* burstable = pods.find(kSystemdBurstable);
  REQUIRE(burstable != nullptr);
  CHECK(burstable->qos == "burstable");
  CHECK(burstable->relativePath ==
        "kubepods.slice/kubepods-burstable.slice/"
        "kubepods-burstable-pod1f2e3d4c_aaaa_bbbb_cccc_0123456789ab.slice");
  CHECK(burstable->memory.path() == h.memory + "/" + burstable->relativePath);
  CHECK((burstable->memory.version() == Version::V2));
  CHECK(burstable->cpu.has_value());
  CHECK(burstable->pids.has_value());
  CHECK(burstable->unified.has_value());
  CHECK_FALSE(burstable->freezer.has_value());
  CHECK_FALSE(burstable->lastCpuNanos.has_value());

  const PodCgroup* besteffort = pods.find(kSystemdBestEffort);
  REQUIRE(besteffort != nullptr);
  CHECK(besteffort->qos == "besteffort");
  CHECK(besteffort->relativePath ==
        "kubepods.slice/kubepods-besteffort.slice/"
        "kubepods-besteffort-pod7c0d5a2e_3b1f_4e8a_9d2c_5f6e7a8b9c0d.slice");
  const PodCgroup* guaranteed = pods.find(kSystemdGuaranteed);
  REQUIRE(guaranteed != nullptr);
  CHECK(guaranteed->qos == "guaranteed");
  CHECK(guaranteed->relativePath ==
        "kubepods.slice/kubepods-poda0b1c2d3_e4f5_4a6b_8c7d_9e0f1a2b3c4d.slice");
  CHECK(pods.find("cri-containerd-fedcba9876543210fedcba9876543210fedcba9876543210fedcba9876543210."
                  "scope") == nullptr);

  // Nothing changed: nothing to report, the same objects stay.
  const RefreshResult again = REQUIRE_OK(pods.refresh());
  CHECK(again.added.empty());
  CHECK(again.removed.empty());
  CHECK(again.errors.empty());
  CHECK(pods.find(kSystemdBurstable) == burstable);
}

TEST_CASE("fixtures: refresh indexes the pods of cgroupfs v2 and v1 trees") {
  {
    const Hierarchy h = discover(kFixtures + "/v2-cgroupfs");
    PodCgroups pods(h, "kubepods");
    CHECK((pods.driver() == Driver::Cgroupfs));
    const RefreshResult result = REQUIRE_OK(pods.refresh());
    CHECK(result.errors.empty());
    CHECK(asSet(result.added) ==
          std::set<std::string>{kCgroupfsBurstable, kCgroupfsBestEffort, kCgroupfsGuaranteed});
    CHECK(pods.find(kCgroupfsBurstable)->relativePath ==
          "kubepods/burstable/pod5b6c7d8e-1111-2222-3333-444455556666");
    CHECK(pods.find(kCgroupfsBestEffort)->qos == "besteffort");
    CHECK(pods.find(kCgroupfsGuaranteed)->qos == "guaranteed");
    CHECK(pods.find(kCgroupfsGuaranteed)->relativePath ==
          "kubepods/podc4d5e6f7-0a1b-4c2d-8e3f-5a6b7c8d9e0f");
  }
  {
    const Hierarchy h = discover(kFixtures + "/v1-cgroupfs");
    PodCgroups pods(h, "kubepods");
    const RefreshResult result = REQUIRE_OK(pods.refresh());
    CHECK(result.errors.empty());
    CHECK(asSet(result.added) == std::set<std::string>{kV1Burstable, kV1BestEffort, kV1Guaranteed});
    CHECK_FALSE(pods.kubepodsUnified().has_value());  // no kubepods in unified/ with cgroupfs
    const PodCgroup* burstable = pods.find(kV1Burstable);
    REQUIRE(burstable != nullptr);
    CHECK(burstable->qos == "burstable");
    CHECK(burstable->memory.path() ==
          h.memory + "/kubepods/burstable/pod3e4f5a6b-7c8d-4e9f-a0b1-c2d3e4f5a6b7");
    CHECK((burstable->memory.version() == Version::V1));
    REQUIRE(burstable->cpu.has_value());
    CHECK(burstable->cpu->path() ==
          h.cpuacct + "/kubepods/burstable/pod3e4f5a6b-7c8d-4e9f-a0b1-c2d3e4f5a6b7");
    // The pod's directories keep one copy of its relative path between them, not a path each.
    REQUIRE(burstable->memory.below() != nullptr);
    CHECK(*burstable->memory.below() ==
          "kubepods/burstable/pod3e4f5a6b-7c8d-4e9f-a0b1-c2d3e4f5a6b7");
    CHECK(burstable->cpu->below() == burstable->memory.below());
    CHECK(burstable->pids.has_value());
    REQUIRE(burstable->freezer.has_value());
    CHECK(burstable->freezer->below() == burstable->memory.below());
    CHECK_FALSE(burstable->unified.has_value());
    // The best-effort pod is missing from the pids hierarchy: indexed without it.
    const PodCgroup* besteffort = pods.find(kV1BestEffort);
    REQUIRE(besteffort != nullptr);
    CHECK_FALSE(besteffort->pids.has_value());
    CHECK(besteffort->cpu.has_value());
    CHECK(pods.find(kV1Guaranteed)->qos == "guaranteed");
  }
}

TEST_CASE("fixtures: a pod is looked for again only in hierarchies that have the kubepods cgroup") {
  // v1-cgroupfs: unified/ has no kubepods cgroup (the runtime does not use it); pids/ has
  // one, without the best-effort pod's directory yet.
  TempTree tree("v1-cgroupfs");
  const Hierarchy h = discover(tree.path());
  REQUIRE_FALSE(h.unified.empty());
  REQUIRE_FALSE(fs::exists(h.unified + "/kubepods"));
  PodCgroups pods(h, "kubepods");
  REQUIRE_OK(pods.refresh());
  const PodCgroup* besteffort = pods.find(kV1BestEffort);
  REQUIRE(besteffort != nullptr);
  CHECK_FALSE(besteffort->pids.has_value());
  CHECK_FALSE(besteffort->unified.has_value());
  CHECK(pods.mayHaveChanged());  // the best-effort pod's pids directory is still looked for

  // It appears: the next update opens it.
  const std::string pidsDir = h.pids + "/kubepods/besteffort/pod" + kV1BestEffort;
  fs::create_directories(pidsDir);
  std::ofstream(pidsDir + "/pids.current") << "0\n";
  REQUIRE_OK(pods.update());
  REQUIRE(pods.find(kV1BestEffort) == besteffort);
  CHECK(besteffort->pids.has_value());
  // Nothing else is looked for: no pod is in unified/, which has no kubepods cgroup.
  CHECK_FALSE(pods.mayHaveChanged());
  CHECK_FALSE(pods.find(kV1Burstable)->unified.has_value());

  // A kubepods cgroup made there later counts from the next full refresh on: pods that
  // appear are then looked for in it.
  fs::create_directories(h.unified + "/kubepods/burstable");
  REQUIRE_OK(pods.refresh());
  const std::string uid = "0f0e0d0c-0b0a-4909-8807-060504030201";
  fs::create_directories(h.memory + "/kubepods/burstable/pod" + uid);
  std::ofstream(h.memory + "/kubepods/burstable/pod" + uid + "/memory.usage_in_bytes") << "0\n";
  REQUIRE_OK(pods.refresh());
  REQUIRE(pods.find(uid) != nullptr);
  CHECK_FALSE(pods.find(uid)->unified.has_value());
  CHECK(pods.mayHaveChanged());  // its unified directory is looked for
  fs::create_directories(h.unified + "/kubepods/burstable/pod" + uid);
  REQUIRE_OK(pods.update());
  CHECK(pods.find(uid)->unified.has_value());
}

TEST_CASE("fixtures: scanNode on a systemd v2 tree, CPU rate on the second scan") {
  TempTree tree("v2-systemd");
  const Hierarchy h = discover(tree.path());
  PodCgroups pods(h, REQUIRE_OK(PodCgroups::findKubepods(h, std::nullopt)));
  REQUIRE(REQUIRE_OK(pods.refresh()).added.size() == 3);

  const ScanResult first = scanNode(pods, fixtureScanOptions(), kT0);
  INFO("errors:" << errorsText(first.errors));
  CHECK(first.errors.empty());
  CHECK(first.vanished.size() == 0);
  REQUIRE(first.summary.pods.size() == 3);

  // The v2 root has no memory.current: as cAdvisor (runc's cgroups library) reports it, usage
  // is the root memory.stat's anon 3758096384 + file 5368709120, the working set that minus
  // inactive_file 2147483648; capacity still comes from /proc/meminfo.
  const NodeStats& node = first.summary.node;
  CHECK(node.memoryWorkingSetBytes == std::optional<std::uint64_t>(6979321856));
  CHECK(node.memoryAvailableBytes == std::optional<std::uint64_t>(kMemTotal - 6979321856));
  // kubepods.slice: memory.current 1896873984, inactive_file 312475648, memory.max 15032385536.
  CHECK(node.podsMemoryWorkingSetBytes == std::optional<std::uint64_t>(1584398336));
  CHECK(node.podsMemoryAvailableBytes == std::optional<std::uint64_t>(15032385536 - 1584398336));
  CHECK(node.maxPid == std::optional<std::uint64_t>(4194304));
  CHECK(node.curProc.has_value());
  CHECK_FALSE(node.nodeFs.availableBytes.has_value());  // nodeFsPath "" is not read
  CHECK_FALSE(node.imageFs.has_value());

  const PodStats* burstable = findPod(first.summary, kSystemdBurstable);
  const PodStats* besteffort = findPod(first.summary, kSystemdBestEffort);
  const PodStats* guaranteed = findPod(first.summary, kSystemdGuaranteed);
  REQUIRE(burstable != nullptr);
  REQUIRE(besteffort != nullptr);
  REQUIRE(guaranteed != nullptr);
  CHECK(burstable->memoryWorkingSetBytes == std::optional<std::uint64_t>(734003200 - 104857600));
  CHECK(besteffort->memoryWorkingSetBytes == std::optional<std::uint64_t>(54525952 - 6291456));
  CHECK(guaranteed->memoryWorkingSetBytes == std::optional<std::uint64_t>(1107296256 - 201326592));
  CHECK(burstable->processCount == std::optional<std::uint64_t>(12));
  CHECK(besteffort->processCount == std::optional<std::uint64_t>(3));
  CHECK(guaranteed->processCount == std::optional<std::uint64_t>(25));
  for (const PodStats& pod : first.summary.pods) {
    CAPTURE(pod.uid);
    CHECK_FALSE(pod.cpuUsageNanoCores.has_value());  // one reading is not a rate
  }
  CHECK(pods.find(kSystemdBurstable)->lastCpuNanos == std::optional<std::uint64_t>(8123456789000));

  // One second later the burstable pod has used 0.5 s of CPU: half a core.
  const std::string cpuStat = pods.find(kSystemdBurstable)->cpu->path() + "/cpu.stat";
  overwrite(cpuStat,
            "usage_usec 8123956789\nuser_usec 5686769752\nsystem_usec 2437187037\n"
            "core_sched.force_idle_usec 0\nnr_periods 18240\nnr_throttled 412\n"
            "throttled_usec 20617304\nnr_bursts 0\nburst_usec 0\n");
  const ScanResult second = scanNode(pods, fixtureScanOptions(), kT0 + std::chrono::seconds(1));
  CHECK(second.errors.empty());
  CHECK(findPod(second.summary, kSystemdBurstable)->cpuUsageNanoCores ==
        std::optional<std::uint64_t>(500000000));
  CHECK(findPod(second.summary, kSystemdBestEffort)->cpuUsageNanoCores ==
        std::optional<std::uint64_t>(0));
  CHECK(findPod(second.summary, kSystemdGuaranteed)->cpuUsageNanoCores ==
        std::optional<std::uint64_t>(0));

  // No time passed: no rate.
  const ScanResult same = scanNode(pods, fixtureScanOptions(), kT0 + std::chrono::seconds(1));
  CHECK_FALSE(findPod(same.summary, kSystemdBurstable)->cpuUsageNanoCores.has_value());
  // A counter going backwards: no rate either, and the new reading is the next base.
  overwrite(cpuStat, "usage_usec 1000\nuser_usec 600\nsystem_usec 400\n");
  const ScanResult third = scanNode(pods, fixtureScanOptions(), kT0 + std::chrono::seconds(2));
  CHECK_FALSE(findPod(third.summary, kSystemdBurstable)->cpuUsageNanoCores.has_value());
  overwrite(cpuStat, "usage_usec 251000\nuser_usec 600\nsystem_usec 400\n");
  const ScanResult fourth =
      scanNode(pods, fixtureScanOptions(), kT0 + std::chrono::milliseconds(2500));
  CHECK(findPod(fourth.summary, kSystemdBurstable)->cpuUsageNanoCores ==
        std::optional<std::uint64_t>(500000000));
}

TEST_CASE("fixtures: scanNode on a cgroupfs v2 tree") {
  const Hierarchy h = discover(kFixtures + "/v2-cgroupfs");
  PodCgroups pods(h, "kubepods");
  REQUIRE(REQUIRE_OK(pods.refresh()).added.size() == 3);
  const ScanResult scan = scanNode(pods, fixtureScanOptions(), kT0);
  INFO("errors:" << errorsText(scan.errors));
  CHECK(scan.errors.empty());
  // kubepods: memory.current 2187329536, inactive_file 99614720, memory.max 8589934592.
  CHECK(scan.summary.node.podsMemoryWorkingSetBytes == std::optional<std::uint64_t>(2087714816));
  CHECK(scan.summary.node.podsMemoryAvailableBytes ==
        std::optional<std::uint64_t>(8589934592 - 2087714816));
  const PodStats* burstable = findPod(scan.summary, kCgroupfsBurstable);
  const PodStats* besteffort = findPod(scan.summary, kCgroupfsBestEffort);
  const PodStats* guaranteed = findPod(scan.summary, kCgroupfsGuaranteed);
  REQUIRE(burstable != nullptr);
  REQUIRE(besteffort != nullptr);
  REQUIRE(guaranteed != nullptr);
  CHECK(burstable->memoryWorkingSetBytes == std::optional<std::uint64_t>(377487360 - 31457280));
  CHECK(besteffort->memoryWorkingSetBytes == std::optional<std::uint64_t>(13631488 - 1048576));
  CHECK(guaranteed->memoryWorkingSetBytes == std::optional<std::uint64_t>(1795162112 - 67108864));
  CHECK(burstable->processCount == std::optional<std::uint64_t>(6));
  CHECK(besteffort->processCount == std::optional<std::uint64_t>(2));
  CHECK(guaranteed->processCount == std::optional<std::uint64_t>(11));
}

TEST_CASE("fixtures: scanNode on a hybrid v1 tree") {
  TempTree tree("v1-cgroupfs");
  const Hierarchy h = discover(tree.path());
  PodCgroups pods(h, "kubepods");
  REQUIRE(REQUIRE_OK(pods.refresh()).added.size() == 3);
  const ScanResult scan = scanNode(pods, fixtureScanOptions(), kT0);
  INFO("errors:" << errorsText(scan.errors));
  CHECK(scan.errors.empty());

  // On v1 the node's working set is the root memory cgroup's, as cAdvisor reads it:
  // usage_in_bytes 5368709120 − total_inactive_file 1073741824.
  const NodeStats& node = scan.summary.node;
  CHECK(node.memoryWorkingSetBytes == std::optional<std::uint64_t>(4294967296));
  CHECK(node.memoryAvailableBytes == std::optional<std::uint64_t>(kMemTotal - 4294967296));
  // kubepods: usage 2147483648 − total_inactive_file 419430400; limit 15032385536.
  CHECK(node.podsMemoryWorkingSetBytes == std::optional<std::uint64_t>(1728053248));
  CHECK(node.podsMemoryAvailableBytes == std::optional<std::uint64_t>(15032385536 - 1728053248));

  const PodStats* burstable = findPod(scan.summary, kV1Burstable);
  const PodStats* besteffort = findPod(scan.summary, kV1BestEffort);
  const PodStats* guaranteed = findPod(scan.summary, kV1Guaranteed);
  REQUIRE(burstable != nullptr);
  REQUIRE(besteffort != nullptr);
  REQUIRE(guaranteed != nullptr);
  // total_inactive_file, not the pod's local inactive_file (0).
  CHECK(burstable->memoryWorkingSetBytes == std::optional<std::uint64_t>(629145600 - 125829120));
  // usage_in_bytes 20971520 < total_inactive_file 23068672: floored at 0.
  CHECK(besteffort->memoryWorkingSetBytes == std::optional<std::uint64_t>(0));
  CHECK(guaranteed->memoryWorkingSetBytes == std::optional<std::uint64_t>(805306368 - 67108864));
  CHECK(burstable->processCount == std::optional<std::uint64_t>(7));   // pids.current
  CHECK(besteffort->processCount == std::optional<std::uint64_t>(2));  // cgroup.procs subtree
  CHECK(guaranteed->processCount == std::optional<std::uint64_t>(3));
  CHECK(pods.find(kV1Burstable)->lastCpuNanos == std::optional<std::uint64_t>(45678901234));

  // cpuacct.usage is in nanoseconds: +0.25 s over 0.5 s is half a core.
  overwrite(pods.find(kV1Burstable)->cpu->path() + "/cpuacct.usage", "45928901234\n");
  const ScanResult second =
      scanNode(pods, fixtureScanOptions(), kT0 + std::chrono::milliseconds(500));
  CHECK(second.errors.empty());
  CHECK(findPod(second.summary, kV1Burstable)->cpuUsageNanoCores ==
        std::optional<std::uint64_t>(500000000));
}

TEST_CASE("fixtures: scanNode without /proc figures still reads the pods") {
  const Hierarchy h = discover(kFixtures + "/v2-cgroupfs");
  PodCgroups pods(h, "kubepods");
  REQUIRE(REQUIRE_OK(pods.refresh()).added.size() == 3);
  ScanOptions options = fixtureScanOptions();
  options.procRoot = kFixtures + "/no-such-proc";
  const ScanResult scan = scanNode(pods, options, kT0);
  REQUIRE(scan.errors.size() == 2);  // meminfo and pid_max
  CHECK(scan.errors[0].message.find(options.procRoot + "/meminfo") != std::string::npos);
  CHECK(scan.errors[1].message.find(options.procRoot + "/sys/kernel/pid_max") != std::string::npos);
  CHECK_FALSE(scan.summary.node.memoryAvailableBytes.has_value());
  CHECK_FALSE(scan.summary.node.maxPid.has_value());
  CHECK(scan.summary.node.podsMemoryWorkingSetBytes.has_value());
  CHECK(scan.summary.pods.size() == 3);
}

TEST_CASE("fixtures: incremental refresh sees pods added, removed, recreated and moved") {
  TempTree tree("v2-cgroupfs");
  const Hierarchy h = discover(tree.path());
  PodCgroups pods(h, "kubepods");
  REQUIRE(REQUIRE_OK(pods.refresh()).added.size() == 3);
  const std::string kubepods = tree.path() + "/kubepods";
  const std::string source = kFixtures + "/v2-cgroupfs/kubepods";

  SUBCASE("a new pod") {
    const std::string uid = "0f1e2d3c-4b5a-4968-8776-a5b4c3d2e1f0";
    fs::copy(source + "/besteffort/pod" + kCgroupfsBestEffort, kubepods + "/besteffort/pod" + uid,
             fs::copy_options::recursive);
    const RefreshResult result = REQUIRE_OK(pods.refresh());
    CHECK(result.added == std::vector<std::string>{uid});
    CHECK(result.removed.empty());
    CHECK(result.errors.empty());
    REQUIRE(pods.find(uid) != nullptr);
    CHECK(pods.find(uid)->qos == "besteffort");
    CHECK(pods.find(uid)->relativePath == "kubepods/besteffort/pod" + uid);
    CHECK(pods.size() == 4);
  }
  SUBCASE("a removed pod") {
    fs::remove_all(kubepods + "/burstable/pod" + kCgroupfsBurstable);
    const RefreshResult result = REQUIRE_OK(pods.refresh());
    CHECK(result.added.empty());
    CHECK(result.removed == std::vector<std::string>{kCgroupfsBurstable});
    CHECK(pods.find(kCgroupfsBurstable) == nullptr);
    CHECK(pods.size() == 2);
  }
  SUBCASE("a pod recreated under the same name starts afresh") {
    const std::string path = kubepods + "/pod" + kCgroupfsGuaranteed;
    // A first scan records a CPU reading for the old cgroup.
    (void)scanNode(pods, fixtureScanOptions(), kT0);
    const ino_t oldInode = pods.find(kCgroupfsGuaranteed)->memory.inode();
    REQUIRE(pods.find(kCgroupfsGuaranteed)->lastCpuNanos.has_value());
    // The index still holds the old directory open, so the new one cannot reuse its inode.
    fs::remove_all(path);
    fs::copy(source + "/pod" + kCgroupfsGuaranteed, path, fs::copy_options::recursive);
    const RefreshResult result = REQUIRE_OK(pods.refresh());
    CHECK(result.removed == std::vector<std::string>{kCgroupfsGuaranteed});
    CHECK(result.added == std::vector<std::string>{kCgroupfsGuaranteed});
    const PodCgroup* recreated = pods.find(kCgroupfsGuaranteed);
    REQUIRE(recreated != nullptr);
    CHECK(recreated->memory.inode() != oldInode);
    CHECK_FALSE(recreated->lastCpuNanos.has_value());
    // Its counters started again: no rate from the old cgroup's reading.
    const ScanResult scan = scanNode(pods, fixtureScanOptions(), kT0 + std::chrono::seconds(1));
    CHECK_FALSE(findPod(scan.summary, kCgroupfsGuaranteed)->cpuUsageNanoCores.has_value());
    CHECK(findPod(scan.summary, kCgroupfsBurstable)->cpuUsageNanoCores ==
          std::optional<std::uint64_t>(0));
  }
  SUBCASE("a pod moved to another tier") {
    fs::rename(kubepods + "/burstable/pod" + kCgroupfsBurstable,
               kubepods + "/besteffort/pod" + kCgroupfsBurstable);
    const RefreshResult result = REQUIRE_OK(pods.refresh());
    CHECK(result.removed == std::vector<std::string>{kCgroupfsBurstable});
    CHECK(result.added == std::vector<std::string>{kCgroupfsBurstable});
    CHECK(pods.find(kCgroupfsBurstable)->qos == "besteffort");
  }
  SUBCASE("a pod in two places is reported once and indexed once") {
    fs::copy(source + "/pod" + kCgroupfsGuaranteed,
             kubepods + "/besteffort/pod" + kCgroupfsGuaranteed, fs::copy_options::recursive);
    const RefreshResult result = REQUIRE_OK(pods.refresh());
    REQUIRE(result.errors.size() == 1);
    CHECK(result.errors[0].message.find("pod " + std::string(kCgroupfsGuaranteed) +
                                        " has two cgroups") != std::string::npos);
    CHECK(pods.size() == 3);
  }
  SUBCASE("non-pod directories are ignored") {
    fs::create_directories(kubepods + "/burstable/not-a-pod");
    fs::create_directories(kubepods + "/guaranteed/pod" + std::string(kCgroupfsBestEffort));
    fs::create_directories(kubepods + "/podwith_underscore");
    const RefreshResult result = REQUIRE_OK(pods.refresh());
    CHECK(result.added.empty());
    CHECK(result.removed.empty());
    CHECK(result.errors.empty());
  }
  SUBCASE("kubepods itself gone is an error") {
    fs::remove_all(kubepods);
    auto result = pods.refresh();
    REQUIRE_FALSE(result.ok());
    CHECK(result.error().message.find("opening the kubepods cgroup") != std::string::npos);
    CHECK(result.error().message.find(kubepods) != std::string::npos);
  }
}

TEST_CASE("fixtures: scanNode on malformed files names each file and cgroup") {
  const Hierarchy h = discover(kFixtures + "/malformed");
  PodCgroups pods(h, "kubepods");
  const RefreshResult refresh = REQUIRE_OK(pods.refresh());
  CHECK(refresh.errors.empty());
  REQUIRE(refresh.added.size() == 6);

  const ScanResult scan = scanNode(pods, fixtureScanOptions(), kT0);
  INFO("errors:" << errorsText(scan.errors));
  CHECK(scan.vanished.size() == 0);
  REQUIRE(scan.summary.pods.size() == 6);  // a pod with a bad file is still reported

  const std::string kubepods = h.memory + "/kubepods";
  const struct {
    const char* path;  // below kubepods
    const char* file;
    const char* what;
  } expected[] = {
      {"/burstable/pod22222222-3333-4444-8555-666666666666", "memory.stat",
       "expected \"KEY VALUE\", got \"kernel_st\""},
      {"/burstable/pod33333333-4444-4555-8666-777777777777", "memory.current",
       "expected an unsigned decimal number, got \"\""},
      {"/besteffort/pod44444444-5555-4666-8777-888888888888", "cpu.stat", "(usage_usec)"},
      {"/besteffort/pod55555555-6666-4777-8888-999999999999", "memory.current",
       "99999999999999999999999"},
      {"/besteffort/pod55555555-6666-4777-8888-999999999999", "pids.current",
       "18446744073709551616"},
      // A bad line the scan does not need still makes the whole file an error.
      {"/pod66666666-7777-4888-8999-aaaaaaaaaaaa", "memory.stat",
       "line 29 (workingset_refault_file): expected an unsigned decimal number, got \"-1\""},
  };
  CHECK(scan.errors.size() == std::size(expected));
  for (const auto& want : expected) {
    const std::string prefix = std::string(want.file) + " of " + kubepods + want.path + ": ";
    CAPTURE(prefix);
    bool found = false;
    for (const Error& error : scan.errors) {
      if (error.message.starts_with(prefix) && error.message.find(want.what) != std::string::npos) {
        found = true;
      }
    }
    CHECK(found);
  }

  // The good pod keeps its figures; the bad ones keep what could be read.
  const PodStats* good = findPod(scan.summary, kMalformedGood);
  REQUIRE(good != nullptr);
  CHECK(good->memoryWorkingSetBytes == std::optional<std::uint64_t>(83886080));
  CHECK(good->processCount == std::optional<std::uint64_t>(4));
  const PodStats* truncated = findPod(scan.summary, "22222222-3333-4444-8555-666666666666");
  CHECK_FALSE(truncated->memoryWorkingSetBytes.has_value());
  CHECK(truncated->processCount == std::optional<std::uint64_t>(2));
  const PodStats* garbage = findPod(scan.summary, "44444444-5555-4666-8777-888888888888");
  CHECK(garbage->memoryWorkingSetBytes == std::optional<std::uint64_t>(24117248));
  CHECK(garbage->processCount == std::optional<std::uint64_t>(5));
  CHECK_FALSE(pods.find("44444444-5555-4666-8777-888888888888")->lastCpuNanos.has_value());
  const PodStats* huge = findPod(scan.summary, "55555555-6666-4777-8888-999999999999");
  CHECK_FALSE(huge->memoryWorkingSetBytes.has_value());
  CHECK_FALSE(huge->processCount.has_value());
  // kubepods: memory.current 1178599424, inactive_file 20971520, memory.max 4294967296.
  CHECK(scan.summary.node.podsMemoryWorkingSetBytes == std::optional<std::uint64_t>(1157627904));
  CHECK(scan.summary.node.podsMemoryAvailableBytes ==
        std::optional<std::uint64_t>(4294967296 - 1157627904));

  // The same again: the cached descriptors give the same answers.
  const ScanResult again = scanNode(pods, fixtureScanOptions(), kT0 + std::chrono::seconds(1));
  CHECK(again.errors.size() == scan.errors.size());
  CHECK(findPod(again.summary, kMalformedGood)->cpuUsageNanoCores ==
        std::optional<std::uint64_t>(0));
}

TEST_CASE("fixtures: readers on single cgroup directories") {
  std::string buffer;
  const std::string systemdPod = kFixtures +
                                 "/v2-systemd/kubepods.slice/kubepods-burstable.slice/"
                                 "kubepods-burstable-pod1f2e3d4c_aaaa_bbbb_cccc_0123456789ab.slice";
  const CgroupDir pod = REQUIRE_OK(CgroupDir::open(systemdPod, Version::V2));
  CHECK(pod.path() == systemdPod);
  CHECK(pod.inode() != 0);

  const Pressure memory = REQUIRE_OK(readPressure(pod, "memory"));
  CHECK(memory.some.avg10 == doctest::Approx(2.31));
  CHECK(memory.some.totalMicros == 4817263);
  REQUIRE(memory.full.has_value());
  CHECK(memory.full->totalMicros == 2214890);
  CHECK(REQUIRE_OK(readPressure(pod, "cpu")).some.totalMicros == 48211);
  auto irq = readPressure(pod, "irq");
  REQUIRE_FALSE(irq.ok());
  CHECK(irq.error().message.find(systemdPod) != std::string::npos);

  const MemoryEvents events = REQUIRE_OK(readMemoryEvents(pod, buffer));
  CHECK(events.high == 17);
  CHECK(events.max == 5);
  CHECK(events.oom == 2);
  CHECK(events.oomKill == 1);
  CHECK(REQUIRE_OK(readOomKills(pod, buffer)) == 1);

  const MemoryReading reading = REQUIRE_OK(readMemory(pod, buffer));
  CHECK(reading.usage == 734003200);
  CHECK(reading.inactiveFile == 104857600);
  CHECK(reading.workingSet == 629145600);
  CHECK_FALSE(reading.limit.has_value());  // memory.max "max"
  CHECK(REQUIRE_OK(readCpuNanos(pod, buffer)) == 8123456789000ULL);
  // pids.current agrees with the PIDs of the subtree (two containers: 11 + 1).
  CHECK(REQUIRE_OK(readProcsRecursive(pod)).size() == 12);

  const CgroupDir limited = REQUIRE_OK(CgroupDir::open(
      kFixtures + "/v2-cgroupfs/kubepods/podc4d5e6f7-0a1b-4c2d-8e3f-5a6b7c8d9e0f", Version::V2));
  CHECK(REQUIRE_OK(readMemory(limited, buffer)).limit == std::optional<std::uint64_t>(2147483648));

  // v1: memory.oom_control, and PAGE_COUNTER_MAX as "no limit".
  const std::string v1Pod =
      kFixtures + "/v1-cgroupfs/memory/kubepods/burstable/pod3e4f5a6b-7c8d-4e9f-a0b1-c2d3e4f5a6b7";
  const CgroupDir v1 = REQUIRE_OK(CgroupDir::open(v1Pod, Version::V1));
  const OomControl control = REQUIRE_OK(readOomControl(v1, buffer));
  CHECK_FALSE(control.oomKillDisable);
  CHECK_FALSE(control.underOom);
  CHECK(control.oomKill == std::optional<std::uint64_t>(2));
  CHECK(REQUIRE_OK(readOomKills(v1, buffer)) == 2);
  const MemoryReading v1Reading = REQUIRE_OK(readMemory(v1, buffer));
  CHECK(v1Reading.usage == 629145600);
  CHECK(v1Reading.inactiveFile == 125829120);
  CHECK_FALSE(v1Reading.limit.has_value());
  CHECK(REQUIRE_OK(readProcsRecursive(v1)).size() == 7);
  // A v1 directory has no memory.events, a v2 one no memory.oom_control.
  auto noEvents = readMemoryEvents(v1, buffer);
  REQUIRE_FALSE(noEvents.ok());
  CHECK(noEvents.error().message.starts_with("memory.events of " + v1Pod + ": "));
  CHECK(isGone(noEvents.error()));  // ENOENT
  CHECK_FALSE(readOomControl(pod, buffer).ok());

  // System-wide figures from the fixture /proc.
  const Pressure cpu = REQUIRE_OK(readSystemPressure(kProcRoot, "cpu"));
  CHECK(cpu.some.avg10 == doctest::Approx(45.54));
  CHECK_FALSE(cpu.full.has_value());
  CHECK(REQUIRE_OK(readSystemPressure(kProcRoot, "memory")).full.has_value());
  const MemInfo meminfo = REQUIRE_OK(readMemInfo(kProcRoot));
  CHECK(meminfo.memTotal == kMemTotal);
  CHECK(meminfo.memAvailable == std::optional<std::uint64_t>(7340032ULL * 1024));
  CHECK(REQUIRE_OK(readPidMax(kProcRoot)) == 4194304);
}

TEST_CASE("fixtures: readers on malformed files say which file of which cgroup") {
  std::string buffer;
  const std::string garbagePath =
      kFixtures + "/malformed/kubepods/besteffort/pod44444444-5555-4666-8777-888888888888";
  const CgroupDir garbage = REQUIRE_OK(CgroupDir::open(garbagePath, Version::V2));
  auto pressure = readPressure(garbage, "memory");
  REQUIRE_FALSE(pressure.ok());
  CHECK(pressure.error().message.starts_with("memory.pressure of " + garbagePath + ": pressure: "));
  auto limit = readMemory(garbage, buffer);
  REQUIRE_FALSE(limit.ok());
  CHECK(limit.error().message ==
        "memory.max of " + garbagePath +
            ": limit: expected \"max\" or an unsigned decimal number, got \"0x40000000\"");
  auto cpu = readCpuNanos(garbage, buffer);
  REQUIRE_FALSE(cpu.ok());
  CHECK(cpu.error().message.starts_with("cpu.stat of " + garbagePath + ": cpu.stat: line 1"));

  const std::string hugePath =
      kFixtures + "/malformed/kubepods/besteffort/pod55555555-6666-4777-8888-999999999999";
  const CgroupDir huge = REQUIRE_OK(CgroupDir::open(hugePath, Version::V2));
  auto events = readMemoryEvents(huge, buffer);
  REQUIRE_FALSE(events.ok());
  CHECK(events.error().message.starts_with("memory.events of " + hugePath + ": memory.events: "));
  CHECK(events.error().message.find("(max)") != std::string::npos);
  CHECK_FALSE(readMemoryUsage(huge, buffer).ok());

  const std::string negativePath =
      kFixtures + "/malformed/kubepods/pod66666666-7777-4888-8999-aaaaaaaaaaaa";
  const CgroupDir negative = REQUIRE_OK(CgroupDir::open(negativePath, Version::V2));
  auto negativePressure = readPressure(negative, "memory");
  REQUIRE_FALSE(negativePressure.ok());
  CHECK(negativePressure.error().message.find("some avg10: expected a percentage, got \"-1.00\"") !=
        std::string::npos);
  auto negativeMemory = readMemory(negative, buffer);
  REQUIRE_FALSE(negativeMemory.ok());
  CHECK(negativeMemory.error().message.starts_with("memory.stat of " + negativePath + ": "));
  auto kills = readOomKills(negative, buffer);
  REQUIRE_FALSE(kills.ok());
  CHECK(kills.error().message.starts_with("memory.events of " + negativePath));
  CHECK(kills.error().message.find("(oom_kill)") != std::string::npos);

  auto missing = CgroupDir::open(kFixtures + "/malformed/kubepods/pod-none", Version::V2);
  REQUIRE_FALSE(missing.ok());
  CHECK(isGone(missing.error()));
}

TEST_CASE("fixtures: a control file missing from a live cgroup is an error, not a vanished pod") {
  // On v2 a pod without memory.current usually means the memory controller is not enabled in
  // the parent's cgroup.subtree_control: every scan must say so, not drop the pod silently.
  TempTree tree("v2-cgroupfs");
  const Hierarchy h = discover(tree.path());
  PodCgroups pods(h, "kubepods");
  REQUIRE(REQUIRE_OK(pods.refresh()).added.size() == 3);
  const std::string burstableDir =
      tree.path() + "/kubepods/burstable/pod" + std::string(kCgroupfsBurstable);
  fs::remove(burstableDir + "/memory.current");
  const ScanResult scan = scanNode(pods, fixtureScanOptions(), kT0);
  CHECK(scan.vanished.size() == 0);
  CHECK(scan.summary.pods.size() == 3);
  REQUIRE(scan.errors.size() == 1);
  CHECK(scan.errors[0].message.find("memory.current of " + burstableDir) != std::string::npos);
  // The directory itself going away is the normal, silent case.
  fs::remove_all(burstableDir);
  const ScanResult after = scanNode(pods, fixtureScanOptions(), kT0);
  CHECK(after.vanished.size() == 1);
  CHECK(after.errors.empty());
}

// The process's descriptor table size (/proc/self/status' FDSize) and its open descriptors.
std::uint64_t tableSize() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.starts_with("FDSize:")) return std::stoull(line.substr(7));
  }
  FAIL("no FDSize in /proc/self/status");
  return 0;
}

std::size_t openDescriptors() {
  auto entries = fs::directory_iterator("/proc/self/fd");
  return std::size_t(std::distance(fs::begin(entries), fs::end(entries)));
}

TEST_CASE("reserveDescriptorTable grows the table now, leaks nothing, and keeps to RLIMIT_NOFILE") {
  rlimit limit{};
  REQUIRE(::getrlimit(RLIMIT_NOFILE, &limit) == 0);
  const std::uint64_t before = tableSize();
  const std::size_t open = openDescriptors();
  // A size above today's table, within the soft limit (the table only ever grows).
  const std::uint64_t wanted = std::min<std::uint64_t>(4 * before, limit.rlim_cur);
  REQUIRE(wanted > before);
  CHECK(REQUIRE_OK(reserveDescriptorTable(wanted)) == wanted);
  CHECK(tableSize() >= wanted);
  CHECK(openDescriptors() == open);

  SUBCASE("capped by the soft limit, not refused") {
    const std::uint64_t soft = tableSize() + 64;
    rlimit lowered = limit;
    lowered.rlim_cur = soft;
    REQUIRE(::setrlimit(RLIMIT_NOFILE, &lowered) == 0);
    auto capped = reserveDescriptorTable(1 << 20);
    REQUIRE(::setrlimit(RLIMIT_NOFILE, &limit) == 0);
    CHECK(REQUIRE_OK(std::move(capped)) == soft);
    CHECK(tableSize() >= soft);
    CHECK(openDescriptors() == open);
  }
}

}  // namespace
}  // namespace nodewarden::cgroups
