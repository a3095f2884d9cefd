// `--decision-log FILE|-` of `nodewarden webhook`: every judged review as decision records
// (record/decisions.h) — one `admission` line per verdict and, for `preempt`, one
// `preemption` line per victim — appended to a file or written to standard output, each line
// in one write(2) so that concurrent writers never interleave within a line.
//
// Threading: the webhook's loop thread.
#pragma once

#include <string>

#include "base/result.h"
#include "webhook/binding_webhook.h"

namespace nodewarden::webhook {

class DecisionLog {
 public:
  DecisionLog() = default;
  ~DecisionLog();
  DecisionLog(const DecisionLog&) = delete;
  DecisionLog& operator=(const DecisionLog&) = delete;

  // "-" is standard output; anything else a file, created if needed and appended to.
  Result<void> open(const std::string& path);
  // Nothing until open() succeeded; a review it failed open on is not a decision.
  void write(const ReviewRecord& review);

 private:
  int fd_ = -1;
  bool owned_ = false;
};

}  // namespace nodewarden::webhook
