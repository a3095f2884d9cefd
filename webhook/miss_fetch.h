// What the cluster cache misses, fetched from the API server (docs/reference.md §7.4): the time
// budget of one review (the webhook's timeoutSeconds, as the API server sends it) and how much
// of it a GET may take, and the MissFetcher that makes the GET — one bounded GET per missing
// pod or node, for a review that would otherwise fail open. webhook/binding_webhook.h decides
// when to fetch and judges what comes back.
//
// Threading: an ApiMissFetcher belongs to the thread that runs its io_context (the webhook's
// Asio loop); the free functions are pure.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "base/result.h"
#include "policy/model.h"

namespace boost::asio {
class io_context;
}  // namespace boost::asio

namespace nodewarden::kube {
class Client;
}  // namespace nodewarden::kube

namespace nodewarden::webhook {

// The time budget of one review: the API server sends the webhook's timeoutSeconds as the
// `timeout` query parameter of the webhook URL (a Go duration: "2s", "1.5s", "500ms",
// "1m0s"); `fallback` when it is absent or unreadable. Pure.
std::chrono::milliseconds reviewBudget(std::string_view target, std::chrono::milliseconds fallback);

// How long the GETs of a review's misses may take: the `budget` less the time `spent` so far
// and less what is kept back for answering, max(`margin`, a quarter of the budget); nullopt
// when under 50 ms would be left (then no GET is made). Pure.
std::optional<std::chrono::milliseconds> fetchTimeout(std::chrono::milliseconds budget,
                                                      std::chrono::milliseconds spent,
                                                      std::chrono::milliseconds margin);

// A span as the webhook's messages write it, in seconds to three significant digits: "2 s",
// "1.5 s", "0.05 s". Pure.
std::string secondsText(std::chrono::milliseconds span);

// Fetches one object the cluster cache has not seen from the API server, for a review that
// would otherwise fail open. `done` is called once, on the webhook's thread, never inside the
// call, within `timeout` (an error then: "timed out after 1.5 s").
class MissFetcher {
 public:
  virtual ~MissFetcher() = default;
  using PodDone = std::function<void(Result<policy::Pod>)>;
  using NodeDone = std::function<void(Result<policy::Node>)>;
  virtual void fetchPod(const std::string& ns, const std::string& name,
                        std::chrono::milliseconds timeout, PodDone done) = 0;
  virtual void fetchNode(const std::string& name, std::chrono::milliseconds timeout,
                         NodeDone done) = 0;
};

// The fetches as one GET each through kube::Client (/api/v1/namespaces/NS/pods/NAME,
// /api/v1/nodes/NAME), the client's request timeout set to `timeout`, and a timer of its own
// that answers at `timeout` whatever the exchange does; never retried (a 401 is retried once
// by the client, with fresh credentials). The object is parsed as the reflectors' stores
// parse theirs; a body that does not parse is an error. `io` and `client` must outlive it;
// destroying it drops the callbacks of fetches in flight.
class ApiMissFetcher final : public MissFetcher {
 public:
  ApiMissFetcher(boost::asio::io_context& io, kube::Client& client);
  ~ApiMissFetcher() override;
  void fetchPod(const std::string& ns, const std::string& name, std::chrono::milliseconds timeout,
                PodDone done) override;
  void fetchNode(const std::string& name, std::chrono::milliseconds timeout,
                 NodeDone done) override;

 private:
  void get(std::string target, std::chrono::milliseconds timeout,
           std::function<void(Result<std::string>)> done);
  boost::asio::io_context& io_;
  kube::Client& client_;
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

}  // namespace nodewarden::webhook
