#include "tests/cluster/cluster_env.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <net/if.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <stdexcept>
#include <thread>

#include "base/time.h"

extern char** environ;

namespace nodewarden::cluster {

namespace {

using std::chrono::steady_clock;

std::string slurpFd(int fd) {
  std::string text;
  ::lseek(fd, 0, SEEK_SET);
  char buffer[65536];
  for (ssize_t n; (n = ::read(fd, buffer, sizeof buffer)) > 0;) text.append(buffer, n);
  return text;
}

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

std::string lastLines(const std::string& text, int lines) {
  std::size_t at = text.size();
  if (at > 0 && text[at - 1] == '\n') --at;
  for (int n = 0; at > 0; --at) {
    if (text[at - 1] == '\n' && ++n == lines) break;
  }
  return text.substr(at);
}

std::vector<std::string> splitSpaces(const std::string& text) {
  std::vector<std::string> words;
  std::istringstream in(text);
  for (std::string word; in >> word;) words.push_back(word);
  return words;
}

// Waits for `pid` until `deadline`; SIGKILLs it past that. Returns the wait status.
int waitBounded(pid_t pid, SteadyTime deadline, bool* timedOut = nullptr) {
  int status = 0;
  for (;;) {
    const pid_t done = ::waitpid(pid, &status, WNOHANG);
    if (done == pid) return status;
    if (done < 0 && errno != EINTR) return -1;
    if (steady_clock::now() > deadline) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, &status, 0);
      if (timedOut != nullptr) *timedOut = true;
      return status;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

}  // namespace

void skip(const std::string& why) {
  std::printf("skipped: %s\n", why.c_str());
  std::fflush(stdout);
  std::exit(77);
}

std::string kubectlPath() {
  const char* path = std::getenv("PATH");
  std::stringstream dirs(path != nullptr ? path : "");
  for (std::string dir; std::getline(dirs, dir, ':');) {
    const std::string candidate = dir + "/kubectl";
    if (!dir.empty() && ::access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return ::access("/usr/bin/kubectl", X_OK) == 0 ? "/usr/bin/kubectl" : "";
}

std::string kubernetesRelease() {
  std::ifstream in(std::string(NODEWARDEN_SOURCE_ROOT) + "/tests/upstream/go.mod");
  for (std::string line; std::getline(in, line);) {
    std::istringstream words(line);
    std::string module, version;
    words >> module >> version;
    if (module == "k8s.io/kubernetes" && version.starts_with("v")) return version;
  }
  throw std::runtime_error("tests/upstream/go.mod requires no k8s.io/kubernetes");
}

std::string enterPrivateNetwork() {
  static std::string address;
  if (!address.empty()) return address;
  if (::unshare(CLONE_NEWNET) != 0) {
    skip(std::string("the stand-in kubelet needs a private network namespace and "
                     "unshare(CLONE_NEWNET) failed: ") +
         std::strerror(errno) + " (run as root)");
  }
  const int sock = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (sock < 0) throw std::runtime_error(std::string("socket: ") + std::strerror(errno));
  auto fail = [sock](const std::string& what) {
    const std::string message = what + ": " + std::strerror(errno);
    ::close(sock);
    throw std::runtime_error("entering a private network namespace: " + message);
  };
  ifreq request{};
  std::strncpy(request.ifr_name, "lo", IFNAMSIZ - 1);
  if (::ioctl(sock, SIOCGIFFLAGS, &request) != 0) fail("SIOCGIFFLAGS lo");
  request.ifr_flags |= IFF_UP | IFF_RUNNING;
  if (::ioctl(sock, SIOCSIFFLAGS, &request) != 0) fail("SIOCSIFFLAGS lo up");
  // A second address on lo, labelled lo:nw: local like 127.0.0.1, but not in 127.0.0.0/8,
  // so the API server accepts it as a node address to proxy to.
  const char* kPrivate = "10.250.0.1";
  ifreq alias{};
  std::strncpy(alias.ifr_name, "lo:nw", IFNAMSIZ - 1);
  auto* in = reinterpret_cast<sockaddr_in*>(&alias.ifr_addr);
  in->sin_family = AF_INET;
  ::inet_pton(AF_INET, kPrivate, &in->sin_addr);
  if (::ioctl(sock, SIOCSIFADDR, &alias) != 0) fail(std::string("SIOCSIFADDR lo:nw ") + kPrivate);
  ::close(sock);
  address = kPrivate;
  return address;
}

Run run(const std::vector<std::string>& argv, const std::string& input,
        const std::map<std::string, std::string>& env, int timeoutSeconds) {
  const int in = ::memfd_create("stdin", MFD_CLOEXEC);
  const int out = ::memfd_create("stdout", MFD_CLOEXEC);
  const int err = ::memfd_create("stderr", MFD_CLOEXEC);
  if (in < 0 || out < 0 || err < 0) throw std::runtime_error("memfd_create failed");
  if (!input.empty() &&
      ::write(in, input.data(), input.size()) != static_cast<ssize_t>(input.size())) {
    throw std::runtime_error("writing a child's stdin failed");
  }
  ::lseek(in, 0, SEEK_SET);

  std::vector<std::string> environment;
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string entry = *e;
    if (!env.contains(entry.substr(0, entry.find('=')))) environment.push_back(entry);
  }
  for (const auto& [name, value] : env) environment.push_back(name + "=" + value);
  std::vector<char*> args, envp;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  for (const auto& e : environment) envp.push_back(const_cast<char*>(e.c_str()));
  envp.push_back(nullptr);

  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid < 0) throw std::runtime_error("fork failed");
  if (pid == 0) {
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) ::_exit(127);
    ::dup2(in, 0);
    ::dup2(out, 1);
    ::dup2(err, 2);
    ::execvpe(args[0], args.data(), envp.data());
    std::fprintf(stderr, "exec %s: %s\n", args[0], std::strerror(errno));
    ::_exit(127);
  }
  bool timedOut = false;
  const int status =
      waitBounded(pid, steady_clock::now() + std::chrono::seconds(timeoutSeconds), &timedOut);
  Run result;
  result.status = (!timedOut && WIFEXITED(status)) ? WEXITSTATUS(status) : -1;
  result.out = slurpFd(out);
  result.err = slurpFd(err);
  if (timedOut) result.err += "\n(killed after " + std::to_string(timeoutSeconds) + " s)";
  ::close(in);
  ::close(out);
  ::close(err);
  return result;
}

Cluster::Cluster(const ClusterOptions& options) {
  if (kubectlPath().empty()) {
    skip(
        "the lane talks to the cluster with kubectl, and there is none on the PATH or at "
        "/usr/bin/kubectl");
  }
  const std::string privateAddress = options.kubelets.empty() ? "" : enterPrivateNetwork();
  dir_.emplace("nw-cluster");
  const char* launcher = std::getenv("NW_CONTROL_PLANE");
  std::vector<std::string> argv = {
      launcher != nullptr && *launcher != '\0' ? launcher : NW_CONTROL_PLANE,
      "up",
      "--dir",
      dir_->path.string() + "/run",
      "--timeout",
      std::to_string(options.readyTimeoutSeconds) + "s",
      "--remove-dir-if-orphaned"};
  if (!options.kubelets.empty()) {
    argv.push_back("--kubelet-address");
    argv.push_back(privateAddress);
    for (const auto& node : options.kubelets) {
      argv.push_back("--kubelet");
      argv.push_back(node);
    }
  }
  if (!options.nodeLeases) argv.push_back("--no-node-leases");
  for (const auto& a : options.apiserverArgs) argv.push_back("--apiserver-arg=" + a);
  for (const auto& a : options.schedulerArgs) argv.push_back("--scheduler-arg=" + a);
  for (const auto& a : options.controllerManagerArgs)
    argv.push_back("--controller-manager-arg=" + a);

  const std::string logPath = dir_->path.string() + "/launcher.log";
  int ready[2];
  if (::pipe2(ready, O_CLOEXEC) != 0) throw std::runtime_error("pipe failed");
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  const pid_t parent = ::getpid();
  launcher_ = ::fork();
  if (launcher_ < 0) throw std::runtime_error("fork failed");
  if (launcher_ == 0) {
    // SIGTERM when this test dies: the launcher then stops every component it started.
    ::prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (::getppid() != parent) ::_exit(127);
    const int log = ::open(logPath.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    const int null = ::open("/dev/null", O_RDONLY);
    ::dup2(null, 0);
    ::dup2(ready[1], 1);
    ::dup2(log, 2);
    ::execv(args[0], args.data());
    std::fprintf(stderr, "exec %s: %s\n", args[0], std::strerror(errno));
    ::_exit(127);
  }
  ::close(ready[1]);

  // The launcher prints one JSON line when ready; EOF first means it ended.
  std::string line;
  const auto deadline =
      steady_clock::now() + std::chrono::seconds(options.readyTimeoutSeconds + 60);
  bool eof = false;
  while (line.find('\n') == std::string::npos && !eof) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - steady_clock::now());
    if (left.count() <= 0) break;
    pollfd fd{ready[0], POLLIN, 0};
    const int n = ::poll(&fd, 1, static_cast<int>(std::min<long>(left.count(), 1000)));
    if (n < 0 && errno != EINTR) break;
    if (n <= 0) continue;
    char buffer[4096];
    const ssize_t got = ::read(ready[0], buffer, sizeof buffer);
    if (got > 0) line.append(buffer, got);
    if (got == 0) eof = true;
  }
  ::close(ready[0]);
  if (line.find('\n') == std::string::npos) {
    ::kill(launcher_, SIGTERM);
    const int status = waitBounded(launcher_, steady_clock::now() + std::chrono::seconds(60));
    launcher_ = -1;
    const std::string log = slurp(logPath);
    if (eof && WIFEXITED(status) && WEXITSTATUS(status) == 77) {
      dir_.reset();
      skip(lastLines(log, 5));
    }
    throw std::runtime_error(
        std::string("nw-control-plane up ") +
        (eof ? "ended before the control plane was ready" : "was not ready in time") +
        "; end of its log:\n" + lastLines(log, 60));
  }
  info_ = Json::parse(line.substr(0, line.find('\n')));
}

Cluster::~Cluster() {
  if (launcher_ <= 0) return;
  ::kill(launcher_, SIGTERM);
  waitBounded(launcher_, steady_clock::now() + std::chrono::seconds(60));
  if (std::getenv("NW_CLUSTER_KEEP") != nullptr) {
    std::error_code ignored;
    const auto kept =
        std::filesystem::temp_directory_path() / ("nw-cluster-kept-" + std::to_string(::getpid()));
    std::filesystem::rename(dir_->path, kept, ignored);
    std::fprintf(stderr, "NW_CLUSTER_KEEP: the run's directory is %s\n", kept.c_str());
    std::filesystem::create_directory(dir_->path, ignored);
  }
}

std::string Cluster::kubeletAddress(const std::string& node) const {
  return info_.at("kubelets").at(node).at("address");
}
int Cluster::kubeletPort(const std::string& node) const {
  return info_.at("kubelets").at(node).at("port");
}
std::string Cluster::kubeletRoot(const std::string& node) const {
  return info_.at("kubelets").at(node).at("root");
}
std::string Cluster::kubeletRequests(const std::string& node) const {
  return slurp(info_.at("kubelets").at(node).at("requestLog"));
}
std::string Cluster::logTail(const std::string& component, int lines) const {
  return lastLines(slurp(info_["logs"].get<std::string>() + "/" + component + ".log"), lines);
}

Run Cluster::kubectl(const std::string& args, const std::string& input) const {
  return kubectl(splitSpaces(args), input);
}

Run Cluster::kubectl(const std::vector<std::string>& args, const std::string& input) const {
  std::vector<std::string> argv = {kubectlPath()};
  argv.insert(argv.end(), args.begin(), args.end());
  // HOME: kubectl's discovery cache stays in the run's directory.
  return run(argv, input, {{"KUBECONFIG", kubeconfig()}, {"HOME", dir()}});
}

Json Cluster::kubectlJson(const std::string& args, const std::string& input) const {
  const Run result = kubectl(args, input);
  if (result.status != 0) {
    throw std::runtime_error("kubectl " + args + " failed (" + std::to_string(result.status) +
                             "): " + result.err);
  }
  return Json::parse(result.out);
}

Json Cluster::create(const Json& object) const {
  return kubectlJson("create -o json -f -", object.dump());
}

Json Cluster::createAll(const Json& objects) const {
  if (objects.empty()) return Json::array();
  const Json list = {{"apiVersion", "v1"}, {"kind", "List"}, {"items", objects}};
  const Run created = kubectl("create -o json -f -", list.dump());
  if (created.status != 0) {
    throw std::runtime_error("kubectl create of " + std::to_string(objects.size()) +
                             " objects failed (" + std::to_string(created.status) +
                             "): " + created.err);
  }
  // kubectl prints each object created as a JSON document of its own, in the order given.
  Json stored = Json::array();
  std::istringstream documents(created.out);
  while (documents >> std::ws && documents.peek() != std::char_traits<char>::eof()) {
    Json document;
    documents >> document;
    stored.push_back(std::move(document));
  }
  if (stored.size() != objects.size()) {
    throw std::runtime_error("kubectl create printed " + std::to_string(stored.size()) +
                             " objects for " + std::to_string(objects.size()));
  }
  return stored;
}

void Cluster::replaceStatuses(const Json& objects) const {
  if (objects.empty()) return;
  // Without a resourceVersion, kubectl replace reads each object's current one first; a
  // controller's write between that read and the replace (the node-lifecycle controller
  // tainting a new Node) is a conflict: replacing the same statuses again is harmless, and
  // is retried as clients do.
  Json items = objects;
  for (auto& item : items) item["metadata"].erase("resourceVersion");
  const Json list = {{"apiVersion", "v1"}, {"kind", "List"}, {"items", items}};
  for (int attempt = 1;; ++attempt) {
    const Run replaced = kubectl("replace --subresource=status -o name -f -", list.dump());
    if (replaced.status == 0) return;
    if (attempt == 10 || replaced.err.find("Conflict") == std::string::npos) {
      throw std::runtime_error("kubectl replace --subresource=status of " +
                               std::to_string(objects.size()) + " objects failed (" +
                               std::to_string(replaced.status) + "): " + replaced.err);
    }
  }
}

Json Cluster::replaceStatus(const std::string& path, const Json& status) const {
  // A controller may write the object between the read and the write (the node-lifecycle
  // controller taints new Nodes): a conflict is read again and retried, as clients do.
  for (int attempt = 1;; ++attempt) {
    Json object = kubectlJson("get --raw " + path);
    object["status"] = status;
    const Run put = kubectl("replace --raw " + path + "/status -f -", object.dump());
    if (put.status == 0) return Json::parse(put.out);
    if (attempt == 10 || put.err.find("Conflict") == std::string::npos) {
      throw std::runtime_error("PUT " + path + "/status failed (" + std::to_string(put.status) +
                               "): " + put.err);
    }
  }
}

bool Cluster::waitUntil(const std::function<bool()>& condition, int timeoutSeconds) const {
  const auto deadline = steady_clock::now() + std::chrono::seconds(timeoutSeconds);
  for (;;) {
    if (condition()) return true;
    if (steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(250));
  }
}

std::string rfc3339Now() {
  char text[32];
  const std::time_t t = std::time(nullptr);
  std::tm utc{};
  ::gmtime_r(&t, &utc);
  std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%SZ", &utc);
  return text;
}

}  // namespace nodewarden::cluster

namespace nodewarden::cluster {

namespace {

// A member of a snapshot: an array of objects or a List of them.
Json itemsOf(const Json& snapshot, const char* member) {
  if (!snapshot.contains(member)) return Json::array();
  const Json& value = snapshot[member];
  if (value.is_object() && value.contains("items")) return value["items"];
  return value.is_array() ? value : Json::array();
}

// metadata fit for creating: name, namespace, labels, annotations (the server assigns the
// rest).
Json creatableMetadata(const Json& object) {
  const Json metadata = object.value("metadata", Json::object());
  Json out = Json::object();
  for (const char* field : {"name", "namespace", "labels", "annotations"}) {
    if (metadata.contains(field)) out[field] = metadata[field];
  }
  return out;
}

// A container status as a kubelet reports a running (or, for a finished init container,
// completed) container, with the snapshot's own fields for it laid over.
Json containerStatus(const Json& container, const Json& given, const std::string& startedAt,
                     bool completed) {
  Json status = {{"name", container["name"]},
                 {"image", container.value("image", "")},
                 {"imageID", ""},
                 {"restartCount", 0}};
  if (completed) {
    status["ready"] = false;
    status["started"] = false;
    status["state"] = {{"terminated",
                        {{"exitCode", 0},
                         {"reason", "Completed"},
                         {"startedAt", startedAt},
                         {"finishedAt", startedAt}}}};
  } else {
    status["ready"] = true;
    status["started"] = true;
    status["state"] = {{"running", {{"startedAt", startedAt}}}};
  }
  for (const auto& [field, value] : given.items()) status[field] = value;
  return status;
}

Json givenStatusOf(const Json& statuses, const std::string& name) {
  for (const auto& s : statuses) {
    if (s.value("name", "") == name) return s;
  }
  return Json::object();
}

// The status a kubelet would have reported for the snapshot's pod.
Json kubeletPodStatus(const Json& pod, const Json& stored) {
  Json status = pod.value("status", Json::object());
  // The server computes the QoS class at creation and keeps it.
  status["qosClass"] = stored["status"]["qosClass"];
  const std::string phase = status.value("phase", "Pending");
  status["phase"] = phase;
  if (phase != "Running") return status;
  const std::string now = rfc3339Now();
  if (!status.contains("startTime")) status["startTime"] = now;
  const std::string started = status["startTime"];
  Json conditions = status.value("conditions", Json::array());
  for (const char* type :
       {"PodReadyToStartContainers", "Initialized", "Ready", "ContainersReady", "PodScheduled"}) {
    bool present = false;
    for (const auto& c : conditions) present = present || c.value("type", "") == type;
    if (!present) {
      conditions.push_back({{"type", type}, {"status", "True"}, {"lastTransitionTime", started}});
    }
  }
  status["conditions"] = conditions;
  const Json& spec = stored["spec"];
  Json containers = Json::array();
  for (const auto& c : spec["containers"]) {
    containers.push_back(containerStatus(
        c, givenStatusOf(status.value("containerStatuses", Json::array()), c["name"]), started,
        false));
  }
  status["containerStatuses"] = containers;
  if (spec.contains("initContainers")) {
    Json inits = Json::array();
    for (const auto& c : spec["initContainers"]) {
      const bool sidecar = c.value("restartPolicy", "") == "Always";
      inits.push_back(containerStatus(
          c, givenStatusOf(status.value("initContainerStatuses", Json::array()), c["name"]),
          started, !sidecar));
    }
    status["initContainerStatuses"] = inits;
  }
  return status;
}

}  // namespace

std::map<std::string, std::string> loadSnapshot(const Cluster& cluster, const Json& snapshot) {
  const Json nodes = itemsOf(snapshot, "nodes"), pods = itemsOf(snapshot, "pods"),
             classes = itemsOf(snapshot, "priorityClasses"),
             budgets = itemsOf(snapshot, "podDisruptionBudgets");

  // Namespaces, each usable once the serviceaccount controller has made its account.
  std::set<std::string> namespaces;
  for (const auto& list : {pods, budgets}) {
    for (const auto& o : list) namespaces.insert(o["metadata"].value("namespace", "default"));
  }
  for (const auto& ns : namespaces) {
    if (cluster.kubectl("get namespace " + ns).status != 0) {
      cluster.create({{"apiVersion", "v1"}, {"kind", "Namespace"}, {"metadata", {{"name", ns}}}});
    }
    if (!cluster.waitUntil(
            [&] { return cluster.kubectl("get serviceaccount default -n " + ns).status == 0; },
            120)) {
      throw std::runtime_error("namespace " + ns + ": no default ServiceAccount after 120 s");
    }
  }

  for (const auto& pc : classes) {
    const std::string name = pc["metadata"]["name"];
    if (name.starts_with("system-")) continue;  // built in
    Json object = {{"apiVersion", "scheduling.k8s.io/v1"},
                   {"kind", "PriorityClass"},
                   {"metadata", creatableMetadata(pc)},
                   {"value", pc["value"]}};
    for (const char* field : {"globalDefault", "preemptionPolicy", "description"}) {
      if (pc.contains(field)) object[field] = pc[field];
    }
    cluster.create(object);
  }
  // The Priority admission plugin computes spec.priority from the class and refuses a
  // priority given without one: such pods get a class of their value.
  std::set<std::int64_t> bareValues;
  for (const auto& pod : pods) {
    const Json spec = pod.value("spec", Json::object());
    if (spec.contains("priority") && !spec.contains("priorityClassName")) {
      bareValues.insert(spec["priority"].get<std::int64_t>());
    }
  }
  for (const auto value : bareValues) {
    cluster.create({{"apiVersion", "scheduling.k8s.io/v1"},
                    {"kind", "PriorityClass"},
                    {"metadata", {{"name", "nw-priority-" + std::to_string(value)}}},
                    {"value", value}});
  }

  // Nodes, then pods, each in one `kubectl create` of a List and one `kubectl replace
  // --subresource=status` of their statuses: a kubectl run per object would take minutes
  // for a cluster of hundreds of pods on a busy machine. The status subresource keeps the
  // spec the server has.
  const std::string now = rfc3339Now();
  Json nodeObjects = Json::array();
  for (const auto& node : nodes) {
    Json object = {{"apiVersion", "v1"}, {"kind", "Node"}, {"metadata", creatableMetadata(node)}};
    if (node.contains("spec")) object["spec"] = node["spec"];
    nodeObjects.push_back(object);
  }
  const Json storedNodes = cluster.createAll(nodeObjects);
  Json nodeStatuses = Json::array();
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    const Json& node = nodes[i];
    Json object = storedNodes.at(i);
    const std::string name = object["metadata"]["name"];
    Json status = node.value("status", Json::object());
    Json conditions = status.value("conditions", Json::array());
    for (auto& c : conditions) {
      if (!c.contains("lastHeartbeatTime")) c["lastHeartbeatTime"] = now;
      if (!c.contains("lastTransitionTime")) c["lastTransitionTime"] = now;
    }
    status["conditions"] = conditions;
    if (cluster.info()["kubelets"].contains(name)) {
      status["addresses"] =
          Json::array({{{"type", "InternalIP"}, {"address", cluster.kubeletAddress(name)}},
                       {{"type", "Hostname"}, {"address", name}}});
      status["daemonEndpoints"] = {{"kubeletEndpoint", {{"Port", cluster.kubeletPort(name)}}}};
    }
    object["status"] = status;
    nodeStatuses.push_back(object);
  }
  cluster.replaceStatuses(nodeStatuses);

  Json podObjects = Json::array();
  for (const auto& pod : pods) {
    Json object = {{"apiVersion", "v1"}, {"kind", "Pod"}, {"metadata", creatableMetadata(pod)}};
    Json spec = pod.value("spec", Json::object());
    for (const char* list : {"containers", "initContainers"}) {
      if (!spec.contains(list)) continue;
      for (auto& c : spec[list]) {
        if (!c.contains("image")) c["image"] = "registry.invalid/nodewarden/pause:3.10";
      }
    }
    if (spec.contains("priority")) {
      if (!spec.contains("priorityClassName")) {
        spec["priorityClassName"] =
            "nw-priority-" + std::to_string(spec["priority"].get<std::int64_t>());
      }
      spec.erase("priority");
    }
    object["spec"] = spec;
    podObjects.push_back(object);
  }
  const Json storedPods = cluster.createAll(podObjects);
  std::map<std::string, std::string> uids;
  Json podStatuses = Json::array();
  for (std::size_t i = 0; i < pods.size(); ++i) {
    Json object = storedPods.at(i);
    const std::string ns = object["metadata"]["namespace"], name = object["metadata"]["name"];
    uids[ns + "/" + name] = object["metadata"]["uid"];
    object["status"] = kubeletPodStatus(pods[i], object);
    podStatuses.push_back(object);
  }
  cluster.replaceStatuses(podStatuses);

  for (const auto& pdb : budgets) {
    cluster.create({{"apiVersion", "policy/v1"},
                    {"kind", "PodDisruptionBudget"},
                    {"metadata", creatableMetadata(pdb)},
                    {"spec", pdb["spec"]}});
  }

  if (snapshot.contains("stats")) {
    for (const auto& [node, summary] : snapshot["stats"].items()) {
      if (!cluster.info()["kubelets"].contains(node)) continue;
      Json served = summary;
      for (auto& pod : served["pods"]) {
        const std::string key =
            pod["podRef"].value("namespace", "") + "/" + pod["podRef"].value("name", "");
        if (uids.contains(key)) pod["podRef"]["uid"] = uids[key];
      }
      std::filesystem::create_directories(cluster.kubeletRoot(node) + "/stats");
      std::ofstream(cluster.kubeletRoot(node) + "/stats/summary", std::ios::trunc)
          << served.dump(2);
    }
  }

  // Settled: the node-lifecycle controller has lifted the not-ready taint the admission
  // plugin put on each new Node, and the disruption controller has computed each budget.
  Json last;
  const bool settled = cluster.waitUntil(
      [&] {
        last = cluster.kubectlJson("get nodes -o json");
        for (const auto& node : last["items"]) {
          for (const auto& taint : node["spec"].value("taints", Json::array())) {
            if (taint["key"] == "node.kubernetes.io/not-ready") return false;
          }
        }
        last = cluster.kubectlJson("get pdb -A -o json");
        for (const auto& pdb : last["items"]) {
          const Json status = pdb.value("status", Json::object());
          if (status.value("observedGeneration", 0) < pdb["metadata"].value("generation", 1))
            return false;
        }
        return true;
      },
      180);
  if (!settled) {
    throw std::runtime_error("the cluster did not settle in 180 s: " + last.dump(2) + "\n" +
                             cluster.logTail("kube-controller-manager"));
  }
  return uids;
}

Json kubectlSnapshot(const Cluster& cluster) {
  Json snapshot = {{"nodes", cluster.kubectlJson("get nodes -o json")},
                   {"pods", cluster.kubectlJson("get pods -A -o json")},
                   {"priorityClasses", cluster.kubectlJson("get priorityclasses -o json")},
                   {"podDisruptionBudgets", cluster.kubectlJson("get pdb -A -o json")},
                   {"stats", Json::object()}};
  for (const auto& node : snapshot["nodes"]["items"]) {
    const std::string name = node["metadata"]["name"];
    const Run summary = cluster.kubectl("get --raw /api/v1/nodes/" + name + "/proxy/stats/summary");
    if (summary.status == 0) snapshot["stats"][name] = Json::parse(summary.out);
  }
  return snapshot;
}

std::string example(const std::string& name) {
  return std::string(NODEWARDEN_SOURCE_ROOT) + "/examples/" + name;
}

Json readJson(const std::string& path) {
  std::ifstream in(path);
  if (!in.good()) throw std::runtime_error("cannot read " + path);
  return Json::parse(in);
}

}  // namespace nodewarden::cluster
