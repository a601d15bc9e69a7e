// Per-device memory of a training step: parameters, gradients, optimizer states (mixed-precision
// Adam: 2 + 2 + 12 bytes per parameter, split by ZeRO stage), activations by pipeline schedule and
// recomputation mode, and working buffers.
#pragma once

#include <string>

#include "hetplan/core/units.h"
#include "hetplan/model/model.h"

namespace hetplan::cost {

enum class Recompute { none, selective, full };
const char* to_string(Recompute r);

struct MemoryConfig {
  int first_layer = 0;            // the stage's layers [first_layer, first_layer + num_layers)
  int num_layers = 0;
  double param_shard = 1.0;       // this device's fraction of the stage's parameters (1/tp when even)
  double activation_shard = 1.0;  // this device's fraction of each sample's activations
  int zero_stage = 0;             // 0..3
  int zero_group = 1;             // devices the ZeRO states are split over (data-parallel size)
  Recompute recompute = Recompute::none;
  bool sequence_parallel = false; // layernorm/dropout activations split across the TP group too
  int tensor_parallel = 1;        // TP degree (for the replicated-op activations without SP)
  double micro_batch = 1;         // samples per micro-batch on this device
  double inflight_microbatches = 1;  // activations of this many micro-batches live at the peak
};

struct MemoryBreakdown {
  Bytes parameters;     // 16-bit weights (plus fp32 master copy counted in optimizer)
  Bytes gradients;
  Bytes optimizer;      // fp32 master weights and Adam moments
  Bytes activations;
  Bytes buffers;        // communication buckets, workspace, framework reserve
  Bytes total() const { return parameters + gradients + optimizer + activations + buffers; }
};

MemoryBreakdown stage_memory(const model::Model& m, const MemoryConfig& cfg);

}  // namespace hetplan::cost
