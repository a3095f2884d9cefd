// The last list of this node's pods, kept on local disk: an agent started while the API
// server is unreachable still knows the pods' priorities — critical pods, the mirror pods of
// static pods (their UIDs are the kubelet's, which only the API shows) — until its first
// list arrives. The file is written atomically (a temporary file, fsync, rename) and carries
// a SHA-256 of its items, so a file cut short or edited is recognised and ignored with a
// warning; a write that fails (a full disk) is reported and never stops protection.
//
// Threading: the agent's loop thread; load() and flush() do blocking file I/O on a few
// hundred KiB at most, once at start and at most every kFlushEvery.
#pragma once

#include <chrono>
#include <map>
#include <string>
#include <vector>

#include "base/result.h"
#include "kube/reflector.h"
#include "policy/model.h"

namespace nodewarden::node {

class PodListCache final : public kube::StoreSink {
 public:
  static constexpr std::chrono::seconds kFlushEvery{10};

  // Forwards every list and event to `next` (the pod store), keeping the objects to write.
  PodListCache(std::string path, std::string nodeName, kube::StoreSink& next);

  void replace(std::vector<policy::Json> items) override;
  void apply(const std::string& type, const policy::Json& object) override;

  // Whether objects changed since the last write.
  bool dirty() const { return dirty_; }
  // Writes the file if dirty. Creates the file's directory if needed.
  Result<void> flush();

  // The pod objects of a cache file written for `nodeName`. An error for a missing file
  // (ENOENT in Error::sysErrno), bad JSON, another format, another node or a checksum that
  // does not match.
  static Result<std::vector<policy::Json>> load(const std::string& path,
                                                const std::string& nodeName);
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  std::string nodeName_;
  kube::StoreSink& next_;
  std::map<std::string, policy::Json> objects_;  // by namespace/name
  bool dirty_ = false;
};

}  // namespace nodewarden::node
