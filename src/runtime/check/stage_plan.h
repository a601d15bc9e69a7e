// Internal to the runtime, free of libtorch: a stage plan as the runtime reads it (its rank order,
// how replicas split layers and samples, a replica's batch program) and which model families have
// a stage module.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "hetplan/core/error.h"
#include "hetplan/model/model.h"
#include "hetplan/plan/plan.h"

namespace hetplan::runtime::detail {

// The number of pipeline positions: the stages up to the first that runs on the first stage's
// devices again (under the interleaved schedule, stage s runs where stage s mod P does), else
// every stage.
int pipeline_size(const plan::Plan& p);

// The one rank order of the runtime: stage by stage, replica by replica, then the devices of a
// replica (its tensor-parallel ranks j), over the first pipeline_size(p) stages (the later
// stages of an interleaved schedule run on their ranks). Calls f(rank, stage, replica, j, device).
template <class F>
void for_each_rank(const plan::Plan& p, F&& f) {
  int rank = 0;
  const int P = pipeline_size(p);
  for (int s = 0; s < P; ++s)
    for (int r = 0; r < static_cast<int>(p.stages[s].replicas.size()); ++r)
      for (int j = 0; j < static_cast<int>(p.stages[s].replicas[r].devices.size()); ++j)
        f(rank++, s, r, j, p.stages[s].replicas[r].devices[j]);
}

// Whether every replica of `st` splits its layers alike (as many devices, the same tp_shares):
// the same tensor-parallel rank of each then holds the same slices, and their gradients are summed
// slice by slice. Otherwise they are summed in the whole layout (ShardLayouts).
bool alike(const std::vector<const plan::Replica*>& replicas);
// Whether some replica splits its layers over more than one device.
bool splits_layers(const plan::Plan& p);
std::vector<const plan::Replica*> replicas_of(const plan::Stage& st);

// Samples [begin, end) of the global batch that replica r of `stage` takes of micro-batch k: the
// micro-batch is samples [B k / M, B (k + 1) / M), split by the replicas' cumulative batch shares.
std::pair<std::int64_t, std::int64_t> samples_of(const plan::Plan& p, int stage, int r, int k);

// How a batch program splits a replica's ops (batch_program.h's BatchProgram adds the group): the
// ops whose weights it shards, whether the word embedding is split by vocabulary rows, and
// whether the LM head and its loss are (the head then reads the replica's samples, gathered, and
// the vocabulary-parallel loss is the replica's).
struct BatchSplits {
  std::vector<std::string> sharded_ops;
  bool vocab_embedding = false;
  bool vocab_head = false;
  // The word embedding replicated: every rank looks up the replica's samples with the whole
  // table and keeps its own; the output's gradient is all-gathered, so every rank forms the
  // replica's table gradient, which its first rank alone contributes to the stage's sum.
  bool replicate_embedding = false;
  // The blocks' branches split by tensor inside the batch program ("layers.3.attn", "layers.3.mlp"
  // or "layers.3.moe"; a decoder's only): each rank computes its heads, columns or experts of the
  // branch for the replica's samples, all-gathered into the branch and reduce-scattered out of it
  // (as the simulator converts the batch layout to the branch's and back).
  std::vector<std::string> tensor_branches;
};

// The branch of a decoder block's op that a batch program may split by tensor as a whole: the
// attention ("layers.i.attn", from the QKV GEMM through the output projection) or the MLP or
// mixture of experts ("layers.i.mlp", "layers.i.moe"); "" for the norms, residual sums, the
// branches' output dropouts and every op outside the blocks.
std::string tensor_branch_of(std::string_view op_name);

// HAP's batch program for the plan's replicas of more than one device: every op split by batch or
// batch_sharded, the word embedding possibly by vocabulary (tensor). Nullopt when every op is
// split by tensor (Megatron-LM's split) or the replicas have one device each (the splits then
// change nothing), or an error naming the op that is neither.
Result<std::optional<BatchSplits>> batch_program_of(const model::Model& m, const plan::Plan& p);

// DLCP's transport (chunk_transport.h) carries a stage plan's gradients when the plan sets a
// grad_priority or multipath=spray, or synchronises every gradient through parameter servers; it
// replaces the buckets' all-reduce over replicas that split their layers alike, without a batch
// program. Elsewhere the runtime sends every gradient byte in Gloo's order, which trains alike, so
// a priority alone runs there, but a loss bound or a parameter server does not.
bool uses_chunk_transport(const plan::Plan& p);

// Whether the decoder module builds m: a decoder language model, with or without a mixture of
// experts.
bool decoder_module(const model::Model& m);
// Whether BERT's stage module runs `m`: the zoo's BERT layout (post-norm attention blocks without
// the causal mask, learned positions and token types, a tied MLM decoder and the next-sentence
// head). An encoder imported from ONNX is not: its plans run op by op.
bool bert_module(const model::Model& m);
// Whether the runtime has a stage module for m (MLPs, ResNets, other CNNs whose op graph runs layer
// by layer, ViTs, BERT and decoder language models), or why not.
Result<bool> executable_family(const model::Model& m);

// ZeRO-2 and -3's gradient buckets (SliceBuckets) hold at most this many buckets at once:
// SliceBuckets::kInFlight in flight, and as the next one starts its gradients and their flat copy.
// (Measured, `run --json` step peaks of a GPT of 13.2M parameters over two CPU ranks under ZeRO-2:
// 110.9 MB in 25 MB buckets, against 103.1 under ZeRO-1; 184-237 MB in one bucket of its 52.7 MB
// of gradients, 3.5-4.5 times them with the slice sums.)
constexpr double kSliceBucketsHeld = 4;

// The fp32 bytes of the largest gradient bucket of a rank whose model chunks are `chunks` (each
// a stage's first layer and layer count) on `tp` devices, and of all its gradients: the runtime's
// buckets, sim::gradient_buckets over the simulator's bytes per layer (the model's dtype, divided
// by the tensor-parallel degree) within each chunk.
struct SliceBucketBytes {
  double largest = 0, whole = 0;
};
SliceBucketBytes slice_bucket_bytes(const model::Model& m,
                                    const std::vector<std::pair<int, int>>& chunks, int tp,
                                    double bucket_bytes);
// Whether such a rank reduces each backward pass's gradients to their slices in those buckets:
// where holding kSliceBucketsHeld of its largest takes less than its whole gradients (a model whose
// layers each outgrow the buckets, a mixture of experts', holds them whole instead, as ZeRO-1).
bool slice_buckets_pay(const SliceBucketBytes& b);

}  // namespace hetplan::runtime::detail
