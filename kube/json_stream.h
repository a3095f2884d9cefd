// The body of a watch, without sockets: the byte stream split into JSON objects, each object
// read as a watch event ({"type": T, "object": O}), and the JSON scanning both need (members
// found without building the document). kube::Client's watch exchange feeds it what it reads;
// tests and the watch fuzzer feed it strings.
//
// Threading: plain values; a WatchDecoder is used from one thread at a time.
#pragma once

#include <cstddef>
#include <functional>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>

#include "policy/json_reader.h"

namespace nodewarden::kube {

// The string at `path` (member names from the top) of JSON text, found without building the
// document: for the members policy::parseKubernetesJsonText drops, such as a List's
// metadata.resourceVersion and metadata.continue. nullopt when absent, not a string, or the
// text is malformed before it. The string is decoded (escapes, \u pairs) but not checked for
// valid UTF-8.
std::optional<std::string> findJsonString(std::string_view text,
                                          std::initializer_list<std::string_view> path);

// A watch event's envelope as written: its "type" (when a string) and the extent of its
// "object" member in the text. nullopt unless the whole text is one JSON object.
struct EventEnvelope {
  std::optional<std::string> type;
  std::optional<std::string_view> object;  // a view into the scanned text
};
std::optional<EventEnvelope> scanEventEnvelope(std::string_view text);

// One watch event's text → {"type": T, "object": O}: O trimmed by
// policy::parseKubernetesJsonText but with its metadata.resourceVersion kept, and complete (a
// Status) for "ERROR" events. Text that is not such an envelope but is valid JSON comes back
// as parsed, for the caller to judge. nullopt with `problem` set when the text is not JSON,
// the object does not parse, or the type is not valid UTF-8.
std::optional<policy::Json> parseWatchEvent(std::string_view text, std::string& problem);

// Splits a byte stream into top-level JSON objects by bracket depth outside strings, however
// the bytes are cut into pieces. A newline inside a string, or an object that starts on a new
// line where the previous one cannot continue, marks a truncated object; bytes outside any
// object (other than whitespace) are "not a JSON object". Both are reported to `onBad` and the
// stream goes on.
class ObjectSplitter {
 public:
  using OnObject = std::function<void(std::string_view text)>;
  using OnBad = std::function<void(std::string_view text, const std::string& problem)>;

  // Calls `onObject` for each object completed by `bytes`, `onBad` for each bad piece, in
  // stream order. Returns early, the rest of `bytes` unread, once `stop` is true (a callback
  // may set it).
  void feed(std::string_view bytes, const OnObject& onObject, const OnBad& onBad, const bool& stop);
  // The end of the stream: reports stray bytes not yet reported. An object still open is
  // left in pending() (the caller knows whether the stream was cut off).
  void finish(const OnBad& onBad);
  // Bytes of the object being read (to bound memory).
  std::size_t pending() const { return current_.size(); }

 private:
  void flushGarbage(const OnBad& onBad);
  void truncated(const OnBad& onBad);

  std::string current_;
  std::string garbage_;
  std::string open_;  // the brackets open in the current object, innermost last
  bool inString_ = false;
  bool escape_ = false;
  bool newline_ = false;
  char last_ = 0;
};

// A watch body's bytes → events: an ObjectSplitter whose objects go through
// parseWatchEvent. Each event reaches `onEvent`; each piece that is not an event reaches
// `onBadEvent` with its text and the problem.
class WatchDecoder {
 public:
  struct Handlers {
    std::function<void(const policy::Json& event)> onEvent;
    std::function<void(std::string_view text, const std::string& problem)> onBadEvent;
  };
  explicit WatchDecoder(Handlers handlers);
  WatchDecoder(const WatchDecoder&) = delete;  // its callbacks hold `this`
  WatchDecoder& operator=(const WatchDecoder&) = delete;

  // As ObjectSplitter::feed: stops early once `stop` is true.
  void feed(std::string_view bytes, const bool& stop);
  void finish();
  std::size_t pending() const { return splitter_.pending(); }

 private:
  void object(std::string_view text);
  void bad(std::string_view text, const std::string& problem);

  Handlers handlers_;
  ObjectSplitter splitter_;
  ObjectSplitter::OnObject onObject_;
  ObjectSplitter::OnBad onBad_;
};

}  // namespace nodewarden::kube
