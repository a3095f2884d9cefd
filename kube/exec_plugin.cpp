#include "kube/exec_plugin.h"

#include <fcntl.h>
#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <boost/asio/io_context.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>
#include <vector>

#include "kube/yaml.h"
#include "policy/json_reader.h"
#include "policy/times.h"

extern char** environ;

namespace nodewarden::kube {

namespace {

namespace asio = boost::asio;
using policy::Json;
using error_code = boost::system::error_code;

constexpr std::size_t kMaxOutput = 1 << 20;      // an ExecCredential is a few kilobytes
constexpr std::size_t kMaxErrorTail = 4 * 1024;  // the end of stderr kept for the message

std::string base64(std::string_view in) {
  std::string out(4 * ((in.size() + 2) / 3) + 1, '\0');
  int n = EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                          reinterpret_cast<const unsigned char*>(in.data()),
                          static_cast<int>(in.size()));
  out.resize(static_cast<std::size_t>(n));
  return out;
}

std::string trimmed(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  return std::string(s);
}

// The certificate and key load, and belong together (Go's tls.X509KeyPair).
std::optional<std::string> checkKeyPair(const std::string& certPem, const std::string& keyPem) {
  std::unique_ptr<BIO, decltype(&BIO_free)> certBio(
      BIO_new_mem_buf(certPem.data(), static_cast<int>(certPem.size())), &BIO_free);
  std::unique_ptr<BIO, decltype(&BIO_free)> keyBio(
      BIO_new_mem_buf(keyPem.data(), static_cast<int>(keyPem.size())), &BIO_free);
  std::unique_ptr<X509, decltype(&X509_free)> cert(
      PEM_read_bio_X509(certBio.get(), nullptr, nullptr, nullptr), &X509_free);
  std::unique_ptr<EVP_PKEY, decltype(&EVP_PKEY_free)> key(
      PEM_read_bio_PrivateKey(keyBio.get(), nullptr, nullptr, nullptr), &EVP_PKEY_free);
  ERR_clear_error();
  if (!cert) return "clientCertificateData holds no PEM certificate";
  if (!key) return "clientKeyData holds no PEM private key";
  if (X509_check_private_key(cert.get(), key.get()) != 1) {
    ERR_clear_error();
    return "clientKeyData does not match clientCertificateData";
  }
  return std::nullopt;
}

bool isExecutableFile(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) && (st.st_mode & 0111) != 0;
}

}  // namespace

std::string execInfo(const ExecConfig& exec, const ClusterConfig& cluster, bool interactive,
                     const std::string& caPem) {
  Json info = {{"kind", "ExecCredential"},
               {"apiVersion", exec.apiVersion},
               {"spec", {{"interactive", interactive}}}};
  if (exec.provideClusterInfo) {
    Json c = {{"server", cluster.server}};
    if (!cluster.tlsServerName.empty()) c["tls-server-name"] = cluster.tlsServerName;
    if (cluster.insecureSkipTlsVerify) c["insecure-skip-tls-verify"] = true;
    if (!caPem.empty()) c["certificate-authority-data"] = base64(caPem);
    if (!cluster.proxyUrl.empty()) c["proxy-url"] = cluster.proxyUrl;
    if (cluster.disableCompression) c["disable-compression"] = true;
    if (!exec.clusterExtension.empty()) {
      Json config = Json::parse(exec.clusterExtension, nullptr, false);
      if (!config.is_discarded()) c["config"] = std::move(config);
    }
    info["spec"]["cluster"] = std::move(c);
  }
  return info.dump();
}

Result<ExecCredential> parseExecCredential(std::string_view output, const std::string& apiVersion) {
  Json doc;
  policy::Diagnostics diagnostics;
  if (auto parsed = policy::parseJsonText(output, diagnostics)) {
    doc = std::move(*parsed);
  } else {
    YamlOptions options;
    options.scalars = YamlScalars::GoYaml;
    options.firstDocumentOnly = true;
    auto yaml = readYamlDocuments(output, options);
    if (!yaml || yaml->empty()) return Error{"decoding its output: " + diagnostics.joined()};
    doc = std::move(yaml->front());
  }
  if (!doc.is_object())
    return Error{"decoding its output: expected an ExecCredential object, got " +
                 std::string(doc.type_name())};
  auto text = [&](const Json& object, const char* key) -> Result<std::string> {
    auto it = object.find(key);
    if (it == object.end() || it->is_null()) return std::string();
    if (!it->is_string()) return Error{std::string(key) + ": expected a string"};
    return it->get<std::string>();
  };
  auto version = text(doc, "apiVersion");
  if (!version) return version.error().withContext("decoding its output");
  if (*version != apiVersion)
    return Error{"the plugin is configured for " + apiVersion + " but answered " +
                 (version->empty() ? std::string("without an apiVersion") : *version)};
  auto kind = text(doc, "kind");
  if (!kind) return kind.error().withContext("decoding its output");
  if (!kind->empty() && *kind != "ExecCredential")
    return Error{"the plugin answered a " + *kind + ", not an ExecCredential"};
  auto status = doc.find("status");
  if (status == doc.end() || status->is_null()) return Error{"the plugin returned no status"};
  if (!status->is_object()) return Error{"decoding its output: status: expected a mapping"};
  ExecCredential out;
  auto token = text(*status, "token");
  auto cert = text(*status, "clientCertificateData");
  auto key = text(*status, "clientKeyData");
  auto expiry = text(*status, "expirationTimestamp");
  for (auto* r : {&token, &cert, &key, &expiry}) {
    if (!*r) return r->error().withContext("decoding its output: status");
  }
  out.token = std::move(*token);
  out.clientCertPem = std::move(*cert);
  out.clientKeyPem = std::move(*key);
  if (out.token.empty() && out.clientCertPem.empty() && out.clientKeyPem.empty())
    return Error{"the plugin returned neither a token nor a client certificate and key"};
  if (out.clientCertPem.empty() != out.clientKeyPem.empty())
    return Error{"the plugin returned a client certificate or a key, not both"};
  if (!out.clientCertPem.empty()) {
    if (auto problem = checkKeyPair(out.clientCertPem, out.clientKeyPem))
      return Error{"the plugin's client certificate: " + *problem};
  }
  if (!expiry->empty()) {
    auto micros = policy::parseRfc3339(*expiry);
    if (!micros) return micros.error().withContext("status.expirationTimestamp");
    out.expiry = std::chrono::system_clock::time_point(std::chrono::microseconds(*micros));
  }
  return out;
}

Result<std::string> findExecutable(const std::string& command, std::string_view pathVariable) {
  if (command.find('/') != std::string::npos) {
    if (isExecutableFile(command)) return command;
    return Error{"executable " + command + " not found"};
  }
  std::size_t start = 0;
  while (start <= pathVariable.size()) {
    std::size_t end = std::min(pathVariable.find(':', start), pathVariable.size());
    std::string dir(pathVariable.substr(start, end - start));
    start = end + 1;
    if (dir.empty() || dir[0] != '/') continue;
    std::string candidate = dir + "/" + command;
    if (isExecutableFile(candidate)) return candidate;
  }
  return Error{"executable " + command + " not found in $PATH"};
}

namespace {

// One plugin process and what it wrote. Handlers hold it; the handle's destruction cancels.
class Process : public std::enable_shared_from_this<Process> {
 public:
  Process(asio::io_context& io, ExecConfig exec, std::chrono::milliseconds timeout,
          ExecRun::Done done)
      : io_(io),
        exec_(std::move(exec)),
        timeout_(timeout),
        out_(io),
        err_(io),
        deadline_(io),
        reap_(io),
        done_(std::move(done)) {}

  // Spawns `path`; an error is a message for failWith.
  std::optional<std::string> spawn(const std::string& path, const std::string& info,
                                   bool interactive);
  void begin();
  void fail(std::string message) { finish(Error{describe(std::move(message))}); }
  void cancel();

 private:
  void read(asio::posix::stream_descriptor& pipe, std::array<char, 4096>& buffer, std::string& into,
            bool& closed, bool keepTail);
  void tryReap();
  void exited(int status);
  void finish(Result<ExecCredential> result);
  std::string describe(std::string what) const;
  void kill();

  asio::io_context& io_;
  ExecConfig exec_;
  std::chrono::milliseconds timeout_;
  asio::posix::stream_descriptor out_, err_;
  asio::steady_timer deadline_, reap_;
  std::array<char, 4096> outBuffer_{}, errBuffer_{};
  std::string output_, errors_;
  bool outClosed_ = false, errClosed_ = false;
  pid_t pid_ = -1;
  bool ownGroup_ = false;
  bool timedOut_ = false;
  bool finished_ = false;
  ExecRun::Done done_;
};

std::optional<std::string> Process::spawn(const std::string& path, const std::string& info,
                                          bool interactive) {
  // The environment: nodewarden's, then the kubeconfig's env (a name given again replaces
  // it), then KUBERNETES_EXEC_INFO.
  std::vector<std::pair<std::string, std::string>> env;
  auto set = [&](std::string name, std::string value) {
    for (auto& [n, v] : env) {
      if (n == name) {
        v = std::move(value);
        return;
      }
    }
    env.emplace_back(std::move(name), std::move(value));
  };
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    std::string_view entry(*e);
    auto eq = entry.find('=');
    if (eq == std::string_view::npos) continue;
    set(std::string(entry.substr(0, eq)), std::string(entry.substr(eq + 1)));
  }
  for (const auto& [name, value] : exec_.env) set(name, value);
  set("KUBERNETES_EXEC_INFO", info);
  std::vector<std::string> envText;
  for (const auto& [n, v] : env) envText.push_back(n + "=" + v);
  std::vector<char*> envp, argv;
  for (auto& s : envText) envp.push_back(s.data());
  envp.push_back(nullptr);
  std::vector<std::string> args{exec_.command};
  args.insert(args.end(), exec_.args.begin(), exec_.args.end());
  for (auto& s : args) argv.push_back(s.data());
  argv.push_back(nullptr);

  int outPipe[2], errPipe[2];
  if (::pipe2(outPipe, O_CLOEXEC) != 0) return std::string("pipe: ") + std::strerror(errno);
  if (::pipe2(errPipe, O_CLOEXEC) != 0) {
    int e = errno;
    ::close(outPipe[0]);
    ::close(outPipe[1]);
    return std::string("pipe: ") + std::strerror(e);
  }
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  short flags = POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF;
  sigset_t none, all;
  sigemptyset(&none);
  sigfillset(&all);
  posix_spawnattr_setsigmask(&attr, &none);
  posix_spawnattr_setsigdefault(&attr, &all);
  // Without a terminal to share, the plugin gets its own process group, so a timeout kills
  // whatever it started too.
  ownGroup_ = !interactive;
  if (ownGroup_) {
    flags |= POSIX_SPAWN_SETPGROUP;
    posix_spawnattr_setpgroup(&attr, 0);
  }
  posix_spawnattr_setflags(&attr, flags);
  if (!interactive) posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&actions, outPipe[1], 1);
  if (!interactive) posix_spawn_file_actions_adddup2(&actions, errPipe[1], 2);
  int rc = ::posix_spawn(&pid_, path.c_str(), &actions, &attr, argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  ::close(outPipe[1]);
  ::close(errPipe[1]);
  if (rc != 0) {
    pid_ = -1;
    ::close(outPipe[0]);
    ::close(errPipe[0]);
    return "cannot run " + path + ": " + std::strerror(rc);
  }
  out_.assign(outPipe[0]);
  err_.assign(errPipe[0]);
  if (interactive) {
    error_code ignored;
    err_.close(ignored);
    errClosed_ = true;
  }
  return std::nullopt;
}

void Process::begin() {
  deadline_.expires_after(timeout_);
  deadline_.async_wait([self = shared_from_this()](error_code ec) {
    if (ec || self->finished_) return;
    self->timedOut_ = true;
    self->kill();
  });
  read(out_, outBuffer_, output_, outClosed_, false);
  if (!errClosed_) read(err_, errBuffer_, errors_, errClosed_, true);
}

void Process::read(asio::posix::stream_descriptor& pipe, std::array<char, 4096>& buffer,
                   std::string& into, bool& closed, bool keepTail) {
  pipe.async_read_some(asio::buffer(buffer), [self = shared_from_this(), &pipe, &buffer, &into,
                                              &closed, keepTail](error_code ec, std::size_t n) {
    if (self->finished_) return;
    into.append(buffer.data(), n);
    if (keepTail && into.size() > 2 * kMaxErrorTail) into.erase(0, into.size() - kMaxErrorTail);
    if (!keepTail && into.size() > kMaxOutput) {
      self->kill();
      return self->fail("wrote more than " + std::to_string(kMaxOutput) +
                        " bytes to its standard output");
    }
    if (ec) {
      closed = true;
      if (self->outClosed_ && self->errClosed_) self->tryReap();
      return;
    }
    self->read(pipe, buffer, into, closed, keepTail);
  });
}

void Process::tryReap() {
  int status = 0;
  pid_t r = ::waitpid(pid_, &status, WNOHANG);
  if (r == pid_) {
    pid_ = -1;
    return exited(status);
  }
  if (r < 0 && errno != EINTR) {
    pid_ = -1;
    return fail(std::string("waiting for it: ") + std::strerror(errno));
  }
  // Its output is closed, so it is ending: look again shortly (the deadline still holds).
  reap_.expires_after(std::chrono::milliseconds(10));
  reap_.async_wait([self = shared_from_this()](error_code ec) {
    if (!ec && !self->finished_) self->tryReap();
  });
}

void Process::exited(int status) {
  if (timedOut_) {
    const auto ms = timeout_.count();
    return fail("did not finish within " +
                (ms % 1000 == 0 ? std::to_string(ms / 1000) + " s" : std::to_string(ms) + " ms") +
                " and was killed");
  }
  if (WIFSIGNALED(status)) return fail("was killed by signal " + std::to_string(WTERMSIG(status)));
  if (WEXITSTATUS(status) != 0)
    return fail("exited with status " + std::to_string(WEXITSTATUS(status)));
  auto credential = parseExecCredential(output_, exec_.apiVersion);
  if (!credential) return fail(credential.error().message);
  finish(std::move(*credential));
}

std::string Process::describe(std::string what) const {
  std::string message =
      "exec credential plugin " + exec_.command + " of user \"" + exec_.user + "\": " + what;
  std::string stderrText = trimmed(errors_);
  if (stderrText.size() > kMaxErrorTail)
    stderrText = "…" + stderrText.substr(stderrText.size() - kMaxErrorTail);
  if (!stderrText.empty()) message += "; its standard error: " + stderrText;
  if (!exec_.installHint.empty()) message += "; install hint: " + trimmed(exec_.installHint);
  return message;
}

void Process::finish(Result<ExecCredential> result) {
  if (finished_) return;
  finished_ = true;
  deadline_.cancel();
  reap_.cancel();
  error_code ignored;
  out_.close(ignored);
  err_.close(ignored);
  if (pid_ > 0) {
    kill();
    ::waitpid(pid_, nullptr, 0);
    pid_ = -1;
  }
  auto done = std::move(done_);
  done_ = nullptr;
  if (done) done(std::move(result));
}

void Process::kill() {
  if (pid_ <= 0) return;
  ::kill(ownGroup_ ? -pid_ : pid_, SIGKILL);
  if (timedOut_) {
    // Something it started may hold the pipes open: stop waiting for them.
    error_code ignored;
    out_.close(ignored);
    err_.close(ignored);
  }
}

void Process::cancel() {
  done_ = nullptr;
  if (!finished_) finish(Error{"cancelled"});
}

class ProcessHandle final : public ExecRun {
 public:
  explicit ProcessHandle(std::shared_ptr<Process> process) : process_(std::move(process)) {}
  ~ProcessHandle() override { process_->cancel(); }

 private:
  std::shared_ptr<Process> process_;
};

}  // namespace

std::unique_ptr<ExecRun> ExecRun::start(asio::io_context& io, const ClusterConfig& cluster,
                                        const ExecRunOptions& options, Done done) {
  const ExecConfig& exec = *cluster.exec;
  auto process = std::make_shared<Process>(io, exec, options.timeout, std::move(done));
  std::unique_ptr<ExecRun> handle = std::make_unique<ProcessHandle>(process);
  auto failLater = [&](std::string message) -> std::unique_ptr<ExecRun> {
    asio::post(io, [process, message = std::move(message)] { process->fail(message); });
    return std::move(handle);
  };
  bool interactive = false;
  switch (exec.interactiveMode) {
    case ExecConfig::Interactive::Never:
      break;
    case ExecConfig::Interactive::IfAvailable:
      interactive = options.terminal;
      break;
    case ExecConfig::Interactive::Always:
      if (!options.terminal)
        return failLater(
            "interactiveMode is Always but standard input is not a terminal (the agent and the "
            "webhook never have one)");
      interactive = true;
      break;
  }
  std::string caPem = cluster.caData;
  if (exec.provideClusterInfo && caPem.empty() && !cluster.caFile.empty()) {
    std::ifstream in(cluster.caFile, std::ios::binary);
    std::ostringstream text;
    text << in.rdbuf();
    if (!in)
      return failLater("reading the certificate authority " + cluster.caFile +
                       " for KUBERNETES_EXEC_INFO failed");
    caPem = text.str();
  }
  const char* pathVariable = std::getenv("PATH");
  auto path = findExecutable(exec.command, pathVariable != nullptr ? pathVariable : "");
  if (!path) return failLater(path.error().message);
  if (auto problem =
          process->spawn(*path, execInfo(exec, cluster, interactive, caPem), interactive))
    return failLater(*problem);
  process->begin();
  return handle;
}

}  // namespace nodewarden::kube
