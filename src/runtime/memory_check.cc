#include "hetplan/runtime/memory_check.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>

#include "check/stage_plan.h"
#include "hetplan/core/quantity_parse.h"
#include "hetplan/cost/memory_cost.h"
#include "hetplan/runtime/run.h"
#include "hetplan/sim/simulate.h"

namespace hetplan::runtime {
namespace {

constexpr double kProcessBytes = 180.0 * 1024 * 1024;

// The number `word` is, all of it (nullopt for anything else).
std::optional<double> number_of(const std::string& word) {
  try {
    std::size_t used = 0;
    const double v = std::stod(word, &used);
    if (used != word.size()) return std::nullopt;
    return v;
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

// The first number of a one-line file ("max" and unreadable files: nullopt).
std::optional<double> read_number(const char* path) {
  std::ifstream in(path);
  std::string word;
  if (!(in >> word)) return std::nullopt;
  return number_of(word);
}

// The parameters of layers [first, first + count), and those of them that are linear layers' and
// convolutions' weights (biases excluded): what the runtime holds in 16 bits under mixed
// precision (SixteenBitWeights).
std::pair<double, double> sixteen_bit_params(const model::Model& m, int first, int count) {
  double all = 0, sixteen = 0;
  for (int li = first; li < first + count; ++li) {
    const model::Layer& layer = m.layers[static_cast<std::size_t>(li)];
    for (int oi = layer.first_op; oi < layer.first_op + layer.num_ops; ++oi) {
      const model::Op& op = m.ops[static_cast<std::size_t>(oi)];
      const auto n = static_cast<double>(op.params);
      all += n;
      // (A mixture's experts are the runtime's own tensors, not linear layers: fp32.)
      const bool linear = op.kind == model::OpKind::matmul && op.shard != model::ShardKind::expert;
      if (!(linear || op.kind == model::OpKind::conv2d) || n <= 0) continue;
      const model::OpCompute& c = op.compute;
      const auto out = c.shape.empty()                    ? 0.0
                       : op.kind == model::OpKind::conv2d ? static_cast<double>(c.shape.front())
                                                          : static_cast<double>(c.shape.back());
      sixteen += c.bias ? n - out : n;
    }
  }
  return {all, sixteen};
}

// Whether the ranks of stage `st` hold their linear layers' weights in 16 bits and their fp32
// master in the optimizer's slices (run.cc's SixteenBitWeights: mixed precision over replicas that
// split alike, not under ZeRO-3 over several, not a batch program).
bool sixteen_bit_stage(const plan::Plan& p, const plan::Stage& st, bool batch_program,
                       model::DType precision) {
  if (model::dtype_bytes(precision) != 2 || batch_program) return false;
  if (p.zero_stage == 3 && st.replicas.size() > 1) return false;
  return detail::alike(detail::replicas_of(st));
}

// Whether the ranks of stage `st` reduce each backward pass's gradients to their slices' owners
// (run.cc's reduce_to_slices, SliceBuckets): ZeRO-2 and -3 over replicas that split alike, not a
// batch program, not a tied head over a pipeline (its two copies are summed whole first).
bool slices_gradients(const model::Model& m, const plan::Plan& p, const plan::Stage& st,
                      bool batch_program) {
  if (p.zero_stage < 2 || st.replicas.size() < 2 || batch_program) return false;
  if (p.stages.size() > 1 && m.tied_reader() >= 0) return false;
  return detail::alike(detail::replicas_of(st));
}

}  // namespace

Result<std::vector<RankMemory>> rank_memory(const model::Model& m, const cluster::Cluster& c,
                                            const plan::Plan& p, RankHost host) {
  auto sim = sim::simulate(m, c, p, sim::SimOptions{});
  if (!sim) return sim.error();
  const double width = model::dtype_bytes(m.dtype);
  // The simulator's bytes per parameter (cost::state_bytes): weights in the model's dtype,
  // gradients in it too but fp32 for bf16, and for 16-bit models an fp32 master copy beside
  // Adam's two fp32 moments. The runtime keeps fp32 weights (but, in mixed precision, its linear
  // layers' in 16 bits), fp32 gradients and moments, and the fp32 copy of the weights it steps
  // (under ZeRO its slice of them all; else the 16-bit weights' master).
  const cost::StateBytes states = cost::state_bytes(m.dtype);
  // The number of replicas of each device's stage: the simulator's ZeRO group (the runtime's for
  // ranks that split alike; those that split unlike slice their stage's whole layout, which holds
  // no less).
  std::map<int, int> zero_group;
  // Each device's parameters, and those of them held in 16 bits, over the stages it runs.
  std::map<int, std::pair<double, double>> sixteen_of;
  // The stages (first layer, count) of each device whose stages reduce each pass's gradients to
  // slices, and its tensor-parallel degree; of those whose buckets pay, the largest fp32 bucket.
  std::map<int, std::pair<std::vector<std::pair<int, int>>, int>> chunks_of;
  std::map<int, double> bucket_of;
  const auto program = detail::batch_program_of(m, p);
  const bool batch_program = !program || program->has_value();
  for (const auto& st : p.stages) {
    const bool sixteen = sixteen_bit_stage(p, st, batch_program, host.precision);
    const auto [all, held] = sixteen ? sixteen_bit_params(m, st.first_layer, st.num_layers)
                                     : std::pair<double, double>{};
    const bool slices = slices_gradients(m, p, st, batch_program);
    for (const auto& rep : st.replicas)
      for (int d : rep.devices) {
        if (slices) {
          chunks_of[d].first.emplace_back(st.first_layer, st.num_layers);
          chunks_of[d].second = static_cast<int>(rep.devices.size());
        }
        zero_group[d] = static_cast<int>(st.replicas.size());
        sixteen_of[d].first += all;
        sixteen_of[d].second += held;
      }
  }
  for (const auto& [d, chunks] : chunks_of)
    if (const auto bytes =
            detail::slice_bucket_bytes(m, chunks.first, chunks.second, p.grad_bucket_bytes);
        detail::slice_buckets_pay(bytes))
      bucket_of[d] = bytes.largest;
  std::vector<RankMemory> out;
  for (int d : rank_devices(p)) {
    const sim::DeviceStats& s = sim->devices.at(static_cast<std::size_t>(d));
    RankMemory r;
    r.device = d;
    r.gpu = host.gpu;
    r.whole_model = Bytes(4.0 * static_cast<double>(m.parameters()));
    r.weights = s.memory.parameters * (4.0 / states.weight);
    // Mixed precision: the linear layers' weights in 16 bits (their share of the device's stages'
    // parameters), their fp32 master in the optimizer's slices (below).
    Bytes linear;  // the linear layers' weights in fp32: their master, without ZeRO
    if (const auto [all, sixteen] = sixteen_of[d]; all > 0) {
      linear = r.weights * (sixteen / all);
      r.sixteen_bit_weights = linear * 0.5;
      r.weights = r.weights - linear;
    }
    // ZeRO-3: the simulator keeps a slice of the weights and gathers a layer's at a time; the
    // runtime gathers a model chunk's whole weights for each of its passes.
    if (p.zero_stage == 3) r.weights = r.weights * static_cast<double>(zero_group[d]);
    r.gradients = s.memory.gradients * (4.0 / states.gradient);
    // Under ZeRO-2 and -3 the simulator keeps a slice of the gradients (reduce-scattered as each
    // backward pass goes). So does the runtime over replicas that split alike, holding besides the
    // buckets not yet reduced; elsewhere it holds its whole part until the passes are done, then
    // sums a flat copy of it.
    const auto slicing = bucket_of.find(d);
    const Bytes whole_gradients = r.gradients * static_cast<double>(zero_group[d]);
    if (p.zero_stage >= 2 && slicing == bucket_of.end()) r.gradients = whole_gradients;
    // Adam's two fp32 moments, and the fp32 copy of the weights it steps: under ZeRO the slice of
    // them all, else the 16-bit weights' master.
    r.optimizer = s.memory.optimizer * (8.0 / states.optimizer);
    if (p.zero_stage >= 1 && zero_group[d] > 1)
      r.optimizer = r.optimizer * 1.5;
    else
      r.optimizer = r.optimizer + linear;
    // (The loss's transient gradient buffers are fp32 whatever the model's dtype.)
    const double computed = host.gpu ? model::dtype_bytes(host.precision) : 4.0;
    r.activations = s.memory.activations * (computed / width) + s.memory.transient;
    if (slicing != bucket_of.end())
      r.gradient_buffers = Bytes(detail::kSliceBucketsHeld * slicing->second);
    else if (p.zero_stage >= 2)
      r.gradient_buffers = max(Bytes(0), r.gradients - r.activations);
    const cost::MemoryConfig outside;  // the simulator's reserve beyond the tensors
    r.process = host.gpu ? outside.context + outside.workspace : Bytes(kProcessBytes);
    out.push_back(r);
  }
  return out;
}

std::optional<Bytes> host_available_memory() {
  std::optional<double> available;
  std::ifstream info("/proc/meminfo");
  std::string line;
  while (std::getline(info, line))
    if (line.rfind("MemAvailable:", 0) == 0) {
      std::istringstream words(line.substr(13));
      double kib = 0;
      if (words >> kib) available = kib * 1024.0;
    }
  const auto limit = read_number("/sys/fs/cgroup/memory.max");
  const auto current = read_number("/sys/fs/cgroup/memory.current");
  if (limit && current) {
    const double room = std::max(0.0, *limit - *current);
    available = available ? std::min(*available, room) : room;
  }
  if (!available) return std::nullopt;
  return Bytes(*available);
}

std::optional<Bytes> parse_gpu_free_mib(const std::string& text) {
  std::istringstream in(text);
  std::string word, more;
  if (!(in >> word) || (in >> more)) return std::nullopt;
  const auto mib = number_of(word);
  if (!mib || !(*mib >= 0)) return std::nullopt;
  return Bytes(*mib * 1024 * 1024);
}

std::optional<Bytes> gpu_free_memory(int local) {
  // nvidia-smi numbers every GPU of the host; CUDA, those CUDA_VISIBLE_DEVICES lists (indices or
  // UUIDs, which nvidia-smi's -i takes too).
  std::string which = std::to_string(local);
  if (const char* visible = std::getenv("CUDA_VISIBLE_DEVICES"); visible && *visible) {
    std::istringstream list(visible);
    std::string entry;
    for (int i = 0; std::getline(list, entry, ','); ++i)
      if (i == local) which = entry;
    if (which.empty() || !std::all_of(which.begin(), which.end(), [](unsigned char ch) {
          return std::isalnum(ch) || ch == '-' || ch == '/';
        }))
      return std::nullopt;  // not an index or a UUID: nothing to pass to a shell
  }
  const std::string command =
      "nvidia-smi --query-gpu=memory.free --format=csv,noheader,nounits -i " + which +
      " 2>/dev/null";
  FILE* pipe = ::popen(command.c_str(), "r");
  if (pipe == nullptr) return std::nullopt;
  std::string out;
  char buf[256];
  while (std::fgets(buf, sizeof buf, pipe) != nullptr) out += buf;
  if (::pclose(pipe) != 0) return std::nullopt;
  return parse_gpu_free_mib(out);
}

std::string trained_parts(const RankMemory& r) {
  return fmt::format(
      "its part of the {}, gradients {}, Adam {}, activations {}{}",
      r.sixteen_bit_weights.value > 0 ? fmt::format("weights {} (its linear layers' {} in 16 bits)",
                                                    format_bytes(r.weights + r.sixteen_bit_weights),
                                                    format_bytes(r.sixteen_bit_weights))
                                      : fmt::format("fp32 weights {}", format_bytes(r.weights)),
      format_bytes(r.gradients), format_bytes(r.optimizer), format_bytes(r.activations),
      r.gradient_buffers.value > 0
          ? fmt::format(", gradient buffers {}", format_bytes(r.gradient_buffers))
          : "");
}

Bytes RankMemory::host() const { return gpu ? whole_model + Bytes(kProcessBytes) : total(); }

std::string gpu_memory_shortfall(const RankMemory& r, int local, Bytes free) {
  if (r.total() <= free) return "";
  return fmt::format(
      "memory: the rank running device {} needs about {} on its GPU (CUDA device {}) but {} is "
      "free there: {}, the CUDA context and workspaces {}; use a smaller model or batch, a plan "
      "that holds less per device, or --no-memory-check",
      r.device, format_bytes(r.total()), local, format_bytes(free), trained_parts(r),
      format_bytes(r.process));
}

MemoryTotals memory_totals(const std::vector<RankMemory>& ranks, MemoryOf of) {
  MemoryTotals t;
  auto need = [of](const RankMemory& r) { return of == MemoryOf::host ? r.host() : r.total(); };
  for (const RankMemory& r : ranks) {
    t.all += need(r);
    if (!t.largest || need(r) > need(*t.largest)) t.largest = &r;
  }
  return t;
}

std::string memory_shortfall(const std::vector<RankMemory>& ranks, Bytes available) {
  const auto [need, largest] = memory_totals(ranks, MemoryOf::host);
  if (!largest || need <= available) return "";
  const RankMemory& r = *largest;
  return fmt::format(
      "memory: the {} rank(s) need about {} on this host but {} is available; the largest, "
      "device {}, holds {} ({}); use fewer ranks per host, a smaller model or batch, or "
      "--no-memory-check",
      ranks.size(), format_bytes(need), format_bytes(available), r.device, format_bytes(r.host()),
      r.gpu ? fmt::format("the whole fp32 model {} that it builds before moving its part to its "
                          "GPU, the process {}",
                          format_bytes(r.whole_model), format_bytes(Bytes(kProcessBytes)))
            : fmt::format("the whole fp32 model {} that it builds first, then {}; the process {}",
                          format_bytes(r.whole_model), trained_parts(r), format_bytes(r.process)));
}

}  // namespace hetplan::runtime
