// What the agent does to a pod it decided to evict, behind one small interface
// (docs/conventions.md §7): the cgroup killer, a dry run that only logs, and a recording
// fake for tests.
//
// Threading: everything runs on the agent's loop thread; evict() never blocks it.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <boost/asio/io_context.hpp>

#include "base/clock.h"
#include "cgroups/kill.h"
#include "cgroups/pods.h"
#include "node/eviction_order.h"

namespace nodewarden::node {

class Actuator {
 public:
  using Done = std::function<void(const EvictionOutcome&)>;
  virtual ~Actuator() = default;
  // Starts evicting the pod. Returns when the first signal has been sent (or refused), having
  // waited on nothing else (no disk, no network): the time of return is "signal sent" for the
  // latency figures. `done` is called later on the loop thread, exactly once, when the pod's
  // processes are gone or the actuator gave up; `order` need not outlive the call.
  virtual void evict(const EvictionOrder& order, Done done) = 0;
  virtual std::string name() const = 0;
};

// Kills through cgroups (cgroups::PodKiller): grace 0 → SIGKILL at once (cgroup.kill where
// possible); grace > 0 → SIGTERM, then SIGKILL when the grace period ends with processes
// left. Watches the cgroup empty on a short timer instead of sleeping a fixed time (v2: its
// cgroup.events, one small read; v1: its processes). Times come from `clock`.
class CgroupActuator final : public Actuator {
 public:
  // `pods` and `clock` must outlive the actuator; orders for UIDs it does not know are refused.
  CgroupActuator(boost::asio::io_context& io, cgroups::PodCgroups& pods,
                 const Clock& clock = steadyClock());
  ~CgroupActuator() override;
  void evict(const EvictionOrder& order, Done done) override;
  std::string name() const override { return "cgroup killer"; }

 private:
  struct Pending;
  void watch(std::shared_ptr<Pending> pending);

  boost::asio::io_context& io_;
  cgroups::PodCgroups& pods_;
  const Clock& clock_;
  cgroups::PodKiller killer_;
  std::shared_ptr<bool> alive_;
};

// --dry-run: decides and logs, never acts. Reports the pod as not emptied.
class DryRunActuator final : public Actuator {
 public:
  void evict(const EvictionOrder& order, Done done) override;
  std::string name() const override { return "dry run"; }
};

// Tests: records every order; completes them at once (emptied) unless told to hold them.
class RecordingActuator final : public Actuator {
 public:
  explicit RecordingActuator(bool completeAtOnce = true) : completeAtOnce_(completeAtOnce) {}
  void evict(const EvictionOrder& order, Done done) override;
  std::string name() const override { return "recorder"; }
  const std::vector<EvictionOrder>& orders() const { return orders_; }
  // Completes a held order (emptied).
  void complete(const std::string& uid);
  // Called at each order, at the moment a real actuator sends its first signal.
  std::function<void(const EvictionOrder&)> onOrder;

 private:
  bool completeAtOnce_;
  std::vector<EvictionOrder> orders_;
  std::map<std::string, Done> held_;
};

}  // namespace nodewarden::node
