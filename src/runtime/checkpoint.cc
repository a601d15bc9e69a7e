#include "checkpoint.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <optional>

#include "grad_buckets.h"
#include "run_support.h"

namespace hetplan::runtime::detail {
namespace {

namespace fs = std::filesystem;

// The format of a part file; 1 was a file per rank in the plan's own layout.
constexpr std::int64_t kFormat = 2;

std::string step_dir(const std::string& dir, std::int64_t steps) {
  return fmt::format("{}/step-{}", dir, steps);
}

torch::Tensor text_tensor(const std::string& text) {
  torch::Tensor t = torch::empty({static_cast<std::int64_t>(text.size())}, torch::kUInt8);
  std::copy(text.begin(), text.end(), t.data_ptr<std::uint8_t>());
  return t;
}

std::string tensor_text(const torch::Tensor& t) {
  const torch::Tensor c = t.to(torch::kCPU).contiguous();
  const auto* p = c.data_ptr<std::uint8_t>();
  return std::string(p, p + c.numel());
}

}  // namespace

ParameterNames parameter_names(const torch::nn::Module& module) {
  ParameterNames out;
  for (const auto& item : module.named_parameters(true))
    out.emplace(item.value().unsafeGetTensorImpl(),
                std::make_pair(item.key(), item.value().sizes().vec()));
  return out;
}

std::pair<std::string, std::string> resume_source(const std::string& resume_dir,
                                                  const std::string& checkpoint_dir) {
  return resume_dir.empty() ? std::make_pair(checkpoint_dir, std::string("--checkpoint"))
                            : std::make_pair(resume_dir, std::string("--resume"));
}

std::pair<std::vector<torch::Tensor>, std::vector<torch::Tensor>> gathered_moments(
    torch::optim::Adam& adam, const torch::Tensor& owned, std::int64_t numel, std::int64_t begin,
    std::int64_t end, Collectives& group, const std::vector<torch::Tensor>& shapes,
    std::chrono::milliseconds timeout) {
  const auto [first, second] = adam_moments(adam, owned);
  std::pair<std::vector<torch::Tensor>, std::vector<torch::Tensor>> out;
  for (const bool is_second : {false, true}) {
    std::vector<torch::Tensor> full{torch::zeros({numel}, owned.options())};
    full[0].slice(0, begin, end).copy_(is_second ? second : first);
    group.allreduce(full)->wait(timeout);
    std::vector<torch::Tensor> parts;
    for (const auto& t : shapes) parts.push_back(torch::empty(t.sizes(), owned.options()));
    unflatten_into(full[0], parts);
    (is_second ? out.second : out.first) = std::move(parts);
  }
  return out;
}

Result<bool> clear_unpublished_step(Collectives* world, int rank, const std::string& dir,
                                    int steps) {
  if (rank == 0) {
    std::error_code ec;
    fs::remove_all(step_dir(dir, steps), ec);
    if (ec)
      return Error{
          fmt::format("--checkpoint: cannot clear {}: {}", step_dir(dir, steps), ec.message())};
  }
  if (world) world->barrier()->wait();
  return true;
}

Result<bool> publish_when_written(Collectives* world, int rank, const std::string& dir, int steps) {
  if (world) world->barrier()->wait();
  if (rank == 0) try {
      publish_checkpoint(dir, steps);
    } catch (const fs::filesystem_error& e) {
      return Error{fmt::format("--checkpoint: cannot write {}/latest: {}", dir, e.what())};
    }
  return true;
}

const char* to_string(Naming n) { return n == Naming::module ? "a stage run" : "an op-by-op run"; }

Result<int> latest_checkpoint(const std::string& dir, const std::string& option) {
  const auto file = fs::path(dir) / "latest";
  if (!fs::exists(file)) return 0;
  std::ifstream in(file);
  int steps = -1;
  in >> steps;
  if (!in || steps < 1)
    return Error{fmt::format("{}: {}: expected the number of steps done", option, file.string())};
  return steps;
}

void write_checkpoint_part(const std::string& dir, const std::string& part,
                           const CheckpointMeta& meta,
                           const std::map<std::string, WholeTensor>& tensors) {
  const std::string at = step_dir(dir, meta.steps);
  fs::create_directories(at);
  torch::serialize::OutputArchive out;
  out.write("meta", torch::tensor({kFormat, meta.steps, meta.global_batch,
                                   static_cast<std::int64_t>(meta.seed),
                                   static_cast<std::int64_t>(meta.naming)}));
  out.write("scaler", torch::tensor({static_cast<double>(meta.scaler.skipped), meta.scaler.scale,
                                     static_cast<double>(meta.scaler.clean)},
                                    torch::kDouble));
  std::string names;
  int i = 0;
  for (const auto& [name, t] : tensors) {
    names += name + "\n";
    out.write(fmt::format("v{}", i), t.value.detach().to(torch::kCPU).contiguous());
    out.write(fmt::format("m{}", i), t.exp_avg.detach().to(torch::kCPU).contiguous());
    out.write(fmt::format("s{}", i), t.exp_avg_sq.detach().to(torch::kCPU).contiguous());
    ++i;
  }
  out.write("names", text_tensor(names));
  const std::string file = fmt::format("{}/{}.pt", at, part);
  out.save_to(file + ".tmp");
  fs::rename(file + ".tmp", file);
}

void publish_checkpoint(const std::string& dir, int steps) {
  const auto root = fs::path(dir);
  {
    std::ofstream out(root / "latest.tmp");
    out << steps << "\n";
    if (!out) throw fs::filesystem_error("cannot write", root / "latest.tmp", {});
  }
  fs::rename(root / "latest.tmp", root / "latest");
  for (const auto& entry : fs::directory_iterator(root))
    if (entry.is_directory() && entry.path().filename().string().rfind("step-", 0) == 0 &&
        entry.path().filename() != fmt::format("step-{}", steps))
      fs::remove_all(entry.path());
}

Result<Checkpoint> read_checkpoint(const std::string& dir, int steps, const torch::Device& device,
                                   const std::string& option) {
  const std::string at = step_dir(dir, steps);
  if (!fs::is_directory(at))
    return Error{fmt::format(
        "{}: {}/latest names step {}, but {} is missing (a directory this rank does not share "
        "with rank 0?)",
        option, dir, steps, at)};
  std::vector<fs::path> parts;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(at, ec))
    if (entry.path().extension() == ".pt") parts.push_back(entry.path());
  if (ec) return Error{fmt::format("{}: {}: cannot read it: {}", option, at, ec.message())};
  std::sort(parts.begin(), parts.end());
  if (parts.empty())
    return Error{fmt::format("{}: {}/latest names step {}, but {} holds no part (.pt)", option, dir,
                             steps, at)};
  Checkpoint ck;
  for (std::size_t k = 0; k < parts.size(); ++k) {
    const std::string file = parts[k].string();
    try {
      torch::serialize::InputArchive in;
      in.load_from(file, device);
      torch::Tensor meta;
      in.read("meta", meta);
      meta = meta.to(torch::kCPU);
      if (meta.numel() != 5 || meta[0].item<std::int64_t>() != kFormat)
        return Error{fmt::format(
            "{}: {}: written by an older hetplan (one file per rank of its plan); expected the "
            "plan-independent format {}",
            option, file, kFormat)};
      CheckpointMeta got{meta[1].item<std::int64_t>(),
                         meta[2].item<std::int64_t>(),
                         static_cast<std::uint64_t>(meta[3].item<std::int64_t>()),
                         static_cast<Naming>(meta[4].item<std::int64_t>()),
                         {}};
      if (torch::Tensor scaler; in.try_read("scaler", scaler)) {
        scaler = scaler.to(torch::kCPU, torch::kDouble);
        if (scaler.numel() != 3)
          return Error{fmt::format("{}: {}: expected 3 loss-scaling figures, got {}", option, file,
                                   scaler.numel())};
        got.scaler = ScalerState{std::llround(scaler[0].item<double>()), scaler[1].item<double>(),
                                 std::llround(scaler[2].item<double>())};
      }
      if (got.steps != steps)
        return Error{fmt::format("{}: {} holds step {}, not the step {} latest names", option, file,
                                 got.steps, steps)};
      if (k == 0) {
        ck.meta = got;
      } else if (got.scaler != ck.meta.scaler) {
        return Error{fmt::format(
            "{}: {} holds other loss-scaling figures than {} (steps skipped {} and {}, scales {:g} "
            "and {:g}): parts of different runs",
            option, file, parts[0].string(), got.scaler.skipped, ck.meta.scaler.skipped,
            got.scaler.scale, ck.meta.scaler.scale)};
      } else if (got.global_batch != ck.meta.global_batch || got.seed != ck.meta.seed ||
                 got.naming != ck.meta.naming) {
        return Error{
            fmt::format("{}: {} was written by another run than {} (global batch {}, "
                        "seed {}; there {} and {})",
                        option, file, parts[0].string(), got.global_batch, got.seed,
                        ck.meta.global_batch, ck.meta.seed)};
      }
      torch::Tensor names;
      in.read("names", names);
      const std::string text = tensor_text(names);
      std::size_t from = 0;
      for (int i = 0; from < text.size(); ++i) {
        const std::size_t end = text.find('\n', from);
        const std::string name = text.substr(from, end - from);
        from = end + 1;
        WholeTensor t;
        in.read(fmt::format("v{}", i), t.value);
        in.read(fmt::format("m{}", i), t.exp_avg);
        in.read(fmt::format("s{}", i), t.exp_avg_sq);
        ck.tensors[name] = std::move(t);
      }
    } catch (const c10::Error& e) {
      return Error{
          fmt::format("{}: {}: cannot read it: {}", option, file, e.what_without_backtrace())};
    }
  }
  return ck;
}

Result<int> agreed_resume_step(const std::string& dir, const std::string& option,
                               Collectives* world, const torch::Device& device) {
  int step = 0;
  std::optional<Error> unreadable;
  if (!dir.empty()) {
    auto latest = latest_checkpoint(dir, option);
    if (latest)
      step = *latest;
    else
      unreadable = latest.error();
  }
  // Every rank must go on from the same step. Rank 0 alone writes `latest`, so the directory must
  // be one every rank sees; ranks that find different steps (or none) stop together.
  if (world) {
    // One all-reduce of (step, -step) by maximum gives the highest and the lowest.
    const double mine = unreadable ? -1.0 : static_cast<double>(step);
    std::vector<torch::Tensor> range{
        torch::tensor({mine, -mine}, torch::TensorOptions().dtype(torch::kDouble).device(device))};
    try {
      c10d::AllreduceOptions max;
      max.reduceOp = c10d::ReduceOp::MAX;
      world->allreduce(range, max)->wait();
    } catch (const std::exception& e) {
      return Error{
          fmt::format("{}: the ranks could not compare their steps: {}", option, failure_text(e))};
    }
    const double hi = range[0][0].item<double>(), lo = -range[0][1].item<double>();
    if (!unreadable && lo != hi)
      return Error{fmt::format(
          "{}: {}: the ranks find different steps to resume from ({} to {}; -1: unreadable): "
          "every rank must see the one directory rank 0 writes",
          option, dir, lo, hi)};
  }
  if (unreadable) return *unreadable;
  return step;
}

Result<Checkpoint> resume_values(const std::string& dir, int steps, const std::string& option,
                                 const CheckpointMeta& run, torch::nn::Module& module,
                                 const torch::Device& device, const std::string& model_name) {
  auto read = read_checkpoint(dir, steps, device, option);
  if (!read) return read.error();
  const CheckpointMeta& got = read->meta;
  if (got.global_batch != run.global_batch || got.seed != run.seed)
    return Error{fmt::format(
        "{}: {}: step {} was taken with global batch {} and seed {}; this run has {} and {} (the "
        "data position is counted in global batches of the seed's stream)",
        option, dir, steps, got.global_batch, got.seed, run.global_batch, run.seed)};
  if (got.naming != run.naming)
    return Error{fmt::format(
        "{}: {}: step {} was written by {}, whose tensors go by other names than this plan's ({}: "
        "resume it under a plan that runs as it did)",
        option, dir, steps, to_string(got.naming), to_string(run.naming))};
  torch::NoGradGuard no_grad;
  for (const auto& item : module.named_parameters(true))
    if (const auto it = read->tensors.find(item.key()); it != read->tensors.end()) {
      if (!it->second.value.sizes().equals(item.value().sizes()))
        return Error{fmt::format("{}: {}: {} is {} in the checkpoint but {} in {}", option, dir,
                                 item.key(), fmt::join(it->second.value.sizes(), "x"),
                                 fmt::join(item.value().sizes(), "x"), model_name)};
      item.value().copy_(it->second.value);
    }
  return read;
}

torch::Tensor part_of_whole(const ShardLayouts& layouts, const torch::Tensor& t,
                            const torch::Tensor& whole) {
  const auto sizes = layouts.to_whole(t, t.detach()).sizes().vec();
  return layouts.to_part(t, whole.reshape(sizes)).contiguous().clone();
}

void set_adam_state(torch::optim::Adam& adam, const torch::Tensor& t, std::int64_t steps,
                    const torch::Tensor& exp_avg, const torch::Tensor& exp_avg_sq) {
  auto st = std::make_unique<torch::optim::AdamParamState>();
  st->step(steps);
  st->exp_avg(exp_avg);
  st->exp_avg_sq(exp_avg_sq);
  adam.state()[c10::guts::to_string(t.unsafeGetTensorImpl())] = std::move(st);
}

std::pair<torch::Tensor, torch::Tensor> adam_moments(torch::optim::Adam& adam,
                                                     const torch::Tensor& t) {
  const auto it = adam.state().find(c10::guts::to_string(t.unsafeGetTensorImpl()));
  if (it == adam.state().end()) return {torch::zeros_like(t), torch::zeros_like(t)};
  const auto& st = static_cast<const torch::optim::AdamParamState&>(*it->second);
  return {st.exp_avg(), st.exp_avg_sq()};
}

}  // namespace hetplan::runtime::detail
