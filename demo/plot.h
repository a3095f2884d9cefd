// The demo's plot is drawn by record/plot.h, which `nodewarden replay --plot` shares.
#pragma once

#include "record/plot.h"

namespace nodewarden::demo {

using record::Plot;
using record::PlotMark;
using record::PlotSeries;
using record::renderPlotSvg;

}  // namespace nodewarden::demo
