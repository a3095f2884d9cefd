// node/pod_cache.h and the API source's start before its first list: the pod list cache
// (written atomically, checked on read) and the kubelet's static pod manifests.
#include <doctest/doctest.h>

#include <unistd.h>
#include <cerrno>
#include <filesystem>
#include <fstream>

#include <boost/asio/io_context.hpp>

#include "kube/client.h"
#include "node/kube_source.h"
#include "node/pod_cache.h"
#include "tests/support/temp_dir.h"

using namespace nodewarden;
using namespace nodewarden::node;
using nodewarden::testing::TempDir;
namespace fs = std::filesystem;

namespace {

// A sink that only counts what reaches it (the pod store's place).
struct CountingSink final : kube::StoreSink {
  std::size_t replaced = 0, applied = 0;
  void replace(std::vector<policy::Json>) override { ++replaced; }
  void apply(const std::string&, const policy::Json&) override { ++applied; }
};

policy::Json podJson(const std::string& ns, const std::string& name, const std::string& uid,
                     const std::string& priorityClass = "") {
  policy::Json pod = {{"apiVersion", "v1"},
                      {"kind", "Pod"},
                      {"metadata", {{"namespace", ns}, {"name", name}, {"uid", uid}}},
                      {"spec", {{"nodeName", "worker-1"}, {"containers", {{{"name", "c"}}}}}}};
  if (!priorityClass.empty()) pod["spec"]["priorityClassName"] = priorityClass;
  return pod;
}

std::string read(const fs::path& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

void write(const fs::path& path, const std::string& text) {
  fs::create_directories(path.parent_path());
  std::ofstream(path) << text;
}

}  // namespace

TEST_CASE("the pod list cache keeps what the reflector saw and reads it back") {
  TempDir dir("nodewarden-pod-cache-test");
  const std::string file = (dir.path / "state" / "pods.json").string();
  CountingSink store;
  PodListCache cache(file, "worker-1", store);
  cache.replace({podJson("kube-system", "coredns", "u1"), podJson("default", "web", "u2")});
  cache.apply("ADDED", podJson("default", "batch", "u3"));
  cache.apply("DELETED", podJson("default", "web", "u2"));
  CHECK(store.replaced == 1);
  CHECK(store.applied == 2);
  REQUIRE(cache.dirty());
  REQUIRE(cache.flush());
  CHECK_FALSE(cache.dirty());
  CHECK_FALSE(fs::exists(file + ".tmp"));  // renamed into place

  auto loaded = PodListCache::load(file, "worker-1");
  REQUIRE(loaded);
  REQUIRE(loaded->size() == 2);
  CHECK((*loaded)[0]["metadata"]["name"] == "batch");
  CHECK((*loaded)[1]["metadata"]["name"] == "coredns");
}

TEST_CASE("a cache file cut short, edited, for another node or missing is refused") {
  TempDir dir("nodewarden-pod-cache-test");
  const std::string file = (dir.path / "pods.json").string();
  CountingSink store;
  PodListCache cache(file, "worker-1", store);
  cache.replace({podJson("default", "web", "u1")});
  REQUIRE(cache.flush());
  const std::string good = read(file);

  write(file, good.substr(0, good.size() / 2));
  auto cut = PodListCache::load(file, "worker-1");
  REQUIRE_FALSE(cut);
  CHECK(cut.error().message.find("not JSON") != std::string::npos);

  std::string edited = good;
  edited.replace(edited.find("\"web\""), 5, "\"wEb\"");
  write(file, edited);
  auto tampered = PodListCache::load(file, "worker-1");
  REQUIRE_FALSE(tampered);
  CHECK(tampered.error().message.find("sha256") != std::string::npos);

  write(file, good);
  auto other = PodListCache::load(file, "worker-2");
  REQUIRE_FALSE(other);
  CHECK(other.error().message.find("worker-1") != std::string::npos);

  auto missing = PodListCache::load((dir.path / "none.json").string(), "worker-1");
  REQUIRE_FALSE(missing);
  CHECK(missing.error().sysErrno == ENOENT);
}

TEST_CASE("a cache that cannot be written is reported and changes nothing else") {
  TempDir dir("nodewarden-pod-cache-test");
  write(dir.path / "blocker", "a file where the cache's directory should be");
  CountingSink store;
  PodListCache cache((dir.path / "blocker" / "pods.json").string(), "worker-1", store);
  cache.replace({podJson("default", "web", "u1")});
  auto written = cache.flush();
  REQUIRE_FALSE(written);
  CHECK(cache.dirty());  // tried again later
  CHECK(store.replaced == 1);
}

TEST_CASE("before its first list the API source ranks pods by the cache and the static pods") {
  TempDir dir("nodewarden-pod-cache-test");
  const std::string file = (dir.path / "pods.json").string();
  {
    CountingSink store;
    PodListCache cache(file, "worker-1", store);
    cache.replace({podJson("kube-system", "coredns", "u-dns", "system-cluster-critical"),
                   podJson("default", "web", "u-web")});
    REQUIRE(cache.flush());
  }
  write(dir.path / "manifests" / "etcd.yaml",
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: etcd\n  namespace: kube-system\n"
        "  uid: u-etcd\nspec:\n  containers:\n  - name: etcd\n    image: etcd\n");
  write(dir.path / "manifests" / ".hidden.yaml", "not: a pod\n");

  boost::asio::io_context io;
  kube::ClusterConfig unreachable;
  unreachable.host = "127.0.0.1";
  unreachable.port = "1";
  unreachable.tls = false;
  unreachable.description = "nowhere";
  kube::Client client(io, unreachable);
  KubernetesSourceOptions options;
  options.staticPodPath = (dir.path / "manifests").string();
  options.podCacheFile = file;
  KubernetesPodSource source(io, client, "worker-1", options);
  CHECK_FALSE(source.synced());
  CHECK(source.refresh());
  const PodSet& set = source.current();
  REQUIRE(set.pods.size() == 3);
  auto find = [&](const std::string& uid) -> const policy::Pod* {
    for (const policy::Pod& pod : set.pods) {
      if (pod.uid == uid) return &pod;
    }
    return nullptr;
  };
  REQUIRE(find("u-dns") != nullptr);
  CHECK(find("u-dns")->critical);
  REQUIRE(find("u-etcd") != nullptr);
  CHECK(find("u-etcd")->critical);  // a static pod
  CHECK(find("u-etcd")->name == "etcd-worker-1");
  REQUIRE(find("u-web") != nullptr);
  CHECK_FALSE(find("u-web")->critical);
  CHECK(source.takeProblems().empty());
}

TEST_CASE("a corrupt cache is ignored: the source starts empty and says so") {
  TempDir dir("nodewarden-pod-cache-test");
  const std::string file = (dir.path / "pods.json").string();
  write(file, "{\"kind\": \"NodewardenPodListCache\", \"items\": [");
  boost::asio::io_context io;
  kube::ClusterConfig unreachable;
  unreachable.host = "127.0.0.1";
  unreachable.port = "1";
  unreachable.tls = false;
  kube::Client client(io, unreachable);
  KubernetesSourceOptions options;
  options.staticPodPath = "";
  options.podCacheFile = file;
  KubernetesPodSource source(io, client, "worker-1", options);
  (void)source.refresh();
  CHECK(source.current().pods.empty());
}
