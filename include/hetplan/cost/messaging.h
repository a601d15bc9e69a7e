// What two worker processes of one host pay to talk to each other (a communication library over
// loopback: per-message software latency and a copy-bound bandwidth), measured by
// `hetplan calibrate` and applied to a cluster's links, so that the collective cost model prices
// collectives between CPU workers as that host runs them.
#pragma once

#include <optional>

#include "hetplan/cluster/cluster.h"
#include "hetplan/cost/collective_cost.h"
#include "hetplan/cost/compute_cost.h"

namespace hetplan::cost {

// The path between two workers: latency per message and the bandwidth a transfer reaches.
struct MessagingFit {
  Seconds latency;
  BytesPerSecond bandwidth;  // infinite when the points show no growth with size
  auto operator<=>(const MessagingFit&) const = default;
};

// The fit of t = launch + 2 latency + bytes / bandwidth (a ring all-reduce between two workers:
// each sends its whole tensor once and pays two path latencies, collective_cost.h) to all-reduce
// points of two workers, least squares in relative error so that small and large sizes count
// alike; latency >= 0, bandwidth > 0. Nullopt without points.
std::optional<MessagingFit> fit_messaging(const std::vector<MessagingPoint>& points,
                                          const NetworkParams& params);

// The cluster with the profile's messaging fits applied to the links of devices of the fitted
// types: a link between such a device and its node's switch (two workers of one host) takes the
// measured path (half the latency each way, and the bandwidth that the link's efficiency turns
// into the measured one, higher or lower than the link's own; a fit without bandwidth keeps the
// link's); a direct link between two such devices takes the whole measured latency and is capped
// at the measured bandwidth; any other link of such a device (its NIC) adds half the measured
// latency to its own and is capped at the measured bandwidth, since a message between hosts passes
// the same software at both ends. That software runs on the worker's CPU, so at a node's
// cpu_share s each end's half latency becomes latency / (2 s) and its bandwidth s times the
// measured one. Devices of other types keep their links.
cluster::Cluster with_measured_messaging(cluster::Cluster c, const CalibrationProfile& profile,
                                         const NetworkParams& params);

}  // namespace hetplan::cost
