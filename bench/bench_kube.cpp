// The Kubernetes integration's figures (issue 6):
//   1. watch throughput: events per second applied to the cache, end to end over loopback
//      from the fake API server (tests/kube/fake_apiserver.h) through the client's stream
//      splitter and the reflector into a Store<Pod>; and the cache's own cost per event
//      (trim-parse + parsePod + store update) without the network;
//   2. memory per 1,000 pods cached: heap bytes (mallinfo2) held by a Store<Pod> of
//      kubectl-shaped pods, against keeping each object's JSON as a naive cache would;
//   3. webhook latency for 1,000 nodes × 30 pods: POST /v1/admission-review over loopback
//      keep-alive (HTTP server + BindingWebhook + StoreClusterCache), p50/p99, with a mix of
//      verdicts, and the decision alone.
//
// Run: ninja -C BUILD bench/bench_kube && BUILD/bench/bench_kube [--quick]
#include <malloc.h>

#include <atomic>
#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "bench/support/report.h"
#include "kube/reflector.h"
#include "policy/model.h"
#include "server/http_server.h"
#include "tests/kube/fake_apiserver.h"
#include "tests/support/admission_review.h"
#include "webhook/binding_webhook.h"

using namespace nodewarden;
using namespace nodewarden::bench;
using Json = nlohmann::json;
using namespace std::chrono_literals;

namespace {

// A pod as `kubectl get pod -o json` prints one from a Deployment: managed fields, probes,
// env, volumes and container statuses included (the cache trims what it does not read).
Json kubectlPod(Random& random, const std::string& ns, const std::string& name,
                const std::string& node, std::int64_t priority, std::int64_t memoryMi,
                std::int64_t cpuMilli) {
  const std::string uid = random.uuid();
  auto container = [&](const std::string& cname, std::int64_t mem, std::int64_t cpu) {
    return Json{
        {"name", cname},
        {"image", "registry.example.com/" + cname + ":1.2." + std::to_string(random.between(0, 9))},
        {"imagePullPolicy", "IfNotPresent"},
        {"ports", Json::array({{{"containerPort", 8080}, {"name", "http"}, {"protocol", "TCP"}}})},
        {"env", Json::array({{{"name", "LOG_LEVEL"}, {"value", "info"}},
                             {{"name", "POD_NAME"},
                              {"valueFrom", {{"fieldRef", {{"fieldPath", "metadata.name"}}}}}}})},
        {"resources",
         {{"requests",
           {{"memory", std::to_string(mem) + "Mi"}, {"cpu", std::to_string(cpu) + "m"}}},
          {"limits", {{"memory", std::to_string(mem * 2) + "Mi"}}}}},
        {"readinessProbe",
         {{"httpGet", {{"path", "/ready"}, {"port", 8080}}}, {"periodSeconds", 10}}},
        {"volumeMounts",
         Json::array({{{"name", "kube-api-access"},
                       {"mountPath", "/var/run/secrets/kubernetes.io/serviceaccount"},
                       {"readOnly", true}}})},
        {"terminationMessagePath", "/dev/termination-log"},
    };
  };
  Json status = {
      {"phase", "Running"},
      {"qosClass", "Burstable"},
      {"hostIP", "10.0." + std::to_string(random.between(0, 255)) + ".1"},
      {"podIP", "10.244." + std::to_string(random.between(0, 255)) + "." +
                    std::to_string(random.between(2, 254))},
      {"startTime", "2026-11-20T10:00:00Z"},
      {"conditions",
       Json::array(
           {{{"type", "Ready"}, {"status", "True"}, {"lastTransitionTime", "2026-11-20T10:00:05Z"}},
            {{"type", "PodScheduled"},
             {"status", "True"},
             {"lastTransitionTime", "2026-11-20T10:00:00Z"}}})},
      {"containerStatuses",
       Json::array({{{"name", "app"},
                     {"ready", true},
                     {"restartCount", 0},
                     {"image", "registry.example.com/app:1.2.3"},
                     {"imageID", "registry.example.com/app@sha256:" + random.hex(64)},
                     {"containerID", "containerd://" + random.hex(64)},
                     {"state", {{"running", {{"startedAt", "2026-11-20T10:00:02Z"}}}}}}})},
  };
  if (node.empty()) status = {{"phase", "Pending"}};
  Json pod = {
      {"apiVersion", "v1"},
      {"kind", "Pod"},
      {"metadata",
       {{"name", name},
        {"namespace", ns},
        {"uid", uid},
        {"resourceVersion", std::to_string(random.between(1000, 9'000'000))},
        {"creationTimestamp", "2026-11-20T10:00:00Z"},
        {"generateName", name.substr(0, name.size() - 5)},
        {"labels",
         {{"app", name.substr(0, name.size() - 6)},
          {"pod-template-hash", random.hex(10)},
          {"app.kubernetes.io/part-of", "shop"}}},
        {"annotations", {{"kubectl.kubernetes.io/restartedAt", "2026-11-19T08:00:00Z"}}},
        {"ownerReferences", Json::array({{{"apiVersion", "apps/v1"},
                                          {"kind", "ReplicaSet"},
                                          {"name", name.substr(0, name.size() - 6)},
                                          {"uid", random.uuid()},
                                          {"controller", true},
                                          {"blockOwnerDeletion", true}}})},
        {"managedFields",
         Json::array({{{"manager", "kube-controller-manager"},
                       {"operation", "Update"},
                       {"apiVersion", "v1"},
                       {"time", "2026-11-20T10:00:00Z"},
                       {"fieldsType", "FieldsV1"},
                       {"fieldsV1", {{"f:metadata", {{"f:labels", Json::object()}}}}}}})}}},
      {"spec",
       {{"containers",
         Json::array({container("app", memoryMi, cpuMilli), container("sidecar", 32, 10)})},
        {"priority", priority},
        {"schedulerName", "default-scheduler"},
        {"serviceAccountName", "default"},
        {"terminationGracePeriodSeconds", 30},
        {"dnsPolicy", "ClusterFirst"},
        {"restartPolicy", "Always"},
        {"enableServiceLinks", true},
        {"preemptionPolicy", "PreemptLowerPriority"},
        {"tolerations", Json::array({{{"key", "node.kubernetes.io/not-ready"},
                                      {"operator", "Exists"},
                                      {"effect", "NoExecute"},
                                      {"tolerationSeconds", 300}},
                                     {{"key", "node.kubernetes.io/unreachable"},
                                      {"operator", "Exists"},
                                      {"effect", "NoExecute"},
                                      {"tolerationSeconds", 300}}})},
        {"volumes",
         Json::array({{{"name", "kube-api-access"}, {"projected", {{"defaultMode", 420}}}}})}}},
      {"status", status},
  };
  if (!node.empty()) pod["spec"]["nodeName"] = node;
  return pod;
}

Json nodeObject(const std::string& name, const std::string& memory, const std::string& cpu) {
  return {{"apiVersion", "v1"},
          {"kind", "Node"},
          {"metadata", {{"name", name}, {"labels", {{"kubernetes.io/hostname", name}}}}},
          {"status",
           {{"capacity", {{"cpu", cpu}, {"memory", memory}, {"pods", "110"}}},
            {"allocatable", {{"cpu", cpu}, {"memory", memory}, {"pods", "110"}}},
            {"conditions", Json::array({{{"type", "Ready"}, {"status", "True"}},
                                        {{"type", "MemoryPressure"}, {"status", "False"}}})}}}};
}

// ----------------------------------------------------------------------------------------------
// 1. Watch throughput

void watchThroughput(bool quick) {
  std::printf("\n## Watch throughput (events applied to the cache)\n\n");
  const int pods = 1000;
  const int events = quick ? 5000 : 30000;
  testing::FakeApiServerOptions options;
  options.bookmarkEvery = std::chrono::milliseconds(60000);
  testing::FakeApiServer server(options);
  Random random(42);
  std::vector<Json> objects;
  for (int i = 0; i < pods; ++i) {
    objects.push_back(kubectlPod(random, "shop", "web-" + std::to_string(100000 + i).substr(1),
                                 "node-1", 0, 64 + i % 64, 50));
    server.upsertPod(objects.back());
  }
  boost::asio::io_context io;
  kube::ClusterConfig config;
  config.host = "127.0.0.1";
  config.port = std::to_string(server.port());
  config.tls = false;
  config.token = "test-token";
  kube::Client client(io, config);
  kube::Store<policy::Pod> store("Pod", policy::parsePod);
  kube::ReflectorOptions reflectorOptions;
  reflectorOptions.listPath = "/api/v1/pods";
  reflectorOptions.fieldSelector = "spec.nodeName=node-1";
  kube::Reflector reflector(io, client, reflectorOptions, store);
  reflector.start();
  const auto syncDeadline = steadyNow() + 30s;
  while (!reflector.synced() && steadyNow() < syncDeadline) io.run_one_for(50ms);
  if (!reflector.synced()) {
    std::printf("could not sync with the fake API server\n");
    return;
  }
  // Let the watch open.
  const auto watchDeadline = steadyNow() + 5s;
  while (server.openWatches() == 0 && steadyNow() < watchDeadline) io.run_one_for(10ms);

  const std::uint64_t before = reflector.stats().events;
  // Pre-built modifications, so the producer spends its time in the server's encoding only.
  std::vector<Json> changes;
  changes.reserve(events);
  for (int i = 0; i < events; ++i) {
    Json changed = objects[i % pods];
    changed["metadata"]["labels"]["generation"] = std::to_string(i);
    changes.push_back(std::move(changed));
  }
  std::atomic<bool> produced{false};
  const auto start = steadyNow();
  double producerSeconds = 0;
  std::thread producer([&] {
    for (auto& change : changes) server.upsertPod(std::move(change));
    producerSeconds = std::chrono::duration<double>(steadyNow() - start).count();
    produced = true;
  });
  const auto deadline = steadyNow() + 120s;
  while (reflector.stats().events - before < std::uint64_t(events) && steadyNow() < deadline)
    io.run_one_for(10ms);
  const double seconds = std::chrono::duration<double>(steadyNow() - start).count();
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
  for (int i = 0; i < std::min(events, 10000); ++i) {
    Json changed = objects[i % pods];
    changed["metadata"]["labels"]["generation"] = std::to_string(i);
    lines.push_back(Json{{"type", "MODIFIED"}, {"object", changed}}.dump());
  }
  std::size_t bytes = 0;
  for (const auto& line : lines) bytes += line.size();
  kube::Store<policy::Pod> offline("Pod", policy::parsePod);
  const auto offlineStart = steadyNow();
  for (const auto& line : lines) {
    policy::Diagnostics diagnostics;
    auto event = policy::parseKubernetesJsonText(line, diagnostics);
    if (!event) continue;
    offline.apply((*event)["type"].get<std::string>(), (*event)["object"]);
  }
  const double offlineSeconds = std::chrono::duration<double>(steadyNow() - offlineStart).count();
  std::printf(
      "cache only (trim-parse + parsePod + store, no network): %s events in %.3f s = "
      "%.0f events/s, %.1f µs/event, %.0f MB/s of watch text (%.1f KiB/event)\n",
      withCommas(lines.size()).c_str(), offlineSeconds, lines.size() / offlineSeconds,
      offlineSeconds * 1e6 / lines.size(), bytes / offlineSeconds / 1e6,
      bytes / 1024.0 / lines.size());
}

// ----------------------------------------------------------------------------------------------
// 2. Memory per 1,000 pods

void cacheMemory(bool quick) {
  std::printf("\n## Memory per 1,000 pods cached\n\n");
  for (int count : quick ? std::vector<int>{1000} : std::vector<int>{1000, 10000}) {
    Random random(7);
    std::vector<std::string> texts;
    std::size_t textBytes = 0;
    for (int i = 0; i < count; ++i) {
      texts.push_back(kubectlPod(random, "shop", "web-" + std::to_string(100000 + i).substr(1),
                                 "node-" + std::to_string(i % 30), i % 3 * 1000, 128, 100)
                          .dump());
      textBytes += texts.back().size();
    }
    // Store<Pod>: what nodewarden keeps.
    std::size_t storeBytes = 0;
    {
      const std::size_t base = heapInUse(true);
      auto* store = new kube::Store<policy::Pod>("Pod", policy::parsePod);
      for (const auto& text : texts) {
        policy::Diagnostics diagnostics;
        auto object = policy::parseKubernetesJsonText(text, diagnostics);
        if (object) store->apply("ADDED", *object);
      }
      storeBytes = heapInUse(true) - base;
      if (store->objects().size() != std::size_t(count))
        std::printf("warning: %zu of %d pods cached\n", store->objects().size(), count);
      delete store;
    }
    // A naive cache: each object's full JSON DOM.
    std::size_t domBytes = 0;
    {
      const std::size_t base = heapInUse(true);
      auto* doms = new std::vector<Json>();
      doms->reserve(count);
      for (const auto& text : texts) doms->push_back(Json::parse(text));
      domBytes = heapInUse(true) - base;
      delete doms;
    }
    std::printf(
        "%6d pods: Store<Pod> %.2f MiB = %.2f MiB per 1,000 pods (%.0f bytes/pod); "
        "full JSON DOM %.2f MiB per 1,000 pods; kubectl JSON text %.2f MiB per 1,000\n",
        count, storeBytes / 1048576.0, storeBytes / 1048576.0 * 1000 / count,
        double(storeBytes) / count, domBytes / 1048576.0 * 1000 / count,
        textBytes / 1048576.0 * 1000 / count);
  }
}

// ----------------------------------------------------------------------------------------------
// 3. Webhook latency

// A dry-run review (the webhook decides, nothing acts).
std::string reviewBody(const std::string& uid, const std::string& ns, const std::string& name,
                       const std::string& node) {
  return testing::bindingReview(uid, ns, name, node, "", true).dump();
}

void webhookLatency(bool quick) {
  std::printf("\n## Webhook latency: 1,000 nodes x 30 pods\n\n");
  const int nodes = 1000, podsPerNode = 30, pending = 200;
  const int reviews = quick ? 500 : 3000;
  kube::Store<policy::Pod> podStore("Pod", policy::parsePod);
  kube::Store<policy::Node> nodeStore("Node", policy::parseNode);
  kube::Store<policy::PriorityClass> classStore("PriorityClass", policy::parsePriorityClass);
  kube::Store<policy::PodDisruptionBudget> pdbStore("PodDisruptionBudget",
                                                    policy::parsePodDisruptionBudget);
  Random random(99);
  std::vector<Json> nodeObjects, podObjects;
  for (int n = 0; n < nodes; ++n)
    nodeObjects.push_back(nodeObject("node-" + std::to_string(n), "16Gi", "8"));
  for (int n = 0; n < nodes; ++n)
    for (int p = 0; p < podsPerNode; ++p)
      podObjects.push_back(
          kubectlPod(random, "ns-" + std::to_string(p % 20),
                     "pod-" + std::to_string(n) + "-" + std::to_string(p) + "-abcde",
                     "node-" + std::to_string(n), p % 4 * 1000, 400 + random.between(0, 120), 200));
  // Pending pods under review: most fit somewhere (admit), some need preemption (priority
  // 5000, large), some cannot preempt (Never).
  std::vector<std::pair<std::string, std::string>> reviewed;  // pod key parts, node
  for (int i = 0; i < pending; ++i) {
    const bool large = i % 4 == 0;
    Json pod =
        kubectlPod(random, "pending", "new-" + std::to_string(100000 + i).substr(1) + "-xyzwv", "",
                   large ? 5000 : 0, large ? 4096 : 128, 100);
    if (i % 8 == 4) pod["spec"]["preemptionPolicy"] = "Never";
    podObjects.push_back(pod);
    reviewed.emplace_back(pod["metadata"]["name"].get<std::string>(),
                          "node-" + std::to_string(random.between(0, nodes - 1)));
  }
  auto load = [](auto& store, std::vector<Json>& objects) {
    std::vector<Json> trimmed;
    trimmed.reserve(objects.size());
    for (const auto& object : objects) {
      policy::Diagnostics diagnostics;
      auto parsed = policy::parseKubernetesJsonText(object.dump(), diagnostics);
      if (parsed) trimmed.push_back(std::move(*parsed));
    }
    store.replace(std::move(trimmed));
  };
  load(nodeStore, nodeObjects);
  load(podStore, podObjects);
  webhook::StoreClusterCache cache(podStore, nodeStore, classStore, pdbStore);
  const auto buildStart = steadyNow();
  cache.refresh();
  std::printf("index of %s pods on %d nodes built in %.1f ms\n",
              withCommas(podStore.objects().size()).c_str(), nodes, nanosSince(buildStart) / 1e6);
  webhook::RecordingAdmissionActions actions;
  webhook::BindingWebhook webhook(cache, actions, policy::Policy{});

  // The decision alone.
  std::vector<double> decide;
  std::map<std::string, int> verdicts;
  for (int i = 0; i < reviews; ++i) {
    const auto& [name, node] = reviewed[i % reviewed.size()];
    server::HttpRequest request;
    request.method = "POST";
    request.target = "/v1/admission-review";
    request.body = reviewBody("r-" + std::to_string(i), "pending", name, node);
    const auto start = steadyNow();
    cache.refresh();
    server::HttpResponse response = webhook.handle(request);
    decide.push_back(nanosSince(start));
    const Json answer = Json::parse(response.body, nullptr, false);
    std::string verdict = "?";
    if (answer.is_object() && answer.contains("response"))
      verdict = answer["response"]["allowed"] == true ? "allowed" : "denied";
    ++verdicts[verdict];
  }
  const Samples decideSamples = Samples::from(decide);
  std::printf(
      "decision (parse review + refresh + admitPod + answer): p50 %.1f µs, p99 %.1f µs "
      "over %d reviews (",
      decideSamples.median() / 1e3, decideSamples.p99() / 1e3, reviews);
  for (const auto& [verdict, n] : verdicts) std::printf("%s %d ", verdict.c_str(), n);
  std::printf(")\n");

  // Over loopback: the HTTP server on its own loop thread, a keep-alive client here.
  boost::asio::io_context serverIo;
  server::HttpServerOptions httpOptions;
  httpOptions.address = "127.0.0.1";
  httpOptions.port = 0;
  server::HttpServer http(serverIo, httpOptions, [&](const server::HttpRequest& request) {
    cache.refresh();
    return webhook.handle(request);
  });
  if (!http.start()) {
    std::printf("cannot start the HTTP server\n");
    return;
  }
  std::thread loop([&] { serverIo.run(); });
  std::vector<double> roundTrips;
  {
    namespace beast = boost::beast;
    boost::asio::io_context clientIo;
    beast::tcp_stream stream(clientIo);
    boost::asio::ip::tcp::endpoint endpoint(boost::asio::ip::make_address("127.0.0.1"),
                                            http.port());
    stream.connect(endpoint);
    for (int i = 0; i < reviews; ++i) {
      const auto& [name, node] = reviewed[i % reviewed.size()];
      beast::http::request<beast::http::string_body> request{beast::http::verb::post,
                                                             "/v1/admission-review", 11};
      request.set(beast::http::field::host, "127.0.0.1");
      request.set(beast::http::field::content_type, "application/json");
      request.body() = reviewBody("h-" + std::to_string(i), "pending", name, node);
      request.prepare_payload();
      const auto start = steadyNow();
      beast::http::write(stream, request);
      beast::flat_buffer buffer;
      beast::http::response<beast::http::string_body> response;
      beast::http::read(stream, buffer, response);
      roundTrips.push_back(nanosSince(start));
      if (response.result_int() != 200) {
        std::printf("unexpected answer %u\n", response.result_int());
        break;
      }
    }
  }
  boost::asio::post(serverIo, [&] { http.stop(); });
  loop.join();
  const Samples trips = Samples::from(roundTrips);
  std::printf(
      "POST /v1/admission-review over loopback keep-alive: p50 %.2f ms, p99 %.2f ms, "
      "max %.2f ms over %zu reviews (target: p99 <= 100 ms)\n",
      trips.median() / 1e6, trips.p99() / 1e6, trips.nanos.empty() ? 0 : trips.nanos.back() / 1e6,
      trips.count());
}

}  // namespace

int main(int argc, char** argv) {
  bool quick = false;
  Args args("usage: bench_kube [--quick]\n");
  args.flag("--quick", quick);
  if (auto status = args.parse(argc, argv)) return *status;
  std::printf("# bench_kube (%s; %s)\n", buildFlavour().c_str(), cpuModel().c_str());
  cacheMemory(quick);
  webhookLatency(quick);
  watchThroughput(quick);
  return 0;
}
