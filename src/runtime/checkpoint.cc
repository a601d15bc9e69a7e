#include "checkpoint.h"

#include <fmt/format.h>

#include <filesystem>
#include <fstream>

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
                                   static_cast<std::int64_t>(meta.seed)}));
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
      if (meta.numel() != 4 || meta[0].item<std::int64_t>() != kFormat)
        return Error{fmt::format(
            "{}: {}: written by an older hetplan (one file per rank of its plan); expected the "
            "plan-independent format {}",
            option, file, kFormat)};
      const CheckpointMeta got{meta[1].item<std::int64_t>(), meta[2].item<std::int64_t>(),
                               static_cast<std::uint64_t>(meta[3].item<std::int64_t>())};
      if (got.steps != steps)
        return Error{fmt::format("{}: {} holds step {}, not the step {} latest names", option, file,
                                 got.steps, steps)};
      if (k == 0) {
        ck.meta = got;
      } else if (got.global_batch != ck.meta.global_batch || got.seed != ck.meta.seed) {
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

}  // namespace hetplan::runtime::detail
