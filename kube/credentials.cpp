#include "kube/credentials.h"

#include <sys/stat.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <cerrno>
#include <cstring>

namespace nodewarden::kube {

TokenSource::TokenSource(const ClusterConfig& config)
    : fixed_(config.token), file_(config.tokenFile), token_(config.token) {}

const std::string& TokenSource::token() {
  if (file_.empty()) return token_;
  auto now = std::chrono::steady_clock::now();
  if (!force_ && now - lastCheck_ < std::chrono::seconds(1)) return token_;
  lastCheck_ = now;
  bool forced = force_;
  force_ = false;
  struct stat st {};
  if (::stat(file_.c_str(), &st) != 0) {
    int e = errno;
    problem_ = "token file " + file_ + ": " + std::strerror(e);
    return token_;
  }
  const FileStamp stamp = FileStamp::of(st);
  if (!forced && problem_.empty() && stamp == stamp_) return token_;
  auto text = readTrimmedFile(file_);
  if (!text) {
    problem_ = "token file " + text.error().message;
    return token_;
  }
  std::string fresh = std::move(*text);
  if (fresh.empty()) {
    problem_ = "token file " + file_ + " is empty";
    return token_;
  }
  token_ = std::move(fresh);
  problem_.clear();
  stamp_ = stamp;
  return token_;
}

void TokenSource::invalidate() {
  force_ = true;
}

Credentials::Credentials(boost::asio::io_context& io, const ClusterConfig& config,
                         CredentialOptions options)
    : io_(io), config_(config), options_(std::move(options)), tokens_(config) {
  if (!options_.wallClock) options_.wallClock = [] { return std::chrono::system_clock::now(); };
}

Credentials::~Credentials() {
  shutdown();
}

bool Credentials::stale() const {
  if (!config_.exec) return false;
  if (!haveCredential_) return true;
  // As client-go: an answer without an expiry lasts until a 401.
  return credential_.expiry && options_.wallClock() > *credential_.expiry;
}

void Credentials::refresh(std::function<void(const std::string& error)> done) {
  waiting_.push_back(std::move(done));
  if (running_) return;
  running_ = ExecRun::start(io_, config_, options_.exec,
                            [this](Result<ExecCredential> result) { answered(std::move(result)); });
}

void Credentials::answered(Result<ExecCredential> result) {
  // The run is over: its handle may go (from inside its own callback: it only kills a
  // process already reaped).
  auto run = std::move(running_);
  std::string error;
  if (result) {
    credential_ = std::move(*result);
    haveCredential_ = true;
    ++generation_;
  } else {
    error = result.error().message;
  }
  auto waiting = std::move(waiting_);
  waiting_.clear();
  for (auto& done : waiting) done(error);
  boost::asio::post(io_, [run = std::shared_ptr<ExecRun>(std::move(run))] {});
}

const std::string& Credentials::token() {
  if (config_.exec) return credential_.token;
  return tokens_.token();
}

bool Credentials::unauthorized(std::uint64_t generation) {
  if (config_.exec) {
    if (generation == generation_) haveCredential_ = false;
    return true;
  }
  if (config_.tokenFile.empty()) return false;
  tokens_.invalidate();
  return true;
}

void Credentials::shutdown() {
  waiting_.clear();
  running_.reset();
}

}  // namespace nodewarden::kube
