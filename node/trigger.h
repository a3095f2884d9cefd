// What started a cycle of the node daemon's loop. The names are the `trigger` label of
// nodewarden_cycles_total (docs/reference.md §7).
#pragma once

#include <string_view>

namespace nodewarden::node {

enum class Trigger {
  Start,                 // the first cycle
  Timer,                 // the housekeeping interval
  MemoryThreshold,       // a v1 memory threshold eventfd (or usage already past its line)
  Psi,                   // a PSI trigger
  MemoryPoll,            // the adaptive poller saw a usage line crossed
  MemoryEvents,          // v2 memory.events changed (high, max, oom, oom_kill)
  NotificationFollowUp,  // close follow-up after a notification that showed nothing met yet
  GraceElapsed,          // a soft threshold's grace period ended
  EvictionDone,          // a victim's cgroup is empty: decide again with fresh figures
  Manual,                // a caller (tests, benchmarks) ran a cycle itself
};

constexpr std::string_view toString(Trigger trigger) {
  switch (trigger) {
    case Trigger::Start:
      return "start";
    case Trigger::Timer:
      return "timer";
    case Trigger::MemoryThreshold:
      return "memory-threshold";
    case Trigger::Psi:
      return "psi";
    case Trigger::MemoryPoll:
      return "memory-poll";
    case Trigger::MemoryEvents:
      return "memory-events";
    case Trigger::NotificationFollowUp:
      return "notification-follow-up";
    case Trigger::GraceElapsed:
      return "grace-elapsed";
    case Trigger::EvictionDone:
      return "eviction-done";
    case Trigger::Manual:
      return "manual";
  }
  return "unknown";
}

// A wake-up from the kernel (or the poller standing in for it on v2).
constexpr bool isKernelWakeup(Trigger trigger) {
  return trigger == Trigger::MemoryThreshold || trigger == Trigger::Psi ||
         trigger == Trigger::MemoryPoll || trigger == Trigger::MemoryEvents;
}

}  // namespace nodewarden::node
