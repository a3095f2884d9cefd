#include "node/pod_source.h"

#include <dirent.h>
#include <sys/stat.h>
#include <algorithm>
#include <cerrno>
#include <cstring>
#include <set>

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

bool StaticPodSource::refresh() {
  struct stat dirStat {};
  const auto now = std::chrono::steady_clock::now();
  if (!first_ && ::stat(directory_.c_str(), &dirStat) == 0) {
    const std::int64_t mtime =
        std::int64_t(dirStat.st_mtim.tv_sec) * 1'000'000'000 + dirStat.st_mtim.tv_nsec;
    if (mtime == directoryMtime_ && now - lastWalk_ < std::chrono::seconds(10)) return false;
    directoryMtime_ = mtime;
  } else if (first_ && ::stat(directory_.c_str(), &dirStat) == 0) {
    directoryMtime_ =
        std::int64_t(dirStat.st_mtim.tv_sec) * 1'000'000'000 + dirStat.st_mtim.tv_nsec;
  }
  lastWalk_ = now;
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
  bool changed = first_;
  first_ = false;
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
    FileState state{st.st_ino, mtime, st.st_size, std::nullopt};
    auto text = readFile(path);
    if (!text) {
      problems_.push_back(text.error().message);
    } else {
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
      } else {
        if (pod->nodeName.empty()) pod->nodeName = nodeName_;
        state.pod = std::move(pod);
      }
    }
    files_[name] = std::move(state);
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

  set_.pods.clear();
  std::map<std::string, std::string> uidFile;
  for (const auto& [name, state] : files_) {
    if (!state.pod) continue;
    auto [at, inserted] = uidFile.emplace(state.pod->uid, name);
    if (!inserted) {
      problems_.push_back(directory_ + "/" + name + ": metadata.uid " + state.pod->uid +
                          " is also in " + at->second + " (file skipped)");
      continue;
    }
    set_.pods.push_back(*state.pod);
  }
  policy::resolvePods(set_.pods, set_.priorityClasses);
  return true;
}

}  // namespace nodewarden::node
