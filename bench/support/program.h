// Forwards to report.h (Args, heapInUse; measure.h's timed) for the programs that include it.
#pragma once
#include "bench/support/report.h"
