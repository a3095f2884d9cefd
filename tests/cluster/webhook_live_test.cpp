// `nodewarden webhook` against the real API server (docs/reference.md §5, §7;
// docs/install.md, "Deploy on Kubernetes"): the shipped manifests (systemd/kubernetes/, rendered by
// kustomize through an overlay that changes only the webhook's address and its caBundle) applied to
// Kubernetes' own kube-apiserver, the webhook run as a process of this test with a serving
// certificate made for the run and the token the shipped RBAC grants its ServiceAccount, and each
// §5 verdict proven end to end on Node objects reported as a kubelet reports them:
//
//   admit       the real kube-scheduler binds, the API server asks the webhook, the pod has
//               its node;
//   reject      a node under memory pressure refuses a BestEffort pod with the §5 reason and
//               message: the kubelet's MemoryPressure (the real node-lifecycle controller
//               taints the node, so the real scheduler never tries; another binder is
//               refused), and nodewarden's own NodewardenMemoryPressure (no taint: the real
//               scheduler binds, is refused, records FailedScheduling, retries with backoff,
//               and binds once the agent clears the condition);
//   wait        a terminating pod holds the room: refused, nothing evicted, bound once the
//               pod is gone;
//   preempt     the victim is evicted through the real Eviction API; a real PDB, whose status
//               the real disruption controller computes, holds it back (429, retried and
//               logged by the webhook) until the budget allows it; then wait, then admit;
//   dry run     `?dryRun=All` on pods/binding and `kubectl create --dry-run=server` of a
//               Binding get the verdict and evict nothing;
//   fail open   the webhook stopped, bindings go through (failurePolicy: Ignore), and the
//               API server's apiserver_admission_webhook_fail_open_count shows it.
//
// The real kube-scheduler checks resource fit itself and preempts by itself (deleting its
// victims, not through the Eviction API), so it never asks for a binding the webhook would
// answer `wait` or `preempt`: those verdicts are for bindings its view did not cover (another
// scheduler, a direct binding, a race with its cache). Pods with schedulerName
// nodewarden-lane-binder are left alone by kube-scheduler; this test binds them as a second
// scheduler does (POST pods/NAME/binding, the Binding default_binder.go sends).
//
// There is no kubelet: pods never run. Pods that should be running are created bound with
// their status reported as a kubelet would (Running, Ready); a deleted pod stays terminating
// until its kubelet would finish it, which this test does where it needs the room back
// (`kubectl delete --grace-period=0 --force` once the deletionTimestamp is set).
//
// One control plane serves every test case (each has its own node and namespace), built by
// the first case that runs; the stop of the webhook comes last.
#include <doctest/doctest.h>

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "tests/cluster/cluster_env.h"
#include "tests/cluster/lane_objects.h"

// Pods are described with designated initializers naming only what matters to each case;
// GCC warns about the members left to their defaults.
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"

using nodewarden::cluster::Cluster;
using nodewarden::cluster::Json;
using nodewarden::cluster::laneNode;
using nodewarden::cluster::laneNodeStatus;
using nodewarden::cluster::lanePod;
using nodewarden::cluster::rfc3339Now;
using nodewarden::cluster::Run;

namespace {

const std::string kWebhookName = "binding.nodewarden.io";
// Pods of this scheduler are bound by the test, as a second scheduler would bind them.
const std::string kLaneBinder = "nodewarden-lane-binder";

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

std::string sourceRoot() {
  return NODEWARDEN_SOURCE_ROOT;
}

std::string base64(const std::string& data) {
  static const char* kAlphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  std::size_t i = 0;
  for (; i + 2 < data.size(); i += 3) {
    const unsigned v =
        (unsigned char)data[i] << 16 | (unsigned char)data[i + 1] << 8 | (unsigned char)data[i + 2];
    for (int s = 18; s >= 0; s -= 6) out += kAlphabet[(v >> s) & 63];
  }
  if (i + 1 == data.size()) {
    const unsigned v = (unsigned char)data[i] << 16;
    out += kAlphabet[(v >> 18) & 63];
    out += kAlphabet[(v >> 12) & 63];
    out += "==";
  } else if (i + 2 == data.size()) {
    const unsigned v = (unsigned char)data[i] << 16 | (unsigned char)data[i + 1] << 8;
    out += kAlphabet[(v >> 18) & 63];
    out += kAlphabet[(v >> 12) & 63];
    out += kAlphabet[(v >> 6) & 63];
    out += '=';
  }
  return out;
}

bool onPath(const std::string& program) {
  return nodewarden::cluster::run({"sh", "-c", "command -v " + program}).status == 0;
}

// A port on 127.0.0.1 free at this moment (the webhook's configuration names it before the
// webhook starts: the ValidatingWebhookConfiguration is applied with the rest).
int freePort() {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  REQUIRE(fd >= 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  REQUIRE(::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) == 0);
  socklen_t length = sizeof address;
  REQUIRE(::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) == 0);
  ::close(fd);
  return ntohs(address.sin_port);
}

// A process of the test running in the background, its stdout and stderr in one file; it
// dies with the test (PR_SET_PDEATHSIG).
class Background {
 public:
  Background(const std::vector<std::string>& argv, std::string logPath)
      : logPath_(std::move(logPath)) {
    std::vector<char*> args;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    const pid_t parent = ::getpid();
    pid_ = ::fork();
    REQUIRE(pid_ >= 0);
    if (pid_ == 0) {
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (::getppid() != parent) ::_exit(127);
      const int log = ::open(logPath_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_APPEND, 0644);
      const int null = ::open("/dev/null", O_RDONLY);
      ::dup2(null, 0);
      ::dup2(log, 1);
      ::dup2(log, 2);
      ::execv(args[0], args.data());
      std::fprintf(stderr, "exec %s: %s\n", args[0], std::strerror(errno));
      ::_exit(127);
    }
  }
  ~Background() {
    if (pid_ > 0) stop();
  }
  Background(const Background&) = delete;
  Background& operator=(const Background&) = delete;

  bool running() {
    if (pid_ <= 0) return false;
    int status = 0;
    if (::waitpid(pid_, &status, WNOHANG) == pid_) {
      pid_ = -1;
      exitStatus_ = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
      return false;
    }
    return true;
  }
  // SIGTERM, then up to 30 s for it to end (SIGKILL after); its exit status (-1: a signal).
  int stop() {
    if (!running()) return exitStatus_;
    ::kill(pid_, SIGTERM);
    int status = 0;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (::waitpid(pid_, &status, WNOHANG) != pid_) {
      if (std::chrono::steady_clock::now() > deadline) {
        ::kill(pid_, SIGKILL);
        ::waitpid(pid_, &status, 0);
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    pid_ = -1;
    exitStatus_ = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    return exitStatus_;
  }
  std::string log() const { return slurp(logPath_); }

 private:
  std::string logPath_;
  pid_t pid_ = -1;
  int exitStatus_ = -1;
};

// An answer of the API server to a request made with the admin's client certificate: the
// HTTP status and the body (a Status object when it failed), exactly as sent.
struct ApiAnswer {
  int code = 0;
  Json body;
  std::string raw;
};

// `--- labels` of one Prometheus sample line that has every `want` pair, summed over lines.
double sumSamples(const std::string& text, const std::string& name,
                  const std::vector<std::string>& want) {
  double sum = 0;
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    if (!line.starts_with(name + "{") && !line.starts_with(name + " ")) continue;
    const std::size_t close = line.rfind('}');
    const std::string labels = close == std::string::npos ? "" : line.substr(0, close + 1);
    bool all = true;
    for (const auto& pair : want) all = all && labels.find(pair) != std::string::npos;
    if (!all) continue;
    sum += std::stod(line.substr(line.rfind(' ') + 1));
  }
  return sum;
}

// The node objects of the lane's snapshot: labels as a kubelet registers them; 4 cpu and
// 4Gi, conditions and node info as its status reports them. `pressure` adds a condition
// "True" (NodeShape).
Json snapshotNode(const std::string& name, const std::string& pressure = "") {
  Json node = laneNode(name);
  node["status"] = laneNodeStatus(name, "4Gi", {.cpu = "4", .pressure = pressure});
  return node;
}

// Everything the test cases share: the control plane, the shipped manifests applied, the
// webhook running.
struct Lane {
  Cluster cluster;
  nodewarden::testing::TempDir files{"nw-webhook-live"};
  int port = 0;
  std::string webhookCa;  // the CA of the webhook's serving certificate (PEM file)
  std::string webhookKubeconfig;
  std::unique_ptr<Background> webhook;
  // The API server's eviction requests answered 429 before the preemption case.
  std::map<std::string, std::string> uids;  // "ns/name" → UID of the pods made at the start

  Lane();

  Json kubectlJson(const std::string& args) const { return cluster.kubectlJson(args); }
  Json pod(const std::string& ns, const std::string& name) const {
    return cluster.kubectlJson("get pod " + name + " -n " + ns + " -o json");
  }
  std::string uidOf(const std::string& ns, const std::string& name) const {
    return pod(ns, name)["metadata"]["uid"];
  }

  // A request to the API server as the admin, with curl: the answer as the server sent it.
  ApiAnswer api(const std::string& method, const std::string& path,
                const std::string& body = "") const {
    const Json& info = cluster.info();
    std::vector<std::string> argv = {"curl",       "-sS",
                                     "--max-time", "30",
                                     "--cacert",   info["caFile"],
                                     "--cert",     info["clientCertFile"],
                                     "--key",      info["clientKeyFile"],
                                     "-X",         method,
                                     "-w",         "\n%{http_code}"};
    if (!body.empty()) {
      argv.insert(argv.end(), {"-H", "Content-Type: application/json", "--data-binary", "@-"});
    }
    argv.push_back(cluster.server() + path);
    const Run got = nodewarden::cluster::run(argv, body);
    REQUIRE_MESSAGE(got.status == 0, "curl " << method << " " << path << ": " << got.err);
    ApiAnswer answer;
    const std::size_t cut = got.out.rfind('\n');
    answer.code = std::stoi(got.out.substr(cut + 1));
    answer.raw = got.out.substr(0, cut);
    answer.body = Json::parse(answer.raw, nullptr, false);
    return answer;
  }

  // The Binding the default scheduler's DefaultBinder posts (metadata.uid: the pod's UID),
  // from a second scheduler; `dryRun`: ?dryRun=All.
  ApiAnswer bind(const std::string& ns, const std::string& name, const std::string& node,
                 bool dryRun = false) const {
    const Json binding = {
        {"apiVersion", "v1"},
        {"kind", "Binding"},
        {"metadata", {{"name", name}, {"namespace", ns}, {"uid", uidOf(ns, name)}}},
        {"target", {{"kind", "Node"}, {"name", node}}}};
    return api(
        "POST",
        "/api/v1/namespaces/" + ns + "/pods/" + name + "/binding" + (dryRun ? "?dryRun=All" : ""),
        binding.dump());
  }

  // The API server's own /metrics, as the admin reads it.
  std::string apiserverMetrics() const {
    const Run got = cluster.kubectl("get --raw /metrics");
    REQUIRE_MESSAGE(got.status == 0, got.err);
    return got.out;
  }

  // The webhook's /metrics (curl over TLS, verified with the run's CA); "" when it does not
  // answer.
  std::string webhookGet(const std::string& path) const {
    const Run got =
        nodewarden::cluster::run({"curl", "-sS", "--max-time", "10", "--fail", "--cacert",
                                  webhookCa, "https://127.0.0.1:" + std::to_string(port) + path});
    return got.status == 0 ? got.out : "";
  }

  // The webhook's log lines (JSON, one event each) of `event`, for `pod` when given.
  std::vector<Json> logEvents(const std::string& event, const std::string& pod = "") const {
    std::vector<Json> out;
    std::istringstream lines(webhook->log());
    for (std::string line; std::getline(lines, line);) {
      if (!line.starts_with("{")) continue;
      Json parsed = Json::parse(line, nullptr, false);
      if (!parsed.is_object() || parsed.value("event", "") != event) continue;
      if (!pod.empty() && parsed.value("pod", "") != pod) continue;
      out.push_back(std::move(parsed));
    }
    return out;
  }
  // The webhook's reviews of `pod`, the dry-run ones only with `dryRunToo`.
  std::vector<Json> reviews(const std::string& pod, bool dryRunToo = false) const {
    std::vector<Json> out;
    for (Json& review : logEvents("admission-review", pod)) {
      if (dryRunToo || !review.value("dry_run", false)) out.push_back(std::move(review));
    }
    return out;
  }

  // Dry-run bindings of ns/name to `node` until the webhook answers `verdict`: its caches,
  // fed by watches as the scheduler's are, have caught up with what the test just did. A
  // scheduler may bind a pod before the webhook's watch has delivered it (the webhook then
  // lets the binding through unjudged: "not in its cache yet"), a race of two watches that a
  // busy machine decides either way; the test waits it out instead of losing it.
  void settle(const std::string& ns, const std::string& name, const std::string& node,
              const std::string& verdict) const {
    std::string last;
    REQUIRE_MESSAGE(waitUntil(
                        [&] {
                          bind(ns, name, node, /*dryRun=*/true);
                          const auto all = reviews(ns + "/" + name, /*dryRunToo=*/true);
                          last = all.empty() ? "" : all.back().value("verdict", "");
                          return last == verdict;
                        },
                        60),
                    ns << "/" << name << " on " << node << ": the webhook still answers '" << last
                       << "', not '" << verdict << "'" << diagnostics());
  }

  // A pod for the real kube-scheduler, handed to it once the webhook would answer `verdict`
  // for it on `node`: created with a scheduling gate (the scheduler leaves a gated pod
  // alone), settled, then the gate removed as its owner would remove it.
  void createForScheduler(const Json& pod, const std::string& node,
                          const std::string& verdict) const {
    Json gated = pod;
    gated["spec"]["schedulingGates"] = Json::array({{{"name", "nodewarden.io/lane"}}});
    cluster.create(gated);
    const std::string ns = pod["metadata"]["namespace"];
    const std::string name = pod["metadata"]["name"];
    settle(ns, name, node, verdict);
    const Run ungated = cluster.kubectl({"patch", "pod", name, "-n", ns, "--type=json", "-p",
                                         R"([{"op":"remove","path":"/spec/schedulingGates"}])"});
    REQUIRE_MESSAGE(ungated.status == 0, ungated.err);
  }

  // Events on a pod with this reason.
  Json events(const std::string& ns, const std::string& name, const std::string& reason) const {
    return cluster.kubectlJson("get events -n " + ns + " --field-selector involvedObject.name=" +
                               name + ",reason=" + reason + " -o json")["items"];
  }

  bool waitUntil(const std::function<bool()>& condition, int seconds) const {
    return cluster.waitUntil(condition, seconds);
  }

  void ensureNamespace(const std::string& ns) const {
    if (cluster.kubectl("get namespace " + ns).status != 0) {
      cluster.create({{"apiVersion", "v1"}, {"kind", "Namespace"}, {"metadata", {{"name", ns}}}});
    }
    REQUIRE(cluster.waitUntil(
        [&] { return cluster.kubectl("get serviceaccount default -n " + ns).status == 0; }, 120));
  }

  // What a kubelet does once a deleted pod's containers are gone: the pod object goes.
  void finishDeletion(const std::string& ns, const std::string& name) const {
    const Json before = pod(ns, name);
    REQUIRE_MESSAGE(before["metadata"].contains("deletionTimestamp"), before.dump(2));
    const Run deleted = cluster.kubectl("delete pod " + name + " -n " + ns +
                                        " --grace-period=0 --force --wait=false");
    REQUIRE_MESSAGE(deleted.status == 0, deleted.err);
    REQUIRE(waitUntil([&] { return cluster.kubectl("get pod " + name + " -n " + ns).status != 0; },
                      60));
  }

  std::string diagnostics() const {
    return "\n--- webhook log (end) ---\n" + lastLines(webhook ? webhook->log() : "", 40) +
           "\n--- kube-scheduler (end) ---\n" + cluster.logTail("kube-scheduler", 15) +
           "\n--- kube-apiserver (end) ---\n" + cluster.logTail("kube-apiserver", 15);
  }

  static std::string lastLines(const std::string& text, int lines) {
    std::size_t at = text.size();
    for (int n = 0; at > 0; --at) {
      if (text[at - 1] == '\n' && ++n > lines) break;
    }
    return text.substr(at);
  }
};

Lane::Lane() {
  for (const char* tool : {"curl", "openssl"}) {
    if (!onPath(tool)) {
      nodewarden::cluster::skip(std::string("the webhook lane needs ") + tool +
                                " (curl: the API server's answers as sent and the webhook's "
                                "/metrics; openssl: the serving certificate, as docs/install.md's "
                                "recipe makes it)");
    }
  }
  MESSAGE("control plane ready in " << cluster.readySeconds() << " s");

  // The cluster the test cases work on: every node reported Ready by its "kubelet"; pods
  // that should be running, created bound with a kubelet's Running/Ready status; a budget
  // whose status the real disruption controller computes.
  const Json snapshot = {
      {"priorityClasses", Json::array({{{"metadata", {{"name", "lane-low"}}}, {"value", 100}},
                                       {{"metadata", {{"name", "lane-high"}}}, {"value", 1000}}})},
      {"nodes",
       Json::array({snapshotNode("admit-1"), snapshotNode("pressure-1", "MemoryPressure"),
                    snapshotNode("pressure-2", "NodewardenMemoryPressure"), snapshotNode("wait-1"),
                    snapshotNode("preempt-1"), snapshotNode("spare-1"), snapshotNode("dryrun-1"),
                    snapshotNode("open-1", "NodewardenMemoryPressure")})},
      {"pods",
       Json::array({lanePod("wh-wait", "old", {.node = "wait-1", .memory = "3Gi", .running = true}),
                    lanePod("wh-preempt", "guarded-a",
                            {.node = "preempt-1",
                             .memory = "2Gi",
                             .priorityClass = "lane-low",
                             .labels = {{"app", "guarded"}},
                             .running = true}),
                    lanePod("wh-preempt", "loose-a",
                            {.node = "preempt-1",
                             .memory = "1Gi",
                             .priorityClass = "lane-low",
                             .labels = {{"app", "loose"}},
                             .running = true}),
                    lanePod("wh-dryrun", "victim",
                            {.node = "dryrun-1",
                             .memory = "3Gi",
                             .priorityClass = "lane-low",
                             .running = true})})},
      {"podDisruptionBudgets",
       Json::array(
           {{{"metadata", {{"name", "guarded"}, {"namespace", "wh-preempt"}}},
             {"spec",
              {{"minAvailable", 1}, {"selector", {{"matchLabels", {{"app", "guarded"}}}}}}}}})}};
  uids = nodewarden::cluster::loadSnapshot(cluster, snapshot);
  for (const char* ns : {"wh-canary", "wh-admit", "wh-reject", "wh-open"}) ensureNamespace(ns);

  // The webhook's serving certificate, as docs/install.md's openssl recipe makes it (with the
  // address the API server calls here, 127.0.0.1, among the names).
  const std::string dir = files.path.string();
  auto openssl = [&](const std::vector<std::string>& args) {
    std::vector<std::string> argv = {"openssl"};
    argv.insert(argv.end(), args.begin(), args.end());
    const Run got = nodewarden::cluster::run(argv);
    REQUIRE_MESSAGE(got.status == 0, "openssl: " << got.err);
  };
  openssl({"req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj",
           "/CN=nodewarden-webhook-ca", "-keyout", dir + "/ca.key", "-out", dir + "/ca.crt"});
  openssl({"req", "-newkey", "rsa:2048", "-nodes", "-subj",
           "/CN=nodewarden-webhook.kube-system.svc", "-keyout", dir + "/tls.key", "-out",
           dir + "/tls.csr"});
  files.write("san.ext",
              "subjectAltName=DNS:nodewarden-webhook.kube-system.svc,DNS:nodewarden-webhook."
              "kube-system.svc.cluster.local,IP:127.0.0.1\nextendedKeyUsage=serverAuth\n");
  openssl({"x509", "-req", "-in", dir + "/tls.csr", "-CA", dir + "/ca.crt", "-CAkey",
           dir + "/ca.key", "-CAcreateserial", "-days", "2", "-extfile", dir + "/san.ext", "-out",
           dir + "/tls.crt"});
  webhookCa = dir + "/ca.crt";

  // The shipped base, as the README has it applied, through an overlay of the kind the
  // README shows: the caBundle, and the address — a URL, since the API server here has no
  // Service network to reach clientConfig.service through. Nothing else changes.
  port = freePort();
  const std::string base =
      std::filesystem::relative(sourceRoot() + "/systemd/kubernetes", dir + "/full").string();
  files.write("full/kustomization.yaml",
              "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\n"
              "resources:\n- " +
                  base +
                  "\npatches:\n"
                  "- target: {kind: ValidatingWebhookConfiguration, name: nodewarden-binding}\n"
                  "  patch: |-\n"
                  "    - op: replace\n"
                  "      path: /webhooks/0/clientConfig\n"
                  "      value:\n"
                  "        url: https://127.0.0.1:" +
                  std::to_string(port) +
                  "/v1/admission-review\n"
                  "        caBundle: " +
                  base64(slurp(webhookCa)) + "\n");
  // The whole base is accepted by the real API server (a server-side dry run validates and
  // admits every object) ...
  const Run dryRun = cluster.kubectl({"apply", "--dry-run=server", "-k", dir + "/full"});
  REQUIRE_MESSAGE(dryRun.status == 0, dryRun.err);
  CHECK(dryRun.out.find("daemonset.apps/nodewarden-agent created (server dry run)") !=
        std::string::npos);
  CHECK(dryRun.out.find("deployment.apps/nodewarden-webhook created (server dry run)") !=
        std::string::npos);
  // ... and as shipped, the caBundle placeholder makes it refuse the webhook's configuration
  // alone, as the README says.
  const Run asShipped =
      cluster.kubectl({"apply", "--dry-run=server", "-k", sourceRoot() + "/systemd/kubernetes"});
  CHECK(asShipped.status != 0);
  CHECK_MESSAGE(asShipped.err.find("ValidatingWebhookConfiguration in version \"v1\" cannot be "
                                   "handled as a ValidatingWebhookConfiguration: illegal base64 "
                                   "data") != std::string::npos,
                asShipped.err);
  CHECK(asShipped.out.find("clusterrole.rbac.authorization.k8s.io/nodewarden-webhook created") !=
        std::string::npos);
  // Applied for real without the agent's DaemonSet and with the webhook's Deployment at no
  // replicas: there is no kubelet to run their pods; this test runs the webhook itself.
  files.write("lane/kustomization.yaml",
              "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\n"
              "resources:\n- ../full\npatches:\n"
              "- patch: |-\n    $patch: delete\n    apiVersion: apps/v1\n    kind: DaemonSet\n"
              "    metadata: {name: nodewarden-agent, namespace: kube-system}\n"
              "- target: {kind: Deployment, name: nodewarden-webhook}\n"
              "  patch: |-\n    - {op: replace, path: /spec/replicas, value: 0}\n");
  const Run applied = cluster.kubectl({"apply", "-k", dir + "/lane"});
  REQUIRE_MESSAGE(applied.status == 0, applied.err);
  const Json vwc = kubectlJson("get validatingwebhookconfiguration nodewarden-binding -o json");
  REQUIRE(vwc["webhooks"][0]["name"] == kWebhookName);
  CHECK(vwc["webhooks"][0]["failurePolicy"] == "Ignore");
  CHECK(vwc["webhooks"][0]["sideEffects"] == "NoneOnDryRun");

  // The webhook's credentials: a token of its ServiceAccount (TokenRequest, as the kubelet
  // projects one into its pod), so it has exactly what the shipped RBAC grants.
  const Run token = cluster.kubectl("create token nodewarden-webhook -n kube-system --duration=2h");
  REQUIRE_MESSAGE(token.status == 0, token.err);
  webhookKubeconfig = files.write(
      "webhook.kubeconfig",
      "apiVersion: v1\nkind: Config\nclusters:\n- name: lane\n  cluster:\n"
      "    certificate-authority: " +
          cluster.info()["caFile"].get<std::string>() + "\n    server: " + cluster.server() +
          "\ncontexts:\n- name: lane\n  context:\n    cluster: lane\n"
          "    user: nodewarden-webhook\ncurrent-context: lane\nusers:\n"
          "- name: nodewarden-webhook\n  user:\n    token: " +
          token.out.substr(0, token.out.find('\n')) + "\n");

  // The Deployment's command line, with this run's files.
  webhook = std::make_unique<Background>(
      std::vector<std::string>{NODEWARDEN_BINARY, "webhook", "--policy",
                               sourceRoot() + "/systemd/kubernetes/policy.json", "--kubeconfig",
                               webhookKubeconfig, "--listen", "127.0.0.1:" + std::to_string(port),
                               "--tls-cert", dir + "/tls.crt", "--tls-key", dir + "/tls.key",
                               "--log-format", "json"},
      dir + "/webhook.log");
  // Ready: every cache listed (its /readyz), over TLS the run's CA verifies.
  REQUIRE_MESSAGE(waitUntil(
                      [&] {
                        return webhookGet("/readyz").find("ready") != std::string::npos &&
                               webhookGet("/readyz").find("not ready") == std::string::npos;
                      },
                      60),
                  diagnostics());

  // The API server calls it once its own informer has the configuration: a dry-run binding
  // of a canary pod, until the webhook logs the review.
  cluster.create(lanePod("wh-canary", "canary", {.scheduler = kLaneBinder}));
  REQUIRE_MESSAGE(waitUntil(
                      [&] {
                        bind("wh-canary", "canary", "admit-1", /*dryRun=*/true);
                        return !reviews("wh-canary/canary", /*dryRunToo=*/true).empty();
                      },
                      60),
                  diagnostics());
}

std::unique_ptr<Lane>& laneSlot() {
  static std::unique_ptr<Lane> lane;
  return lane;
}

// The lane, made by the first test case that needs it; a failed setup fails every case.
Lane& lane() {
  static bool tried = false;
  if (!laneSlot()) {
    REQUIRE_MESSAGE(!tried, "the lane's setup failed in an earlier test case");
    tried = true;
    laneSlot() = std::make_unique<Lane>();
  }
  return *laneSlot();
}

// The pod's PodScheduled condition.
Json scheduledCondition(const Json& pod) {
  for (const auto& c : pod["status"].value("conditions", Json::array())) {
    if (c.value("type", "") == "PodScheduled") return c;
  }
  return Json::object();
}

std::string causeMessage(const Json& status) {
  if (!status.contains("details") || !status["details"].contains("causes")) return "";
  return status["details"]["causes"][0].value("message", "");
}

}  // namespace

TEST_CASE("the webhook runs with the shipped RBAC and is refused nothing it needs") {
  Lane& l = lane();
  // Its watches listed everything (ready), and nothing it did was forbidden.
  CHECK(l.webhook->running());
  const std::string log = l.webhook->log();
  CHECK_MESSAGE(log.find("forbidden") == std::string::npos, log);
  CHECK_MESSAGE(log.find("\"status\":403") == std::string::npos, log);
  // The canary's review came from the API server with its dryRun flag, and was judged.
  const auto canary = l.reviews("wh-canary/canary", /*dryRunToo=*/true);
  REQUIRE(!canary.empty());
  CHECK(canary[0]["dry_run"] == true);
  CHECK(canary[0]["node"] == "admit-1");
  CHECK(canary[0]["verdict"] == "admit");
}

TEST_CASE(
    "admit: the real scheduler binds, the API server asks the webhook, the pod has its node") {
  Lane& l = lane();
  l.createForScheduler(
      lanePod("wh-admit", "fits", {.pinTo = "admit-1", .memory = "256Mi", .cpu = "500m"}),
      "admit-1", "admit");
  Json pod;
  REQUIRE_MESSAGE(l.waitUntil(
                      [&] {
                        pod = l.pod("wh-admit", "fits");
                        return pod["spec"].value("nodeName", "") == "admit-1";
                      },
                      60),
                  pod.dump(2) << l.diagnostics());
  const auto reviews = l.reviews("wh-admit/fits");
  REQUIRE_MESSAGE(reviews.size() == 1, l.diagnostics());
  CHECK(reviews[0]["verdict"] == "admit");
  CHECK(reviews[0]["node"] == "admit-1");
  CHECK(reviews[0]["allowed"] == true);
  CHECK(reviews[0]["dry_run"] == false);
  CHECK(scheduledCondition(pod).value("status", "") == "True");
  // The scheduler's own Event, as without the webhook.
  CHECK(l.waitUntil([&] { return !l.events("wh-admit", "fits", "Scheduled").empty(); }, 30));
  // Counted by the webhook and by the API server (validating, allowed).
  CHECK(sumSamples(l.webhookGet("/metrics"), "nodewarden_admissions_total",
                   {"verdict=\"admit\""}) >= 1);
  CHECK(sumSamples(
            l.apiserverMetrics(), "apiserver_admission_webhook_admission_duration_seconds_count",
            {"name=\"" + kWebhookName + "\"", "rejected=\"false\"", "type=\"validating\""}) >= 1);
}

TEST_CASE(
    "reject: the kubelet's MemoryPressure — the scheduler keeps off; another binder is refused") {
  Lane& l = lane();
  // The real node-lifecycle controller taints a node reporting MemoryPressure.
  Json node;
  REQUIRE_MESSAGE(l.waitUntil(
                      [&] {
                        node = l.kubectlJson("get node pressure-1 -o json");
                        for (const auto& t : node["spec"].value("taints", Json::array())) {
                          if (t["key"] == "node.kubernetes.io/memory-pressure") return true;
                        }
                        return false;
                      },
                      60),
                  node.dump(2));
  // So the real scheduler never binds a BestEffort pod there: no review is asked.
  l.createForScheduler(lanePod("wh-reject", "besteffort-1", {.pinTo = "pressure-1"}), "pressure-1",
                       "reject");
  Json pod;
  REQUIRE(l.waitUntil(
      [&] {
        pod = l.pod("wh-reject", "besteffort-1");
        return scheduledCondition(pod).value("reason", "") == "Unschedulable";
      },
      60));
  CHECK_MESSAGE(scheduledCondition(pod)["message"].get<std::string>().find("untolerated taint") !=
                    std::string::npos,
                pod.dump(2));
  CHECK(l.reviews("wh-reject/besteffort-1").empty());
  // A pod that tolerates the taint is bound by the scheduler and admitted (§5: MemoryPressure
  // turns away only BestEffort pods that do not tolerate it).
  l.createForScheduler(
      lanePod("wh-reject", "tolerant-1",
              {.pinTo = "pressure-1",
               .tolerations = Json::array({{{"key", "node.kubernetes.io/memory-pressure"},
                                            {"operator", "Exists"},
                                            {"effect", "NoSchedule"}}})}),
      "pressure-1", "admit");
  REQUIRE_MESSAGE(l.waitUntil(
                      [&] {
                        return l.pod("wh-reject", "tolerant-1")["spec"].value("nodeName", "") ==
                               "pressure-1";
                      },
                      60),
                  l.diagnostics());
  REQUIRE(l.reviews("wh-reject/tolerant-1").size() == 1);
  CHECK(l.reviews("wh-reject/tolerant-1")[0]["verdict"] == "admit");

  // A binder that ignores taints is refused with the §5 reason and message, exactly as the
  // API server hands the webhook's answer on.
  const ApiAnswer refused = l.bind("wh-reject", "besteffort-1", "pressure-1");
  CHECK(refused.code == 403);
  CHECK_MESSAGE(refused.body.value("reason", "") == "Evicted", refused.raw);
  CHECK(refused.body.value("message", "") ==
        "admission webhook \"" + kWebhookName + "\" denied the request: Evicted");
  CHECK(causeMessage(refused.body) == "Evicted: The node had condition: [MemoryPressure]. ");
  CHECK(l.pod("wh-reject", "besteffort-1")["spec"].value("nodeName", "") == "");
  const auto reviews = l.reviews("wh-reject/besteffort-1");
  REQUIRE(reviews.size() == 1);
  CHECK(reviews[0]["verdict"] == "reject");
  CHECK(reviews[0]["reason"] == "Evicted");
  CHECK(reviews[0]["message"] == "The node had condition: [MemoryPressure]. ");
  // The API server counts the webhook's denial with its code.
  CHECK(sumSamples(l.apiserverMetrics(), "apiserver_admission_webhook_rejection_count",
                   {"name=\"" + kWebhookName + "\"", "rejection_code=\"403\"",
                    "error_type=\"no_error\""}) >= 1);
}

TEST_CASE(
    "reject: nodewarden's own pressure — the scheduler binds, is refused, retries, then binds") {
  Lane& l = lane();
  // NodewardenMemoryPressure (the agent's condition) taints nothing: the scheduler binds.
  l.createForScheduler(lanePod("wh-reject", "besteffort-2", {.pinTo = "pressure-2"}), "pressure-2",
                       "reject");
  // A Burstable pod is admitted there (MemoryPressure refuses BestEffort pods only).
  l.createForScheduler(
      lanePod("wh-reject", "burstable-2", {.pinTo = "pressure-2", .memory = "128Mi"}), "pressure-2",
      "admit");
  REQUIRE_MESSAGE(l.waitUntil(
                      [&] {
                        return l.pod("wh-reject", "burstable-2")["spec"].value("nodeName", "") ==
                               "pressure-2";
                      },
                      60),
                  l.diagnostics());
  CHECK(l.reviews("wh-reject/burstable-2").at(0)["verdict"] == "admit");

  // Refused, and retried: the scheduler's binding error puts the pod back in its queue with
  // backoff, and its next attempt is refused again.
  REQUIRE_MESSAGE(l.waitUntil([&] { return l.reviews("wh-reject/besteffort-2").size() >= 2; }, 60),
                  l.diagnostics());
  for (const auto& review : l.reviews("wh-reject/besteffort-2")) {
    CHECK(review["verdict"] == "reject");
    CHECK(review["reason"] == "Evicted");
    CHECK(review["message"] == "The node had condition: [MemoryPressure]. ");
  }
  Json pod = l.pod("wh-reject", "besteffort-2");
  CHECK(pod["spec"].value("nodeName", "") == "");
  // What the scheduler records: FailedScheduling with the API server's words for the denial
  // (status.message: the §5 reason), the pod's PodScheduled False for a scheduler error.
  Json failed;
  REQUIRE(l.waitUntil(
      [&] {
        failed = l.events("wh-reject", "besteffort-2", "FailedScheduling");
        return !failed.empty();
      },
      30));
  const std::string denial =
      "admission webhook \"" + kWebhookName + "\" denied the request: Evicted";
  CHECK_MESSAGE(failed[0]["message"].get<std::string>().find(denial) != std::string::npos,
                failed.dump(2));
  REQUIRE(l.waitUntil(
      [&] {
        pod = l.pod("wh-reject", "besteffort-2");
        return scheduledCondition(pod).value("reason", "") == "SchedulerError";
      },
      30));
  CHECK(scheduledCondition(pod)["message"].get<std::string>().find(denial) != std::string::npos);

  // The agent sees the pressure gone and clears its condition: the scheduler's next attempt
  // binds the pod.
  const Json clear = {{"status",
                       {{"conditions", Json::array({{{"type", "NodewardenMemoryPressure"},
                                                     {"status", "False"},
                                                     {"reason", "NodewardenHasSufficientMemory"},
                                                     {"message", "no eviction threshold met"},
                                                     {"lastHeartbeatTime", rfc3339Now()},
                                                     {"lastTransitionTime", rfc3339Now()}}})}}}};
  const Run patched = l.cluster.kubectl({"patch", "node", "pressure-2", "--subresource=status",
                                         "--type=strategic", "-p", clear.dump()});
  REQUIRE_MESSAGE(patched.status == 0, patched.err);
  REQUIRE_MESSAGE(l.waitUntil(
                      [&] {
                        return l.pod("wh-reject", "besteffort-2")["spec"].value("nodeName", "") ==
                               "pressure-2";
                      },
                      60),
                  l.diagnostics());
  CHECK(l.reviews("wh-reject/besteffort-2").back()["verdict"] == "admit");
}

TEST_CASE(
    "wait: a terminating pod holds the room; refused, nothing evicted, bound once it is gone") {
  Lane& l = lane();
  // old (3Gi of wait-1's 4Gi) is deleted: terminating until its kubelet would finish it.
  const Run deleted = l.cluster.kubectl("delete pod old -n wh-wait --wait=false");
  REQUIRE_MESSAGE(deleted.status == 0, deleted.err);
  REQUIRE(l.pod("wh-wait", "old")["metadata"].contains("deletionTimestamp"));
  // The real scheduler counts the terminating pod (3Gi + 2Gi > 4Gi): its own pod stays
  // Pending.
  l.createForScheduler(lanePod("wh-wait", "scheduled", {.pinTo = "wait-1", .memory = "2Gi"}),
                       "wait-1", "wait");
  Json pod;
  REQUIRE_MESSAGE(l.waitUntil(
                      [&] {
                        pod = l.pod("wh-wait", "scheduled");
                        return scheduledCondition(pod).value("reason", "") == "Unschedulable";
                      },
                      60),
                  pod.dump(2) << l.diagnostics());
  CHECK(scheduledCondition(pod)["message"].get<std::string>().find("Insufficient memory") !=
        std::string::npos);
  // A second scheduler's binding is refused: it fits once old is gone.
  l.cluster.create(lanePod("wh-wait", "new", {.memory = "2Gi", .scheduler = kLaneBinder}));
  l.settle("wh-wait", "new", "wait-1", "wait");
  const ApiAnswer refused = l.bind("wh-wait", "new", "wait-1");
  CHECK(refused.code == 403);
  CHECK_MESSAGE(refused.body.value("reason", "") == "OutOfmemory", refused.raw);
  const std::string cause = causeMessage(refused.body);
  CHECK(cause.starts_with("OutOfmemory: Node didn't have enough resource: memory"));
  CHECK(cause.ends_with("; it fits once the terminating pods on the node are gone"));
  const auto reviews = l.reviews("wh-wait/new");
  REQUIRE(reviews.size() == 1);
  CHECK(reviews[0]["verdict"] == "wait");
  CHECK(reviews[0]["victims"] == "");
  // Nothing was asked of the API: no write of the webhook's names a pod of this namespace.
  for (const auto& write : l.logEvents("api-write")) {
    CHECK(write.value("pod", "").rfind("wh-wait/", 0) != 0);
  }

  // The kubelet finishes old: the scheduler binds its pod, the second binder's is admitted.
  l.finishDeletion("wh-wait", "old");
  REQUIRE_MESSAGE(
      l.waitUntil(
          [&] { return l.pod("wh-wait", "scheduled")["spec"].value("nodeName", "") == "wait-1"; },
          60),
      l.diagnostics());
  CHECK(l.reviews("wh-wait/scheduled").back()["verdict"] == "admit");
  l.settle("wh-wait", "new", "wait-1", "admit");
  const ApiAnswer admitted = l.bind("wh-wait", "new", "wait-1");
  CHECK_MESSAGE(admitted.code == 201, admitted.raw);
  CHECK(l.pod("wh-wait", "new")["spec"].value("nodeName", "") == "wait-1");
  CHECK(l.reviews("wh-wait/new").back()["verdict"] == "admit");
}

TEST_CASE(
    "preempt: victims go through the real Eviction API; a real PDB holds one back until it "
    "allows") {
  Lane& l = lane();
  // The budget as the real disruption controller computed it: guarded-a is its one healthy
  // pod and must stay.
  Json pdb;
  REQUIRE(l.waitUntil(
      [&] {
        pdb = l.kubectlJson("get pdb guarded -n wh-preempt -o json");
        return pdb["status"].value("observedGeneration", 0) ==
                   pdb["metadata"].value("generation", -1) &&
               pdb["status"].value("currentHealthy", -1) == 1;
      },
      60));
  CHECK(pdb["status"]["disruptionsAllowed"] == 0);
  CHECK(pdb["status"]["desiredHealthy"] == 1);

  // p (lane-high, 3Gi) on preempt-1 (4Gi: guarded-a 2Gi, loose-a 1Gi, both lane-low). §5
  // step 7: guarded-a must go (with it back p does not fit), loose-a may stay.
  l.cluster.create(
      lanePod("wh-preempt", "p",
              {.memory = "3Gi", .priorityClass = "lane-high", .scheduler = kLaneBinder}));
  const std::string pUid = l.uidOf("wh-preempt", "p");
  l.settle("wh-preempt", "p", "preempt-1", "preempt");
  const double evictions429Before =
      sumSamples(l.apiserverMetrics(), "apiserver_request_total",
                 {"code=\"429\"", "resource=\"pods\"", "subresource=\"eviction\""});
  const ApiAnswer first = l.bind("wh-preempt", "p", "preempt-1");
  CHECK(first.code == 403);
  CHECK_MESSAGE(first.body.value("reason", "") == "OutOfmemory", first.raw);
  CHECK(causeMessage(first.body)
            .ends_with("; preempting 1 lower-priority pod(s): wh-preempt/guarded-a"));
  auto reviews = l.reviews("wh-preempt/p");
  REQUIRE(reviews.size() == 1);
  CHECK(reviews[0]["verdict"] == "preempt");
  CHECK(reviews[0]["victims"] == "wh-preempt/guarded-a");

  // The pod is nominated to the node, as the scheduler nominates a preemptor.
  REQUIRE_MESSAGE(l.waitUntil(
                      [&] {
                        return l.pod("wh-preempt", "p")["status"].value("nominatedNodeName", "") ==
                               "preempt-1";
                      },
                      30),
                  l.diagnostics());
  // The Eviction API answers 429 (the budget), the webhook retries and says so; the API
  // server counts the 429s; guarded-a keeps running, and gets no Preempted event yet.
  std::vector<Json> retries;
  REQUIRE_MESSAGE(l.waitUntil(
                      [&] {
                        retries = l.logEvents("api-write-retry", "wh-preempt/guarded-a");
                        return retries.size() >= 2;
                      },
                      60),
                  l.diagnostics());
  CHECK(retries[0]["what"] == "eviction");
  CHECK(retries[0]["status"] == 429);
  CHECK_MESSAGE(retries[0]["detail"].get<std::string>().find(
                    "The disruption budget guarded needs 1 healthy pods and has 1 currently") !=
                    std::string::npos,
                retries[0].dump());
  CHECK(sumSamples(l.apiserverMetrics(), "apiserver_request_total",
                   {"code=\"429\"", "resource=\"pods\"", "subresource=\"eviction\""}) >=
        evictions429Before + 2);
  CHECK(sumSamples(l.webhookGet("/metrics"), "nodewarden_api_write_retries_total",
                   {"what=\"eviction\"", "code=\"429\""}) >= 2);
  Json guarded = l.pod("wh-preempt", "guarded-a");
  CHECK_FALSE(guarded["metadata"].contains("deletionTimestamp"));
  CHECK(l.events("wh-preempt", "guarded-a", "Preempted").empty());
  CHECK_FALSE(l.pod("wh-preempt", "loose-a")["metadata"].contains("deletionTimestamp"));

  // The scheduler-like retry of the binding is refused the same way and asks for nothing new.
  const ApiAnswer again = l.bind("wh-preempt", "p", "preempt-1");
  CHECK(again.code == 403);
  reviews = l.reviews("wh-preempt/p");
  REQUIRE(reviews.size() == 2);
  CHECK(reviews[1]["verdict"] == "preempt");

  // The budget allows one disruption once a second guarded pod is healthy elsewhere (the
  // real disruption controller recomputes it): the retried eviction goes through.
  l.cluster.create(lanePod("wh-preempt", "guarded-b",
                           {.node = "spare-1",
                            .memory = "1Gi",
                            .priorityClass = "lane-low",
                            .labels = {{"app", "guarded"}}}));
  Json stored = l.pod("wh-preempt", "guarded-b");
  stored["status"] = {{"phase", "Running"}};
  // The status a kubelet reports for it (Running, Ready), through the status subresource.
  nodewarden::cluster::Json snapshotStatus = {
      {"phase", "Running"},
      {"startTime", rfc3339Now()},
      {"conditions",
       Json::array(
           {{{"type", "Ready"}, {"status", "True"}, {"lastTransitionTime", rfc3339Now()}},
            {{"type", "ContainersReady"}, {"status", "True"}, {"lastTransitionTime", rfc3339Now()}},
            {{"type", "Initialized"}, {"status", "True"}, {"lastTransitionTime", rfc3339Now()}},
            {{"type", "PodScheduled"}, {"status", "True"}, {"lastTransitionTime", rfc3339Now()}}})},
      {"containerStatuses",
       Json::array({{{"name", "main"},
                     {"image", "registry.invalid/nodewarden/pause:3.10"},
                     {"imageID", ""},
                     {"ready", true},
                     {"started", true},
                     {"restartCount", 0},
                     {"state", {{"running", {{"startedAt", rfc3339Now()}}}}}}})}};
  l.cluster.replaceStatus("/api/v1/namespaces/wh-preempt/pods/guarded-b", snapshotStatus);
  Json evicted;
  REQUIRE_MESSAGE(l.waitUntil(
                      [&] {
                        evicted = l.pod("wh-preempt", "guarded-a");
                        return evicted["metadata"].contains("deletionTimestamp");
                      },
                      90),
                  l.kubectlJson("get pdb guarded -n wh-preempt -o json").dump(2)
                      << l.diagnostics());
  // Evicted as the Eviction API does it: the DisruptionTarget condition, a graceful delete.
  bool disruptionTarget = false;
  for (const auto& c : evicted["status"].value("conditions", Json::array())) {
    if (c["type"] == "DisruptionTarget") {
      disruptionTarget = c["status"] == "True" && c["reason"] == "EvictionByEvictionAPI";
    }
  }
  CHECK_MESSAGE(disruptionTarget, evicted.dump(2));
  std::vector<Json> done;
  REQUIRE(l.waitUntil(
      [&] {
        done = l.logEvents("api-write", "wh-preempt/guarded-a");
        for (const auto& d : done) {
          if (d["what"] == "eviction") return true;
        }
        return false;
      },
      30));
  for (const auto& d : done) {
    if (d["what"] != "eviction") continue;
    CHECK(d["ok"] == true);
    CHECK(d["attempts"].get<int>() >= 3);  // two 429s at least, then the eviction
  }
  // The Preempted event follows the eviction that succeeded.
  Json preempted;
  REQUIRE(l.waitUntil(
      [&] {
        preempted = l.events("wh-preempt", "guarded-a", "Preempted");
        return !preempted.empty();
      },
      30));
  CHECK(preempted[0]["message"] ==
        "Preempted by pod wh-preempt/p (" + pUid + ") on node preempt-1");
  CHECK(preempted[0]["source"].value("component", "") == "nodewarden-webhook");
  CHECK_FALSE(l.pod("wh-preempt", "loose-a")["metadata"].contains("deletionTimestamp"));

  // While guarded-a terminates the binding waits; once its kubelet finished it, admitted.
  l.settle("wh-preempt", "p", "preempt-1", "wait");
  const ApiAnswer waiting = l.bind("wh-preempt", "p", "preempt-1");
  CHECK(waiting.code == 403);
  CHECK(l.reviews("wh-preempt/p").back()["verdict"] == "wait");
  l.finishDeletion("wh-preempt", "guarded-a");
  l.settle("wh-preempt", "p", "preempt-1", "admit");
  const ApiAnswer admitted = l.bind("wh-preempt", "p", "preempt-1");
  CHECK_MESSAGE(admitted.code == 201, admitted.raw);
  CHECK(l.pod("wh-preempt", "p")["spec"].value("nodeName", "") == "preempt-1");
  CHECK(l.reviews("wh-preempt/p").back()["verdict"] == "admit");
}

TEST_CASE("a server-side dry run of the binding gets the verdict and evicts nothing") {
  Lane& l = lane();
  // q (lane-high, 2Gi) on dryrun-1 (4Gi, victim 3Gi lane-low): preempt, victim the victim.
  l.cluster.create(lanePod(
      "wh-dryrun", "q", {.memory = "2Gi", .priorityClass = "lane-high", .scheduler = kLaneBinder}));
  const std::string evictionsSeries = "apiserver_request_total";
  const std::vector<std::string> evictionLabels = {"resource=\"pods\"", "subresource=\"eviction\""};
  const double evictionsBefore = sumSamples(l.apiserverMetrics(), evictionsSeries, evictionLabels);
  l.settle("wh-dryrun", "q", "dryrun-1", "preempt");
  const std::size_t settling = l.reviews("wh-dryrun/q", /*dryRunToo=*/true).size();

  // The API's dryRun=All on pods/binding: the webhook is called (sideEffects: NoneOnDryRun),
  // answers as for real, acts not.
  const ApiAnswer dry = l.bind("wh-dryrun", "q", "dryrun-1", /*dryRun=*/true);
  CHECK(dry.code == 403);
  CHECK_MESSAGE(dry.body.value("reason", "") == "OutOfmemory", dry.raw);
  CHECK(causeMessage(dry.body).ends_with("; preempting 1 lower-priority pod(s): wh-dryrun/victim"));
  // kubectl create --dry-run=server of the Binding (kubectl posts it to the bindings
  // resource, not to pods/binding: the webhook must see that one too).
  const Json binding = {{"apiVersion", "v1"},
                        {"kind", "Binding"},
                        {"metadata", {{"name", "q"}, {"namespace", "wh-dryrun"}}},
                        {"target", {{"kind", "Node"}, {"name", "dryrun-1"}}}};
  const Run kubectlDry = l.cluster.kubectl("create --dry-run=server -f -", binding.dump());
  CHECK(kubectlDry.status != 0);
  CHECK_MESSAGE(kubectlDry.err.find("admission webhook \"" + kWebhookName +
                                    "\" denied the request: OutOfmemory") != std::string::npos,
                kubectlDry.err << kubectlDry.out);
  auto reviews = l.reviews("wh-dryrun/q", /*dryRunToo=*/true);
  REQUIRE_MESSAGE(reviews.size() == settling + 2, l.diagnostics());
  reviews.erase(reviews.begin(), reviews.begin() + static_cast<std::ptrdiff_t>(settling));
  for (const auto& review : reviews) {
    CHECK(review["verdict"] == "preempt");
    CHECK(review["dry_run"] == true);
    CHECK(review["victims"] == "wh-dryrun/victim");
  }
  // Nothing happened: the victim runs, q is nominated nowhere, no Preempted event, no
  // eviction reached the API server, the webhook wrote nothing about them.
  CHECK_FALSE(l.pod("wh-dryrun", "victim")["metadata"].contains("deletionTimestamp"));
  CHECK(l.pod("wh-dryrun", "q")["status"].value("nominatedNodeName", "") == "");
  CHECK(l.events("wh-dryrun", "victim", "Preempted").empty());
  CHECK(sumSamples(l.apiserverMetrics(), evictionsSeries, evictionLabels) == evictionsBefore);
  CHECK(l.logEvents("api-write", "wh-dryrun/victim").empty());
  CHECK(l.logEvents("api-write", "wh-dryrun/q").empty());

  // The same binding for real evicts the victim (one eviction, logged after the real review).
  const ApiAnswer real = l.bind("wh-dryrun", "q", "dryrun-1");
  CHECK(real.code == 403);
  REQUIRE(l.waitUntil(
      [&] { return l.pod("wh-dryrun", "victim")["metadata"].contains("deletionTimestamp"); }, 30));
  REQUIRE(l.waitUntil([&] { return !l.logEvents("api-write", "wh-dryrun/victim").empty(); }, 30));
  // In the log's order: the first review of q not a dry run, then the victim's eviction.
  std::size_t realReview = 0, eviction = 0, line = 0;
  std::istringstream lines(l.webhook->log());
  for (std::string text; std::getline(lines, text);) {
    ++line;
    const Json event = Json::parse(text, nullptr, false);
    if (!event.is_object()) continue;
    if (realReview == 0 && event.value("event", "") == "admission-review" &&
        event.value("pod", "") == "wh-dryrun/q" && !event.value("dry_run", true)) {
      realReview = line;
    }
    if (eviction == 0 && event.value("event", "") == "api-write" &&
        event.value("what", "") == "eviction" && event.value("pod", "") == "wh-dryrun/victim") {
      eviction = line;
    }
  }
  REQUIRE(realReview != 0);
  REQUIRE(eviction != 0);
  CHECK(eviction > realReview);
  CHECK(sumSamples(l.apiserverMetrics(), evictionsSeries, evictionLabels) == evictionsBefore + 1);
  l.finishDeletion("wh-dryrun", "victim");
  l.settle("wh-dryrun", "q", "dryrun-1", "admit");
  const ApiAnswer admitted = l.bind("wh-dryrun", "q", "dryrun-1");
  CHECK_MESSAGE(admitted.code == 201, admitted.raw);
}

TEST_CASE(
    "the webhook stopped: bindings go through (failurePolicy: Ignore), and the API server's metric "
    "shows it") {
  Lane& l = lane();
  // Running, the webhook refuses a BestEffort pod on open-1 (nodewarden's own pressure).
  l.createForScheduler(lanePod("wh-open", "before", {.pinTo = "open-1"}), "open-1", "reject");
  REQUIRE_MESSAGE(l.waitUntil([&] { return !l.reviews("wh-open/before").empty(); }, 60),
                  l.diagnostics());
  CHECK(l.reviews("wh-open/before")[0]["verdict"] == "reject");
  const std::string failOpen = "apiserver_admission_webhook_fail_open_count";
  const std::vector<std::string> ours = {"name=\"" + kWebhookName + "\"", "type=\"validating\""};
  const double failOpenBefore = sumSamples(l.apiserverMetrics(), failOpen, ours);

  // Stopped (SIGTERM: exit 0), every replica gone: nothing answers at its address.
  CHECK(l.webhook->stop() == 0);
  CHECK(l.webhookGet("/healthz").empty());
  // The scheduler's next attempt binds the pod the webhook refused, and a new one binds at
  // once: the API server lets the bindings through.
  l.cluster.create(lanePod("wh-open", "after", {.pinTo = "open-1"}));
  REQUIRE_MESSAGE(l.waitUntil(
                      [&] {
                        return l.pod("wh-open", "before")["spec"].value("nodeName", "") ==
                                   "open-1" &&
                               l.pod("wh-open", "after")["spec"].value("nodeName", "") == "open-1";
                      },
                      90),
                  l.diagnostics());
  // nodewarden's own metric cannot count what it never saw; the API server's does. The
  // shipped alert NodewardenWebhookFailingOpen reads both.
  double failOpenAfter = 0;
  REQUIRE(l.waitUntil(
      [&] {
        failOpenAfter = sumSamples(l.apiserverMetrics(), failOpen, ours);
        return failOpenAfter >= failOpenBefore + 2;
      },
      30));
  MESSAGE(failOpen << "{name=\"" << kWebhookName << "\"}: " << failOpenBefore << " -> "
                   << failOpenAfter);
  const std::string rules =
      slurp(sourceRoot() + "/systemd/kubernetes/components/monitoring/prometheusrule.yaml");
  CHECK(rules.find("apiserver_admission_webhook_fail_open_count{name=\"" + kWebhookName + "\"}") !=
        std::string::npos);
  // The API server says why in its log: the call failed and was ignored.
  CHECK(l.cluster.logTail("kube-apiserver", 400)
            .find("Failed calling webhook, failing open " + kWebhookName) != std::string::npos);
}
