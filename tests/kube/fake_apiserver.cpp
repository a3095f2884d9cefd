// The strict fake Kubernetes API server: routing, an object store with a change history,
// watch sessions fed from that history, and Status helpers. One io_context on one thread; the
// object state is guarded by one mutex so the public functions work from any thread.
#include "tests/kube/fake_apiserver.h"
#include <cstdio>

#include <arpa/inet.h>
#include <openssl/bio.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include <algorithm>
#include <array>
#include <charconv>
#include <condition_variable>
#include <ctime>
#include <deque>
#include <future>
#include <map>
#include <set>
#include <stdexcept>
#include <string_view>
#include <thread>
#include <utility>
#include <variant>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>

#include "base/time.h"

namespace nodewarden::testing {
namespace {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
namespace ssl = net::ssl;
using tcp = net::ip::tcp;
using Json = nlohmann::json;
using std::chrono::steady_clock;

// ---------------------------------------------------------------- resources

enum class Kind { Pod = 0, Node, PriorityClass, Pdb, Event };
constexpr std::size_t kKindCount = 5;

struct ResourceInfo {
  Kind kind;
  const char* plural;
  const char* groupVersion;
  const char* kindName;
  const char* listKind;
  bool namespaced;
};

constexpr std::array<ResourceInfo, kKindCount> kResources{{
    {Kind::Pod, "pods", "v1", "Pod", "PodList", true},
    {Kind::Node, "nodes", "v1", "Node", "NodeList", false},
    {Kind::PriorityClass, "priorityclasses", "scheduling.k8s.io/v1", "PriorityClass",
     "PriorityClassList", false},
    {Kind::Pdb, "poddisruptionbudgets", "policy/v1", "PodDisruptionBudget",
     "PodDisruptionBudgetList", true},
    {Kind::Event, "events", "v1", "Event", "EventList", true},
}};

const ResourceInfo& info(Kind kind) {
  return kResources[static_cast<std::size_t>(kind)];
}

std::string stringAt(const Json& object, std::initializer_list<const char*> path) {
  const Json* at = &object;
  for (const char* key : path) {
    if (!at->is_object()) return {};
    auto it = at->find(key);
    if (it == at->end()) return {};
    at = &*it;
  }
  if (at->is_string()) return at->get<std::string>();
  if (at->is_number() || at->is_boolean()) return at->dump();
  return {};
}

std::string objectKey(Kind kind, const Json& object) {
  std::string name = stringAt(object, {"metadata", "name"});
  if (!info(kind).namespaced) return name;
  return stringAt(object, {"metadata", "namespace"}) + "/" + name;
}

std::string rfc3339(std::chrono::system_clock::time_point at) {
  std::time_t t = std::chrono::system_clock::to_time_t(at);
  std::tm tm{};
  gmtime_r(&t, &tm);
  std::array<char, 32> text{};
  std::strftime(text.data(), text.size(), "%Y-%m-%dT%H:%M:%SZ", &tm);
  return text.data();
}

std::string randomHex(std::size_t bytes) {
  std::vector<unsigned char> raw(bytes);
  RAND_bytes(raw.data(), static_cast<int>(raw.size()));
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out;
  for (unsigned char c : raw) {
    out += kDigits[c >> 4];
    out += kDigits[c & 15];
  }
  return out;
}

std::string newUid() {
  std::string h = randomHex(16);
  return h.substr(0, 8) + "-" + h.substr(8, 4) + "-" + h.substr(12, 4) + "-" + h.substr(16, 4) +
         "-" + h.substr(20);
}

std::optional<std::uint64_t> parseUnsigned(std::string_view text) {
  std::uint64_t value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || ec != std::errc{} || end != text.data() + text.size()) return std::nullopt;
  return value;
}

std::optional<std::int64_t> parseSigned(std::string_view text) {
  std::int64_t value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || ec != std::errc{} || end != text.data() + text.size()) return std::nullopt;
  return value;
}

// ---------------------------------------------------------------- Status objects

struct Reply {
  unsigned status = 200;
  Json body;
};

Reply failure(unsigned code, const std::string& reason, const std::string& message,
              Json details = nullptr) {
  Json status = {{"kind", "Status"},    {"apiVersion", "v1"}, {"metadata", Json::object()},
                 {"status", "Failure"}, {"message", message}, {"reason", reason},
                 {"code", code}};
  if (!details.is_null()) status["details"] = std::move(details);
  return {code, std::move(status)};
}

// GET http://127.0.0.1:PORT/TARGET for the node proxy: the answer's status, and its body
// when it is JSON (else a 502 Status).
Reply proxyGet(const std::string& port, const std::string& target) {
  namespace http = boost::beast::http;
  try {
    boost::asio::io_context io;
    boost::beast::tcp_stream stream(io);
    stream.expires_after(std::chrono::seconds(5));
    boost::asio::ip::tcp::endpoint endpoint(boost::asio::ip::make_address("127.0.0.1"),
                                            static_cast<unsigned short>(std::stoi(port)));
    stream.connect(endpoint);
    http::request<http::empty_body> request{http::verb::get, target, 11};
    request.set(http::field::host, "127.0.0.1:" + port);
    http::write(stream, request);
    boost::beast::flat_buffer buffer;
    http::response<http::string_body> response;
    http::read(stream, buffer, response);
    Json body = Json::parse(response.body(), nullptr, false);
    if (body.is_discarded()) return failure(502, "BadGateway", "the node's answer is not JSON");
    return Reply{response.result_int(), std::move(body)};
  } catch (const std::exception& e) {
    return failure(503, "ServiceUnavailable",
                   std::string("error trying to reach service: ") + e.what());
  }
}

Reply badRequest(const std::string& message) {
  return failure(400, "BadRequest", message);
}

Reply notFound(const std::string& plural, const std::string& name) {
  return failure(404, "NotFound", plural + " \"" + name + "\" not found",
                 {{"name", name}, {"kind", plural}});
}

Reply notFoundPath() {
  return failure(404, "NotFound", "the server could not find the requested resource",
                 Json::object());
}

Reply methodNotAllowed(const std::string& method) {
  return failure(405, "MethodNotAllowed",
                 "the server does not allow this method on the requested resource (" + method + ")",
                 Json::object());
}

Reply unsupportedMediaType(const std::string& contentType) {
  return failure(415, "UnsupportedMediaType",
                 "the body of the request was in an unknown format - accepted media types "
                 "include: application/json, application/yaml (got \"" +
                     contentType + "\")");
}

Reply goneReply(const std::string& message) {
  return failure(410, "Expired", message);
}

Json goneStatus(const std::string& message) {
  return goneReply(message).body;
}

// ---------------------------------------------------------------- query strings

std::string percentDecode(std::string_view text) {
  std::string out;
  for (std::size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (c == '+') {
      out += ' ';
    } else if (c == '%' && i + 2 < text.size()) {
      int value = 0;
      auto [end, ec] = std::from_chars(text.data() + i + 1, text.data() + i + 3, value, 16);
      if (ec == std::errc{} && end == text.data() + i + 3) {
        out += static_cast<char>(value);
        i += 2;
      } else {
        out += c;
      }
    } else {
      out += c;
    }
  }
  return out;
}

std::vector<std::pair<std::string, std::string>> parseQuery(std::string_view query) {
  std::vector<std::pair<std::string, std::string>> out;
  while (!query.empty()) {
    auto amp = query.find('&');
    std::string_view part = query.substr(0, amp);
    query = amp == std::string_view::npos ? std::string_view{} : query.substr(amp + 1);
    if (part.empty()) continue;
    auto eq = part.find('=');
    out.emplace_back(percentDecode(part.substr(0, eq)),
                     eq == std::string_view::npos ? "" : percentDecode(part.substr(eq + 1)));
  }
  return out;
}

std::string mediaType(std::string_view contentType) {
  std::string type(contentType.substr(0, contentType.find(';')));
  while (!type.empty() && type.back() == ' ') type.pop_back();
  std::transform(type.begin(), type.end(), type.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return type;
}

std::string hexEncode(std::string_view text) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out;
  for (unsigned char c : text) {
    out += kDigits[c >> 4];
    out += kDigits[c & 15];
  }
  return out;
}

std::optional<std::string> hexDecode(std::string_view text) {
  if (text.size() % 2 != 0) return std::nullopt;
  std::string out;
  for (std::size_t i = 0; i < text.size(); i += 2) {
    int value = 0;
    auto [end, ec] = std::from_chars(text.data() + i, text.data() + i + 2, value, 16);
    if (ec != std::errc{} || end != text.data() + i + 2) return std::nullopt;
    out += static_cast<char>(value);
  }
  return out;
}

// ---------------------------------------------------------------- field selectors

struct FieldTerm {
  std::string field;
  std::string value;
  bool negate = false;
};

bool fieldSupported(Kind kind, const std::string& field) {
  if (field == "metadata.name" || field == "metadata.namespace") return true;
  static const std::map<Kind, std::set<std::string>> kFields = {
      {Kind::Pod,
       {"spec.nodeName", "spec.restartPolicy", "spec.schedulerName", "spec.serviceAccountName",
        "status.phase", "status.podIP", "status.nominatedNodeName"}},
      {Kind::Node, {"spec.unschedulable"}},
      {Kind::Event,
       {"involvedObject.kind", "involvedObject.namespace", "involvedObject.name",
        "involvedObject.uid", "involvedObject.apiVersion", "reason", "type", "source"}},
  };
  auto it = kFields.find(kind);
  return it != kFields.end() && it->second.count(field) > 0;
}

// Parses "a=b,c!=d"; returns an error message on failure.
std::variant<std::vector<FieldTerm>, std::string> parseFieldSelector(Kind kind,
                                                                     std::string_view text) {
  std::vector<FieldTerm> terms;
  while (!text.empty()) {
    auto comma = text.find(',');
    std::string_view part = text.substr(0, comma);
    text = comma == std::string_view::npos ? std::string_view{} : text.substr(comma + 1);
    if (part.empty()) continue;
    FieldTerm term;
    std::size_t at = 0, skip = 0;
    if ((at = part.find("!=")) != std::string_view::npos) {
      term.negate = true;
      skip = 2;
    } else if ((at = part.find("==")) != std::string_view::npos) {
      skip = 2;
    } else if ((at = part.find('=')) != std::string_view::npos) {
      skip = 1;
    } else {
      return "invalid selector: '" + std::string(part) + "'; can't understand '" +
             std::string(part) + "'";
    }
    term.field = std::string(part.substr(0, at));
    term.value = std::string(part.substr(at + skip));
    if (!fieldSupported(kind, term.field)) return "field label not supported: " + term.field;
    terms.push_back(std::move(term));
  }
  return terms;
}

std::string fieldValue(const Json& object, const std::string& field) {
  const Json* at = &object;
  std::string_view rest = field;
  while (!rest.empty()) {
    auto dot = rest.find('.');
    std::string key(rest.substr(0, dot));
    rest = dot == std::string_view::npos ? std::string_view{} : rest.substr(dot + 1);
    if (!at->is_object() || !at->contains(key)) return {};
    at = &(*at)[key];
  }
  if (at->is_string()) return at->get<std::string>();
  if (at->is_boolean() || at->is_number()) return at->dump();
  return {};
}

bool selectorMatches(const Json& object, const std::vector<FieldTerm>& terms) {
  for (const auto& term : terms) {
    if ((fieldValue(object, term.field) == term.value) == term.negate) return false;
  }
  return true;
}

// matchLabels + matchExpressions; a null selector selects nothing, {} everything.
bool labelSelectorMatches(const Json& selector, const Json& labels) {
  if (!selector.is_object()) return false;
  auto label = [&](const std::string& key) -> std::optional<std::string> {
    if (!labels.is_object() || !labels.contains(key) || !labels[key].is_string())
      return std::nullopt;
    return labels[key].get<std::string>();
  };
  if (selector.contains("matchLabels") && selector["matchLabels"].is_object()) {
    for (const auto& [key, value] : selector["matchLabels"].items()) {
      if (!value.is_string() || label(key) != value.get<std::string>()) return false;
    }
  }
  if (selector.contains("matchExpressions") && selector["matchExpressions"].is_array()) {
    for (const auto& expression : selector["matchExpressions"]) {
      std::string key = stringAt(expression, {"key"});
      std::string op = stringAt(expression, {"operator"});
      std::set<std::string> values;
      if (expression.contains("values") && expression["values"].is_array()) {
        for (const auto& v : expression["values"]) {
          if (v.is_string()) values.insert(v.get<std::string>());
        }
      }
      auto have = label(key);
      if (op == "In") {
        if (!have || values.count(*have) == 0) return false;
      } else if (op == "NotIn") {
        if (have && values.count(*have) > 0) return false;
      } else if (op == "Exists") {
        if (!have) return false;
      } else if (op == "DoesNotExist") {
        if (have) return false;
      } else {
        return false;
      }
    }
  }
  return true;
}

// ---------------------------------------------------------------- patches

// Strategic merge as the API server applies it to status: maps merge recursively, null deletes,
// lists with a merge key (conditions, addresses: "type") merge element-wise, other lists replace.
void strategicMerge(Json& target, const Json& patch) {
  if (!target.is_object()) target = Json::object();
  for (const auto& [key, value] : patch.items()) {
    if (value.is_null()) {
      target.erase(key);
    } else if ((key == "conditions" || key == "addresses") && value.is_array()) {
      Json& list = target[key];
      if (!list.is_array()) list = Json::array();
      for (const auto& element : value) {
        if (!element.is_object() || !element.contains("type")) {
          list.push_back(element);
          continue;
        }
        auto existing = std::find_if(list.begin(), list.end(), [&](const Json& e) {
          return e.is_object() && e.contains("type") && e["type"] == element["type"];
        });
        bool remove = element.contains("$patch") && element["$patch"] == "delete";
        if (existing == list.end()) {
          if (!remove) list.push_back(element);
        } else if (remove) {
          list.erase(existing);
        } else {
          strategicMerge(*existing, element);
        }
      }
    } else if (value.is_object() && target.contains(key) && target[key].is_object()) {
      strategicMerge(target[key], value);
    } else {
      target[key] = value;
    }
  }
}

// ---------------------------------------------------------------- watches

struct WatchItem {
  // Line: a whole event line; End: the terminating chunk; Drop: close abruptly; Cut: write
  // `line` (half an event) and close abruptly.
  enum class Op { Line, End, Drop, Cut } op = Op::Line;
  std::string line;
};

struct Change {
  std::uint64_t rv = 0;
  Kind kind = Kind::Pod;
  std::string type;  // ADDED, MODIFIED, DELETED
  Json object;       // the new state (the last state for DELETED)
  Json previous;     // null for ADDED
};

struct Watcher {
  explicit Watcher(net::io_context& context) : wake(context) {}
  Kind kind = Kind::Pod;
  std::string ns;  // "" for every namespace
  std::vector<FieldTerm> selector;
  std::deque<WatchItem> queue;  // guarded by Impl::mutex_
  // Server thread only.
  net::steady_timer wake;
  bool peerGone = false;
};

std::string eventLine(const std::string& type, const Json& object) {
  return Json{{"type", type}, {"object", object}}.dump() + "\n";
}

// The event a watcher sees for a change: what stops matching the selector is DELETED, what
// starts matching is ADDED, as the real watch cache does.
std::optional<std::string> lineFor(const Watcher& watcher, const Change& change) {
  if (change.kind != watcher.kind) return std::nullopt;
  auto visible = [&](const Json& object) {
    if (object.is_null()) return false;
    if (!watcher.ns.empty() && stringAt(object, {"metadata", "namespace"}) != watcher.ns)
      return false;
    return selectorMatches(object, watcher.selector);
  };
  bool now = change.type != "DELETED" && visible(change.object);
  bool before = change.type == "DELETED" ? visible(change.object) : visible(change.previous);
  if (now && before) return eventLine("MODIFIED", change.object);
  if (now) return eventLine("ADDED", change.object);
  if (before) return eventLine("DELETED", change.object);
  return std::nullopt;
}

// ---------------------------------------------------------------- connections

// Completion token: errors as values (a tuple), never as exceptions.
constexpr auto kAwait = net::as_tuple(net::use_awaitable);

// The TLS handshake (nothing for plain TCP); true when the connection may go on. Overloads,
// not `if constexpr`: GCC 12 lays out coroutine frames wrongly around discarded co_awaits.
net::awaitable<bool> handshake(beast::tcp_stream&) {
  co_return true;
}

net::awaitable<bool> handshake(beast::ssl_stream<beast::tcp_stream>& stream) {
  auto [ec] = co_await stream.async_handshake(ssl::stream_base::server, kAwait);
  co_return !ec;
}

// Whether the client presented a certificate the server verified (clientCaPem).
bool certified(beast::tcp_stream&) {
  return false;
}

bool certified(beast::ssl_stream<beast::tcp_stream>& stream) {
  X509* peer = SSL_get1_peer_certificate(stream.native_handle());
  if (peer == nullptr) return false;
  X509_free(peer);
  return SSL_get_verify_result(stream.native_handle()) == X509_V_OK;
}

template <class Stream>
struct Connection {
  template <class... Args>
  explicit Connection(Args&&... args) : stream(std::forward<Args>(args)...) {}
  Stream stream;
  beast::flat_buffer buffer;
  std::array<char, 512> sink{};
};

// What handling one request produced: an answer, or a watch stream to run.
struct Outcome {
  Outcome() = default;
  Outcome(Reply r) : reply(std::move(r)) {}  // implicit: most handlers answer at once
  Outcome(std::shared_ptr<Watcher> w, std::chrono::seconds timeout, bool withBookmarks)
      : reply{200, nullptr}, watch(std::move(w)), watchTimeout(timeout), bookmarks(withBookmarks) {}
  Reply reply;
  std::shared_ptr<Watcher> watch;  // set: stream this watcher
  std::chrono::seconds watchTimeout{0};
  bool bookmarks = false;
};

}  // namespace

// ---------------------------------------------------------------- the server

struct FakeApiServer::Impl {
  explicit Impl(FakeApiServerOptions options);
  ~Impl();

  std::map<std::string, Json> nodeStats;  // under mutex_

  // Any thread.
  void runOnLoop(const std::function<void()>& fn);
  void upsert(Kind kind, Json object);
  void remove(Kind kind, const std::string& key);
  std::optional<Json> get(Kind kind, const std::string& key) const;

  // With mutex_ held.
  void recordChangeLocked(Kind kind, const std::string& type, Json object, Json previous);
  void pushLocked(const std::shared_ptr<Watcher>& watcher, WatchItem item);
  std::string deletePodLocked(const std::string& key);  // returns the removed pod's JSON

  // Server thread.
  net::awaitable<void> acceptLoop(std::uint64_t generation);
  template <class Stream>
  net::awaitable<void> serve(std::shared_ptr<Connection<Stream>> conn);
  template <class Stream>
  net::awaitable<bool> streamWatch(std::shared_ptr<Connection<Stream>> conn, Outcome outcome,
                                   unsigned version);
  template <class Stream>
  std::uint64_t registerConnection(std::shared_ptr<Connection<Stream>> conn);
  template <class Stream>
  void watchPeer(std::shared_ptr<Connection<Stream>> conn, std::shared_ptr<Watcher> watcher);
  bool openAcceptor();
  void closeEverything();
  Outcome handle(const http::request<http::string_body>& request, bool clientCertificate);
  Outcome route(const std::string& method, const std::string& path, const std::string& query,
                const std::string& contentType, const std::string& body);
  Outcome listOrWatch(Kind kind, const std::string& ns, const std::string& query);
  Reply deletePod(const std::string& ns, const std::string& name, const Json& options,
                  std::optional<std::int64_t> queryGrace);
  Reply evict(const std::string& ns, const std::string& name, const std::string& body);
  Reply patchStatus(Kind kind, const std::string& key, const std::string& name,
                    const std::string& contentType, const std::string& body);
  Reply createEvent(const std::string& ns, const std::string& body);

  FakeApiServerOptions options_;
  std::unique_ptr<net::io_context> context_;
  std::unique_ptr<ssl::context> tls_;
  // Keeps run() going while the server is down (nothing else to wait for then).
  std::optional<net::executor_work_guard<net::io_context::executor_type>> work_;
  tcp::acceptor acceptor_;
  std::uint16_t port_ = 0;
  std::thread thread_;
  std::thread::id threadId_;
  std::promise<void> stopped_;

  // Server thread only.
  std::map<std::uint64_t, std::function<void()>> connections_;  // id → abrupt close
  std::uint64_t nextConnection_ = 0;
  std::uint64_t acceptGeneration_ = 0;
  bool down_ = false;
  bool stopping_ = false;

  mutable std::mutex mutex_;
  mutable std::condition_variable requestsChanged_;
  std::string token_;
  std::array<std::map<std::string, Json>, kKindCount> objects_;
  std::deque<Change> history_;
  std::uint64_t rv_ = 1;
  std::uint64_t compactedRv_ = 0;
  std::vector<std::shared_ptr<Watcher>> watchers_;
  std::vector<RecordedRequest> requests_;
  FaultMode faults_;
};

FakeApiServer::Impl::Impl(FakeApiServerOptions options)
    : options_(std::move(options)),
      context_(std::make_unique<net::io_context>(1)),
      work_(context_->get_executor()),
      acceptor_(*context_),
      token_(options_.token) {
  if (options_.tls) {
    tls_ = std::make_unique<ssl::context>(ssl::context::tls_server);
    tls_->set_options(ssl::context::default_workarounds | ssl::context::no_sslv2 |
                      ssl::context::no_sslv3 | ssl::context::no_tlsv1 | ssl::context::no_tlsv1_1);
    tls_->use_certificate_chain(net::buffer(options_.certPem));
    tls_->use_private_key(net::buffer(options_.keyPem), ssl::context::pem);
    if (!options_.clientCaPem.empty()) {
      // Asked for, not required: token clients connect as before.
      tls_->set_verify_mode(ssl::verify_peer);
      tls_->add_certificate_authority(net::buffer(options_.clientCaPem));
    }
  }
  if (!openAcceptor()) throw std::runtime_error("fake apiserver: cannot listen on 127.0.0.1");
  port_ = acceptor_.local_endpoint().port();
  net::co_spawn(*context_, acceptLoop(acceptGeneration_), net::detached);
  std::promise<void> started;
  auto startedFuture = started.get_future();
  thread_ = std::thread([this, &started] {
    threadId_ = std::this_thread::get_id();
    started.set_value();
    for (;;) {
      try {
        context_->run();
        break;
      } catch (const std::exception&) {
        // A coroutine let an exception out; keep serving.
      }
    }
    stopped_.set_value();
  });
  startedFuture.wait();
}

FakeApiServer::Impl::~Impl() {
  runOnLoop([this] {
    stopping_ = true;
    closeEverything();
    work_.reset();
  });
  if (stopped_.get_future().wait_for(std::chrono::seconds(5)) != std::future_status::ready) {
    context_->stop();
  }
  thread_.join();
  {
    std::lock_guard lock(mutex_);
    watchers_.clear();
  }
  connections_.clear();
  context_.reset();  // destroys what is left (coroutine frames) before the members they use
}

void FakeApiServer::Impl::runOnLoop(const std::function<void()>& fn) {
  if (std::this_thread::get_id() == threadId_) {
    fn();
    return;
  }
  auto done = std::make_shared<std::promise<void>>();
  auto future = done->get_future();
  net::post(*context_, [fn, done] {
    fn();
    done->set_value();
  });
  future.wait_for(std::chrono::seconds(5));
}

bool FakeApiServer::Impl::openAcceptor() {
  tcp::endpoint endpoint(net::ip::make_address_v4("127.0.0.1"), port_);
  for (int attempt = 0; attempt < 100; ++attempt) {
    boost::system::error_code ec;
    acceptor_.open(endpoint.protocol(), ec);
    if (!ec) acceptor_.set_option(tcp::acceptor::reuse_address(true), ec);
    if (!ec) acceptor_.bind(endpoint, ec);
    if (!ec) acceptor_.listen(net::socket_base::max_listen_connections, ec);
    if (!ec) return true;
    acceptor_.close(ec);
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return false;
}

void FakeApiServer::Impl::closeEverything() {
  boost::system::error_code ec;
  acceptor_.close(ec);
  ++acceptGeneration_;
  {
    std::lock_guard lock(mutex_);
    for (auto& watcher : watchers_) pushLocked(watcher, {WatchItem::Op::Drop, {}});
    watchers_.clear();
  }
  auto connections = connections_;
  for (auto& [id, close] : connections) close();
}

net::awaitable<void> FakeApiServer::Impl::acceptLoop(std::uint64_t generation) {
  for (;;) {
    auto [ec, socket] = co_await acceptor_.async_accept(kAwait);
    if (generation != acceptGeneration_ || stopping_) co_return;
    if (ec) {
      if (!acceptor_.is_open()) co_return;
      continue;
    }
    if (down_) continue;  // closes the socket at once
    bool reset = false;
    {
      std::lock_guard lock(mutex_);
      reset = faults_.resetConnections;
    }
    if (reset) {
      boost::system::error_code ignored;
      socket.set_option(net::socket_base::linger(true, 0), ignored);
      socket.close(ignored);  // RST
      continue;
    }
    if (tls_) {
      auto conn = std::make_shared<Connection<beast::ssl_stream<beast::tcp_stream>>>(
          std::move(socket), *tls_);
      net::co_spawn(*context_, serve(std::move(conn)), net::detached);
    } else {
      auto conn = std::make_shared<Connection<beast::tcp_stream>>(std::move(socket));
      net::co_spawn(*context_, serve(std::move(conn)), net::detached);
    }
  }
}

template <class Stream>
net::awaitable<void> FakeApiServer::Impl::serve(std::shared_ptr<Connection<Stream>> conn) {
  // No exceptions and no lambdas in coroutines here: GCC 12 miscompiles some of those.
  std::uint64_t id = registerConnection(conn);
  struct Unregister {
    Impl* impl;
    std::uint64_t id;
    ~Unregister() { impl->connections_.erase(id); }
  } unregister{this, id};
  beast::tcp_stream* lowestLayer = &beast::get_lowest_layer(conn->stream);
  beast::tcp_stream& lowest = *lowestLayer;
  lowest.expires_after(std::chrono::seconds(10));
  bool open = co_await handshake(conn->stream);
  const bool clientCertificate = open && certified(conn->stream);
  while (open) {
    http::request_parser<http::string_body> parser;
    parser.body_limit(16 * 1024 * 1024);
    lowest.expires_after(std::chrono::seconds(60));
    auto [readError, readBytes] =
        co_await http::async_read(conn->stream, conn->buffer, parser, kAwait);
    if (readError) break;
    http::request<http::string_body> request = parser.release();
    Outcome outcome = handle(request, clientCertificate);
    std::chrono::milliseconds delay{0};
    {
      std::lock_guard lock(mutex_);
      delay = faults_.delay;
    }
    if (delay.count() > 0) {
      net::steady_timer wait(*context_);
      wait.expires_after(delay);
      lowest.expires_after(delay + std::chrono::seconds(60));
      co_await wait.async_wait(kAwait);
    }
    if (outcome.watch) {
      bool clean = co_await streamWatch(conn, std::move(outcome), request.version());
      if (clean) {
        boost::system::error_code ignored;
        lowest.socket().shutdown(tcp::socket::shutdown_send, ignored);
      }
      break;
    }
    http::response<http::string_body> response{static_cast<http::status>(outcome.reply.status),
                                               request.version()};
    response.set(http::field::server, "nodewarden-fake-apiserver");
    response.set(http::field::content_type, "application/json");
    // As the real server writes an error (responsewriters.ErrorNegotiated): a Status that
    // suggests a delay says so in Retry-After too, which is what clients read.
    const Json& body = outcome.reply.body;
    const Json* details = body.is_object() && body.contains("details") ? &body["details"] : nullptr;
    if (details != nullptr && details->is_object()) {
      const std::int64_t seconds = details->value("retryAfterSeconds", std::int64_t{0});
      if (seconds > 0) response.set(http::field::retry_after, std::to_string(seconds));
    }
    response.keep_alive(request.keep_alive());
    response.body() = outcome.reply.body.dump();
    response.prepare_payload();
    lowest.expires_after(std::chrono::seconds(30));
    auto [writeError, written] = co_await http::async_write(conn->stream, response, kAwait);
    if (writeError) break;
    if (!request.keep_alive()) {
      boost::system::error_code ignored;
      lowest.socket().shutdown(tcp::socket::shutdown_send, ignored);
      break;
    }
  }
  boost::system::error_code ignored;
  lowest.socket().close(ignored);
}

template <class Stream>
std::uint64_t FakeApiServer::Impl::registerConnection(std::shared_ptr<Connection<Stream>> conn) {
  std::uint64_t id = nextConnection_++;
  connections_[id] = [conn] {
    boost::system::error_code ec;
    beast::get_lowest_layer(conn->stream).socket().close(ec);
  };
  return id;
}

template <class Stream>
void FakeApiServer::Impl::watchPeer(std::shared_ptr<Connection<Stream>> conn,
                                    std::shared_ptr<Watcher> watcher) {
  // A watch client sends nothing; a read completes only when it goes away.
  conn->stream.async_read_some(net::buffer(conn->sink),
                               [this, conn, watcher](boost::system::error_code ec, std::size_t) {
                                 if (ec) {
                                   watcher->peerGone = true;
                                   watcher->wake.cancel();
                                 } else {
                                   watchPeer(conn, watcher);
                                 }
                               });
}

// Streams one watch; returns true when it ended cleanly (terminating chunk written).
template <class Stream>
net::awaitable<bool> FakeApiServer::Impl::streamWatch(std::shared_ptr<Connection<Stream>> conn,
                                                      Outcome outcome, unsigned version) {
  auto watcher = outcome.watch;
  struct Unregister {
    Impl* impl;
    std::shared_ptr<Watcher> watcher;
    ~Unregister() {
      std::lock_guard lock(impl->mutex_);
      std::erase(impl->watchers_, watcher);
    }
  } unregister{this, watcher};

  beast::get_lowest_layer(conn->stream).expires_never();
  http::response<http::empty_body> header{http::status::ok, version};
  header.set(http::field::server, "nodewarden-fake-apiserver");
  header.set(http::field::content_type, "application/json");
  header.keep_alive(false);  // the stream's end closes the connection
  header.chunked(true);
  http::response_serializer<http::empty_body> serializer{header};
  auto [headerError, headerBytes] =
      co_await http::async_write_header(conn->stream, serializer, kAwait);
  if (headerError) co_return false;
  watchPeer(conn, watcher);

  auto deadline = outcome.watchTimeout.count() > 0 ? steady_clock::now() + outcome.watchTimeout
                                                   : SteadyTime::max();
  const auto bookmarkEvery = std::max(options_.bookmarkEvery, std::chrono::milliseconds(10));
  auto nextBookmark = outcome.bookmarks ? steady_clock::now() + bookmarkEvery : SteadyTime::max();
  const char* kindName = info(watcher->kind).kindName;
  for (;;) {
    if (watcher->peerGone) co_return false;
    std::optional<WatchItem> item;
    std::string bookmark;
    auto now = steady_clock::now();
    {
      std::lock_guard lock(mutex_);
      if (!watcher->queue.empty()) {
        item = std::move(watcher->queue.front());
        watcher->queue.pop_front();
      } else if (now >= nextBookmark) {
        Json object = {{"kind", kindName},
                       {"apiVersion", info(watcher->kind).groupVersion},
                       {"metadata", {{"resourceVersion", std::to_string(rv_)}}}};
        bookmark = eventLine("BOOKMARK", object);
      }
    }
    if (item && item->op == WatchItem::Op::Drop) co_return false;
    if (item && item->op == WatchItem::Op::End) break;
    if (item && item->op == WatchItem::Op::Cut) {
      auto chunk = http::make_chunk(net::buffer(item->line));
      (void)co_await net::async_write(conn->stream, chunk, kAwait);
      co_return false;
    }
    std::string line = item ? std::move(item->line) : std::move(bookmark);
    if (!line.empty()) {
      if (!item) nextBookmark = now + bookmarkEvery;
      auto chunk = http::make_chunk(net::buffer(line));
      auto [writeError, written] = co_await net::async_write(conn->stream, chunk, kAwait);
      if (writeError) co_return false;
      continue;
    }
    if (now >= deadline) break;
    watcher->wake.expires_at(std::min(deadline, nextBookmark));
    co_await watcher->wake.async_wait(kAwait);  // expired or woken: look again
  }
  auto last = http::make_chunk_last();
  auto [lastError, lastBytes] = co_await net::async_write(conn->stream, last, kAwait);
  co_return !lastError;
}

// ---------------------------------------------------------------- store

void FakeApiServer::Impl::pushLocked(const std::shared_ptr<Watcher>& watcher, WatchItem item) {
  watcher->queue.push_back(std::move(item));
  net::post(*context_, [watcher] { watcher->wake.cancel(); });
}

void FakeApiServer::Impl::recordChangeLocked(Kind kind, const std::string& type, Json object,
                                             Json previous) {
  ++rv_;
  object["metadata"]["resourceVersion"] = std::to_string(rv_);
  Change change{rv_, kind, type, object, std::move(previous)};
  if (type == "DELETED") {
    objects_[static_cast<std::size_t>(kind)].erase(objectKey(kind, object));
  } else {
    objects_[static_cast<std::size_t>(kind)][objectKey(kind, object)] = object;
  }
  for (auto& watcher : watchers_) {
    if (auto line = lineFor(*watcher, change)) pushLocked(watcher, {WatchItem::Op::Line, *line});
  }
  history_.push_back(std::move(change));
}

void FakeApiServer::Impl::upsert(Kind kind, Json object) {
  const ResourceInfo& resource = info(kind);
  if (!object.is_object() || stringAt(object, {"metadata", "name"}).empty() ||
      (resource.namespaced && stringAt(object, {"metadata", "namespace"}).empty())) {
    throw std::invalid_argument(std::string("fake apiserver: a ") + resource.kindName +
                                " needs metadata.name" +
                                (resource.namespaced ? " and metadata.namespace" : ""));
  }
  object["kind"] = resource.kindName;
  object["apiVersion"] = resource.groupVersion;
  std::lock_guard lock(mutex_);
  auto& store = objects_[static_cast<std::size_t>(kind)];
  auto it = store.find(objectKey(kind, object));
  Json previous = it == store.end() ? Json() : it->second;
  if (!object["metadata"].contains("uid")) {
    object["metadata"]["uid"] = previous.is_null() ? Json(newUid()) : previous["metadata"]["uid"];
  }
  if (!object["metadata"].contains("creationTimestamp")) {
    object["metadata"]["creationTimestamp"] =
        previous.is_null() ? Json(rfc3339(std::chrono::system_clock::now()))
                           : previous["metadata"].value("creationTimestamp", Json());
  }
  recordChangeLocked(kind, previous.is_null() ? "ADDED" : "MODIFIED", std::move(object),
                     std::move(previous));
}

void FakeApiServer::Impl::remove(Kind kind, const std::string& key) {
  std::lock_guard lock(mutex_);
  auto& store = objects_[static_cast<std::size_t>(kind)];
  auto it = store.find(key);
  if (it == store.end()) return;
  Json last = it->second;
  recordChangeLocked(kind, "DELETED", last, last);
}

std::string FakeApiServer::Impl::deletePodLocked(const std::string& key) {
  auto& store = objects_[static_cast<std::size_t>(Kind::Pod)];
  Json last = store.at(key);
  recordChangeLocked(Kind::Pod, "DELETED", last, last);
  last["metadata"]["resourceVersion"] = std::to_string(rv_);
  return last.dump();
}

std::optional<Json> FakeApiServer::Impl::get(Kind kind, const std::string& key) const {
  std::lock_guard lock(mutex_);
  const auto& store = objects_[static_cast<std::size_t>(kind)];
  auto it = store.find(key);
  if (it == store.end()) return std::nullopt;
  return it->second;
}

// ---------------------------------------------------------------- requests

Outcome FakeApiServer::Impl::handle(const http::request<http::string_body>& request,
                                    bool clientCertificate) {
  RecordedRequest record;
  record.clientCertificate = clientCertificate;
  record.method = std::string(request.method_string());
  std::string target(request.target());
  auto question = target.find('?');
  record.path = target.substr(0, question);
  record.query = question == std::string::npos ? "" : target.substr(question + 1);
  record.contentType = std::string(request[http::field::content_type]);
  record.authorization = std::string(request[http::field::authorization]);
  record.body = request.body();

  Outcome outcome;
  std::string token;
  {
    std::lock_guard lock(mutex_);
    token = token_;
  }
  unsigned failWith = 0;
  {
    std::lock_guard lock(mutex_);
    failWith = faults_.failWith;
  }
  if (!token.empty() && !clientCertificate && record.authorization != "Bearer " + token) {
    outcome.reply = failure(401, "Unauthorized", "Unauthorized");
  } else if (failWith != 0) {
    outcome.reply =
        failure(failWith, failWith >= 500 ? "InternalError" : "BadRequest", "injected fault");
  } else {
    // The real API server takes `timeout` on every request (kubectl --request-timeout sends it).
    std::string query;
    for (std::size_t at = 0; at <= record.query.size();) {
      std::size_t end = std::min(record.query.find('&', at), record.query.size());
      std::string param = record.query.substr(at, end - at);
      if (!param.empty() && param.rfind("timeout=", 0) != 0)
        query += (query.empty() ? "" : "&") + param;
      at = end + 1;
    }
    outcome = route(record.method, record.path, query, record.contentType, record.body);
  }
  record.status = outcome.reply.status;
  {
    std::lock_guard lock(mutex_);
    requests_.push_back(std::move(record));
  }
  requestsChanged_.notify_all();
  return outcome;
}

Outcome FakeApiServer::Impl::route(const std::string& method, const std::string& path,
                                   const std::string& query, const std::string& contentType,
                                   const std::string& body) {
  std::vector<std::string> parts;
  for (std::size_t at = 0; at < path.size();) {
    auto slash = path.find('/', at);
    if (slash == std::string::npos) slash = path.size();
    if (slash > at) parts.push_back(path.substr(at, slash - at));
    at = slash + 1;
  }
  // Find the API group prefix: /api/v1 or /apis/GROUP/VERSION.
  std::string groupVersion;
  std::size_t next = 0;
  if (parts.size() >= 2 && parts[0] == "api" && parts[1] == "v1") {
    groupVersion = "v1";
    next = 2;
  } else if (parts.size() >= 3 && parts[0] == "apis") {
    groupVersion = parts[1] + "/" + parts[2];
    next = 3;
  } else {
    return {notFoundPath()};
  }
  std::string ns;
  if (parts.size() >= next + 3 && parts[next] == "namespaces") {
    ns = parts[next + 1];
    next += 2;
  }
  const bool nodeProxy = parts.size() >= next + 4 && parts[next + 2] == "proxy";
  if (parts.size() <= next || (parts.size() > next + 3 && !nodeProxy)) return {notFoundPath()};
  const ResourceInfo* resource = nullptr;
  for (const auto& candidate : kResources) {
    if (candidate.plural == parts[next] && candidate.groupVersion == groupVersion)
      resource = &candidate;
  }
  if (resource == nullptr || (!ns.empty() && !resource->namespaced)) {
    return {notFoundPath()};
  }
  // The proxy to a port of a node or a pod: /api/v1/nodes/NAME:PORT/proxy/PATH and
  // /api/v1/namespaces/NS/pods/NAME:PORT/proxy/PATH, as the real server proxies to the
  // node's or the pod's address; here every node and pod is 127.0.0.1. GET only.
  if ((resource->kind == Kind::Node || resource->kind == Kind::Pod) && parts.size() > next + 3 &&
      parts[next + 2] == "proxy" && parts[next + 1].find(':') != std::string::npos) {
    const std::string& target = parts[next + 1];
    const std::string objectName = target.substr(0, target.find(':'));
    const std::string port = target.substr(target.find(':') + 1);
    if (method != "GET") return {methodNotAllowed(method)};
    const bool node = resource->kind == Kind::Node;
    if (!get(resource->kind, node ? objectName : ns + "/" + objectName)) {
      return {notFound(node ? "nodes" : "pods", objectName)};
    }
    std::string rest;
    for (std::size_t i = next + 3; i < parts.size(); ++i) rest += "/" + parts[i];
    return {proxyGet(port, rest + (query.empty() ? "" : "?" + query))};
  }
  // The node proxy to the kubelet's summary: /api/v1/nodes/NAME/proxy/stats/summary.
  if (resource->kind == Kind::Node && parts.size() == next + 5 && parts[next + 2] == "proxy" &&
      parts[next + 3] == "stats" && parts[next + 4] == "summary") {
    if (method != "GET") return {methodNotAllowed(method)};
    if (!get(Kind::Node, parts[next + 1])) return {notFound("nodes", parts[next + 1])};
    std::lock_guard lock(mutex_);
    auto it = nodeStats.find(parts[next + 1]);
    if (it == nodeStats.end()) return {notFoundPath()};
    return {{200, it->second}};
  }
  std::string name = parts.size() > next + 1 ? parts[next + 1] : "";
  std::string subresource = parts.size() > next + 2 ? parts[next + 2] : "";
  Kind kind = resource->kind;
  std::string key = resource->namespaced ? ns + "/" + name : name;

  auto readBody = [&](Json& out) -> std::optional<Reply> {
    try {
      out = Json::parse(body);
    } catch (const Json::exception& e) {
      return badRequest(std::string("the request body is not valid JSON: ") + e.what());
    }
    if (!out.is_object()) return badRequest("the request body is not a JSON object");
    return std::nullopt;
  };
  auto writeParamsOk = [&](std::optional<std::int64_t>* grace) -> std::optional<Reply> {
    static const std::set<std::string> kAllowed = {"gracePeriodSeconds", "propagationPolicy",
                                                   "orphanDependents",   "fieldManager",
                                                   "fieldValidation",    "pretty"};
    for (const auto& [param, value] : parseQuery(query)) {
      if (kAllowed.count(param) == 0) return badRequest("unknown query parameter: " + param);
      if (param == "gracePeriodSeconds") {
        auto parsed = parseSigned(value);
        if (!parsed || grace == nullptr)
          return badRequest("invalid gracePeriodSeconds: \"" + value + "\"");
        *grace = parsed;
      }
    }
    return std::nullopt;
  };

  if (name.empty()) {
    if (method == "GET") return listOrWatch(kind, ns, query);
    if (method == "POST" && kind == Kind::Event && !ns.empty()) {
      if (auto bad = writeParamsOk(nullptr)) return {*bad};
      if (mediaType(contentType) != "application/json") return {unsupportedMediaType(contentType)};
      return {createEvent(ns, body)};
    }
    return {methodNotAllowed(method)};
  }
  if (resource->namespaced && ns.empty()) return {notFoundPath()};
  if (subresource.empty()) {
    if (method == "GET") {
      if (!query.empty()) {
        for (const auto& [param, value] : parseQuery(query)) {
          if (param != "resourceVersion" && param != "pretty")
            return {badRequest("unknown query parameter: " + param)};
        }
      }
      auto object = get(kind, key);
      if (!object) return {notFound(resource->plural, name)};
      return {{200, *object}};
    }
    if (method == "DELETE" && kind == Kind::Pod) {
      std::optional<std::int64_t> grace;
      if (auto bad = writeParamsOk(&grace)) return {*bad};
      Json options = Json::object();
      if (!body.empty()) {
        if (auto bad = readBody(options)) return {*bad};
      }
      return {deletePod(ns, name, options, grace)};
    }
    return {methodNotAllowed(method)};
  }
  if (subresource == "status" && (kind == Kind::Pod || kind == Kind::Node)) {
    if (method == "GET") {
      auto object = get(kind, key);
      if (!object) return {notFound(resource->plural, name)};
      return {{200, *object}};
    }
    if (method != "PATCH") return {methodNotAllowed(method)};
    if (auto bad = writeParamsOk(nullptr)) return {*bad};
    return {patchStatus(kind, key, name, contentType, body)};
  }
  if (subresource == "eviction" && kind == Kind::Pod) {
    if (method != "POST") return {methodNotAllowed(method)};
    if (auto bad = writeParamsOk(nullptr)) return {*bad};
    if (mediaType(contentType) != "application/json") return {unsupportedMediaType(contentType)};
    return {evict(ns, name, body)};
  }
  return {notFoundPath()};
}

Outcome FakeApiServer::Impl::listOrWatch(Kind kind, const std::string& ns,
                                         const std::string& query) {
  static const std::set<std::string> kAllowed = {
      "watch", "resourceVersion", "resourceVersionMatch", "allowWatchBookmarks", "timeoutSeconds",
      "limit", "continue",        "fieldSelector",        "labelSelector"};
  std::map<std::string, std::string> params;
  for (auto& [param, value] : parseQuery(query)) {
    if (kAllowed.count(param) == 0) return {badRequest("unknown query parameter: " + param)};
    params[param] = value;
  }
  auto param = [&](const std::string& key) {
    auto it = params.find(key);
    return it == params.end() ? std::string() : it->second;
  };
  if (!param("labelSelector").empty()) {
    return {badRequest("labelSelector is not supported by the fake API server")};
  }
  auto selector = parseFieldSelector(kind, param("fieldSelector"));
  if (auto* error = std::get_if<std::string>(&selector)) return {badRequest(*error)};
  auto terms = std::get<std::vector<FieldTerm>>(std::move(selector));
  const ResourceInfo& resource = info(kind);
  auto visible = [&](const Json& object) {
    if (!ns.empty() && stringAt(object, {"metadata", "namespace"}) != ns) return false;
    return selectorMatches(object, terms);
  };

  std::string watch = param("watch");
  if (watch == "1" || watch == "true") {
    std::chrono::seconds timeout{0};
    if (!param("timeoutSeconds").empty()) {
      auto parsed = parseUnsigned(param("timeoutSeconds"));
      if (!parsed) return {badRequest("invalid timeoutSeconds: " + param("timeoutSeconds"))};
      timeout = std::chrono::seconds(*parsed);
    }
    std::string bookmarks = param("allowWatchBookmarks");
    auto watcher = std::make_shared<Watcher>(*context_);
    watcher->kind = kind;
    watcher->ns = ns;
    watcher->selector = terms;
    std::string rvText = param("resourceVersion");
    std::lock_guard lock(mutex_);
    if (rvText.empty() || rvText == "0") {
      for (const auto& [key, object] : objects_[static_cast<std::size_t>(kind)]) {
        if (visible(object))
          watcher->queue.push_back({WatchItem::Op::Line, eventLine("ADDED", object)});
      }
    } else {
      auto rv = parseUnsigned(rvText);
      if (!rv) return {badRequest("invalid resource version: " + rvText)};
      std::string message =
          "too old resource version: " + rvText + " (" + std::to_string(compactedRv_) + ")";
      if (*rv < compactedRv_ || faults_.goneLoop) {
        if (options_.goneAsHttpStatus) return {goneReply(message)};
        watcher->queue.push_back(
            {WatchItem::Op::Line,
             Json{{"type", "ERROR"}, {"object", goneStatus(message)}}.dump() + "\n"});
        watcher->queue.push_back({WatchItem::Op::End, {}});
        return Outcome(watcher, timeout, false);
      }
      for (const auto& change : history_) {
        if (change.rv <= *rv) continue;
        if (auto line = lineFor(*watcher, change))
          watcher->queue.push_back({WatchItem::Op::Line, *line});
      }
    }
    watchers_.push_back(watcher);
    return Outcome(watcher, timeout, bookmarks == "true" || bookmarks == "1");
  }
  if (!watch.empty() && watch != "0" && watch != "false") {
    return {badRequest("invalid watch parameter: " + watch)};
  }

  std::uint64_t limit = 0;
  if (!param("limit").empty()) {
    auto parsed = parseUnsigned(param("limit"));
    if (!parsed) return {badRequest("invalid limit: " + param("limit"))};
    limit = *parsed;
  }
  std::lock_guard lock(mutex_);
  std::uint64_t listRv = rv_;
  std::string after;
  bool continuing = false;
  if (!param("continue").empty()) {
    // Token: hex of "fake1\n<rv>\n<last key>".
    auto decoded = hexDecode(param("continue"));
    std::optional<std::uint64_t> tokenRv;
    std::size_t first = decoded ? decoded->find('\n') : std::string::npos;
    std::size_t second = first == std::string::npos ? first : decoded->find('\n', first + 1);
    if (second != std::string::npos && decoded->substr(0, first) == "fake1") {
      tokenRv = parseUnsigned(decoded->substr(first + 1, second - first - 1));
    }
    if (!tokenRv) return {badRequest("continue key is not valid: " + param("continue"))};
    if (*tokenRv < compactedRv_) {
      return {goneReply(
          "The provided continue parameter is too old to display a consistent list result. "
          "You can start a new list without the continue parameter.")};
    }
    listRv = *tokenRv;
    after = decoded->substr(second + 1);
    continuing = true;
  }
  const auto& store = objects_[static_cast<std::size_t>(kind)];
  Json items = Json::array();
  std::string continueToken;
  auto it = continuing ? store.upper_bound(after) : store.begin();
  for (; it != store.end(); ++it) {
    if (!visible(it->second)) continue;
    if (limit > 0 && items.size() == limit) {
      continueToken =
          hexEncode("fake1\n" + std::to_string(listRv) + "\n" + objectKey(kind, items.back()));
      break;
    }
    Json item = it->second;
    item.erase("kind");  // list items carry no kind/apiVersion, as from the real server
    item.erase("apiVersion");
    items.push_back(std::move(item));
  }
  Json metadata = {{"resourceVersion", std::to_string(listRv)}};
  if (!continueToken.empty()) metadata["continue"] = continueToken;
  return {{200,
           {{"kind", resource.listKind},
            {"apiVersion", resource.groupVersion},
            {"metadata", metadata},
            {"items", items}}}};
}

Reply FakeApiServer::Impl::deletePod(const std::string& ns, const std::string& name,
                                     const Json& options, std::optional<std::int64_t> queryGrace) {
  std::lock_guard lock(mutex_);
  auto& store = objects_[static_cast<std::size_t>(Kind::Pod)];
  std::string key = ns + "/" + name;
  auto it = store.find(key);
  if (it == store.end()) return notFound("pods", name);
  Json pod = it->second;
  if (options.contains("preconditions") && options["preconditions"].is_object()) {
    const Json& preconditions = options["preconditions"];
    std::string uid = stringAt(pod, {"metadata", "uid"});
    std::string rv = stringAt(pod, {"metadata", "resourceVersion"});
    if (preconditions.contains("uid") && preconditions["uid"].is_string() &&
        preconditions["uid"] != uid) {
      return failure(409, "Conflict",
                     "Operation cannot be fulfilled on pods \"" + name +
                         "\": Precondition failed: UID in precondition: " +
                         preconditions["uid"].get<std::string>() + ", UID in object meta: " + uid,
                     {{"name", name}, {"kind", "pods"}});
    }
    if (preconditions.contains("resourceVersion") && preconditions["resourceVersion"].is_string() &&
        preconditions["resourceVersion"] != rv) {
      return failure(409, "Conflict",
                     "Operation cannot be fulfilled on pods \"" + name +
                         "\": Precondition failed: ResourceVersion in precondition: " +
                         preconditions["resourceVersion"].get<std::string>() +
                         ", ResourceVersion in object meta: " + rv,
                     {{"name", name}, {"kind", "pods"}});
    }
  }
  // podStrategy.CheckGracefulDelete: explicit > spec.terminationGracePeriodSeconds (defaulted
  // to 30 by the API server) ; unscheduled and terminal pods go at once; negative → 1.
  std::int64_t grace = 30;
  if (pod.contains("spec") && pod["spec"].contains("terminationGracePeriodSeconds") &&
      pod["spec"]["terminationGracePeriodSeconds"].is_number_integer()) {
    grace = pod["spec"]["terminationGracePeriodSeconds"].get<std::int64_t>();
  }
  if (options.contains("gracePeriodSeconds") && options["gracePeriodSeconds"].is_number_integer())
    grace = options["gracePeriodSeconds"].get<std::int64_t>();
  if (queryGrace) grace = *queryGrace;
  std::string phase = stringAt(pod, {"status", "phase"});
  if (stringAt(pod, {"spec", "nodeName"}).empty() || phase == "Failed" || phase == "Succeeded")
    grace = 0;
  if (grace < 0) grace = 1;
  if (grace == 0) return {200, Json::parse(deletePodLocked(key))};
  auto& metadata = pod["metadata"];
  if (metadata.contains("deletionTimestamp") && metadata.contains("deletionGracePeriodSeconds") &&
      metadata["deletionGracePeriodSeconds"].is_number_integer() &&
      metadata["deletionGracePeriodSeconds"].get<std::int64_t>() <= grace) {
    return {200, pod};  // already terminating at least this fast
  }
  metadata["deletionTimestamp"] =
      rfc3339(std::chrono::system_clock::now() + std::chrono::seconds(grace));
  metadata["deletionGracePeriodSeconds"] = grace;
  Json previous = it->second;
  recordChangeLocked(Kind::Pod, "MODIFIED", pod, previous);
  return {200, store.at(key)};
}

Reply FakeApiServer::Impl::evict(const std::string& ns, const std::string& name,
                                 const std::string& body) {
  Json eviction;
  try {
    eviction = Json::parse(body);
  } catch (const Json::exception& e) {
    return badRequest(std::string("the request body is not valid JSON: ") + e.what());
  }
  if (!eviction.is_object()) return badRequest("the request body is not a JSON object");
  std::string apiVersion = stringAt(eviction, {"apiVersion"});
  if (stringAt(eviction, {"kind"}) != "Eviction" ||
      (apiVersion != "policy/v1" && apiVersion != "policy/v1beta1")) {
    return badRequest("expected an Eviction of policy/v1 or policy/v1beta1, got kind \"" +
                      stringAt(eviction, {"kind"}) + "\" apiVersion \"" + apiVersion + "\"");
  }
  if (stringAt(eviction, {"metadata", "name"}) != name) {
    return badRequest("name in URL does not match name in Eviction object");
  }
  std::string bodyNs = stringAt(eviction, {"metadata", "namespace"});
  if (!bodyNs.empty() && bodyNs != ns) {
    return badRequest(
        "the namespace of the provided object does not match the namespace sent on the request");
  }
  Json deleteOptions = eviction.contains("deleteOptions") && eviction["deleteOptions"].is_object()
                           ? eviction["deleteOptions"]
                           : Json::object();
  Reply success{201,
                {{"kind", "Status"},
                 {"apiVersion", "v1"},
                 {"metadata", Json::object()},
                 {"status", "Success"},
                 {"code", 201}}};
  std::vector<std::string> pdbKeys;
  {
    std::lock_guard lock(mutex_);
    auto& pods = objects_[static_cast<std::size_t>(Kind::Pod)];
    auto podIt = pods.find(ns + "/" + name);
    if (podIt == pods.end()) return notFound("pods", name);
    const Json& pod = podIt->second;
    std::string phase = stringAt(pod, {"status", "phase"});
    bool canIgnorePdb = phase == "Succeeded" || phase == "Failed" || phase == "Pending" ||
                        (pod.contains("metadata") && pod["metadata"].contains("deletionTimestamp"));
    if (!canIgnorePdb) {
      Json labels = pod["metadata"].value("labels", Json::object());
      for (auto& [key, pdb] : objects_[static_cast<std::size_t>(Kind::Pdb)]) {
        if (stringAt(pdb, {"metadata", "namespace"}) != ns) continue;
        Json selector = pdb.contains("spec") ? pdb["spec"].value("selector", Json()) : Json();
        if (labelSelectorMatches(selector, labels)) pdbKeys.push_back(key);
      }
    }
    if (pdbKeys.size() > 1) {
      std::string message =
          "This pod has more than one PodDisruptionBudget, which the eviction subresource does "
          "not support.";
      return failure(500, "InternalError", "Internal error occurred: " + message,
                     {{"causes", Json::array({Json{{"message", message}}})}});
    }
    if (pdbKeys.size() == 1) {
      Json pdb = objects_[static_cast<std::size_t>(Kind::Pdb)].at(pdbKeys[0]);
      std::string pdbName = stringAt(pdb, {"metadata", "name"});
      Json status = pdb.value("status", Json::object());
      if (pdb["metadata"].contains("generation") && status.contains("observedGeneration") &&
          status["observedGeneration"].is_number() && pdb["metadata"]["generation"].is_number() &&
          status["observedGeneration"].get<std::int64_t>() <
              pdb["metadata"]["generation"].get<std::int64_t>()) {
        Reply reply = failure(
            429, "TooManyRequests",
            "Cannot evict pod as it would violate the pod's disruption budget.",
            {{"causes", Json::array({Json{{"reason", "DisruptionBudget"},
                                          {"message", "The disruption budget " + pdbName +
                                                          " is still being processed by the "
                                                          "server."}}})},
             {"retryAfterSeconds", 10}});
        return reply;
      }
      std::int64_t allowed = status.value("disruptionsAllowed", std::int64_t{0});
      if (allowed < 1) {
        return failure(
            429, "TooManyRequests",
            "Cannot evict pod as it would violate the pod's disruption budget.",
            {{"causes",
              Json::array({Json{{"reason", "DisruptionBudget"},
                                {"message", "The disruption budget " + pdbName + " needs " +
                                                std::to_string(status.value("desiredHealthy", 0)) +
                                                " healthy pods and has " +
                                                std::to_string(status.value("currentHealthy", 0)) +
                                                " currently"}}})}});
      }
      // Check the preconditions before spending the budget.
      if (deleteOptions.contains("preconditions") && deleteOptions["preconditions"].is_object() &&
          deleteOptions["preconditions"].contains("uid") &&
          deleteOptions["preconditions"]["uid"] != pod["metadata"].value("uid", Json())) {
        // deletePod below produces the Conflict answer.
      } else {
        Json previous = pdb;
        pdb["status"]["disruptionsAllowed"] = allowed - 1;
        pdb["status"]["disruptedPods"][name] = rfc3339(std::chrono::system_clock::now());
        recordChangeLocked(Kind::Pdb, "MODIFIED", pdb, previous);
      }
    }
  }
  Reply deleted = deletePod(ns, name, deleteOptions, std::nullopt);
  if (deleted.status != 200) return deleted;
  return success;
}

Reply FakeApiServer::Impl::patchStatus(Kind kind, const std::string& key, const std::string& name,
                                       const std::string& contentType, const std::string& body) {
  std::string type = mediaType(contentType);
  bool strategic = type == "application/strategic-merge-patch+json";
  if (!strategic && type != "application/merge-patch+json") {
    return failure(415, "UnsupportedMediaType",
                   "the body of the request was in an unknown format - accepted media types "
                   "include: application/strategic-merge-patch+json, "
                   "application/merge-patch+json (got \"" +
                       contentType + "\")");
  }
  Json patch;
  try {
    patch = Json::parse(body);
  } catch (const Json::exception& e) {
    return badRequest(std::string("the request body is not valid JSON: ") + e.what());
  }
  if (!patch.is_object()) return badRequest("the patch is not a JSON object");
  std::lock_guard lock(mutex_);
  auto& store = objects_[static_cast<std::size_t>(kind)];
  auto it = store.find(key);
  if (it == store.end()) return notFound(info(kind).plural, name);
  Json object = it->second;
  if (patch.contains("status")) {
    if (patch["status"].is_null()) {
      object.erase("status");
    } else if (!patch["status"].is_object()) {
      return badRequest("status must be an object");
    } else if (strategic) {
      strategicMerge(object["status"], patch["status"]);
    } else {
      if (!object.contains("status")) object["status"] = Json::object();
      object["status"].merge_patch(patch["status"]);
    }
  }
  if (object == it->second) return {200, object};  // a no-op patch writes nothing
  Json previous = it->second;
  recordChangeLocked(kind, "MODIFIED", object, previous);
  return {200, store.at(key)};
}

Reply FakeApiServer::Impl::createEvent(const std::string& ns, const std::string& body) {
  Json event;
  try {
    event = Json::parse(body);
  } catch (const Json::exception& e) {
    return badRequest(std::string("the request body is not valid JSON: ") + e.what());
  }
  if (!event.is_object()) return badRequest("the request body is not a JSON object");
  if (stringAt(event, {"kind"}) != "Event" || stringAt(event, {"apiVersion"}) != "v1") {
    return badRequest("expected a v1 Event, got kind \"" + stringAt(event, {"kind"}) +
                      "\" apiVersion \"" + stringAt(event, {"apiVersion"}) + "\"");
  }
  if (!event.contains("metadata") || !event["metadata"].is_object())
    event["metadata"] = Json::object();
  Json& metadata = event["metadata"];
  std::string eventNs = stringAt(event, {"metadata", "namespace"});
  if (!eventNs.empty() && eventNs != ns) {
    return badRequest(
        "the namespace of the provided object does not match the namespace sent on the request");
  }
  metadata["namespace"] = ns;
  std::string name = stringAt(event, {"metadata", "name"});
  if (name.empty() && !stringAt(event, {"metadata", "generateName"}).empty())
    name = stringAt(event, {"metadata", "generateName"}) + randomHex(3).substr(0, 5);
  Json causes = Json::array();
  auto invalid = [&](const std::string& field, const std::string& reason,
                     const std::string& message) {
    causes.push_back({{"reason", reason}, {"message", message}, {"field", field}});
  };
  if (name.empty())
    invalid("metadata.name", "FieldValueRequired",
            "Required value: name or generateName is required");
  metadata["name"] = name;
  if (!event.contains("involvedObject") || !event["involvedObject"].is_object()) {
    invalid("involvedObject", "FieldValueRequired", "Required value");
  } else {
    std::string involvedNs = stringAt(event, {"involvedObject", "namespace"});
    bool ok = involvedNs.empty() ? (ns == "default") : involvedNs == ns;
    if (!ok)
      invalid("involvedObject.namespace", "FieldValueInvalid",
              "Invalid value: \"" + involvedNs + "\": does not match event.namespace");
  }
  if (stringAt(event, {"reason"}).empty())
    invalid("reason", "FieldValueRequired", "Required value");
  if (stringAt(event, {"message"}).empty())
    invalid("message", "FieldValueRequired", "Required value");
  std::string type = stringAt(event, {"type"});
  if (type != "Normal" && type != "Warning")
    invalid("type", "FieldValueNotSupported",
            "Unsupported value: \"" + type + "\": supported values: \"Normal\", \"Warning\"");
  if (!causes.empty()) {
    std::string message = "Event \"" + name + "\" is invalid: ";
    if (causes.size() > 1) message += "[";
    for (std::size_t i = 0; i < causes.size(); ++i) {
      if (i > 0) message += ", ";
      message +=
          causes[i]["field"].get<std::string>() + ": " + causes[i]["message"].get<std::string>();
    }
    if (causes.size() > 1) message += "]";
    return failure(422, "Invalid", message,
                   {{"name", name}, {"kind", "Event"}, {"causes", causes}});
  }
  std::lock_guard lock(mutex_);
  auto& store = objects_[static_cast<std::size_t>(Kind::Event)];
  std::string key = ns + "/" + name;
  if (store.count(key) > 0) {
    return failure(409, "AlreadyExists", "events \"" + name + "\" already exists",
                   {{"name", name}, {"kind", "events"}});
  }
  metadata["uid"] = newUid();
  metadata["creationTimestamp"] = rfc3339(std::chrono::system_clock::now());
  recordChangeLocked(Kind::Event, "ADDED", event, Json());
  return {201, store.at(key)};
}

// ---------------------------------------------------------------- public interface

FakeApiServer::FakeApiServer(FakeApiServerOptions options)
    : impl_(std::make_unique<Impl>(std::move(options))) {}

FakeApiServer::~FakeApiServer() = default;

std::uint16_t FakeApiServer::port() const {
  return impl_->port_;
}

std::string FakeApiServer::url() const {
  return std::string(impl_->options_.tls ? "https" : "http") +
         "://127.0.0.1:" + std::to_string(impl_->port_);
}

void FakeApiServer::upsertPod(nlohmann::json pod) {
  if (pod.is_object() && pod.contains("metadata") && pod["metadata"].is_object() &&
      !pod["metadata"].contains("uid")) {
    pod["metadata"]["uid"] = newUid();
  }
  impl_->upsert(Kind::Pod, std::move(pod));
}

void FakeApiServer::deletePod(const std::string& ns, const std::string& name) {
  impl_->remove(Kind::Pod, ns + "/" + name);
}

void FakeApiServer::setNodeStats(const std::string& node, nlohmann::json summary) {
  std::lock_guard lock(impl_->mutex_);
  impl_->nodeStats[node] = std::move(summary);
}

void FakeApiServer::upsertNode(nlohmann::json node) {
  impl_->upsert(Kind::Node, std::move(node));
}

void FakeApiServer::upsertPriorityClass(nlohmann::json priorityClass) {
  impl_->upsert(Kind::PriorityClass, std::move(priorityClass));
}

void FakeApiServer::upsertPodDisruptionBudget(nlohmann::json pdb) {
  impl_->upsert(Kind::Pdb, std::move(pdb));
}

std::optional<nlohmann::json> FakeApiServer::pod(const std::string& ns,
                                                 const std::string& name) const {
  return impl_->get(Kind::Pod, ns + "/" + name);
}

std::optional<nlohmann::json> FakeApiServer::node(const std::string& name) const {
  return impl_->get(Kind::Node, name);
}

std::optional<nlohmann::json> FakeApiServer::podDisruptionBudget(const std::string& ns,
                                                                 const std::string& name) const {
  return impl_->get(Kind::Pdb, ns + "/" + name);
}

std::vector<nlohmann::json> FakeApiServer::events() const {
  std::vector<nlohmann::json> out;
  std::lock_guard lock(impl_->mutex_);
  for (const auto& [key, event] : impl_->objects_[static_cast<std::size_t>(Kind::Event)])
    out.push_back(event);
  std::sort(out.begin(), out.end(), [](const Json& a, const Json& b) {
    return parseUnsigned(stringAt(a, {"metadata", "resourceVersion"})).value_or(0) <
           parseUnsigned(stringAt(b, {"metadata", "resourceVersion"})).value_or(0);
  });
  return out;
}

std::string FakeApiServer::resourceVersion() const {
  std::lock_guard lock(impl_->mutex_);
  return std::to_string(impl_->rv_);
}

void FakeApiServer::dropWatches() {
  std::lock_guard lock(impl_->mutex_);
  for (auto& watcher : impl_->watchers_) impl_->pushLocked(watcher, {WatchItem::Op::Drop, {}});
  impl_->watchers_.clear();
}

void FakeApiServer::compact() {
  std::lock_guard lock(impl_->mutex_);
  impl_->compactedRv_ = impl_->rv_;
  impl_->history_.clear();
}

void FakeApiServer::expireWatches() {
  std::lock_guard lock(impl_->mutex_);
  for (auto& watcher : impl_->watchers_) {
    std::string message = "too old resource version: " + std::to_string(impl_->rv_) + " (" +
                          std::to_string(impl_->rv_ + 1) + ")";
    impl_->pushLocked(watcher,
                      {WatchItem::Op::Line,
                       Json{{"type", "ERROR"}, {"object", goneStatus(message)}}.dump() + "\n"});
    impl_->pushLocked(watcher, {WatchItem::Op::End, {}});
  }
  impl_->watchers_.clear();
}

void FakeApiServer::setDown(bool down) {
  Impl* impl = impl_.get();
  impl->runOnLoop([impl, down] {
    if (down == impl->down_) return;
    impl->down_ = down;
    if (down) {
      impl->closeEverything();
    } else if (impl->openAcceptor()) {
      net::co_spawn(*impl->context_, impl->acceptLoop(impl->acceptGeneration_), net::detached);
    } else {
      // Loud: a test waiting for the server to come back would otherwise time out puzzled
      // (a forked child holding the old listening socket keeps the port bound).
      std::fprintf(stderr, "fake apiserver: cannot listen on 127.0.0.1:%u again\n",
                   unsigned(impl->port_));
    }
  });
}

void FakeApiServer::setFaults(FaultMode faults) {
  std::lock_guard lock(impl_->mutex_);
  impl_->faults_ = faults;
}

void FakeApiServer::cutWatchesMidObject() {
  std::lock_guard lock(impl_->mutex_);
  for (auto& watcher : impl_->watchers_) {
    Json object = {
        {"kind", info(watcher->kind).kindName},
        {"apiVersion", info(watcher->kind).groupVersion},
        {"metadata", {{"name", "cut"}, {"resourceVersion", std::to_string(impl_->rv_)}}}};
    std::string line = eventLine("MODIFIED", object);
    impl_->pushLocked(watcher, {WatchItem::Op::Cut, line.substr(0, line.size() / 2)});
  }
  impl_->watchers_.clear();
}

void FakeApiServer::setToken(const std::string& token) {
  std::lock_guard lock(impl_->mutex_);
  impl_->token_ = token;
}

void FakeApiServer::injectRawWatchLine(const std::string& resource, const std::string& line) {
  std::lock_guard lock(impl_->mutex_);
  for (auto& watcher : impl_->watchers_) {
    if (resource != info(watcher->kind).plural) continue;
    impl_->pushLocked(watcher, {WatchItem::Op::Line, line.ends_with('\n') ? line : line + "\n"});
  }
}

std::vector<RecordedRequest> FakeApiServer::requests() const {
  std::lock_guard lock(impl_->mutex_);
  return impl_->requests_;
}

bool FakeApiServer::waitFor(
    const std::function<bool(const std::vector<RecordedRequest>&)>& predicate,
    std::chrono::milliseconds timeout) const {
  auto deadline = steady_clock::now() + timeout;
  std::unique_lock lock(impl_->mutex_);
  for (;;) {
    std::vector<RecordedRequest> copy = impl_->requests_;
    lock.unlock();
    if (predicate(copy)) return true;
    lock.lock();
    if (steady_clock::now() >= deadline) return false;
    // Re-check at least every 50 ms: the predicate may depend on more than the requests.
    impl_->requestsChanged_.wait_until(
        lock, std::min(deadline, steady_clock::now() + std::chrono::milliseconds(50)));
  }
}

std::size_t FakeApiServer::openWatches() const {
  std::lock_guard lock(impl_->mutex_);
  return impl_->watchers_.size();
}

// ---------------------------------------------------------------- certificates

namespace {

struct BioDeleter {
  void operator()(BIO* bio) const { BIO_free(bio); }
};
struct KeyDeleter {
  void operator()(EVP_PKEY* key) const { EVP_PKEY_free(key); }
};
struct CertDeleter {
  void operator()(X509* cert) const { X509_free(cert); }
};

std::string bioText(BIO* bio) {
  char* data = nullptr;
  long size = BIO_get_mem_data(bio, &data);
  return std::string(data, static_cast<std::size_t>(size));
}

void addExtension(X509* cert, int nid, const std::string& value) {
  X509V3_CTX ctx;
  X509V3_set_ctx_nodb(&ctx);
  X509V3_set_ctx(&ctx, cert, cert, nullptr, nullptr, 0);
  X509_EXTENSION* extension = X509V3_EXT_conf_nid(nullptr, &ctx, nid, value.c_str());
  if (extension == nullptr) throw std::runtime_error("makeTestCertificate: bad extension " + value);
  X509_add_ext(cert, extension, -1);
  X509_EXTENSION_free(extension);
}

}  // namespace

TestCertificate makeTestCertificate(const std::string& commonName) {
  std::unique_ptr<EVP_PKEY, KeyDeleter> key(EVP_PKEY_Q_keygen(nullptr, nullptr, "EC", "P-256"));
  if (!key) throw std::runtime_error("makeTestCertificate: key generation failed");
  std::unique_ptr<X509, CertDeleter> cert(X509_new());
  X509_set_version(cert.get(), 2);
  std::array<unsigned char, 8> serial{};
  RAND_bytes(serial.data(), static_cast<int>(serial.size()));
  serial[0] &= 0x7f;
  std::uint64_t serialValue = 0;
  for (unsigned char byte : serial) serialValue = (serialValue << 8) | byte;
  ASN1_INTEGER_set_uint64(X509_get_serialNumber(cert.get()), serialValue);
  X509_gmtime_adj(X509_getm_notBefore(cert.get()), -60);
  X509_gmtime_adj(X509_getm_notAfter(cert.get()), 24 * 3600);
  X509_set_pubkey(cert.get(), key.get());
  X509_NAME* subject = X509_get_subject_name(cert.get());
  X509_NAME_add_entry_by_txt(subject, "CN", MBSTRING_UTF8,
                             reinterpret_cast<const unsigned char*>(commonName.c_str()), -1, -1, 0);
  X509_set_issuer_name(cert.get(), subject);
  std::string altNames = "IP:127.0.0.1,DNS:localhost";
  if (commonName != "127.0.0.1" && commonName != "localhost" && !commonName.empty()) {
    std::array<unsigned char, 16> address{};
    bool isIp = inet_pton(AF_INET, commonName.c_str(), address.data()) == 1 ||
                inet_pton(AF_INET6, commonName.c_str(), address.data()) == 1;
    altNames += (isIp ? ",IP:" : ",DNS:") + commonName;
  }
  addExtension(cert.get(), NID_basic_constraints, "critical,CA:TRUE");
  addExtension(cert.get(), NID_key_usage, "critical,digitalSignature,keyCertSign");
  addExtension(cert.get(), NID_ext_key_usage, "serverAuth,clientAuth");
  addExtension(cert.get(), NID_subject_key_identifier, "hash");
  addExtension(cert.get(), NID_subject_alt_name, altNames);
  if (X509_sign(cert.get(), key.get(), EVP_sha256()) == 0)
    throw std::runtime_error("makeTestCertificate: signing failed");

  std::unique_ptr<BIO, BioDeleter> certBio(BIO_new(BIO_s_mem()));
  std::unique_ptr<BIO, BioDeleter> keyBio(BIO_new(BIO_s_mem()));
  if (PEM_write_bio_X509(certBio.get(), cert.get()) != 1 ||
      PEM_write_bio_PrivateKey(keyBio.get(), key.get(), nullptr, nullptr, 0, nullptr, nullptr) !=
          1) {
    throw std::runtime_error("makeTestCertificate: PEM encoding failed");
  }
  return {bioText(certBio.get()), bioText(keyBio.get())};
}

}  // namespace nodewarden::testing
