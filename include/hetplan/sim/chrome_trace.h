// Chrome trace (Perfetto-readable JSON) from the simulator's task records.
#pragma once

#include <string>

#include "hetplan/sim/simulate.h"

namespace hetplan::sim {

// One process per lane, with a compute track and a communication track.
std::string chrome_trace_json(const SimResult& r);

}  // namespace hetplan::sim
