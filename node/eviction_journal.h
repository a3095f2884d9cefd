// The evictions under way, kept on local disk so that an agent restarted in the middle of
// one (SIGKILLed, OOM-killed, upgraded) finishes it — once, at the kill time first given —
// and does not choose a second victim for memory the first is still freeing.
//
// One JSON file, rewritten atomically on every order and every completion (base/files.h);
// times are wall-clock (the steady clock does not survive a restart). A file that does not
// parse is ignored with a warning: the agent then decides afresh, as if it had none.
//
// Threading: the agent's loop thread; a few hundred bytes per eviction in flight.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "base/result.h"
#include "policy/policy.h"

namespace nodewarden::node {

using WallTime = std::chrono::system_clock::time_point;

struct JournalEntry {
  std::string uid;
  std::string pod;  // namespace/name
  policy::Signal signal = policy::Signal::MemoryAvailable;
  bool hard = true;
  std::string message;
  WallTime orderedAt{};  // SIGTERM (or the kill, with no grace) was sent
  WallTime killAt{};     // SIGKILL is due: orderedAt + the grace period
};

class EvictionJournal {
 public:
  explicit EvictionJournal(std::string path) : path_(std::move(path)) {}

  // The entries of the file. An error for a missing file (ENOENT in sysErrno) or one that
  // does not parse (an entry without uid, an unknown signal, …: the whole file is refused).
  Result<std::vector<JournalEntry>> load() const;
  // Adds or replaces the pod's entry, or removes it; the file is rewritten either way.
  Result<void> record(const JournalEntry& entry);
  Result<void> remove(const std::string& uid);
  // Takes over what load() returned, without writing.
  void adopt(const std::vector<JournalEntry>& entries);

  const std::string& path() const { return path_; }
  std::size_t size() const { return entries_.size(); }

 private:
  Result<void> write() const;
  std::string path_;
  std::map<std::string, JournalEntry> entries_;
};

}  // namespace nodewarden::node
