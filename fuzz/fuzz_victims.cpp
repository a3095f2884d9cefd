// Differential: the scheduler's victim selection (SelectVictimsOnNode, docs/reference.md §6)
// done incrementally (policy::selectVictimsOnNode, with the budgets as a list and as a
// PdbIndex) against the naive full re-fit (policy::selectVictimsOnNodeNaive). The input
// bytes describe a small cluster: nodes with cpu, memory, pod and GPU capacity; pods with
// priorities, requests (in containers, init containers and sidecars), labels, start times,
// preemption policies, phases, nominations and deletions; disruption budgets over labels.
// All three selections must agree on every node: fits, victims in order, PDB violations and
// the failing resource. Admission and cluster preemption then run on the same cluster.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "policy/admission.h"

namespace policy = nodewarden::policy;

namespace {

class Bytes {
 public:
  Bytes(const std::uint8_t* data, std::size_t size) : data_(data), size_(size) {}
  unsigned next() { return pos_ < size_ ? data_[pos_++] : 0u; }
  unsigned below(unsigned n) { return next() % n; }

 private:
  const std::uint8_t* data_;
  std::size_t size_;
  std::size_t pos_ = 0;
};

const char* const kApps[] = {"a", "b", "c"};

std::string resources(unsigned cpuMilli, unsigned memoryMi, unsigned gpus) {
  std::string out = R"({"requests": {"cpu": ")" + std::to_string(cpuMilli) + R"(m", "memory": ")" +
                    std::to_string(memoryMi) + "Mi\"";
  if (gpus > 0) out += R"(, "example.com/gpu": ")" + std::to_string(gpus) + "\"";
  return out + "}}";
}

std::string podJson(Bytes& in, const std::string& name, unsigned nodes, bool incoming) {
  const unsigned flags = in.next();
  const int priority = (flags & 0x80) != 0 && !incoming ? 2000000000 : int(in.below(7)) - 1;
  const unsigned node = incoming ? 0 : in.below(nodes + 1);
  const unsigned cpu = in.below(6) * 500;
  const unsigned memory = in.below(5) * 512;
  const unsigned gpus = (flags & 1) != 0 ? 1 + in.below(2) : 0;
  const char* app = kApps[in.below(3)];
  const unsigned minute = in.below(60);
  std::string meta = R"({"name": ")" + name + R"(", "namespace": "ns", "uid": "uid-)" + name +
                     R"(", "labels": {"app": ")" + app + "\"}";
  if ((flags & 2) != 0 && !incoming) meta += R"(, "deletionTimestamp": "2026-01-01T00:00:00Z")";
  meta += "}";
  std::string spec = R"({"priority": )" + std::to_string(priority);
  if (node > 0) spec += R"(, "nodeName": "node-)" + std::to_string(node - 1) + "\"";
  if ((flags & 4) != 0) spec += R"(, "preemptionPolicy": "Never")";
  if ((flags & 32) != 0) {
    const bool sidecar = (flags & 64) != 0;
    spec += R"(, "initContainers": [{"name": "init", )";
    if (sidecar) spec += R"("restartPolicy": "Always", )";
    spec += R"("resources": )" + resources(in.below(6) * 500, in.below(5) * 512, 0) + "}]";
  }
  spec += R"(, "containers": [{"name": "c", "resources": )" + resources(cpu, memory, gpus) + "}]}";
  std::string status = R"({"phase": ")";
  status += node == 0 ? "Pending" : ((flags & 8) != 0 ? "Succeeded" : "Running");
  status += R"(", "startTime": "2026-01-01T00:)" + std::string(minute < 10 ? "0" : "") +
            std::to_string(minute) + ":00Z\"";
  if (node == 0 && (flags & 16) != 0 && !incoming) {
    status += R"(, "nominatedNodeName": "node-)" + std::to_string(in.below(nodes)) + "\"";
  }
  if ((flags & 64) != 0 && (flags & 32) == 0 && !incoming) {
    status += R"(, "conditions": [{"type": "DisruptionTarget", "status": "True"}])";
  }
  status += "}";
  return R"({"metadata": )" + meta + R"(, "spec": )" + spec + R"(, "status": )" + status + "}";
}

std::string clusterJson(Bytes& in) {
  const unsigned nodes = 1 + in.below(3);
  std::string out = R"({"nodes": [)";
  for (unsigned i = 0; i < nodes; ++i) {
    const unsigned gpus = in.below(3);
    out += (i ? "," : "") + std::string(R"({"metadata": {"name": "node-)") + std::to_string(i) +
           R"("}, "status": {"allocatable": {"cpu": ")" + std::to_string(1 + in.below(8)) +
           R"(", "memory": ")" + std::to_string(1 + in.below(8)) + R"(Gi", "pods": ")" +
           std::to_string(1 + in.below(12)) + "\"" +
           (gpus > 0 ? R"(, "example.com/gpu": ")" + std::to_string(gpus) + "\"" : "") + "}}}";
  }
  out += R"(], "pods": [)";
  const unsigned pods = in.below(14);
  for (unsigned j = 0; j < pods; ++j) {
    out += (j ? "," : "") + podJson(in, "p" + std::to_string(j), nodes, false);
  }
  out += (pods ? "," : "") + podJson(in, "incoming", nodes, true);
  out += R"(], "podDisruptionBudgets": [)";
  const unsigned budgets = in.below(3);
  for (unsigned k = 0; k < budgets; ++k) {
    const unsigned kind = in.below(3);
    std::string selector;
    if (kind == 0) {
      selector = R"({"matchLabels": {"app": ")" + std::string(kApps[in.below(3)]) + "\"}}";
    } else if (kind == 1) {
      selector =
          R"({"matchExpressions": [{"key": "app", "operator": "In", "values": ["a", "b"]}]})";
    } else {
      selector = "{}";
    }
    out += (k ? "," : "") + std::string(R"({"metadata": {"name": "pdb-)") + std::to_string(k) +
           R"(", "namespace": "ns"}, "spec": {"selector": )" + selector +
           R"(}, "status": {"disruptionsAllowed": )" + std::to_string(in.below(3)) + "}}";
  }
  return out + "]}";
}

std::vector<std::string> keys(const std::vector<const policy::Pod*>& pods) {
  std::vector<std::string> out;
  for (const auto* p : pods) out.push_back(p->key);
  return out;
}

void expectSame(const policy::VictimSelection& a, const policy::VictimSelection& b) {
  if (a.fits != b.fits) std::abort();
  if (keys(a.victims) != keys(b.victims)) std::abort();
  if (a.numPDBViolations != b.numPDBViolations) std::abort();
  if (!a.fits && a.failedResource != b.failedResource) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  Bytes in(data, size);
  const std::string text = clusterJson(in);
  policy::Diagnostics diagnostics;
  auto snapshot = policy::parseSnapshotText(text, diagnostics);
  if (!snapshot) {  // the generator writes only valid clusters
    std::fprintf(stderr, "%s\n%s\n", text.c_str(), diagnostics.joined().c_str());
    std::abort();
  }
  const policy::Pod* incoming = nullptr;
  for (const auto& p : snapshot->pods) {
    if (p.name == "incoming") incoming = &p;
  }
  if (incoming == nullptr) std::abort();
  const policy::Policy rules = policy::Policy::defaults();
  const policy::ClusterIndex cluster = policy::buildClusterIndex(*snapshot);
  const policy::PdbIndex pdbIndex = policy::indexPdbs(snapshot->podDisruptionBudgets);
  for (const auto& info : cluster.nodes) {
    auto fast = policy::selectVictimsOnNode(*incoming, info, snapshot->podDisruptionBudgets, rules);
    auto indexed = policy::selectVictimsOnNode(*incoming, info, pdbIndex, rules);
    auto naive =
        policy::selectVictimsOnNodeNaive(*incoming, info, snapshot->podDisruptionBudgets, rules);
    expectSame(fast, naive);
    expectSame(indexed, naive);
    (void)policy::admissionToJson(
        policy::admitPod(*incoming, info, snapshot->podDisruptionBudgets, rules));
  }
  (void)policy::preemptionToJson(
      policy::preemptCluster(*incoming, cluster, snapshot->podDisruptionBudgets, rules));
  return 0;
}
