#include "kube/writer.h"

#include <algorithm>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <ctime>
#include <random>

namespace nodewarden::kube {
namespace {

using policy::Json;

std::string formatRfc3339(std::chrono::system_clock::time_point t) {
  const std::time_t seconds = std::chrono::system_clock::to_time_t(t);
  std::tm utc{};
  ::gmtime_r(&seconds, &utc);
  char text[32];
  std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%SZ", &utc);
  return text;
}

std::string podPath(const PodRef& pod) {
  return "/api/v1/namespaces/" + pod.ns + "/pods/" + pod.name;
}

// The API validates Event messages to at most 1024 bytes (events.go); cut on a UTF-8
// boundary.
std::string eventMessage(std::string message) {
  constexpr std::size_t kMax = 1024;
  if (message.size() <= kMax) return message;
  std::size_t cut = kMax;
  while (cut > 0 && (static_cast<unsigned char>(message[cut]) & 0xC0) == 0x80) --cut;
  message.resize(cut);
  return message;
}

// How an answer settles a write.
enum class Settle { Done, Retry, Fail };

}  // namespace

std::string kubeletConditionFor(std::string_view nodewardenCondition) {
  if (nodewardenCondition == kMemoryPressureCondition) return "MemoryPressure";
  if (nodewardenCondition == kDiskPressureCondition) return "DiskPressure";
  if (nodewardenCondition == kPidPressureCondition) return "PIDPressure";
  return {};
}

struct ApiWriter::Impl : std::enable_shared_from_this<Impl> {
  struct Write {
    std::string what;
    std::string subject;  // "ns/name" or the node name, for outcomes
    std::string method;
    std::string target;
    std::string body;
    std::string contentType;
    // Answers other than 2xx that mean the write is done (already gone, already there).
    std::vector<unsigned> alsoDone;
    // Sent only when the write before it in the lane got a 2xx answer (the Preempted event
    // behind its eviction); otherwise dropped and reported as not sent.
    bool onlyAfterSuccess = false;
    int attempts = 0;
  };
  // Writes about one subject, sent one after the other in order.
  struct Lane {
    std::deque<Write> writes;
    bool inFlight = false;
    std::unique_ptr<boost::asio::steady_timer> timer;
    std::chrono::milliseconds backoff{0};
  };

  Impl(boost::asio::io_context& context, Client& apiClient, WriterOptions writerOptions)
      : io(context),
        client(apiClient),
        options(std::move(writerOptions)),
        random(options.seed != 0
                   ? options.seed
                   : static_cast<std::uint64_t>(
                         std::chrono::steady_clock::now().time_since_epoch().count())) {
    if (!options.now) options.now = [] { return std::chrono::system_clock::now(); };
  }

  void enqueue(const std::string& laneKey, Write write) {
    Lane& lane = lanes[laneKey];
    lane.writes.push_back(std::move(write));
    ++queued;
    pump(laneKey);
  }

  void pump(const std::string& laneKey) {
    auto it = lanes.find(laneKey);
    if (it == lanes.end()) return;
    Lane& lane = it->second;
    if (lane.inFlight || (lane.timer && waiting.count(laneKey) > 0)) return;
    if (lane.writes.empty()) {
      lanes.erase(it);
      return;
    }
    lane.inFlight = true;
    Write& write = lane.writes.front();
    ++write.attempts;
    std::weak_ptr<Impl> weak = weak_from_this();
    client.request(write.method, write.target, write.body, write.contentType,
                   [weak, laneKey](ApiResponse response) {
                     if (auto self = weak.lock()) self->answered(laneKey, std::move(response));
                   });
  }

  Settle settle(const Write& write, const ApiResponse& response) const {
    if (response.status >= 200 && response.status < 300) return Settle::Done;
    if (std::find(write.alsoDone.begin(), write.alsoDone.end(), response.status) !=
        write.alsoDone.end())
      return Settle::Done;
    // A failed UID precondition: the pod was replaced by a same-named one, which is not ours
    // to touch. (A 409 can also be a conflict on a disruption budget's update: retried.)
    if (response.status == 409 && (write.what == "delete" || write.what == "eviction") &&
        response.body.find("recondition") != std::string::npos)
      return Settle::Done;
    // No answer, throttled, conflict on a status write, or the server's trouble: again later.
    if (response.status == 0 || response.status == 429 || response.status == 408 ||
        response.status == 409 || response.status >= 500)
      return Settle::Retry;
    return Settle::Fail;  // 400, 403, 404, 415, 422: sending it again changes nothing
  }

  void answered(const std::string& laneKey, ApiResponse response) {
    auto it = lanes.find(laneKey);
    if (it == lanes.end()) return;
    Lane& lane = it->second;
    lane.inFlight = false;
    Write& write = lane.writes.front();
    const Settle how = settle(write, response);
    if (how == Settle::Retry && write.attempts < options.maxAttempts) {
      lane.backoff = lane.backoff.count() == 0 ? options.initialBackoff
                                               : std::min(options.maxBackoff, lane.backoff * 2);
      auto wait = std::chrono::duration_cast<std::chrono::milliseconds>(
          lane.backoff * std::uniform_real_distribution<double>(0.5, 1.5)(random));
      if (response.retryAfter && *response.retryAfter > wait)
        wait = std::chrono::duration_cast<std::chrono::milliseconds>(*response.retryAfter);
      if (!lane.timer) lane.timer = std::make_unique<boost::asio::steady_timer>(io);
      lane.timer->expires_after(wait);
      waiting.insert(laneKey);
      std::weak_ptr<Impl> weak = weak_from_this();
      lane.timer->async_wait([weak, laneKey](const boost::system::error_code& ec) {
        if (ec) return;
        if (auto self = weak.lock()) {
          self->waiting.erase(laneKey);
          self->pump(laneKey);
        }
      });
      WriteOutcome retry;
      retry.what = write.what;
      retry.pod = write.subject;
      retry.attempts = write.attempts;
      retry.status = response.status;
      retry.detail = response.describe();
      retry.retryIn = wait;
      // Reported last: a listener may queue more writes, which may touch this lane.
      if (onRetry) onRetry(retry);
      return;
    }
    WriteOutcome outcome;
    outcome.what = write.what;
    outcome.pod = write.subject;
    outcome.ok = how == Settle::Done;
    outcome.attempts = write.attempts;
    outcome.status = response.status;
    if (response.status >= 200 && response.status < 300) {
      outcome.detail = "";
    } else if (outcome.ok) {
      outcome.detail = response.status == 404   ? "already gone"
                       : response.status == 409 ? "replaced by another pod of the same name"
                                                : "already done";
    } else {
      outcome.detail = response.describe();
      if (how == Settle::Retry)
        outcome.detail += " (gave up after " + std::to_string(write.attempts) + " attempts)";
    }
    const bool podGone = response.status == 404 && write.what == "status";
    const bool succeeded = response.status >= 200 && response.status < 300;
    const std::string finished = write.what;
    lane.writes.pop_front();  // `write` is gone from here on
    lane.backoff = std::chrono::milliseconds{0};
    --queued;
    // A pod that is gone needs no event or delete behind a status write that found it gone.
    std::vector<WriteOutcome> outcomes{std::move(outcome)};
    while (podGone && !lane.writes.empty() && lane.writes.front().what != "status") {
      WriteOutcome skipped;
      skipped.what = lane.writes.front().what;
      skipped.pod = lane.writes.front().subject;
      skipped.ok = true;
      skipped.detail = "pod already gone";
      lane.writes.pop_front();
      --queued;
      outcomes.push_back(std::move(skipped));
    }
    // What follows only a write that took effect (the Preempted event behind its eviction).
    while (!succeeded && !lane.writes.empty() && lane.writes.front().onlyAfterSuccess) {
      WriteOutcome skipped;
      skipped.what = lane.writes.front().what;
      skipped.pod = lane.writes.front().subject;
      skipped.ok = true;
      skipped.detail = "not sent: the " + finished + " before it did not take effect";
      lane.writes.pop_front();
      --queued;
      outcomes.push_back(std::move(skipped));
    }
    // Reported last: a listener may queue more writes, which may touch this lane.
    for (const WriteOutcome& done : outcomes) report(done);
    pump(laneKey);
  }

  void report(const WriteOutcome& outcome) {
    if (onOutcome) onOutcome(outcome);
  }

  Write eventWrite(const PodRef& pod, const std::string& type, const std::string& reason,
                   const std::string& message,
                   const std::map<std::string, std::string>& annotations) {
    const auto now = options.now();
    const auto nanos =
        std::chrono::duration_cast<std::chrono::nanoseconds>(now.time_since_epoch()).count();
    char hex[32];
    std::snprintf(hex, sizeof hex, "%llx", static_cast<unsigned long long>(nanos));
    const std::string stamp = formatRfc3339(now);
    Json event = {
        {"apiVersion", "v1"},
        {"kind", "Event"},
        // Named once, at enqueue: a retry after a lost answer meets 409 AlreadyExists.
        {"metadata", {{"name", pod.name + "." + hex}, {"namespace", pod.ns}}},
        {"involvedObject",
         {{"kind", "Pod"},
          {"namespace", pod.ns},
          {"name", pod.name},
          {"uid", pod.uid},
          {"apiVersion", "v1"}}},
        {"reason", reason},
        {"message", eventMessage(message)},
        {"type", type},
        {"source", {{"component", options.component}, {"host", options.nodeName}}},
        {"reportingComponent", options.component},
        {"reportingInstance", options.nodeName},
        {"firstTimestamp", stamp},
        {"lastTimestamp", stamp},
        {"count", 1},
    };
    if (!annotations.empty()) event["metadata"]["annotations"] = annotations;
    Write write;
    write.what = "event";
    write.subject = pod.key();
    write.method = "POST";
    write.target = "/api/v1/namespaces/" + pod.ns + "/events";
    write.body = event.dump();
    write.contentType = "application/json";
    write.alsoDone = {409};
    return write;
  }

  boost::asio::io_context& io;
  Client& client;
  WriterOptions options;
  std::mt19937_64 random;
  std::map<std::string, Lane> lanes;
  std::set<std::string> waiting;  // lanes backing off
  std::size_t queued = 0;
  std::set<std::string> handedOver;  // UIDs whose eviction or preemption was queued
  struct ConditionState {
    bool status = false;
    std::string reason;
    std::string message;
    std::string lastTransition;
  };
  std::map<std::string, ConditionState> conditions;  // "node/type"
  std::function<void(const WriteOutcome&)> onOutcome;
  std::function<void(const WriteOutcome&)> onRetry;
};

ApiWriter::ApiWriter(boost::asio::io_context& io, Client& client, WriterOptions options)
    : impl_(std::make_shared<Impl>(io, client, std::move(options))) {
  impl_->onOutcome = [this](const WriteOutcome& outcome) {
    if (onOutcome) onOutcome(outcome);
  };
  impl_->onRetry = [this](const WriteOutcome& retry) {
    if (onRetry) onRetry(retry);
  };
}

ApiWriter::~ApiWriter() {
  for (auto& [key, lane] : impl_->lanes)
    if (lane.timer) lane.timer->cancel();
  impl_->onOutcome = nullptr;
  impl_->onRetry = nullptr;
}

std::size_t ApiWriter::pending() const {
  return impl_->queued;
}

void ApiWriter::podEvicted(const EvictedPod& evicted) {
  if (!impl_->handedOver.insert(evicted.pod.uid).second) return;
  const std::string message = evicted.message.empty()
                                  ? "The node was low on resource: " + evicted.resource + ". "
                                  : evicted.message;
  const std::string lane = "pod/" + evicted.pod.uid;
  const std::string stamp = formatRfc3339(impl_->options.now());

  // What the kubelet's evictPod leaves behind (eviction_manager.go, status_manager): phase
  // Failed, reason Evicted, and the DisruptionTarget condition; from v1.35 on both the status
  // and the condition carry the pod's generation as observedGeneration (the status manager's
  // CalculatePodStatusObservedGeneration, the condition built in synchronize()).
  // metadata.uid in the patch acts as a precondition: the API refuses to change a UID (422),
  // so a same-named replacement is never marked Failed.
  Json condition = {{"type", "DisruptionTarget"},
                    {"status", "True"},
                    {"reason", "TerminationByKubelet"},
                    {"message", message},
                    {"lastTransitionTime", stamp}};
  if (evicted.generation > 0) condition["observedGeneration"] = evicted.generation;
  Json status = {{"metadata", {{"uid", evicted.pod.uid}}},
                 {"status",
                  {{"phase", "Failed"},
                   {"reason", "Evicted"},
                   {"message", message},
                   {"conditions", Json::array({condition})}}}};
  if (evicted.generation > 0) status["status"]["observedGeneration"] = evicted.generation;
  Impl::Write statusWrite;
  statusWrite.what = "status";
  statusWrite.subject = evicted.pod.key();
  statusWrite.method = "PATCH";
  statusWrite.target = podPath(evicted.pod) + "/status";
  statusWrite.body = status.dump();
  statusWrite.contentType = "application/strategic-merge-patch+json";
  impl_->enqueue(lane, std::move(statusWrite));

  auto annotations = evicted.annotations;
  if (!evicted.resource.empty()) annotations.emplace("starved_resource", evicted.resource);
  impl_->enqueue(lane, impl_->eventWrite(evicted.pod, "Warning", "Evicted", message, annotations));

  Json options = {{"kind", "DeleteOptions"},
                  {"apiVersion", "v1"},
                  {"gracePeriodSeconds", std::max<std::int64_t>(0, evicted.gracePeriodSeconds)},
                  {"preconditions", {{"uid", evicted.pod.uid}}},
                  {"propagationPolicy", "Background"}};
  Impl::Write deleteWrite;
  deleteWrite.what = "delete";
  deleteWrite.subject = evicted.pod.key();
  deleteWrite.method = "DELETE";
  deleteWrite.target = podPath(evicted.pod);
  deleteWrite.body = options.dump();
  deleteWrite.contentType = "application/json";
  // 404: already deleted; 409: the precondition failed, a same-named replacement is there.
  deleteWrite.alsoDone = {404};
  impl_->enqueue(lane, std::move(deleteWrite));
}

void ApiWriter::preempt(const PodRef& preemptor, const std::string& node,
                        const std::vector<PodRef>& victims) {
  for (const PodRef& victim : victims) {
    if (!impl_->handedOver.insert(victim.uid).second) continue;
    const std::string lane = "pod/" + victim.uid;
    Json eviction = {{"apiVersion", "policy/v1"},
                     {"kind", "Eviction"},
                     {"metadata", {{"name", victim.name}, {"namespace", victim.ns}}},
                     {"deleteOptions", {{"preconditions", {{"uid", victim.uid}}}}}};
    Impl::Write write;
    write.what = "eviction";
    write.subject = victim.key();
    write.method = "POST";
    write.target = podPath(victim) + "/eviction";
    write.body = eviction.dump();
    write.contentType = "application/json";
    write.alsoDone = {404};  // already gone
    impl_->enqueue(lane, std::move(write));
    // The scheduler's event on each victim, once it is evicted (the scheduler's preemption
    // records it after the victim's deletion went through): a victim a disruption budget
    // keeps is told nothing it did not undergo.
    Impl::Write event = impl_->eventWrite(
        victim, "Normal", "Preempted",
        "Preempted by pod " + preemptor.key() + " (" + preemptor.uid + ") on node " + node, {});
    event.onlyAfterSuccess = true;
    impl_->enqueue(lane, std::move(event));
  }
}

void ApiWriter::nominate(const PodRef& pod, const std::string& node) {
  Json patch = {{"status", {{"nominatedNodeName", node.empty() ? Json(nullptr) : Json(node)}}}};
  Impl::Write write;
  write.what = "nominate";
  write.subject = pod.key();
  write.method = "PATCH";
  write.target = podPath(pod) + "/status";
  write.body = patch.dump();
  write.contentType = "application/strategic-merge-patch+json";
  impl_->enqueue("nominate/" + pod.uid, std::move(write));
}

void ApiWriter::setNodeCondition(const std::string& node, const std::string& type, bool status,
                                 const std::string& reason, const std::string& message) {
  const std::string key = node + "/" + type;
  auto& state = impl_->conditions[key];
  const bool known = !state.lastTransition.empty();
  if (known && state.status == status && state.reason == reason && state.message == message) return;
  const std::string stamp = formatRfc3339(impl_->options.now());
  if (!known || state.status != status) state.lastTransition = stamp;
  state.status = status;
  state.reason = reason;
  state.message = message;

  Json patch = {{"status",
                 {{"conditions", Json::array({{{"type", type},
                                               {"status", status ? "True" : "False"},
                                               {"reason", reason},
                                               {"message", message},
                                               {"lastHeartbeatTime", stamp},
                                               {"lastTransitionTime", state.lastTransition}}})}}}};
  const std::string lane = "node/" + key;
  // Only the newest state matters: a write still waiting in the queue is replaced.
  auto it = impl_->lanes.find(lane);
  if (it != impl_->lanes.end() && !it->second.writes.empty()) {
    auto& writes = it->second.writes;
    const std::size_t firstWaiting = it->second.inFlight ? 1 : 0;
    if (writes.size() > firstWaiting) {
      writes.back().body = patch.dump();
      writes.back().attempts = 0;
      return;
    }
  }
  Impl::Write write;
  write.what = "node-condition";
  write.subject = node;
  write.method = "PATCH";
  write.target = "/api/v1/nodes/" + node + "/status";
  write.body = patch.dump();
  write.contentType = "application/strategic-merge-patch+json";
  impl_->enqueue(lane, std::move(write));
}

}  // namespace nodewarden::kube
