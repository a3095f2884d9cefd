// nodewarden: the command-line entry point.
#include <iostream>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "cli/source.h"
#include "demo/run.h"
#include "node/run.h"
#include "webhook/run.h"

namespace {

const char* kUsage =
    "usage: nodewarden COMMAND [OPTIONS]\n"
    "\n"
    "Keeps a Kubernetes node out of the kernel OOM killer's hands and answers what-if\n"
    "questions about eviction offline.\n"
    "\n"
    "Commands:\n"
    "  agent [--policy FILE] [--source static --manifests DIR] [--dry-run] ...\n"
    "                        the node daemon: evicts pods before the kernel OOM killer has to\n"
    "  webhook [--tls-cert FILE --tls-key FILE] [--listen ADDR:PORT] ...\n"
    "                        the cluster's binding admission webhook: admit, reject, wait or\n"
    "                        preempt for every pod the scheduler binds\n"
    "  demo [--scenario FILE] [--baseline] [--report FILE]\n"
    "                        as root: the agent guarding a sandbox node with real processes\n"
    "  explain eviction --snapshot FILE [--node NAME] [--policy FILE] [-o table|json]\n"
    "                        which pods would be evicted under pressure, in what order, why\n"
    "  explain admission --snapshot FILE --node NAME --pod FILE [-o table|json]\n"
    "                        admit, reject, wait or preempt for a pod bound to a node\n"
    "  explain preemption --snapshot FILE --pod FILE [-o table|json]\n"
    "                        where the scheduler would place or preempt for a pending pod\n"
    "  explain --batch FILE  many explain commands in one process, one JSON line each\n"
    "  check-policy FILE     validate an eviction policy file and print it with defaults\n"
    "  status [--agent URL] [--watch] [-o table|json]\n"
    "                        what a running agent sees and decides now\n"
    "  replay EPISODE... [--policy FILE] [-o table|json] [--plot FILE.svg]\n"
    "                        a recorded pressure episode through the decision code: the same\n"
    "                        decisions again, or what another policy would have done\n"
    "  tune --episodes DIR [--signal NAME] [-o table|json]\n"
    "                        the threshold that would have prevented every recorded OOM kill\n"
    "  why POD [-n NS] [--agent URL | --state-dir DIR] [-o table|json]\n"
    "                        why did my pod die: the node's decisions about it\n"
    "  version               print the version\n"
    "\n"
    "Run 'nodewarden COMMAND --help' for a command's options.\n"
    "Exit status: 0 success (whatever the verdict), 1 bad input, 2 usage error.\n";

}  // namespace

int main(int argc, char** argv) {
  using namespace nodewarden;
  using namespace nodewarden::cli;
  std::vector<std::string> args(argv + 1, argv + argc);
  // Installed as kubectl-nodewarden too: `kubectl nodewarden …` (kubectl's plugin discovery).
  const std::string self = argc > 0 ? argv[0] : "";
  const bool plugin = self.substr(self.rfind('/') + 1) == "kubectl-nodewarden";
  setKubectlPluginMode(plugin);
  if (args.empty()) {
    std::cerr << kUsage;
    return kExitUsage;
  }
  const std::string command = args[0];
  std::vector<std::string> rest(args.begin() + 1, args.end());
  if (command == "-h" || command == "--help" || command == "help") {
    std::cout << kUsage;
    return kExitOk;
  }
  if (command == "version" || command == "--version") {
    std::cout << "nodewarden " << NODEWARDEN_VERSION << "\n";
    return kExitOk;
  }
  if (command == "explain") return runExplain(rest, std::cout, std::cerr);
  if (command == "agent") return nodewarden::node::runAgent(rest);
  if (command == "webhook") return nodewarden::webhook::runWebhook(rest);
  if (command == "demo") return nodewarden::demo::runDemo(rest);
  if (command == "demo-load") return nodewarden::demo::runDemoLoad(rest);
  if (command == "check-policy") return runCheckPolicy(rest, std::cout, std::cerr);
  if (command == "status") return runStatus(rest, std::cout, std::cerr);
  if (command == "replay") return runReplay(rest, std::cout, std::cerr);
  if (command == "tune") return runTune(rest, std::cout, std::cerr);
  if (command == "why") return runWhy(rest, std::cout, std::cerr);
  std::cerr << "nodewarden: unknown command \"" << command << "\"\n\n" << kUsage;
  return kExitUsage;
}
