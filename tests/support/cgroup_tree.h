// A cgroup tree for unit tests, made of plain directories and files from a literal
// description (oomd's Fixture is the shape), in a temporary directory removed when the test
// ends. Readers, detectors and the actuator take their root from a path, so they run on it
// unchanged; the test then moves a figure by writing its file.
//
//   CgroupTree tree({
//       file("cgroup.controllers", "cpu memory pids\n"),
//       dir("kubepods", {
//           file("memory.max", "1073741824\n"),
//           podV2("0000…0001", podFiles(300 * kMiB)),
//           dir("besteffort", {podV2("0000…0002", podFiles(20 * kMiB))}),
//       }),
//   });
//   tree.write("kubepods/pod0000…0001/memory.current", "400000000\n");  // it grew
//   tree.remove("kubepods/besteffort/pod0000…0002");                     // it is gone
//
// Nothing here is a kernel: writing cgroup.kill kills nothing and memory.current never moves
// by itself; tests that need the kernel's behaviour use real cgroups (tests/cgroups/real_env.h).
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "tests/support/temp_dir.h"

namespace nodewarden::testing {

// A file with its content, or a directory with its entries.
struct TreeEntry {
  std::string name;
  bool directory = false;
  std::string content;
  std::vector<TreeEntry> entries;
};

inline TreeEntry file(std::string name, std::string content = "") {
  return TreeEntry{std::move(name), false, std::move(content), {}};
}

inline TreeEntry dir(std::string name, std::vector<TreeEntry> entries = {}) {
  return TreeEntry{std::move(name), true, {}, std::move(entries)};
}

// Writes `entry` below `parent` (directories made as needed, files replaced).
inline void materialize(const TreeEntry& entry, const std::filesystem::path& parent) {
  const std::filesystem::path path = parent / entry.name;
  if (!entry.directory) {
    std::filesystem::create_directories(parent);
    std::ofstream(path, std::ios::binary | std::ios::trunc) << entry.content;
    return;
  }
  std::filesystem::create_directories(path);
  for (const TreeEntry& child : entry.entries) materialize(child, path);
}

// What a pod cgroup's files say.
struct PodFiles {
  std::int64_t usage = 0;         // memory.current / memory.usage_in_bytes
  std::int64_t inactiveFile = 0;  // memory.stat
  std::vector<pid_t> pids;        // cgroup.procs (and cgroup.events' populated)
  std::int64_t cpuMicros = 1000;  // cpu.stat usage_usec / cpuacct.usage (×1000)
};

// A pod using `usage` bytes (no page cache) with `pids` in it.
inline PodFiles podFiles(std::int64_t usage, std::vector<pid_t> pids = {}) {
  PodFiles files;
  files.usage = usage;
  files.pids = std::move(pids);
  return files;
}

inline std::string procsText(const std::vector<pid_t>& pids) {
  std::string text;
  for (pid_t pid : pids) text += std::to_string(pid) + "\n";
  return text;
}

// The files of a cgroup v2 pod directory `name` ("pod<uid>").
inline TreeEntry podV2(const std::string& uid, const PodFiles& files) {
  return dir(
      "pod" + uid,
      {file("memory.current", std::to_string(files.usage) + "\n"),
       file("memory.stat", "anon " + std::to_string(files.usage - files.inactiveFile) + "\nfile " +
                               std::to_string(files.inactiveFile) + "\ninactive_file " +
                               std::to_string(files.inactiveFile) + "\n"),
       file("memory.max", "max\n"),
       file("memory.events", "low 0\nhigh 0\nmax 0\noom 0\noom_kill 0\n"),
       file("cpu.stat",
            "usage_usec " + std::to_string(files.cpuMicros) + "\nuser_usec 0\nsystem_usec 0\n"),
       file("pids.current", std::to_string(files.pids.size()) + "\n"),
       file("cgroup.procs", procsText(files.pids)),
       file("cgroup.events",
            std::string("populated ") + (files.pids.empty() ? "0" : "1") + "\nfrozen 0\n"),
       file("cgroup.kill", "")});
}

// The same pod's directory in a cgroup v1 memory hierarchy.
inline TreeEntry podV1Memory(const std::string& uid, const PodFiles& files) {
  return dir("pod" + uid,
             {file("memory.usage_in_bytes", std::to_string(files.usage) + "\n"),
              file("memory.stat",
                   "cache " + std::to_string(files.inactiveFile) + "\nrss " +
                       std::to_string(files.usage - files.inactiveFile) + "\ntotal_cache " +
                       std::to_string(files.inactiveFile) + "\ntotal_rss " +
                       std::to_string(files.usage - files.inactiveFile) + "\ntotal_inactive_file " +
                       std::to_string(files.inactiveFile) + "\n"),
              file("memory.limit_in_bytes", "9223372036854771712\n"),
              file("cgroup.procs", procsText(files.pids)), file("tasks", procsText(files.pids))});
}

// A tree in its own temporary directory.
class CgroupTree {
 public:
  explicit CgroupTree(const std::vector<TreeEntry>& entries,
                      const std::string& prefix = "nodewarden-cgroup-tree")
      : temp_(prefix) {
    for (const TreeEntry& entry : entries) materialize(entry, temp_.path);
  }

  const std::filesystem::path& root() const { return temp_.path; }
  std::filesystem::path path(const std::string& relative) const { return temp_.path / relative; }

  // Adds `entry` below the directory `parent` (relative; "" for the root).
  void add(const std::string& parent, const TreeEntry& entry) const {
    materialize(entry, parent.empty() ? temp_.path : temp_.path / parent);
  }
  // Replaces a file's content.
  void write(const std::string& relative, const std::string& content) const {
    temp_.write(relative, content);
  }
  std::string read(const std::string& relative) const {
    std::ifstream in(temp_.path / relative, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), {});
  }
  // Removes a file or a directory with everything below it.
  void remove(const std::string& relative) const {
    std::error_code ignored;
    std::filesystem::remove_all(temp_.path / relative, ignored);
  }

 private:
  TempDir temp_;
};

}  // namespace nodewarden::testing
