// ApiRecordingActuator: what it hands to the API writer once the local kill is done. The
// writer's queue is read before the io_context runs, so nothing is sent anywhere.
#include <doctest/doctest.h>

#include <boost/asio/io_context.hpp>
#include <memory>
#include <string>
#include <vector>

#include "kube/client.h"
#include "kube/writer.h"
#include "node/kube_source.h"

using namespace nodewarden;

namespace {

// A local kill that empties the pod at once.
class EmptyingActuator final : public node::Actuator {
 public:
  void evict(const node::EvictionOrder&, Done done) override {
    node::EvictionOutcome outcome;
    outcome.emptied = true;
    done(outcome);
  }
  std::string name() const override { return "emptying"; }
};

std::size_t writesFor(const std::string& pod, const std::string& uid) {
  boost::asio::io_context io;
  kube::ClusterConfig config;
  config.host = "127.0.0.1";
  config.port = "1";
  config.tls = false;
  kube::Client client(io, config);
  kube::ApiWriter writer(io, client, {});
  node::ApiRecordingActuator actuator(std::make_unique<EmptyingActuator>(), writer);
  node::EvictionOrder order;
  order.pod = pod;
  order.uid = uid;
  order.message = "The node was low on resource: memory. ";
  bool done = false;
  actuator.evict(order, [&](const node::EvictionOutcome&) { done = true; });
  CHECK(done);
  return writer.pending();
}

}  // namespace

TEST_CASE("an evicted pod of the API gets its status, Event and DELETE queued") {
  CHECK(writesFor("shop/batch", "0a1b2c3d-0000-4000-8000-000000000001") == 3);
}

TEST_CASE("a pod cgroup without an object in the API: killed, nothing written to the API") {
  // Found against the real API server (cluster/agent_live): such pods were recorded as
  // "unknown/<uid>" and each write met a 404.
  CHECK(writesFor("unknown/0a1b2c3d-0000-4000-8000-000000000002",
                  "0a1b2c3d-0000-4000-8000-000000000002") == 0);
}

TEST_CASE("the pod's generation is asked for by key and UID once the kill is done") {
  boost::asio::io_context io;
  kube::ClusterConfig config;
  config.host = "127.0.0.1";
  config.port = "1";
  config.tls = false;
  kube::Client client(io, config);
  kube::ApiWriter writer(io, client, {});
  std::vector<std::string> asked;
  node::ApiRecordingActuator actuator(
      std::make_unique<EmptyingActuator>(), writer,
      [&](const std::string& key, const std::string& uid) -> std::int64_t {
        asked.push_back(key + " " + uid);
        return 2;
      });
  node::EvictionOrder order;
  order.pod = "shop/batch";
  order.uid = "0a1b2c3d-0000-4000-8000-000000000003";
  actuator.evict(order, [](const node::EvictionOutcome&) {});
  REQUIRE(asked.size() == 1);
  CHECK(asked[0] == "shop/batch 0a1b2c3d-0000-4000-8000-000000000003");
  CHECK(writer.pending() == 3);

  order.dryRun = true;  // nothing recorded, nothing asked
  order.uid = "0a1b2c3d-0000-4000-8000-000000000004";
  actuator.evict(order, [](const node::EvictionOutcome&) {});
  CHECK(asked.size() == 1);
}
