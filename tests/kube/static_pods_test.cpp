// kube/static_pods and kube/yaml: the kubelet's manifest directory read as its file source
// reads it, and the YAML reader under it (full YAML for manifests, limits for any input).
#include "kube/static_pods.h"
#include "kube/yaml.h"
#include "tests/support/temp_dir.h"

#include <doctest/doctest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

namespace fs = std::filesystem;
using nodewarden::kube::parseStaticPod;
using nodewarden::kube::readStaticPods;
using nodewarden::kube::readYamlDocuments;
using nodewarden::kube::YamlOptions;
using nodewarden::policy::Json;

using nodewarden::testing::TempDir;

namespace {

// What kubeadm writes for etcd, trimmed.
const char* const kEtcdYaml = R"(apiVersion: v1
kind: Pod
metadata:
  annotations:
    kubeadm.kubernetes.io/etcd.advertise-client-urls: https://10.0.0.5:2379
  labels:
    component: etcd
    tier: control-plane
    version: 3.10
  name: etcd
  namespace: kube-system
spec:
  containers:
  - command:
    - etcd
    - --data-dir=/var/lib/etcd
    image: registry.k8s.io/etcd:3.5.9-0
    name: etcd
    resources:
      requests:
        cpu: 100m
        memory: 100Mi
  hostNetwork: true
  priority: 2000001000
  priorityClassName: system-node-critical
  terminationGracePeriodSeconds: 30
status: {}
)";

const char* const kNginxJson = R"({
  "apiVersion": "v1", "kind": "Pod",
  "metadata": {"name": "web", "uid": "0c1f7a2e-fixed"},
  "spec": {"containers": [{"name": "nginx", "image": "nginx",
            "resources": {"requests": {"cpu": 1, "memory": "64Mi"}}}],
           "tolerations": [{"operator": "Exists", "effect": "NoExecute"}]}
})";

}  // namespace

TEST_CASE("static pods: a kubeadm manifest becomes the pod the kubelet runs, critical") {
  auto pod = parseStaticPod(kEtcdYaml, "/etc/kubernetes/manifests/etcd.yaml", "Node-1");
  REQUIRE_MESSAGE(pod.ok(), pod.error().message);
  CHECK(pod->name == "etcd-node-1");  // the mirror pod's name: <name>-<lowercased node>
  CHECK(pod->ns == "kube-system");
  CHECK(pod->nodeName == "Node-1");
  CHECK(pod->uid.size() == 32);
  CHECK(pod->annotations.at("kubernetes.io/config.source") == "file");
  CHECK(pod->annotations.at("kubernetes.io/config.hash") == pod->uid);
  CHECK(pod->labels.at("version") == "3.10");  // a string map keeps the text
  CHECK(pod->specPriority == 2000001000);
  CHECK(pod->priority == 2000001000);
  CHECK(pod->terminationGracePeriodSeconds == 30);
  REQUIRE(pod->containers.size() == 1);
  CHECK(pod->containers[0].requests.count("cpu") == 1);
  REQUIRE(pod->tolerations.size() == 1);
  CHECK(pod->tolerations[0].op == "Exists");
  CHECK(pod->tolerations[0].effect == "NoExecute");
  CHECK(nodewarden::policy::isStaticPod(*pod));
  CHECK(pod->critical);
  CHECK(pod->key == "kube-system/etcd-node-1");

  // The same manifest, node and file: the same uid; another node: another.
  auto again = parseStaticPod(kEtcdYaml, "/etc/kubernetes/manifests/etcd.yaml", "Node-1");
  auto other = parseStaticPod(kEtcdYaml, "/etc/kubernetes/manifests/etcd.yaml", "node-2");
  REQUIRE(again.ok());
  REQUIRE(other.ok());
  CHECK(again->uid == pod->uid);
  CHECK(other->uid != pod->uid);
}

TEST_CASE("static pods: JSON, a set uid kept, default namespace, toleration not doubled") {
  auto pod = parseStaticPod(kNginxJson, "web.json", "n1");
  REQUIRE_MESSAGE(pod.ok(), pod.error().message);
  CHECK(pod->name == "web-n1");
  CHECK(pod->ns == "default");
  CHECK(pod->uid == "0c1f7a2e-fixed");
  CHECK(pod->tolerations.size() == 1);
  CHECK(pod->critical);  // static, whatever its priority
  CHECK(pod->priority == 0);
}

TEST_CASE("static pods: what the kubelet would not run is an error naming the place") {
  auto error = [](const std::string& text) {
    auto pod = parseStaticPod(text, "f.yaml", "n1");
    REQUIRE_FALSE(pod.ok());
    return pod.error().message;
  };
  CHECK(error("apiVersion: v1\nkind: Deployment\nmetadata: {name: x}\n") ==
        "kind: expected \"Pod\", got \"Deployment\"");
  CHECK(error("kind: Pod\nmetadata: {name: x}\n") == "apiVersion: expected \"v1\", got nothing");
  CHECK(error("apiVersion: v1\nkind: Pod\nmetadata:\n  labels: {a: b}\n") ==
        "metadata.name: missing (a string is required)");
  CHECK(error("apiVersion: v1\nkind: Pod\nmetadata:\n  name: x\n   bad: indent\n") ==
        "line 5: illegal map value");
  CHECK(error("") == "empty manifest");
  CHECK(error("- a\n- b\n") == "expected a Pod object at the top");
  CHECK(error("apiVersion: v1\nkind: Pod\nmetadata: {name: x}\nspec:\n  containers:\n"
              "  - name: c\n    resources:\n      requests:\n        cpu: lots\n")
            .find("spec.containers[0].resources.requests.cpu") != std::string::npos);
  CHECK(error("{\"apiVersion\": \"v1\",}").find("invalid JSON at line 1") == 0);
}

TEST_CASE("static pods: a directory read as the kubelet reads it") {
  TempDir dir;
  dir.write("etcd.yaml", kEtcdYaml);
  dir.write("web.json", kNginxJson);
  dir.write("two.yml",
            "apiVersion: v1\nkind: Pod\nmetadata:\n  name: first\n---\n"
            "apiVersion: v1\nkind: Pod\nmetadata:\n  name: second\n");
  dir.write("broken.yaml", "apiVersion: v1\nkind: Pod\nmetadata: [unclosed\n");
  dir.write(".hidden.yaml", kEtcdYaml);         // dotfiles: ignored
  dir.write("nested/inner.yaml", kEtcdYaml);    // subdirectories: not entered
  dir.write("apiserver.yaml.bak", kNginxJson);  // any extension: the kubelet reads it
  fs::create_symlink(dir.path / "web.json", dir.path / "link.json");  // followed

  auto result = readStaticPods(dir.path.string(), "n1");
  std::vector<std::string> names;
  for (const auto& pod : result.pods) names.push_back(pod.name);
  CHECK(names == std::vector<std::string>{"web-n1", "etcd-n1", "web-n1", "first-n1", "web-n1"});
  REQUIRE(result.problems.size() == 2);
  CHECK(result.problems[0].file == (dir.path / "broken.yaml").string());
  CHECK(result.problems[0].skipped);
  CHECK(result.problems[0].message.substr(0, 5) == "line ");
  CHECK(result.problems[1].file == (dir.path / "two.yml").string());
  CHECK_FALSE(result.problems[1].skipped);
  CHECK(result.problems[1].message ==
        "1 YAML document(s) after the first ignored, as by the kubelet");

  SUBCASE("a file path reads that file alone") {
    auto one = readStaticPods((dir.path / "etcd.yaml").string(), "n1");
    REQUIRE(one.pods.size() == 1);
    CHECK(one.problems.empty());
  }
  SUBCASE("a path that does not exist: nothing, quietly") {
    auto none = readStaticPods((dir.path / "absent").string(), "n1");
    CHECK(none.pods.empty());
    CHECK(none.problems.empty());
  }
}

TEST_CASE("yaml: scalars typed by YAML 1.2's core schema unless asked to stay text") {
  YamlOptions typed;
  auto docs = readYamlDocuments(
      "i: 42\nneg: -7\nhex: 0x1F\nf: 1.5e3\ns: 1.2.3\nq: \"42\"\nb: true\nn: ~\ne:\n"
      "big: 99999999999999999999\ninf: .inf\nstr: !!str 12\nblock: |\n  two\n  lines\n"
      "flow: {a: [1, 2]}\n",
      typed);
  REQUIRE_MESSAGE(docs.ok(), docs.error().message);
  REQUIRE(docs->size() == 1);
  const Json& d = docs->front();
  CHECK(d["i"] == 42);
  CHECK(d["neg"] == -7);
  CHECK(d["hex"] == 31);
  CHECK(d["f"] == 1500.0);
  CHECK(d["s"] == "1.2.3");
  CHECK(d["q"] == "42");
  CHECK(d["b"] == true);
  CHECK(d["n"].is_null());
  CHECK(d["e"].is_null());
  CHECK(d["big"] == "99999999999999999999");
  CHECK(d["inf"] == ".inf");
  CHECK(d["str"] == "12");
  CHECK(d["block"] == "two\nlines\n");
  CHECK(d["flow"] == Json::parse(R"({"a": [1, 2]})"));

  // kubectl's reader (go-yaml v2): YAML 1.1 booleans and integers; timestamps stay text.
  YamlOptions go;
  go.scalars = nodewarden::kube::YamlScalars::GoYaml;
  auto v2 = readYamlDocuments(
      "a: yes\nb: Off\nc: y\nd: 0777\ne: 0x1F\nf: 1_000\ng: 0b101\nh: 08\n"
      "i: 2024-05-01\nj: .5\nk: 12345\nl: \"yes\"\nm: -0o17\n",
      go);
  REQUIRE_MESSAGE(v2.ok(), v2.error().message);
  const Json& g = v2->front();
  CHECK(g["a"] == true);
  CHECK(g["b"] == false);
  CHECK(g["c"] == true);
  CHECK(g["d"] == 511);
  CHECK(g["e"] == 31);
  CHECK(g["f"] == 1000);
  CHECK(g["g"] == 5);
  CHECK(g["h"] == 8.0);  // not octal: go-yaml's float pattern takes it
  CHECK(g["i"] == "2024-05-01");
  CHECK(g["j"] == 0.5);
  CHECK(g["k"] == 12345);
  CHECK(g["l"] == "yes");
  CHECK(g["m"] == -15);
}

TEST_CASE("yaml: aliases when asked for, bounded; merge keys; the last duplicate; one document") {
  YamlOptions options;
  options.aliases = true;
  options.lastDuplicateKeyWins = true;
  options.firstDocumentOnly = true;
  auto docs = readYamlDocuments(
      "base: &b {x: 1, y: 2}\nlist: &l [1, 2]\ncopy: *l\n"
      "merged:\n  x: 0\n  <<: *b\n  z: 3\n"
      "many:\n  <<: [{p: 1}, {p: 2, q: 2}]\n"
      "k: first\nk: last\n---\n[unclosed\n",
      options);
  REQUIRE_MESSAGE(docs.ok(), docs.error().message);
  REQUIRE(docs->size() == 1);
  const Json& d = docs->front();
  CHECK(d["copy"] == Json::parse("[1, 2]"));
  // go-yaml v2 sets a merge's members in order: they replace the x given before it.
  CHECK(d["merged"] == Json::parse(R"({"x": 1, "y": 2, "z": 3})"));
  CHECK(d["many"] == Json::parse(R"({"p": 1, "q": 2})"));  // the first mapping wins
  CHECK(d["k"] == "last");
  // "Billion laughs": each alias copies, and the copies are counted.
  std::string laughs = "a: &a [x, x, x, x, x, x, x, x, x, x]\n";
  for (char c = 'b'; c <= 'h'; ++c) {
    std::string prev(1, static_cast<char>(c - 1));
    laughs += std::string(1, c) + ": &" + c + " [*" + prev + ", *" + prev + ", *" + prev + ", *" +
              prev + ", *" + prev + ", *" + prev + ", *" + prev + ", *" + prev + ", *" + prev +
              ", *" + prev + "]\n";
  }
  auto bomb = readYamlDocuments(laughs, options);
  REQUIRE_FALSE(bomb.ok());
  CHECK(bomb.error().message.ends_with("aliases expand to more than 100000 values"));
  auto recursive = readYamlDocuments("a: &a [1, *a]\n", options);
  REQUIRE_FALSE(recursive.ok());
  CHECK(recursive.error().message == "line 1: an alias inside the node it names");
  auto badMerge = readYamlDocuments("a: {<<: 5}\n", options);
  REQUIRE_FALSE(badMerge.ok());
  CHECK(badMerge.error().message ==
        "line 1: a merge key (<<) needs a mapping or a list of mappings");
}

TEST_CASE("yaml: any input gives a value or an error, never a crash or a huge value") {
  YamlOptions options;
  auto error = [&](const std::string& text) {
    auto docs = readYamlDocuments(text, options);
    REQUIRE_FALSE(docs.ok());
    return docs.error().message;
  };
  // Deep nesting stops at maxDepth, before yaml-cpp's recursion gets far.
  std::string deepFlow;
  for (int i = 0; i < 100000; ++i) deepFlow += "{a: ";
  CHECK(error(deepFlow + std::string(100000, '}')) == "line 1: nested deeper than 100 levels");
  CHECK(error(std::string(100000, '[') + std::string(100000, ']')) ==
        "line 1: nested deeper than 100 levels");
  // Unclosed: yaml-cpp reads it as a (flow) mapping key, refused before any depth.
  CHECK(error(std::string(100000, '[')) == "line 1: mapping keys must be scalars");
  std::string deepBlock;
  for (int i = 0; i < 300; ++i) deepBlock += std::string(static_cast<std::size_t>(i), ' ') + "k:\n";
  CHECK(error(deepBlock) == "line 101: nested deeper than 100 levels");
  // Aliases would copy: "billion laughs".
  CHECK(error("a: &x [1, 2]\nb: *x\n") == "line 1: anchors and aliases are not supported");
  CHECK(error("a: 1\na: 2\n") == "line 2: duplicate key \"a\"");
  CHECK(error("a: b\xc3\x28\n") == "line 1: invalid UTF-8");  // JSON text is UTF-8
  CHECK(error("? [a, b]\n: c\n") == "line 1: mapping keys must be scalars");
  CHECK(error("a: !custom x\n").find("tags other than") != std::string::npos);
  for (const char* junk : {"\xff\xfe", "{", "]", "a: b: c", "- - - -\n  -", "%YAML 2.0\n---\n",
                           "!<!> {", "&a *a", "\t- x", "? ? ? ?"}) {
    auto docs = readYamlDocuments(junk, options);  // either way, no exception
    CHECK((docs.ok() || !docs.error().message.empty()));
  }
  auto bom = readYamlDocuments("\xEF\xBB\xBFkind: Config\nname: \"x\"\n", options);
  REQUIRE_MESSAGE(bom.ok(), bom.error().message);
  CHECK(bom->front()["name"] == "x");
  auto empty = readYamlDocuments("", options);
  REQUIRE(empty.ok());
  CHECK(empty->empty());
  auto many = readYamlDocuments("a: 1\n---\nb: 2\n", options);
  REQUIRE(many.ok());
  CHECK(many->size() == 2);
}
