#include "cgroups/readers.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/sysinfo.h>
#include <algorithm>
#include <cerrno>

namespace nodewarden::cgroups {
namespace {

using File = CgroupDir::File;

template <typename T>
Result<T> withPath(Result<T> result, const CgroupDir& dir, const char* name) {
  if (result) return result;
  return Error{std::string(name) + " of " + dir.path() + ": " + result.error().message,
               result.error().sysErrno};
}

}  // namespace

Result<std::uint64_t> readMemoryUsage(const CgroupDir& dir, std::string& buffer) {
  auto text = dir.read(File::MemoryUsage, buffer);
  if (!text) return text.error();
  return withPath(parseUint(*text), dir, CgroupDir::fileName(File::MemoryUsage, dir.version()));
}

Result<std::optional<std::uint64_t>> readSwapUsage(const CgroupDir& dir, std::string& buffer) {
  const bool v2 = dir.version() == Version::V2;
  const char* name = v2 ? "memory.swap.current" : "memory.memsw.usage_in_bytes";
  auto text = dir.readOnce(name);
  if (!text) {
    if (text.error().sysErrno == ENOENT) return std::optional<std::uint64_t>();
    return text.error();
  }
  auto value = withPath(parseUint(*text), dir, name);
  if (!value) return value.error();
  if (v2) return std::optional<std::uint64_t>(*value);
  auto usage = readMemoryUsage(dir, buffer);
  if (!usage) return usage.error();
  return std::optional<std::uint64_t>(*value - std::min(*value, *usage));
}

Result<MemoryReading> readWorkingSet(const CgroupDir& dir, std::string& buffer) {
  MemoryReading reading;
  auto usage = readMemoryUsage(dir, buffer);
  if (!usage) return usage.error();
  reading.usage = *usage;
  auto statText = dir.read(File::MemoryStat, buffer);
  if (!statText) return statText.error();
  auto stat = withPath(parseMemoryStat(*statText, dir.version()), dir, "memory.stat");
  if (!stat) return stat.error();
  reading.inactiveFile = stat->inactiveFile;
  reading.workingSet = workingSet(reading.usage, reading.inactiveFile);
  return reading;
}

Result<MemoryReading> readMemory(const CgroupDir& dir, std::string& buffer) {
  auto reading = readWorkingSet(dir, buffer);
  if (!reading) return reading;
  auto limitText = dir.read(File::MemoryLimit, buffer);
  if (!limitText) {
    // The v2 root has no memory.max; anything else missing is an error.
    if (limitText.error().sysErrno != ENOENT) return limitText.error();
  } else {
    auto limit =
        withPath(parseMax(*limitText), dir, CgroupDir::fileName(File::MemoryLimit, dir.version()));
    if (!limit) return limit.error();
    reading.value().limit = *limit;
  }
  return reading;
}

Result<std::vector<ContainerMemory>> readContainerWorkingSets(
    const CgroupDir& pod, const std::vector<std::string_view>& runtimeIds, std::string& buffer) {
  auto children = listSubdirectories(pod.fd());
  if (!children) return children.error().withContext(pod.path());
  std::vector<ContainerMemory> found;
  for (const std::string& child : *children) {
    std::optional<std::string> id = containerIdFromCgroupName(child);
    if (!id || std::find(runtimeIds.begin(), runtimeIds.end(), *id) == runtimeIds.end()) continue;
    auto dir = CgroupDir::open(pod.path() + "/" + child, pod.version());
    if (!dir) continue;
    auto reading = readWorkingSet(*dir, buffer);
    if (!reading) continue;
    found.push_back({std::move(*id), reading->workingSet});
  }
  return found;
}

Result<std::uint64_t> readCpuNanos(const CgroupDir& dir, std::string& buffer) {
  auto text = dir.read(File::CpuUsage, buffer);
  if (!text) return text.error();
  if (dir.version() == Version::V1) return withPath(parseUint(*text), dir, "cpuacct.usage");
  return withPath(parseCpuStatUsageNanos(*text), dir, "cpu.stat");
}

Result<std::vector<pid_t>> readProcsRecursive(const CgroupDir& dir) {
  std::vector<pid_t> pids;
  // Depth-first over directory fds; kubelet pod trees are 2–3 levels deep, 16 is plenty.
  struct Frame {
    UniqueFd fd;
    int depth;
  };
  std::vector<Frame> stack;
  auto self = openDirAt(dir.fd(), ".");
  if (!self) return self.error().withContext(dir.path());
  stack.push_back({std::move(self).value(), 0});
  while (!stack.empty()) {
    Frame frame = std::move(stack.back());
    stack.pop_back();
    auto text = readFileAt(frame.fd.get(), "cgroup.procs");
    if (!text) {
      if (frame.depth > 0 && isGone(text.error())) continue;
      return text.error().withContext(dir.path());
    }
    auto parsed = parseProcs(*text);
    if (!parsed) return parsed.error().withContext(dir.path());
    pids.insert(pids.end(), parsed->begin(), parsed->end());
    if (frame.depth >= 16) continue;
    auto children = listSubdirectories(frame.fd.get());
    if (!children) {
      if (isGone(children.error())) continue;
      return children.error().withContext(dir.path());
    }
    for (const std::string& child : *children) {
      auto fd = openDirAt(frame.fd.get(), child);
      if (fd) {
        stack.push_back({std::move(fd).value(), frame.depth + 1});
      } else if (!isGone(fd.error())) {
        // A child we cannot open would make the count low without saying so.
        return fd.error().withContext(dir.path());
      }
    }
  }
  return pids;
}

Result<bool> hasProcesses(const PodCgroup& pod) {
  if (pod.memory.version() == Version::V2) {
    std::string buffer;
    auto events = pod.memory.read(File::CgroupEvents, buffer);
    if (!events) {
      if (isGone(events.error())) return false;
      return events.error();
    }
    auto populated = findFlatKey(*events, "populated");
    if (!populated) return populated.error().withContext("cgroup.events of " + pod.memory.path());
    if (*populated) return **populated != 0;
  }
  auto pids = readProcsRecursive(pod.memory);
  if (!pids) {
    if (isGone(pids.error())) return false;
    return pids.error();
  }
  return !pids->empty();
}

Result<std::uint64_t> readProcessCount(const PodCgroup& pod, std::string& buffer) {
  if (pod.pids) {
    auto text = pod.pids->read(File::PidsCurrent, buffer);
    if (text) return withPath(parseUint(*text), *pod.pids, "pids.current");
    if (text.error().sysErrno != ENOENT) return text.error();
  }
  auto pids = readProcsRecursive(pod.memory);
  if (!pids) return pids.error();
  return static_cast<std::uint64_t>(pids->size());
}

Result<Pressure> readPressure(const CgroupDir& dir, const std::string& resource) {
  const std::string name = resource + ".pressure";
  auto text = dir.readOnce(name);
  if (!text) return text.error();
  return withPath(parsePressure(*text), dir, name.c_str());
}

Result<Pressure> readSystemPressure(const std::string& procRoot, const std::string& resource) {
  const std::string path = procRoot + "/pressure/" + resource;
  auto text = readFile(path);
  if (!text) return text.error().withContext(procRoot + "/pressure");
  auto parsed = parsePressure(*text);
  if (!parsed) return parsed.error().withContext(path);
  return parsed;
}

Result<MemoryEvents> readMemoryEvents(const CgroupDir& dir, std::string& buffer) {
  auto text = dir.read(File::MemoryEvents, buffer);
  if (!text) return text.error();
  return withPath(parseMemoryEvents(*text), dir, "memory.events");
}

Result<OomControl> readOomControl(const CgroupDir& dir, std::string& buffer) {
  auto text = dir.read(File::OomControl, buffer);
  if (!text) return text.error();
  return withPath(parseOomControl(*text), dir, "memory.oom_control");
}

Result<std::uint64_t> readOomKills(const CgroupDir& dir, std::string& buffer) {
  if (dir.version() == Version::V2) {
    auto events = readMemoryEvents(dir, buffer);
    if (!events) return events.error();
    return events->oomKill;
  }
  auto control = readOomControl(dir, buffer);
  if (!control) return control.error();
  if (!control->oomKill) {
    return Error{"memory.oom_control of " + dir.path() + ": no oom_kill count (kernel < 4.13)"};
  }
  return *control->oomKill;
}

Result<MemInfo> readMemInfo(const std::string& procRoot) {
  const std::string path = procRoot + "/meminfo";
  auto text = readFile(path);
  if (!text) return text.error();
  auto parsed = parseMemInfo(*text);
  if (!parsed) return parsed.error().withContext(path);
  return parsed;
}

Result<std::uint64_t> readPidMax(const std::string& procRoot) {
  const std::string path = procRoot + "/sys/kernel/pid_max";
  auto text = readFile(path);
  if (!text) return text.error();
  auto parsed = parseUint(*text);
  if (!parsed) return parsed.error().withContext(path);
  return parsed;
}

Result<std::uint64_t> readRunningProcesses() {
  struct sysinfo info {};
  if (::sysinfo(&info) != 0) return errnoError("sysinfo", errno);
  return static_cast<std::uint64_t>(info.procs);
}

Result<FsStats> readFilesystem(const std::string& path) {
  struct statvfs st {};
  if (::statvfs(path.c_str(), &st) != 0) return errnoError("statvfs " + path, errno);
  FsStats fs;
  const std::uint64_t unit = st.f_frsize != 0 ? st.f_frsize : st.f_bsize;
  fs.capacityBytes = static_cast<std::uint64_t>(st.f_blocks) * unit;
  fs.availableBytes = static_cast<std::uint64_t>(st.f_bavail) * unit;
  fs.inodes = st.f_files;
  fs.inodesFree = st.f_favail;
  return fs;
}

namespace {

// A read failing with ENOENT/ENODEV means the pod is gone only if its directory is: a
// missing control file in a live cgroup (e.g. v2 memory not enabled in the parent's
// cgroup.subtree_control) is an error to report, not a vanished pod.
bool cgroupGone(const CgroupDir& dir) {
  struct stat st {};
  return ::stat(dir.path().c_str(), &st) != 0 || st.st_ino != dir.inode();
}

}  // namespace

NodeReading readNodeFigures(const PodCgroups& pods, const ScanOptions& options) {
  NodeReading reading;
  std::string buffer;
  NodeStats& node = reading.stats;
  auto addError = [&](const Error& error) { reading.errors.push_back(error); };

  // Node memory, as the kubelet computes it: capacity − (usage − inactive_file).
  auto meminfo = readMemInfo(options.procRoot);
  if (!meminfo) {
    addError(meminfo.error());
  } else {
    std::uint64_t usage = meminfo->memTotal - std::min(meminfo->memTotal, meminfo->memFree);
    std::uint64_t inactive = meminfo->inactiveFile;
    const Hierarchy& h = pods.hierarchy();
    if (h.memoryVersion == Version::V1) {
      // The v1 root memory cgroup is what cAdvisor reads for the node on v1.
      if (const CgroupDir& root = pods.rootMemory(); root.valid()) {
        if (auto read = readWorkingSet(root, buffer)) {
          usage = read->usage;
          inactive = read->inactiveFile;
          reading.root = *read;
        }
      }
    } else if (const CgroupDir& root = pods.rootMemory(); root.valid()) {
      // The v2 root has no memory.current: cAdvisor (through runc's cgroups library) reports
      // the root's usage as memory.stat anon + file, "the same value as usage_in_bytes in
      // v1", and its working set as that − inactive_file. /proc/meminfo stays the fallback.
      if (auto statText = root.read(CgroupDir::File::MemoryStat, buffer)) {
        if (auto stat = parseMemoryStat(*statText, Version::V2); stat && stat->anon && stat->file) {
          usage = *stat->anon + *stat->file;
          inactive = stat->inactiveFile;
        }
      }
    }
    const std::uint64_t ws = workingSet(usage, inactive);
    node.memoryWorkingSetBytes = ws;
    node.memoryAvailableBytes = meminfo->memTotal - std::min(meminfo->memTotal, ws);
  }
  if (pods.kubepodsMemory().valid()) {
    auto kubepods = readMemory(pods.kubepodsMemory(), buffer);
    if (!kubepods) {
      addError(kubepods.error());
    } else {
      reading.kubepods = *kubepods;
      node.podsMemoryWorkingSetBytes = kubepods->workingSet;
      if (kubepods->limit) {
        node.podsMemoryAvailableBytes =
            *kubepods->limit - std::min(*kubepods->limit, kubepods->workingSet);
      }
    }
  }
  if (auto pidMax = readPidMax(options.procRoot)) {
    node.maxPid = *pidMax;
    if (auto procs = readRunningProcesses()) node.curProc = *procs;
  } else {
    addError(pidMax.error());
  }
  auto fsFigures = [&](const std::string& path, auto assign) {
    if (path.empty()) return;
    auto fs = readFilesystem(path);
    if (fs) {
      assign(*fs);
    } else if (fs.error().sysErrno != ENOENT) {
      addError(fs.error());
    }
  };
  fsFigures(options.nodeFsPath, [&](const FsStats& fs) { node.nodeFs = fs; });
  fsFigures(options.imageFsPath, [&](const FsStats& fs) { node.imageFs = fs; });
  return reading;
}

PodReading readPodFigures(PodCgroup& pod, const ScanOptions& options,
                          std::chrono::steady_clock::time_point now, std::string& buffer) {
  PodReading reading;
  reading.stats.uid = pod.uid;
  PodStats& stats = reading.stats;
  auto note = [&](const Error& error) {
    // ENODEV: the open file's cgroup is being removed (kernfs deactivated it; the path may
    // still resolve for a moment). ENOENT: gone only if the directory is.
    if (error.sysErrno == ENODEV || (isGone(error) && cgroupGone(pod.memory))) {
      reading.gone = true;
    } else {
      reading.errors.push_back(error);
    }
  };
  if (auto memory = readWorkingSet(pod.memory, buffer)) {
    stats.memoryWorkingSetBytes = memory->workingSet;
    stats.memoryUsageBytes = memory->usage;
    reading.memoryUsage = memory->usage;
  } else {
    note(memory.error());
  }
  if (!reading.gone && options.podSwap) {
    if (auto swap = readSwapUsage(pod.memory, buffer)) {
      stats.swapUsageBytes = *swap;
    } else {
      note(swap.error());
    }
  }
  if (!reading.gone && pod.cpu) {
    if (auto cpu = readCpuNanos(*pod.cpu, buffer)) {
      if (pod.lastCpuNanos && now > pod.lastCpuAt && *cpu >= *pod.lastCpuNanos) {
        const double wall = std::chrono::duration<double, std::nano>(now - pod.lastCpuAt).count();
        const double used = static_cast<double>(*cpu - *pod.lastCpuNanos);
        stats.cpuUsageNanoCores = static_cast<std::uint64_t>(used / wall * 1e9 + 0.5);
      }
      pod.lastCpuNanos = *cpu;
      pod.lastCpuAt = now;
    } else {
      note(cpu.error());
    }
  }
  if (!reading.gone) {
    if (auto count = readProcessCount(pod, buffer)) {
      stats.processCount = *count;
    } else {
      note(count.error());
    }
  }
  return reading;
}

ScanResult scanNode(PodCgroups& pods, const ScanOptions& options,
                    std::chrono::steady_clock::time_point now) {
  ScanResult result;
  const auto started = std::chrono::steady_clock::now();
  result.node = readNodeFigures(pods, options);
  result.summary.node = result.node.stats;
  result.errors = std::move(result.node.errors);
  result.node.errors.clear();
  if (options.podFigures) {
    std::string buffer;
    result.summary.pods.reserve(pods.size());
    for (auto& [uid, pod] : pods.pods()) {
      PodReading reading = readPodFigures(*pod, options, now, buffer);
      if (reading.gone) {
        result.vanished.push_back(uid);
        continue;
      }
      for (Error& error : reading.errors) result.errors.push_back(std::move(error));
      result.summary.pods.push_back(std::move(reading.stats));
    }
  }
  result.duration = std::chrono::steady_clock::now() - started;
  return result;
}

}  // namespace nodewarden::cgroups
