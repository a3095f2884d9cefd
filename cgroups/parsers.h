// Pure parsers for the kernel's cgroup and /proc text formats. No I/O: each takes the file's
// text and returns a value or an Error naming what was wrong. They never throw and never read
// outside the given view; every number goes through std::from_chars with overflow checks.
// These are the fuzz targets of cgroups/ (docs/conventions.md §4).
#pragma once

#include <sys/types.h>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"

namespace nodewarden::cgroups {

// A single unsigned decimal number with an optional trailing newline
// (memory.usage_in_bytes, memory.current, cpuacct.usage, pids.current, pid_max).
Result<std::uint64_t> parseUint(std::string_view text);

// A limit file: v2 "max" or a number; v1 memory.limit_in_bytes, where the kernel prints
// PAGE_COUNTER_MAX × page size (9223372036854771712 on x86_64) for "no limit". Values above
// 2^62 are unlimited, as the kubelet treats them (pkg/kubelet/stats/helper.go).
// Returns nullopt for unlimited.
Result<std::optional<std::uint64_t>> parseMax(std::string_view text);

// A flat keyed file ("KEY VALUE\n" per line: memory.stat, cpu.stat, memory.events). Returns
// the value of `key`, nullopt when the key is absent. Lines must have exactly two tokens and
// the value must be an unsigned number, else the whole file is an error.
Result<std::optional<std::uint64_t>> findFlatKey(std::string_view text, std::string_view key);

// The memory.stat figures the working set needs. v1 reports hierarchical totals as
// "total_inactive_file" (preferred, as cAdvisor does); v2's "inactive_file" is hierarchical.
struct MemoryStat {
  std::uint64_t inactiveFile = 0;
  std::optional<std::uint64_t> anon;  // v2 "anon" (v1 "total_rss")
  std::optional<std::uint64_t> file;  // v2 "file" (v1 "total_cache")
};
enum class Version { V1, V2 };
Result<MemoryStat> parseMemoryStat(std::string_view text, Version version);

// Working set as cAdvisor computes it: usage − inactive_file, floored at 0.
std::uint64_t workingSet(std::uint64_t usage, std::uint64_t inactiveFile);

// v2 cpu.stat usage_usec, in nanoseconds.
Result<std::uint64_t> parseCpuStatUsageNanos(std::string_view text);

// Pressure stall information: /proc/pressure/* and cgroup2 *.pressure.
//   some avg10=0.00 avg60=0.00 avg300=0.00 total=0
//   full avg10=0.00 avg60=0.00 avg300=0.00 total=0
// "full" is absent for CPU on older kernels.
struct PressureLine {
  double avg10 = 0;
  double avg60 = 0;
  double avg300 = 0;
  std::uint64_t totalMicros = 0;
};
struct Pressure {
  PressureLine some;
  std::optional<PressureLine> full;
};
Result<Pressure> parsePressure(std::string_view text);

// v2 memory.events (hierarchical counts). Keys the kernel does not print stay 0.
struct MemoryEvents {
  std::uint64_t low = 0;
  std::uint64_t high = 0;
  std::uint64_t max = 0;
  std::uint64_t oom = 0;
  std::uint64_t oomKill = 0;
  std::uint64_t oomGroupKill = 0;
};
Result<MemoryEvents> parseMemoryEvents(std::string_view text);

// v1 memory.oom_control: "oom_kill_disable 0\nunder_oom 0\noom_kill 3\n" (oom_kill since 4.13).
struct OomControl {
  bool oomKillDisable = false;
  bool underOom = false;
  std::optional<std::uint64_t> oomKill;
};
Result<OomControl> parseOomControl(std::string_view text);

// cgroup.procs / tasks: one PID per line, unordered, possibly repeated.
Result<std::vector<pid_t>> parseProcs(std::string_view text);

// /proc/meminfo figures in bytes (the file prints kB).
struct MemInfo {
  std::uint64_t memTotal = 0;
  std::uint64_t memFree = 0;
  std::optional<std::uint64_t> memAvailable;  // since 3.14
  std::uint64_t inactiveFile = 0;             // "Inactive(file)"
  std::uint64_t swapTotal = 0;                // "SwapTotal": 0 when no swap is on
};
Result<MemInfo> parseMemInfo(std::string_view text);

// One line of /proc/self/mountinfo that mounts a cgroup or cgroup2 filesystem.
struct CgroupMount {
  std::string mountPoint;  // unescaped (\040 → space)
  std::string root;        // the mount's root within the hierarchy
  Version version = Version::V1;
  std::vector<std::string>
      controllers;  // v1: from the super options ("cpu", "cpuacct", "name=systemd")
};
// Returns the cgroup mounts in file order; other filesystems are skipped. Any line without
// the " - " separator, and a cgroup line that cannot be split into its fields, is an error.
Result<std::vector<CgroupMount>> parseMountInfo(std::string_view text);

// /proc/<pid>/cgroup: "hierarchy-ID:controller-list:path" per line; v2 is "0::/path".
struct ProcCgroup {
  int hierarchyId = 0;
  std::vector<std::string> controllers;
  std::string path;
};
Result<std::vector<ProcCgroup>> parseProcCgroup(std::string_view text);

// Formats a PSI trigger ("some 150000 1000000") after checking the kernel's rules:
// 0 < stall ≤ window, 500 ms ≤ window ≤ 10 s, and a multiple of 2 s without CAP_SYS_RESOURCE.
enum class PressureKind { Some, Full };
Result<std::string> formatPsiTrigger(PressureKind kind, std::uint64_t stallMicros,
                                     std::uint64_t windowMicros, bool privileged);

}  // namespace nodewarden::cgroups
