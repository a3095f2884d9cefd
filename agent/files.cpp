#include "agent/files.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <iostream>
#include <iterator>
#include <sstream>

namespace nodewarden::agent {
namespace {

Error prefixed(const std::string& file, const policy::Diagnostics& diagnostics) {
  std::string out;
  for (const auto& e : diagnostics.errors()) {
    if (!out.empty()) out += '\n';
    out += file + ": " + e.message;
  }
  return Error{out};
}

}  // namespace

Result<std::string> readFile(const std::string& path) {
  if (path == "-") {
    std::ostringstream buffer;
    buffer << std::cin.rdbuf();
    return buffer.str();
  }
  struct stat info {};
  if (::stat(path.c_str(), &info) != 0) {
    return Error{"cannot read " + path + ": " + std::strerror(errno)};
  }
  if (S_ISDIR(info.st_mode)) return Error{"cannot read " + path + ": Is a directory"};
  std::ifstream in(path, std::ios::binary);
  if (!in) return Error{"cannot read " + path + ": " + std::strerror(errno)};
  std::string text;
  in.seekg(0, std::ios::end);
  const std::streamoff size = in.tellg();
  in.seekg(0, std::ios::beg);
  if (size > 0) {
    text.resize(std::size_t(size));
    in.read(text.data(), size);
    text.resize(std::size_t(in.gcount()));
  } else {
    // Not seekable (a pipe, /proc): read to the end, within a bound.
    in.clear();
    constexpr std::size_t kMaxUnsizedRead = std::size_t(1) << 30;
    char buffer[1 << 16];
    while (in.read(buffer, sizeof buffer) || in.gcount() > 0) {
      text.append(buffer, std::size_t(in.gcount()));
      if (text.size() > kMaxUnsizedRead) {
        return Error{"cannot read " + path + ": larger than 1 GiB"};
      }
    }
  }
  if (in.bad()) return Error{"cannot read " + path + ": " + std::strerror(errno)};
  return text;
}

Result<policy::Policy> loadPolicy(const std::string* path) {
  if (path == nullptr) return policy::Policy::defaults();
  auto text = readFile(*path);
  if (!text) return text.error();
  policy::Diagnostics diagnostics;
  auto parsed = policy::parsePolicyText(text.value(), diagnostics);
  const std::string name = *path == "-" ? "<stdin>" : *path;
  if (!parsed) return prefixed(name, diagnostics);
  for (auto& warning : parsed->warnings) warning = name + ": " + warning;
  return *parsed;
}

Result<policy::Snapshot> loadSnapshot(const std::string& path) {
  auto text = readFile(path);
  if (!text) return text.error();
  policy::Diagnostics diagnostics;
  auto parsed = policy::parseSnapshotText(text.value(), diagnostics);
  if (!parsed) return prefixed(path == "-" ? "<stdin>" : path, diagnostics);
  return std::move(*parsed);
}

Result<policy::Pod> loadPod(const std::string& path, const policy::Snapshot& snapshot) {
  auto text = readFile(path);
  if (!text) return text.error();
  const std::string name = path == "-" ? "<stdin>" : path;
  policy::Diagnostics diagnostics;
  auto json = policy::parseKubernetesJsonText(text.value(), diagnostics);
  if (!json) return prefixed(name, diagnostics);
  auto pod = policy::parsePod(*json, "", diagnostics);
  if (!pod) return prefixed(name, diagnostics);
  policy::resolvePod(*pod, snapshot.priorityClasses);
  return std::move(*pod);
}

}  // namespace nodewarden::agent
