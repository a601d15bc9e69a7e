// Executes a plan for real: libtorch modules built from the model description, c10d process
// groups (Gloo on CPU) between the ranks, the plan's batch shares and micro-batches, and
// measurements of every step.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "hetplan/cluster/cluster.h"
#include "hetplan/core/error.h"
#include "hetplan/cost/collective_cost.h"
#include "hetplan/model/model.h"
#include "hetplan/plan/plan.h"
#include "hetplan/plan/run_form.h"
#include "hetplan/runtime/launch.h"
#include "hetplan/runtime/runnable.h"

namespace hetplan::runtime {

struct RunOptions {
  int steps = 20;
  std::uint64_t seed = 1;       // model initialisation and data
  std::string data_file;        // text tokenised at byte level; empty: a synthetic token stream
  double learning_rate = 1e-3;  // Adam
  int threads_per_rank = 1;     // intra-op threads of each worker
  // Where the job keeps its parameters, Adam's moments and step: step-<n>/stage<s>.pt for each
  // stage s after step n (checkpoint.h: whole tensors by name, whatever the plan), and `latest`,
  // naming the newest step every stage has written (rank 0 moves it there after a barrier, so a
  // crash at any point leaves a whole checkpoint). Read at the start when there, so the run goes
  // on from that step; every rank must see the same directory (one file system), and ranks that
  // find different steps stop. A rank that cannot write its files stops; the others then time
  // out at the barrier. An op-by-op run writes step-<n>/rank<k>.pt by the op graph's names
  // instead (a checkpoint resumes under plans that run as its own did). Empty: none.
  std::string checkpoint_dir;
  int checkpoint_every = 0;  // steps between checkpoints; 0: only at the end
  // Where to resume from instead of checkpoint_dir's newest step: the newest whole step of this
  // directory, written by a job of any plan of the same model, global batch and seed that runs as
  // this one (as a stage plan, or op by op); the checkpoints hold whole tensors by name. Empty:
  // checkpoint_dir.
  std::string resume_dir;
  // How long a rank waits for a collective or a neighbour stage before it gives up and names the
  // ranks that stopped answering.
  double timeout_s = 120;
  // The cluster the plan was made for, to pick the form of uneven sequence-parallel collectives
  // as the simulator does when the plan leaves it to the cost model (null: padded).
  const cluster::Cluster* cluster = nullptr;
  // Run on this rank's GPU (cuda:LOCAL_RANK) with NCCL process groups, one rank per GPU; needs a
  // build against a CUDA-enabled libtorch. Otherwise on the CPU with Gloo.
  bool cuda = false;
  // DLCP's transport (plans with a grad_priority): gradient chunk size per tensor-parallel rank,
  // as the simulator's default.
  double grad_chunk_bytes = 256.0 * 1024;
  // Under a loss bound: skip every droppable chunk (the bound's worst case) instead of those the
  // deadline finds unsent.
  bool grad_drop_all = false;
  // Every chunk that must arrive in one traffic class (the class of unmarked traffic) instead of
  // the urgent first half in a class of its own: what the classes give, measured.
  bool grad_one_class = false;
  // The arithmetic of the forward and backward passes: fp32, or bf16 or fp16 mixed precision
  // (autocast: GEMMs, convolutions and attention's products in 16 bits; parameters, gradients,
  // Adam's state and what travels between stages in fp32, as the simulator's memory model keeps
  // master weights). fp16 needs CUDA and loss_scale (precision_problem).
  model::DType precision = model::DType::fp32;
  // Dynamic loss scaling from this initial scale (detail::LossScaler: steps whose gradients
  // overflow are skipped, RunResult::skipped_steps); 0: none. Stage and op-level plans. A resumed
  // run goes on from the scale its checkpoint holds, if it holds one.
  double loss_scale = 0;
};

// The initial loss scale fp16 runs take when none is given: 2^16, as torch.cuda.amp's GradScaler.
inline constexpr double kDefaultLossScale = 65536;

// The form of replica r's uneven all-gathers and reduce-scatters: the plan's, or (auto) the one
// the cost model finds cheaper for a micro-batch's activations on cluster c (padded without c).
cost::UnevenForm uneven_form(const model::Model& m, const plan::Plan& p, const plan::Replica& r,
                             const cluster::Cluster* c);

// What one rank did over the run (seconds, summed over the measured steps).
struct RankTimes {
  double compute_s = 0;  // the rest of the step: forward, backward and optimizer
  double comm_s = 0;     // in gradient and parameter collectives, and finishing sends
  double idle_s = 0;     // waiting for a neighbour stage's activation or gradient (pipeline
                         // bubbles, transfers included)
  // The most tensor memory one of those steps held above what it started with (activations,
  // gradients and temporaries; on the CPU, as its allocator reports them), in bytes.
  double step_peak_bytes = 0;
  // DLCP's transport under a loss bound (chunk_transport.h): per measured step on average, the
  // fraction of this rank's gradient elements not summed and the share of its squared norm they
  // held. 0 elsewhere.
  double grad_dropped_fraction = 0;
  double grad_dropped_norm_fraction = 0;
  // The worker's RANK and LOCAL_RANK as its launcher numbered it (where it ran: torchrun counts
  // workers node by node); RANK differs from its rank in the plan under run --ranks-by-device.
  int launcher_rank = 0;
  int local_rank = 0;
};

struct RunResult {
  std::vector<double> losses;        // per step, the global batch's mean loss
  std::vector<double> step_times_s;  // per step, wall time on rank 0
  // per step, rank 0's time in gradient and parameter collectives (RankTimes::comm_s's part)
  std::vector<double> sync_times_s;
  double mean_step_time_s = 0;       // excluding the first two steps (when there are more)
  std::vector<RankTimes> ranks;      // per rank, over the steps counted in mean_step_time_s
  std::int64_t parameters = 0;       // of the executed module
  int first_step = 0;                // the step the run started from (a checkpoint's)
  int skipped_steps = 0;  // under loss scaling, steps whose gradients overflowed (not taken)
};

// The steps of the newest whole checkpoint in dir (its `latest` file; 0 for none), as run_plan
// resumes from it; an error naming the file when it is unreadable.
Result<int> newest_checkpoint_step(const std::string& dir);

// The plan's device of every rank, in rank order (stage, replica, tensor-parallel rank; for an
// op-level plan, its devices ascending).
std::vector<int> rank_devices(const plan::Plan& p);

// Runs the plan on this rank. Every rank calls it with the same arguments and gets the same
// losses and every rank's times. Ranks are numbered stage by stage, replica by replica, then by
// tensor-parallel rank (as rank_devices lists them): the stages pass activations and gradients
// point to point in the simulator's pass order (GPipe or 1F1B); a stage's replicas all-reduce
// their gradients. An op-level plan runs op by op (op_level_run.h). When a peer dies or hangs, the
// error names the ranks that stopped answering.
Result<RunResult> run_plan(const model::Model& m, const plan::Plan& p, const RunOptions& opts,
                           const RankEnv& env);

}  // namespace hetplan::runtime
