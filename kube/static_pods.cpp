#include "kube/static_pods.h"

#include <openssl/evp.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <system_error>

#include "kube/yaml.h"
#include "policy/json_reader.h"

namespace nodewarden::kube {

namespace {

using policy::Json;
namespace fs = std::filesystem;

constexpr std::uintmax_t kMaxManifestBytes = 10 << 20;

struct Parsed {
  policy::Pod pod;
  std::size_t documents = 1;
};

std::string md5Hex(std::string_view data) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int size = 0;
  if (EVP_Digest(data.data(), data.size(), digest, &size, EVP_md5(), nullptr) != 1) return {};
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  for (unsigned int i = 0; i < size; ++i) {
    out += kHex[digest[i] >> 4];
    out += kHex[digest[i] & 15];
  }
  return out;
}

Result<std::vector<Json>> readManifest(std::string_view text) {
  std::size_t first = text.find_first_not_of(" \t\r\n");
  if (first != std::string_view::npos && text[first] == '{') {
    policy::Diagnostics diagnostics;
    auto json = policy::parseJsonText(text, diagnostics);
    if (!json) return Error{diagnostics.joined()};
    return std::vector<Json>{std::move(*json)};
  }
  YamlOptions options;
  options.stringMapMembers = {"labels", "annotations", "nodeSelector"};
  return readYamlDocuments(text, options);
}

// pkg/kubelet/config/common.go applyDefaults, on the JSON before the pod parser reads it.
Result<void> applyStaticPodDefaults(Json& manifest, const std::string& file,
                                    const std::string& nodeName) {
  auto kind = manifest.find("kind");
  if (kind == manifest.end() || !kind->is_string() || *kind != "Pod")
    return Error{"kind: expected \"Pod\", got " +
                 (kind == manifest.end() ? std::string("nothing") : kind->dump())};
  auto apiVersion = manifest.find("apiVersion");
  if (apiVersion == manifest.end() || !apiVersion->is_string() || *apiVersion != "v1")
    return Error{"apiVersion: expected \"v1\", got " +
                 (apiVersion == manifest.end() ? std::string("nothing") : apiVersion->dump())};
  Json& meta = manifest["metadata"];
  if (!meta.is_object()) return Error{"metadata: missing (a pod needs metadata.name)"};
  auto name = meta.find("name");
  if (name == meta.end() || !name->is_string() || name->get_ref<const std::string&>().empty())
    return Error{"metadata.name: missing (a string is required)"};
  const std::string manifestName = *name;

  std::string uid;
  if (auto it = meta.find("uid"); it != meta.end() && it->is_string()) uid = *it;
  if (uid.empty()) {
    uid = md5Hex(manifest.dump() + "host:" + nodeName + "file:" + file);
    meta["uid"] = uid;
  }
  std::string lowerNode = nodeName;
  std::transform(lowerNode.begin(), lowerNode.end(), lowerNode.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  meta["name"] = manifestName + "-" + lowerNode;
  auto ns = meta.find("namespace");
  if (ns == meta.end() || ns->is_null() || *ns == "") meta["namespace"] = "default";
  Json& annotations = meta["annotations"];
  if (annotations.is_null()) annotations = Json::object();
  if (!annotations.is_object()) return Error{"metadata.annotations: expected a mapping"};
  annotations["kubernetes.io/config.source"] = "file";
  annotations["kubernetes.io/config.hash"] = uid;

  Json& spec = manifest["spec"];
  if (spec.is_null()) spec = Json::object();
  if (!spec.is_object()) return Error{"spec: expected a mapping"};
  spec["nodeName"] = nodeName;
  // "so they are not evicted when there are node problems" (the kubelet's comment).
  Json& tolerations = spec["tolerations"];
  if (tolerations.is_null()) tolerations = Json::array();
  if (!tolerations.is_array()) return Error{"spec.tolerations: expected a list"};
  const Json noExecute = {{"operator", "Exists"}, {"effect", "NoExecute"}};
  bool present = std::any_of(tolerations.begin(), tolerations.end(), [&](const Json& t) {
    return t.is_object() && t.value("operator", "") == "Exists" && !t.contains("key") &&
           t.value("effect", "") == "NoExecute" && !t.contains("tolerationSeconds");
  });
  if (!present) tolerations.push_back(noExecute);
  return {};
}

Result<Parsed> parseManifest(std::string_view text, const std::string& file,
                             const std::string& nodeName) {
  auto documents = readManifest(text);
  if (!documents) return documents.error();
  if (documents->empty()) return Error{"empty manifest"};
  Json& manifest = documents->front();
  if (!manifest.is_object()) return Error{"expected a Pod object at the top"};
  if (auto applied = applyStaticPodDefaults(manifest, file, nodeName); !applied)
    return applied.error();
  policy::Diagnostics diagnostics;
  auto pod = policy::parsePod(manifest, "", diagnostics);
  if (!pod || !diagnostics.empty()) return Error{diagnostics.joined()};
  policy::resolvePod(*pod, {});
  return Parsed{std::move(*pod), documents->size()};
}

Result<std::string> readSmallFile(const fs::path& path) {
  std::error_code ec;
  std::uintmax_t size = fs::file_size(path, ec);
  if (ec) return Error{ec.message(), ec.value()};
  if (size > kMaxManifestBytes) return Error{"larger than 10 MiB, not read"};
  std::ifstream in(path, std::ios::binary);
  if (!in) return Error{"cannot open"};
  std::ostringstream out;
  out << in.rdbuf();
  if (in.bad()) return Error{"read error"};
  return out.str();
}

void readOne(const fs::path& path, const std::string& nodeName, StaticPods& out) {
  std::string file = path.string();
  auto text = readSmallFile(path);
  if (!text) {
    out.problems.push_back({file, text.error().message, true});
    return;
  }
  auto parsed = parseManifest(*text, file, nodeName);
  if (!parsed) {
    out.problems.push_back({file, parsed.error().message, true});
    return;
  }
  if (parsed->documents > 1)
    out.problems.push_back({file,
                            std::to_string(parsed->documents - 1) +
                                " YAML document(s) after the first ignored, as by the kubelet",
                            false});
  out.pods.push_back(std::move(parsed->pod));
}

}  // namespace

Result<policy::Pod> parseStaticPod(std::string_view text, const std::string& file,
                                   const std::string& nodeName) {
  auto parsed = parseManifest(text, file, nodeName);
  if (!parsed) return parsed.error();
  return std::move(parsed->pod);
}

StaticPods readStaticPods(const std::string& path, const std::string& nodeName) {
  StaticPods out;
  std::error_code ec;
  fs::file_status status = fs::status(path, ec);
  if (ec || !fs::exists(status)) {
    if (ec && ec != std::errc::no_such_file_or_directory)
      out.problems.push_back({path, ec.message(), true});
    return out;
  }
  if (fs::is_regular_file(status)) {
    readOne(path, nodeName, out);
    return out;
  }
  if (!fs::is_directory(status)) {
    out.problems.push_back({path, "neither a directory nor a file", true});
    return out;
  }
  std::vector<fs::path> entries;
  fs::directory_iterator it(path, ec);
  if (ec) {
    out.problems.push_back({path, ec.message(), true});
    return out;
  }
  for (; it != fs::directory_iterator(); it.increment(ec)) {
    if (ec) break;
    std::string name = it->path().filename().string();
    if (!name.empty() && name[0] != '.') entries.push_back(it->path());
  }
  if (ec) out.problems.push_back({path, ec.message(), true});
  std::sort(entries.begin(), entries.end());
  for (const fs::path& entry : entries) {
    std::error_code statError;
    fs::file_status entryStatus = fs::status(entry, statError);  // follows symbolic links
    if (statError) {
      // Gone since the listing: the kubelet ignores that too.
      if (statError != std::errc::no_such_file_or_directory)
        out.problems.push_back({entry.string(), statError.message(), true});
      continue;
    }
    if (fs::is_directory(entryStatus)) continue;  // the kubelet does not recurse
    if (!fs::is_regular_file(entryStatus)) {
      out.problems.push_back({entry.string(), "neither a directory nor a file", true});
      continue;
    }
    readOne(entry, nodeName, out);
  }
  return out;
}

}  // namespace nodewarden::kube
