#include "node/actuator.h"

#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <csignal>

namespace nodewarden::node {

using namespace std::chrono_literals;

// One eviction in flight: SIGTERM sent (or not), waiting for the cgroup to empty.
struct CgroupActuator::Pending {
  EvictionOrder order;
  Done done;
  SteadyTime started;
  SteadyTime killAt;    // when SIGKILL is due (grace end); started for grace 0
  SteadyTime giveUpAt;  // killAt + 10 s: report failure rather than wait forever
  bool killed = false;  // a SIGKILL round was sent
  SteadyTime lastRound{};
  EvictionOutcome outcome;
  boost::asio::steady_timer timer;
  Pending(boost::asio::io_context& io) : timer(io) {}
};

CgroupActuator::CgroupActuator(boost::asio::io_context& io, cgroups::PodCgroups& pods)
    : io_(io), pods_(pods), killer_(pods), alive_(std::make_shared<bool>(true)) {}

CgroupActuator::~CgroupActuator() {
  *alive_ = false;
}

void CgroupActuator::evict(const EvictionOrder& order, Done done) {
  auto pending = std::make_shared<Pending>(io_);
  pending->order = order;
  pending->done = std::move(done);
  pending->started = std::chrono::steady_clock::now();
  pending->killAt =
      pending->started + std::chrono::seconds(std::max<std::int64_t>(0, order.gracePeriodSeconds));
  pending->giveUpAt = pending->killAt + 10s;
  pending->outcome.uid = order.uid;
  pending->outcome.pod = order.pod;

  const cgroups::PodCgroup* pod = pods_.find(order.uid);
  auto finish = [&](std::string error) {
    pending->outcome.error = std::move(error);
    pending->outcome.elapsed = std::chrono::duration_cast<std::chrono::microseconds>(
        std::chrono::steady_clock::now() - pending->started);
    // Completion always arrives from the loop, never inside evict().
    boost::asio::post(io_, [pending] { pending->done(pending->outcome); });
  };
  if (pod == nullptr) {
    // Nothing of it runs here (its cgroup never appeared or is gone): nothing was freed.
    finish("no cgroup for this pod on the node");
    return;
  }
  if (order.resumed && order.gracePeriodSeconds > 0) {
    pending->outcome.method = "SIGTERM (before a restart)";
  } else if (order.gracePeriodSeconds <= 0) {
    auto round = killer_.killRound(*pod);
    if (!round) return finish(round.error().message);
    pending->killed = true;
    pending->lastRound = std::chrono::steady_clock::now();
    pending->outcome.method = round->method;
    pending->outcome.processes = round->signalled;
  } else {
    auto sent = killer_.signalPod(*pod, SIGTERM);
    if (!sent) return finish(sent.error().message);
    pending->outcome.method = "SIGTERM";
    pending->outcome.processes = sent->signalled;
  }
  watch(pending);
}

void CgroupActuator::watch(std::shared_ptr<Pending> pending) {
  // Check often right after SIGKILL (processes exit within milliseconds), gently during a
  // grace period.
  pending->timer.expires_after(pending->killed ? 2ms : 50ms);
  pending->timer.async_wait([this, alive = alive_, pending](const boost::system::error_code& ec) {
    if (ec || !*alive) return;
    const auto now = std::chrono::steady_clock::now();
    const cgroups::PodCgroup* pod = pods_.find(pending->order.uid);
    std::vector<pid_t> left;
    if (pod != nullptr) {
      auto found = killer_.processes(*pod);
      if (found) left = std::move(found).value();
    }
    auto complete = [&](bool emptied, std::string error) {
      pending->outcome.emptied = emptied;
      pending->outcome.error = std::move(error);
      pending->outcome.elapsed =
          std::chrono::duration_cast<std::chrono::microseconds>(now - pending->started);
      pending->done(pending->outcome);
    };
    if (left.empty()) return complete(true, "");
    if (now >= pending->giveUpAt) {
      return complete(false, std::to_string(left.size()) + " process(es) survived SIGKILL for 10s");
    }
    if (now >= pending->killAt && (!pending->killed || now - pending->lastRound >= 50ms)) {
      auto round = killer_.killRound(*pod);
      if (!round) return complete(false, round.error().message);
      if (!pending->killed) {
        pending->outcome.method +=
            pending->outcome.method.empty() ? round->method : ", then " + round->method;
      }
      pending->killed = true;
      pending->lastRound = now;
      pending->outcome.processes += round->signalled;
    }
    watch(pending);
  });
}

void DryRunActuator::evict(const EvictionOrder& order, Done done) {
  EvictionOutcome outcome;
  outcome.uid = order.uid;
  outcome.pod = order.pod;
  outcome.dryRun = true;
  outcome.method = "dry-run";
  done(outcome);
}

void RecordingActuator::evict(const EvictionOrder& order, Done done) {
  orders_.push_back(order);
  if (!completeAtOnce_) {
    held_[order.uid] = std::move(done);
    return;
  }
  EvictionOutcome outcome;
  outcome.uid = order.uid;
  outcome.pod = order.pod;
  outcome.emptied = true;
  outcome.method = "recorded";
  done(outcome);
}

void RecordingActuator::complete(const std::string& uid) {
  auto it = held_.find(uid);
  if (it == held_.end()) return;
  Done done = std::move(it->second);
  held_.erase(it);
  EvictionOutcome outcome;
  outcome.uid = uid;
  outcome.emptied = true;
  outcome.method = "recorded";
  done(outcome);
}

}  // namespace nodewarden::node
