// client-go's reflector, for one resource: LIST (paged, limit=500 + continue) then WATCH from
// the list's resourceVersion with bookmarks; a 410 Gone (HTTP or an in-stream ERROR event)
// means relist; a dropped or ended watch resumes from the last resourceVersion seen (a
// bookmark's included); failures reconnect after a jittered exponential backoff
// (0.5 s doubling to 30 s, ×[0.5, 1.5)). Objects land in a Store that is always a state the API
// server reported: a relist replaces its whole content at once.
//
// Threading: the io_context's thread only.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "kube/client.h"
#include "policy/json_reader.h"

namespace boost::asio {
class io_context;
}  // namespace boost::asio

namespace nodewarden::kube {

// Where a reflector puts what it learns. `replace` gives the complete current list (after
// a LIST); `apply` one watch event (ADDED, MODIFIED, DELETED). Objects are already trimmed
// to what nodewarden reads (policy::parseKubernetesJsonText's filter).
class StoreSink {
 public:
  virtual ~StoreSink() = default;
  virtual void replace(std::vector<policy::Json> items) = 0;
  virtual void apply(const std::string& type, const policy::Json& object) = 0;
};

// A map of parsed objects keyed by "namespace/name" (or "name" for cluster-scoped kinds).
// A malformed object is skipped and reported (problems()); a MODIFIED that does not parse
// keeps the last good version of the object and is reported. `version()` grows on every
// change, so users can rebuild derived data only when needed.
template <typename T>
class Store final : public StoreSink {
 public:
  using Parse = std::function<std::optional<T>(const policy::Json&, const std::string& path,
                                               policy::Diagnostics&)>;
  Store(std::string kind, Parse parse) : kind_(std::move(kind)), parse_(std::move(parse)) {}

  void replace(std::vector<policy::Json> items) override {
    std::map<std::string, T> next;
    for (std::size_t i = 0; i < items.size(); ++i) {
      auto parsed = parseOne(items[i], "items[" + std::to_string(i) + "]");
      if (parsed) next.insert_or_assign(parsed->first, std::move(parsed->second));
    }
    objects_.swap(next);
    ++version_;
  }
  void apply(const std::string& type, const policy::Json& object) override {
    if (type == "DELETED") {
      auto key = keyOf(object);
      if (!key.empty() && objects_.erase(key) > 0) ++version_;
      return;
    }
    auto parsed = parseOne(object, "object");
    if (!parsed) return;
    objects_.insert_or_assign(parsed->first, std::move(parsed->second));
    ++version_;
  }

  const std::map<std::string, T>& objects() const { return objects_; }
  std::uint64_t version() const { return version_; }
  // Problems since the last call, each naming the object and the JSON path.
  std::vector<std::string> takeProblems() { return std::exchange(problems_, {}); }

 private:
  static std::string keyOf(const policy::Json& object) {
    auto meta = object.find("metadata");
    if (meta == object.end() || !meta->is_object()) return {};
    auto name = meta->find("name");
    if (name == meta->end() || !name->is_string()) return {};
    auto ns = meta->find("namespace");
    if (ns != meta->end() && ns->is_string() && !ns->get_ref<const std::string&>().empty())
      return ns->get<std::string>() + "/" + name->get<std::string>();
    return name->get<std::string>();
  }
  std::optional<std::pair<std::string, T>> parseOne(const policy::Json& object,
                                                    const std::string& path) {
    std::string key = object.is_object() ? keyOf(object) : std::string();
    policy::Diagnostics diagnostics;
    std::optional<T> parsed;
    if (key.empty()) {
      diagnostics.add(policy::childPath(path, "metadata"), "expected metadata.name");
    } else {
      parsed = parse_(object, path, diagnostics);
    }
    if (!parsed || !diagnostics.empty()) {
      problems_.push_back(kind_ + " " + (key.empty() ? std::string("(unnamed)") : key) +
                          " skipped: " + diagnostics.joined());
      if (!parsed) return std::nullopt;
    }
    return std::make_pair(std::move(key), std::move(*parsed));
  }

  std::string kind_;
  Parse parse_;
  std::map<std::string, T> objects_;
  std::uint64_t version_ = 0;
  std::vector<std::string> problems_;
};

struct ReflectorOptions {
  std::string listPath;       // "/api/v1/pods", "/apis/policy/v1/poddisruptionbudgets"
  std::string fieldSelector;  // "spec.nodeName=node-1" (escaped by the reflector), or ""
  std::chrono::seconds watchTimeout{300};  // timeoutSeconds of each watch
  std::chrono::milliseconds initialBackoff{500};
  std::chrono::milliseconds maxBackoff{30000};
  std::uint32_t pageSize = 500;
  std::uint64_t seed = 0;  // jitter's random seed (0: from the clock)
};

// What happened, for logs and tests: "listed 42 Pods at resourceVersion 1234", "watch ended:
// …; resuming from 1250", "410 Gone: relisting", "retrying in 1.2 s: …".
using ReflectorLog = std::function<void(const std::string& event, const std::string& detail)>;

class Reflector {
 public:
  Reflector(boost::asio::io_context& io, Client& client, ReflectorOptions options, StoreSink& sink,
            ReflectorLog log = nullptr);
  ~Reflector();
  Reflector(const Reflector&) = delete;
  Reflector& operator=(const Reflector&) = delete;

  void start();
  void stop();  // cancels the list/watch/backoff; no sink or log call afterwards

  // A LIST has completed at least once (the store holds a full picture).
  bool synced() const;
  // The API server answered the last request (false while retrying after failures).
  bool connected() const;
  const std::string& resourceVersion() const;
  // Counters for tests and metrics.
  struct Stats {
    std::uint64_t lists = 0;
    std::uint64_t watches = 0;
    std::uint64_t events = 0;  // ADDED/MODIFIED/DELETED applied
    std::uint64_t bookmarks = 0;
    std::uint64_t relists410 = 0;  // relists caused by 410 Gone
    std::uint64_t badEvents = 0;   // malformed events skipped
    std::uint64_t failures = 0;    // requests that failed (then retried after a backoff)
    std::chrono::milliseconds lastBackoff{0};  // the delay chosen after the last failure
  };
  const Stats& stats() const;

 private:
  struct Impl;
  std::shared_ptr<Impl> impl_;
};

}  // namespace nodewarden::kube
