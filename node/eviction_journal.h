// The evictions under way, kept on local disk so that an agent restarted in the middle of
// one (SIGKILLed, OOM-killed, upgraded) finishes it — once, at the kill time first given —
// and does not choose a second victim for memory the first is still freeing.
//
// One JSON file, rewritten atomically (base/files.h: written, fsync'd, renamed) once for the
// orders of a decision — after their first signals were sent, so no disk is waited on before
// a kill — and on every completion. Times are wall-clock (the steady clock does not survive a
// restart). A file that does not parse is ignored with a warning: the agent then decides
// afresh, as if it had none.
//
// What a restart finds: an order is in the file from the moment its decision's signals went
// out until its pod is empty. An agent killed in the microseconds between a first signal and
// the write leaves no entry: its successor decides afresh, sees the SIGTERMed pod still
// running and orders it again — with a fresh grace period, and still one victim for the
// signal, never a second pod.
//
// Threading: the agent's loop thread; a few hundred bytes per eviction in flight.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "base/result.h"
#include "node/eviction_order.h"

namespace nodewarden::node {

using WallTime = std::chrono::system_clock::time_point;

struct JournalEntry {
  EvictionOrder order;   // uid, pod, threshold and message are kept (not the grace: killAt)
  WallTime orderedAt{};  // SIGTERM (or the kill, with no grace) was sent
  WallTime killAt{};     // SIGKILL is due: orderedAt + the grace period
};

class EvictionJournal {
 public:
  explicit EvictionJournal(std::string path) : path_(std::move(path)) {}

  // The entries of the file. An error for a missing file (ENOENT in sysErrno) or one that
  // does not parse (an entry without uid, an unknown signal, …: the whole file is refused).
  Result<std::vector<JournalEntry>> load() const;
  // Adds or replaces the pods' entries (one rewrite for all), or removes one.
  Result<void> record(const std::vector<JournalEntry>& entries);
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
