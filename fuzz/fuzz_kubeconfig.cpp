// A kubeconfig file (any YAML kubectl reads — block or flow style, anchors, YAML 1.1 scalars —
// or JSON), through kube::loadKubeconfig as the CLI calls it, and two files merged as
// $KUBECONFIG lists them (kube::loadKubeconfigList). The input is written to files in a
// private directory that also holds files their relative paths may name (token, ca.crt).
//   Without the separator "\n--->8---\n": one file, loaded alone and with a context named.
//   With it: the text before and after are two files, merged in both orders with a missing
//   file and an empty name between them.
// Checks: a config that loads names a host and a port, and its description names the file(s);
// a single file merged alone loads exactly as it does alone.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <string_view>

#include "kube/config.h"

namespace {

const std::string& directory() {
  static const std::string dir = [] {
    const char* base = std::getenv("TMPDIR");
    std::string pattern =
        std::string(base != nullptr && *base != '\0' ? base : "/tmp") + "/fuzz-kubeconfig-XXXXXX";
    if (::mkdtemp(pattern.data()) == nullptr) std::abort();
    for (const char* name : {"token", "ca.crt"}) {
      std::FILE* f = std::fopen((pattern + "/" + name).c_str(), "wb");
      if (f == nullptr) std::abort();
      std::fputs("x\n", f);
      std::fclose(f);
    }
    return pattern;
  }();
  // Removes the directory at exit (libFuzzer and the replay driver both exit normally).
  static const struct Cleanup {
    ~Cleanup() {
      for (const char* name : {"/config", "/second", "/token", "/ca.crt"})
        ::unlink((dir + name).c_str());
      ::rmdir(dir.c_str());
    }
  } cleanup;
  (void)cleanup;
  return dir;
}

void writeFile(const std::string& path, std::string_view text) {
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr) std::abort();
  if (!text.empty() && std::fwrite(text.data(), 1, text.size(), f) != text.size()) std::abort();
  std::fclose(f);
}

void checkLoaded(const nodewarden::Result<nodewarden::kube::ClusterConfig>& config,
                 const std::string& path) {
  if (!config) return;
  if (config->host.empty() || config->port.empty()) std::abort();
  if (config->description.find(path) == std::string::npos) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  namespace kube = nodewarden::kube;
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  const std::string first = directory() + "/config";
  const std::string second = directory() + "/second";
  constexpr std::string_view kSplit = "\n--->8---\n";
  const auto split = input.find(kSplit);
  if (split == std::string_view::npos) {
    writeFile(first, input);
    auto config = kube::loadKubeconfig(first);
    checkLoaded(config, first);
    // The same file as a list of one: the same answer.
    auto listed = kube::loadKubeconfigList({first});
    if (!listed || listed->ok() != config.ok()) std::abort();
    if (config && (listed->value().host != config->host || listed->value().port != config->port ||
                   listed->value().token != config->token))
      std::abort();
    // The same file with a context named explicitly: the current one, or another.
    if (config) (void)kube::loadKubeconfig(first, std::string("default"));
    return 0;
  }
  writeFile(first, input.substr(0, split));
  writeFile(second, input.substr(split + kSplit.size()));
  const std::string missing = directory() + "/missing";
  for (const auto& list : {std::vector<std::string>{first, missing, "", second},
                           std::vector<std::string>{second, first}}) {
    auto merged = kube::loadKubeconfigList(list);
    if (!merged) std::abort();  // both files exist
    checkLoaded(*merged, list.front() == first ? first : second);
  }
  return 0;
}
