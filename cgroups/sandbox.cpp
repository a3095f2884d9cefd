#include "cgroups/sandbox.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <algorithm>
#include <cerrno>
#include <csignal>
#include <thread>

#include "cgroups/fs.h"
#include "cgroups/readers.h"

namespace nodewarden::cgroups {
namespace {

// Kills every process in the subtree at `path` (absolute) and removes its directories
// deepest first, retrying while exiting processes keep a cgroup busy.
bool removeTree(const std::string& path, std::chrono::steady_clock::time_point deadline) {
  auto dir = CgroupDir::open(path, Version::V1);
  if (!dir) return isGone(dir.error());
  for (int round = 0; round < 1000; ++round) {
    auto pids = readProcsRecursive(*dir);
    if (!pids || pids->empty()) break;
    for (pid_t pid : *pids) {
      if (pid != ::getpid() && pid > 1) ::kill(pid, SIGKILL);
    }
    if (std::chrono::steady_clock::now() > deadline) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  auto children = listSubdirectories(dir->fd());
  bool ok = true;
  if (children) {
    for (const std::string& child : *children) ok = removeTree(path + "/" + child, deadline) && ok;
  }
  while (::rmdir(path.c_str()) != 0) {
    if (errno == ENOENT) return ok;
    if (errno != EBUSY || std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  return ok;
}

}  // namespace

Sandbox::Sandbox(Sandbox&& other) noexcept
    : hierarchy_(std::move(other.hierarchy_)),
      options_(std::move(other.options_)),
      kubepods_(std::move(other.kubepods_)),
      created_(std::move(other.created_)),
      children_(std::move(other.children_)),
      destroyed_(std::exchange(other.destroyed_, true)) {}

Sandbox::~Sandbox() {
  (void)destroy();
}

std::vector<std::string> Sandbox::mounts() const {
  std::vector<std::string> out;
  auto add = [&](const std::string& mount) {
    if (!mount.empty() && std::find(out.begin(), out.end(), mount) == out.end()) {
      out.push_back(mount);
    }
  };
  add(hierarchy_.memory);
  add(hierarchy_.cpuacct);
  add(hierarchy_.pids);
  if (options_.useFreezer) add(hierarchy_.freezer);
  if (options_.useUnified) add(hierarchy_.unified);
  return out;
}

Result<void> Sandbox::makeDir(const std::string& relative) {
  for (const std::string& mount : mounts()) {
    const std::string path = mount + "/" + relative;
    if (mount == hierarchy_.unified && hierarchy_.memoryVersion == Version::V2) {
      auto delegated = delegateControllers(path.substr(0, path.rfind('/')));
      if (!delegated) return delegated.error();
    }
    if (::mkdir(path.c_str(), 0755) != 0 && errno != EEXIST) {
      return errnoError("creating cgroup " + path, errno);
    }
  }
  created_.push_back(relative);
  return {};
}

// cgroup v2 gives a new cgroup only the controllers its parent names in
// cgroup.subtree_control, and that file starts empty: each level must hand memory, cpu,
// pids and io down before a child can have memory.max or memory.current. The root is the
// host's to configure (systemd enables them there); a parent that cannot delegate memory is
// an error naming it. Only the sandbox's own directories are written, and only while they
// hold no process (v2's "no internal processes" rule).
Result<void> Sandbox::delegateControllers(const std::string& parent) {
  if (parent == hierarchy_.unified) {
    auto offered = readFile(parent + "/cgroup.subtree_control");
    if (!offered) return offered.error();
    if (offered->find("memory") == std::string::npos) {
      return Error{"sandbox: the cgroup v2 root " + parent +
                   " does not delegate the memory controller (add +memory to its "
                   "cgroup.subtree_control)"};
    }
    return {};
  }
  auto available = readFile(parent + "/cgroup.controllers");
  if (!available) return available.error().withContext(parent);
  auto enabled = readFile(parent + "/cgroup.subtree_control");
  if (!enabled) return enabled.error().withContext(parent);
  auto has = [](std::string_view list, std::string_view name) {
    for (std::size_t at = 0; at < list.size();) {
      std::size_t end = list.find_first_of(" \n", at);
      if (end == std::string_view::npos) end = list.size();
      if (list.substr(at, end - at) == name) return true;
      at = end + 1;
    }
    return false;
  };
  std::string wanted;
  for (const char* controller : {"memory", "cpu", "pids", "io"}) {
    if (has(*available, controller) && !has(*enabled, controller)) {
      wanted += (wanted.empty() ? "+" : " +") + std::string(controller);
    }
  }
  if (wanted.empty()) return {};
  auto dir = openDirAt(AT_FDCWD, parent);
  if (!dir) return dir.error();
  auto written = writeFileAt(dir->get(), "cgroup.subtree_control", wanted);
  if (!written) return written.error().withContext(parent + ": enabling " + wanted);
  return {};
}

Result<Sandbox> Sandbox::create(const Hierarchy& hierarchy, SandboxOptions options) {
  if (options.name.empty() || options.name.find("..") != std::string::npos) {
    return Error{"sandbox: a name below the hierarchy root is required"};
  }
  Sandbox sandbox;
  sandbox.hierarchy_ = hierarchy;
  sandbox.options_ = std::move(options);
  sandbox.destroyed_ = false;
  // Refuse to adopt an existing directory: it is not ours to remove later.
  struct stat st {};
  const std::string topPath = hierarchy.memory + "/" + sandbox.options_.name;
  if (::stat(topPath.c_str(), &st) == 0) {
    sandbox.destroyed_ = true;
    return Error{"sandbox: " + topPath + " already exists"};
  }
  auto top = sandbox.makeDir(sandbox.options_.name);
  if (!top) return top.error();
  sandbox.kubepods_ = sandbox.options_.name + "/" +
                      (sandbox.options_.driver == Driver::Systemd ? "kubepods.slice" : "kubepods");
  auto kubepods = sandbox.makeDir(sandbox.kubepods_);
  if (!kubepods) return kubepods.error();
  if (sandbox.options_.memoryLimit) {
    const char* file =
        hierarchy.memoryVersion == Version::V1 ? "memory.limit_in_bytes" : "memory.max";
    auto limited = sandbox.writeMemoryFile(sandbox.kubepods_, file,
                                           std::to_string(*sandbox.options_.memoryLimit));
    if (!limited) return limited.error();
  }
  return sandbox;
}

Result<std::string> Sandbox::addPod(const std::string& uid, const std::string& qos) {
  const std::string relative = podCgroupPath(kubepods_, options_.driver, qos, uid);
  // The QoS tier directory, if any, sits between kubepods and the pod.
  const std::string parent = relative.substr(0, relative.rfind('/'));
  if (parent != kubepods_ &&
      std::find(created_.begin(), created_.end(), parent) == created_.end()) {
    auto tier = makeDir(parent);
    if (!tier) return tier.error();
  }
  auto made = makeDir(relative);
  if (!made) return made.error();
  return relative;
}

Result<std::string> Sandbox::addChild(const std::string& parentRelative, const std::string& name) {
  const std::string relative = parentRelative + "/" + name;
  auto made = makeDir(relative);
  if (!made) return made.error();
  return relative;
}

Result<void> Sandbox::movePid(const std::string& relative, pid_t pid) {
  const std::string text = std::to_string(pid);
  for (const std::string& mount : mounts()) {
    const std::string path = mount + "/" + relative;
    auto dir = openDirAt(AT_FDCWD, path);
    if (!dir) continue;  // not created in this hierarchy
    auto written = writeFileAt(dir->get(), "cgroup.procs", text);
    if (!written) return written.error().withContext(path);
  }
  return {};
}

Result<void> Sandbox::writeMemoryFile(const std::string& relative, const std::string& file,
                                      const std::string& value) {
  const std::string path = hierarchy_.memory + "/" + relative;
  auto dir = openDirAt(AT_FDCWD, path);
  if (!dir) return dir.error();
  auto written = writeFileAt(dir->get(), file, value);
  if (!written) return written.error().withContext(path);
  return {};
}

Result<pid_t> Sandbox::spawn(const std::string& relative, const std::function<int()>& body) {
  int gate[2];
  if (::pipe2(gate, O_CLOEXEC) != 0) return errnoError("pipe", errno);
  const pid_t pid = ::fork();
  if (pid < 0) {
    const int saved = errno;
    ::close(gate[0]);
    ::close(gate[1]);
    return errnoError("fork", saved);
  }
  if (pid == 0) {
    ::close(gate[1]);
    char go = 0;
    // Wait until the parent has moved us into the cgroup; EOF without a byte means it failed.
    if (::read(gate[0], &go, 1) != 1 || go != 'g') ::_exit(111);
    ::close(gate[0]);
    ::_exit(body());
  }
  ::close(gate[0]);
  children_.push_back(pid);
  auto moved = movePid(relative, pid);
  const char go = moved ? 'g' : 'x';
  (void)!::write(gate[1], &go, 1);
  ::close(gate[1]);
  if (!moved) {
    ::kill(pid, SIGKILL);
    reap();
    return moved.error();
  }
  return pid;
}

int Sandbox::reap() {
  int reaped = 0;
  for (auto it = children_.begin(); it != children_.end();) {
    int status = 0;
    const pid_t done = ::waitpid(*it, &status, WNOHANG);
    if (done == *it || (done < 0 && errno == ECHILD)) {
      it = children_.erase(it);
      ++reaped;
    } else {
      ++it;
    }
  }
  return reaped;
}

Result<void> Sandbox::removeCgroup(const std::string& relative) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  bool ok = true;
  for (const std::string& mount : mounts()) ok = removeTree(mount + "/" + relative, deadline) && ok;
  reap();
  std::erase_if(created_, [&](const std::string& path) {
    return path == relative || path.starts_with(relative + "/");
  });
  if (!ok) return Error{"sandbox " + options_.name + ": " + relative + " could not be removed"};
  return {};
}

Result<void> Sandbox::destroy() {
  if (destroyed_) return {};
  destroyed_ = true;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  for (pid_t pid : children_) ::kill(pid, SIGKILL);
  bool ok = true;
  for (const std::string& mount : mounts()) {
    ok = removeTree(mount + "/" + options_.name, deadline) && ok;
  }
  for (pid_t pid : children_) ::waitpid(pid, nullptr, 0);
  children_.clear();
  created_.clear();
  if (!ok) return Error{"sandbox " + options_.name + ": some cgroups could not be removed"};
  return {};
}

int removeStaleSandboxes(const Hierarchy& hierarchy, const std::string& prefix) {
  int removed = 0;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  for (const std::string& mount : {hierarchy.memory, hierarchy.cpuacct, hierarchy.pids,
                                   hierarchy.freezer, hierarchy.unified}) {
    if (mount.empty()) continue;
    auto dir = openDirAt(AT_FDCWD, mount);
    if (!dir) continue;
    auto names = listSubdirectories(dir->get());
    if (!names) continue;
    for (const std::string& name : *names) {
      if (!name.starts_with(prefix + "-")) continue;
      std::string_view rest = std::string_view(name).substr(prefix.size() + 1);
      rest = rest.substr(0, rest.find('-'));
      auto pid = parseUint(rest);
      if (!pid || *pid == 0 || *pid > 4194304) continue;
      if (::kill(static_cast<pid_t>(*pid), 0) == 0 || errno != ESRCH) continue;  // owner alive
      if (removeTree(mount + "/" + name, deadline)) ++removed;
    }
  }
  return removed;
}

}  // namespace nodewarden::cgroups
