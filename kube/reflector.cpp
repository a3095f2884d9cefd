#include "kube/reflector.h"

#include <cstdio>
#include <random>

#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>

#include "base/time.h"

namespace nodewarden::kube {

namespace asio = boost::asio;
using policy::Json;
using std::chrono::steady_clock;

namespace {

// A watch that lasted this long, or delivered anything, was healthy: when it ends it is
// resumed at once; one that ends sooner counts as a failure (backoff).
constexpr auto kHealthyWatch = std::chrono::seconds(1);

std::string seconds(std::chrono::milliseconds d) {
  if (d < std::chrono::seconds(1)) return std::to_string(d.count()) + " ms";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f s", static_cast<double>(d.count()) / 1000.0);
  return buf;
}

std::string snippet(std::string_view text) {
  if (text.size() <= 200) return std::string(text);
  return std::string(text.substr(0, 200)) + "…";
}

const std::string* stringMember(const Json& object, const char* key) {
  if (!object.is_object()) return nullptr;
  auto it = object.find(key);
  if (it == object.end() || !it->is_string()) return nullptr;
  return &it->get_ref<const std::string&>();
}

}  // namespace

struct Reflector::Impl : std::enable_shared_from_this<Impl> {
  Impl(asio::io_context& ioContext, Client& apiClient, ReflectorOptions reflectorOptions,
       StoreSink& storeSink, ReflectorLog reflectorLog)
      : io(ioContext),
        client(apiClient),
        options(std::move(reflectorOptions)),
        sink(storeSink),
        log(std::move(reflectorLog)),
        timer(ioContext),
        random(options.seed != 0
                   ? options.seed
                   : static_cast<std::uint64_t>(steady_clock::now().time_since_epoch().count())),
        backoff(options.initialBackoff) {
    auto slash = options.listPath.rfind('/');
    resource = slash == std::string::npos ? options.listPath : options.listPath.substr(slash + 1);
  }

  // Every callback carries the generation it was started in; stop() (and a restart) moves
  // on, so late answers are dropped.
  template <typename F>
  auto guarded(F&& f) {
    return [weak = weak_from_this(), gen = generation, f = std::forward<F>(f)](auto&&... args) {
      auto self = weak.lock();
      if (!self || !self->running || self->generation != gen) return;
      f(*self, std::forward<decltype(args)>(args)...);
    };
  }
  bool alive(std::uint64_t gen) const { return running && generation == gen; }

  void say(const std::string& event, const std::string& detail) {
    if (log) log(event, detail);
  }

  std::string selectorParam() const {
    return options.fieldSelector.empty() ? std::string()
                                         : "&fieldSelector=" + queryEscape(options.fieldSelector);
  }

  // ---- LIST

  void list() {
    items.clear();
    continueToken.clear();
    listPage();
  }

  void listPage() {
    std::string target =
        options.listPath + "?limit=" + std::to_string(options.pageSize) + selectorParam();
    if (!continueToken.empty()) target += "&continue=" + queryEscape(continueToken);
    client.request("GET", target, {}, {}, guarded([](Impl& self, ApiResponse response) {
                     self.onListPage(std::move(response));
                   }));
  }

  void onListPage(ApiResponse response) {
    if (response.status == 410 && !continueToken.empty()) {
      // The continue token outlived etcd's history: start over (at once the first time).
      ++stats.relists410;
      if (++goneWhilePaging > 1)
        return failure("list " + options.listPath + ": " + response.describe(), false);
      say("relist", "410 Gone while paging: relisting from the start");
      if (!alive(generation)) return;
      return list();
    }
    if (response.status != 200)
      return failure("list " + options.listPath + ": " + response.describe(), false);
    policy::Diagnostics diagnostics;
    auto parsed = policy::parseKubernetesJsonText(response.body, diagnostics);
    if (!parsed || !parsed->is_object())
      return failure("list " + options.listPath + ": " +
                         (parsed ? std::string("not a List object") : diagnostics.joined()),
                     false);
    auto listed = parsed->find("items");
    if (listed != parsed->end() && !listed->is_null()) {
      if (!listed->is_array())
        return failure("list " + options.listPath + ": items is not an array", false);
      for (auto& item : *listed) items.push_back(std::move(item));
    }
    auto rv = findJsonString(response.body, {"metadata", "resourceVersion"});
    if (!rv || rv->empty())
      return failure("list " + options.listPath + ": no metadata.resourceVersion", false);
    auto next = findJsonString(response.body, {"metadata", "continue"});
    if (next && !next->empty()) {
      continueToken = *next;
      return listPage();
    }
    goneWhilePaging = 0;
    std::uint64_t gen = generation;
    std::size_t count = items.size();
    sink.replace(std::move(items));
    items.clear();
    continueToken.clear();
    if (!alive(gen)) return;
    resourceVersion = *rv;
    synced = true;
    ++stats.lists;
    answered();
    say("list", "listed " + std::to_string(count) + " " + resource + " at resourceVersion " +
                    resourceVersion);
    if (!alive(gen)) return;
    startedFromList = true;
    startWatch();
  }

  // ---- WATCH

  void startWatch() {
    std::string target =
        options.listPath + "?watch=1&resourceVersion=" + queryEscape(resourceVersion) +
        "&allowWatchBookmarks=true" +
        "&timeoutSeconds=" + std::to_string(options.watchTimeout.count()) + selectorParam();
    auto idle = std::chrono::duration_cast<std::chrono::milliseconds>(
        options.watchTimeout +
        std::max<std::chrono::seconds>(std::chrono::seconds(5), options.watchTimeout / 10));
    ++stats.watches;
    watchStarted = steady_clock::now();
    watchDelivered = false;
    watchFromList = startedFromList;
    startedFromList = false;
    Client::WatchHandlers handlers;
    handlers.onEvent = guarded([](Impl& self, const Json& event) { self.onEvent(event); });
    handlers.onBadEvent =
        guarded([](Impl& self, std::string_view text, const std::string& problem) {
          self.badEvent(problem + ": " + snippet(text));
        });
    handlers.onEnd =
        guarded([](Impl& self, ApiResponse response) { self.onWatchEnd(std::move(response)); });
    watch = client.watch(std::move(target), std::move(handlers), idle);
  }

  void badEvent(const std::string& why) {
    ++stats.badEvents;
    say("bad event", "skipped a malformed watch event: " + why);
  }

  void onEvent(const Json& event) {
    const std::string* type = stringMember(event, "type");
    if (type == nullptr) return badEvent("no \"type\": " + snippet(event.dump()));
    auto object = event.find("object");
    if (object == event.end() || !object->is_object())
      return badEvent(*type + " event without an object");
    const std::string* rv = nullptr;
    auto meta = object->find("metadata");
    if (meta != object->end()) rv = stringMember(*meta, "resourceVersion");
    if (*type == "ADDED" || *type == "MODIFIED" || *type == "DELETED") {
      if (meta == object->end() || !meta->is_object())
        return badEvent(*type + " event whose object has no metadata");
      if (rv == nullptr || rv->empty())
        return badEvent(*type + " event whose object has no metadata.resourceVersion");
      std::uint64_t gen = generation;
      std::string next = *rv;
      sink.apply(*type, *object);
      if (!alive(gen)) return;
      resourceVersion = std::move(next);
      ++stats.events;
      delivered();
      return;
    }
    if (*type == "BOOKMARK") {
      if (rv == nullptr || rv->empty())
        return badEvent("BOOKMARK without metadata.resourceVersion");
      resourceVersion = *rv;
      ++stats.bookmarks;
      delivered();
      return;
    }
    if (*type == "ERROR") {
      watch.reset();
      auto code = object->find("code");
      const std::string* message = stringMember(*object, "message");
      std::string text = message ? *message : snippet(object->dump());
      if (code != object->end() && code->is_number_integer() && code->get<std::int64_t>() == 410)
        return gone("watch: " + text);
      return failure("watch error event: " + text, true);
    }
    badEvent("unknown event type \"" + *type + "\"");
  }

  void delivered() {
    watchDelivered = true;
    if (!connected || backoff != options.initialBackoff) succeeded();
  }

  void gone(const std::string& why) {
    watch.reset();
    ++stats.relists410;
    // A watch from a fresh list that is already too old means the server cannot serve it yet
    // (a lagging watch cache, a compaction loop): relisting at once would hammer it with full
    // lists (thousands a second, measured in bench_agent part 5), so that relist backs off, as
    // client-go's reflector does between ListAndWatch runs.
    const bool healthy = watchDelivered || steady_clock::now() - watchStarted >= kHealthyWatch;
    if (watchFromList && !healthy) {
      const auto delay = nextBackoff();
      say("relist", "410 Gone at once after a list (" + why + "): relisting in " + seconds(delay));
      return retryAfter(delay, false);
    }
    say("relist", "410 Gone (" + why + "): relisting");
    if (!running) return;
    list();
  }

  void onWatchEnd(ApiResponse response) {
    watch.reset();
    if (response.status == 410) return gone("watch: " + response.describe());
    bool healthy = watchDelivered || steady_clock::now() - watchStarted >= kHealthyWatch;
    if (response.status != 200 && response.status != 0)
      return failure("watch " + options.listPath + ": " + response.describe(), true);
    if (!healthy) {
      return failure(
          "watch " + options.listPath + " ended at once: " +
              (response.status == 200 ? std::string("closed by the server") : response.describe()),
          true);
    }
    if (response.status == 200) succeeded();
    say("watch ended",
        "watch ended: " +
            (response.status == 200 ? std::string("closed by the server") : response.describe()) +
            "; resuming from " + resourceVersion);
    if (!running) return;
    startWatch();
  }

  // ---- failures and backoff

  // A watch worked (delivered, or lasted): the backoff starts over.
  void succeeded() {
    backoff = options.initialBackoff;
    answered();
  }

  // The server answered well. A list alone does not reset the backoff: a list that works
  // followed by a watch that fails at once is a loop that must slow down.
  void answered() {
    if (!connected && stats.failures > 0) {
      connected = true;
      say("connected", "the API server answers again");
    }
    connected = true;
  }

  void failure(const std::string& why, bool rewatch) {
    ++stats.failures;
    connected = false;
    const auto delay = nextBackoff();
    say("retry", "retrying in " + seconds(delay) + ": " + why);
    retryAfter(delay, rewatch && synced && !resourceVersion.empty());
  }

  // The jittered delay before the next attempt; doubles the next one (bounded).
  std::chrono::milliseconds nextBackoff() {
    std::uniform_real_distribution<double> jitter(0.5, 1.5);
    auto delay = std::chrono::milliseconds(
        static_cast<std::int64_t>(static_cast<double>(backoff.count()) * jitter(random)));
    stats.lastBackoff = delay;
    backoff = std::min(backoff * 2, options.maxBackoff);
    return delay;
  }

  // Watches again (or lists) after `delay`.
  void retryAfter(std::chrono::milliseconds delay, bool watchNext) {
    if (!running) return;
    timer.expires_after(delay);
    timer.async_wait(
        [weak = weak_from_this(), gen = generation, watchNext](boost::system::error_code ec) {
          auto self = weak.lock();
          if (ec || !self || !self->alive(gen)) return;
          if (watchNext)
            self->startWatch();
          else
            self->list();
        });
  }

  asio::io_context& io;
  Client& client;
  ReflectorOptions options;
  StoreSink& sink;
  ReflectorLog log;
  asio::steady_timer timer;
  std::mt19937_64 random;
  std::chrono::milliseconds backoff;
  std::string resource;  // "pods", for logs

  bool running = false;
  std::uint64_t generation = 0;
  bool synced = false;
  bool connected = false;
  std::string resourceVersion;
  Stats stats;

  std::vector<Json> items;  // pages of the LIST in progress
  std::string continueToken;
  int goneWhilePaging = 0;
  std::shared_ptr<WatchStream> watch;
  SteadyTime watchStarted{};
  bool watchDelivered = false;
  bool startedFromList = false;  // the next watch starts from the list just made
  bool watchFromList = false;    // the current one did
};

Reflector::Reflector(asio::io_context& io, Client& client, ReflectorOptions options,
                     StoreSink& sink, ReflectorLog log)
    : impl_(std::make_shared<Impl>(io, client, std::move(options), sink, std::move(log))) {}

Reflector::~Reflector() {
  stop();
}

void Reflector::start() {
  if (impl_->running) return;
  impl_->running = true;
  ++impl_->generation;
  impl_->backoff = impl_->options.initialBackoff;
  if (impl_->synced && !impl_->resourceVersion.empty())
    impl_->startWatch();
  else
    impl_->list();
}

void Reflector::stop() {
  if (!impl_->running) return;
  impl_->running = false;
  ++impl_->generation;
  impl_->watch.reset();
  impl_->timer.cancel();
  impl_->items.clear();
  impl_->continueToken.clear();
}

bool Reflector::synced() const {
  return impl_->synced;
}
bool Reflector::connected() const {
  return impl_->connected;
}
const std::string& Reflector::resourceVersion() const {
  return impl_->resourceVersion;
}
const Reflector::Stats& Reflector::stats() const {
  return impl_->stats;
}

}  // namespace nodewarden::kube
