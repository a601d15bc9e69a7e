// Will a run fit in the host's memory, or in its GPUs'? What each rank of `hetplan run` holds, by
// the simulator's memory model for the plan carried over to the runtime's fp32 training, against
// the memory the host (or its cgroup) has available, or each rank's GPU has free, so that a run
// that cannot fit is refused with the numbers instead of being killed by the kernel or failing
// to allocate.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "hetplan/cluster/cluster.h"
#include "hetplan/core/error.h"
#include "hetplan/core/units.h"
#include "hetplan/model/model.h"
#include "hetplan/plan/plan.h"

namespace hetplan::runtime {

// One rank's memory, in the runtime's fp32. Every rank builds the whole model in host memory (4
// bytes per parameter: the same initial weights everywhere), keeps its part of it and frees the
// rest, then trains that part where it runs (host memory on a CPU, its GPU's otherwise): the
// weights, 4-byte gradients and Adam's two 4-byte moments of the parameters the simulator puts on
// its device (its optimizer bytes, ZeRO included), activations (the simulator's, rescaled from the
// model's dtype), and the process itself: libtorch loaded on a CPU (180 MiB measured, `run` of a
// 2-layer MLP, /usr/bin/time, 2026-11-25), the CUDA context and workspaces on a GPU.
struct RankMemory {
  int device = 0;
  bool gpu = false;   // it trains on a GPU
  Bytes whole_model;  // in host memory while the module is built
  // Its part of the weights in fp32, and (in mixed precision) its linear layers' weights held in 16
  // bits; Adam's moments, and under ZeRO or with 16-bit weights the fp32 slice it steps.
  Bytes weights, sixteen_bit_weights, gradients, optimizer, activations, process;
  // Under ZeRO-2 and -3, where the runtime reduces each pass's gradients to their slices (replicas
  // that split alike), the fp32 buckets of them in flight; elsewhere the flat copy of the whole
  // gradients the step sums once the backward passes are done (beyond the activations, freed by
  // then).
  Bytes gradient_buffers;
  // Its part, trained.
  Bytes trained() const {
    return weights + sixteen_bit_weights + gradients + optimizer + activations + gradient_buffers;
  }
  // Its peak where it trains: its part and the process; on a CPU the whole model when that is more
  // (the memory freed after the build is reused).
  Bytes total() const { return (gpu ? trained() : max(whole_model, trained())) + process; }
  // Its peak in host memory: total() on a CPU; on a GPU, the whole model it builds there and the
  // process's libtorch.
  Bytes host() const;
};

// Where the ranks run. On CPUs a rank holds fp32 activations and the process's libtorch
// (RankMemory::process). On a GPU (`run --device cuda`) the same weights, gradients and Adam
// state, activations in the run's precision, and for `process` the CUDA context and library
// workspaces the simulator reserves (cost::MemoryConfig's context + workspace). Either way autocast
// computes in the run's precision from fp32 weights, except that in 16-bit precision (not under
// ZeRO-3 over several replicas, nor over replicas that split unlike) the linear layers' weights
// are held in 16 bits and their fp32 master in the optimizer's slices.
struct RankHost {
  bool gpu = false;
  model::DType precision = model::DType::fp32;  // the run's
};

// What rank r holds of its part where it trains, listed ("its part of the fp32 weights 1.00 GiB,
// gradients ...").
std::string trained_parts(const RankMemory& r);

// Per rank (in runtime::rank_devices order) of plan p (the form `run` executes), simulated on c.
Result<std::vector<RankMemory>> rank_memory(const model::Model& m, const cluster::Cluster& c,
                                            const plan::Plan& p, RankHost host = {});

// The memory this host can give new processes: /proc/meminfo's MemAvailable, lowered to what the
// cgroup (v2 memory.max - memory.current) allows when that is less. Nullopt when unreadable.
std::optional<Bytes> host_available_memory();

// The free memory of this host's CUDA device `local` (LOCAL_RANK; where CUDA_VISIBLE_DEVICES is
// set, its entry of that index) as `nvidia-smi --query-gpu=memory.free` reports it. Nullopt where
// that cannot be read (no nvidia-smi, no such device).
std::optional<Bytes> gpu_free_memory(int local);
// nvidia-smi's answer for one device (`--format=csv,noheader,nounits`: its free MiB on one line).
std::optional<Bytes> parse_gpu_free_mib(const std::string& text);

// Why rank `r` will not fit on the GPU `local` (with `free` bytes free there), with the numbers;
// empty when it fits.
std::string gpu_memory_shortfall(const RankMemory& r, int local, Bytes free);

// The ranks' memory together, and the rank that needs the most (null for none): in host memory
// (RankMemory::host) or where each trains (RankMemory::total).
struct MemoryTotals {
  Bytes all;
  const RankMemory* largest = nullptr;
};
enum class MemoryOf { host, device };
MemoryTotals memory_totals(const std::vector<RankMemory>& ranks, MemoryOf of);

// Why `ranks` of these (all on this host) will not fit in its `available` memory, with the
// numbers; empty when they fit.
std::string memory_shortfall(const std::vector<RankMemory>& ranks, Bytes available);

}  // namespace hetplan::runtime
