#include "tests/e2e/e2e_env.h"

#include <arpa/inet.h>
#include <doctest/doctest.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>
#include <thread>

#include "cgroups/pods.h"
#include "cgroups/readers.h"

#ifndef NODEWARDEN_BINARY
#error "the build passes NODEWARDEN_BINARY, the path of the nodewarden executable"
#endif

namespace nodewarden::e2e {
namespace {

std::string gSkipReason;
cgroups::Hierarchy gHierarchy;
// Every pod process spawned, with its wait status once reaped here. Sandbox::reap() reaps
// any child that ended, so statuses are collected here first and never lost to it.
constexpr int kStatusLost = -1;
std::map<pid_t, std::optional<int>> gChildren;

void collectStatuses() {
  for (auto& [pid, status] : gChildren) {
    if (status) continue;
    int value = 0;
    const pid_t done = ::waitpid(pid, &value, WNOHANG);
    if (done == pid) status = value;
    if (done < 0 && errno == ECHILD) status = kStatusLost;
  }
}

// The body of a pod process: allocate, touch, report readiness on `ready`, sleep. With a
// `command` pipe it first reports 's' (started: everything but the allocation is charged)
// and reads the number of bytes to allocate from the pipe.
int allocateBody(std::uint64_t bytes, OnTerm onTerm, int lifetimeSeconds, int ready,
                 int command = -1) {
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);  // never outlive a test killed by a timeout
  if (onTerm == OnTerm::Ignore) std::signal(SIGTERM, SIG_IGN);
  if (onTerm == OnTerm::Exit42) std::signal(SIGTERM, [](int) { ::_exit(42); });
  if (command >= 0) {
    if (::write(ready, "s", 1) != 1) return 3;
    if (::read(command, &bytes, sizeof bytes) != ssize_t(sizeof bytes)) return 3;
    ::close(command);
  }
  if (bytes > 0) {
    void* memory =
        ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (memory == MAP_FAILED) return 2;
    std::memset(memory, 0x5a, bytes);  // anonymous and touched: unreclaimable without swap
  }
  if (ready >= 0) {
    (void)!::write(ready, "r", 1);
    ::close(ready);
  }
  for (int i = 0; i < lifetimeSeconds * 10; ++i) ::usleep(100000);
  return 0;
}

bool readAll(int fd, std::string& out) {
  char buffer[4096];
  while (true) {
    const ssize_t n = ::read(fd, buffer, sizeof buffer);
    if (n > 0) {
      out.append(buffer, std::size_t(n));
      continue;
    }
    if (n == 0) return true;
    if (errno == EINTR) continue;
    return false;
  }
}

std::string lower(std::string text) {
  std::transform(text.begin(), text.end(), text.begin(),
                 [](unsigned char c) { return char(std::tolower(c)); });
  return text;
}

}  // namespace

const cgroups::Hierarchy& hierarchy() {
  return gHierarchy;
}

cgroups::Sandbox makeSandbox(std::optional<std::uint64_t> memoryLimit, cgroups::Driver driver) {
  static int counter = 0;
  cgroups::SandboxOptions options;
  options.name = "nodewarden-e2e-" + std::to_string(::getpid()) + "-" + std::to_string(++counter);
  options.memoryLimit = memoryLimit;
  options.driver = driver;
  auto sandbox = cgroups::Sandbox::create(gHierarchy, options);
  if (!sandbox) FAIL(sandbox.error().message);
  if (memoryLimit && gHierarchy.memoryVersion == cgroups::Version::V1) {
    // No swap escape where swap accounting exists; absent on kernels without it.
    (void)sandbox->writeMemoryFile(sandbox->kubepods(), "memory.memsw.limit_in_bytes",
                                   std::to_string(*memoryLimit));
  } else if (memoryLimit) {
    (void)sandbox->writeMemoryFile(sandbox->kubepods(), "memory.swap.max", "0");
  }
  return std::move(sandbox).value();
}

bool alive(pid_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string text((std::istreambuf_iterator<char>(stat)), std::istreambuf_iterator<char>());
  if (text.empty()) return false;
  const std::size_t close = text.rfind(')');
  return close != std::string::npos && close + 2 < text.size() && text[close + 2] != 'Z';
}

bool waitUntil(const std::function<bool()>& condition, Millis timeout, Millis step) {
  const auto deadline = now() + timeout;
  while (true) {
    if (condition()) return true;
    if (now() >= deadline) return false;
    std::this_thread::sleep_for(step);
  }
}

TempDir::TempDir() {
  std::string pattern = "/tmp/nodewarden-e2e-XXXXXX";
  if (::mkdtemp(pattern.data()) == nullptr) FAIL("mkdtemp: " << std::strerror(errno));
  path_ = pattern;
}

TempDir::~TempDir() {
  std::error_code ignored;
  std::filesystem::remove_all(path_, ignored);
}

void writeFile(const std::string& path, const std::string& text) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  REQUIRE_MESSAGE(fd >= 0, "open " << path << ": " << std::strerror(errno));
  const ssize_t written = ::write(fd, text.data(), text.size());
  ::close(fd);
  REQUIRE_MESSAGE(written == ssize_t(text.size()), "write " << path);
}

std::string qosOf(const PodSpec& pod) {
  if (pod.requests.empty() && pod.limits.empty()) return "besteffort";
  for (const char* resource : {"cpu", "memory"}) {
    auto limit = pod.limits.find(resource);
    if (limit == pod.limits.end()) return "burstable";
    auto request = pod.requests.find(resource);
    // A limit without a request defaults the request to the limit.
    if (request != pod.requests.end() && request->second != limit->second) return "burstable";
  }
  return "guaranteed";
}

Json podObject(const PodSpec& pod) {
  Json resources = Json::object();
  if (!pod.requests.empty()) resources["requests"] = pod.requests;
  if (!pod.limits.empty()) resources["limits"] = pod.limits;
  Json spec = {{"containers", Json::array({{{"name", "main"}, {"resources", resources}}})},
               {"terminationGracePeriodSeconds", pod.terminationGracePeriodSeconds}};
  if (pod.priority) spec["priority"] = *pod.priority;
  if (pod.priorityClassName) spec["priorityClassName"] = *pod.priorityClassName;
  Json status = {{"phase", "Running"}};
  if (!pod.containerId.empty()) {
    status["containerStatuses"] =
        Json::array({{{"name", "main"}, {"containerID", "containerd://" + pod.containerId}}});
  }
  return {{"apiVersion", "v1"},
          {"kind", "Pod"},
          {"metadata", {{"name", pod.name}, {"namespace", pod.ns}, {"uid", pod.uid}}},
          {"spec", spec},
          {"status", status}};
}

void writeManifest(const TempDir& dir, const PodSpec& pod) {
  writeFile(dir.file(pod.ns + "_" + pod.name + ".json"), podObject(pod).dump(2));
}

std::string addPod(cgroups::Sandbox& sandbox, const TempDir* manifests, PodSpec& pod) {
  if (pod.uid.empty()) pod.uid = makeUid();
  auto relative = sandbox.addPod(pod.uid, qosOf(pod));
  if (!relative) FAIL("pod cgroup for " << pod.key() << ": " << relative.error().message);
  if (manifests != nullptr) writeManifest(*manifests, pod);
  return *relative;
}

std::string makeUid() {
  static int counter = 0;
  char uid[64];
  std::snprintf(uid, sizeof uid, "e2e0c0de-%04x-4000-8000-%012x", unsigned(::getpid()) & 0xffff,
                ++counter);
  return uid;
}

namespace {

// A forked helper keeps only stdio and its ready pipe: an inherited listening socket (the fake
// API server's, say) would outlive the test's own close of it and keep the port taken.
// No allocation here: it runs in a child forked from a multithreaded test.
void closeInheritedFds(std::initializer_list<int> keepList) {
  int keep[4] = {};
  std::size_t count = 0;
  for (int fd : keepList) {
    if (count < 4) keep[count++] = fd;
  }
  std::sort(keep, keep + count);
  unsigned from = 3;
  for (std::size_t i = 0; i < count; ++i) {
    const int fd = keep[i];
    if (unsigned(fd) > from) ::close_range(from, unsigned(fd) - 1, 0);
    from = std::max(from, unsigned(fd) + 1);
  }
  ::close_range(from, ~0U, 0);
}

// Waits (20 s at most) for one byte on `fd`; true when it is `expected`.
bool awaitByte(int fd, char expected) {
  pollfd p{fd, POLLIN, 0};
  int polled = 0;
  do {
    polled = ::poll(&p, 1, 20000);
  } while (polled < 0 && errno == EINTR);
  char byte = 0;
  return polled == 1 && ::read(fd, &byte, 1) == 1 && byte == expected;
}

}  // namespace

pid_t spawnAllocator(cgroups::Sandbox& sandbox, const std::string& relative, std::uint64_t bytes,
                     OnTerm onTerm, int lifetimeSeconds) {
  int ready[2];
  REQUIRE(::pipe2(ready, O_CLOEXEC) == 0);
  auto pid = sandbox.spawn(relative, [&] {
    closeInheritedFds({ready[1]});
    return allocateBody(bytes, onTerm, lifetimeSeconds, ready[1]);
  });
  ::close(ready[1]);
  if (!pid) {
    ::close(ready[0]);
    FAIL("spawning into " << relative << ": " << pid.error().message);
  }
  const bool ok = awaitByte(ready[0], 'r');
  ::close(ready[0]);
  gChildren[*pid] = std::nullopt;
  REQUIRE_MESSAGE(ok, "the process in " << relative << " did not allocate " << bytes / kMiB
                                        << " MiB within 20 s");
  return *pid;
}

std::int64_t sandboxAvailable(cgroups::Sandbox& sandbox) {
  auto dir = cgroups::CgroupDir::open(gHierarchy.memory + "/" + sandbox.kubepods(),
                                      gHierarchy.memoryVersion);
  REQUIRE_MESSAGE(bool(dir), (dir ? std::string() : dir.error().message));
  std::string buffer;
  auto memory = cgroups::readMemory(*dir, buffer);
  REQUIRE_MESSAGE(bool(memory), (memory ? std::string() : memory.error().message));
  REQUIRE_MESSAGE(memory->limit.has_value(), "the sandbox's kubepods cgroup has no memory limit");
  return std::int64_t(*memory->limit) - std::int64_t(memory->workingSet);
}

pid_t spawnAllocatorTo(cgroups::Sandbox& sandbox, const std::string& relative,
                       std::int64_t targetAvailable, OnTerm onTerm, int lifetimeSeconds) {
  int ready[2];
  int command[2];
  REQUIRE(::pipe2(ready, O_CLOEXEC) == 0);
  REQUIRE(::pipe2(command, O_CLOEXEC) == 0);
  auto pid = sandbox.spawn(relative, [&] {
    closeInheritedFds({ready[1], command[0]});
    return allocateBody(0, onTerm, lifetimeSeconds, ready[1], command[0]);
  });
  ::close(ready[1]);
  ::close(command[0]);
  if (!pid) {
    ::close(ready[0]);
    ::close(command[1]);
    FAIL("spawning into " << relative << ": " << pid.error().message);
  }
  gChildren[*pid] = std::nullopt;
  const bool started = awaitByte(ready[0], 's');
  // Measured with the process in place: whatever a process costs besides its allocation (a
  // sanitizer runtime's pages, say) is already charged, so the figure lands where asked.
  const std::int64_t available = started ? sandboxAvailable(sandbox) : 0;
  const std::int64_t bytes = available - targetAvailable;
  const std::uint64_t amount = bytes > 0 ? std::uint64_t(bytes) : 0;
  const bool sent =
      started && bytes > 0 && ::write(command[1], &amount, sizeof amount) == ssize_t(sizeof amount);
  ::close(command[1]);
  const bool ok = sent && awaitByte(ready[0], 'r');
  ::close(ready[0]);
  REQUIRE_MESSAGE(started, "the process in " << relative << " did not start within 20 s");
  REQUIRE_MESSAGE(bytes > 0, "the sandbox has " << available / std::int64_t(kMiB)
                                                << " MiB available, not more than the target "
                                                << targetAvailable / std::int64_t(kMiB) << " MiB");
  REQUIRE_MESSAGE(ok, "the process in " << relative << " did not allocate " << bytes / kMiB
                                        << " MiB within 20 s");
  return *pid;
}

std::optional<int> reapChild(cgroups::Sandbox& sandbox, pid_t pid, Millis timeout) {
  auto known = gChildren.find(pid);
  REQUIRE_MESSAGE(known != gChildren.end(), pid << " is not a process spawnAllocator() made");
  waitUntil(
      [&] {
        collectStatuses();
        return known->second.has_value();
      },
      timeout, Millis(5));
  // The sandbox forgets reaped children, so it never signals a reused PID. Statuses of the
  // others that ended are collected first.
  collectStatuses();
  sandbox.reap();
  REQUIRE_MESSAGE(known->second != kStatusLost, "the status of " << pid << " was lost");
  return known->second;
}

OutsideProcess::OutsideProcess(std::uint64_t bytes, int lifetimeSeconds) {
  int ready[2];
  REQUIRE(::pipe2(ready, O_CLOEXEC) == 0);
  pid_ = ::fork();
  if (pid_ == 0) {
    closeInheritedFds({ready[1]});
    ::_exit(allocateBody(bytes, OnTerm::Die, lifetimeSeconds, ready[1]));
  }
  ::close(ready[1]);
  REQUIRE(pid_ > 0);
  char byte = 0;
  pollfd fd{ready[0], POLLIN, 0};
  const bool ok = ::poll(&fd, 1, 20000) == 1 && ::read(ready[0], &byte, 1) == 1;
  ::close(ready[0]);
  REQUIRE_MESSAGE(ok, "the outside process did not allocate within 20 s");
}

OutsideProcess::~OutsideProcess() {
  if (pid_ <= 0) return;
  ::kill(pid_, SIGKILL);
  ::waitpid(pid_, nullptr, 0);
}

std::string LogLine::event() const {
  return field("event");
}

std::string LogLine::field(const std::string& name) const {
  if (!json.is_object()) return "";
  auto it = json.find(name);
  if (it == json.end() || !it->is_string()) return "";
  return it->get<std::string>();
}

double LogLine::number(const std::string& name) const {
  if (!json.is_object()) return std::nan("");
  auto it = json.find(name);
  if (it == json.end() || !it->is_number()) return std::nan("");
  return it->get<double>();
}

AgentProcess::AgentProcess(const AgentConfig& config) : logPath_(logDir_.file("agent.log")) {
  std::vector<std::string> args;
  if (config.webhook) {
    args = {NODEWARDEN_BINARY, "webhook", "--listen", "127.0.0.1:0", "--log-format", "json"};
    if (!config.policyFile.empty()) args.insert(args.end(), {"--policy", config.policyFile});
    if (!config.kubeconfig.empty()) args.insert(args.end(), {"--kubeconfig", config.kubeconfig});
  } else {
    args = {NODEWARDEN_BINARY, "agent", "--node", config.nodeName};
    if (config.kubeconfig.empty()) {
      args.insert(args.end(), {"--source", "static", "--manifests", config.manifestsDir});
    } else {
      args.insert(args.end(), {"--source", "kubernetes", "--kubeconfig", config.kubeconfig});
    }
    args.insert(args.end(), {"--policy", config.policyFile, "--kubepods-cgroup", config.kubepods,
                             "--listen", "127.0.0.1:0", "--log-format", "json", "--nodefs", ""});
    if (config.dryRun) args.push_back("--dry-run");
    // The flight recorder's files stay with the test (not in /var/lib/nodewarden), unless
    // the test names a state directory of its own.
    if (std::find(config.extraArgs.begin(), config.extraArgs.end(), "--state-dir") ==
        config.extraArgs.end()) {
      args.insert(args.end(), {"--state-dir", logDir_.file("state")});
    }
  }
  args.insert(args.end(), config.extraArgs.begin(), config.extraArgs.end());

  const int log =
      ::open(logPath_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC, 0644);
  REQUIRE(log >= 0);
  int gate[2];
  REQUIRE(::pipe2(gate, O_CLOEXEC) == 0);
  const pid_t parent = ::getpid();
  pid_ = ::fork();
  if (pid_ == 0) {
    // The agent ends with the test, even one killed by a timeout.
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) ::_exit(112);
    ::close(gate[1]);
    char go = 0;
    if (::read(gate[0], &go, 1) != 1 || go != 'g') ::_exit(111);
    ::dup2(log, STDOUT_FILENO);
    ::dup2(log, STDERR_FILENO);
    const int null = ::open("/dev/null", O_RDONLY);
    if (null >= 0) ::dup2(null, STDIN_FILENO);
    ::unsetenv("NOTIFY_SOCKET");
    // Nothing else of the test's reaches the agent (a listening socket of the fake API
    // server would stay bound in it).
    ::close_range(3, ~0U, 0);
    std::vector<char*> argv;
    for (std::string& arg : args) argv.push_back(arg.data());
    argv.push_back(nullptr);
    ::execv(argv[0], argv.data());
    ::_exit(127);
  }
  ::close(gate[0]);
  ::close(log);
  if (pid_ < 0) {
    ::close(gate[1]);
    FAIL("fork: " << std::strerror(errno));
  }
  bool moved = true;
  std::string moveError;
  if (config.moveInto != nullptr) {
    auto result = config.moveInto->movePid(config.moveIntoCgroup, pid_);
    moved = bool(result);
    if (!result) moveError = result.error().message;
  }
  const char go = moved ? 'g' : 'x';
  (void)!::write(gate[1], &go, 1);
  ::close(gate[1]);
  REQUIRE_MESSAGE(moved, "moving the agent into " << config.moveIntoCgroup << ": " << moveError);

  if (config.webhook) {
    auto started = waitForEvent("started", Millis(10000));
    REQUIRE_MESSAGE(started.has_value(), "no started line; log:\n" << logText());
    port_ = std::uint16_t(started->number("port"));
    REQUIRE_MESSAGE(port_ != 0, "started without a port; log:\n" << logText());
    return;
  }
  auto start = waitForEvent("agent-start", Millis(10000));
  REQUIRE_MESSAGE(start.has_value(), "no agent-start line; log:\n" << logText());
  const std::string listen = start->field("listen");
  const std::size_t colon = listen.rfind(':');
  REQUIRE_MESSAGE(colon != std::string::npos, "agent-start listen=" << listen);
  port_ = std::uint16_t(std::strtoul(listen.c_str() + colon + 1, nullptr, 10));
  REQUIRE_MESSAGE(port_ != 0, "agent-start listen=" << listen);
  REQUIRE_MESSAGE(waitForEvent("ready", Millis(10000)).has_value(), "no ready line; log:\n"
                                                                        << logText());
}

AgentProcess::~AgentProcess() {
  if (pid_ > 0 && !status_) {
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
  }
}

bool AgentProcess::running() {
  if (status_) return false;
  int status = 0;
  if (::waitpid(pid_, &status, WNOHANG) == pid_) {
    status_ = status;
    return false;
  }
  return true;
}

void AgentProcess::signal(int sig) {
  if (running()) ::kill(pid_, sig);
}

std::optional<int> AgentProcess::stop() {
  signal(SIGTERM);
  waitUntil([&] { return !running(); }, Millis(10000), Millis(10));
  if (!status_) {
    ::kill(pid_, SIGKILL);
    int status = 0;
    ::waitpid(pid_, &status, 0);
    status_ = status;
    return std::nullopt;
  }
  return status_;
}

void AgentProcess::readNew() {
  const int fd = ::open(logPath_.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return;
  std::string text;
  if (::lseek(fd, off_t(offset_), SEEK_SET) == off_t(offset_)) readAll(fd, text);
  ::close(fd);
  offset_ += text.size();
  partial_ += text;
  const SteadyTime seen = now();
  std::size_t start = 0;
  while (true) {
    const std::size_t end = partial_.find('\n', start);
    if (end == std::string::npos) break;
    LogLine line;
    line.raw = partial_.substr(start, end - start);
    line.seenAt = seen;
    line.json = Json::parse(line.raw, nullptr, false);
    if (line.json.is_discarded()) line.json = nullptr;
    lines_.push_back(std::move(line));
    start = end + 1;
  }
  partial_.erase(0, start);
}

const std::vector<LogLine>& AgentProcess::lines() {
  readNew();
  return lines_;
}

std::vector<LogLine> AgentProcess::events(const std::string& event) {
  std::vector<LogLine> out;
  for (const LogLine& line : lines()) {
    if (line.event() == event) out.push_back(line);
  }
  return out;
}

std::optional<LogLine> AgentProcess::waitFor(const std::function<bool(const LogLine&)>& match,
                                             Millis timeout, std::size_t from) {
  std::optional<LogLine> found;
  waitUntil(
      [&] {
        const std::vector<LogLine>& all = lines();
        for (std::size_t i = from; i < all.size(); ++i) {
          if (match(all[i])) {
            found = all[i];
            return true;
          }
        }
        return false;
      },
      timeout, Millis(10));
  return found;
}

std::optional<LogLine> AgentProcess::waitForEvent(const std::string& event, Millis timeout,
                                                  std::size_t from) {
  return waitFor([&](const LogLine& line) { return line.event() == event; }, timeout, from);
}

std::string AgentProcess::logText() {
  std::string text;
  for (const LogLine& line : lines()) text += line.raw + "\n";
  return text + partial_;
}

HttpReply httpRaw(std::uint16_t port, const std::string& bytes) {
  HttpReply reply;
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    reply.error = std::string("socket: ") + std::strerror(errno);
    return reply;
  }
  timeval timeout{5, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof timeout);
  ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &timeout, sizeof timeout);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(port);
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<const sockaddr*>(&address), sizeof address) != 0) {
    reply.error = std::string("connect: ") + std::strerror(errno);
    ::close(fd);
    return reply;
  }
  std::size_t sent = 0;
  while (sent < bytes.size()) {
    const ssize_t n = ::send(fd, bytes.data() + sent, bytes.size() - sent, MSG_NOSIGNAL);
    if (n <= 0) break;
    sent += std::size_t(n);
  }
  // Done sending: the server sees the end of a malformed request too.
  ::shutdown(fd, SHUT_WR);
  std::string text;
  const bool complete = readAll(fd, text);
  ::close(fd);
  if (!complete && text.empty()) {
    reply.error = std::string("reading the answer: ") + std::strerror(errno);
    return reply;
  }
  const std::size_t headerEnd = text.find("\r\n\r\n");
  if (!text.starts_with("HTTP/1.") || headerEnd == std::string::npos) {
    reply.error = "not an HTTP answer: " + text.substr(0, 200);
    return reply;
  }
  std::istringstream head(text.substr(0, headerEnd));
  std::string line;
  std::getline(head, line);
  reply.status = std::atoi(line.c_str() + line.find(' ') + 1);
  while (std::getline(head, line)) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    const std::size_t colon = line.find(':');
    if (colon == std::string::npos) continue;
    std::string value = line.substr(colon + 1);
    value.erase(0, value.find_first_not_of(' '));
    reply.headers[lower(line.substr(0, colon))] = value;
  }
  reply.body = text.substr(headerEnd + 4);
  if (auto length = reply.headers.find("content-length"); length != reply.headers.end()) {
    const std::size_t expected = std::strtoul(length->second.c_str(), nullptr, 10);
    if (reply.body.size() != expected) {
      reply.error = "body of " + std::to_string(reply.body.size()) + " bytes, Content-Length " +
                    length->second;
    }
  }
  return reply;
}

HttpReply httpRequest(std::uint16_t port, const std::string& method, const std::string& target,
                      const std::string& body, const std::string& contentType) {
  std::string request = method + " " + target +
                        " HTTP/1.1\r\nHost: 127.0.0.1:" + std::to_string(port) +
                        "\r\nConnection: close\r\n";
  if (!body.empty() || method == "POST") {
    request += "Content-Type: " + contentType +
               "\r\nContent-Length: " + std::to_string(body.size()) + "\r\n";
  }
  request += "\r\n" + body;
  return httpRaw(port, request);
}

Json getState(std::uint16_t port) {
  const HttpReply reply = httpRequest(port, "GET", "/v1/state");
  REQUIRE_MESSAGE(reply.status == 200,
                  "GET /v1/state: " << reply.status << " " << reply.error << " " << reply.body);
  Json state = Json::parse(reply.body, nullptr, false);
  REQUIRE_MESSAGE(!state.is_discarded(), "GET /v1/state is not JSON: " << reply.body);
  return state;
}

Json signalOf(const Json& state, const std::string& signal, const std::string& kind) {
  if (!state.contains("signals")) return nullptr;
  for (const Json& entry : state["signals"]) {
    if (entry.value("signal", "") == signal && entry.value("kind", "") == kind) return entry;
  }
  return nullptr;
}

bool hasCondition(const Json& state, const std::string& condition) {
  if (!state.contains("conditions") || !state["conditions"].is_array()) return false;
  for (const Json& entry : state["conditions"]) {
    if (entry.is_string() && entry.get<std::string>() == condition) return true;
  }
  return false;
}

std::vector<std::string> memoryRanking(const Json& state) {
  std::vector<std::string> out;
  if (!state.contains("ranking") || !state["ranking"].contains("memory")) return out;
  for (const Json& key : state["ranking"]["memory"]) out.push_back(key.get<std::string>());
  return out;
}

std::optional<double> metricValue(const std::string& text, const std::string& name,
                                  const std::string& labels) {
  const std::string prefix = labels.empty() ? name + " " : name + "{" + labels + "} ";
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.starts_with(prefix)) return std::strtod(line.c_str() + prefix.size(), nullptr);
  }
  return std::nullopt;
}

}  // namespace nodewarden::e2e

// Decides once, before any test runs, whether this machine can run the end-to-end tests.
extern "C" const char* nodewardenSkipReason() {
  using namespace nodewarden;
  if (::geteuid() != 0) {
    e2e::gSkipReason = "e2e tests need root (creating cgroups, moving processes)";
    return e2e::gSkipReason.c_str();
  }
  auto found = cgroups::discoverHierarchy({});
  if (!found) {
    e2e::gSkipReason = "no usable cgroup hierarchy: " + found.error().message;
    return e2e::gSkipReason.c_str();
  }
  e2e::gHierarchy = std::move(found).value();
  const std::string probe =
      e2e::gHierarchy.memory + "/nodewarden-e2e-" + std::to_string(::getpid()) + "-probe";
  if (::mkdir(probe.c_str(), 0755) != 0) {
    e2e::gSkipReason =
        "cannot create a cgroup in " + e2e::gHierarchy.memory + ": " + std::strerror(errno);
    return e2e::gSkipReason.c_str();
  }
  ::rmdir(probe.c_str());
  cgroups::removeStaleSandboxes(e2e::gHierarchy, "nodewarden-e2e");
  return nullptr;
}
