// A kubeconfig file (YAML as kubectl writes it, or JSON), through kube::loadKubeconfig as
// the agent and the CLI call it. The input is written to a file in a private directory that
// also holds files its relative paths may name (token, ca.crt). Checks: a config that loads
// names a host and a port, and its description names the file.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>

#include "kube/config.h"

namespace {

const std::string& directory() {
  static const std::string dir = [] {
    const char* base = std::getenv("TMPDIR");
    std::string pattern = std::string(base != nullptr && *base != '\0' ? base : "/tmp") +
                          "/fuzz-kubeconfig-XXXXXX";
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
      for (const char* name : {"/config", "/token", "/ca.crt"}) ::unlink((dir + name).c_str());
      ::rmdir(dir.c_str());
    }
  } cleanup;
  (void)cleanup;
  return dir;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string path = directory() + "/config";
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr) std::abort();
  if (size > 0 && std::fwrite(data, 1, size, f) != size) std::abort();
  std::fclose(f);
  auto config = nodewarden::kube::loadKubeconfig(path);
  if (config) {
    if (config->host.empty() || config->port.empty()) std::abort();
    if (config->description.find(path) == std::string::npos) std::abort();
    // The same file with a context named explicitly: the current one, or another.
    (void)nodewarden::kube::loadKubeconfig(path, std::string("default"));
  }
  return 0;
}
