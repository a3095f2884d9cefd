// The pure parsers of cgroups/parsers.h on real kernel text, on every kind of malformed input,
// and under a small deterministic fuzz loop; plus the pure layout functions of cgroups/pods.h
// and cgroups/hierarchy.h (names and mount tables, no files).
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <iterator>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "cgroups/hierarchy.h"
#include "cgroups/parsers.h"
#include "cgroups/pods.h"

namespace nodewarden::cgroups {
namespace {

using namespace std::literals;

// An error whose message contains `needle` (so it says what was wrong, not just "error").
#define CHECK_ERROR(expr, needle)                                                 \
  do {                                                                            \
    const auto result_ = (expr);                                                  \
    CHECK_FALSE(result_.ok());                                                    \
    if (!result_.ok()) {                                                          \
      CHECK_MESSAGE(result_.error().message.find(needle) != std::string::npos,    \
                    "message: " << result_.error().message);                      \
      CHECK_MESSAGE(isPrintable(result_.error().message),                         \
                    "unprintable bytes in message: " << result_.error().message); \
    }                                                                             \
  } while (false)

#define REQUIRE_OK(expr)                                                                     \
  [&]() {                                                                                    \
    auto result_ = (expr);                                                                   \
    REQUIRE_MESSAGE(result_.ok(), (result_.ok() ? std::string() : result_.error().message)); \
    return std::move(result_).value();                                                       \
  }()

bool isPrintable(const std::string& text) {
  for (const char c : text) {
    const auto u = static_cast<unsigned char>(c);
    if (u < 0x20 || u >= 0x7f) return false;
  }
  return true;
}

// ------------------------------------------------------------------------------------------
// Real kernel text.

// cgroup v1 memory.stat of a memory cgroup (this machine's root, kernel 6.18, hybrid mode).
constexpr std::string_view kV1MemoryStat =
    "cache 9281536\n"
    "rss 5443584\n"
    "rss_huge 0\n"
    "shmem 9068544\n"
    "mapped_file 7675904\n"
    "dirty 53248\n"
    "writeback 0\n"
    "workingset_refault_anon 0\n"
    "workingset_refault_file 3464\n"
    "swap 0\n"
    "swapcached 0\n"
    "pgpgin 72799\n"
    "pgpgout 69203\n"
    "pgfault 97795\n"
    "pgmajfault 0\n"
    "inactive_anon 0\n"
    "active_anon 1531904\n"
    "inactive_file 20480\n"
    "active_file 192512\n"
    "unevictable 12980224\n"
    "hierarchical_memory_limit 9223372036854771712\n"
    "hierarchical_memsw_limit 9223372036854771712\n"
    "total_cache 301907968\n"
    "total_rss 890716160\n"
    "total_rss_huge 0\n"
    "total_shmem 9068544\n"
    "total_mapped_file 42725376\n"
    "total_dirty 29958144\n"
    "total_writeback 0\n"
    "total_workingset_refault_anon 0\n"
    "total_workingset_refault_file 1996242\n"
    "total_swap 0\n"
    "total_swapcached 0\n"
    "total_pgpgin 151978640\n"
    "total_pgpgout 151704667\n"
    "total_pgfault 154092455\n"
    "total_pgmajfault 9382\n"
    "total_inactive_anon 885067776\n"
    "total_active_anon 1609728\n"
    "total_inactive_file 204095488\n"
    "total_active_file 88743936\n"
    "total_unevictable 12980224\n";

// cgroup v2 memory.stat of a pod cgroup (kernel 6.x key set).
constexpr std::string_view kV2MemoryStat =
    "anon 524288000\n"
    "file 188743680\n"
    "kernel 20971520\n"
    "kernel_stack 1310720\n"
    "pagetables 2621440\n"
    "sec_pagetables 0\n"
    "percpu 655360\n"
    "sock 0\n"
    "vmalloc 0\n"
    "shmem 0\n"
    "zswap 0\n"
    "zswapped 0\n"
    "file_mapped 62914560\n"
    "file_dirty 8192\n"
    "file_writeback 0\n"
    "swapcached 0\n"
    "anon_thp 0\n"
    "file_thp 0\n"
    "shmem_thp 0\n"
    "inactive_anon 471859200\n"
    "active_anon 52428800\n"
    "inactive_file 104857600\n"
    "active_file 83886080\n"
    "unevictable 0\n"
    "slab_reclaimable 10485760\n"
    "slab_unreclaimable 5898240\n"
    "slab 16384000\n"
    "workingset_refault_anon 0\n"
    "workingset_refault_file 113\n"
    "workingset_activate_anon 0\n"
    "workingset_activate_file 17\n"
    "workingset_restore_anon 0\n"
    "workingset_restore_file 5\n"
    "workingset_nodereclaim 0\n"
    "pgscan 2048\n"
    "pgsteal 2011\n"
    "pgscan_kswapd 2048\n"
    "pgscan_direct 0\n"
    "pgscan_khugepaged 0\n"
    "pgsteal_kswapd 2011\n"
    "pgsteal_direct 0\n"
    "pgsteal_khugepaged 0\n"
    "pgfault 385717\n"
    "pgmajfault 42\n"
    "pgrefill 300\n"
    "pgactivate 5120\n"
    "pgdeactivate 310\n"
    "pglazyfree 0\n"
    "pglazyfreed 0\n"
    "zswpin 0\n"
    "zswpout 0\n"
    "thp_fault_alloc 0\n"
    "thp_collapse_alloc 0\n";

// cpu.stat with the cpu controller enabled (throttling figures present).
constexpr std::string_view kCpuStat =
    "usage_usec 8123456789\n"
    "user_usec 5686419752\n"
    "system_usec 2437037037\n"
    "core_sched.force_idle_usec 0\n"
    "nr_periods 18230\n"
    "nr_throttled 412\n"
    "throttled_usec 20617304\n"
    "nr_bursts 0\n"
    "burst_usec 0\n";
// cpu.stat without the cpu controller (this machine's unified/ mount): only the usage keys.
constexpr std::string_view kCpuStatNoController =
    "usage_usec 15650970032\n"
    "user_usec 14865432660\n"
    "system_usec 785537371\n"
    "nice_usec 0\n";

constexpr std::string_view kPressure =
    "some avg10=2.31 avg60=1.05 avg300=0.37 total=4817263\n"
    "full avg10=1.12 avg60=0.50 avg300=0.18 total=2214890\n";
// /proc/pressure/cpu before 5.13: no "full" line.
constexpr std::string_view kPressureSomeOnly =
    "some avg10=45.54 avg60=31.93 avg300=21.60 total=4014157702\n";

constexpr std::string_view kMemoryEvents =
    "low 0\n"
    "high 17\n"
    "max 5\n"
    "oom 2\n"
    "oom_kill 1\n"
    "oom_group_kill 1\n";
// Before 5.17 (no oom_group_kill); newer kernels may add sock_throttled.
constexpr std::string_view kMemoryEventsOld =
    "low 0\n"
    "high 0\n"
    "max 3\n"
    "oom 1\n"
    "oom_kill 1\n";

constexpr std::string_view kOomControl = "oom_kill_disable 0\nunder_oom 0\noom_kill 3\n";
constexpr std::string_view kOomControlOld = "oom_kill_disable 1\nunder_oom 1\n";

// This machine's /proc/meminfo.
constexpr std::string_view kMemInfo =
    "MemTotal:       24684092 kB\n"
    "MemFree:        23485848 kB\n"
    "MemAvailable:   23601964 kB\n"
    "Buffers:            1848 kB\n"
    "Cached:           296272 kB\n"
    "SwapCached:            0 kB\n"
    "Active:            87952 kB\n"
    "Inactive:         849876 kB\n"
    "Active(anon):       1568 kB\n"
    "Inactive(anon):   647128 kB\n"
    "Active(file):      86384 kB\n"
    "Inactive(file):   202748 kB\n"
    "Unevictable:       12676 kB\n"
    "Mlocked:           11776 kB\n"
    "SwapTotal:             0 kB\n"
    "SwapFree:              0 kB\n"
    "Dirty:             33784 kB\n"
    "Writeback:             0 kB\n"
    "AnonPages:        652640 kB\n"
    "Mapped:            41700 kB\n"
    "Shmem:              8856 kB\n"
    "CommitLimit:    12342044 kB\n"
    "Committed_AS:     728524 kB\n"
    "VmallocTotal:   34359738367 kB\n"
    "HugePages_Total:       0\n"
    "HugePages_Free:        0\n"
    "Hugepagesize:       2048 kB\n"
    "DirectMap4k:       30720 kB\n"
    "DirectMap1G:    25165824 kB\n";

// This machine: hybrid, v1 controllers each on its own mount, a controller-less cgroup2 on
// unified/.
constexpr std::string_view kMountInfoHybrid =
    "22 27 0:21 / /proc rw,relatime - proc proc rw\n"
    "23 27 0:22 / /sys rw,relatime - sysfs sysfs rw\n"
    "24 27 0:6 / /dev rw,relatime - devtmpfs devtmpfs "
    "rw,size=12334492k,nr_inodes=3083623,mode=755\n"
    "25 24 0:23 / /dev/shm rw,relatime - tmpfs tmpfs rw,size=24684092k\n"
    "26 24 0:24 / /dev/pts rw,relatime - devpts devpts rw,mode=600,ptmxmode=000\n"
    "27 1 254:0 / / rw,relatime - ext4 /dev/vda rw,discard,resv_strict,resuid=65534,resgid=65534\n"
    "31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755\n"
    "32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu\n"
    "33 31 0:30 / /sys/fs/cgroup/cpuacct rw,relatime - cgroup cgroup rw,cpuacct\n"
    "34 31 0:31 / /sys/fs/cgroup/cpuset rw,relatime - cgroup cgroup rw,cpuset\n"
    "35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory\n"
    "36 31 0:33 / /sys/fs/cgroup/devices rw,relatime - cgroup cgroup rw,devices\n"
    "37 31 0:34 / /sys/fs/cgroup/freezer rw,relatime - cgroup cgroup rw,freezer\n"
    "38 31 0:35 / /sys/fs/cgroup/blkio rw,relatime - cgroup cgroup rw,blkio\n"
    "39 31 0:36 / /sys/fs/cgroup/pids rw,relatime - cgroup cgroup rw,pids\n"
    "40 31 0:37 / /sys/fs/cgroup/systemd rw,relatime - cgroup cgroup rw,name=systemd\n"
    "41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw\n";

// A systemd host on cgroup v2 only (Ubuntu 22.04 style, with optional fields).
constexpr std::string_view kMountInfoUnified =
    "24 30 0:22 / /sys rw,nosuid,nodev,noexec,relatime shared:7 - sysfs sysfs rw\n"
    "25 30 0:23 / /proc rw,nosuid,nodev,noexec,relatime shared:14 - proc proc rw\n"
    "30 1 252:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw,errors=remount-ro\n"
    "35 24 0:30 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:9 - cgroup2 cgroup2 "
    "rw,nsdelegate,memory_recursiveprot\n"
    "36 24 0:31 / /sys/fs/pstore rw,nosuid,nodev,noexec,relatime shared:10 - pstore pstore rw\n"
    "40 24 0:34 / /sys/fs/bpf rw,nosuid,nodev,noexec,relatime shared:11 - bpf bpf rw,mode=700\n";

// Inside a DaemonSet pod on a v2 node: the container's own (namespaced) cgroup2 mount, and the
// host's hierarchy bind-mounted at /host/sys/fs/cgroup (its root shown relative to the
// container's cgroup namespace).
constexpr std::string_view kMountInfoDaemonSet =
    "1534 1201 0:412 / / rw,relatime master:512 - overlay overlay "
    "rw,lowerdir=/var/lib/containerd/l/AB:/var/lib/containerd/l/CD,upperdir=/var/lib/u,"
    "workdir=/var/lib/w\n"
    "1535 1534 0:415 / /proc rw,nosuid,nodev,noexec,relatime - proc proc rw\n"
    "1536 1534 0:416 / /dev rw,nosuid - tmpfs tmpfs rw,size=65536k,mode=755,inode64\n"
    "1540 1534 0:420 / /sys ro,nosuid,nodev,noexec,relatime - sysfs sysfs ro\n"
    "1541 1540 0:26 / /sys/fs/cgroup ro,nosuid,nodev,noexec,relatime - cgroup2 cgroup "
    "rw,nsdelegate,memory_recursiveprot\n"
    "1550 1534 0:26 /../../../.. /host/sys/fs/cgroup rw,nosuid,nodev,noexec,relatime master:9 - "
    "cgroup2 cgroup2 rw,nsdelegate,memory_recursiveprot\n"
    "1551 1534 0:22 / /host/proc rw,nosuid,nodev,noexec,relatime master:14 - proc proc rw\n"
    "1560 1534 0:400 / /var/run/secrets/kubernetes.io/serviceaccount ro,relatime - tmpfs tmpfs "
    "rw,size=262144k,inode64\n";

// A legacy (v1-only) host with co-mounted cpu,cpuacct, systemd's named hierarchy, and a mount
// point that needs escaping.
constexpr std::string_view kMountInfoLegacy =
    "25 18 0:21 / /sys/fs/cgroup ro,nosuid,nodev,noexec shared:9 - tmpfs tmpfs ro,mode=755\n"
    "26 25 0:22 / /sys/fs/cgroup/systemd rw,nosuid,nodev,noexec,relatime shared:10 - cgroup "
    "cgroup rw,xattr,release_agent=/lib/systemd/systemd-cgroups-agent,name=systemd\n"
    "29 25 0:25 / /sys/fs/cgroup/cpu,cpuacct rw,nosuid,nodev,noexec,relatime shared:13 - cgroup "
    "cgroup rw,cpu,cpuacct\n"
    "30 25 0:26 / /sys/fs/cgroup/memory rw,nosuid,nodev,noexec,relatime shared:14 - cgroup cgroup "
    "rw,memory\n"
    "31 25 0:27 / /sys/fs/cgroup/net_cls,net_prio rw,nosuid,nodev,noexec,relatime shared:15 - "
    "cgroup cgroup rw,net_cls,net_prio\n"
    "32 25 0:28 / /sys/fs/cgroup/cpuset rw,nosuid,nodev,noexec,relatime shared:16 - cgroup cgroup "
    "rw,cpuset,clone_children\n"
    "33 25 0:29 / /sys/fs/cgroup/pids rw,nosuid,nodev,noexec,relatime shared:17 - cgroup cgroup "
    "rw,pids\n"
    "34 25 0:30 / /sys/fs/cgroup/freezer rw,nosuid,nodev,noexec,relatime shared:18 - cgroup "
    "cgroup rw,freezer\n"
    "90 30 0:26 /kubepods /mnt/my\\040cgroups\\011tab\\134back rw,relatime - cgroup cgroup "
    "rw,memory\n";

// /proc/self/cgroup of this machine (v1 + the hybrid 0:: line) and of a pod process on v2.
constexpr std::string_view kProcCgroupV1 =
    "9:name=systemd:/\n"
    "8:pids:/\n"
    "7:blkio:/\n"
    "6:freezer:/\n"
    "5:devices:/\n"
    "4:memory:/process_api/02fc1b79cbd12edff23e0461c7b0947d\n"
    "3:cpuset:/\n"
    "2:cpu,cpuacct:/kubepods/burstable/pod1f2e3d4c-aaaa-bbbb-cccc-0123456789ab/"
    "3f9a1c2b7d4e5f60718293a4b5c6d7e8f90a1b2c3d4e5f60718293a4b5c6d7e8\n"
    "1:net_cls,net_prio:/\n"
    "0::/\n";
constexpr std::string_view kProcCgroupV2 =
    "0::/kubepods.slice/kubepods-burstable.slice/"
    "kubepods-burstable-pod1f2e3d4c_aaaa_bbbb_cccc_0123456789ab.slice/"
    "cri-containerd-3f9a1c2b7d4e5f60718293a4b5c6d7e8f90a1b2c3d4e5f60718293a4b5c6d7e8.scope\n";

constexpr std::string_view kProcs = "48211\n48260\n48261\n1\n48211\n";

constexpr std::uint64_t k2To62 = std::uint64_t{1} << 62;
constexpr std::uint64_t kV1Unlimited = 9223372036854771712ULL;

// ------------------------------------------------------------------------------------------

TEST_CASE("parseUint: counters with and without the trailing newline") {
  CHECK(REQUIRE_OK(parseUint("1193271296\n")) == 1193271296ULL);
  CHECK(REQUIRE_OK(parseUint("0\n")) == 0);
  CHECK(REQUIRE_OK(parseUint("15669623903403")) == 15669623903403ULL);
  CHECK(REQUIRE_OK(parseUint("18446744073709551615\n")) == UINT64_MAX);
  CHECK(REQUIRE_OK(parseUint("4194304\n")) == 4194304);  // pid_max
}

TEST_CASE("parseUint: malformed input is an error naming the text") {
  CHECK_ERROR(parseUint(""), "expected an unsigned decimal number");
  CHECK_ERROR(parseUint("\n"), "got \"\"");
  CHECK_ERROR(parseUint("\n\n"), "expected an unsigned decimal number");
  CHECK_ERROR(parseUint("12\n34\n"), "\"12\\n34\"");
  CHECK_ERROR(parseUint("12\n\n"), "expected");
  CHECK_ERROR(parseUint("+12\n"), "\"+12\"");
  CHECK_ERROR(parseUint("-12\n"), "\"-12\"");
  CHECK_ERROR(parseUint(" 12\n"), "\" 12\"");
  CHECK_ERROR(parseUint("12 \n"), "\"12 \"");
  CHECK_ERROR(parseUint("\t12\n"), "expected");
  CHECK_ERROR(parseUint("12\r\n"), "expected");
  CHECK_ERROR(parseUint("1 2\n"), "expected");
  CHECK_ERROR(parseUint("0x10\n"), "\"0x10\"");
  CHECK_ERROR(parseUint("1e3\n"), "\"1e3\"");
  CHECK_ERROR(parseUint("1.5\n"), "expected");
  CHECK_ERROR(parseUint("max\n"), "\"max\"");
  CHECK_ERROR(parseUint("18446744073709551616\n"), "18446744073709551616");  // 2^64
  CHECK_ERROR(parseUint("99999999999999999999999\n"), "99999999999999999999999");
  CHECK_ERROR(parseUint("12\0"sv), "\"12?\"");
  CHECK_ERROR(parseUint("\0\0\0\n"sv), "\"???\"");
  CHECK_ERROR(parseUint("\xff\xfe\n"), "\"??\"");
  // Long garbage is cut in the message.
  CHECK_ERROR(parseUint(std::string(200, '7') + "x"), "...\"");
}

TEST_CASE("parseMax: v2 max, v1 PAGE_COUNTER_MAX and the 2^62 threshold") {
  CHECK_FALSE(REQUIRE_OK(parseMax("max\n")).has_value());
  CHECK_FALSE(REQUIRE_OK(parseMax("max")).has_value());
  CHECK(REQUIRE_OK(parseMax("15032385536\n")) == std::optional<std::uint64_t>(15032385536ULL));
  CHECK(REQUIRE_OK(parseMax("0\n")) == std::optional<std::uint64_t>(0));
  // v1 memory.limit_in_bytes with no limit: PAGE_COUNTER_MAX × 4096 on x86_64.
  CHECK_FALSE(REQUIRE_OK(parseMax("9223372036854771712\n")).has_value());
  // arm64 with 64 KiB pages prints a different, also > 2^62, figure.
  CHECK_FALSE(REQUIRE_OK(parseMax("9223372036854710272\n")).has_value());
  CHECK(REQUIRE_OK(parseMax(std::to_string(k2To62) + "\n")) ==
        std::optional<std::uint64_t>(k2To62));
  CHECK_FALSE(REQUIRE_OK(parseMax(std::to_string(k2To62 + 1) + "\n")).has_value());
  CHECK(REQUIRE_OK(parseMax(std::to_string(k2To62 - 1))) ==
        std::optional<std::uint64_t>(k2To62 - 1));
  CHECK_FALSE(REQUIRE_OK(parseMax("18446744073709551615\n")).has_value());
}

TEST_CASE("parseMax: malformed input") {
  CHECK_ERROR(parseMax(""), "expected \"max\" or an unsigned decimal number");
  CHECK_ERROR(parseMax("\n"), "got \"\"");
  CHECK_ERROR(parseMax("ma"), "\"ma\"");  // truncated
  CHECK_ERROR(parseMax("max\n\n"), "\"max\\n\"");
  CHECK_ERROR(parseMax("max \n"), "\"max \"");
  CHECK_ERROR(parseMax(" max\n"), "\" max\"");
  CHECK_ERROR(parseMax("MAX\n"), "\"MAX\"");
  CHECK_ERROR(parseMax("maxx\n"), "\"maxx\"");
  CHECK_ERROR(parseMax("max 1\n"), "\"max 1\"");
  CHECK_ERROR(parseMax("-1\n"), "\"-1\"");
  CHECK_ERROR(parseMax("+1\n"), "\"+1\"");
  CHECK_ERROR(parseMax("0x7fffffffffffffff\n"), "\"0x7fffffffffffffff\"");
  CHECK_ERROR(parseMax("18446744073709551616\n"), "18446744073709551616");
  CHECK_ERROR(parseMax("99999999999999999999999\n"), "99999999999999999999999");
  CHECK_ERROR(parseMax("max\0"sv), "\"max?\"");
  CHECK_ERROR(parseMax("\xff\xff\xff\n"), "\"???\"");
}

TEST_CASE("findFlatKey: keys anywhere, absent keys, whitespace") {
  CHECK(REQUIRE_OK(findFlatKey(kCpuStat, "usage_usec")) ==
        std::optional<std::uint64_t>(8123456789));
  CHECK(REQUIRE_OK(findFlatKey(kCpuStat, "burst_usec")) == std::optional<std::uint64_t>(0));
  CHECK(REQUIRE_OK(findFlatKey(kCpuStat, "nr_throttled")) == std::optional<std::uint64_t>(412));
  CHECK_FALSE(REQUIRE_OK(findFlatKey(kCpuStatNoController, "nr_throttled")).has_value());
  // A key is a whole token: "oom" does not match "oom_kill" and vice versa.
  CHECK(REQUIRE_OK(findFlatKey(kMemoryEvents, "oom")) == std::optional<std::uint64_t>(2));
  CHECK_FALSE(REQUIRE_OK(findFlatKey(kMemoryEvents, "oo")).has_value());
  CHECK_FALSE(REQUIRE_OK(findFlatKey(kMemoryEvents, "")).has_value());
  // Empty text: nothing is absent-or-malformed, the key is just absent.
  CHECK_FALSE(REQUIRE_OK(findFlatKey("", "usage_usec")).has_value());
  CHECK_FALSE(REQUIRE_OK(findFlatKey("\n", "usage_usec")).has_value());
  // Last line without '\n', tabs and repeated spaces, blank lines.
  CHECK(REQUIRE_OK(findFlatKey("a 1\nb 2", "b")) == std::optional<std::uint64_t>(2));
  CHECK(REQUIRE_OK(findFlatKey("a\t1\n b   2 \n\n", "b")) == std::optional<std::uint64_t>(2));
}

TEST_CASE("findFlatKey: a malformed line anywhere makes the whole file an error") {
  CHECK_ERROR(findFlatKey("usage_usec\n", "usage_usec"), "line 1: expected \"KEY VALUE\"");
  CHECK_ERROR(findFlatKey("usage_usec 1\nuser_us", "usage_usec"),
              "line 2: expected \"KEY VALUE\", got \"user_us\"");
  CHECK_ERROR(findFlatKey("usage_usec 1 2\n", "usage_usec"), "got \"usage_usec 1 2\"");
  CHECK_ERROR(findFlatKey("a 1\nb 2 3\nusage_usec 4\n", "usage_usec"), "line 2");
  CHECK_ERROR(findFlatKey("usage_usec -1\n", "usage_usec"), "line 1 (usage_usec)");
  CHECK_ERROR(findFlatKey("usage_usec +1\n", "usage_usec"), "\"+1\"");
  CHECK_ERROR(findFlatKey("usage_usec 0x10\n", "usage_usec"), "\"0x10\"");
  CHECK_ERROR(findFlatKey("usage_usec 1.5\n", "usage_usec"), "\"1.5\"");
  CHECK_ERROR(findFlatKey("usage_usec 18446744073709551616\n", "usage_usec"),
              "18446744073709551616");
  CHECK_ERROR(findFlatKey("usage_usec 99999999999999999999999\n", "usage_usec"),
              "expected an unsigned decimal number");
  CHECK_ERROR(findFlatKey("other -5\nusage_usec 1\n", "usage_usec"), "line 1 (other)");
  CHECK_ERROR(findFlatKey("usage_usec 1\nusage_usec 2\n", "usage_usec"),
              "line 2: duplicate key \"usage_usec\"");
  CHECK_ERROR(findFlatKey("usage_usec 1\0\n"sv, "usage_usec"), "\"1?\"");
  CHECK_ERROR(findFlatKey("\xff\xfe\xfd\n", "usage_usec"), "line 1");
  CHECK_ERROR(findFlatKey("key=1\n", "key"), "expected \"KEY VALUE\"");
}

TEST_CASE("parseMemoryStat: v1 prefers the hierarchical total_* keys") {
  const MemoryStat stat = REQUIRE_OK(parseMemoryStat(kV1MemoryStat, Version::V1));
  CHECK(stat.inactiveFile == 204095488);  // total_inactive_file, not the local 20480
  CHECK(stat.anon == std::optional<std::uint64_t>(890716160));  // total_rss
  CHECK(stat.file == std::optional<std::uint64_t>(301907968));  // total_cache
  // Without the totals (use_hierarchy off on an old kernel), the local inactive_file.
  const MemoryStat local =
      REQUIRE_OK(parseMemoryStat("cache 4096\nrss 8192\ninactive_file 20480\n", Version::V1));
  CHECK(local.inactiveFile == 20480);
  CHECK_FALSE(local.anon.has_value());
  CHECK_FALSE(local.file.has_value());
}

TEST_CASE("parseMemoryStat: v2 inactive_file, anon and file") {
  const MemoryStat stat = REQUIRE_OK(parseMemoryStat(kV2MemoryStat, Version::V2));
  CHECK(stat.inactiveFile == 104857600);
  CHECK(stat.anon == std::optional<std::uint64_t>(524288000));
  CHECK(stat.file == std::optional<std::uint64_t>(188743680));
  // v2 has no total_* keys: one in a v2 file is just another key.
  const MemoryStat odd = REQUIRE_OK(
      parseMemoryStat("inactive_file 5\ntotal_inactive_file 7\nfile_mapped 9\n", Version::V2));
  CHECK(odd.inactiveFile == 5);
  CHECK_FALSE(odd.file.has_value());  // file_mapped is not file
  // Keys may move: the order does not matter, nor does a missing final newline.
  const MemoryStat reordered =
      REQUIRE_OK(parseMemoryStat("file 2\ninactive_file 1\nanon 3", Version::V2));
  CHECK(reordered.inactiveFile == 1);
  CHECK(reordered.anon == std::optional<std::uint64_t>(3));
}

TEST_CASE("parseMemoryStat: malformed input") {
  for (const Version version : {Version::V1, Version::V2}) {
    CAPTURE((version == Version::V1 ? "v1" : "v2"));
    CHECK_ERROR(parseMemoryStat("", version), "memory.stat: no ");
    CHECK_ERROR(parseMemoryStat("\n", version), "inactive_file line");
    CHECK_ERROR(parseMemoryStat("anon 1\nfile 2\n", version), "inactive_file line");
    CHECK_ERROR(parseMemoryStat("anon 1\nfile 2\ninactive_f", version),
                "memory.stat line 3: expected \"KEY VALUE\", got \"inactive_f\"");
    CHECK_ERROR(parseMemoryStat("inactive_file 1 2\n", version), "got \"inactive_file 1 2\"");
    CHECK_ERROR(parseMemoryStat("inactive_file -1\n", version), "(inactive_file)");
    CHECK_ERROR(parseMemoryStat("inactive_file +1\n", version), "\"+1\"");
    CHECK_ERROR(parseMemoryStat("inactive_file 0x1000\n", version), "\"0x1000\"");
    CHECK_ERROR(parseMemoryStat("inactive_file 18446744073709551616\n", version),
                "18446744073709551616");
    CHECK_ERROR(parseMemoryStat("inactive_file 99999999999999999999999\n", version),
                "expected an unsigned decimal number");
    CHECK_ERROR(parseMemoryStat("inactive_file 1\ninactive_file 2\n", version),
                "line 2: duplicate key \"inactive_file\"");
    CHECK_ERROR(parseMemoryStat("inactive_file 1\npgfault -2\n", version), "line 2 (pgfault)");
    CHECK_ERROR(parseMemoryStat("inactive_file\0 1\n"sv, version), "memory.stat: no ");
    CHECK_ERROR(parseMemoryStat("\xff\xff 1\n", version), "no ");
    CHECK_ERROR(parseMemoryStat("inactive_file 1\n\xff\xff\n", version), "got \"??\"");
  }
  CHECK_ERROR(parseMemoryStat("total_inactive_file 1\ntotal_inactive_file 1\n", Version::V1),
              "duplicate key \"total_inactive_file\"");
  CHECK_ERROR(parseMemoryStat("total_rss 1\ntotal_rss 1\ninactive_file 1\n", Version::V1),
              "duplicate key \"total_rss\"");
  CHECK_ERROR(parseMemoryStat("anon 1\nanon 1\ninactive_file 1\n", Version::V2),
              "duplicate key \"anon\"");
  // v1's hierarchical key is no substitute on v2.
  CHECK_ERROR(parseMemoryStat("total_inactive_file 1\n", Version::V2), "no inactive_file line");
}

TEST_CASE("workingSet: usage minus inactive_file, floored at 0") {
  CHECK(workingSet(734003200, 104857600) == 629145600);
  CHECK(workingSet(100, 100) == 0);
  CHECK(workingSet(20971520, 23068672) == 0);  // v1 usage_in_bytes is a batched "fuzz" value
  CHECK(workingSet(0, UINT64_MAX) == 0);
  CHECK(workingSet(UINT64_MAX, 0) == UINT64_MAX);
}

TEST_CASE("parseCpuStatUsageNanos: usage_usec in nanoseconds") {
  CHECK(REQUIRE_OK(parseCpuStatUsageNanos(kCpuStat)) == 8123456789000ULL);
  CHECK(REQUIRE_OK(parseCpuStatUsageNanos(kCpuStatNoController)) == 15650970032000ULL);
  CHECK(REQUIRE_OK(parseCpuStatUsageNanos("usage_usec 0")) == 0);
  CHECK(REQUIRE_OK(parseCpuStatUsageNanos("usage_usec " + std::to_string(UINT64_MAX / 1000))) ==
        UINT64_MAX / 1000 * 1000);
}

TEST_CASE("parseCpuStatUsageNanos: malformed input") {
  CHECK_ERROR(parseCpuStatUsageNanos(""), "cpu.stat: no usage_usec line");
  CHECK_ERROR(parseCpuStatUsageNanos("\n"), "cpu.stat: no usage_usec line");
  CHECK_ERROR(parseCpuStatUsageNanos("user_usec 1\nsystem_usec 2\n"), "no usage_usec");
  CHECK_ERROR(parseCpuStatUsageNanos("usage_usec 1\nuser_u"), "cpu.stat: line 2");
  CHECK_ERROR(parseCpuStatUsageNanos("usage_usec\n"), "cpu.stat: line 1");
  CHECK_ERROR(parseCpuStatUsageNanos("usage_usec 1 2\n"), "expected \"KEY VALUE\"");
  CHECK_ERROR(parseCpuStatUsageNanos("usage_usec -1\n"), "cpu.stat: line 1 (usage_usec)");
  CHECK_ERROR(parseCpuStatUsageNanos("usage_usec 0x1\n"), "\"0x1\"");
  CHECK_ERROR(parseCpuStatUsageNanos("usage_usec 1\nusage_usec 2\n"), "duplicate key");
  CHECK_ERROR(parseCpuStatUsageNanos("usage_usec 18446744073709551615\n"), "too large");
  CHECK_ERROR(parseCpuStatUsageNanos("usage_usec " + std::to_string(UINT64_MAX / 1000 + 1)),
              "cpu.stat: usage_usec too large");
  CHECK_ERROR(parseCpuStatUsageNanos("usage_usec 18446744073709551616\n"), "18446744073709551616");
  CHECK_ERROR(parseCpuStatUsageNanos("usage_usec 99999999999999999999999\n"), "cpu.stat");
  CHECK_ERROR(parseCpuStatUsageNanos("usage_usec \0\xff\n"sv), "\"??\"");
}

TEST_CASE("parsePressure: some and full, some only") {
  const Pressure both = REQUIRE_OK(parsePressure(kPressure));
  CHECK(both.some.avg10 == doctest::Approx(2.31));
  CHECK(both.some.avg60 == doctest::Approx(1.05));
  CHECK(both.some.avg300 == doctest::Approx(0.37));
  CHECK(both.some.totalMicros == 4817263);
  REQUIRE(both.full.has_value());
  CHECK(both.full->avg10 == doctest::Approx(1.12));
  CHECK(both.full->avg300 == doctest::Approx(0.18));
  CHECK(both.full->totalMicros == 2214890);

  const Pressure cpu = REQUIRE_OK(parsePressure(kPressureSomeOnly));
  CHECK(cpu.some.avg10 == doctest::Approx(45.54));
  CHECK(cpu.some.totalMicros == 4014157702ULL);
  CHECK_FALSE(cpu.full.has_value());

  // Bounds, field order, a future field, no final newline.
  const Pressure edge = REQUIRE_OK(
      parsePressure("some total=0 avg300=100.00 avg60=0 avg10=100 avg900=7.00\n"
                    "full avg10=0.00 avg60=0.00 avg300=0.00 total=18446744073709551615"));
  CHECK(edge.some.avg10 == 100);
  CHECK(edge.some.avg300 == 100);
  CHECK(edge.full->totalMicros == UINT64_MAX);
  // "full" before "some" is accepted (the kernel prints some first).
  CHECK(REQUIRE_OK(parsePressure("full avg10=0.00 avg60=0.00 avg300=0.00 total=1\n"
                                 "some avg10=0.00 avg60=0.00 avg300=0.00 total=2\n"))
            .some.totalMicros == 2);
}

TEST_CASE("parsePressure: malformed input") {
  const std::string full = "full avg10=0.00 avg60=0.00 avg300=0.00 total=0\n";
  CHECK_ERROR(parsePressure(""), "pressure: no \"some\" line");
  CHECK_ERROR(parsePressure("\n"), "pressure: no \"some\" line");
  CHECK_ERROR(parsePressure(full), "no \"some\" line");
  CHECK_ERROR(parsePressure("some avg10=0.00 avg60=0.00 avg3"),
              "some: expected KEY=VALUE, got \"avg3\"");
  CHECK_ERROR(parsePressure("some avg10=0.00 avg60=0.00 avg300=0.00\n"),
              "some: expected avg10, avg60, avg300 and total");
  CHECK_ERROR(parsePressure("some avg10=0.00 avg60=0.00 avg300=0.00 total=\n"), "some total");
  CHECK_ERROR(parsePressure("some\n"), "expected avg10, avg60, avg300 and total");
  CHECK_ERROR(parsePressure("some avg10=-1.00 avg60=0.00 avg300=0.00 total=0\n"),
              "some avg10: expected a percentage, got \"-1.00\"");
  CHECK_ERROR(parsePressure("some avg10=0.00 avg60=100.01 avg300=0.00 total=0\n"),
              "avg60: expected a percentage, got \"100.01\"");
  CHECK_ERROR(parsePressure("some avg10=0.00 avg60=0.00 avg300=250 total=0\n"), "avg300");
  CHECK_ERROR(parsePressure("some avg10=nan avg60=0.00 avg300=0.00 total=0\n"), "\"nan\"");
  CHECK_ERROR(parsePressure("some avg10=inf avg60=0.00 avg300=0.00 total=0\n"), "\"inf\"");
  CHECK_ERROR(parsePressure("some avg10=0x1 avg60=0.00 avg300=0.00 total=0\n"), "\"0x1\"");
  CHECK_ERROR(parsePressure("some avg10=0,5 avg60=0.00 avg300=0.00 total=0\n"), "\"0,5\"");
  CHECK_ERROR(parsePressure("some avg10= avg60=0.00 avg300=0.00 total=0\n"), "got \"\"");
  CHECK_ERROR(parsePressure("some avg10=0.00 avg60=0.00 avg300=0.00 total=-5\n"), "\"-5\"");
  CHECK_ERROR(parsePressure("some avg10=0.00 avg60=0.00 avg300=0.00 total=+5\n"), "\"+5\"");
  CHECK_ERROR(parsePressure("some avg10=0.00 avg60=0.00 avg300=0.00 total=18446744073709551616\n"),
              "some total");
  CHECK_ERROR(
      parsePressure("some avg10=0.00 avg60=0.00 avg300=0.00 total=99999999999999999999999\n"),
      "expected an unsigned decimal number");
  CHECK_ERROR(parsePressure("some avg10=0.00 avg60=0.00 avg300=0.00 total=0 extra\n"),
              "got \"extra\"");
  CHECK_ERROR(parsePressure("some avg10=1 avg10=2 avg60=0.00 avg300=0.00 total=0\n"),
              "some: duplicate avg10");
  CHECK_ERROR(parsePressure("some avg10=1 avg60=0.00 avg300=0.00 total=0 total=1\n"),
              "duplicate total");
  CHECK_ERROR(parsePressure(std::string(kPressure) + std::string(kPressureSomeOnly)),
              "duplicate \"some\" line");
  CHECK_ERROR(parsePressure(std::string(kPressure) + full), "duplicate \"full\" line");
  CHECK_ERROR(parsePressure("partial avg10=0.00 avg60=0.00 avg300=0.00 total=0\n"),
              "expected a \"some\" or \"full\" line");
  CHECK_ERROR(parsePressure(std::string(kPressureSomeOnly) + "irq avg10=0.00\n"),
              "got \"irq avg10=0.00\"");
  CHECK_ERROR(parsePressure("some avg10=0.00\0 avg60=0.00 avg300=0.00 total=0\n"sv), "\"0.00?\"");
  CHECK_ERROR(parsePressure("\xff\xfe\x00\n"sv), "got \"???\"");
}

TEST_CASE("parseMemoryEvents: all keys, older kernels, unknown keys") {
  const MemoryEvents events = REQUIRE_OK(parseMemoryEvents(kMemoryEvents));
  CHECK(events.low == 0);
  CHECK(events.high == 17);
  CHECK(events.max == 5);
  CHECK(events.oom == 2);
  CHECK(events.oomKill == 1);
  CHECK(events.oomGroupKill == 1);
  const MemoryEvents old = REQUIRE_OK(parseMemoryEvents(kMemoryEventsOld));
  CHECK(old.max == 3);
  CHECK(old.oomKill == 1);
  CHECK(old.oomGroupKill == 0);
  const MemoryEvents newer =
      REQUIRE_OK(parseMemoryEvents(std::string(kMemoryEvents) + "sock_throttled 4\n"));
  CHECK(newer.oomGroupKill == 1);
  CHECK(REQUIRE_OK(parseMemoryEvents("oom_kill 7")).oomKill == 7);
}

TEST_CASE("parseMemoryEvents: malformed input") {
  CHECK_ERROR(parseMemoryEvents(""), "memory.events: none of low, high, max, oom, oom_kill");
  CHECK_ERROR(parseMemoryEvents("\n"), "memory.events: none of");
  CHECK_ERROR(parseMemoryEvents("sock_throttled 0\n"), "none of");
  CHECK_ERROR(parseMemoryEvents("low 0\nhigh 0\nma"), "memory.events: line 3");
  CHECK_ERROR(parseMemoryEvents("low 0 0\n"), "expected \"KEY VALUE\"");
  CHECK_ERROR(parseMemoryEvents("low 0\noom_kill -1\n"), "memory.events: line 2 (oom_kill)");
  CHECK_ERROR(parseMemoryEvents("max 18446744073709551616\n"), "18446744073709551616");
  CHECK_ERROR(parseMemoryEvents("oom 99999999999999999999999\n"), "line 1 (oom)");
  CHECK_ERROR(parseMemoryEvents("oom_kill 1\noom_kill 2\n"), "duplicate key \"oom_kill\"");
  CHECK_ERROR(parseMemoryEvents("oom 0x1\n"), "\"0x1\"");
  CHECK_ERROR(parseMemoryEvents("oom \xff\x00\n"sv), "\"??\"");
}

TEST_CASE("parseOomControl: with and without oom_kill") {
  const OomControl control = REQUIRE_OK(parseOomControl(kOomControl));
  CHECK_FALSE(control.oomKillDisable);
  CHECK_FALSE(control.underOom);
  CHECK(control.oomKill == std::optional<std::uint64_t>(3));
  const OomControl old = REQUIRE_OK(parseOomControl(kOomControlOld));
  CHECK(old.oomKillDisable);
  CHECK(old.underOom);
  CHECK_FALSE(old.oomKill.has_value());
}

TEST_CASE("parseOomControl: malformed input") {
  CHECK_ERROR(parseOomControl(""), "memory.oom_control: expected oom_kill_disable and under_oom");
  CHECK_ERROR(parseOomControl("\n"), "expected oom_kill_disable and under_oom");
  CHECK_ERROR(parseOomControl("oom_kill_disable 0\n"), "expected oom_kill_disable and under_oom");
  CHECK_ERROR(parseOomControl("under_oom 0\noom_kill 1\n"), "expected oom_kill_disable");
  CHECK_ERROR(parseOomControl("oom_kill_disable 0\nunder_o"), "memory.oom_control: line 2");
  CHECK_ERROR(parseOomControl("oom_kill_disable 0 0\nunder_oom 0\n"), "line 1");
  CHECK_ERROR(parseOomControl("oom_kill_disable -1\nunder_oom 0\n"), "(oom_kill_disable)");
  CHECK_ERROR(parseOomControl("oom_kill_disable 0\nunder_oom 0\noom_kill 18446744073709551616\n"),
              "line 3 (oom_kill)");
  CHECK_ERROR(parseOomControl("oom_kill_disable 0\nunder_oom 0\nunder_oom 1\n"),
              "duplicate key \"under_oom\"");
  CHECK_ERROR(parseOomControl("\0\xff\n"sv), "memory.oom_control");
}

TEST_CASE("parseProcs: PIDs, repeats kept, empty cgroups") {
  CHECK(REQUIRE_OK(parseProcs(kProcs)) == std::vector<pid_t>{48211, 48260, 48261, 1, 48211});
  CHECK(REQUIRE_OK(parseProcs("4194304")) == std::vector<pid_t>{4194304});
  // An empty cgroup.procs is a cgroup without processes, not an error.
  CHECK(REQUIRE_OK(parseProcs("")).empty());
  CHECK(REQUIRE_OK(parseProcs("\n")).empty());
}

TEST_CASE("parseProcs: malformed input") {
  CHECK_ERROR(parseProcs("12\nabc\n"), "cgroup.procs: expected a PID, got \"abc\"");
  CHECK_ERROR(parseProcs("0\n"), "got \"0\"");
  CHECK_ERROR(parseProcs("-1\n"), "got \"-1\"");
  CHECK_ERROR(parseProcs("+1\n"), "got \"+1\"");
  CHECK_ERROR(parseProcs(" 1\n"), "got \" 1\"");
  CHECK_ERROR(parseProcs("1 2\n"), "got \"1 2\"");
  CHECK_ERROR(parseProcs("1 2 3\n"), "got \"1 2 3\"");
  CHECK_ERROR(parseProcs("0x10\n"), "got \"0x10\"");
  CHECK_ERROR(parseProcs("2147483648\n"), "2147483648");  // above pid_t
  CHECK_ERROR(parseProcs("18446744073709551616\n"), "18446744073709551616");
  CHECK_ERROR(parseProcs("99999999999999999999999\n"), "expected a PID");
  CHECK_ERROR(parseProcs("12\0\n"sv), "got \"12?\"");
  CHECK_ERROR(parseProcs("\xff\n"), "got \"?\"");
}

TEST_CASE("parseMemInfo: kB to bytes, MemAvailable optional") {
  const MemInfo info = REQUIRE_OK(parseMemInfo(kMemInfo));
  CHECK(info.memTotal == 24684092ULL * 1024);
  CHECK(info.memFree == 23485848ULL * 1024);
  CHECK(info.memAvailable == std::optional<std::uint64_t>(23601964ULL * 1024));
  CHECK(info.inactiveFile == 202748ULL * 1024);
  // A pre-3.14 kernel: no MemAvailable line; no Inactive(file) either stays 0.
  const MemInfo old = REQUIRE_OK(parseMemInfo("MemTotal: 2048 kB\nMemFree: 1024 kB"));
  CHECK(old.memTotal == 2048 * 1024);
  CHECK_FALSE(old.memAvailable.has_value());
  CHECK(old.inactiveFile == 0);
}

TEST_CASE("parseMemInfo: malformed input") {
  CHECK_ERROR(parseMemInfo(""), "meminfo: expected MemTotal and MemFree");
  CHECK_ERROR(parseMemInfo("\n"), "meminfo: expected MemTotal and MemFree");
  CHECK_ERROR(parseMemInfo("MemTotal: 1 kB\n"), "expected MemTotal and MemFree");
  CHECK_ERROR(parseMemInfo("MemTotal: 1 kB\nMemFree:"), "meminfo MemFree");
  CHECK_ERROR(parseMemInfo("MemTotal: -1 kB\nMemFree: 1 kB\n"), "meminfo MemTotal");
  CHECK_ERROR(parseMemInfo("MemTotal: +1 kB\nMemFree: 1 kB\n"), "\"+1\"");
  CHECK_ERROR(parseMemInfo("MemTotal: 0x10 kB\nMemFree: 1 kB\n"), "\"0x10\"");
  CHECK_ERROR(parseMemInfo("MemTotal: 1 MB\nMemFree: 1 kB\n"), "unknown unit \"MB\"");
  CHECK_ERROR(parseMemInfo("MemTotal: 1 kB extra\nMemFree: 1 kB\n"), "expected \"VALUE kB\"");
  CHECK_ERROR(parseMemInfo("MemTotal: 1 kB\nMemTotal: 2 kB\nMemFree: 1 kB\n"),
              "meminfo: duplicate MemTotal");
  CHECK_ERROR(parseMemInfo("MemTotal: 18014398509481984 kB\nMemFree: 1 kB\n"), "too large");
  CHECK_ERROR(parseMemInfo("MemTotal: 18446744073709551616 kB\nMemFree: 1 kB\n"),
              "18446744073709551616");
  CHECK_ERROR(parseMemInfo("MemTotal: 99999999999999999999999 kB\nMemFree: 1 kB\n"),
              "expected an unsigned decimal number");
  CHECK_ERROR(parseMemInfo("MemTotal: 1\0 kB\nMemFree: 1 kB\n"sv), "\"1?\"");
  CHECK_ERROR(parseMemInfo("\xff\xfe\x00garbage\n"sv), "expected MemTotal and MemFree");
}

TEST_CASE("parseMemInfo: a truncated last line that still reads as a number is accepted") {
  // "MemFree:   12" could be "MemFree:   12345 kB" cut short; without the unit it reads as
  // bytes. The readers never hand over a partial file (preadWhole fails rather than truncate).
  const MemInfo info = REQUIRE_OK(parseMemInfo("MemTotal: 1 kB\nMemFree:   12"));
  CHECK(info.memFree == 12);
}

TEST_CASE("parseMountInfo: hybrid host") {
  const auto mounts = REQUIRE_OK(parseMountInfo(kMountInfoHybrid));
  REQUIRE(mounts.size() == 10);  // the tmpfs at /sys/fs/cgroup is not a cgroup mount
  CHECK(mounts[0].mountPoint == "/sys/fs/cgroup/cpu");
  CHECK(mounts[0].root == "/");
  CHECK((mounts[0].version == Version::V1));
  CHECK(mounts[0].controllers == std::vector<std::string>{"cpu"});
  CHECK(mounts[3].mountPoint == "/sys/fs/cgroup/memory");
  CHECK(mounts[3].controllers == std::vector<std::string>{"memory"});
  CHECK(mounts[8].controllers == std::vector<std::string>{"name=systemd"});
  CHECK(mounts[9].mountPoint == "/sys/fs/cgroup/unified");
  CHECK((mounts[9].version == Version::V2));
  CHECK(mounts[9].controllers.empty());

  const Hierarchy h = REQUIRE_OK(hierarchyFromMounts("/sys/fs/cgroup", mounts, "hugetlb\n"));
  CHECK((h.mode == Mode::Hybrid));
  CHECK(h.memory == "/sys/fs/cgroup/memory");
  CHECK((h.memoryVersion == Version::V1));
  CHECK(h.cpuacct == "/sys/fs/cgroup/cpuacct");
  CHECK(h.pids == "/sys/fs/cgroup/pids");
  CHECK(h.freezer == "/sys/fs/cgroup/freezer");
  CHECK(h.unified == "/sys/fs/cgroup/unified");
  CHECK(h.unifiedControllers == std::vector<std::string>{"hugetlb"});
}

TEST_CASE("parseMountInfo: pure cgroup v2 host") {
  const auto mounts = REQUIRE_OK(parseMountInfo(kMountInfoUnified));
  REQUIRE(mounts.size() == 1);
  CHECK(mounts[0].mountPoint == "/sys/fs/cgroup");
  CHECK((mounts[0].version == Version::V2));
  CHECK(mounts[0].controllers.empty());  // v2 controllers come from cgroup.controllers

  const Hierarchy h = REQUIRE_OK(hierarchyFromMounts(
      "/sys/fs/cgroup/", mounts, "cpuset cpu io memory hugetlb pids rdma misc\n"));
  CHECK((h.mode == Mode::Unified));
  CHECK(h.memory == "/sys/fs/cgroup");
  CHECK((h.memoryVersion == Version::V2));
  CHECK(h.cpuacct == "/sys/fs/cgroup");
  CHECK((h.cpuVersion == Version::V2));
  CHECK(h.pids == "/sys/fs/cgroup");
  CHECK(h.freezer.empty());
  CHECK(h.unifiedControllers.size() == 8);
  // Without the memory controller in cgroup.controllers there is no memory hierarchy.
  CHECK_ERROR(hierarchyFromMounts("/sys/fs/cgroup", mounts, "cpu io\n"),
              "no memory cgroup hierarchy below /sys/fs/cgroup");
}

TEST_CASE("parseMountInfo: DaemonSet with the host hierarchy at /host/sys/fs/cgroup") {
  const auto mounts = REQUIRE_OK(parseMountInfo(kMountInfoDaemonSet));
  REQUIRE(mounts.size() == 2);
  CHECK(mounts[0].mountPoint == "/sys/fs/cgroup");
  CHECK(mounts[1].mountPoint == "/host/sys/fs/cgroup");
  CHECK(mounts[1].root == "/../../../..");
  const std::string controllers = "cpuset cpu io memory hugetlb pids rdma misc\n";
  const Hierarchy host =
      REQUIRE_OK(hierarchyFromMounts("/host/sys/fs/cgroup", mounts, controllers));
  CHECK((host.mode == Mode::Unified));
  CHECK(host.memory == "/host/sys/fs/cgroup");
  CHECK(host.unified == "/host/sys/fs/cgroup");
  // The container's own namespaced view is a different root.
  const Hierarchy own = REQUIRE_OK(hierarchyFromMounts("/sys/fs/cgroup", mounts, controllers));
  CHECK(own.memory == "/sys/fs/cgroup");
  CHECK_ERROR(hierarchyFromMounts("/host/sys", {}, controllers), "(no cgroup mounts there)");
}

TEST_CASE("parseMountInfo: legacy host, co-mounted controllers, escaped mount points") {
  const auto mounts = REQUIRE_OK(parseMountInfo(kMountInfoLegacy));
  REQUIRE(mounts.size() == 8);
  CHECK(mounts[0].controllers == std::vector<std::string>{"name=systemd"});  // xattr, release_agent
  CHECK(mounts[1].mountPoint == "/sys/fs/cgroup/cpu,cpuacct");
  CHECK(mounts[1].controllers == std::vector<std::string>{"cpu", "cpuacct"});
  CHECK(mounts[3].controllers == std::vector<std::string>{"net_cls", "net_prio"});
  CHECK(mounts[4].controllers == std::vector<std::string>{"cpuset"});  // clone_children
  CHECK(mounts[7].mountPoint == "/mnt/my cgroups\ttab\\back");
  CHECK(mounts[7].root == "/kubepods");

  const Hierarchy h = REQUIRE_OK(hierarchyFromMounts("/sys/fs/cgroup", mounts, ""));
  CHECK((h.mode == Mode::Legacy));
  CHECK(h.cpuacct == "/sys/fs/cgroup/cpu,cpuacct");
  CHECK(h.memory == "/sys/fs/cgroup/memory");  // the /mnt bind is outside the root
  CHECK(h.unified.empty());
}

TEST_CASE("parseMountInfo: escapes") {
  const auto line = [](std::string_view mountPoint) {
    return "90 30 0:26 / " + std::string(mountPoint) + " rw - cgroup2 cgroup2 rw\n";
  };
  CHECK(REQUIRE_OK(parseMountInfo(line("/a\\040b")))[0].mountPoint == "/a b");
  CHECK(REQUIRE_OK(parseMountInfo(line("/a\\012b")))[0].mountPoint == "/a\nb");
  CHECK(REQUIRE_OK(parseMountInfo(line("/a\\134")))[0].mountPoint == "/a\\");
  // Not an escape: kept as written.
  CHECK(REQUIRE_OK(parseMountInfo(line("/a\\04")))[0].mountPoint == "/a\\04");
  CHECK(REQUIRE_OK(parseMountInfo(line("/a\\777b")))[0].mountPoint == "/a\\777b");
  CHECK(REQUIRE_OK(parseMountInfo(line("/a\\089b")))[0].mountPoint == "/a\\089b");
  CHECK(REQUIRE_OK(parseMountInfo(line("/a\\-12b")))[0].mountPoint == "/a\\-12b");
  CHECK(REQUIRE_OK(parseMountInfo(line("/a\\+12b")))[0].mountPoint == "/a\\+12b");
  CHECK(REQUIRE_OK(parseMountInfo(line("\\")))[0].mountPoint == "\\");
}

TEST_CASE("parseMountInfo: malformed input") {
  CHECK(REQUIRE_OK(parseMountInfo("")).empty());
  CHECK(REQUIRE_OK(parseMountInfo("\n")).empty());
  CHECK_ERROR(parseMountInfo("35 31 0:32 / /sys/fs/cgroup/memory rw,relatime\n"),
              "mountinfo line 1: no \" - \" separator");
  CHECK_ERROR(parseMountInfo(std::string(kMountInfoUnified) + "garbage\n"), "mountinfo line 7");
  // Cut short at every point of a cgroup line.
  const std::string full =
      "35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory";
  for (std::size_t cut = full.find(" - ") + 3 + 6; cut < full.size() - 9; ++cut) {
    CAPTURE(cut);
    CHECK_ERROR(parseMountInfo(full.substr(0, cut) + "\n"), "mountinfo line 1");
  }
  CHECK_ERROR(parseMountInfo("35 31 0:32 / - cgroup cgroup rw,memory\n"), "expected 10 fields");
  CHECK_ERROR(parseMountInfo("35 31 0:32 - cgroup2 cgroup2 rw\n"), "expected 10 fields");
  CHECK_ERROR(parseMountInfo("35 31 0:32 / /x rw - cgroup2\n"), "expected 10 fields");
  // A NUL in the filesystem type: not a cgroup line.
  CHECK(REQUIRE_OK(parseMountInfo("35 31 0:32 / /x rw - cgroup\0 cgroup rw,memory\n"sv)).empty());
  CHECK_ERROR(parseMountInfo("\xff\xfe\x00\n"sv), "no \" - \" separator");
  // Other filesystems are skipped even when odd, as long as the line has its separator.
  CHECK(REQUIRE_OK(parseMountInfo("1 2 3 - tmpfs\n")).empty());
}

TEST_CASE("parseProcCgroup: v1 and v2 lines") {
  const auto v1 = REQUIRE_OK(parseProcCgroup(kProcCgroupV1));
  REQUIRE(v1.size() == 10);
  CHECK(v1[0].hierarchyId == 9);
  CHECK(v1[0].controllers == std::vector<std::string>{"name=systemd"});
  CHECK(v1[0].path == "/");
  CHECK(v1[5].controllers == std::vector<std::string>{"memory"});
  CHECK(v1[5].path == "/process_api/02fc1b79cbd12edff23e0461c7b0947d");
  CHECK(v1[7].controllers == std::vector<std::string>{"cpu", "cpuacct"});
  CHECK(v1[7].path.ends_with("/3f9a1c2b7d4e5f60718293a4b5c6d7e8f90a1b2c3d4e5f60718293a4b5c6d7e8"));
  CHECK(v1[9].hierarchyId == 0);
  CHECK(v1[9].controllers.empty());

  const auto v2 = REQUIRE_OK(parseProcCgroup(kProcCgroupV2));
  REQUIRE(v2.size() == 1);
  CHECK(v2[0].hierarchyId == 0);
  CHECK(v2[0].controllers.empty());
  CHECK(v2[0].path.starts_with("/kubepods.slice/kubepods-burstable.slice/"));
  // Inside a cgroup namespace, ancestors show as "/..". A ':' in the path is kept.
  CHECK(REQUIRE_OK(parseProcCgroup("0::/../../kubepods.slice\n"))[0].path ==
        "/../../kubepods.slice");
  CHECK(REQUIRE_OK(parseProcCgroup("0::/a:b"))[0].path == "/a:b");
  CHECK(REQUIRE_OK(parseProcCgroup("")).empty());
}

TEST_CASE("parseProcCgroup: malformed input") {
  CHECK_ERROR(parseProcCgroup("garbage\n"), "expected ID:CONTROLLERS:PATH, got \"garbage\"");
  CHECK_ERROR(parseProcCgroup("4:memory\n"), "got \"4:memory\"");
  CHECK_ERROR(parseProcCgroup("4:memory:\n"), "got \"4:memory:\"");  // truncated
  CHECK_ERROR(parseProcCgroup("0::/\n4:mem"), "got \"4:mem\"");
  CHECK_ERROR(parseProcCgroup("x::/\n"), "got \"x::/\"");
  CHECK_ERROR(parseProcCgroup("-1::/\n"), "got \"-1::/\"");
  CHECK_ERROR(parseProcCgroup("+1::/\n"), "got \"+1::/\"");
  CHECK_ERROR(parseProcCgroup(" 1::/\n"), "got \" 1::/\"");
  CHECK_ERROR(parseProcCgroup("::/\n"), "got \"::/\"");
  CHECK_ERROR(parseProcCgroup("0::relative\n"), "got \"0::relative\"");
  CHECK_ERROR(parseProcCgroup("99999999999999999999999::/\n"), "expected ID:CONTROLLERS:PATH");
  CHECK_ERROR(parseProcCgroup("0\0::/\n"sv), "got \"0?::/\"");
  CHECK_ERROR(parseProcCgroup("\xff:\xff:\xff\n"), "got \"?:?:?\"");
}

TEST_CASE("formatPsiTrigger: the kernel's rules") {
  CHECK(REQUIRE_OK(formatPsiTrigger(PressureKind::Some, 150000, 1000000, true)) ==
        "some 150000 1000000");
  CHECK(REQUIRE_OK(formatPsiTrigger(PressureKind::Full, 500000, 500000, true)) ==
        "full 500000 500000");
  CHECK(REQUIRE_OK(formatPsiTrigger(PressureKind::Some, 1, 10000000, true)) == "some 1 10000000");
  // Unprivileged: multiples of 2 s only.
  CHECK(REQUIRE_OK(formatPsiTrigger(PressureKind::Some, 100000, 2000000, false)) ==
        "some 100000 2000000");
  CHECK(REQUIRE_OK(formatPsiTrigger(PressureKind::Full, 10000000, 10000000, false)) ==
        "full 10000000 10000000");
  CHECK_ERROR(formatPsiTrigger(PressureKind::Some, 100000, 1000000, false),
              "without CAP_SYS_RESOURCE the window must be a multiple of 2s");
  CHECK_ERROR(formatPsiTrigger(PressureKind::Some, 100000, 3000000, false), "multiple of 2s");
  CHECK_ERROR(formatPsiTrigger(PressureKind::Some, 100000, 500000, false), "multiple of 2s");
  // Window bounds.
  CHECK_ERROR(formatPsiTrigger(PressureKind::Some, 100000, 499999, true),
              "between 500ms and 10s, got 499999us");
  CHECK_ERROR(formatPsiTrigger(PressureKind::Some, 100000, 10000001, true), "got 10000001us");
  CHECK_ERROR(formatPsiTrigger(PressureKind::Some, 100000, 12000000, false), "between 500ms");
  CHECK_ERROR(formatPsiTrigger(PressureKind::Some, 0, 0, true), "between 500ms and 10s");
  CHECK_ERROR(formatPsiTrigger(PressureKind::Some, 1, UINT64_MAX, true), "between 500ms");
  // Stall bounds.
  CHECK_ERROR(formatPsiTrigger(PressureKind::Some, 0, 1000000, true),
              "the stall must be above 0 and at most the window, got 0us");
  CHECK_ERROR(formatPsiTrigger(PressureKind::Full, 1000001, 1000000, true), "got 1000001us");
  CHECK_ERROR(formatPsiTrigger(PressureKind::Full, UINT64_MAX, 2000000, false), "the stall");
}

// ------------------------------------------------------------------------------------------
// Layout names (cgroups/pods.h).

constexpr std::string_view kUid = "1f2e3d4c-aaaa-bbbb-cccc-0123456789ab";
constexpr std::string_view kUidEscaped = "1f2e3d4c_aaaa_bbbb_cccc_0123456789ab";
constexpr std::string_view kContainerId =
    "3f9a1c2b7d4e5f60718293a4b5c6d7e8f90a1b2c3d4e5f60718293a4b5c6d7e8";

TEST_CASE("parsePodCgroupName: cgroupfs") {
  const auto pod = parsePodCgroupName("pod" + std::string(kUid), Driver::Cgroupfs, "burstable");
  REQUIRE(pod.has_value());
  CHECK(pod->uid == kUid);
  CHECK(pod->qos == "burstable");
  CHECK(parsePodCgroupName("pod" + std::string(kUid), Driver::Cgroupfs, "guaranteed")->qos ==
        "guaranteed");
  // Static pods: the UID is a config hash without dashes.
  CHECK(parsePodCgroupName("pod0a1b2c3d4e5f60718293a4b5c6d7e8f9", Driver::Cgroupfs, "besteffort")
            ->uid == "0a1b2c3d4e5f60718293a4b5c6d7e8f9");

  CHECK_FALSE(parsePodCgroupName("pod", Driver::Cgroupfs, "burstable").has_value());
  CHECK_FALSE(parsePodCgroupName("podx/y", Driver::Cgroupfs, "burstable").has_value());
  CHECK_FALSE(
      parsePodCgroupName("pod" + std::string(kUidEscaped), Driver::Cgroupfs, "").has_value());
  CHECK_FALSE(parsePodCgroupName("burstable", Driver::Cgroupfs, "").has_value());
  CHECK_FALSE(parsePodCgroupName(kContainerId, Driver::Cgroupfs, "burstable").has_value());
  CHECK_FALSE(parsePodCgroupName("cri-containerd-" + std::string(kContainerId) + ".scope",
                                 Driver::Cgroupfs, "burstable")
                  .has_value());
  // A systemd name is not a cgroupfs pod, and the other way round.
  CHECK_FALSE(
      parsePodCgroupName("kubepods-pod" + std::string(kUidEscaped) + ".slice", Driver::Cgroupfs, "")
          .has_value());
  CHECK_FALSE(parsePodCgroupName("pod" + std::string(kUid), Driver::Systemd, "").has_value());
  CHECK_FALSE(parsePodCgroupName("", Driver::Cgroupfs, "").has_value());
  CHECK_FALSE(parsePodCgroupName("pod" + std::string(200, 'a'), Driver::Cgroupfs, "").has_value());
  // Only UUIDs and 32-hex static-pod hashes are pod UIDs: other "pod…" directories are not.
  CHECK_FALSE(parsePodCgroupName("podcast", Driver::Cgroupfs, "").has_value());
  CHECK_FALSE(parsePodCgroupName("pod1f2e3d4c-aaaa-bbbb-cccc-0123456789ag", Driver::Cgroupfs, "")
                  .has_value());
  CHECK_FALSE(parsePodCgroupName("pod1f2e3d4caaaa-bbbb-cccc-0123456789ab-", Driver::Cgroupfs, "")
                  .has_value());
}

TEST_CASE("parsePodCgroupName: systemd") {
  const auto burstable = parsePodCgroupName(
      "kubepods-burstable-pod" + std::string(kUidEscaped) + ".slice", Driver::Systemd, "");
  REQUIRE(burstable.has_value());
  CHECK(burstable->uid == kUid);
  CHECK(burstable->qos == "burstable");
  const auto besteffort = parsePodCgroupName(
      "kubepods-besteffort-pod" + std::string(kUidEscaped) + ".slice", Driver::Systemd, "");
  REQUIRE(besteffort.has_value());
  CHECK(besteffort->qos == "besteffort");
  const auto guaranteed = parsePodCgroupName("kubepods-pod" + std::string(kUidEscaped) + ".slice",
                                             Driver::Systemd, "guaranteed");
  REQUIRE(guaranteed.has_value());
  CHECK(guaranteed->uid == kUid);
  CHECK(guaranteed->qos == "guaranteed");

  CHECK_FALSE(parsePodCgroupName("kubepods-burstable.slice", Driver::Systemd, "").has_value());
  CHECK_FALSE(parsePodCgroupName("kubepods-besteffort.slice", Driver::Systemd, "").has_value());
  CHECK_FALSE(parsePodCgroupName("kubepods.slice", Driver::Systemd, "").has_value());
  CHECK_FALSE(parsePodCgroupName("kubepods-pod.slice", Driver::Systemd, "").has_value());
  CHECK_FALSE(parsePodCgroupName("kubepods-pod" + std::string(kUidEscaped), Driver::Systemd, "")
                  .has_value());
  CHECK_FALSE(parsePodCgroupName("cri-containerd-" + std::string(kContainerId) + ".scope",
                                 Driver::Systemd, "burstable")
                  .has_value());
  CHECK_FALSE(parsePodCgroupName("crio-conmon-" + std::string(kContainerId) + ".scope",
                                 Driver::Systemd, "burstable")
                  .has_value());
  CHECK_FALSE(parsePodCgroupName(".slice", Driver::Systemd, "").has_value());
  CHECK_FALSE(parsePodCgroupName("-pod.slice", Driver::Systemd, "").has_value());
  CHECK_FALSE(parsePodCgroupName("kubepods-podx/y.slice", Driver::Systemd, "").has_value());
}

TEST_CASE("parseQosDirName") {
  CHECK(parseQosDirName("burstable", Driver::Cgroupfs) == std::optional<std::string>("burstable"));
  CHECK(parseQosDirName("besteffort", Driver::Cgroupfs) ==
        std::optional<std::string>("besteffort"));
  CHECK_FALSE(parseQosDirName("guaranteed", Driver::Cgroupfs).has_value());
  CHECK_FALSE(parseQosDirName("Burstable", Driver::Cgroupfs).has_value());
  CHECK_FALSE(parseQosDirName("kubepods-burstable.slice", Driver::Cgroupfs).has_value());
  CHECK_FALSE(parseQosDirName("pod" + std::string(kUid), Driver::Cgroupfs).has_value());
  CHECK(parseQosDirName("kubepods-burstable.slice", Driver::Systemd) ==
        std::optional<std::string>("burstable"));
  CHECK(parseQosDirName("kubepods-besteffort.slice", Driver::Systemd) ==
        std::optional<std::string>("besteffort"));
  CHECK_FALSE(parseQosDirName("burstable", Driver::Systemd).has_value());
  CHECK_FALSE(parseQosDirName("kubepods-pod" + std::string(kUidEscaped) + ".slice", Driver::Systemd)
                  .has_value());
}

// What PodCgroups::refresh does with a path: the tier from the parent directory, then the name.
std::optional<PodCgroupName> parseAsRefreshWould(const std::string& path, Driver driver) {
  const std::size_t slash = path.rfind('/');
  const std::string leaf = path.substr(slash + 1);
  const std::string parentPath = path.substr(0, slash);
  const std::string parent = parentPath.substr(parentPath.rfind('/') + 1);
  const std::string qos = parseQosDirName(parent, driver).value_or("guaranteed");
  return parsePodCgroupName(leaf, driver, qos);
}

TEST_CASE("podCgroupPath: the kubelet's layout, round-tripping through parsePodCgroupName") {
  CHECK(podCgroupPath("kubepods", Driver::Cgroupfs, "burstable", kUid) ==
        "kubepods/burstable/pod" + std::string(kUid));
  CHECK(podCgroupPath("kubepods", Driver::Cgroupfs, "guaranteed", kUid) ==
        "kubepods/pod" + std::string(kUid));
  CHECK(podCgroupPath("kubepods.slice", Driver::Systemd, "burstable", kUid) ==
        "kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" +
            std::string(kUidEscaped) + ".slice");
  CHECK(podCgroupPath("kubepods.slice", Driver::Systemd, "besteffort", kUid) ==
        "kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod" +
            std::string(kUidEscaped) + ".slice");
  CHECK(podCgroupPath("kubepods.slice/", Driver::Systemd, "guaranteed", kUid) ==
        "kubepods.slice/kubepods-pod" + std::string(kUidEscaped) + ".slice");

  const std::string uids[] = {std::string(kUid), "0a1b2c3d4e5f60718293a4b5c6d7e8f9",
                              "a0b1c2d3-e4f5-4a6b-8c7d-9e0f1a2b3c4d"};
  const struct {
    const char* kubepods;
    Driver driver;
  } layouts[] = {{"kubepods", Driver::Cgroupfs},
                 {"nodewarden-demo/kubepods", Driver::Cgroupfs},
                 {"kubepods.slice", Driver::Systemd},
                 {"kubelet.slice/kubelet-kubepods.slice", Driver::Systemd}};
  for (const auto& layout : layouts) {
    CHECK((driverForKubepods(layout.kubepods) == layout.driver));
    for (const char* qos : {"guaranteed", "burstable", "besteffort"}) {
      for (const std::string& uid : uids) {
        const std::string path = podCgroupPath(layout.kubepods, layout.driver, qos, uid);
        CAPTURE(path);
        CHECK(path.starts_with(std::string(layout.kubepods) + "/"));
        const auto parsed = parseAsRefreshWould(path, layout.driver);
        REQUIRE(parsed.has_value());
        CHECK(parsed->uid == uid);
        CHECK(parsed->qos == qos);
      }
    }
  }
}

TEST_CASE("containerIdFromCgroupName: runtimes' leaf names") {
  const std::string id(kContainerId);
  CHECK(containerIdFromCgroupName("cri-containerd-" + id + ".scope") == id);
  CHECK(containerIdFromCgroupName("crio-" + id + ".scope") == id);
  CHECK(containerIdFromCgroupName("crio-" + id) == id);
  CHECK(containerIdFromCgroupName("docker-" + id + ".scope") == id);
  CHECK(containerIdFromCgroupName(id) == id);

  CHECK_FALSE(containerIdFromCgroupName("crio-conmon-" + id + ".scope").has_value());
  CHECK_FALSE(containerIdFromCgroupName("crio-conmon-" + id).has_value());
  CHECK_FALSE(containerIdFromCgroupName("cri-containerd-3f9a1c2b7d4e.scope").has_value());
  CHECK_FALSE(containerIdFromCgroupName("3f9a1c2b7d4e").has_value());
  CHECK_FALSE(containerIdFromCgroupName(id.substr(1)).has_value());
  CHECK_FALSE(containerIdFromCgroupName(id + "0").has_value());
  CHECK_FALSE(
      containerIdFromCgroupName("cri-containerd-" + id.substr(0, 63) + "g.scope").has_value());
  CHECK_FALSE(containerIdFromCgroupName("pod" + std::string(kUid)).has_value());
  CHECK_FALSE(containerIdFromCgroupName("kubepods-burstable.slice").has_value());
  CHECK_FALSE(containerIdFromCgroupName("").has_value());
  CHECK_FALSE(containerIdFromCgroupName(".scope").has_value());
}

// ------------------------------------------------------------------------------------------
// Fuzz: every parser on random bytes and on mutations of the real samples. No crash, no
// exception, no out-of-bounds read (the sanitizer build checks this: every input lives in a
// heap block of exactly its size), and anything accepted satisfies the parser's promises.

struct FuzzStats {
  std::size_t inputs = 0;
  std::size_t accepted = 0;
};

void runEveryParser(std::string_view text, FuzzStats& stats) {
  ++stats.inputs;
  std::size_t ok = 0;
  if (auto r = parseUint(text)) ++ok;
  if (auto r = parseMax(text)) {
    ++ok;
    if (r->has_value()) REQUIRE(**r <= std::uint64_t{1} << 62);
  }
  if (auto r = findFlatKey(text, "usage_usec")) ++ok;
  for (const Version version : {Version::V1, Version::V2}) {
    if (auto r = parseMemoryStat(text, version)) ++ok;
  }
  if (auto r = parseCpuStatUsageNanos(text)) {
    ++ok;
    REQUIRE(*r % 1000 == 0);
  }
  if (auto r = parsePressure(text)) {
    ++ok;
    for (const PressureLine* line : {&r->some, r->full ? &*r->full : nullptr}) {
      if (line == nullptr) continue;
      for (const double avg : {line->avg10, line->avg60, line->avg300}) {
        REQUIRE(std::isfinite(avg));
        REQUIRE(avg >= 0);
        REQUIRE(avg <= 100);
      }
    }
  }
  if (auto r = parseMemoryEvents(text)) ++ok;
  if (auto r = parseOomControl(text)) ++ok;
  if (auto r = parseProcs(text)) {
    ++ok;
    for (const pid_t pid : *r) REQUIRE(pid > 0);
  }
  if (auto r = parseMemInfo(text)) ++ok;
  if (auto r = parseMountInfo(text)) {
    ++ok;
    for (const CgroupMount& mount : *r) {
      REQUIRE_FALSE(mount.mountPoint.empty());
      REQUIRE_FALSE(mount.root.empty());
    }
  }
  if (auto r = parseProcCgroup(text)) {
    ++ok;
    for (const ProcCgroup& entry : *r) {
      REQUIRE(entry.hierarchyId >= 0);
      REQUIRE(entry.path.starts_with('/'));
    }
  }
  // The layout names take any bytes too.
  if (text.size() <= 200) {
    if (parsePodCgroupName(text, Driver::Cgroupfs, "burstable")) ++ok;
    if (parsePodCgroupName(text, Driver::Systemd, "")) ++ok;
    if (parseQosDirName(text, Driver::Systemd)) ++ok;
    if (auto id = containerIdFromCgroupName(text)) REQUIRE(id->size() == 64);
  }
  if (ok > 0) ++stats.accepted;
}

// Runs the parsers on a copy of `bytes` in a heap block of exactly that size.
void fuzzOne(const std::string& bytes, FuzzStats& stats) {
  std::unique_ptr<char[]> exact(new char[bytes.size()]);
  std::copy(bytes.begin(), bytes.end(), exact.get());
  runEveryParser(std::string_view(exact.get(), bytes.size()), stats);
}

// Bytes the formats are made of, plus NUL and high bytes.
constexpr std::string_view kAlphabet =
    "0123456789 \n\t:-=,./\\_some full avg10=total= max kB\x00\xff\x80\x7f"
    "inactive_file usage_usec oom_kill cgroup2 - cgroup rw,memory pod\x01\x0d"sv;

std::string randomBytes(std::mt19937_64& rng, std::size_t length) {
  std::string out(length, '\0');
  for (char& c : out) {
    const std::uint64_t pick = rng();
    c = (pick & 3) == 0 ? static_cast<char>(pick >> 8) : kAlphabet[(pick >> 8) % kAlphabet.size()];
  }
  return out;
}

std::string mutate(std::mt19937_64& rng, std::string text) {
  const int steps = 1 + static_cast<int>(rng() % 4);
  for (int step = 0; step < steps; ++step) {
    const std::size_t at = text.empty() ? 0 : rng() % (text.size() + 1);
    switch (rng() % 8) {
      case 0:  // truncate
        text.resize(at);
        break;
      case 1:  // flip a byte
        if (at < text.size()) text[at] = static_cast<char>(rng());
        break;
      case 2:  // insert random bytes
        text.insert(at, randomBytes(rng, 1 + rng() % 8));
        break;
      case 3:  // delete a run
        if (at < text.size()) text.erase(at, 1 + rng() % 16);
        break;
      case 4:  // duplicate a slice (repeated keys and lines)
        if (at < text.size()) text.insert(at, text.substr(at, 1 + rng() % 64));
        break;
      case 5:  // a digit run that overflows
        text.insert(at, std::string(15 + rng() % 15, static_cast<char>('0' + rng() % 10)));
        break;
      case 6:  // a sign, a space or a NUL at a boundary
        text.insert(at, 1, "-+ \0\n"[rng() % 5]);
        break;
      default:  // drop the final newline
        if (!text.empty() && text.back() == '\n') text.pop_back();
        break;
    }
  }
  return text;
}

TEST_CASE("fuzz: random bytes and mutated samples through every parser") {
  std::mt19937_64 rng(0x6e6f64657761726eULL);  // fixed: the run is reproducible
  FuzzStats stats;
  for (int i = 0; i < 20000; ++i) fuzzOne(randomBytes(rng, rng() % 160), stats);

  const std::string_view samples[] = {
      kV1MemoryStat,     kV2MemoryStat,
      kCpuStat,          kCpuStatNoController,
      kPressure,         kPressureSomeOnly,
      kMemoryEvents,     kMemoryEventsOld,
      kOomControl,       kOomControlOld,
      kMemInfo,          kMountInfoHybrid,
      kMountInfoUnified, kMountInfoDaemonSet,
      kMountInfoLegacy,  kProcCgroupV1,
      kProcCgroupV2,     kProcs,
      "max\n",           "9223372036854771712\n",
  };
  for (const std::string_view sample : samples) {
    fuzzOne(std::string(sample), stats);
    for (int i = 0; i < 1000; ++i) fuzzOne(mutate(rng, std::string(sample)), stats);
  }
  CHECK(stats.inputs == 20000 + std::size(samples) * 1001);
  // The mutations keep many inputs valid for some parser, so the accepting paths run too.
  CHECK(stats.accepted > 2000);
}

}  // namespace
}  // namespace nodewarden::cgroups
