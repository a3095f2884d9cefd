// The command of node/, declared apart so that main() does not compile Asio, and the wiring to
// the API server it makes (public so that a benchmark running the agent in process wires it the
// same way).
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace boost::asio {
class io_context;
}  // namespace boost::asio

namespace nodewarden {
class Clock;
namespace cgroups {
class PodCgroups;
}  // namespace cgroups
namespace kube {
class ApiWriter;
class Client;
struct ClusterConfig;
}  // namespace kube
namespace webhook {
class ApiAdmissionActions;
}  // namespace webhook
}  // namespace nodewarden

namespace nodewarden::node {

// `nodewarden agent …`: parses the options (docs/reference.md §1), builds the agent and runs
// the loop until SIGTERM/SIGINT. Returns the exit code (base/args.h).
int runAgent(const std::vector<std::string>& args);

class Actuator;
class KubernetesPodSource;
class PodSource;
struct AgentOptions;
struct KubernetesSourceOptions;
// The same alias as node/agent.h's (run.cpp sees both: should they drift, it fails to compile).
using ActuatorFactory = std::function<std::unique_ptr<Actuator>(
    boost::asio::io_context&, cgroups::PodCgroups&, const Clock&)>;

// --source kubernetes: the client and the writer outlive the agent (declared before it);
// the pod source is handed to the agent and reached through `source`.
struct ApiWiring {
  ApiWiring();
  ~ApiWiring();
  std::unique_ptr<kube::Client> client;
  std::unique_ptr<kube::ApiWriter> writer;
  std::unique_ptr<webhook::ApiAdmissionActions> admissionActions;
  KubernetesPodSource* source = nullptr;

  // Makes the pod source; unless --dry-run, evictions are also recorded through the API and
  // a `preempt` verdict acts.
  std::unique_ptr<PodSource> wire(boost::asio::io_context& io, kube::ClusterConfig cluster,
                                  const KubernetesSourceOptions& sourceOptions,
                                  AgentOptions& options, ActuatorFactory& makeActuator);
  // The first decisions should know the pods' priorities: wait (bounded) for the first lists.
  // An unreachable API server does not keep the agent from protecting the node.
  void awaitFirstList(boost::asio::io_context& io) const;
  std::size_t pendingWrites() const;
};

}  // namespace nodewarden::node
