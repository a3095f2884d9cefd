#include "node/actuator.h"

#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <csignal>

namespace nodewarden::node {

using namespace std::chrono_literals;

EvictionOrder makeOrder(const policy::Eviction& eviction, bool dryRun) {
  EvictionOrder order;
  order.uid = eviction.pod->uid;
  order.pod = eviction.pod->key;
  order.threshold = {eviction.signal, eviction.hard};
  order.gracePeriodSeconds = eviction.gracePeriodSeconds;
  order.message = eviction.message;
  order.dryRun = dryRun;
  return order;
}

std::string methodText(const EvictionOrder& order, const EvictionOutcome& outcome) {
  if (order.dryRun) return "dry-run";
  std::string text;
  if (outcome.terminated) text = order.resumed ? "SIGTERM (before a restart)" : "SIGTERM";
  if (outcome.killed) {
    if (!text.empty()) text += ", then ";
    text += cgroups::toString(*outcome.killed);
  }
  return text.empty() ? "none" : text;
}

// One eviction in flight: SIGTERM sent (or not), waiting for the cgroup to empty.
struct CgroupActuator::Pending {
  EvictionOrder order;
  Done done;
  SteadyTime started;
  SteadyTime killAt;    // when SIGKILL is due (grace end); started for grace 0
  SteadyTime giveUpAt;  // killAt + 10 s: report failure rather than wait forever
  SteadyTime lastRound{};
  EvictionOutcome outcome;
  boost::asio::steady_timer timer;
  explicit Pending(boost::asio::io_context& io) : timer(io) {}
};

CgroupActuator::CgroupActuator(boost::asio::io_context& io, cgroups::PodCgroups& pods,
                               const Clock& clock)
    : io_(io), pods_(pods), clock_(clock), killer_(pods), alive_(std::make_shared<bool>(true)) {}

CgroupActuator::~CgroupActuator() {
  *alive_ = false;
}

void CgroupActuator::evict(const EvictionOrder& order, Done done) {
  auto pending = std::make_shared<Pending>(io_);
  pending->started = clock_.now();
  const cgroups::PodCgroup* pod = pods_.find(order.uid);
  // The first signal, before anything else is done with the order.
  std::optional<Error> refused;
  if (pod == nullptr) {
    // Nothing of it runs here (its cgroup never appeared or is gone): nothing was freed.
    refused = Error{"no cgroup for this pod on the node"};
  } else if (order.resumed && order.gracePeriodSeconds > 0) {
    pending->outcome.terminated = true;  // by the run before the restart
  } else if (order.gracePeriodSeconds <= 0) {
    if (auto round = killer_.killRound(*pod)) {
      pending->outcome.killed = round->method;
      pending->outcome.processes = round->signalled;
      pending->lastRound = clock_.now();
    } else {
      refused = round.error();
    }
  } else if (auto sent = killer_.signalPod(*pod, SIGTERM)) {
    pending->outcome.terminated = true;
    pending->outcome.processes = sent->signalled;
  } else {
    refused = sent.error();
  }

  pending->order = order;
  pending->done = std::move(done);
  pending->killAt =
      pending->started + std::chrono::seconds(std::max<std::int64_t>(0, order.gracePeriodSeconds));
  pending->giveUpAt = pending->killAt + 10s;
  if (refused) {
    pending->outcome.error = std::move(refused->message);
    pending->outcome.elapsed =
        std::chrono::duration_cast<std::chrono::microseconds>(clock_.now() - pending->started);
    // Completion always arrives from the loop, never inside evict().
    boost::asio::post(io_, [pending] { pending->done(pending->outcome); });
    return;
  }
  watch(pending);
}

void CgroupActuator::watch(std::shared_ptr<Pending> pending) {
  // Check often right after SIGKILL (processes exit within milliseconds), gently during a
  // grace period.
  pending->timer.expires_after(pending->outcome.killed ? 2ms : 50ms);
  pending->timer.async_wait([this, alive = alive_, pending](const boost::system::error_code& ec) {
    if (ec || !*alive) return;
    const SteadyTime now = clock_.now();
    const cgroups::PodCgroup* pod = pods_.find(pending->order.uid);
    bool left = false;
    if (pod != nullptr) {
      auto populated = killer_.populated(*pod);
      left = populated && *populated;
    }
    auto complete = [&](bool emptied, std::string error) {
      pending->outcome.emptied = emptied;
      pending->outcome.error = std::move(error);
      pending->outcome.elapsed =
          std::chrono::duration_cast<std::chrono::microseconds>(now - pending->started);
      pending->done(pending->outcome);
    };
    if (!left) return complete(true, "");
    if (now >= pending->giveUpAt) {
      auto survivors = killer_.processes(*pod);
      return complete(false, std::to_string(survivors ? survivors->size() : 0) +
                                 " process(es) survived SIGKILL for 10s");
    }
    if (now >= pending->killAt && (!pending->outcome.killed || now - pending->lastRound >= 50ms)) {
      auto round = killer_.killRound(*pod);
      if (!round) return complete(false, round.error().message);
      if (!pending->outcome.killed) pending->outcome.killed = round->method;
      pending->lastRound = now;
      pending->outcome.processes += round->signalled;
    }
    watch(pending);
  });
}

void DryRunActuator::evict(const EvictionOrder&, Done done) {
  done(EvictionOutcome{});
}

void RecordingActuator::evict(const EvictionOrder& order, Done done) {
  orders_.push_back(order);
  if (onOrder) onOrder(order);
  if (!completeAtOnce_) {
    held_[order.uid] = std::move(done);
    return;
  }
  EvictionOutcome outcome;
  outcome.emptied = true;
  done(outcome);
}

void RecordingActuator::complete(const std::string& uid) {
  auto it = held_.find(uid);
  if (it == held_.end()) return;
  Done done = std::move(it->second);
  held_.erase(it);
  EvictionOutcome outcome;
  outcome.emptied = true;
  done(outcome);
}

}  // namespace nodewarden::node
