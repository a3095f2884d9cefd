// `nodewarden replay` and `nodewarden tune` (docs/reference.md §8): recorded episodes through
// the decision code (record/replay.h, record/tune.h), for people or programs.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "base/args.h"
#include "base/files.h"
#include "cli/commands.h"
#include "cli/source.h"
#include "record/decisions.h"
#include "record/plot.h"
#include "record/replay.h"
#include "record/tune.h"

namespace nodewarden::cli {
namespace {

namespace fs = std::filesystem;

const char* kReplayUsage =
    "usage: nodewarden replay EPISODE... [--policy FILE] [-o table|json] [--plot FILE.svg]\n"
    "\n"
    "Runs recorded pressure episodes (the agent's STATE_DIR/episodes/*.nwep; a directory stands\n"
    "for the episodes in it) through the decision code the agent runs.\n"
    "\n"
    "Without --policy (or with the policy that was in force) it checks fidelity: the recorded\n"
    "inputs must give the recorded decisions again — the same victims, in the same order, at\n"
    "the same samples — or it says where they diverged. With another policy it answers what\n"
    "that policy would have done: when it acts, whom it evicts, its lead time before the\n"
    "recorded kernel OOM kill (or the limit), how much it evicts against what was needed,\n"
    "beside two bounds: the kernel alone and the perfect-foresight minimum.\n"
    "\n"
    "  --policy FILE        a candidate policy (docs/reference.md §4)\n"
    "  -o, --output FORMAT  table (default) or json (docs/reference.md §8)\n"
    "  --plot FILE.svg      the first episode drawn: each pod's memory, the node's as recorded\n"
    "                       and under the replayed policy, evictions and OOM kills marked\n"
    "\n"
    "Exit status: 0 replayed (whatever the fidelity), 1 an unreadable, truncated or corrupt\n"
    "episode (the message names the file and the byte offset) or policy, 2 usage error.\n";

const char* kTuneUsage =
    "usage: nodewarden tune --episodes DIR [--signal NAME] [-o table|json]\n"
    "\n"
    "Sweeps one memory signal's eviction threshold (hard, and soft with a 5, 10 or 30 s grace\n"
    "period) over the recorded episodes in DIR (or DIR/episodes), replaying each, and prints the\n"
    "trade-off: kernel OOM kills left, pods evicted, false alarms (evictions in an episode\n"
    "where the kernel alone would have killed nothing), the least lead time. It recommends the\n"
    "least disruptive setting that leaves no OOM kill and prints it as a policy file.\n"
    "\n"
    "  --episodes DIR       the episodes (a state directory, or its episodes/ folder)\n"
    "  --signal NAME        memory.available or allocatableMemory.available (default: the\n"
    "                       one the kernel killed on, or came closest to, in most episodes)\n"
    "  -o, --output FORMAT  table (default) or json\n"
    "\n"
    "Exit status: 0 tuned (with or without a recommendation), 1 an unreadable or corrupt\n"
    "episode (named with its byte offset) or no episode at all, 2 usage error.\n";

struct Loaded {
  std::string file;
  record::Episode episode;
};

// The episode files EPISODE names: itself, or the *.nwep files of a directory.
std::vector<std::string> episodeFiles(const std::string& path) {
  std::error_code ec;
  if (!fs::is_directory(path, ec)) return {path};
  std::string dir = path;
  if (fs::is_directory(path + "/episodes", ec)) dir = path + "/episodes";
  std::vector<std::string> files;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    if (name.ends_with(record::kEpisodeSuffix)) files.push_back(entry.path().string());
  }
  std::sort(files.begin(), files.end());
  return files;
}

Result<Loaded> load(const std::string& file) {
  auto bytes = readFile(file);
  if (!bytes) return bytes.error();
  auto episode = record::decodeEpisode(*bytes);
  if (!episode) return episode.error().withContext(file);
  return Loaded{file, std::move(episode).value()};
}

std::string seconds(std::int64_t nanos) {
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%.2f s", double(nanos) / 1e9);
  return buffer;
}

std::string when(const record::Episode& episode) {
  // The wall time of the origin, to the second, in UTC.
  return record::formatRfc3339(episode.originWallMicros).substr(0, 19) + "Z";
}

std::string renderReplay(const Loaded& loaded, const record::ReplayResult& r, double replayMs) {
  const record::Episode& e = loaded.episode;
  std::string out;
  const std::int64_t span = e.samples.empty() ? 0 : e.samples.back().t - e.samples.front().t;
  out += "Episode " + loaded.file + "\n";
  out += "  node " + e.node + ", " + when(e) + ", " + seconds(span) + ", " +
         std::to_string(e.samples.size()) + " samples, " + std::to_string(e.pods.size()) +
         " pods; opened by " + (e.reason.empty() ? "?" : e.reason) + ", ended " +
         (e.endReason.empty() ? "?" : e.endReason) + (e.dryRun ? "; the agent ran --dry-run" : "") +
         "\n";
  out += "Policy: " + r.policyName + "\n";
  switch (r.fidelity) {
    case record::Fidelity::Identical:
      out +=
          "Fidelity: identical — the recorded inputs give the recorded decisions again (" +
          std::to_string(e.samples.size()) + " samples, " +
          std::to_string(std::count_if(e.samples.begin(), e.samples.end(),
                                       [](const record::Sample& s) { return !s.plan.empty(); })) +
          " with a plan)\n";
      break;
    case record::Fidelity::Diverged:
      out += "Fidelity: DIVERGED at sample " + std::to_string(r.divergence->sample) +
             " (t=" + seconds(r.divergence->t) + "): recorded " + r.divergence->recorded.dump() +
             ", replayed " + r.divergence->replayed.dump() + "\n";
      break;
    case record::Fidelity::NotChecked:
      out += "Fidelity: not checked (not the recorded policy)\n";
      break;
  }
  out += std::string("Decisions") +
         (r.simulated ? " (simulated: the recorded demand, with this policy acting)" : "") + ":";
  if (r.decisions.empty()) {
    out += " none\n";
  } else {
    out += "\n";
    std::vector<std::vector<std::string>> rows{{"T", "POD", "SIGNAL", "KIND", "USAGE"}};
    for (const auto& d : r.decisions) {
      rows.push_back({seconds(d.t), d.pod, std::string(policy::toString(d.signal)),
                      d.hard ? "hard" : "soft, grace " + std::to_string(d.gracePeriodSeconds) + "s",
                      humanBytes(d.usage)});
    }
    out += columns(rows, "  ");
  }
  out += "Kernel OOM kills: recorded " + std::to_string(r.recordedOomKills);
  if (r.prevented) {
    out += std::string("; prevented: ") + (*r.prevented ? "yes" : "no");
  }
  if (r.simulated) out += "; left under this policy: " + std::to_string(r.killsLeft);
  out += "\n";
  if (r.leadTimeMs && r.referenceT) {
    char buffer[128];
    std::snprintf(buffer, sizeof buffer, "%.1f s %s", std::abs(*r.leadTimeMs) / 1000.0,
                  *r.leadTimeMs >= 0 ? "before" : "AFTER");
    out += "Lead time: " + std::string(buffer) + " " +
           (!e.oomKills.empty()            ? "the recorded kernel OOM kill"
            : !r.kernelAlone.kills.empty() ? "the kernel alone's first OOM kill"
                                           : "the tightest moment") +
           " (t=" + seconds(*r.referenceT) + ")\n";
  } else {
    out += "Lead time: none (no eviction)\n";
  }
  out += "Evicted: " + humanBytes(r.evictedBytes) +
         "; needed by the policy at the tightest moment: " + humanBytes(r.neededBytes) + " (" +
         std::string(policy::toString(r.limitSignal)) + ", the kernel's line at " +
         humanBytes(r.killLine) + ")\n";
  std::string victims;
  for (const auto& k : r.kernelAlone.kills)
    victims += (victims.empty() ? "" : ", ") + (k.pod.empty() ? "?" : k.pod);
  out += "Bounds: kernel alone: " + std::to_string(r.kernelAlone.kills.size()) + " OOM kill(s)" +
         (victims.empty() ? "" : " (" + victims + ")") +
         (r.kernelAlone.fromRecording ? ", as recorded" : ", simulated") + "; perfect foresight: ";
  if (!r.perfectForesight.feasible) {
    out += "no set of evictable pods would have been enough\n";
  } else {
    std::string pods;
    for (const auto& p : r.perfectForesight.pods) pods += (pods.empty() ? "" : ", ") + p;
    out += std::to_string(r.perfectForesight.pods.size()) + " eviction(s)" +
           (pods.empty() ? ""
                         : " (" + pods + ", " + humanBytes(r.perfectForesight.evictedBytes) + ")") +
           "\n";
  }
  char speed[160];
  const double recorded = double(span) / 1e6;
  std::snprintf(speed, sizeof speed, "Replayed in %.2f ms: %.0fx real time\n", replayMs,
                replayMs > 0 ? recorded / replayMs : 0.0);
  out += speed;
  return out;
}

record::Plot replayPlot(const Loaded& loaded, const record::ReplayResult& r,
                        const policy::Policy& policy) {
  const record::Episode& e = loaded.episode;
  constexpr double kMiB = 1024.0 * 1024.0;
  record::Plot plot;
  plot.title = "replay of " + fs::path(loaded.file).filename().string() + " (" + r.policyName + ")";
  const std::int64_t t0 = e.samples.empty() ? 0 : e.samples.front().t;
  std::map<std::string, std::size_t> seriesOf;
  for (std::size_t i = 0; i < e.samples.size(); ++i) {
    plot.seconds.push_back(double(e.samples[i].t - t0) / 1e9);
  }
  for (std::size_t i = 0; i < e.samples.size(); ++i) {
    for (const record::PodFigures& p : e.samples[i].pods) {
      const std::string key = e.pods[p.pod].key();
      auto [it, added] = seriesOf.emplace(key, plot.series.size());
      if (added) plot.series.push_back({key, std::vector<double>(e.samples.size(), -1.0), false});
      if (p.workingSet) plot.series[it->second].mib[i] = double(*p.workingSet) / kMiB;
    }
  }
  record::PlotSeries node{"node", {}, false};
  for (std::int64_t used : r.recordedUsed) node.mib.push_back(double(used) / kMiB);
  plot.series.push_back(node);
  if (!r.simulatedUsed.empty()) {
    record::PlotSeries what{"node under " + r.policyName, {}, true};
    for (std::int64_t used : r.simulatedUsed) what.mib.push_back(double(used) / kMiB);
    plot.series.push_back(what);
  }
  std::int64_t capacity = 0;
  for (std::int64_t c : r.capacity) capacity = std::max(capacity, c);
  plot.limitMiB = double(capacity) / kMiB;
  for (const policy::Threshold& t : policy.thresholds) {
    if (t.signal != r.limitSignal) continue;
    const double line = double(capacity - t.value.resolve(capacity).value()) / kMiB;
    if (plot.thresholdMiB < 0 || line < plot.thresholdMiB) {
      plot.thresholdMiB = line;
      plot.thresholdLabel = std::string(policy::toString(t.signal)) + " < " + t.value.text +
                            (t.hard() ? "" : " (soft)");
    }
  }
  for (const record::Order& o : e.orders) {
    plot.marks.push_back({double(o.t - t0) / 1e9,
                          (o.dryRun ? "would evict " : "evicted ") + e.pods[o.pod].key(), false,
                          false});
  }
  for (const record::OomKill& k : e.oomKills) {
    plot.marks.push_back({double(k.t - t0) / 1e9,
                          "OOM kill " + (k.pod ? e.pods[*k.pod].key() : std::string("?")), true,
                          false});
  }
  if (r.simulated) {
    for (const auto& d : r.decisions) {
      plot.marks.push_back(
          {double(d.t - t0) / 1e9, r.policyName + ": evict " + d.pod, false, true});
    }
    for (const auto& k : r.simulatedKills) {
      plot.marks.push_back(
          {double(k.t - t0) / 1e9, r.policyName + ": OOM kill " + k.pod, false, true});
    }
  }
  return plot;
}

}  // namespace

int runReplay(const std::vector<std::string>& argv, std::ostream& out, std::ostream& err) {
  auto args = parseArgs(argv, {"policy", "output", "plot"}, {"help"});
  if (!args) {
    err << "nodewarden replay: " << args.error().message << "\n\n" << kReplayUsage;
    return kExitUsage;
  }
  if (args->flag("help")) {
    out << kReplayUsage;
    return kExitOk;
  }
  const std::string output = args->value("output").value_or("table");
  if (output != "table" && output != "json") {
    err << "nodewarden replay: -o must be table or json, got \"" << output << "\"\n\n"
        << kReplayUsage;
    return kExitUsage;
  }
  if (args->positional.empty()) {
    err << "nodewarden replay: which episode? (give one or more EPISODE files)\n\n" << kReplayUsage;
    return kExitUsage;
  }
  record::ReplayOptions options;
  if (auto path = args->value("policy")) {
    auto policy = loadPolicyOption(*args, err);
    if (!policy) {
      err << policy.error().message << "\n";
      return kExitBadInput;
    }
    options.policy = std::move(policy).value();
    options.policyName = *path;
  }
  std::vector<std::string> files;
  for (const std::string& path : args->positional) {
    for (std::string& file : episodeFiles(path)) files.push_back(std::move(file));
  }
  if (files.empty()) {
    err << "nodewarden replay: no episode (*" << record::kEpisodeSuffix << ") in "
        << args->positional[0] << "\n";
    return kExitBadInput;
  }
  policy::OrderedJson json;
  json["episodes"] = policy::OrderedJson::array();
  std::string table;
  std::optional<std::string> plotted;
  for (const std::string& file : files) {
    auto loaded = load(file);
    if (!loaded) {
      err << "nodewarden replay: " << loaded.error().message << "\n";
      return kExitBadInput;
    }
    const auto started = std::chrono::steady_clock::now();
    const record::ReplayResult result = record::replay(loaded->episode, options);
    const double ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - started)
            .count();
    policy::OrderedJson item = record::replayJson(result, loaded->episode, file);
    item["replayMs"] = std::round(ms * 1000) / 1000;
    json["episodes"].push_back(std::move(item));
    if (!table.empty()) table += "\n";
    table += renderReplay(*loaded, result, ms);
    if (auto plot = args->value("plot"); plot && !plotted) {
      const policy::Policy& shown =
          options.policy ? *options.policy : loaded->episode.policies.back().policy;
      std::ofstream svg(*plot);
      svg << record::renderPlotSvg(replayPlot(*loaded, result, shown));
      if (!svg) {
        err << "nodewarden replay: cannot write " << *plot << "\n";
        return kExitBadInput;
      }
      plotted = *plot;
    }
  }
  if (output == "json") {
    out << json.dump(2) << "\n";
  } else {
    out << table;
    if (plotted) out << "Plot: " << *plotted << "\n";
  }
  return kExitOk;
}

int runTune(const std::vector<std::string>& argv, std::ostream& out, std::ostream& err) {
  auto args = parseArgs(argv, {"episodes", "signal", "output"}, {"help"});
  if (!args) {
    err << "nodewarden tune: " << args.error().message << "\n\n" << kTuneUsage;
    return kExitUsage;
  }
  if (args->flag("help")) {
    out << kTuneUsage;
    return kExitOk;
  }
  const std::string output = args->value("output").value_or("table");
  if (output != "table" && output != "json") {
    err << "nodewarden tune: -o must be table or json, got \"" << output << "\"\n\n" << kTuneUsage;
    return kExitUsage;
  }
  if (!args->positional.empty() || !args->value("episodes")) {
    err << "nodewarden tune: --episodes DIR is required (and nothing else)\n\n" << kTuneUsage;
    return kExitUsage;
  }
  record::TuneOptions options;
  if (auto name = args->value("signal")) {
    auto signal = policy::parseSignal(*name);
    if (!signal || (*signal != policy::Signal::MemoryAvailable &&
                    *signal != policy::Signal::AllocatableMemoryAvailable)) {
      err << "nodewarden tune: --signal must be memory.available or allocatableMemory.available, "
             "got \""
          << *name << "\"\n";
      return kExitUsage;
    }
    options.signal = signal;
  }
  const std::string dir = *args->value("episodes");
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) {
    err << "nodewarden tune: --episodes " << dir << ": not a directory\n";
    return kExitBadInput;
  }
  std::vector<std::unique_ptr<Loaded>> episodes;
  for (const std::string& file : episodeFiles(dir)) {
    auto loaded = load(file);
    if (!loaded) {
      err << "nodewarden tune: " << loaded.error().message << "\n";
      return kExitBadInput;
    }
    episodes.push_back(std::make_unique<Loaded>(std::move(loaded).value()));
  }
  if (episodes.empty()) {
    err << "nodewarden tune: no episode (*" << record::kEpisodeSuffix << ") in " << dir << "\n";
    return kExitBadInput;
  }
  std::vector<const record::Episode*> pointers;
  for (const auto& e : episodes) pointers.push_back(&e->episode);
  const record::TuneResult result = record::tune(pointers, options);
  if (output == "json") {
    out << record::tuneJson(result).dump(2) << "\n";
    return kExitOk;
  }
  out << "Tuning " << policy::toString(result.signal) << " over " << result.episodes
      << " episode(s) with " << result.recordedOomKills << " recorded kernel OOM kill(s)\n\n";
  std::vector<std::vector<std::string>> rows{
      {"", "THRESHOLD", "KIND", "OOM KILLS LEFT", "EVICTIONS", "FALSE ALARMS", "LEAST LEAD"}};
  auto row = [&](const record::TuneSetting& s, const std::string& mark) {
    char lead[32] = "-";
    if (s.minLeadTimeMs) std::snprintf(lead, sizeof lead, "%.1f s", *s.minLeadTimeMs / 1000.0);
    rows.push_back({mark, s.threshold,
                    s.grace == Duration(0) ? "hard" : "soft " + policy::formatGoDuration(s.grace),
                    std::to_string(s.oomKillsLeft), std::to_string(s.evictions),
                    std::to_string(s.falseAlarms), lead});
  };
  for (std::size_t i = 0; i < result.settings.size(); ++i) {
    row(result.settings[i], result.recommended && *result.recommended == i ? "*" : "");
  }
  out << columns(rows, "  ");
  rows.assign(1, rows.front());
  row(result.kubeletDefault, "");
  out << "\nFor comparison, " << result.kubeletDefault.label << ":\n" << columns(rows, "  ");
  if (!result.recommended) {
    out << "\nNo setting of " << policy::toString(result.signal)
        << " leaves no kernel OOM kill in these episodes: the demand outgrew what any "
           "threshold of it could free in time.\n";
    return kExitOk;
  }
  const record::TuneSetting& best = result.settings[*result.recommended];
  out << "\nRecommended (*): " << best.label << ": no kernel OOM kill left, " << best.evictions
      << " eviction(s), " << best.falseAlarms << " false alarm(s)"
      << (best.evictions <= result.kubeletDefault.evictions
              ? ", no more evictions than the kubelet's default"
              : "")
      << ". As a policy file:\n\n"
      << policy::policyToJson(best.policy).dump(2) << "\n";
  return kExitOk;
}

}  // namespace nodewarden::cli
