#include "record/plot.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace nodewarden::record {
namespace {

constexpr double kWidth = 900, kHeight = 460;
constexpr double kLeft = 70, kRight = 190, kTop = 40, kBottom = 50;  // margins

const char* const kColors[] = {"#1f77b4", "#2ca02c", "#9467bd", "#8c564b",
                               "#e377c2", "#17becf", "#bcbd22", "#7f7f7f"};

std::string escape(const std::string& text) {
  std::string out;
  for (char c : text) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

std::string number(double value) {
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%.1f", value);
  return buffer;
}

// A round step for about `ticks` ticks over `span`.
double niceStep(double span, int ticks) {
  const double raw = span / ticks;
  const double magnitude = std::pow(10.0, std::floor(std::log10(raw)));
  for (double m : {1.0, 2.0, 5.0, 10.0}) {
    if (raw <= m * magnitude) return m * magnitude;
  }
  return 10 * magnitude;
}

}  // namespace

std::string renderPlotSvg(const Plot& plot) {
  const double plotWidth = kWidth - kLeft - kRight, plotHeight = kHeight - kTop - kBottom;
  const double tMax = std::max(1.0, plot.seconds.empty() ? 1.0 : plot.seconds.back());
  double yMax = plot.limitMiB;
  for (const auto& s : plot.series) {
    for (double v : s.mib) yMax = std::max(yMax, v);
  }
  yMax = std::max(1.0, yMax * 1.08);
  auto x = [&](double t) { return kLeft + plotWidth * t / tMax; };
  auto y = [&](double mib) { return kTop + plotHeight * (1 - mib / yMax); };

  std::string svg;
  svg += "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" + number(kWidth) + "\" height=\"" +
         number(kHeight) + "\" viewBox=\"0 0 " + number(kWidth) + " " + number(kHeight) +
         "\" font-family=\"sans-serif\" font-size=\"12\">\n";
  svg += "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
  svg += "<text x=\"" + number(kLeft) + "\" y=\"24\" font-size=\"15\" font-weight=\"bold\">" +
         escape(plot.title) + "</text>\n";
  // Axes and grid.
  const double yStep = niceStep(yMax, 6), tStep = niceStep(tMax, 10);
  for (double v = 0; v <= yMax + 1e-9; v += yStep) {
    svg += "<line x1=\"" + number(kLeft) + "\" y1=\"" + number(y(v)) + "\" x2=\"" +
           number(kLeft + plotWidth) + "\" y2=\"" + number(y(v)) +
           "\" stroke=\"#eee\"/><text x=\"" + number(kLeft - 6) + "\" y=\"" + number(y(v) + 4) +
           "\" text-anchor=\"end\">" + number(v).substr(0, number(v).find('.')) + "</text>\n";
  }
  for (double t = 0; t <= tMax + 1e-9; t += tStep) {
    svg += "<text x=\"" + number(x(t)) + "\" y=\"" + number(kTop + plotHeight + 16) +
           "\" text-anchor=\"middle\">" + number(t).substr(0, number(t).find('.')) + "</text>\n";
  }
  svg += "<text x=\"" + number(kLeft + plotWidth / 2) + "\" y=\"" + number(kHeight - 12) +
         "\" text-anchor=\"middle\">seconds</text>\n";
  svg += "<text x=\"16\" y=\"" + number(kTop + plotHeight / 2) + "\" transform=\"rotate(-90 16 " +
         number(kTop + plotHeight / 2) + ")\" text-anchor=\"middle\">memory (MiB)</text>\n";
  svg += "<rect x=\"" + number(kLeft) + "\" y=\"" + number(kTop) + "\" width=\"" +
         number(plotWidth) + "\" height=\"" + number(plotHeight) +
         "\" fill=\"none\" stroke=\"#999\"/>\n";
  // The limit and the threshold.
  auto hline = [&](double mib, const char* color, const char* dash, const std::string& label) {
    svg += "<line x1=\"" + number(kLeft) + "\" y1=\"" + number(y(mib)) + "\" x2=\"" +
           number(kLeft + plotWidth) + "\" y2=\"" + number(y(mib)) + "\" stroke=\"" + color +
           "\" stroke-width=\"1.5\" stroke-dasharray=\"" + dash + "\"/><text x=\"" +
           number(kLeft + 6) + "\" y=\"" + number(y(mib) - 5) + "\" fill=\"" + color + "\">" +
           escape(label) + "</text>\n";
  };
  if (plot.limitMiB > 0)
    hline(plot.limitMiB, "#d62728", "6 3", "limit " + number(plot.limitMiB) + " MiB");
  if (plot.thresholdMiB >= 0) hline(plot.thresholdMiB, "#ff7f0e", "2 3", plot.thresholdLabel);
  // One polyline per run of samples (a pod that is gone leaves a gap).
  int legend = 0;
  for (std::size_t i = 0; i < plot.series.size(); ++i) {
    const PlotSeries& s = plot.series[i];
    const bool node = s.name == "node" || s.name.starts_with("node ");
    const std::string color = node ? "#000" : kColors[i % std::size(kColors)];
    std::string points;
    auto flush = [&] {
      if (points.empty()) return;
      svg += "<polyline fill=\"none\" stroke=\"" + color + "\" stroke-width=\"" +
             (node ? "2.5" : "1.8") + "\"" +
             (s.dashed ? std::string(" stroke-dasharray=\"7 4\"") : std::string()) + " points=\"" +
             points + "\"/>\n";
      points.clear();
    };
    for (std::size_t k = 0; k < s.mib.size() && k < plot.seconds.size(); ++k) {
      if (s.mib[k] < 0) {
        flush();
        continue;
      }
      points += number(x(plot.seconds[k])) + "," + number(y(s.mib[k])) + " ";
    }
    flush();
    const double ly = kTop + 10 + 18 * legend++;
    svg += "<line x1=\"" + number(kLeft + plotWidth + 6) + "\" y1=\"" + number(ly) + "\" x2=\"" +
           number(kLeft + plotWidth + 26) + "\" y2=\"" + number(ly) + "\" stroke=\"" + color +
           "\" stroke-width=\"2.5\"" +
           (s.dashed ? std::string(" stroke-dasharray=\"7 4\"") : std::string()) + "/><text x=\"" +
           number(kLeft + plotWidth + 30) + "\" y=\"" + number(ly + 4) + "\">" +
           escape(s.name == "node" ? std::string("all pods (kubepods)") : s.name) + "</text>\n";
  }
  // Evictions and kernel OOM kills.
  int row = 0;
  for (const PlotMark& mark : plot.marks) {
    const char* color = mark.kernel ? "#d62728" : mark.counterfactual ? "#9467bd" : "#ff7f0e";
    const double mx = x(std::min(mark.seconds, tMax));
    svg += "<line x1=\"" + number(mx) + "\" y1=\"" + number(kTop) + "\" x2=\"" + number(mx) +
           "\" y2=\"" + number(kTop + plotHeight) + "\" stroke=\"" + color +
           "\" stroke-width=\"1.5\"" +
           (mark.counterfactual ? std::string(" stroke-dasharray=\"4 3\"") : std::string()) +
           "/><text x=\"" + number(mx - 4) + "\" y=\"" + number(kTop + 14 + 14 * (row++ % 4)) +
           "\" text-anchor=\"end\" fill=\"" + color + "\">" + escape(mark.label) + " (" +
           number(mark.seconds) + " s)</text>\n";
  }
  svg += "</svg>\n";
  return svg;
}

}  // namespace nodewarden::record
