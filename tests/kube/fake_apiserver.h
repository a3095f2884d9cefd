// A strict stand-in for the Kubernetes API server, for tests: serves the real wire format on
// 127.0.0.1 (plain HTTP or TLS) from its own thread, so tests of in-process clients and of the
// real binary can both use it.
//
// What it serves (everything else is answered 404 with a Status object, and recorded):
//   GET    /api/v1/pods[?fieldSelector=spec.nodeName%3DN][&limit=K&continue=T]   PodList
//   GET    /api/v1/pods?watch=1&resourceVersion=RV[&allowWatchBookmarks=true][&timeoutSeconds=S]
//   GET    /api/v1/nodes, /api/v1/nodes/NAME, the same watches
//   GET    /apis/scheduling.k8s.io/v1/priorityclasses            (+ watch)
//   GET    /apis/policy/v1/poddisruptionbudgets                   (+ watch)
//   GET    /api/v1/namespaces/NS/pods/NAME
//   DELETE /api/v1/namespaces/NS/pods/NAME (?gracePeriodSeconds=, DeleteOptions body with
//          preconditions.uid: 409 Conflict on a mismatch; 404 when absent)
//   PATCH  /api/v1/namespaces/NS/pods/NAME/status        application/strategic-merge-patch+json
//          or application/merge-patch+json; merges status (conditions by type)
//   POST   /api/v1/namespaces/NS/pods/NAME/eviction      policy/v1 Eviction; 429 TooManyRequests
//          with a DisruptionBudget cause when a matching PDB has disruptionsAllowed < 1
//          (then decremented on success); 400 on a name mismatch
//   POST   /api/v1/namespaces/NS/events                  core/v1 Event (namespace checked)
//   PATCH  /api/v1/nodes/NAME/status                     strategic merge of status.conditions
//   GET    /api/v1/nodes/NAME/proxy/stats/summary        the kubelet summary (setNodeStats)
//   GET    /api/v1/nodes/NAME:PORT/proxy/PATH            forwarded to 127.0.0.1:PORT/PATH (the
//   GET    /api/v1/namespaces/NS/pods/NAME:PORT/proxy/PATH  node's or pod's address here), a
//          JSON answer passed back with its status
// Strictness: a wrong or missing bearer token → 401 Status; a body that is not JSON, a
// Content-Type the endpoint does not take, an unknown query parameter, a watch without
// watch=1 semantics → 400/415 Status. Watch streams are chunked "application/json" with one
// event object per line; BOOKMARKs are sent when asked for (allowWatchBookmarks=true) every
// `bookmarkEvery`; resourceVersions are one counter across kinds, as etcd's.
// As the real server: LIST items carry no kind/apiVersion (watch objects do); a DELETE without
// a grace period uses spec.terminationGracePeriodSeconds, else 30 (API defaulting), and 0 for
// unscheduled or terminal pods; a grace > 0 only marks the pod terminating (deletionTimestamp,
// MODIFIED) until deletePod(). An object that stops matching a watch's fieldSelector is sent
// as DELETED. Watch responses carry "Connection: close": the connection ends with the stream.
// labelSelector is answered 400 (unsupported). upsert* throw std::invalid_argument on an
// object without metadata.name (and metadata.namespace when namespaced).
//
// Threading: the public functions are safe from any thread; the server runs on its own.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace nodewarden::testing {

struct FakeApiServerOptions {
  bool tls = false;
  std::string certPem, keyPem;       // the serving certificate when tls (see makeTestCertificate)
  std::string token = "test-token";  // "" accepts requests without a token
  // With tls: client certificates signed by this CA (PEM) authenticate a request in place of
  // the token (the API server's --client-ca-file).
  std::string clientCaPem;
  std::chrono::milliseconds bookmarkEvery{1000};
  // The oldest resourceVersion a watch may start from; older ones get 410 Gone (HTTP 410
  // before the stream when `goneAsHttpStatus`, else an in-stream ERROR event with code 410).
  bool goneAsHttpStatus = false;
};

// Faults that last (setFaults): each applies to requests that arrive from then on.
struct FaultMode {
  // Every answer, and a watch's response header, waits this long first (a slow server).
  std::chrono::milliseconds delay{0};
  // Non-zero: every request is answered with this status and a Status body (500: failing).
  unsigned failWith = 0;
  // Every new connection is reset (RST: SO_LINGER 0) before a byte is read.
  bool resetConnections = false;
  // Every watch ends at once with an in-stream ERROR 410 Gone (a 410 loop: list, watch, 410).
  bool goneLoop = false;
};

struct RecordedRequest {
  std::string method;
  std::string path;   // without the query
  std::string query;  // raw, without '?'
  std::string contentType;
  std::string authorization;
  std::string body;
  unsigned status = 0;             // what the server answered
  bool clientCertificate = false;  // the connection presented a certificate clientCaPem verified
};

class FakeApiServer {
 public:
  explicit FakeApiServer(FakeApiServerOptions options = {});
  ~FakeApiServer();  // stops the thread, closes every connection
  FakeApiServer(const FakeApiServer&) = delete;
  FakeApiServer& operator=(const FakeApiServer&) = delete;

  std::uint16_t port() const;
  std::string url() const;  // "http://127.0.0.1:PORT" or "https://…"

  // Objects. Each change bumps the resourceVersion and goes to the matching open watches.
  // Pods need metadata.namespace/name/uid; the server sets metadata.resourceVersion.
  void upsertPod(nlohmann::json pod);
  void deletePod(const std::string& ns, const std::string& name);
  void upsertNode(nlohmann::json node);
  void upsertPriorityClass(nlohmann::json priorityClass);
  void upsertPodDisruptionBudget(nlohmann::json pdb);
  // The kubelet's /stats/summary for a node, served through the API server's node proxy at
  // GET /api/v1/nodes/NAME/proxy/stats/summary (404 until set, or when the node is absent).
  void setNodeStats(const std::string& node, nlohmann::json summary);
  std::optional<nlohmann::json> pod(const std::string& ns, const std::string& name) const;
  std::optional<nlohmann::json> node(const std::string& name) const;
  std::optional<nlohmann::json> podDisruptionBudget(const std::string& ns,
                                                    const std::string& name) const;
  std::vector<nlohmann::json> events() const;  // Events created through the API
  std::string resourceVersion() const;

  // Faults.
  void dropWatches();  // closes every open watch stream abruptly
  // Forgets history: watches from a resourceVersion older than the current one get 410.
  void compact();
  // Sends an in-stream ERROR 410 on every open watch, then ends them.
  void expireWatches();
  // Down: refuses every new connection (closes it at once) and drops open ones; up again
  // serves as before, with every change made meanwhile.
  void setDown(bool down);
  void setToken(const std::string& token);  // rotation: the old token now gets 401
  // Sends this raw line on every open watch stream of `resource` ("pods", …) (malformed
  // event tests).
  void injectRawWatchLine(const std::string& resource, const std::string& line);
  void setFaults(FaultMode faults);
  // Writes the first half of an event object on every open watch stream, then drops it
  // (a stream cut mid-object, as a proxy's idle timeout does).
  void cutWatchesMidObject();

  std::vector<RecordedRequest> requests() const;
  // Blocks up to `timeout` until `predicate(requests())` holds; returns whether it did.
  bool waitFor(const std::function<bool(const std::vector<RecordedRequest>&)>& predicate,
               std::chrono::milliseconds timeout) const;
  std::size_t openWatches() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// A self-signed certificate for 127.0.0.1/localhost made with OpenSSL's API (no openssl
// binary needed): PEM certificate and key, valid for a day.
struct TestCertificate {
  std::string certPem;
  std::string keyPem;
};
TestCertificate makeTestCertificate(const std::string& commonName = "127.0.0.1");

}  // namespace nodewarden::testing
