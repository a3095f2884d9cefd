// The agent's HTTP surface (docs/reference.md §7) over a real socket, on a real sandbox node:
// health, metrics, the live state, admission, and bad requests that must not hurt it.
#include <doctest/doctest.h>

#include <sys/wait.h>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <thread>

#include "tests/e2e/e2e_env.h"

using namespace nodewarden;
using namespace nodewarden::e2e;
using namespace std::chrono_literals;

namespace {

Json parseJson(const HttpReply& reply) {
  Json json = Json::parse(reply.body, nullptr, false);
  if (json.is_discarded()) return nullptr;
  return json;
}

std::string contentType(const HttpReply& reply) {
  auto it = reply.headers.find("content-type");
  return it == reply.headers.end() ? "" : it->second;
}

// A 400 (or other error) answer with a JSON body {"error": "..."}.
void checkJsonError(const HttpReply& reply, int status) {
  CAPTURE(reply.body);
  CAPTURE(reply.error);
  CHECK(reply.status == status);
  CHECK(contentType(reply).starts_with("application/json"));
  const Json body = parseJson(reply);
  REQUIRE(body.is_object());
  REQUIRE(body.contains("error"));
  CHECK(body["error"].is_string());
  CHECK_FALSE(body["error"].get<std::string>().empty());
}

}  // namespace

TEST_CASE("HTTP: health, metrics, state, admission, and bad requests answered 400") {
  cgroups::Sandbox sandbox = makeSandbox(512 * kMiB);
  TempDir manifests;
  TempDir files;
  const std::string policyFile = files.file("policy.json");
  writeFile(policyFile, R"({
    "evictionHard": { "allocatableMemory.available": "100Mi" },
    "housekeepingInterval": "500ms"
  })");
  PodSpec web =
      PodSpec("e2e", "web").withPriority(1000).request("memory", "128Mi").request("cpu", "100m");
  PodSpec batch = PodSpec("e2e", "batch").withPriority(0).request("memory", "64Mi");
  const std::string webCgroup = addPod(sandbox, &manifests, web);
  const std::string batchCgroup = addPod(sandbox, &manifests, batch);
  const pid_t webPid = spawnAllocator(sandbox, webCgroup, 20 * kMiB);
  const pid_t batchPid = spawnAllocator(sandbox, batchCgroup, 10 * kMiB);

  AgentConfig config;
  config.policyFile = policyFile;
  config.manifestsDir = manifests.path();
  config.kubepods = sandbox.kubepods();
  config.extraArgs = {"--admission-routes"};  // POST /v1/admit is tested below
  AgentProcess agent(config);

  // On a cgroup v1 host the agent warns once at start, in the kubelet's words (its
  // CgroupV1MaintenanceModeWarning); on pure v2 (the VM lane) it says nothing of the kind.
  const std::vector<LogLine> v1Warnings = agent.events("cgroup-v1");
  if (hierarchy().memoryVersion == cgroups::Version::V1) {
    REQUIRE_MESSAGE(v1Warnings.size() == 1, agent.logText());
    CHECK(v1Warnings[0].field("level") == "warn");
    CHECK(v1Warnings[0].field("message") ==
          "cgroup v1 support is in maintenance mode, please migrate to cgroup v2");
  } else {
    CHECK(v1Warnings.empty());
  }
  const std::uint16_t port = agent.port();

  SUBCASE("health") {
    for (const char* path : {"/healthz", "/readyz"}) {
      CAPTURE(path);
      const HttpReply reply = httpRequest(port, "GET", path);
      CHECK(reply.error.empty());
      CHECK(reply.status == 200);
      const Json body = parseJson(reply);
      REQUIRE(body.is_object());
      CHECK(body.contains("status"));
    }
    CHECK(parseJson(httpRequest(port, "GET", "/healthz"))["status"] == "ok");
    CHECK(parseJson(httpRequest(port, "GET", "/readyz"))["status"] == "ready");
  }

  SUBCASE("metrics") {
    const HttpReply reply = httpRequest(port, "GET", "/metrics");
    CHECK(reply.error.empty());
    REQUIRE(reply.status == 200);
    CHECK(contentType(reply).starts_with("text/plain"));
    const std::string& text = reply.body;
    for (const char* family : {"nodewarden_evictions_total", "nodewarden_admissions_total",
                               "nodewarden_signal_available_bytes", "nodewarden_threshold_met",
                               "nodewarden_node_condition", "nodewarden_eviction_latency_seconds",
                               "nodewarden_scan_duration_seconds", "nodewarden_pods"}) {
      CAPTURE(family);
      CHECK(text.find(std::string("# TYPE ") + family + " ") != std::string::npos);
    }
    CHECK(text.find("# TYPE nodewarden_evictions_total counter") != std::string::npos);
    CHECK(text.find("# TYPE nodewarden_eviction_latency_seconds histogram") != std::string::npos);
    CHECK(metricValue(text, "nodewarden_eviction_latency_seconds_bucket", R"(le="+Inf")") == 0.0);
    CHECK(metricValue(text, "nodewarden_eviction_latency_seconds_count") == 0.0);
    CHECK(metricValue(text, "nodewarden_scan_duration_seconds_count").value_or(0) >= 1.0);
    CHECK(text.find("nodewarden_scan_duration_seconds_bucket{le=") != std::string::npos);
    CHECK(metricValue(text, "nodewarden_pods") == 2.0);
    const auto available = metricValue(text, "nodewarden_signal_available_bytes",
                                       R"(signal="allocatableMemory.available")");
    REQUIRE(available.has_value());
    CHECK(*available > 300.0 * kMiB);
    CHECK(*available <= 512.0 * kMiB);
    CHECK(metricValue(text, "nodewarden_threshold_met",
                      R"(signal="allocatableMemory.available",kind="hard")") == 0.0);
    CHECK(metricValue(text, "nodewarden_node_condition", R"(condition="MemoryPressure")") == 0.0);
  }

  SUBCASE("state") {
    const HttpReply reply = httpRequest(port, "GET", "/v1/state");
    REQUIRE(reply.status == 200);
    CHECK(contentType(reply).starts_with("application/json"));
    const Json state = parseJson(reply);
    REQUIRE(state.is_object());
    for (const char* member : {"node", "signals", "conditions", "ranking", "evict"}) {
      CAPTURE(member);
      CHECK(state.contains(member));
    }
    CHECK(state["node"] == "e2e-node");
    const Json signal = signalOf(state, "allocatableMemory.available", "hard");
    REQUIRE(signal.is_object());
    CHECK(signal["threshold"] == 100 * std::int64_t(kMiB));
    CHECK(signal["capacity"] == 512 * std::int64_t(kMiB));
    CHECK(signal["met"] == false);
    CHECK(signal["available"].get<std::int64_t>() > 300 * std::int64_t(kMiB));
    CHECK(state["conditions"].empty());
    const std::vector<std::string> expectedRanking = {batch.key(), web.key()};
    CHECK(memoryRanking(state) == expectedRanking);
    CHECK(state["evict"].empty());
  }

  SUBCASE("nodewarden status reads the same state") {
    const std::string agentUrl = "http://127.0.0.1:" + std::to_string(port);
    auto run = [&](const std::string& args) {
      const std::string out = std::string(std::getenv("TMPDIR") ? std::getenv("TMPDIR") : "/tmp") +
                              "/nodewarden-e2e-status-" + std::to_string(::getpid());
      const std::string command = std::string("'") + NODEWARDEN_BINARY + "' status --agent " +
                                  agentUrl + " " + args + " > '" + out + "' 2>&1";
      const int status = std::system(command.c_str());
      std::ifstream in(out);
      std::stringstream text;
      text << in.rdbuf();
      std::remove(out.c_str());
      return std::make_pair(WIFEXITED(status) ? WEXITSTATUS(status) : -1, text.str());
    };
    auto [jsonStatus, jsonText] = run("-o json");
    REQUIRE_MESSAGE(jsonStatus == 0, jsonText);
    const Json state = Json::parse(jsonText);
    CHECK(state["node"] == "e2e-node");
    CHECK(state["ranking"]["memory"].size() == 2);
    auto [tableStatus, table] = run("");
    REQUIRE_MESSAGE(tableStatus == 0, table);
    CHECK(table.find("Agent " + agentUrl + ", node e2e-node") != std::string::npos);
    CHECK(table.find("allocatableMemory.available  hard") != std::string::npos);
    CHECK(table.find("Conditions: none") != std::string::npos);
    CHECK(table.find("Evicting now: nothing") != std::string::npos);
    // --watch: one JSON document per line, as many as asked for.
    auto [watchStatus, watched] = run("--watch --interval 0.2 --count 3 -o json");
    REQUIRE_MESSAGE(watchStatus == 0, watched);
    int documents = 0;
    std::istringstream lines(watched);
    for (std::string line; std::getline(lines, line);) {
      if (line.empty()) continue;
      CHECK(Json::parse(line)["node"] == "e2e-node");
      ++documents;
    }
    CHECK(documents == 3);
    // An agent that is not there: exit 1 with the reason.
    const std::string gone = std::string("'") + NODEWARDEN_BINARY +
                             "' status --agent http://127.0.0.1:1 > /dev/null 2>&1";
    const int goneStatus = std::system(gone.c_str());
    CHECK((WIFEXITED(goneStatus) && WEXITSTATUS(goneStatus) == 1));
  }

  SUBCASE("admission") {
    PodSpec small =
        PodSpec("e2e", "small").withPriority(0).request("memory", "64Mi").request("cpu", "100m");
    small.uid = makeUid();
    HttpReply reply = httpRequest(port, "POST", "/v1/admit", podObject(small).dump());
    CAPTURE(reply.body);
    REQUIRE(reply.status == 200);
    Json verdict = parseJson(reply);
    REQUIRE(verdict.is_object());
    CHECK(verdict["pod"] == small.key());
    CHECK(verdict["node"] == "e2e-node");
    CHECK(verdict["verdict"] == "admit");
    CHECK(verdict["victims"].empty());

    // 2Gi on a 512Mi node: nothing of lower priority to preempt, so a reject.
    PodSpec huge = PodSpec("e2e", "huge").withPriority(0).request("memory", "2Gi");
    huge.uid = makeUid();
    reply = httpRequest(port, "POST", "/v1/admit", podObject(huge).dump());
    CAPTURE(reply.body);
    REQUIRE(reply.status == 200);
    verdict = parseJson(reply);
    REQUIRE(verdict.is_object());
    CHECK(verdict["pod"] == huge.key());
    CHECK(verdict["verdict"] == "reject");
    CHECK(verdict["reason"] == "OutOfmemory");
    CHECK(verdict["message"].get<std::string>().starts_with(
        "Node didn't have enough resource: memory"));

    const std::string text = httpRequest(port, "GET", "/metrics").body;
    CHECK(text.find("nodewarden_admissions_total{verdict=\"admit\"") != std::string::npos);
    CHECK(metricValue(text, "nodewarden_admissions_total",
                      R"(verdict="reject",reason="OutOfmemory")") == 1.0);
    CHECK(agent.events("admission").size() == 2);
  }

  SUBCASE("bad requests are answered with a JSON error, and the agent keeps serving") {
    // Not HTTP at all: the start of a TLS ClientHello, then noise.
    static const char kGarbage[] =
        "\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03\xde\xad\xbe\xef"
        "garbage\r\n\r\n";
    const std::string garbage(kGarbage, sizeof kGarbage - 1);  // keeps the embedded NULs
    checkJsonError(httpRaw(port, garbage), 400);
    checkJsonError(httpRaw(port, "GET /healthz HTTP/1.1\r\nHost: x\r\nBad Header\r\n\r\n"), 400);
    // Malformed JSON body, JSON that is not a Pod, an empty body.
    checkJsonError(httpRequest(port, "POST", "/v1/admit", R"({"metadata": {"name": )"), 400);
    checkJsonError(httpRequest(port, "POST", "/v1/admit", "[1, 2, 3]"), 400);
    checkJsonError(httpRequest(port, "POST", "/v1/admit", ""), 400);
    // Wrong method, unknown path.
    checkJsonError(httpRequest(port, "POST", "/healthz", "{}"), 405);
    checkJsonError(httpRequest(port, "GET", "/v1/admit"), 405);
    checkJsonError(httpRequest(port, "GET", "/no/such/path"), 404);
    // Bytes that are not UTF-8 in the target and in a body: a JSON error like any other (the
    // JSON writer used to throw here: 500 "internal error"), never the raw bytes in the log.
    checkJsonError(httpRaw(port, "GET /no/\xff\xfe\xc0\xaf HTTP/1.1\r\nHost: x\r\n\r\n"), 404);
    checkJsonError(httpRaw(port,
                           "POST /healthz\xff HTTP/1.1\r\nHost: x\r\n"
                           "Content-Length: 4\r\n\r\n\xff\xfe{}"),
                   404);
    checkJsonError(httpRequest(port, "POST", "/v1/admit", "{\"kind\": \"\xff\xfe\"}"), 400);
    for (const LogLine& line : agent.lines()) {
      CAPTURE(line.raw);
      CHECK(line.json.is_object());  // every line parses: no byte that is not UTF-8
    }

    CHECK(agent.running());
    CHECK(httpRequest(port, "GET", "/healthz").status == 200);
    CHECK(getState(port)["node"] == "e2e-node");
  }

  CHECK(alive(webPid));
  CHECK(alive(batchPid));
  CHECK(agent.events("evict").empty());
  if (std::getenv("E2E_VERBOSE")) MESSAGE(agent.logText());
  const std::optional<int> status = agent.stop();
  REQUIRE(status.has_value());
  CHECK(WIFEXITED(*status));
  CHECK(WEXITSTATUS(*status) == 0);
}
