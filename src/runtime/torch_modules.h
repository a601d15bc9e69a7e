// Internal to the runtime: libtorch modules built from a model description, run layer by layer
// (the description's layers, the unit a pipeline stage holds).
#pragma once

#include <torch/torch.h>

#include <memory>
#include <vector>

#include "batch_program.h"
#include "check/stage_plan.h"
#include "hetplan/core/error.h"
#include "hetplan/cost/memory_cost.h"
#include "hetplan/model/model.h"
#include "shard_layouts.h"
#include "tensor_parallel.h"

namespace hetplan::runtime::detail {

// A batch of samples: for language models token ids [n, seq] and next-token targets [n, seq];
// for MLPs features [n, in], for CNNs images [n, 3, h, w], and class targets [n].
struct Batch {
  torch::Tensor inputs;
  torch::Tensor targets;
  std::int64_t size() const { return inputs.size(0); }
  Batch slice(std::int64_t begin, std::int64_t end) const {
    return Batch{inputs.slice(0, begin, end), targets.slice(0, begin, end)};
  }
  Batch to(const torch::Device& device) const {
    return Batch{inputs.to(device), targets.to(device)};
  }
};

class TrainModule : public torch::nn::Module {
 public:
  // The description's layers, in order.
  int num_layers() const { return num_layers_; }
  // Runs layers [first, first + count) on x: the batch's inputs when first == 0, else the
  // activation the layer before wrote. When the range ends with the last layer it returns the
  // sum over the samples of each sample's loss (a language model's is the mean over its tokens),
  // so that a split batch's sums add up to the whole batch's; otherwise the activation.
  virtual torch::Tensor forward_layers(int first, int count, const torch::Tensor& x,
                                       const torch::Tensor& targets) = 0;
  // Shape of layer `layer`'s input for n samples (what the stage before it sends).
  virtual std::vector<std::int64_t> activation_shape(int layer, std::int64_t n) const = 0;
  // The parameters layers [first, first + count) use, in a fixed order.
  virtual std::vector<torch::Tensor> layer_parameters(int first, int count) = 0;
  // When the first and the last layer share a weight (a tied LM head) and a pipeline puts them on
  // different stages: gives the last layer its own copy and returns {the first layer's weight,
  // the copy} (both start equal; the caller sums their gradients so that they stay equal).
  // Undefined tensors when nothing is tied.
  virtual std::pair<torch::Tensor, torch::Tensor> untie_head() { return {}; }
  // Whether the first and the last layer share a weight.
  virtual bool tied_head() const { return false; }

  // Splits the tensor-split ops over a replica's tensor-parallel group (Megatron-LM style, with
  // uneven shares rounded to whole heads, columns and vocabulary rows): this rank keeps its slices
  // of the whole, identically initialised weights. Ops the description replicates (an MLP's) stay
  // whole on every rank. Call once, before untie_head; `tp` must outlive the module's use.
  virtual Result<bool> shard(const TensorParallel& tp) {
    (void)tp;
    return true;
  }
  // Runs HAP's batch program `prog` (batch_program.h) instead of splitting ops: this rank computes
  // its samples of each micro-batch (set_sample_counts) with every op whole, but the weights of
  // prog.sharded_ops are sharded over prog.group. Call once, instead of shard(). Refuses an op
  // the module has no weights of, and a vocabulary-split embedding or head but in a decoder.
  virtual Result<bool> split_batch(const BatchProgram& prog);
  // Under a batch program, how many samples of the coming pass each rank of the group takes.
  void set_sample_counts(std::vector<std::int64_t> counts) { samples_ = std::move(counts); }
  // Whether forward_layers(0, ...) reads the replica's samples (all ranks' of the pass, in rank
  // order) rather than this rank's: a vocabulary-split word embedding's batch program.
  bool reads_replica_samples() const {
    return batch_.vocab_embedding || batch_.replicate_embedding;
  }
  // Whether the last layer's loss is the replica's (its targets all ranks' of the pass, every rank
  // computing the same sum): a vocabulary-split LM head's batch program.
  bool replica_loss() const { return batch_.vocab_head; }
  // Of layer_parameters(...), those that hold this rank's shard (of a sharded weight or a
  // vocabulary-split table) under a batch program: their gradients are the replica's whole sums
  // of the shard, where every other parameter's is this rank's samples' part.
  std::vector<torch::Tensor> sharded_parameters() const { return sharded_; }
  // Which slices of the whole weights this rank keeps (after shard() or split_batch()).
  const ShardLayouts& layouts() const { return layouts_; }
  // The group of ranks that split each micro-batch of this stage between them (its replicas, for
  // one tensor-parallel rank): layers whose output depends on the whole batch (batch
  // normalisation) reduce their statistics over it. Null: this rank holds whole micro-batches.
  virtual void set_batch_group(Collectives* group) { (void)group; }
  // The samples of step `step`'s global batch (of `global_batch`) that the coming pass covers,
  // from `first`: set before each forward pass and before each backward pass, which may recompute.
  // A module whose ops drop out (op_graph_module.h's) draws their masks per sample from `seed`,
  // the step and the op (op_graph.h's dropout_mask), so that every split of the batch drops what
  // the whole batch would; until set, it drops nothing. The other modules train without dropout.
  virtual void set_rows(std::uint64_t seed, int step, std::int64_t global_batch,
                        std::int64_t first) {
    (void)seed, (void)step, (void)global_batch, (void)first;
  }
  // Activation recomputation (Korthikanti et al. 2022): full recomputes every transformer block
  // or MLP layer from its input in the backward pass; selective only the attention cores.
  void set_recompute(cost::Recompute r) { recompute_ = r; }
  // The attention core op by op, or fused (FlashAttention): libtorch's
  // scaled_dot_product_attention where it has one (2.0 and later), else the core recomputed in
  // the backward pass, which keeps as little of it (the decoders', the ViT's and BERT's blocks;
  // other modules have no attention).
  void set_attention(cost::Attention a) { attention_ = a; }
  // Moves the parameters, an untied head's copy and every constant the layers read (masks,
  // position tables) to `device`. Shards cut before (shard(), split_batch()) move as they are.
  virtual void to_device(const torch::Device& device) { to(device); }
  // Empties the parameters of every layer l without held[l] (release_unheld): a rank of a
  // pipeline keeps only its stages' weights (after shard() and untie_head(), whose copy then stays
  // with the head). Those layers must not run after.
  void release_layers_except(const std::vector<bool>& held);

  torch::Tensor loss_sum(const Batch& b) {
    return forward_layers(0, num_layers_, b.inputs, b.targets);
  }

 protected:
  // Keeps `prog` and shards the weights of its sharded ops (op_parameters' tensors of each).
  Result<bool> shard_ops(const BatchProgram& prog);
  // The description's ops that have weights, by name, with the module's tensors of each (what
  // split_batch shards); none by default.
  virtual std::vector<std::pair<std::string, std::vector<torch::Tensor>>> op_parameters() {
    return {};
  }
  int num_layers_ = 0;
  cost::Recompute recompute_ = cost::Recompute::none;
  cost::Attention attention_ = cost::Attention::plain;
  BatchProgram batch_;                     // inactive group: no batch program
  ShardedWeights weights_{&batch_.group};  // weights_.whole(w): the weight w to compute with
  std::vector<std::int64_t> samples_;      // per rank of batch_.group, of the current pass
  std::vector<torch::Tensor> sharded_;
  ShardLayouts layouts_;
};

using LayerFn = std::function<torch::Tensor(const torch::Tensor&)>;

// Empties every tensor of the units u without held[u] that no held unit has too: each keeps its
// identity (names and handles taken before stay valid) but no elements.
void release_unheld(const std::vector<std::vector<torch::Tensor>>& units,
                    const std::vector<bool>& held);

// f(x), recomputed in the backward pass when `recompute` (f must outlive the backward pass).
torch::Tensor run_layer(const LayerFn& f, const torch::Tensor& x, bool recompute);
// The cross-entropy of each row of logits against its target, summed.
torch::Tensor summed_cross_entropy(const torch::Tensor& logits, const torch::Tensor& targets);

// Layers that are functions of their input, then a classifier head whose loss is the summed
// cross-entropy (an MLP's and a ResNet's shape). Subclasses fill layer_fns_, one per layer but
// the head, and say which module holds each layer's parameters and what logits the head gives.
class ClassifierStack : public TrainModule {
 public:
  // Full recomputation reruns each layer in the backward pass; selective recomputation drops
  // attention cores only, and these layers have none.
  torch::Tensor forward_layers(int first, int count, const torch::Tensor& x,
                               const torch::Tensor& targets) override;
  std::vector<torch::Tensor> layer_parameters(int first, int count) override;

 protected:
  // The module holding layer l's parameters (the last layer: the head's).
  virtual const torch::nn::Module& layer_module(int l) const = 0;
  // The head's logits for the last layer's input.
  virtual torch::Tensor logits(const torch::Tensor& x) = 0;
  std::vector<LayerFn> layer_fns_;
};

// The module for `m`, initialised from the current torch seed. Supported: Family::mlp, ResNets
// (resnet_module.h), other CNNs whose op graph runs layer by layer (op_graph_module.h), pre-norm
// decoder language models, GPT-style (LayerNorm, GELU MLP, learned positions, biases) or
// Llama-style (RMSNorm, SwiGLU, rotary positions, grouped-query attention, no biases), with a tied
// or untied head, pre-norm ViTs (GPT-style blocks without the causal mask, a patch embedding) and
// the zoo's BERTs (check/stage_plan.h's bert_module); the module's layers and parameter count must
// equal the description's, else the model is refused.
Result<std::shared_ptr<TrainModule>> build_module(const model::Model& m);

}  // namespace hetplan::runtime::detail
