// `nodewarden demo --plot FILE` and `nodewarden replay --plot FILE`: the race drawn — each
// pod's memory, the node's, the threshold line and the limit over time, with every eviction
// and kernel OOM kill marked (and, for a replay, what the replayed policy would have done
// beside what happened). Plain SVG, no dependency, readable in a browser or embedded in a
// README. Pure: the caller writes the file.
#pragma once

#include <string>
#include <vector>

namespace nodewarden::record {

struct PlotSeries {
  std::string name;         // "prod/api", or "node" for the kubepods total
  std::vector<double> mib;  // one value per sample; negative: not running (a gap)
  bool dashed = false;      // a counterfactual line
};

struct PlotMark {
  double seconds = 0;
  std::string label;            // "evicted batch/big", "OOM kill prod/api"
  bool kernel = false;          // a kernel OOM kill (red) rather than an eviction (orange)
  bool counterfactual = false;  // what the replayed policy would have done (purple, dashed)
};

struct Plot {
  std::string title;            // "nodewarden agent" or "baseline: no agent"
  std::vector<double> seconds;  // sample times, ascending
  std::vector<PlotSeries> series;
  double limitMiB = 0;         // the kubepods limit
  double thresholdMiB = -1;    // where the hard (or soft) memory threshold is met; <0: none
  std::string thresholdLabel;  // "allocatableMemory.available < 64Mi"
  std::vector<PlotMark> marks;
};

// The SVG document (900 x 460).
std::string renderPlotSvg(const Plot& plot);

}  // namespace nodewarden::record
