#include "webhook/decision_log.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>

#include "record/decisions.h"

namespace nodewarden::webhook {

DecisionLog::~DecisionLog() {
  if (owned_) ::close(fd_);
}

Result<void> DecisionLog::open(const std::string& path) {
  if (path == "-") {
    fd_ = STDOUT_FILENO;
    return {};
  }
  fd_ = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0640);
  if (fd_ < 0) return Error{"--decision-log " + path + ": " + std::strerror(errno), errno};
  owned_ = true;
  return {};
}

void DecisionLog::write(const ReviewRecord& review) {
  if (fd_ < 0 || review.verdict == ReviewVerdict::FailedOpen) return;
  const auto now = std::chrono::duration_cast<std::chrono::microseconds>(
                       std::chrono::system_clock::now().time_since_epoch())
                       .count();
  for (const record::DecisionRecord& r :
       record::admissionRecords(now, review.node, review.pod, "", reviewVerdictName(review.verdict),
                                review.reason, review.message, review.victims, review.dryRun)) {
    const std::string line = record::logLine(r) + "\n";
    (void)!::write(fd_, line.data(), line.size());
  }
}

}  // namespace nodewarden::webhook
