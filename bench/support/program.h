// Forwards to report.h, where the frame of a benchmark program now is (Args, timed, heapInUse).
#pragma once
#include "bench/support/report.h"
