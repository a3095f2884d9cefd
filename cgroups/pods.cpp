#include "cgroups/pods.h"

#include <fcntl.h>
#include <sys/inotify.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>
#include <algorithm>
#include <cerrno>
#include <cstring>
#include <limits>
#include <set>

namespace nodewarden::cgroups {
namespace {

bool isHexDigit(char c) {
  return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

// Pod UIDs are RFC 4122 UUIDs (8-4-4-4-12 hex) or, for static pods, 32 hex digits (the
// manifest's hash). Anything else below kubepods ("podcast") is not a pod cgroup.
bool validUid(std::string_view uid) {
  if (uid.size() == 32) return std::all_of(uid.begin(), uid.end(), isHexDigit);
  if (uid.size() != 36) return false;
  for (std::size_t i = 0; i < uid.size(); ++i) {
    const bool dash = i == 8 || i == 13 || i == 18 || i == 23;
    if (dash ? uid[i] != '-' : !isHexDigit(uid[i])) return false;
  }
  return true;
}

bool isHex(std::string_view text) {
  return std::all_of(text.begin(), text.end(),
                     [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
}

std::string_view lastComponent(std::string_view path) {
  while (path.ends_with('/')) path.remove_suffix(1);
  const std::size_t slash = path.rfind('/');
  return slash == std::string_view::npos ? path : path.substr(slash + 1);
}

std::string replaceAll(std::string_view text, char from, char to) {
  std::string out(text);
  std::replace(out.begin(), out.end(), from, to);
  return out;
}

}  // namespace

std::optional<PodCgroupName> parsePodCgroupName(std::string_view name, Driver driver,
                                                std::string_view qosFromParent) {
  if (driver == Driver::Cgroupfs) {
    if (!name.starts_with("pod")) return std::nullopt;
    const std::string_view uid = name.substr(3);
    if (!validUid(uid)) return std::nullopt;
    return PodCgroupName{std::string(uid), std::string(qosFromParent)};
  }
  // systemd: <prefix>[-<qos>]-pod<uid_>.slice; the escaped UID holds no '-'.
  if (!name.ends_with(".slice")) return std::nullopt;
  std::string_view unit = name.substr(0, name.size() - 6);
  const std::size_t dash = unit.rfind('-');
  if (dash == std::string_view::npos) return std::nullopt;
  const std::string_view podPart = unit.substr(dash + 1);
  if (!podPart.starts_with("pod")) return std::nullopt;
  const std::string uid = replaceAll(podPart.substr(3), '_', '-');
  if (!validUid(uid)) return std::nullopt;
  std::string qos(qosFromParent);
  const std::string_view before = unit.substr(0, dash);
  if (before.ends_with("-burstable")) {
    qos = "burstable";
  } else if (before.ends_with("-besteffort")) {
    qos = "besteffort";
  }
  return PodCgroupName{uid, qos};
}

std::optional<std::string> parseQosDirName(std::string_view name, Driver driver) {
  if (driver == Driver::Cgroupfs) {
    if (name == "burstable" || name == "besteffort") return std::string(name);
    return std::nullopt;
  }
  if (name.ends_with("-burstable.slice")) return std::string("burstable");
  if (name.ends_with("-besteffort.slice")) return std::string("besteffort");
  return std::nullopt;
}

std::string podCgroupPath(std::string_view kubepods, Driver driver, std::string_view qos,
                          std::string_view uid) {
  std::string path(kubepods);
  while (path.ends_with('/')) path.pop_back();
  const bool guaranteed = qos == "guaranteed" || qos.empty();
  if (driver == Driver::Cgroupfs) {
    if (!guaranteed) path += "/" + std::string(qos);
    return path + "/pod" + std::string(uid);
  }
  std::string prefix(lastComponent(kubepods));
  if (prefix.ends_with(".slice")) prefix.resize(prefix.size() - 6);
  const std::string escaped = replaceAll(uid, '-', '_');
  if (guaranteed) return path + "/" + prefix + "-pod" + escaped + ".slice";
  const std::string tier = prefix + "-" + std::string(qos);
  return path + "/" + tier + ".slice/" + tier + "-pod" + escaped + ".slice";
}

std::optional<std::string> containerIdFromCgroupName(std::string_view name) {
  if (name.ends_with(".scope")) name.remove_suffix(6);
  if (name.starts_with("crio-conmon-")) return std::nullopt;
  for (std::string_view prefix : {"cri-containerd-", "crio-", "docker-", "containerd-"}) {
    if (name.starts_with(prefix)) {
      name.remove_prefix(prefix.size());
      break;
    }
  }
  if (name.size() != 64 || !isHex(name)) return std::nullopt;
  return std::string(name);
}

Driver driverForKubepods(std::string_view kubepods) {
  return lastComponent(kubepods).ends_with(".slice") ? Driver::Systemd : Driver::Cgroupfs;
}

const char* CgroupDir::fileName(File file, Version version) {
  const bool v1 = version == Version::V1;
  switch (file) {
    case File::MemoryUsage:
      return v1 ? "memory.usage_in_bytes" : "memory.current";
    case File::MemoryStat:
      return "memory.stat";
    case File::MemoryLimit:
      return v1 ? "memory.limit_in_bytes" : "memory.max";
    case File::CpuUsage:
      return v1 ? "cpuacct.usage" : "cpu.stat";
    case File::PidsCurrent:
      return "pids.current";
    case File::MemoryPressure:
      return "memory.pressure";
    case File::MemoryEvents:
      return "memory.events";
    case File::OomControl:
      return "memory.oom_control";
    case File::CgroupEvents:
      return "cgroup.events";
    case File::Count:
      break;
  }
  return "";
}

Result<CgroupDir> CgroupDir::open(const std::string& path, Version version) {
  return open(std::make_shared<const std::string>(path), nullptr, version);
}

Result<CgroupDir> CgroupDir::open(std::shared_ptr<const std::string> root,
                                  std::shared_ptr<const std::string> below, Version version) {
  const std::string path = below ? *root + "/" + *below : *root;
  auto fd = openDirAt(AT_FDCWD, path);
  if (!fd) return fd.error();
  struct stat st {};
  if (::fstat(fd->get(), &st) != 0) return errnoError(path, errno);
  CgroupDir dir;
  dir.dir_ = std::move(fd).value();
  dir.version_ = version;
  dir.root_ = std::move(root);
  dir.below_ = std::move(below);
  dir.inode_ = st.st_ino;
  return dir;
}

Result<std::string_view> CgroupDir::read(File file, std::string& buffer) const {
  const char* name = fileName(file, version_);
  UniqueFd& cached = files_[static_cast<int>(file)];
  if (!cached.valid()) {
    auto opened = openFileAt(dir_.get(), name);
    if (!opened)
      return Error{std::string(name) + " of " + path() + ": " + opened.error().message,
                   opened.error().sysErrno};
    cached = std::move(opened).value();
  }
  // memory.stat is the only large one (v2 prints ~40 lines); the rest fit in 256 bytes.
  const std::size_t capacity = file == File::MemoryStat ? 16384 : 512;
  if (buffer.size() < capacity) buffer.resize(capacity);
  auto n = preadWhole(cached.get(), buffer.data(), buffer.size());
  if (!n) {
    return Error{std::string(name) + " of " + path() + ": " + n.error().message,
                 n.error().sysErrno};
  }
  return std::string_view(buffer.data(), *n);
}

Result<std::string> CgroupDir::readOnce(const std::string& name) const {
  auto text = readFileAt(dir_.get(), name);
  if (!text) return text.error().withContext(path());
  return text;
}

void CgroupDir::closeFiles() const {
  for (UniqueFd& fd : files_) fd.reset();
}

PodCgroups::PodCgroups(Hierarchy hierarchy, std::string kubepods)
    : hierarchy_(std::move(hierarchy)),
      memoryRoot_(std::make_shared<const std::string>(hierarchy_.memory)),
      cpuacctRoot_(std::make_shared<const std::string>(hierarchy_.cpuacct)),
      pidsRoot_(std::make_shared<const std::string>(hierarchy_.pids)),
      unifiedRoot_(std::make_shared<const std::string>(hierarchy_.unified)),
      freezerRoot_(std::make_shared<const std::string>(hierarchy_.freezer)),
      kubepods_(std::move(kubepods)),
      driver_(driverForKubepods(kubepods_)) {}

Result<std::string> PodCgroups::findKubepods(const Hierarchy& hierarchy,
                                             const std::optional<std::string>& override) {
  struct stat st {};
  auto exists = [&](const std::string& relative) {
    return ::stat((hierarchy.memory + "/" + relative).c_str(), &st) == 0 && S_ISDIR(st.st_mode);
  };
  if (override) {
    std::string relative = *override;
    while (relative.starts_with('/')) relative.erase(0, 1);
    while (relative.ends_with('/')) relative.pop_back();
    if (relative.empty() || relative.find("..") != std::string::npos) {
      return Error{"--kubepods-cgroup: expected a cgroup path below the hierarchy root, got \"" +
                   *override + "\""};
    }
    if (!exists(relative)) {
      return Error{"--kubepods-cgroup: " + hierarchy.memory + "/" + relative + " does not exist"};
    }
    return relative;
  }
  for (const char* candidate : {"kubepods.slice", "kubepods"}) {
    if (exists(candidate)) return std::string(candidate);
  }
  return Error{"no kubepods cgroup: neither " + hierarchy.memory + "/kubepods.slice nor " +
               hierarchy.memory + "/kubepods exists (is the kubelet running with " +
               "cgroupsPerQOS? set --kubepods-cgroup)"};
}

const CgroupDir& PodCgroups::rootMemory() const {
  if (!rootMemory_.valid()) {
    if (auto dir = CgroupDir::open(hierarchy_.memory, hierarchy_.memoryVersion)) {
      rootMemory_ = std::move(dir).value();
    }
  }
  return rootMemory_;
}

PodCgroup* PodCgroups::find(std::string_view uid) {
  auto it = pods_.find(uid);
  return it == pods_.end() ? nullptr : it->second.get();
}

const PodCgroup* PodCgroups::find(std::string_view uid) const {
  auto it = pods_.find(uid);
  return it == pods_.end() ? nullptr : it->second.get();
}

Result<std::unique_ptr<PodCgroup>> PodCgroups::openPod(const PodCgroupName& name,
                                                       const std::string& relativePath) const {
  auto pod = std::make_unique<PodCgroup>();
  pod->uid = name.uid;
  pod->qos = name.qos;
  pod->relativePath = relativePath;
  auto memory = CgroupDir::open(memoryRoot_, std::make_shared<const std::string>(relativePath),
                                hierarchy_.memoryVersion);
  if (!memory) return memory.error();
  pod->memory = std::move(memory).value();
  // The other hierarchies are optional: a pod missing there is read without those figures.
  complete(*pod);
  return pod;
}

namespace {

// The optional hierarchies, a bit each.
constexpr unsigned kOptionalCpu = 1;
constexpr unsigned kOptionalPids = 2;
constexpr unsigned kOptionalUnified = 4;
constexpr unsigned kOptionalFreezer = 8;

}  // namespace

unsigned PodCgroups::optionalHierarchiesWithKubepods() const {
  unsigned with = 0;
  auto has = [&](const std::string& mount, unsigned bit) {
    struct stat st {};
    if (!mount.empty() && ::stat((mount + "/" + kubepods_).c_str(), &st) == 0 &&
        S_ISDIR(st.st_mode)) {
      with |= bit;
    }
  };
  has(hierarchy_.cpuacct, kOptionalCpu);
  has(hierarchy_.pids, kOptionalPids);
  has(hierarchy_.unified, kOptionalUnified);
  has(hierarchy_.freezer, kOptionalFreezer);
  return with;
}

bool PodCgroups::lacksHierarchy(const PodCgroup& pod) const {
  auto lacks = [&](const std::string& mount, unsigned bit, bool opened) {
    return !mount.empty() && (withKubepods_ & bit) != 0 && !opened;
  };
  return lacks(hierarchy_.cpuacct, kOptionalCpu, pod.cpu.has_value()) ||
         lacks(hierarchy_.pids, kOptionalPids, pod.pids.has_value()) ||
         lacks(hierarchy_.unified, kOptionalUnified, pod.unified.has_value()) ||
         lacks(hierarchy_.freezer, kOptionalFreezer, pod.freezer.has_value());
}

bool PodCgroups::readChanges() {
  if (!changes_.valid()) return false;
  bool any = false;
  alignas(inotify_event) char buffer[4096];
  // Bounded: past 256 KiB of events, everything is read again anyway.
  for (int round = 0; round < 64; ++round) {
    const ssize_t n = ::read(changes_.get(), buffer, sizeof buffer);
    if (n <= 0) break;
    any = true;
    if (pending_.size() + std::size_t(n) > (256u << 10)) {
      overflowed_ = true;
      pending_.clear();
      continue;
    }
    pending_.insert(pending_.end(), buffer, buffer + n);
  }
  return any;
}

void PodCgroups::watchDirectory(const std::string& path, const std::string& tier) {
  if (!changes_.valid()) return;
  constexpr std::uint32_t kMask = IN_CREATE | IN_DELETE | IN_MOVED_FROM | IN_MOVED_TO |
                                  IN_DELETE_SELF | IN_MOVE_SELF | IN_ONLYDIR;
  // Adding a watch to a directory already watched only returns its descriptor again.
  const int wd = ::inotify_add_watch(changes_.get(), path.c_str(), kMask);
  if (wd < 0) {
    changes_.reset();
    watched_.clear();
    return;
  }
  watched_[wd] = tier;
}

bool PodCgroups::mayHaveChanged() {
  if (!changes_.valid() || overflowed_ || !pending_.empty() || !incomplete_.empty()) return true;
  return readChanges() || overflowed_ || !changes_.valid();
}

// A hierarchy without the kubepods cgroup (the runtime does not use it) has no pod's either:
// not looked in, so an idle node does not try two failing opens a pod every cycle.
void PodCgroups::complete(PodCgroup& pod) const {
  std::shared_ptr<const std::string> below = pod.memory.below();
  if (!below) below = std::make_shared<const std::string>(pod.relativePath);
  auto optionalDir = [&](const std::shared_ptr<const std::string>& mount, unsigned bit,
                         Version version, std::optional<CgroupDir>& out) {
    if (mount->empty() || out || (withKubepods_ & bit) == 0) return;
    if (auto dir = CgroupDir::open(mount, below, version)) out = std::move(dir).value();
  };
  optionalDir(cpuacctRoot_, kOptionalCpu, hierarchy_.cpuVersion, pod.cpu);
  optionalDir(pidsRoot_, kOptionalPids, hierarchy_.pidsVersion, pod.pids);
  optionalDir(unifiedRoot_, kOptionalUnified, Version::V2, pod.unified);
  optionalDir(freezerRoot_, kOptionalFreezer, Version::V1, pod.freezer);
}

namespace {

// update()s that look again for a new pod's missing hierarchies.
constexpr int kCompleteTries = 20;

}  // namespace

void PodCgroups::openChild(const std::string& parent, const std::string& child,
                           const std::string& qos, RefreshResult& result) {
  auto name = parsePodCgroupName(child, driver_, qos);
  if (!name) return;
  const std::string relative = parent + "/" + child;
  if (PodCgroup* existing = find(name->uid)) {
    struct stat st {};
    if (existing->relativePath == relative &&
        ::stat((hierarchy_.memory + "/" + relative).c_str(), &st) == 0 &&
        st.st_ino == existing->memory.inode()) {
      return;  // already indexed (seen by a refresh that raced with the event)
    }
    if (existing->relativePath != relative) {
      result.errors.push_back(
          Error{"pod " + name->uid + " has two cgroups; using the first, not " + relative});
      return;
    }
    result.removed.push_back(name->uid);  // recreated under the same name: start afresh
    pods_.erase(name->uid);
  }
  auto pod = openPod(*name, relative);
  if (!pod) {
    if (!isGone(pod.error())) result.errors.push_back(pod.error());
    return;
  }
  if (lacksHierarchy(**pod)) incomplete_[name->uid] = kCompleteTries;
  result.added.push_back(name->uid);
  pods_.emplace(name->uid, std::move(pod).value());
}

Result<RefreshResult> PodCgroups::update() {
  if (!changes_.valid() || !kubepodsMemory_.valid()) return refresh();
  (void)readChanges();
  if (overflowed_) return refresh();
  RefreshResult result;
  std::vector<char> events = std::move(pending_);
  pending_.clear();
  for (std::size_t at = 0; at + sizeof(inotify_event) <= events.size();) {
    inotify_event event;
    std::memcpy(&event, events.data() + at, sizeof event);
    const char* nameStart = events.data() + at + sizeof(inotify_event);
    at += sizeof(inotify_event) + event.len;
    if (at > events.size()) break;
    const std::string name(nameStart, strnlen(nameStart, event.len));
    auto watched = watched_.find(event.wd);
    // A lost event, a watch gone (its directory removed or moved), or one we do not know:
    // only listing everything again is sure.
    if ((event.mask & (IN_Q_OVERFLOW | IN_IGNORED | IN_DELETE_SELF | IN_MOVE_SELF)) != 0 ||
        watched == watched_.end()) {
      return refresh();
    }
    if ((event.mask & IN_ISDIR) == 0 || name.empty()) continue;
    const bool made = (event.mask & (IN_CREATE | IN_MOVED_TO)) != 0;
    const std::string& tier = watched->second;
    if (tier.empty() && parseQosDirName(name, driver_)) return refresh();  // a tier came or went
    const std::string parent = tier.empty() ? kubepods_ : kubepods_ + "/" + tier;
    const std::string qos =
        tier.empty() ? "guaranteed" : parseQosDirName(tier, driver_).value_or("");
    if (made) {
      openChild(parent, name, qos, result);
      continue;
    }
    auto gone = parsePodCgroupName(name, driver_, qos);
    if (!gone) continue;
    if (PodCgroup* pod = find(gone->uid);
        pod != nullptr && pod->relativePath == parent + "/" + name) {
      pods_.erase(gone->uid);
      result.removed.push_back(gone->uid);
    }
  }
  for (auto it = incomplete_.begin(); it != incomplete_.end();) {
    PodCgroup* pod = find(it->first);
    if (pod != nullptr) complete(*pod);
    // A pod still without one after a few cycles never will have it (a hierarchy the runtime
    // does not use): it is read without those figures, as before.
    if (pod == nullptr || !lacksHierarchy(*pod) || --it->second <= 0) {
      it = incomplete_.erase(it);
    } else {
      ++it;
    }
  }
  return result;
}

Result<RefreshResult> PodCgroups::refresh() {
  RefreshResult result;
  const std::string kubepodsPath = hierarchy_.memory + "/" + kubepods_;
  // Events from now on are for the next refresh; those queued before are this one's.
  (void)readChanges();
  pending_.clear();
  overflowed_ = false;
  struct stat st {};
  if (!kubepodsMemory_.valid() || ::stat(kubepodsPath.c_str(), &st) != 0 ||
      st.st_ino != kubepodsMemory_.inode()) {
    auto dir = CgroupDir::open(kubepodsPath, hierarchy_.memoryVersion);
    if (!dir) return dir.error().withContext("opening the kubepods cgroup");
    kubepodsMemory_ = std::move(dir).value();
    changes_.reset();  // a new kubepods directory: watched afresh below
    watched_.clear();
    kubepodsUnified_.reset();
    if (!hierarchy_.unified.empty()) {
      if (auto unified = CgroupDir::open(hierarchy_.unified + "/" + kubepods_, Version::V2)) {
        kubepodsUnified_ = std::move(unified).value();
      }
    }
  }
  withKubepods_ = optionalHierarchiesWithKubepods();
  if (!changes_.valid()) {
    changes_ = UniqueFd(::inotify_init1(IN_NONBLOCK | IN_CLOEXEC));
    watched_.clear();
    watchDirectory(kubepodsPath, "");
  }
  auto top = listSubdirectories(kubepodsMemory_.fd());
  if (!top) return top.error().withContext("listing " + kubepodsPath);

  std::set<std::string, std::less<>> seen;
  // Checks one candidate directory `child` found under the directory `parentFd`.
  auto visit = [&](int parentFd, const std::string& relativeParent, const std::string& child,
                   const PodCgroupName& name) {
    if (!seen.insert(name.uid).second) {
      result.errors.push_back(Error{"pod " + name.uid + " has two cgroups; using the first, not " +
                                    relativeParent + "/" + child});
      return;
    }
    const std::string relative = relativeParent + "/" + child;
    if (PodCgroup* existing = find(name.uid)) {
      struct stat childStat {};
      if (::fstatat(parentFd, child.c_str(), &childStat, 0) == 0 &&
          childStat.st_ino == existing->memory.inode() && existing->relativePath == relative) {
        return;  // unchanged
      }
      result.removed.push_back(name.uid);  // recreated under the same name: start afresh
      pods_.erase(name.uid);
    }
    auto pod = openPod(name, relative);
    if (!pod) {
      if (!isGone(pod.error())) result.errors.push_back(pod.error());
      seen.erase(name.uid);
      return;
    }
    if (lacksHierarchy(**pod)) incomplete_[name.uid] = kCompleteTries;
    result.added.push_back(name.uid);
    pods_.emplace(name.uid, std::move(pod).value());
  };

  for (const std::string& name : *top) {
    if (auto qos = parseQosDirName(name, driver_)) {
      watchDirectory(kubepodsPath + "/" + name, name);
      auto tierDir = openDirAt(kubepodsMemory_.fd(), name);
      if (!tierDir) {
        if (!isGone(tierDir.error()))
          result.errors.push_back(tierDir.error().withContext(kubepodsPath));
        continue;
      }
      auto children = listSubdirectories(tierDir->get());
      if (!children) {
        if (!isGone(children.error())) {
          result.errors.push_back(children.error().withContext(kubepodsPath + "/" + name));
        }
        continue;
      }
      for (const std::string& child : *children) {
        if (auto pod = parsePodCgroupName(child, driver_, *qos)) {
          visit(tierDir->get(), kubepods_ + "/" + name, child, *pod);
        }
      }
    } else if (auto pod = parsePodCgroupName(name, driver_, "guaranteed")) {
      visit(kubepodsMemory_.fd(), kubepods_, name, *pod);
    }
  }
  for (auto it = pods_.begin(); it != pods_.end();) {
    if (seen.contains(it->first)) {
      ++it;
    } else {
      result.removed.push_back(it->first);
      it = pods_.erase(it);
    }
  }
  return result;
}

Result<std::uint64_t> raiseOpenFileLimit(std::uint64_t wanted) {
  rlimit limit{};
  if (::getrlimit(RLIMIT_NOFILE, &limit) != 0) return errnoError("getrlimit(RLIMIT_NOFILE)", errno);
  if (limit.rlim_cur >= wanted) return static_cast<std::uint64_t>(limit.rlim_cur);
  rlim_t ceiling = wanted;
  if (auto text = readFile("/proc/sys/fs/nr_open")) {
    if (auto nrOpen = parseUint(*text)) ceiling = std::min<rlim_t>(ceiling, *nrOpen);
  }
  rlimit raised{ceiling, std::max(limit.rlim_max, ceiling)};
  if (::setrlimit(RLIMIT_NOFILE, &raised) != 0) {
    // Without CAP_SYS_RESOURCE only the soft limit can move, up to the hard one.
    raised = rlimit{std::min(ceiling, limit.rlim_max), limit.rlim_max};
    if (::setrlimit(RLIMIT_NOFILE, &raised) != 0) {
      return errnoError("setrlimit(RLIMIT_NOFILE)", errno);
    }
  }
  return static_cast<std::uint64_t>(raised.rlim_cur);
}

Result<std::uint64_t> reserveDescriptorTable(std::uint64_t slots) {
  rlimit limit{};
  if (::getrlimit(RLIMIT_NOFILE, &limit) != 0) return errnoError("getrlimit(RLIMIT_NOFILE)", errno);
  if (limit.rlim_cur != RLIM_INFINITY) slots = std::min<std::uint64_t>(slots, limit.rlim_cur);
  slots = std::min<std::uint64_t>(slots, std::uint64_t(std::numeric_limits<int>::max()));
  if (slots < 2) return slots;
  const int any = ::open("/", O_PATH | O_CLOEXEC);
  if (any < 0) return errnoError("reserving descriptors: open(/)", errno);
  // F_DUPFD places the copy at the lowest free descriptor at or above its argument: the
  // table grows to hold the last slot wanted, here rather than in a later open.
  const int last = ::fcntl(any, F_DUPFD_CLOEXEC, int(slots - 1));
  const int saved = errno;
  ::close(any);
  if (last < 0) return errnoError("reserving descriptors: fcntl(F_DUPFD)", saved);
  ::close(last);
  return slots;
}

}  // namespace nodewarden::cgroups
