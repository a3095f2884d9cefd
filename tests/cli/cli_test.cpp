// End to end: the nodewarden binary run on files, as a user runs it.
#include <doctest/doctest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

namespace fs = std::filesystem;
using Json = nlohmann::json;

namespace {

const fs::path kRoot = NODEWARDEN_SOURCE_ROOT;
const std::string kBinary = NODEWARDEN_BINARY;

struct Run {
  int status = -1;
  std::string out;
  std::string err;
};

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// A scratch directory for this test process, removed at exit.
const fs::path& scratch() {
  static const fs::path dir = [] {
    fs::path d = fs::temp_directory_path() / ("nodewarden-cli-test-" + std::to_string(getpid()));
    fs::create_directories(d);
    std::atexit([] {
      fs::remove_all(fs::temp_directory_path() /
                     ("nodewarden-cli-test-" + std::to_string(getpid())));
    });
    return d;
  }();
  return dir;
}

fs::path write(const std::string& name, const std::string& text) {
  fs::path p = scratch() / name;
  std::ofstream(p, std::ios::binary) << text;
  return p;
}

std::string quote(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

// Runs the binary with `args` (already shell-quoted where needed) and an optional stdin file.
Run run(const std::string& args, const std::string& stdinFile = "/dev/null") {
  static int counter = 0;
  ++counter;
  fs::path out = scratch() / ("out" + std::to_string(counter));
  fs::path err = scratch() / ("err" + std::to_string(counter));
  std::string command = "cd " + quote(kRoot.string()) + " && " + quote(kBinary) + " " + args +
                        " <" + quote(stdinFile) + " >" + quote(out.string()) + " 2>" +
                        quote(err.string());
  int raw = std::system(command.c_str());
  Run r;
  r.status = WIFEXITED(raw) ? WEXITSTATUS(raw) : -1;
  r.out = slurp(out);
  r.err = slurp(err);
  return r;
}

const char* kTwoNodes = R"({
  "nodes": [{"metadata": {"name": "a"}, "status": {"allocatable": {"memory": "1Gi"}}},
            {"metadata": {"name": "b"}, "status": {"allocatable": {"memory": "1Gi"}}}],
  "pods": [{"metadata": {"name": "p", "namespace": "ns"}, "spec": {"nodeName": "b"}}],
  "stats": {"b": {"node": {"memory": {"availableBytes": 10485760, "workingSetBytes": 1063256064}},
                  "pods": [{"podRef": {"name": "p", "namespace": "ns"},
                            "memory": {"workingSetBytes": 524288000}}]}}
})";

}  // namespace

TEST_CASE("explain eviction -o json on the example matches the expected JSON") {
  Run r = run(
      "explain eviction --snapshot examples/snapshot.json --policy examples/policy.json -o json");
  REQUIRE_MESSAGE(r.status == 0, r.err);
  CHECK(Json::parse(r.out) ==
        Json::parse(slurp(kRoot / "tests/fixtures/expected/example-eviction.json")));
  // The members come in the contract's order.
  CHECK(r.out.find("\"node\"") < r.out.find("\"signals\""));
  CHECK(r.out.find("\"signals\"") < r.out.find("\"conditions\""));
  CHECK(r.out.find("\"ranking\"") < r.out.find("\"evict\""));
  // -o=json and --output json are the same.
  CHECK(run("explain eviction --snapshot=examples/snapshot.json --policy examples/policy.json "
            "--output json")
            .out == r.out);
}

TEST_CASE("explain eviction: the example's decision") {
  Run r = run(
      "explain eviction --snapshot examples/snapshot.json --policy examples/policy.json -o json");
  REQUIRE(r.status == 0);
  Json j = Json::parse(r.out);
  CHECK(j["node"] == "node-1");
  CHECK(j["conditions"] == Json::array({"MemoryPressure"}));
  REQUIRE(j["evict"].size() == 1);
  CHECK(j["evict"][0]["pod"] == "batch/etl-5f7b9c-abcde");
  CHECK(j["evict"][0]["gracePeriodSeconds"] == 0);
  // Critical pods (a static pod and a system-node-critical one) come last.
  auto memory = j["ranking"]["memory"];
  CHECK(memory[memory.size() - 2] == "kube-system/etcd-node-1");
  CHECK(memory[memory.size() - 1] == "kube-system/kube-proxy-7xk2p");
  // The terminating pod is not ranked.
  CHECK(r.out.find("web-6d4cf56db6-old01") == std::string::npos);
  CHECK(j["ranking"].contains("pids"));
  CHECK(j["ranking"].contains("ephemeral-storage"));
}

TEST_CASE("explain eviction --assume-grace-elapsed lets soft thresholds act") {
  Run r =
      run("explain eviction --snapshot examples/snapshot.json --policy examples/policy.json "
          "--assume-grace-elapsed -o json");
  REQUIRE(r.status == 0);
  CHECK(Json::parse(r.out) ==
        Json::parse(slurp(kRoot / "tests/fixtures/expected/example-eviction-grace-elapsed.json")));
}

TEST_CASE("explain eviction -o table is for people") {
  Run r = run("explain eviction --snapshot examples/snapshot.json --policy examples/policy.json");
  REQUIRE(r.status == 0);
  CHECK(r.out.find("Node node-1") != std::string::npos);
  CHECK(r.out.find("Conditions: MemoryPressure") != std::string::npos);
  CHECK(r.out.find("never evicted: critical pod") != std::string::npos);
  CHECK(r.out.find("EVICT: memory.available hard, grace 0s") != std::string::npos);
  CHECK(r.out.find(
            "The node was low on resource: memory. Threshold quantity: 100Mi, available: 60Mi.") !=
        std::string::npos);
}

TEST_CASE("explain eviction reads the snapshot from standard input") {
  Run r = run("explain eviction --snapshot - --policy examples/policy.json -o json",
              (kRoot / "examples/snapshot.json").string());
  REQUIRE(r.status == 0);
  CHECK(Json::parse(r.out)["evict"][0]["pod"] == "batch/etl-5f7b9c-abcde");
}

TEST_CASE("explain eviction: choosing the node") {
  fs::path two = write("two-nodes.json", kTwoNodes);
  Run missing = run("explain eviction --snapshot " + two.string());
  CHECK(missing.status == 1);
  CHECK(missing.err == two.string() +
                           ": nodes: --node is required when the snapshot does not have "
                           "exactly one node (nodes in the snapshot: a, b)\n");
  Run unknown = run("explain eviction --snapshot " + two.string() + " --node c");
  CHECK(unknown.status == 1);
  CHECK(unknown.err ==
        two.string() + ": nodes: node \"c\" not found (nodes in the snapshot: a, b)\n");
  Run b = run("explain eviction --snapshot " + two.string() + " --node b -o json");
  REQUIRE(b.status == 0);
  Json j = Json::parse(b.out);
  CHECK(j["node"] == "b");
  CHECK(j["evict"][0]["pod"] == "ns/p");  // default policy: memory.available<100Mi
}

TEST_CASE("bad input: exit 1, a message naming the file and the JSON path, nothing on stdout") {
  struct Case {
    std::string name;
    std::string args;
    std::string err;
  };
  fs::path badQuantity = write("bad-quantity.json", R"({"pods": [{"metadata": {"name": "a"},
      "spec": {"containers": [{"name": "c", "resources": {"requests": {"memory": "9x"}}}]}}]})");
  fs::path badJson = write("bad-json.json", "{\"pods\": [");
  fs::path badPolicy = write("bad-policy.json",
                             R"({"evictionHard": {"memory.available": "-1Gi", "foo": "1"},
                                 "evictionSoft": {"memory.available": "1Gi"}})");
  const Case cases[] = {
      {"malformed quantity", "explain eviction --snapshot " + badQuantity.string(),
       badQuantity.string() +
           ": pods[0].spec.containers[0].resources.requests.memory: \"9x\" is not a quantity "
           "(expected a number with an optional suffix, such as 128974848, 129e6, 129M, 123Mi, "
           "1.5Gi or 500m)\n"},
      {"invalid JSON", "explain eviction --snapshot " + badJson.string(),
       badJson.string() +
           ": invalid JSON at line 1, column 11: syntax error while parsing value - unexpected "
           "end of input; expected '[', '{', or a literal\n"},
      {"unreadable snapshot", "explain eviction --snapshot /nonexistent/snap.json",
       "cannot read /nonexistent/snap.json: No such file or directory\n"},
      {"a directory", "explain eviction --snapshot " + scratch().string(),
       "cannot read " + scratch().string() + ": Is a directory\n"},
      {"invalid policy",
       "explain eviction --snapshot examples/snapshot.json --policy " + badPolicy.string(),
       badPolicy.string() +
           ": evictionHard.foo: unknown signal (expected one of memory.available, "
           "allocatableMemory.available, nodefs.available, nodefs.inodesFree, "
           "imagefs.available, imagefs.inodesFree, pid.available)\n" +
           badPolicy.string() +
           ": evictionHard[\"memory.available\"]: must be positive, got \"-1Gi\"\n" +
           badPolicy.string() +
           ": evictionSoft[\"memory.available\"]: a soft threshold needs a grace "
           "period: set evictionSoftGracePeriod[\"memory.available\"]\n"},
  };
  for (const auto& c : cases) {
    CAPTURE(c.name);
    Run r = run(c.args);
    CHECK(r.status == 1);
    CHECK(r.err == c.err);
    CHECK(r.out.empty());
  }
}

TEST_CASE("usage errors exit 2 with help") {
  for (const char* args :
       {"", "frobnicate", "explain", "explain eviction", "explain eviction --snapshot",
        "explain eviction --bogus x", "explain eviction --snapshot examples/snapshot.json -o yaml",
        "explain whatever", "check-policy", "check-policy a b"}) {
    std::string line = args;
    CAPTURE(line);
    Run r = run(line);
    CHECK(r.status == 2);
    CHECK(r.err.find("usage: nodewarden") != std::string::npos);
  }
}

TEST_CASE("help and version exit 0") {
  Run help = run("--help");
  CHECK(help.status == 0);
  CHECK(help.out.find("explain eviction") != std::string::npos);
  Run explainHelp = run("explain eviction --help");
  CHECK(explainHelp.status == 0);
  CHECK(explainHelp.out.find("--assume-grace-elapsed") != std::string::npos);
  Run version = run("version");
  CHECK(version.status == 0);
  CHECK(version.out.rfind("nodewarden ", 0) == 0);
}

TEST_CASE("check-policy validates and prints the effective policy") {
  Run ok = run("check-policy examples/policy.json");
  REQUIRE_MESSAGE(ok.status == 0, ok.err);
  CHECK(ok.out.rfind("examples/policy.json: valid\n", 0) == 0);
  Json effective = Json::parse(ok.out.substr(ok.out.find('\n') + 1));
  CHECK(effective["evictionHard"]["memory.available"] == "100Mi");
  CHECK(effective["evictionSoftGracePeriod"]["memory.available"] == "30s");

  Run shipped = run("check-policy systemd/nodewarden-policy.json");
  CHECK(shipped.status == 0);

  fs::path empty = write("empty-policy.json", "{}");
  Run defaults = run("check-policy " + empty.string());
  REQUIRE(defaults.status == 0);
  Json d = Json::parse(defaults.out.substr(defaults.out.find('\n') + 1));
  CHECK(d["evictionHard"] == Json::parse(R"({"memory.available": "100Mi", "nodefs.available": "10%",
                                             "nodefs.inodesFree": "5%", "imagefs.available": "15%"})"));
  CHECK(d["evictionMaxPodGracePeriod"] == 0);
  CHECK(d["evictionPressureTransitionPeriod"] == "5m0s");

  fs::path bad = write("bad.json", R"({"ranking": "fastest", "evictionMaxPodsPerCycle": 0})");
  Run invalid = run("check-policy " + bad.string());
  CHECK(invalid.status == 1);
  CHECK(invalid.err == bad.string() +
                           ": evictionMaxPodsPerCycle: expected an integer from 1 to "
                           "10000, got 0\n" +
                           bad.string() +
                           ": ranking: expected \"priority\" or \"kubelet\", got "
                           "\"fastest\"\n");
  CHECK(invalid.out.empty());
}

TEST_CASE(
    "explain admission and explain preemption on the seed scenarios match the expected JSON") {
  struct Case {
    std::string args;
    std::string expected;
  };
  const std::string d = "examples/preemption/";
  std::vector<Case> cases;
  for (const char* s : {"capacity-10", "example-1", "example-4", "pdb-green-not-blue"}) {
    cases.push_back({"explain admission --snapshot " + d + s + ".json --node node-1 --pod " + d +
                         s + "-pod.json -o json",
                     std::string("tests/fixtures/expected/admission-") + s + ".json"});
  }
  for (const char* s : {"example-2", "example-3", "pdb-green-not-blue"}) {
    cases.push_back(
        {"explain preemption --snapshot " + d + s + ".json --pod " + d + s + "-pod.json -o json",
         std::string("tests/fixtures/expected/preemption-") + s + ".json"});
  }
  for (const auto& c : cases) {
    CAPTURE(c.args);
    Run r = run(c.args);
    REQUIRE_MESSAGE(r.status == 0, r.err);
    CHECK(Json::parse(r.out) == Json::parse(slurp(kRoot / c.expected)));
    CHECK(r.out.find("\"pod\"") < r.out.find("\"victims\""));
  }
  Json capacity = Json::parse(slurp(kRoot / "tests/fixtures/expected/admission-capacity-10.json"));
  CHECK(capacity["verdict"] == "preempt");
  CHECK(capacity["victims"] == Json::array({"default/p2"}));
  Json pdb =
      Json::parse(slurp(kRoot / "tests/fixtures/expected/admission-pdb-green-not-blue.json"));
  CHECK(pdb["victims"] == Json::array({"shop/green-0"}));
}

TEST_CASE("explain admission reads the pod from standard input and prints a table") {
  const std::string d = "examples/preemption/";
  Run r = run("explain admission --snapshot " + d + "capacity-10.json --node node-1 --pod -",
              (kRoot / (d + "capacity-10-pod.json")).string());
  REQUIRE_MESSAGE(r.status == 0, r.err);
  CHECK(r.out.find("PREEMPT (OutOfcpu)") != std::string::npos);
  CHECK(r.out.find("Victims: default/p2") != std::string::npos);
  Run p = run("explain preemption --snapshot " + d + "pdb-green-not-blue.json --pod " + d +
              "pdb-green-not-blue-pod.json");
  REQUIRE(p.status == 0);
  CHECK(p.out.find("node node-2, preempting shop/green-1") != std::string::npos);
  CHECK(p.out.find("Other candidate nodes:\n  node-1: shop/green-0") != std::string::npos);
}

TEST_CASE("explain admission/preemption --pod NAME -n NS: a pod of the snapshot, as if arriving") {
  Run a =
      run("explain admission --snapshot examples/snapshot.json --node node-1 --pod scratch -n dev "
          "-o json");
  REQUIRE_MESSAGE(a.status == 0, a.err);
  const Json decision = Json::parse(a.out);
  CHECK(decision["pod"] == "dev/scratch");
  Run slash =
      run("explain admission --snapshot examples/snapshot.json --node node-1 --pod dev/scratch -o "
          "json");
  REQUIRE(slash.status == 0);
  CHECK(Json::parse(slash.out) == decision);
  Run pre =
      run("explain preemption --snapshot examples/snapshot.json --namespace shop --pod cache-0");
  REQUIRE_MESSAGE(pre.status == 0, pre.err);
  CHECK(pre.out.find("Pod shop/cache-0") != std::string::npos);
  // Not a file and not in the snapshot: exit 1, naming what is there.
  Run missing =
      run("explain admission --snapshot examples/snapshot.json --node node-1 --pod nope -n shop");
  CHECK(missing.status == 1);
  CHECK(missing.out.empty());
  CHECK(missing.err.find("cannot read nope") != std::string::npos);
  CHECK(missing.err.find("no pod shop/nope in the snapshot") != std::string::npos);
  CHECK(missing.err.find("cache-0") != std::string::npos);
}

TEST_CASE("explain admission and preemption: bad input exits 1 naming the file and JSON path") {
  const std::string d = "examples/preemption/";
  fs::path noName = write("no-name-pod.json", R"({"metadata": {"namespace": "x"}, "spec": {}})");
  fs::path negative =
      write("negative-pod.json", R"({"metadata": {"name": "p"}, "spec": {"containers": [
      {"name": "c", "resources": {"requests": {"cpu": "-1"}}}]}})");
  fs::path badPdb = write(
      "bad-pdb.json",
      R"({"nodes": [{"metadata": {"name": "node-1"}, "status": {"allocatable": {"cpu": "1"}}}],
      "podDisruptionBudgets": [{"metadata": {"name": "b"}, "spec": {"selector": {"matchExpressions": [
        {"key": "app", "operator": "Matches", "values": ["x"]}]}}}]})");
  fs::path noAllocatable = write("no-allocatable.json",
                                 R"({"nodes": [{"metadata": {"name": "node-1"}, "status": {}}]})");
  fs::path noNodes = write("no-nodes.json", R"({"pods": []})");
  const std::string pod = d + "capacity-10-pod.json";
  struct Case {
    std::string args;
    std::string err;
  };
  const Case cases[] = {
      {"explain admission --snapshot " + d + "capacity-10.json --node node-1 --pod " +
           noName.string(),
       noName.string() + ": metadata.name: missing (a string is required)\n"},
      {"explain preemption --snapshot " + d + "capacity-10.json --pod " + negative.string(),
       negative.string() +
           ": spec.containers[0].resources.requests.cpu: must not be negative, got \"-1\"\n"},
      {"explain admission --snapshot " + badPdb.string() + " --node node-1 --pod " + pod,
       badPdb.string() +
           ": podDisruptionBudgets[0].spec.selector.matchExpressions[0].operator: expected "
           "In, NotIn, Exists or DoesNotExist, got \"Matches\"\n"},
      {"explain preemption --snapshot " + noAllocatable.string() + " --pod " + pod,
       noAllocatable.string() + ": nodes[0].status.allocatable: missing (a node needs "
                                "status.allocatable to decide what fits)\n"},
      {"explain preemption --snapshot " + noNodes.string() + " --pod " + pod,
       noNodes.string() + ": nodes: missing (admission and preemption need the Node objects)\n"},
      {"explain admission --snapshot " + d + "capacity-10.json --node node-9 --pod " + pod,
       d + "capacity-10.json: nodes: node \"node-9\" not found (nodes in the snapshot: node-1)\n"},
  };
  for (const auto& c : cases) {
    CAPTURE(c.args);
    Run r = run(c.args);
    CHECK(r.status == 1);
    CHECK(r.err == c.err);
    CHECK(r.out.empty());
  }
  const std::vector<std::string> usage = {
      "explain admission --snapshot " + d + "capacity-10.json --pod " + pod,
      "explain preemption --pod " + pod, "explain admission --help x"};
  for (const std::string& args : usage) {
    CAPTURE(args);
    CHECK(run(args).status == (args.find("--help") != std::string::npos ? 0 : 2));
  }
}

TEST_CASE("explain eviction needs no allocatable; admission does") {
  fs::path bare = write("bare-node.json", R"({"nodes": [{"metadata": {"name": "n1"}}]})");
  Run r = run("explain eviction --snapshot " + bare.string() + " -o json");
  REQUIRE_MESSAGE(r.status == 0, r.err);
  CHECK(Json::parse(r.out)["node"] == "n1");
  Run a = run("explain admission --snapshot " + bare.string() +
              " --node n1 --pod examples/preemption/capacity-10-pod.json");
  CHECK(a.status == 1);
  CHECK(a.err == bare.string() +
                     ": nodes[0].status.allocatable: missing (a node needs status.allocatable to "
                     "decide what fits)\n");
}

TEST_CASE("examples/current: pod-level resources, a resize under way, swap, pressure from stats") {
  const std::string d = "examples/current/";
  Run table = run("explain eviction --snapshot " + d + "snapshot.json");
  REQUIRE_MESSAGE(table.status == 0, table.err);
  // The resizing pod is ranked by its allocated 1Gi (1.5x), not its desired 2Gi (0.75x).
  CHECK(table.out.find("1Gi (allocated; desired 2Gi, PodResizePending: Deferred)") !=
        std::string::npos);
  CHECK(table.out.find("(1.50x its request)") != std::string::npos);
  CHECK(table.out.find("SWAP") != std::string::npos);
  Run json = run("explain eviction --snapshot " + d + "snapshot.json -o json");
  REQUIRE(json.status == 0);
  Json out = Json::parse(json.out);
  CHECK(out["ranking"]["memory"] == Json::array({"batch/resizer", "batch/cache", "web/api"}));
  REQUIRE(out["evict"].size() == 1);
  CHECK(out["evict"][0]["message"] ==
        "The node was low on resource: memory. Threshold quantity: 100Mi, available: 80Mi. "
        "Container main was using 1536Mi, request is 1Gi, has larger consumption of memory. ");
  CHECK(out["resizing"][0]["pod"] == "batch/resizer");
  CHECK(out["swapUsageBytes"]["batch/cache"] == 209715200);

  // No MemoryPressure on the Node object, but the stats show it under the default policy:
  // a BestEffort pod is turned away, a pod with pod-level requests (Burstable) is admitted.
  Run bestEffort = run("explain admission --snapshot " + d + "snapshot.json --node node-1 --pod " +
                       d + "besteffort-pod.json -o json");
  REQUIRE_MESSAGE(bestEffort.status == 0, bestEffort.err);
  Json rejected = Json::parse(bestEffort.out);
  CHECK(rejected["verdict"] == "reject");
  CHECK(rejected["reason"] == "Evicted");
  CHECK(rejected["message"] == "The node had condition: [MemoryPressure]. ");
  Run podLevel = run("explain admission --snapshot " + d + "snapshot.json --node node-1 --pod " +
                     d + "pod-level-pod.json -o json");
  REQUIRE(podLevel.status == 0);
  CHECK(Json::parse(podLevel.out)["verdict"] == "admit");
  // A policy whose line is lower derives no pressure: the BestEffort pod is admitted.
  const auto policy = std::filesystem::temp_directory_path() / "nodewarden-cli-low-line.json";
  std::ofstream(policy) << R"({"evictionHard": {"memory.available": "50Mi"}})";
  Run low = run("explain admission --snapshot " + d + "snapshot.json --node node-1 --pod " + d +
                "besteffort-pod.json --policy " + policy.string() + " -o json");
  std::filesystem::remove(policy);
  REQUIRE(low.status == 0);
  CHECK(Json::parse(low.out)["verdict"] == "admit");
}

TEST_CASE("check-policy: containerfs thresholds are accepted and ignored with a warning") {
  const auto policy = std::filesystem::temp_directory_path() / "nodewarden-cli-containerfs.json";
  std::ofstream(policy)
      << R"({"evictionHard": {"memory.available": "100Mi", "containerfs.available": "10%"}})";
  Run r = run("check-policy " + policy.string());
  std::filesystem::remove(policy);
  REQUIRE_MESSAGE(r.status == 0, r.err);
  CHECK(r.err.find("warning: " + policy.string() +
                   ": evictionHard[\"containerfs.available\"]: ignored") != std::string::npos);
  CHECK(r.out.find("containerfs.available") == std::string::npos);
}

TEST_CASE(
    "docs/reference.md §7: the admission routes beyond loopback need a verified client "
    "certificate") {
  // Refused before anything is read or served: exit 2 naming the flag.
  Run open =
      run("agent --admission-routes --listen 0.0.0.0:0 --source static --manifests /nonexistent");
  CHECK(open.status == 2);
  CHECK(open.err.find("--tls-client-ca") != std::string::npos);
  CHECK(open.out.empty());
  Run ipv6 =
      run("agent --admission-routes --listen [::]:0 --source static --manifests /nonexistent");
  CHECK(ipv6.status == 2);
  Run noTls = run("agent --tls-client-ca ca.pem --source static --manifests /nonexistent");
  CHECK(noTls.status == 2);
  CHECK(noTls.err.find("--tls-cert") != std::string::npos);
  Run halfPair = run("agent --tls-cert c.pem --source static --manifests /nonexistent");
  CHECK(halfPair.status == 2);
  Run off = run("agent --admission-routes --listen off --source static --manifests /nonexistent");
  CHECK(off.status == 2);
  Run webhook = run("webhook --tls-client-ca ca.pem");
  CHECK(webhook.status == 2);
  CHECK(webhook.err.find("--tls-client-ca") != std::string::npos);
  // The help names the flags.
  Run help = run("agent --help");
  CHECK(help.out.find("--admission-routes") != std::string::npos);
  CHECK(help.out.find("--tls-client-ca") != std::string::npos);
}

TEST_CASE("overflow: a threshold plus reclaim beyond 2^63 is shown clamped, never negative") {
  const auto policy = std::filesystem::temp_directory_path() / "nodewarden-cli-8ei.json";
  std::ofstream(policy)
      << R"({"evictionHard":{"memory.available":"8Ei"},"evictionMinimumReclaim":{"memory.available":"1000P"}})";
  Run table = run("explain eviction --snapshot examples/snapshot.json --policy " + policy.string());
  Run check = run("check-policy " + policy.string());
  std::filesystem::remove(policy);
  REQUIRE_MESSAGE(table.status == 0, table.err);
  CHECK(table.out.find("reclaim to -") == std::string::npos);
  CHECK(table.out.find("reclaim to 8Ei") != std::string::npos);
  CHECK(check.status == 0);
  CHECK(check.err.find("\"8Ei\" is beyond 2^63-1 and counts as 9223372036854775807") !=
        std::string::npos);
}

TEST_CASE("explain --batch answers each line exactly as the command alone would") {
  const std::vector<std::string> commands = {
      R"(["eviction", "--snapshot", "examples/snapshot.json", "--policy", "examples/policy.json", "-o", "json"])",
      R"(["eviction", "--snapshot", "examples/snapshot.json", "--policy", "examples/policy.json"])",
      R"(["eviction", "--snapshot", "examples/snapshot.json", "-o", "json", "--assume-grace-elapsed"])",
      R"(["eviction", "--snapshot", "no-such-file.json"])",
      R"(["eviction", "--bogus"])",
  };
  const std::vector<std::string> alone = {
      "explain eviction --snapshot examples/snapshot.json --policy examples/policy.json -o json",
      "explain eviction --snapshot examples/snapshot.json --policy examples/policy.json",
      "explain eviction --snapshot examples/snapshot.json -o json --assume-grace-elapsed",
      "explain eviction --snapshot no-such-file.json",
      "explain eviction --bogus",
  };
  std::string text;
  for (const auto& c : commands) text += c + "\n\n";
  text += "{\"not\": \"an array\"}\n";
  text += R"(["eviction", "--snapshot", "-"])"
          "\n";
  text += R"(["--batch", "x"])"
          "\n";
  fs::path batch = write("batch.jsonl", text);
  Run r = run("explain --batch " + quote(batch.string()));
  REQUIRE(r.status == 0);
  std::istringstream lines(r.out);
  std::string line;
  std::vector<Json> replies;
  while (std::getline(lines, line)) replies.push_back(Json::parse(line));
  REQUIRE(replies.size() == commands.size() + 3);
  for (std::size_t i = 0; i < alone.size(); ++i) {
    CAPTURE(alone[i]);
    Run one = run(alone[i]);
    CHECK(replies[i]["exit"] == one.status);
    CHECK(replies[i]["stdout"] == one.out);
    CHECK(replies[i]["stderr"] == one.err);
  }
  for (std::size_t i = commands.size(); i < replies.size(); ++i) {
    CHECK(replies[i]["exit"] == 2);
    CHECK(replies[i]["stdout"] == "");
    CHECK(replies[i]["stderr"].get<std::string>().find("--batch") != std::string::npos);
  }
  // Standard input as the batch; an unreadable batch file is bad input.
  Run piped = run("explain --batch -", batch.string());
  CHECK(piped.status == 0);
  CHECK(piped.out == r.out);
  CHECK(run("explain --batch /no/such/batch").status == 1);
  CHECK(run("explain --batch").status == 2);
}

// The flight recorder's commands over a recorded state directory (tests/fixtures/record/state:
// `nodewarden demo --baseline --node node-b`, where the agent only recorded and the kernel
// killed prod/search). docs/reference.md §8.
TEST_CASE(
    "replay: the recorded policy gives the recorded decisions; a candidate prevents the kill") {
  const std::string dir = "tests/fixtures/record/state";
  Run recorded = run("replay " + dir + " -o json");
  REQUIRE_MESSAGE(recorded.status == 0, recorded.err);
  const Json episode = Json::parse(recorded.out)["episodes"][0];
  CHECK(episode["policy"] == "recorded");
  CHECK(episode["fidelity"] == "identical");
  CHECK(episode["divergence"].is_null());
  CHECK(episode["kernelOomKills"]["recorded"] == 1);
  CHECK(episode["bounds"]["kernelAlone"]["source"] == "recording");
  CHECK(episode["bounds"]["kernelAlone"]["victims"] == Json::array({"prod/search"}));
  // The demo's policy, acting: the batch pods go, and the kernel's kill is prevented.
  Run candidate = run("replay " + dir + " --policy examples/demo/policy.json -o json");
  REQUIRE_MESSAGE(candidate.status == 0, candidate.err);
  const Json acted = Json::parse(candidate.out)["episodes"][0];
  CHECK(acted["fidelity"] == "identical");  // the file is the policy that was recorded
  CHECK(acted["kernelOomKills"]["prevented"] == true);
  CHECK(acted["leadTimeMs"].get<double>() > 0);
  for (const Json& d : acted["decisions"]) CHECK(d["pod"].get<std::string>().starts_with("batch/"));
  // Another policy, with no threshold on the pods' memory: not checked, not prevented.
  fs::path late = write("late.json", R"({"evictionHard": {"memory.available": "100Mi"}})");
  Run other = run("replay " + dir + " --policy " + quote(late.string()) + " -o json");
  REQUIRE_MESSAGE(other.status == 0, other.err);
  const Json none = Json::parse(other.out)["episodes"][0];
  CHECK(none["fidelity"] == "not-checked");
  CHECK(none["kernelOomKills"]["prevented"] == false);
  CHECK(none["decisions"].empty());
  // The table.
  Run table = run("replay " + dir);
  CHECK(table.status == 0);
  CHECK(table.out.find("Fidelity: identical") != std::string::npos);
}

TEST_CASE("replay and why: a torn or corrupt file is exit 1 naming the file and the offset") {
  const fs::path source = kRoot / "tests/fixtures/record/state/episodes";
  std::string bytes;
  for (const auto& entry : fs::directory_iterator(source)) bytes = slurp(entry.path());
  REQUIRE(!bytes.empty());
  for (std::size_t cut :
       {std::size_t(0), std::size_t(5), std::size_t(12), bytes.size() / 2, bytes.size() - 1}) {
    fs::path torn = write("torn.nwep", bytes.substr(0, cut));
    Run r = run("replay " + quote(torn.string()));
    CHECK(r.status == 1);
    CHECK_MESSAGE(r.err.find(torn.string() + ": offset ") != std::string::npos, r.err);
  }
  std::string flipped = bytes;
  flipped[bytes.size() / 3] ^= 0x01;
  fs::path corrupt = write("corrupt.nwep", flipped);
  Run r = run("replay " + quote(corrupt.string()));
  CHECK(r.status == 1);
  CHECK(r.err.find("CRC mismatch") != std::string::npos);

  // A decision segment with its last line torn.
  const std::string store = slurp(kRoot / "tests/fixtures/record/state/decisions/00000001.nwdr");
  fs::create_directories(scratch() / "torn-state/decisions");
  std::ofstream(scratch() / "torn-state/decisions/00000001.nwdr", std::ios::binary)
      << store.substr(0, store.size() - 10);
  Run why = run("why prod/search --state-dir " + quote((scratch() / "torn-state").string()));
  CHECK(why.status == 1);
  CHECK_MESSAGE(why.err.find("00000001.nwdr: offset ") != std::string::npos, why.err);
  CHECK(why.err.find("torn") != std::string::npos);
}

TEST_CASE("tune: the least disruptive threshold that leaves no OOM kill, as a policy file") {
  Run r = run("tune --episodes tests/fixtures/record/state -o json");
  REQUIRE_MESSAGE(r.status == 0, r.err);
  const Json tuned = Json::parse(r.out);
  CHECK(tuned["signal"] == "allocatableMemory.available");
  CHECK(tuned["recordedOomKills"] == 1);
  REQUIRE(tuned["recommended"].is_object());
  CHECK(tuned["recommended"]["oomKillsLeft"] == 0);
  CHECK(tuned["recommended"]["evictions"].get<int>() <=
        tuned["kubeletDefault"]["evictions"].get<int>());
  // The policy file it prints is one check-policy accepts.
  fs::path policy = write("tuned.json", tuned["policy"].dump());
  Run check = run("check-policy " + quote(policy.string()));
  CHECK_MESSAGE(check.status == 0, check.out << check.err);
  Run table = run("tune --episodes tests/fixtures/record/state");
  CHECK(table.status == 0);
  CHECK(table.out.find("Recommended (*)") != std::string::npos);
}

TEST_CASE("why: the records of a pod from the state directory") {
  Run r = run("why search -n prod --state-dir tests/fixtures/record/state -o json");
  REQUIRE_MESSAGE(r.status == 0, r.err);
  const Json answer = Json::parse(r.out);
  CHECK(answer["pod"] == "prod/search");
  REQUIRE(answer["records"].size() == 1);
  CHECK(answer["records"][0]["kind"] == "kernel-oom-kill");
  CHECK(answer["records"][0]["episode"].get<std::string>().ends_with(".nwep"));
  for (const char* member : {"time", "kind", "signal", "observed", "threshold", "rank", "reason",
                             "latencyMs", "episode"}) {
    CHECK_MESSAGE(answer["records"][0].contains(member), member);
  }
  Run evicted = run("why batch/log-shipper --state-dir tests/fixtures/record/state");
  CHECK(evicted.status == 0);
  CHECK(evicted.out.find("evict-dry-run") != std::string::npos);
  Run nothing = run("why default/nobody --state-dir tests/fixtures/record/state");
  CHECK(nothing.status == 0);
  CHECK(nothing.out.find("No decision about default/nobody") != std::string::npos);
}

TEST_CASE("replay, tune, why: usage errors are exit 2") {
  CHECK(run("replay").status == 2);
  CHECK(run("replay x.nwep -o yaml").status == 2);
  CHECK(run("tune").status == 2);
  CHECK(run("tune --episodes tests/fixtures/record/state --signal pid.available").status == 2);
  CHECK(run("why").status == 2);
  CHECK(run("why a/b --agent http://127.0.0.1:1 --state-dir x").status == 2);
  CHECK(run("why ns/name -n other").status == 2);
  CHECK(run("replay --help").status == 0);
  CHECK(run("replay /nonexistent.nwep").status == 1);
}

// `kubectl nodewarden why` finds the cluster exactly as `explain` does (docs/reference.md
// §1.10, §8.4): $KUBECONFIG's files merged, else ~/.kube/config, --context over
// current-context, never the in-cluster service account. Each kubeconfig's user is an exec
// plugin that leaves a mark, so the test sees which context was chosen without a server.
TEST_CASE("why as kubectl nodewarden: the cluster found as kubectl finds it, never in-cluster") {
  const fs::path dir = scratch() / "why-plugin";
  fs::create_directories(dir / "bin");
  fs::create_directories(dir / "home");
  fs::create_symlink(kBinary, dir / "bin" / "kubectl-nodewarden");
  auto kubeconfig = [&](const std::string& file, const std::string& context, bool current) {
    const std::string mark = (dir / (context + ".used")).string();
    const std::string credential =
        R"({"apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential",)"
        R"("status":{"token":"t"}})";
    return write("why-plugin/" + file,
                 std::string(current ? "current-context: " + context + "\n" : "") +
                     "clusters: [{name: " + context +
                     ", cluster: {server: 'http://127.0.0.1:1'}}]\n"
                     "contexts: [{name: " +
                     context + ", context: {cluster: " + context + ", user: " + context +
                     "}}]\n"
                     "users:\n- name: " +
                     context +
                     "\n  user:\n    exec:\n"
                     "      apiVersion: client.authentication.k8s.io/v1\n"
                     "      command: /bin/sh\n"
                     "      args: ['-c', 'touch " +
                     mark + "; echo ''" + credential +
                     "''']\n"
                     "      interactiveMode: Never\n");
  };
  auto plugin = [&](const std::string& env, const std::string& args) {
    static int n = 0;
    const fs::path out = dir / ("out" + std::to_string(++n));
    const fs::path err = dir / ("err" + std::to_string(n));
    const std::string command = "env -u KUBECONFIG HOME=" + quote((dir / "home").string()) + " " +
                                env + " " + quote((dir / "bin/kubectl-nodewarden").string()) + " " +
                                args + " </dev/null >" + quote(out.string()) + " 2>" +
                                quote(err.string());
    const int raw = std::system(command.c_str());
    return Run{WIFEXITED(raw) ? WEXITSTATUS(raw) : -1, slurp(out), slurp(err)};
  };
  // Nothing to read: an error saying where it looked, with no in-cluster attempt after it.
  Run none = plugin("", "why web -n shop");
  CHECK(none.status == 1);
  CHECK(none.err.find("nodewarden why: no kubeconfig: ") != std::string::npos);
  CHECK(none.err.find((dir / "home/.kube/config").string()) != std::string::npos);
  CHECK(none.err.find("service account") == std::string::npos);
  // ~/.kube/config when $KUBECONFIG is not set.
  fs::create_directories(dir / "home/.kube");
  fs::copy_file(kubeconfig("home.yaml", "home", true), dir / "home/.kube/config");
  Run home = plugin("", "why web -n shop");
  CHECK(home.status == 1);  // nothing listens at 127.0.0.1:1
  CHECK(fs::exists(dir / "home.used"));
  CHECK(home.err.find("~/.kube/config") != std::string::npos);
  // $KUBECONFIG's files merged, over ~/.kube/config; --context picks the second file's.
  const fs::path a = kubeconfig("a.yaml", "first", true);
  const fs::path b = kubeconfig("b.yaml", "second", false);
  const std::string list = "KUBECONFIG=" + quote(a.string() + ":" + b.string());
  Run second = plugin(list, "why web -n shop --context second");
  CHECK(second.status == 1);
  CHECK(fs::exists(dir / "second.used"));
  CHECK_FALSE(fs::exists(dir / "first.used"));
  CHECK(second.err.find("(context second)") != std::string::npos);
  Run current = plugin(list, "why web -n shop");
  CHECK(current.status == 1);
  CHECK(fs::exists(dir / "first.used"));
  Run missing = plugin(list, "why web -n shop --context nosuch");
  CHECK(missing.status == 1);
  CHECK(missing.err.find("nosuch") != std::string::npos);
  // The plain binary: the cluster's options without the cluster are a usage error.
  CHECK(run("why web --context second").status == 2);
  CHECK(run("why web --agent-port 1").status == 2);
  CHECK(run("why web --state-dir x --kubeconfig " + quote(a.string())).status == 2);
}
