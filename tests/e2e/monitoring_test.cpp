// The monitoring that ships (systemd/kubernetes/components/monitoring) against the real
// binaries, with Debian's prometheus package (promtool and the server; ./dev installs it):
//
// - "metrics lint": `promtool check metrics` on the live /metrics of a running agent (dry run,
//   on a sandbox node whose hard threshold is met, with admissions answered) and of a running
//   `nodewarden webhook` (its API server unreachable, a review answered allow-unchecked and a
//   malformed one) — every family and sample they export passes Prometheus' linter.
// - "prometheus scrape": the real Prometheus server on 127.0.0.1 (a free port, a temporary
//   storage directory, a temporary config scraping the agent and the webhook every second,
//   the component's alert rules loaded) ingests both targets: up == 1, the agent's
//   nodewarden_* series with their values, the five rules loaded and evaluated, and
//   NodewardenThresholdMet pending for the live threshold while NodewardenAgentDown is not.
//
// Each test case exits 77 (skipped) with a message when the program it needs is absent;
// the whole executable skips without root or writable cgroups (e2e_env). Prometheus is
// killed and its directory removed when a case ends, also on failure, on SIGTERM/SIGINT
// (meson's timeout) while waiting, and — if the test itself was SIGKILLed — by the next run,
// which removes the directories of test processes that are gone.
#include <doctest/doctest.h>

#include <arpa/inet.h>
#include <dirent.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <thread>

#include "tests/e2e/e2e_env.h"

#ifndef NODEWARDEN_SOURCE_ROOT
#error "the build passes NODEWARDEN_SOURCE_ROOT"
#endif

using namespace nodewarden;
using namespace nodewarden::e2e;
using namespace std::chrono_literals;

namespace {

constexpr const char* kPrometheusDirPrefix = "nodewarden-prometheus-";

// SIGTERM or SIGINT (meson's timeout) sets this; every wait here checks it and fails the
// test, so that the guards' destructors run and kill and remove what the test made.
volatile std::sig_atomic_t gTerminated = 0;

void installTerminationHandler() {
  struct sigaction action {};
  action.sa_handler = [](int) { gTerminated = 1; };
  ::sigemptyset(&action.sa_mask);
  ::sigaction(SIGTERM, &action, nullptr);
  ::sigaction(SIGINT, &action, nullptr);
}

void checkNotTerminated() {
  REQUIRE_MESSAGE(gTerminated == 0, "terminated by a signal: cleaning up");
}

// Polls like waitUntil, but gives up early when the test is being terminated.
bool pollUntil(const std::function<bool()>& condition, Millis timeout, Millis step) {
  const bool done = waitUntil([&] { return gTerminated != 0 || condition(); }, timeout, step);
  checkNotTerminated();
  return done;
}

// `name` on $PATH, else in /usr/bin (where Debian installs it); "" when absent.
std::string findProgram(const std::string& name) {
  const char* path = std::getenv("PATH");
  std::stringstream dirs(path != nullptr ? path : "");
  std::vector<std::string> candidates;
  for (std::string dir; std::getline(dirs, dir, ':');) {
    if (!dir.empty()) candidates.push_back(dir + "/" + name);
  }
  candidates.push_back("/usr/bin/" + name);
  for (const std::string& candidate : candidates) {
    struct stat info {};
    if (::stat(candidate.c_str(), &info) == 0 && S_ISREG(info.st_mode) &&
        ::access(candidate.c_str(), X_OK) == 0) {
      return candidate;
    }
  }
  return "";
}

// The program's path, or a skip (exit 77, meson's "skipped") saying what is missing. Called
// first in a test case, before anything exists that would need cleaning up.
std::string requireProgram(const std::string& name) {
  const std::string found = findProgram(name);
  if (found.empty()) {
    std::fprintf(stderr,
                 "SKIP: %s is not installed (Debian's prometheus package has it; ./dev "
                 "installs it)\n",
                 name.c_str());
    std::fflush(stderr);
    std::_Exit(77);
  }
  return found;
}

std::string readText(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// A child process running `argv` with stdin from `input` (or /dev/null) and stdout and
// stderr to `output`; it dies with the test (PR_SET_PDEATHSIG) and is killed and reaped when
// the guard is destroyed.
class Child {
 public:
  Child(const std::vector<std::string>& argv, const std::string& output,
        const std::string& input = "/dev/null") {
    const int in = ::open(input.c_str(), O_RDONLY | O_CLOEXEC);
    REQUIRE_MESSAGE(in >= 0, input << ": " << std::strerror(errno));
    const int out = ::open(output.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (out < 0) ::close(in);
    REQUIRE_MESSAGE(out >= 0, output << ": " << std::strerror(errno));
    std::vector<std::string> args = argv;
    std::vector<char*> pointers;
    for (std::string& arg : args) pointers.push_back(arg.data());
    pointers.push_back(nullptr);
    const pid_t parent = ::getpid();
    pid_ = ::fork();
    if (pid_ == 0) {
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (::getppid() != parent) ::_exit(112);
      ::signal(SIGTERM, SIG_DFL);
      ::signal(SIGINT, SIG_DFL);
      ::dup2(in, STDIN_FILENO);
      ::dup2(out, STDOUT_FILENO);
      ::dup2(out, STDERR_FILENO);
      ::close_range(3, ~0U, 0);
      ::execv(pointers[0], pointers.data());
      ::_exit(127);
    }
    ::close(in);
    ::close(out);
    REQUIRE_MESSAGE(pid_ > 0, "fork: " << std::strerror(errno));
  }
  ~Child() { kill(); }
  Child(const Child&) = delete;
  Child& operator=(const Child&) = delete;

  pid_t pid() const { return pid_; }
  bool running() {
    if (status_) return false;
    int status = 0;
    if (::waitpid(pid_, &status, WNOHANG) == pid_) status_ = status;
    return !status_;
  }
  // Waits (bounded) for the exit; nullopt if it still runs after `timeout`.
  std::optional<int> wait(Millis timeout) {
    pollUntil([&] { return !running(); }, timeout, 20ms);
    return status_;
  }
  // SIGTERM, up to 5 s to exit, then SIGKILL; always reaped.
  void kill() {
    if (pid_ <= 0 || !running()) return;
    ::kill(pid_, SIGTERM);
    waitUntil([&] { return !running(); }, 5000ms, 20ms);
    if (running()) {
      ::kill(pid_, SIGKILL);
      int status = 0;
      ::waitpid(pid_, &status, 0);
      status_ = status;
    }
  }

 private:
  pid_t pid_ = -1;
  std::optional<int> status_;
};

struct Run {
  int exitCode = -1;  // -1: killed or did not end in time
  std::string output;
};

// Runs a program to its end (bounded by `timeout`), stdin from `input`.
Run runProgram(const std::vector<std::string>& argv, const std::string& input, Millis timeout,
               const TempDir& scratch) {
  const std::string output = scratch.file("run-output");
  Run run;
  {
    Child child(argv, output, input);
    const std::optional<int> status = child.wait(timeout);
    if (status && WIFEXITED(*status)) run.exitCode = WEXITSTATUS(*status);
  }
  run.output = readText(output);
  return run;
}

// A directory /tmp/nodewarden-prometheus-<pid>-XXXXXX, removed with its contents when
// destroyed. The constructor first removes those of earlier test processes that are gone
// (a test SIGKILLed by a timeout cannot clean up after itself).
class PrometheusDir {
 public:
  PrometheusDir() {
    removeStale();
    std::string pattern =
        std::string("/tmp/") + kPrometheusDirPrefix + std::to_string(::getpid()) + "-XXXXXX";
    REQUIRE_MESSAGE(::mkdtemp(pattern.data()) != nullptr, "mkdtemp: " << std::strerror(errno));
    path_ = pattern;
  }
  ~PrometheusDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  PrometheusDir(const PrometheusDir&) = delete;
  PrometheusDir& operator=(const PrometheusDir&) = delete;
  const std::string& path() const { return path_; }
  std::string file(const std::string& name) const { return path_ + "/" + name; }

 private:
  static void removeStale() {
    std::error_code error;
    for (const auto& entry : std::filesystem::directory_iterator("/tmp", error)) {
      const std::string name = entry.path().filename().string();
      if (!name.starts_with(kPrometheusDirPrefix)) continue;
      const std::string rest = name.substr(std::strlen(kPrometheusDirPrefix));
      const pid_t owner = pid_t(std::strtol(rest.c_str(), nullptr, 10));
      if (owner <= 0 || owner == ::getpid()) continue;
      if (::kill(owner, 0) == 0 || errno != ESRCH) continue;  // still running
      std::error_code ignored;
      std::filesystem::remove_all(entry.path(), ignored);
    }
  }
  std::string path_;
};

// A TCP port on 127.0.0.1 that was free a moment ago.
std::uint16_t freePort() {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  REQUIRE(fd >= 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  address.sin_port = 0;
  socklen_t length = sizeof address;
  const bool ok = ::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) == 0 &&
                  ::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) == 0;
  ::close(fd);
  REQUIRE_MESSAGE(ok, "binding 127.0.0.1:0: " << std::strerror(errno));
  return ntohs(address.sin_port);
}

// A socket bound to a loopback port and never listening: connections to the port are
// refused for as long as it lives (the webhook's unreachable API server).
class RefusingPort {
 public:
  RefusingPort() {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    REQUIRE(fd_ >= 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t length = sizeof address;
    REQUIRE(::bind(fd_, reinterpret_cast<sockaddr*>(&address), sizeof address) == 0);
    REQUIRE(::getsockname(fd_, reinterpret_cast<sockaddr*>(&address), &length) == 0);
    port_ = ntohs(address.sin_port);
  }
  ~RefusingPort() { ::close(fd_); }
  RefusingPort(const RefusingPort&) = delete;
  RefusingPort& operator=(const RefusingPort&) = delete;
  std::uint16_t port() const { return port_; }

 private:
  int fd_ = -1;
  std::uint16_t port_ = 0;
};

// The running agent under test: dry run, on a 512Mi sandbox node whose hard threshold
// (600Mi available) is met from the start, two pods, the admission routes on.
struct AgentUnderTest {
  cgroups::Sandbox sandbox = makeSandbox(512 * kMiB);
  TempDir manifests;
  TempDir files;
  PodSpec web =
      PodSpec("mon", "web").withPriority(1000).request("memory", "128Mi").request("cpu", "100m");
  PodSpec batch = PodSpec("mon", "batch").withPriority(0).request("memory", "64Mi");
  std::optional<AgentProcess> agent;

  AgentUnderTest() {
    writeFile(files.file("policy.json"), R"({
      "evictionHard": { "allocatableMemory.available": "600Mi" },
      "housekeepingInterval": "500ms"
    })");
    const std::string webCgroup = addPod(sandbox, &manifests, web);
    addPod(sandbox, &manifests, batch);
    spawnAllocator(sandbox, webCgroup, 8 * kMiB);
    AgentConfig config;
    config.policyFile = files.file("policy.json");
    config.manifestsDir = manifests.path();
    config.kubepods = sandbox.kubepods();
    config.dryRun = true;
    config.extraArgs = {"--admission-routes"};
    agent.emplace(config);
    // A dry-run eviction decided: the labelled counters have samples.
    REQUIRE_MESSAGE(agent->waitForEvent("evict-dry-run", 30000ms).has_value(), agent->logText());
    // An admission verdict counted.
    PodSpec incoming = PodSpec("mon", "incoming").withPriority(0).request("memory", "16Mi");
    incoming.uid = makeUid();
    const HttpReply admitted =
        httpRequest(agent->port(), "POST", "/v1/admit", podObject(incoming).dump());
    REQUIRE_MESSAGE(admitted.status == 200, admitted.body << admitted.error);
  }
};

// `nodewarden webhook` with an API server that refuses connections: it serves, never gets
// ready, and answers every review allow-unchecked.
struct WebhookUnderTest {
  RefusingPort apiServer;
  TempDir files;
  std::optional<AgentProcess> webhook;

  WebhookUnderTest() {
    writeFile(files.file("kubeconfig"),
              "apiVersion: v1\nkind: Config\nclusters:\n- name: unreachable\n  cluster:\n"
              "    server: http://127.0.0.1:" +
                  std::to_string(apiServer.port()) +
                  "\nusers:\n- name: nobody\n  user:\n    token: none\ncontexts:\n"
                  "- name: test\n  context:\n    cluster: unreachable\n    user: nobody\n"
                  "current-context: test\n");
    AgentConfig config;
    config.webhook = true;
    config.kubeconfig = files.file("kubeconfig");
    webhook.emplace(config);
    const Json review = {{"apiVersion", "admission.k8s.io/v1"},
                         {"kind", "AdmissionReview"},
                         {"request",
                          {{"uid", "6d0b3c8e-0000-4000-8000-000000000001"},
                           {"kind", {{"group", ""}, {"version", "v1"}, {"kind", "Binding"}}},
                           {"resource", {{"group", ""}, {"version", "v1"}, {"resource", "pods"}}},
                           {"subResource", "binding"},
                           {"operation", "CREATE"},
                           {"namespace", "mon"},
                           {"name", "pending"},
                           {"object",
                            {{"apiVersion", "v1"},
                             {"kind", "Binding"},
                             {"metadata", {{"name", "pending"}, {"namespace", "mon"}}},
                             {"target", {{"kind", "Node"}, {"name", "node-1"}}}}}}}};
    const HttpReply answered =
        httpRequest(webhook->port(), "POST", "/v1/admission-review", review.dump());
    REQUIRE_MESSAGE(answered.status == 200, answered.body << answered.error);
    const HttpReply malformed =
        httpRequest(webhook->port(), "POST", "/v1/admission-review", R"({"kind": 1})");
    CHECK(malformed.status == 400);
  }
};

std::string getMetrics(std::uint16_t port) {
  const HttpReply reply = httpRequest(port, "GET", "/metrics");
  REQUIRE_MESSAGE(reply.status == 200, reply.error);
  return reply.body;
}

void lint(const std::string& promtool, const std::string& what, const std::string& metrics,
          const TempDir& scratch) {
  CAPTURE(what);
  const std::string input = scratch.file("metrics.txt");
  writeFile(input, metrics);
  const Run run = runProgram({promtool, "check", "metrics"}, input, 60000ms, scratch);
  INFO("promtool check metrics on the " << what << "'s /metrics:\n"
                                        << run.output << "\n--- the metrics:\n"
                                        << metrics);
  CHECK(run.exitCode == 0);
  CHECK(run.output.empty());
}

std::string percentEncode(const std::string& text) {
  static const char* hex = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : text) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') {
      out += char(c);
    } else {
      out += '%';
      out += hex[c >> 4];
      out += hex[c & 15];
    }
  }
  return out;
}

// A body sent with Transfer-Encoding: chunked (Go's server does so for larger answers),
// decoded; "" when malformed.
std::string dechunk(const std::string& body) {
  std::string out;
  std::size_t at = 0;
  while (at < body.size()) {
    const std::size_t lineEnd = body.find("\r\n", at);
    if (lineEnd == std::string::npos) return "";
    const std::size_t size = std::strtoul(body.c_str() + at, nullptr, 16);
    if (size == 0) return out;
    if (lineEnd + 2 + size > body.size()) return "";
    out.append(body, lineEnd + 2, size);
    at = lineEnd + 2 + size + 2;
  }
  return "";
}

// GET http://127.0.0.1:port/target from Prometheus: {status, body}, status 0 on a transport
// error. Unlike httpRequest() it never half-closes the connection after the request: Go's
// server takes that for a client gone and cancels the query (503 "query was canceled").
std::pair<int, std::string> prometheusGet(std::uint16_t port, const std::string& target) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return {0, ""};
  timeval timeout{10, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof timeout);
  ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &timeout, sizeof timeout);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(port);
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  const std::string request = "GET " + target +
                              " HTTP/1.1\r\nHost: 127.0.0.1:" + std::to_string(port) +
                              "\r\nConnection: close\r\n\r\n";
  std::string text;
  if (::connect(fd, reinterpret_cast<const sockaddr*>(&address), sizeof address) == 0 &&
      ::send(fd, request.data(), request.size(), MSG_NOSIGNAL) == ssize_t(request.size())) {
    char buffer[8192];
    while (true) {
      const ssize_t n = ::recv(fd, buffer, sizeof buffer, 0);
      if (n > 0) {
        text.append(buffer, std::size_t(n));
      } else if (n < 0 && errno == EINTR) {
        continue;
      } else {
        break;  // closed by the server (Connection: close), or the timeout
      }
    }
  }
  ::close(fd);
  const std::size_t headerEnd = text.find("\r\n\r\n");
  if (!text.starts_with("HTTP/1.") || headerEnd == std::string::npos) return {0, ""};
  const int status = std::atoi(text.c_str() + text.find(' ') + 1);
  std::string head = text.substr(0, headerEnd);
  std::transform(head.begin(), head.end(), head.begin(),
                 [](unsigned char c) { return char(std::tolower(c)); });
  std::string body = text.substr(headerEnd + 4);
  if (head.find("\r\ntransfer-encoding: chunked") != std::string::npos) body = dechunk(body);
  return {status, body};
}

// GET on the Prometheus HTTP API; the parsed answer, null when it is not a success.
Json apiGet(std::uint16_t port, const std::string& target) {
  const auto [status, text] = prometheusGet(port, target);
  if (status != 200) return nullptr;
  Json body = Json::parse(text, nullptr, false);
  if (body.is_discarded() || body.value("status", "") != "success") return nullptr;
  return body;
}

// The result vector of the instant query `promql` (empty when the query fails).
Json query(std::uint16_t port, const std::string& promql) {
  const Json body = apiGet(port, "/api/v1/query?query=" + percentEncode(promql));
  if (body.is_null() || !body.contains("data") || !body["data"].contains("result")) {
    return Json::array();
  }
  return body["data"]["result"];
}

// The result of `promql` once it is one series of value `expected`, polled for up to 10 s
// (a scrape or a rule evaluation may be a second away); its last answer when it never is.
Json expectValue(std::uint16_t port, const std::string& promql, double expected);

// The value of a one-series answer, or nullopt.
std::optional<double> single(const Json& result) {
  if (!result.is_array() || result.size() != 1) return std::nullopt;
  const Json& value = result[0]["value"];
  if (!value.is_array() || value.size() != 2 || !value[1].is_string()) return std::nullopt;
  return std::strtod(value[1].get<std::string>().c_str(), nullptr);
}

Json expectValue(std::uint16_t port, const std::string& promql, double expected) {
  Json result;
  const bool matched = pollUntil(
      [&] {
        result = query(port, promql);
        return single(result) == expected;
      },
      10000ms, 250ms);
  CHECK_MESSAGE(matched,
                promql << " is not " << expected << ": "
                       << apiGet(port, "/api/v1/query?query=" + percentEncode(promql)).dump());
  return result;
}

// The PrometheusRule's spec (systemd/kubernetes/components/monitoring/prometheusrule.yaml):
// a Prometheus rules file. The component patches nothing, so this is what it renders.
std::string shippedRules() {
  const std::string source = std::string(NODEWARDEN_SOURCE_ROOT) +
                             "/systemd/kubernetes/components/monitoring/prometheusrule.yaml";
  std::istringstream lines(readText(source));
  std::string rules;
  bool inSpec = false;
  for (std::string line; std::getline(lines, line);) {
    if (!inSpec) {
      inSpec = line == "spec:";
      continue;
    }
    rules += (line.starts_with("  ") ? line.substr(2) : line) + "\n";
  }
  REQUIRE_MESSAGE(rules.find("groups:") != std::string::npos, "no spec in " << source);
  return rules;
}

}  // namespace

TEST_CASE(
    "metrics lint: promtool check metrics on the live /metrics of the agent and the webhook") {
  const std::string promtool = requireProgram("promtool");
  installTerminationHandler();
  TempDir scratch;
  const Run version = runProgram({promtool, "--version"}, "/dev/null", 30000ms, scratch);
  MESSAGE(version.output.substr(0, version.output.find('\n')));
  // The linter lints: a counter named like a duration, without _total, is reported.
  writeFile(scratch.file("bad.txt"),
            "# HELP bad_seconds x\n# TYPE bad_seconds counter\nbad_seconds 1\n");
  const Run bad =
      runProgram({promtool, "check", "metrics"}, scratch.file("bad.txt"), 60000ms, scratch);
  CHECK(bad.exitCode > 0);
  CHECK(bad.output.find("_total") != std::string::npos);

  AgentUnderTest agent;
  const std::string agentMetrics = getMetrics(agent.agent->port());
  // What the lint sees has the samples it should: labelled counters, gauges, histograms.
  CHECK(metricValue(agentMetrics, "nodewarden_threshold_met",
                    R"(signal="allocatableMemory.available",kind="hard")") == 1.0);
  CHECK(agentMetrics.find("nodewarden_dry_run_evictions_total{") != std::string::npos);
  CHECK(agentMetrics.find("nodewarden_admissions_total{") != std::string::npos);
  CHECK(agentMetrics.find("nodewarden_scan_duration_seconds_bucket{") != std::string::npos);
  lint(promtool, "agent", agentMetrics, scratch);

  WebhookUnderTest webhook;
  const std::string webhookMetrics = getMetrics(webhook.webhook->port());
  CHECK(webhookMetrics.find(R"(nodewarden_admissions_total{verdict="allow-unchecked")") !=
        std::string::npos);
  CHECK(metricValue(webhookMetrics, "nodewarden_admission_review_errors_total") == 1.0);
  CHECK(metricValue(webhookMetrics, "nodewarden_admission_review_duration_seconds_count")
            .value_or(0) >= 1.0);
  lint(promtool, "webhook", webhookMetrics, scratch);
}

TEST_CASE(
    "prometheus scrape: the real server ingests the agent and the webhook, and the "
    "shipped rules evaluate on their series") {
  const std::string prometheus = requireProgram("prometheus");
  installTerminationHandler();
  const SteadyTime started = now();
  AgentUnderTest agent;
  WebhookUnderTest webhook;

  PrometheusDir dir;  // destroyed after the server below: killed first, then removed
  REQUIRE(::mkdir(dir.file("data").c_str(), 0755) == 0);
  writeFile(dir.file("rules.yaml"), shippedRules());
  writeFile(dir.file("prometheus.yml"),
            "global:\n"
            "  scrape_interval: 1s\n"
            "  scrape_timeout: 1s\n"
            "  evaluation_interval: 1s\n"
            "rule_files:\n"
            "  - " +
                dir.file("rules.yaml") +
                "\n"
                "scrape_configs:\n"
                "  - job_name: nodewarden\n"
                "    static_configs:\n"
                "      - targets: ['127.0.0.1:" +
                std::to_string(agent.agent->port()) +
                "']\n"
                "  - job_name: nodewarden-webhook\n"
                "    static_configs:\n"
                "      - targets: ['127.0.0.1:" +
                std::to_string(webhook.webhook->port()) + "']\n");

  // The server on a free port; another process taking the port between freePort() and the
  // server's bind is retried on a new one (3 attempts).
  std::optional<Child> server;
  std::uint16_t port = 0;
  const std::string log = dir.file("prometheus.log");
  for (int attempt = 0; attempt < 3 && !server; ++attempt) {
    port = freePort();
    server.emplace(
        std::vector<std::string>{prometheus, "--config.file=" + dir.file("prometheus.yml"),
                                 "--storage.tsdb.path=" + dir.file("data"),
                                 "--web.listen-address=127.0.0.1:" + std::to_string(port)},
        log);
    // Up and ready (TSDB opened, config and rules loaded): /-/ready answers 200.
    const bool ready = pollUntil(
        [&] { return !server->running() || prometheusGet(port, "/-/ready").first == 200; }, 60000ms,
        250ms);
    if (!server->running()) {
      const std::string text = readText(log);
      INFO("prometheus exited; its log:\n" << text);
      REQUIRE(text.find("address already in use") != std::string::npos);
      server.reset();
      continue;
    }
    REQUIRE_MESSAGE(ready, "prometheus not ready within 60 s; its log:\n" << readText(log));
  }
  REQUIRE_MESSAGE(server.has_value(), "prometheus could not bind a free port in 3 attempts");
  const double readyAt = secondsSince(started);
  INFO("prometheus log:\n" << readText(log));

  // Both targets scraped: up == 1. A poll every 500 ms, at most 120 polls and 60 s.
  int polls = 0;
  bool up = false;
  const SteadyTime upDeadline = now() + 60s;
  while (!up && polls < 120 && now() < upDeadline) {
    checkNotTerminated();
    ++polls;
    up = single(query(port, R"(up{job="nodewarden"})")) == 1.0 &&
         single(query(port, R"(up{job="nodewarden-webhook"})")) == 1.0;
    if (!up) std::this_thread::sleep_for(500ms);
  }
  CAPTURE(polls);
  REQUIRE_MESSAGE(up, "targets: " << apiGet(port, "/api/v1/targets").dump());
  const double upAt = secondsSince(started);

  // The agent's series ingested, with their values.
  expectValue(port, R"(nodewarden_pods{job="nodewarden"})", 2.0);
  expectValue(
      port,
      R"(nodewarden_threshold_met{job="nodewarden",signal="allocatableMemory.available",kind="hard"})",
      1.0);
  expectValue(port, R"(sum(nodewarden_cycles_total{job="nodewarden"}) > bool 0)", 1.0);
  // Every family the agent has samples of (reference §7.3), by the names Prometheus stored.
  const std::vector<std::string> families = {"nodewarden_signal_available_bytes",
                                             "nodewarden_threshold_met",
                                             "nodewarden_node_condition",
                                             "nodewarden_eviction_latency_seconds_bucket",
                                             "nodewarden_scan_duration_seconds_bucket",
                                             "nodewarden_pods",
                                             "nodewarden_cycles_total",
                                             "nodewarden_dry_run_evictions_total",
                                             "nodewarden_admissions_total",
                                             "nodewarden_kernel_notifications"};
  std::set<std::string> names;
  pollUntil(
      [&] {
        names.clear();
        const Json answer = apiGet(port, "/api/v1/label/__name__/values?match[]=" +
                                             percentEncode(R"({job="nodewarden"})"));
        if (answer.is_null()) return false;
        for (const Json& name : answer["data"]) names.insert(name.get<std::string>());
        return std::all_of(families.begin(), families.end(),
                           [&](const std::string& family) { return names.count(family) == 1; });
      },
      10000ms, 250ms);
  INFO("names ingested from the agent: " << Json(names).dump());
  for (const std::string& family : families) {
    CAPTURE(family);
    CHECK(names.count(family) == 1);
  }
  // The webhook's.
  expectValue(
      port,
      R"(sum(nodewarden_admissions_total{job="nodewarden-webhook",verdict="allow-unchecked"}))",
      1.0);
  expectValue(port, R"(nodewarden_admission_review_errors_total{job="nodewarden-webhook"})", 1.0);

  // The shipped rules: loaded, every one evaluated without error, and on these live series
  // NodewardenThresholdMet is pending (its `for` is a minute) while the agent is not down.
  Json rules;
  const bool evaluated = pollUntil(
      [&] {
        rules = apiGet(port, "/api/v1/rules");
        if (rules.is_null()) return false;
        int healthy = 0;
        for (const Json& group : rules["data"]["groups"]) {
          for (const Json& rule : group["rules"]) healthy += rule.value("health", "") == "ok";
        }
        return healthy == 5;
      },
      30000ms, 500ms);
  CHECK_MESSAGE(evaluated, "rules: " << rules.dump());
  Json pending;
  const bool thresholdAlert = pollUntil(
      [&] {
        pending = query(port, R"(ALERTS{alertname="NodewardenThresholdMet"})");
        return pending.size() == 1;
      },
      30000ms, 500ms);
  CHECK_MESSAGE(thresholdAlert, "ALERTS: " << pending.dump());
  if (thresholdAlert) {
    const Json& labels = pending[0]["metric"];
    // Pending for its first minute; firing if this machine is slow enough to get here later.
    const std::string state = labels.value("alertstate", "");
    CHECK((state == "pending" || state == "firing"));
    CHECK(labels.value("signal", "") == "allocatableMemory.available");
    CHECK(labels.value("kind", "") == "hard");
    CHECK(labels.value("severity", "") == "warning");
  }
  CHECK(query(port, R"(ALERTS{alertname="NodewardenAgentDown"})").empty());
  std::printf(
      "prometheus on 127.0.0.1:%u: ready at %.1f s, both targets up at %.1f s (%d polls), "
      "all checked at %.1f s\n",
      unsigned(port), readyAt, upAt, polls, secondsSince(started));

  server->kill();
  CHECK_FALSE(server->running());
}
