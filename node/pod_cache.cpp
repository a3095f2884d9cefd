#include "node/pod_cache.h"

#include <openssl/evp.h>

#include "base/files.h"

namespace nodewarden::node {

namespace {

constexpr const char* kKind = "NodewardenPodListCache";

std::string keyOf(const policy::Json& object) {
  if (!object.is_object()) return {};
  auto meta = object.find("metadata");
  if (meta == object.end() || !meta->is_object()) return {};
  auto name = meta->find("name");
  if (name == meta->end() || !name->is_string()) return {};
  auto ns = meta->find("namespace");
  std::string key = ns != meta->end() && ns->is_string() ? ns->get<std::string>() + "/" : "/";
  return key + name->get<std::string>();
}

std::string sha256Hex(const std::string& data) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int size = 0;
  if (EVP_Digest(data.data(), data.size(), digest, &size, EVP_sha256(), nullptr) != 1) return {};
  static const char* hex = "0123456789abcdef";
  std::string out;
  for (unsigned int i = 0; i < size; ++i) {
    out += hex[digest[i] >> 4];
    out += hex[digest[i] & 15];
  }
  return out;
}

}  // namespace

PodListCache::PodListCache(std::string path, std::string nodeName, kube::StoreSink& next)
    : path_(std::move(path)), nodeName_(std::move(nodeName)), next_(next) {}

void PodListCache::replace(std::vector<policy::Json> items) {
  objects_.clear();
  for (const policy::Json& item : items) {
    std::string key = keyOf(item);
    if (!key.empty()) objects_.insert_or_assign(std::move(key), item);
  }
  dirty_ = true;
  next_.replace(std::move(items));
}

void PodListCache::apply(const std::string& type, const policy::Json& object) {
  const std::string key = keyOf(object);
  if (!key.empty()) {
    if (type == "DELETED") {
      objects_.erase(key);
    } else {
      objects_.insert_or_assign(key, object);
    }
    dirty_ = true;
  }
  next_.apply(type, object);
}

Result<void> PodListCache::flush() {
  if (!dirty_) return {};
  policy::Json items = policy::Json::array();
  for (const auto& [key, object] : objects_) items.push_back(object);
  const std::string itemsText = items.dump();
  policy::Json file;
  file["kind"] = kKind;
  file["node"] = nodeName_;
  file["sha256"] = sha256Hex(itemsText);
  file["items"] = std::move(items);
  auto written = writeFileAtomically(path_, file.dump() + "\n");
  if (written) dirty_ = false;
  return written;
}

Result<std::vector<policy::Json>> PodListCache::load(const std::string& path,
                                                     const std::string& nodeName) {
  auto text = readFile(path);
  if (!text) return text.error();
  policy::Json file = policy::Json::parse(*text, nullptr, false);
  if (file.is_discarded() || !file.is_object()) {
    return Error{path + ": not JSON (cut short?)"};
  }
  if (file.value("kind", "") != kKind) return Error{path + ": kind is not " + std::string(kKind)};
  if (file.value("node", "") != nodeName) {
    return Error{path + ": written for node \"" + file.value("node", "") + "\", not \"" + nodeName +
                 "\""};
  }
  auto items = file.find("items");
  if (items == file.end() || !items->is_array()) return Error{path + ": items: expected a list"};
  if (file.value("sha256", "") != sha256Hex(items->dump())) {
    return Error{path + ": sha256 does not match its items (cut short or edited)"};
  }
  return items->get<std::vector<policy::Json>>();
}

}  // namespace nodewarden::node
