#include "node/eviction_journal.h"

#include "base/files.h"
#include "policy/json_reader.h"

namespace nodewarden::node {

namespace {

constexpr const char* kKind = "NodewardenEvictionJournal";

std::int64_t unixMillis(WallTime t) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(t.time_since_epoch()).count();
}

WallTime fromUnixMillis(std::int64_t ms) {
  return WallTime(std::chrono::duration_cast<WallTime::duration>(std::chrono::milliseconds(ms)));
}

}  // namespace

Result<std::vector<JournalEntry>> EvictionJournal::load() const {
  auto text = readFile(path_);
  if (!text) return text.error();
  const policy::Json file = policy::Json::parse(*text, nullptr, false);
  if (file.is_discarded() || !file.is_object() || file.value("kind", "") != kKind) {
    return Error{path_ + ": not an eviction journal (cut short?)"};
  }
  auto items = file.find("evictions");
  if (items == file.end() || !items->is_array()) {
    return Error{path_ + ": evictions: expected a list"};
  }
  std::vector<JournalEntry> entries;
  for (std::size_t i = 0; i < items->size(); ++i) {
    const policy::Json& item = (*items)[i];
    const std::string where = path_ + ": evictions[" + std::to_string(i) + "]";
    if (!item.is_object()) return Error{where + ": expected an object"};
    JournalEntry entry;
    EvictionOrder& order = entry.order;
    order.uid = item.value("uid", "");
    order.pod = item.value("pod", "");
    auto signal = policy::parseSignal(item.value("signal", ""));
    if (order.uid.empty() || !signal || !item.contains("orderedAtMs") ||
        !item["orderedAtMs"].is_number_integer() || !item.contains("killAtMs") ||
        !item["killAtMs"].is_number_integer()) {
      return Error{where + ": expected uid, signal, orderedAtMs and killAtMs"};
    }
    order.threshold = {*signal, item.value("hard", true)};
    order.message = item.value("message", "");
    entry.orderedAt = fromUnixMillis(item["orderedAtMs"].get<std::int64_t>());
    entry.killAt = fromUnixMillis(item["killAtMs"].get<std::int64_t>());
    entries.push_back(std::move(entry));
  }
  return entries;
}

void EvictionJournal::adopt(const std::vector<JournalEntry>& entries) {
  entries_.clear();
  for (const JournalEntry& entry : entries) entries_[entry.order.uid] = entry;
}

Result<void> EvictionJournal::record(const std::vector<JournalEntry>& entries) {
  if (entries.empty()) return {};
  for (const JournalEntry& entry : entries) entries_[entry.order.uid] = entry;
  return write();
}

Result<void> EvictionJournal::remove(const std::string& uid) {
  if (entries_.erase(uid) == 0) return {};
  return write();
}

Result<void> EvictionJournal::write() const {
  policy::Json file;
  file["kind"] = kKind;
  file["evictions"] = policy::Json::array();
  for (const auto& [uid, entry] : entries_) {
    const EvictionOrder& order = entry.order;
    file["evictions"].push_back({{"uid", order.uid},
                                 {"pod", order.pod},
                                 {"signal", std::string(policy::toString(order.threshold.signal))},
                                 {"hard", order.threshold.hard},
                                 {"message", order.message},
                                 {"orderedAtMs", unixMillis(entry.orderedAt)},
                                 {"killAtMs", unixMillis(entry.killAt)}});
  }
  return writeFileAtomically(path_, file.dump() + "\n");
}

}  // namespace nodewarden::node
