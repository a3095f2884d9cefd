#include "cgroups/hierarchy.h"

#include <fcntl.h>
#include <libcgroup.h>
#include <sys/stat.h>
#include <algorithm>
#include <map>
#include <mutex>

#include "cgroups/fs.h"

namespace nodewarden::cgroups {
namespace {

bool isUnder(const std::string& path, const std::string& root) {
  if (path == root) return true;
  const std::string prefix = root.ends_with('/') ? root : root + "/";
  return path.starts_with(prefix);
}

bool contains(const std::vector<std::string>& list, std::string_view item) {
  return std::find(list.begin(), list.end(), item) != list.end();
}

std::string trimmedRoot(std::string root) {
  while (root.size() > 1 && root.ends_with('/')) root.pop_back();
  return root;
}

// A fixture root is a plain directory: recognise the layout from the files in it.
std::vector<CgroupMount> mountsFromDirectory(const std::string& root) {
  std::vector<CgroupMount> mounts;
  struct stat st {};
  if (::stat((root + "/cgroup.controllers").c_str(), &st) == 0) {
    mounts.push_back(CgroupMount{root, "/", Version::V2, {}});
    return mounts;
  }
  auto dir = openDirAt(AT_FDCWD, root);
  if (!dir) return mounts;
  auto names = listSubdirectories(dir->get());
  if (!names) return mounts;
  std::sort(names.value().begin(), names.value().end());
  for (const std::string& name : *names) {
    const std::string path = root + "/" + name;
    if (::stat((path + "/cgroup.controllers").c_str(), &st) == 0) {
      mounts.push_back(CgroupMount{path, "/", Version::V2, {}});
      continue;
    }
    CgroupMount mount{path, "/", Version::V1, {}};
    if (name == "systemd") {
      mount.controllers.push_back("name=systemd");
    } else {
      std::string_view rest = name;
      while (!rest.empty()) {
        const std::size_t comma = rest.find(',');
        mount.controllers.emplace_back(rest.substr(0, comma));
        rest.remove_prefix(comma == std::string_view::npos ? rest.size() : comma + 1);
      }
    }
    mounts.push_back(std::move(mount));
  }
  return mounts;
}

// libcgroup's view: controller name → mount point, for v1 controllers and v2 ones alike.
Result<std::map<std::string, std::string>> libcgroupMounts() {
  static std::once_flag once;
  static int initResult = 0;
  std::call_once(once, [] { initResult = cgroup_init(); });
  if (initResult != 0) {
    return Error{std::string("libcgroup: cgroup_init: ") + cgroup_strerror(initResult)};
  }
  std::map<std::string, std::string> mounts;
  void* handle = nullptr;
  cgroup_mount_point info{};
  for (int rc = cgroup_get_controller_begin(&handle, &info); rc == 0;
       rc = cgroup_get_controller_next(&handle, &info)) {
    mounts.emplace(info.name, info.path);
  }
  cgroup_get_controller_end(&handle);
  return mounts;
}

}  // namespace

const char* toString(Mode mode) {
  switch (mode) {
    case Mode::Legacy:
      return "legacy (cgroup v1)";
    case Mode::Hybrid:
      return "hybrid (cgroup v1 controllers + cgroup2)";
    case Mode::Unified:
      return "unified (cgroup v2)";
  }
  return "unknown";
}

Result<Hierarchy> hierarchyFromMounts(const std::string& rootIn,
                                      const std::vector<CgroupMount>& mounts,
                                      std::string_view unifiedControllers) {
  Hierarchy h;
  h.root = rootIn;
  const std::string root = trimmedRoot(rootIn);
  std::map<std::string, std::string> v1;  // controller → mount point
  for (const CgroupMount& mount : mounts) {
    if (!isUnder(mount.mountPoint, root)) continue;
    if (mount.version == Version::V2) {
      // The mount at the root itself wins over a nested one (unified/).
      if (h.unified.empty() || mount.mountPoint == root) h.unified = mount.mountPoint;
    } else {
      for (const std::string& controller : mount.controllers) {
        v1.emplace(controller, mount.mountPoint);
      }
    }
  }
  std::string_view rest = unifiedControllers;
  while (!rest.empty()) {
    const std::size_t end = rest.find_first_of(" \n");
    const std::string_view name = rest.substr(0, end);
    if (!name.empty()) h.unifiedControllers.emplace_back(name);
    rest.remove_prefix(end == std::string_view::npos ? rest.size() : end + 1);
  }
  auto pick = [&](std::string_view v1Name, std::string_view v2Name, std::string& path,
                  Version& version) {
    if (auto it = v1.find(std::string(v1Name)); it != v1.end()) {
      path = it->second;
      version = Version::V1;
    } else if (!h.unified.empty() && (v2Name.empty() || contains(h.unifiedControllers, v2Name))) {
      path = h.unified;
      version = Version::V2;
    }
  };
  pick("memory", "memory", h.memory, h.memoryVersion);
  // cpu.stat's usage_usec exists on every v2 cgroup, with or without the cpu controller.
  pick("cpuacct", "", h.cpuacct, h.cpuVersion);
  pick("pids", "pids", h.pids, h.pidsVersion);
  if (auto it = v1.find("freezer"); it != v1.end()) h.freezer = it->second;

  const bool anyV1 = !v1.empty();
  h.mode = anyV1 && !h.unified.empty() ? Mode::Hybrid : anyV1 ? Mode::Legacy : Mode::Unified;
  if (h.memory.empty()) {
    std::string found;
    for (const auto& [controller, path] : v1) found += " " + controller + "=" + path;
    if (!h.unified.empty()) found += " cgroup2=" + h.unified;
    return Error{
        "no memory cgroup hierarchy below " + root +
        (found.empty() ? std::string(" (no cgroup mounts there)") : " (found:" + found + ")")};
  }
  return h;
}

Result<Hierarchy> discoverHierarchy(const DiscoverOptions& options) {
  const std::string root = trimmedRoot(options.root);
  std::vector<std::string> notes;
  std::vector<CgroupMount> mounts;

  auto mountInfoText = readFile(options.mountInfoPath);
  std::vector<CgroupMount> fromMountInfo;
  if (!mountInfoText) {
    notes.push_back("cannot read " + options.mountInfoPath + ": " + mountInfoText.error().message);
  } else if (auto parsed = parseMountInfo(*mountInfoText); !parsed) {
    notes.push_back(options.mountInfoPath + ": " + parsed.error().message);
  } else {
    for (CgroupMount& mount : parsed.value()) {
      if (isUnder(mount.mountPoint, root)) fromMountInfo.push_back(std::move(mount));
    }
  }

  if (!fromMountInfo.empty()) {
    mounts = fromMountInfo;
    notes.push_back("mounts from " + options.mountInfoPath);
    if (options.useLibcgroup) {
      // libcgroup reads the mount table itself; the two must agree on every v1 controller
      // below the root. Where they do not, mountinfo (the kernel's own view) wins.
      auto lib = libcgroupMounts();
      if (!lib) {
        notes.push_back(lib.error().message);
      } else {
        int agreed = 0;
        for (const CgroupMount& mount : fromMountInfo) {
          if (mount.version != Version::V1) continue;
          for (const std::string& controller : mount.controllers) {
            if (controller.starts_with("name=")) continue;
            auto it = lib->find(controller);
            if (it == lib->end()) {
              notes.push_back("libcgroup does not list controller " + controller + " mounted at " +
                              mount.mountPoint);
            } else if (it->second != mount.mountPoint) {
              notes.push_back("libcgroup has controller " + controller + " at " + it->second +
                              ", mountinfo at " + mount.mountPoint);
            } else {
              ++agreed;
            }
          }
        }
        notes.push_back("libcgroup agrees on " + std::to_string(agreed) + " v1 controller(s)");
      }
    }
  } else {
    mounts = mountsFromDirectory(root);
    notes.push_back("no cgroup mounts below " + root + "; layout read from the directory tree");
  }

  std::string unifiedControllers;
  for (const CgroupMount& mount : mounts) {
    if (mount.version != Version::V2 || !isUnder(mount.mountPoint, root)) continue;
    if (auto text = readFile(mount.mountPoint + "/cgroup.controllers")) {
      if (mount.mountPoint == root || unifiedControllers.empty()) unifiedControllers = *text;
    }
  }
  auto hierarchy = hierarchyFromMounts(root, mounts, unifiedControllers);
  if (!hierarchy) return hierarchy.error();
  hierarchy.value().notes = std::move(notes);
  return hierarchy;
}

}  // namespace nodewarden::cgroups
