// kube/json_stream: the watch body without sockets — objects split from bytes however they
// are cut, the event envelope, the trimmed event parse, and findJsonString — on string
// literals.
#include "kube/json_stream.h"

#include <doctest/doctest.h>

#include <string>
#include <utility>
#include <vector>

using nodewarden::kube::findJsonString;
using nodewarden::kube::ObjectSplitter;
using nodewarden::kube::parseWatchEvent;
using nodewarden::kube::scanEventEnvelope;
using nodewarden::kube::WatchDecoder;
using Json = nlohmann::json;

namespace {

struct Split {
  std::vector<std::string> objects;
  std::vector<std::pair<std::string, std::string>> bad;
};

// Feeds `stream` in pieces of `piece` bytes (0: all at once), then finishes.
Split split(const std::string& stream, std::size_t piece = 0) {
  Split out;
  ObjectSplitter splitter;
  const bool never = false;
  ObjectSplitter::OnObject onObject = [&](std::string_view text) {
    out.objects.emplace_back(text);
  };
  ObjectSplitter::OnBad onBad = [&](std::string_view text, const std::string& problem) {
    out.bad.emplace_back(std::string(text), problem);
  };
  if (piece == 0) piece = stream.size() + 1;
  for (std::size_t at = 0; at < stream.size(); at += piece)
    splitter.feed(std::string_view(stream).substr(at, piece), onObject, onBad, never);
  splitter.finish(onBad);
  return out;
}

}  // namespace

TEST_CASE("json_stream: objects are split by depth, wherever the pieces end") {
  const std::string e1 =
      R"({"type":"ADDED","object":{"metadata":{"name":"a\"}{","resourceVersion":"5"}}})";
  const std::string e2 =
      "{\"type\":\"MODIFIED\",\n \"object\": {\"metadata\": {\"name\": \"b\",\n"
      "   \"resourceVersion\": \"6\"}, \"list\": [\n{\"x\": 1},\n{\"y\": [2]}]}\n}";
  const std::string e3 = R"({"type":"BOOKMARK","object":{"metadata":{"resourceVersion":"7"}}})";
  const std::string stream = e1 + e2 + "\r\n  " + e3 + "\n";
  // Every piece size from one byte up: the same objects, nothing bad.
  for (std::size_t piece = 0; piece <= stream.size(); ++piece) {
    CAPTURE(piece);
    Split s = split(stream, piece);
    CHECK(s.bad.empty());
    REQUIRE(s.objects.size() == 3);
    CHECK(s.objects[0] == e1);
    CHECK(s.objects[1] == e2);
    CHECK(s.objects[2] == e3);
  }
}

TEST_CASE("json_stream: stray text, and objects cut off, are reported and the stream goes on") {
  SUBCASE("text outside any object is one bad piece per line") {
    Split s = split("garbage here\n{\"a\":1}\n  \n[1,2]\n");
    REQUIRE(s.objects.size() == 1);
    CHECK(s.objects[0] == "{\"a\":1}");
    REQUIRE(s.bad.size() == 2);
    CHECK(s.bad[0] ==
          std::make_pair(std::string("garbage here"), std::string("not a JSON object")));
    CHECK(s.bad[1] == std::make_pair(std::string("[1,2]"), std::string("not a JSON object")));
  }
  SUBCASE("stray text at the very end is reported by finish()") {
    Split s = split("{\"a\":1}\ntail");
    REQUIRE(s.bad.size() == 1);
    CHECK(s.bad[0].first == "tail");
  }
  SUBCASE("a line break inside a string: the object was cut off") {
    Split s = split("{\"type\":\"MODIFIED\",\"object\":{\"name\":\"tr\n{\"b\":2}\n");
    REQUIRE(s.bad.size() == 1);
    CHECK(s.bad[0].first == "{\"type\":\"MODIFIED\",\"object\":{\"name\":\"tr");
    CHECK(s.bad[0].second == "truncated JSON object");
    REQUIRE(s.objects.size() == 1);
    CHECK(s.objects[0] == "{\"b\":2}");
  }
  SUBCASE("a new object on a new line where the last one cannot go on") {
    Split s = split("{\"a\": {\"b\": 1\n{\"c\":3}\n");
    REQUIRE(s.bad.size() == 1);
    CHECK(s.bad[0].first == "{\"a\": {\"b\": 1\n");
    CHECK(s.bad[0].second == "truncated JSON object");
    REQUIRE(s.objects.size() == 1);
    CHECK(s.objects[0] == "{\"c\":3}");
  }
  SUBCASE("an object still open at the end stays pending") {
    ObjectSplitter splitter;
    const bool never = false;
    int objects = 0, bad = 0;
    splitter.feed(
        "{\"a\": [1, 2", [&](std::string_view) { ++objects; },
        [&](std::string_view, const std::string&) { ++bad; }, never);
    splitter.finish([&](std::string_view, const std::string&) { ++bad; });
    CHECK(objects == 0);
    CHECK(bad == 0);
    CHECK(splitter.pending() == 11);
  }
}

TEST_CASE("json_stream: a callback that sets the stop flag ends the feed at once") {
  ObjectSplitter splitter;
  bool stop = false;
  std::vector<std::string> seen;
  splitter.feed(
      "{\"a\":1}{\"b\":2}{\"c\":3}",
      [&](std::string_view text) {
        seen.emplace_back(text);
        stop = true;
      },
      [](std::string_view, const std::string&) {}, stop);
  REQUIRE(seen.size() == 1);
  CHECK(seen[0] == "{\"a\":1}");
}

TEST_CASE("json_stream: the event envelope's type and the extent of its object") {
  auto envelope = scanEventEnvelope(R"( {"object": {"a": [1, "}"]} , "type": "ADDED"} )");
  REQUIRE(envelope);
  CHECK(envelope->type == "ADDED");
  CHECK(envelope->object == R"({"a": [1, "}"]})");
  CHECK_FALSE(scanEventEnvelope(R"({"type": "ADDED"} trailing)"));
  CHECK_FALSE(scanEventEnvelope(R"({"type": "ADDED", "object": })"));
  CHECK_FALSE(scanEventEnvelope("[]"));
  auto empty = scanEventEnvelope("{}");
  REQUIRE(empty);
  CHECK_FALSE(empty->type);
  CHECK_FALSE(empty->object);
  auto numericType = scanEventEnvelope(R"({"type": 3, "object": {}})");
  REQUIRE(numericType);
  CHECK_FALSE(numericType->type);  // not a string: not a type
}

TEST_CASE("json_stream: a watch event is trimmed, its resourceVersion kept, an ERROR kept whole") {
  std::string problem;
  auto added = parseWatchEvent(
      R"({"type":"ADDED","object":{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p",
          "namespace":"d","resourceVersion":"42","managedFields":[{"manager":"x"}]},
          "spec":{"nodeName":"n"}}})",
      problem);
  REQUIRE_MESSAGE(added, problem);
  CHECK((*added)["type"] == "ADDED");
  CHECK((*added)["object"]["metadata"]["name"] == "p");
  CHECK((*added)["object"]["metadata"]["resourceVersion"] == "42");
  CHECK_FALSE((*added)["object"]["metadata"].contains("managedFields"));
  CHECK_FALSE((*added)["object"].contains("apiVersion"));

  auto error = parseWatchEvent(
      R"j({"type":"ERROR","object":{"kind":"Status","apiVersion":"v1","status":"Failure",
          "message":"too old resource version: 1 (5)","reason":"Expired","code":410}})j",
      problem);
  REQUIRE(error);
  CHECK((*error)["object"]["code"] == 410);
  CHECK((*error)["object"]["kind"] == "Status");

  auto other = parseWatchEvent(R"({"kind":"Status","code":500})", problem);
  REQUIRE(other);  // valid JSON but no envelope: passed on as parsed
  CHECK((*other)["code"] == 500);

  problem.clear();
  CHECK_FALSE(parseWatchEvent(R"({"type":"ADDED","object":{"metadata":{"name": x}}})", problem));
  CHECK(problem ==
        "invalid JSON at line 1, column 47: syntax error while parsing value - invalid literal; "
        "last read: '\"name\": x'");
  problem.clear();
  CHECK_FALSE(parseWatchEvent("{\"type\":\"ADD\xdc\xad\xa2\",\"object\":{}}", problem));
  CHECK(problem == "type: not valid UTF-8");
}

TEST_CASE("json_stream: WatchDecoder gives events and bad events in stream order") {
  std::vector<std::string> order;
  WatchDecoder decoder(WatchDecoder::Handlers{
      [&](const Json& event) { order.push_back("event " + event.value("type", "")); },
      [&](std::string_view text, const std::string& problem) {
        order.push_back("bad " + std::string(text) + ": " + problem);
      }});
  const bool never = false;
  const std::string stream =
      "{\"type\":\"ADDED\",\"object\":{\"metadata\":{\"name\":\"a\"}}}\n"
      "oops\n"
      "{\"type\":\"DELETED\",\"object\":{\"metadata\":{\"name\": nope}}}\n"
      "{\"type\":\"BOOKMARK\",\"object\":{\"metadata\":{\"resourceVersion\":\"9\"}}}\n";
  for (std::size_t at = 0; at < stream.size(); at += 5) decoder.feed(stream.substr(at, 5), never);
  decoder.finish();
  REQUIRE(order.size() == 4);
  CHECK(order[0] == "event ADDED");
  CHECK(order[1] == "bad oops: not a JSON object");
  CHECK(order[2].starts_with("bad {\"type\":\"DELETED\""));
  CHECK(order[3] == "event BOOKMARK");
  CHECK(decoder.pending() == 0);
}

TEST_CASE("json_stream: findJsonString finds a string member without building the document") {
  std::string list = R"({"kind":"PodList","items":[{"metadata":{"resourceVersion":"1"}}],
                         "metadata":{"continue":"ab\u003d","resourceVersion":"42"}})";
  CHECK(findJsonString(list, {"metadata", "resourceVersion"}) == "42");
  CHECK(findJsonString(list, {"metadata", "continue"}) == "ab=");
  CHECK(findJsonString(list, {"kind"}) == "PodList");
  CHECK_FALSE(findJsonString(list, {"metadata", "name"}));
  CHECK_FALSE(findJsonString(list, {"items"}));
  CHECK_FALSE(findJsonString(R"({"a":[1,2,}, "kind":"x"})", {"kind"}));
  CHECK(findJsonString(R"({"s":"\ud83d\ude00 \n\t\\"})", {"s"}) == "\xf0\x9f\x98\x80 \n\t\\");
  CHECK_FALSE(findJsonString(R"({"s":"\uZZZZ"})", {"s"}));
  CHECK_FALSE(findJsonString("{\"s\":\"raw\ncontrol\"}", {"s"}));
}
