// The demo's last words on its episodes (demo/episodes.h).
#include "demo/episodes.h"

#include <chrono>
#include <cmath>
#include <cstdio>

#include "base/files.h"
#include "record/episode.h"
#include "record/replay.h"

namespace nodewarden::demo {
namespace {

Result<record::Episode> loadEpisode(const std::string& file) {
  auto bytes = readFile(file);
  if (!bytes) return bytes.error();
  auto episode = record::decodeEpisode(*bytes);
  if (!episode) return episode.error().withContext(file);
  return std::move(episode).value();
}

}  // namespace

policy::OrderedJson summarizeEpisodes(const std::vector<std::string>& files, std::ostream& out) {
  policy::OrderedJson all = policy::OrderedJson::array();
  for (const std::string& file : files) {
    auto loaded = loadEpisode(file);
    policy::OrderedJson item;
    item["file"] = file;
    if (!loaded) {
      out << "  episode " << file << ": " << loaded.error().message << "\n";
      item["error"] = loaded.error().message;
      all.push_back(item);
      continue;
    }
    const record::Episode& e = *loaded;
    const auto started = std::chrono::steady_clock::now();
    const record::ReplayResult r = record::replay(e);
    const double ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - started)
            .count();
    const double span =
        e.samples.empty() ? 0 : double(e.samples.back().t - e.samples.front().t) / 1e6;
    const double speedup = ms > 0 ? span / ms : 0;
    char head[256];
    std::snprintf(head, sizeof head, "%zu samples over %.1f s, %zu pods", e.samples.size(),
                  span / 1000, e.pods.size());
    out << "  episode: " << file << " (" << head << ")\n";
    char speed[96];
    std::snprintf(speed, sizeof speed, " in %.1f ms (%.0fx real time)", ms, speedup);
    out << "  replayed with the recorded policy" << speed << ": "
        << (r.fidelity == record::Fidelity::Identical
                ? "identical decisions (the same victims, in the same order, at the same samples)"
                : "DIVERGED at sample " + std::to_string(r.divergence->sample) + ": recorded " +
                      r.divergence->recorded.dump() + ", replayed " + r.divergence->replayed.dump())
        << "\n";
    if (r.simulated) {
      std::string pods;
      for (const auto& d : r.decisions) pods += (pods.empty() ? "" : ", ") + d.pod;
      out << "  had the policy acted: "
          << (pods.empty() ? "no eviction" : "it would have evicted " + pods);
      if (r.prevented) {
        out << "; the kernel's OOM kill " << (*r.prevented ? "prevented" : "NOT prevented");
      }
      if (r.leadTimeMs) {
        char lead[64];
        std::snprintf(lead, sizeof lead, ", %.1f s ahead of it", *r.leadTimeMs / 1000.0);
        out << lead;
      }
      out << "\n";
    }
    item["fidelity"] = std::string(record::toString(r.fidelity));
    policy::OrderedJson decisions = policy::OrderedJson::array();
    for (const auto& d : r.decisions) decisions.push_back(d.pod);
    item["decisions"] = decisions;
    item["simulated"] = r.simulated;
    item["kernelOomKills"] = r.recordedOomKills;
    item["prevented"] =
        r.prevented ? policy::OrderedJson(*r.prevented) : policy::OrderedJson(nullptr);
    item["speedup"] = std::round(speedup);
    all.push_back(item);
  }
  return all;
}

}  // namespace nodewarden::demo
