// bench_kube: the Kubernetes integration's figures over generator.h's kubectl-shaped pods: 1. the
// heap a Store<Pod> holds per 1,000 pods, against each object's JSON DOM; 2. the webhook's latency
// at 1,000 nodes x 30 pods over loopback keep-alive (HttpServer + BindingWebhook +
// StoreClusterCache), and the decision alone; 3. watch events a second from tests/kube's fake API
// server through the client and the reflector into a Store<Pod>, and the cache's cost per event.
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <thread>

#include "bench/support/generator.h"
#include "bench/support/report.h"
#include "kube/reflector.h"
#include "server/http_server.h"
#include "tests/kube/fake_apiserver.h"
#include "tests/support/admission_review.h"
#include "webhook/binding_webhook.h"

using namespace nodewarden;
using namespace nodewarden::bench;
using Json = nlohmann::json;
using namespace std::chrono_literals;
namespace http = boost::beast::http;

namespace {

// The pods generator.h's Planner puts on a new node of `count` (its agents, Jobs, a few
// pending, terminating or nominated to it), resolved, with their `kubectl get pod -o json` text.
using Drawn = std::vector<std::pair<policy::Pod, std::string>>;
Drawn drawNode(Planner& plan, KubectlText& text, const std::string& node, int count) {
  static const std::vector<policy::PriorityClass> classes = priorityClasses();
  Drawn out;
  for (PodPlan& p : plan.node(node, count)) {
    policy::resolvePod(p.pod, classes);  // for the priority and QoS class printed
    out.emplace_back(p.pod, text.pod(p));
  }
  return out;
}

// A ready node whose allocatable is what `pods` on it request, and 1 CPU and 1 GiB more.
Json nodeObject(const std::string& name, const Drawn& pods) {
  std::int64_t cpu = 1000, memory = 1 << 30;
  for (const auto& [pod, text] : pods) {
    if (pod.nodeName != name || pod.phase == "Succeeded" || pod.phase == "Failed") continue;
    const policy::ResourceAmounts& r = pod.schedulerRequests;
    cpu += r.count("cpu") ? r.at("cpu") : 0;
    memory += r.count("memory") ? r.at("memory") : 0;
  }
  const Json room = {
      {"cpu", std::to_string(cpu) + "m"}, {"memory", std::to_string(memory)}, {"pods", "110"}};
  Json node = Json::parse(R"({"apiVersion": "v1", "kind": "Node",
    "status": {"conditions": [{"type": "Ready", "status": "True"}]}})");
  node["metadata"]["name"] = name;
  node["status"]["capacity"] = node["status"]["allocatable"] = room;
  return node;
}

// An object as the cache keeps it (trimmed to what it reads), added as a watch event would.
template <typename T>
void add(kube::Store<T>& store, const std::string& text) {
  policy::Diagnostics diagnostics;
  if (auto object = policy::parseKubernetesJsonText(text, diagnostics))
    store.apply("ADDED", *object);
}

void cacheMemory(bool quick) {
  std::printf("\n## Memory per 1,000 pods cached\n\n");
  for (int count : quick ? std::vector<int>{1000} : std::vector<int>{1000, 10000}) {
    Planner plan(7, count / 6);
    KubectlText render(7, "");
    std::vector<std::string> texts;
    while (int(texts.size()) < count) {
      for (auto& [pod, podText] : drawNode(plan, render, plan.nodeName(), 30))
        texts.push_back(std::move(podText));
    }
    texts.resize(std::size_t(count));
    // What nodewarden keeps (a Store<Pod>), then a naive cache (each object's JSON DOM).
    std::size_t base = heapInUse(true);
    auto store = std::make_unique<kube::Store<policy::Pod>>("Pod", policy::parsePod);
    for (const auto& text : texts) add(*store, text);
    const std::size_t storeBytes = heapInUse(true) - base;
    if (store->objects().size() != std::size_t(count)) std::printf("warning: pods missing\n");
    store.reset();
    base = heapInUse(true);
    auto doms = std::make_unique<std::vector<Json>>();
    doms->reserve(count);
    for (const auto& text : texts) doms->push_back(Json::parse(text));
    const std::size_t domBytes = heapInUse(true) - base;
    std::printf(
        "%6d pods: Store<Pod> %.2f MiB = %.2f MiB per 1,000 pods (%.0f bytes/pod); "
        "full JSON DOM %.2f MiB per 1,000 pods\n",
        count, storeBytes / 1048576.0, storeBytes / 1048576.0 * 1000 / count,
        double(storeBytes) / count, domBytes / 1048576.0 * 1000 / count);
  }
}

void webhookLatency(bool quick) {
  std::printf("\n## Webhook latency: 1,000 nodes x 30 pods\n\n");
  const int nodes = 1000, podsPerNode = 30, pending = 200, reviews = quick ? 500 : 3000;
  kube::Store<policy::Pod> podStore("Pod", policy::parsePod);
  kube::Store<policy::Node> nodeStore("Node", policy::parseNode);
  kube::Store<policy::PriorityClass> classStore("PriorityClass", policy::parsePriorityClass);
  kube::Store<policy::PodDisruptionBudget> pdbStore("PodDisruptionBudget",
                                                    policy::parsePodDisruptionBudget);
  Planner plan(99, nodes * podsPerNode / 6);
  KubectlText render(99, "");
  for (const policy::PriorityClass& c : priorityClasses())  // the classes the pods name
    add(classStore, Json{{"metadata", {{"name", c.name}}}, {"value", c.value}}.dump());
  std::vector<std::string> nodeNames;
  for (int n = 0; n < nodes; ++n) {
    const std::string& node = nodeNames.emplace_back(plan.nodeName());
    const auto pods = drawNode(plan, render, node, podsPerNode);
    add(nodeStore, nodeObject(node, pods).dump());
    for (const auto& [pod, podText] : pods) add(podStore, podText);
  }
  // Pending pods under review, as the review needs them: most fit anywhere (admit), some need
  // preemption (priority 5000, 4 GiB), some cannot preempt (Never).
  std::vector<std::pair<std::string, std::string>> reviewed;  // pod name, node
  Random random(99);
  const Json kPending = Json::parse(R"({"apiVersion": "v1", "kind": "Pod",
    "metadata": {"namespace": "pending"}, "status": {"phase": "Pending"},
    "spec": {"containers": [{"name": "app", "resources": {"requests": {"cpu": "100m"}}}]}})");
  for (int i = 0; i < pending; ++i) {
    const bool large = i % 4 == 0;
    const std::string name = "new-" + std::to_string(i);
    Json pod = kPending;
    pod["metadata"].update({{"name", name}, {"uid", "uid-" + name}});
    pod["spec"]["priority"] = large ? 5000 : 0;
    if (i % 8 == 4) pod["spec"]["preemptionPolicy"] = "Never";
    pod["spec"]["containers"][0]["resources"]["requests"]["memory"] = large ? "4Gi" : "128Mi";
    add(podStore, pod.dump());
    reviewed.emplace_back(name, nodeNames[std::size_t(random.between(0, nodes - 1))]);
  }
  // A dry-run review (the webhook decides, nothing acts) of the i-th pending pod's binding.
  auto reviewBody = [&](const std::string& uid, int i) {
    const auto& [pod, node] = reviewed[std::size_t(i) % reviewed.size()];
    return testing::bindingReview(uid, "pending", pod, node, "", true).dump();
  };
  webhook::StoreClusterCache cache(podStore, nodeStore, classStore, pdbStore);
  const auto buildStart = steadyNow();
  cache.refresh();
  std::printf("index of %s pods on %d nodes built in %.1f ms\n",
              withCommas(podStore.objects().size()).c_str(), nodes, nanosSince(buildStart) / 1e6);
  webhook::RecordingAdmissionActions actions;
  webhook::BindingWebhook webhook(cache, actions, policy::Policy{});
  auto handle = [&](const server::HttpRequest& request) {
    cache.refresh();
    return webhook.handle(request);
  };
  std::vector<double> decide;  // the decision alone
  std::map<std::string, int> verdicts;
  for (int i = 0; i < reviews; ++i) {
    server::HttpRequest request;
    request.method = "POST";
    request.target = "/v1/admission-review";
    request.body = reviewBody("r-" + std::to_string(i), i);
    const auto start = steadyNow();
    const server::HttpResponse response = handle(request);
    decide.push_back(nanosSince(start));
    const Json answer = Json::parse(response.body, nullptr, false);
    const bool answered = answer.is_object() && answer.contains("response");
    ++verdicts[!answered ? "?" : answer["response"]["allowed"] == true ? "allowed" : "denied"];
  }
  const Samples decided = Samples::from(decide);
  std::printf(
      "decision (parse review + refresh + admitPod + answer): p50 %.1f µs, p99 %.1f µs "
      "over %d reviews (",
      decided.median() / 1e3, decided.p99() / 1e3, reviews);
  for (const auto& [verdict, n] : verdicts) std::printf("%s %d ", verdict.c_str(), n);
  std::printf(")\n");
  // Over loopback: the HTTP server on its own loop thread, a keep-alive client here.
  boost::asio::io_context serverIo, clientIo;
  server::HttpServerOptions httpOptions;  // on 127.0.0.1
  httpOptions.port = 0;
  server::HttpServer httpServer(serverIo, httpOptions, handle);
  if (!httpServer.start()) {
    std::printf("cannot start the HTTP server\n");
    return;
  }
  std::thread loop([&] { serverIo.run(); });
  std::vector<double> roundTrips;
  boost::beast::tcp_stream stream(clientIo);
  stream.connect({boost::asio::ip::make_address("127.0.0.1"), httpServer.port()});
  for (int i = 0; i < reviews; ++i) {
    http::request<http::string_body> request{http::verb::post, "/v1/admission-review", 11};
    request.set(http::field::host, "127.0.0.1");
    request.set(http::field::content_type, "application/json");
    request.body() = reviewBody("h-" + std::to_string(i), i);
    request.prepare_payload();
    const auto start = steadyNow();
    http::write(stream, request);
    boost::beast::flat_buffer buffer;
    http::response<http::string_body> response;
    http::read(stream, buffer, response);
    roundTrips.push_back(nanosSince(start));
    if (response.result_int() != 200) {
      std::printf("unexpected answer %u\n", response.result_int());
      break;
    }
  }
  stream.close();
  boost::asio::post(serverIo, [&] { httpServer.stop(); });
  loop.join();
  const Samples trips = Samples::from(roundTrips);
  std::printf(
      "POST /v1/admission-review over loopback keep-alive: p50 %.2f ms, p99 %.2f ms, "
      "max %.2f ms over %zu reviews (target: p99 <= 100 ms)\n",
      trips.median() / 1e6, trips.p99() / 1e6, trips.max() / 1e6, trips.count());
}

void watchThroughput(bool quick) {
  std::printf("\n## Watch throughput (events applied to the cache)\n\n");
  const int pods = 1000, events = quick ? 5000 : 30000;
  testing::FakeApiServerOptions options;
  options.bookmarkEvery = 60000ms;
  testing::FakeApiServer server(options);
  Planner plan(42, pods / 6);
  KubectlText render(42, "");
  const std::string node = plan.nodeName();
  std::vector<Json> objects, changes;
  for (const auto& [pod, podText] : drawNode(plan, render, node, pods)) {
    if (pod.nodeName != node) continue;  // nominated, not bound: the watch does not see them
    objects.push_back(Json::parse(podText));
    server.upsertPod(objects.back());
  }
  auto changed = [&](int i) {  // the i-th event's object
    Json object = objects[std::size_t(i) % objects.size()];
    object["metadata"]["labels"]["generation"] = std::to_string(i);
    return object;
  };
  boost::asio::io_context io;
  kube::ClusterConfig config;
  config.host = "127.0.0.1";
  config.port = std::to_string(server.port());
  config.tls = false;
  config.token = "test-token";
  kube::Client client(io, config);
  kube::Store<policy::Pod> store("Pod", policy::parsePod);
  kube::Reflector reflector(
      io, client, {.listPath = "/api/v1/pods", .fieldSelector = "spec.nodeName=" + node}, store);
  reflector.start();
  auto deadline = steadyNow() + 30s;  // to sync, then for the watch to open
  while (!reflector.synced() && steadyNow() < deadline) io.run_one_for(50ms);
  if (!reflector.synced()) {
    std::printf("could not sync with the fake API server\n");
    return;
  }
  while (server.openWatches() == 0 && steadyNow() < deadline) io.run_one_for(10ms);
  // Pre-built modifications, so the producer spends its time in the server's encoding only.
  for (int i = 0; i < events; ++i) changes.push_back(changed(i));
  const std::uint64_t before = reflector.stats().events;
  const auto start = steadyNow();
  double producerSeconds = 0;
  std::thread producer([&] {
    for (auto& change : changes) server.upsertPod(std::move(change));
    producerSeconds = nanosSince(start) * 1e-9;
  });
  deadline = steadyNow() + 120s;
  while (reflector.stats().events - before < std::uint64_t(events) && steadyNow() < deadline)
    io.run_one_for(10ms);
  const double seconds = nanosSince(start) * 1e-9;
  producer.join();
  const std::uint64_t applied = reflector.stats().events - before;
  std::printf(
      "end to end over loopback (fake server encoding + chunked stream + split + trim-parse "
      "+ parsePod + store): %s events in %.2f s = %.0f events/s%s; the fake server took "
      "%.2f s to take and send them (%.0f events/s)\n",
      withCommas(applied).c_str(), seconds, applied / seconds,
      applied < std::uint64_t(events) ? "  (INCOMPLETE: timed out)" : "", producerSeconds,
      events / std::max(producerSeconds, 1e-9));
  reflector.stop();
  // The cache's own cost per event: the same events as text, parsed and applied.
  std::vector<std::string> lines;
  std::size_t bytes = 0;
  for (int i = 0; i < std::min(events, 10000); ++i) {
    lines.push_back(Json{{"type", "MODIFIED"}, {"object", changed(i)}}.dump());
    bytes += lines.back().size();
  }
  kube::Store<policy::Pod> offline("Pod", policy::parsePod);
  const auto offlineStart = steadyNow();
  for (const auto& line : lines) {
    policy::Diagnostics diagnostics;
    auto event = policy::parseKubernetesJsonText(line, diagnostics);
    if (event) offline.apply((*event)["type"].get<std::string>(), (*event)["object"]);
  }
  const double offlineSeconds = nanosSince(offlineStart) * 1e-9;
  std::printf(
      "cache only (trim-parse + parsePod + store, no network): %s events in %.3f s = "
      "%.0f events/s, %.1f µs/event, %.0f MB/s of watch text (%.1f KiB/event)\n",
      withCommas(lines.size()).c_str(), offlineSeconds, lines.size() / offlineSeconds,
      offlineSeconds * 1e6 / lines.size(), bytes / offlineSeconds / 1e6,
      bytes / 1024.0 / lines.size());
}

}  // namespace

int main(int argc, char** argv) {
  bool quick = false;
  Args args("usage: bench_kube [--quick]\n");
  if (auto status = args.flag("--quick", quick).parse(argc, argv)) return *status;
  std::printf("# bench_kube (%s; %s)\n", buildFlavour().c_str(), cpuModel().c_str());
  cacheMemory(quick);
  webhookLatency(quick);
  watchThroughput(quick);
  return 0;
}
