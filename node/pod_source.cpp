#include "node/pod_source.h"

#include <dirent.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <algorithm>
#include <cerrno>
#include <cstring>
#include <set>
#include <unordered_map>
#include <utility>

#include "base/files.h"
#include "policy/files.h"
#include "policy/json_reader.h"

namespace nodewarden::node {

StaticPodSource::StaticPodSource(std::string directory, std::string nodeName)
    : directory_(std::move(directory)), nodeName_(std::move(nodeName)) {}

std::string StaticPodSource::describe() const {
  return "static manifests in " + directory_;
}

std::vector<std::string> StaticPodSource::takeProblems() {
  return std::exchange(problems_, {});
}

StaticPodSource::FileState StaticPodSource::read(const std::string& path, std::int64_t inode,
                                                 std::int64_t mtime, std::int64_t size,
                                                 std::optional<policy::Pod>& out) {
  FileState state{std::uint64_t(inode), mtime, size, std::nullopt};
  out.reset();
  auto text = readFile(path);
  if (!text) {
    problems_.push_back(text.error().message);
    return state;
  }
  policy::Diagnostics diagnostics;
  auto json = policy::parseKubernetesJsonText(*text, diagnostics);
  std::optional<policy::Pod> pod;
  if (json) pod = policy::parsePod(*json, "", diagnostics);
  if (pod && pod->uid.empty()) {
    diagnostics.add(".metadata.uid", "required: pods are matched to cgroups by UID");
    pod.reset();
  }
  if (!pod) {
    for (const Error& error : diagnostics.errors()) {
      problems_.push_back(path + ": " + error.message + " (file skipped)");
    }
    return state;
  }
  if (pod->nodeName.empty()) pod->nodeName = nodeName_;
  state.uid = pod->uid;
  out = std::move(pod);
  return state;
}

bool StaticPodSource::refresh() {
  if (first_) {
    // Watched before the first walk, so that nothing changed during it is missed.
    watch_ = cgroups::UniqueFd(::inotify_init1(IN_NONBLOCK | IN_CLOEXEC));
    if (watch_.valid() &&
        ::inotify_add_watch(watch_.get(), directory_.c_str(),
                            IN_CLOSE_WRITE | IN_MOVED_TO | IN_MOVED_FROM | IN_DELETE | IN_ATTRIB |
                                IN_DELETE_SELF | IN_MOVE_SELF | IN_ONLYDIR) < 0) {
      watch_.reset();
    }
    return walk();
  }
  if (!watch_.valid()) {
    struct stat dirStat {};
    const auto now = std::chrono::steady_clock::now();
    if (::stat(directory_.c_str(), &dirStat) == 0) {
      const std::int64_t mtime =
          std::int64_t(dirStat.st_mtim.tv_sec) * 1'000'000'000 + dirStat.st_mtim.tv_nsec;
      if (mtime == directoryMtime_ && now - lastWalk_ < std::chrono::seconds(10)) return false;
      directoryMtime_ = mtime;
    }
    return walk();
  }
  std::set<std::string> names;
  bool walkNeeded = false;
  alignas(inotify_event) char buffer[4096];
  for (int round = 0; round < 64; ++round) {
    const ssize_t n = ::read(watch_.get(), buffer, sizeof buffer);
    if (n <= 0) break;
    for (ssize_t at = 0; at + ssize_t(sizeof(inotify_event)) <= n;) {
      const auto* event = reinterpret_cast<const inotify_event*>(buffer + at);
      at += ssize_t(sizeof(inotify_event) + event->len);
      if ((event->mask & (IN_Q_OVERFLOW | IN_IGNORED | IN_DELETE_SELF | IN_MOVE_SELF)) != 0) {
        walkNeeded = true;
      } else if (event->len > 0) {
        names.insert(std::string(event->name, strnlen(event->name, event->len)));
      }
    }
  }
  if (walkNeeded) {
    // The directory itself went or events were lost: watch it afresh and read everything.
    first_ = true;
    return refresh();
  }
  bool changed = false;
  for (const std::string& name : names) {
    if (name.size() < 6 || !name.ends_with(".json") || name.starts_with(".")) continue;
    changed = update(name, walkNeeded) || changed;
    if (walkNeeded) return walk() || changed;
  }
  return changed;
}

bool StaticPodSource::update(const std::string& name, bool& walkNeeded) {
  const std::string path = directory_ + "/" + name;
  auto known = files_.find(name);
  const std::optional<std::string> oldUid =
      known != files_.end() ? known->second.uid : std::nullopt;
  struct stat st {};
  const bool exists = ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
  const std::int64_t mtime = std::int64_t(st.st_mtim.tv_sec) * 1'000'000'000 + st.st_mtim.tv_nsec;
  if (exists && known != files_.end() && known->second.inode == st.st_ino &&
      known->second.mtimeNanos == mtime && known->second.size == st.st_size) {
    return false;
  }
  // Two files with one UID: which one counts is the walk's rule (the first by name).
  if (oldUid && uidFiles_[*oldUid] > 1) {
    walkNeeded = true;
    return false;
  }
  FileState state;
  std::optional<policy::Pod> read;
  if (exists) {
    state = this->read(path, std::int64_t(st.st_ino), mtime, st.st_size, read);
    if (read && (!oldUid || *oldUid != read->uid) && uidFiles_[read->uid] > 0) {
      walkNeeded = true;
      return false;
    }
  }
  // The set: the old pod of this file out, its new one in (only this pod is copied).
  auto at = [&](const std::string& uid) {
    return std::find_if(set_.pods.begin(), set_.pods.end(),
                        [&](const policy::Pod& pod) { return pod.uid == uid; });
  };
  if (oldUid && (!read || read->uid != *oldUid)) {
    if (auto it = at(*oldUid); it != set_.pods.end()) {
      *it = std::move(set_.pods.back());
      set_.pods.pop_back();
    }
    if (--uidFiles_[*oldUid] <= 0) uidFiles_.erase(*oldUid);
  }
  if (read) {
    policy::Pod pod = std::move(*read);
    policy::resolvePod(pod, set_.priorityClasses);
    if (!oldUid || *oldUid != pod.uid) ++uidFiles_[pod.uid];
    if (auto it = at(pod.uid); it != set_.pods.end()) {
      *it = std::move(pod);
    } else {
      set_.pods.push_back(std::move(pod));
    }
  }
  if (exists) {
    state.counted = state.uid.has_value();
    files_[name] = std::move(state);
  } else {
    files_.erase(name);
  }
  return true;
}

bool StaticPodSource::walk() {
  const bool first = first_;
  first_ = false;
  lastWalk_ = std::chrono::steady_clock::now();
  DIR* dir = ::opendir(directory_.c_str());
  if (dir == nullptr) {
    const std::string problem =
        "cannot read the manifests directory " + directory_ + ": " + std::strerror(errno);
    // An unreadable directory keeps the last good set: a transient error must not make every
    // pod look unknown.
    if (problem != directoryProblem_) problems_.push_back(problem);
    directoryProblem_ = problem;
    return false;
  }
  directoryProblem_.clear();
  std::set<std::string> present;
  std::map<std::string, policy::Pod> fresh;  // the pods of the files read now, by file name
  bool changed = first;
  while (const dirent* entry = ::readdir(dir)) {
    const std::string name = entry->d_name;
    if (name.size() < 6 || !name.ends_with(".json") || name.starts_with(".")) continue;
    const std::string path = directory_ + "/" + name;
    struct stat st {};
    if (::stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) continue;
    present.insert(name);
    const std::int64_t mtime = std::int64_t(st.st_mtim.tv_sec) * 1'000'000'000 + st.st_mtim.tv_nsec;
    auto it = files_.find(name);
    if (it != files_.end() && it->second.inode == st.st_ino && it->second.mtimeNanos == mtime &&
        it->second.size == st.st_size) {
      continue;
    }
    std::optional<policy::Pod> pod;
    files_[name] = read(path, std::int64_t(st.st_ino), mtime, st.st_size, pod);
    if (pod) fresh.insert_or_assign(name, std::move(*pod));
    changed = true;
  }
  ::closedir(dir);
  for (auto it = files_.begin(); it != files_.end();) {
    if (present.contains(it->first)) {
      ++it;
    } else {
      it = files_.erase(it);
      changed = true;
    }
  }
  if (!changed) return false;

  // The set anew: each file's pod from what was read now, else from the set as it was (the
  // object is kept only there); a file that did not count before (its UID was another's) is
  // read again. Resolving a resolved pod again gives it the same figures.
  std::unordered_map<std::string, policy::Pod> before;
  before.reserve(set_.pods.size());
  for (policy::Pod& pod : set_.pods) {
    std::string uid = pod.uid;
    before.emplace(std::move(uid), std::move(pod));
  }
  set_.pods.clear();
  set_.pods.reserve(files_.size());
  uidFiles_.clear();
  std::map<std::string, std::string> uidFile;
  for (auto& [name, state] : files_) {
    if (!state.uid) continue;
    ++uidFiles_[*state.uid];
    auto [at, inserted] = uidFile.emplace(*state.uid, name);
    if (!inserted) {
      problems_.push_back(directory_ + "/" + name + ": metadata.uid " + *state.uid +
                          " is also in " + at->second + " (file skipped)");
      state.counted = false;
      continue;
    }
    const bool counted = std::exchange(state.counted, true);
    if (auto it = fresh.find(name); it != fresh.end()) {
      set_.pods.push_back(std::move(it->second));
    } else if (auto old = before.find(*state.uid); counted && old != before.end()) {
      set_.pods.push_back(std::move(old->second));
      before.erase(old);
    } else {
      std::optional<policy::Pod> pod;
      state = read(directory_ + "/" + name, std::int64_t(state.inode), state.mtimeNanos, state.size,
                   pod);
      if (!pod || pod->uid != at->first) {
        state.mtimeNanos = -1;  // changed since it was listed: the next walk reads it again
        state.counted = false;
        continue;
      }
      state.counted = true;
      set_.pods.push_back(std::move(*pod));
    }
  }
  policy::resolvePods(set_.pods, set_.priorityClasses);
  return true;
}

}  // namespace nodewarden::node
