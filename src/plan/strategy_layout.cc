// Lays a Megatron-style strategy out as a Plan (see strategy.h for the rules).
#include <fmt/format.h>

#include <climits>

#include "hetplan/plan/strategy.h"

namespace hetplan::plan {
namespace {

// Products of positive ints, saturating so that absurd requests compare as "too many".
std::int64_t product(std::initializer_list<std::int64_t> xs) {
  std::int64_t p = 1;
  for (std::int64_t x : xs) p = (p > LLONG_MAX / x) ? LLONG_MAX : p * x;
  return p;
}

// Fills dp and gbs, and checks the strategy against the model and the cluster.
Strategy resolve(Strategy s, const model::Model& m, const cluster::Cluster& c) {
  const std::int64_t devices = c.num_devices();
  if (s.tp < 1 || s.pp < 1 || s.vpp < 1 || s.dp < 0 || s.gbs < 0 || !(s.mbs >= 1) ||
      s.mbs != static_cast<double>(static_cast<std::int64_t>(s.mbs)) || s.zero < 0 || s.zero > 3)
    throw InputError(to_string(s), "expected positive dp, tp, pp, vpp, mbs, gbs and zero in 0..3");
  if (m.heads > 0 && m.heads % s.tp != 0)
    throw InputError(
        fmt::format("tp={}", s.tp),
        fmt::format("expected a divisor of the number of attention heads ({})", m.heads));
  if (m.kv_heads > 0 && m.kv_heads % s.tp != 0)
    throw InputError(
        fmt::format("tp={}", s.tp),
        fmt::format("expected a divisor of the number of key/value heads ({})", m.kv_heads));
  if (m.experts > 0 && m.experts % s.tp != 0)
    throw InputError(fmt::format("tp={}", s.tp),
                     fmt::format("expected a divisor of the number of experts ({})", m.experts));
  if (s.dp > 0) {
    std::int64_t want = product({s.dp, s.tp, s.pp});
    if (want > devices)
      throw InputError(
          fmt::format("dp*tp*pp = {} devices requested but the cluster has {}",
                      want == LLONG_MAX ? std::string("too many") : std::to_string(want), devices));
  } else {
    std::int64_t per_replica = product({s.tp, s.pp});
    if (per_replica > devices)
      throw InputError(fmt::format(
          "tp*pp = {} devices requested but the cluster has {}",
          per_replica == LLONG_MAX ? std::string("too many") : std::to_string(per_replica),
          devices));
    s.dp = static_cast<int>(devices / per_replica);
  }
  const auto mbs = static_cast<std::int64_t>(s.mbs);
  const std::int64_t per_round = product({s.dp, mbs});
  if (s.gbs == 0) s.gbs = product({per_round, s.pp == 1 ? 1 : 4 * static_cast<std::int64_t>(s.pp)});
  if (s.gbs % per_round != 0)
    throw InputError(fmt::format("gbs={}", s.gbs),
                     fmt::format("expected a multiple of dp*mbs = {}", per_round));
  const std::int64_t rounds = s.gbs / per_round;
  if (rounds > INT_MAX)
    throw InputError(
        fmt::format("gbs={}", s.gbs),
        fmt::format("expected at most {} micro-batches (gbs/(dp*mbs)), got {}", INT_MAX, rounds));
  if (s.schedule == Schedule::interleaved && rounds % s.pp != 0)
    throw InputError(fmt::format("gbs={}", s.gbs),
                     fmt::format("expected the number of micro-batches gbs/(dp*mbs) = {} to be a "
                                 "multiple of pp = {} for the interleaved schedule",
                                 rounds, s.pp));
  return s;
}

// The layers the chunks are balanced over: the transformer blocks, or every layer if none.
std::vector<int> balance_units(const model::Model& m) {
  std::vector<int> units;
  for (std::size_t i = 0; i < m.layers.size(); ++i)
    if (m.layers[i].kind == model::LayerKind::transformer) units.push_back(static_cast<int>(i));
  if (units.empty())
    for (std::size_t i = 0; i < m.layers.size(); ++i) units.push_back(static_cast<int>(i));
  return units;
}

// Layer ranges of the pp * vpp chunks, as [first, end) pairs.
std::vector<std::pair<int, int>> chunk_layers(const Strategy& s, const model::Model& m) {
  if (m.layers.empty()) throw InputError("the model has no layers");
  const std::vector<int> units = balance_units(m);
  const bool blocks =
      m.layers[static_cast<std::size_t>(units.front())].kind == model::LayerKind::transformer;
  const char* what = blocks ? "transformer blocks" : "layers";
  const auto num_units = static_cast<std::int64_t>(units.size());
  const std::int64_t chunks = product({s.pp, s.vpp});
  const std::string key = s.vpp > 1 ? fmt::format("vpp={}", s.vpp) : fmt::format("pp={}", s.pp);
  if (chunks > num_units)
    throw InputError(key,
                     fmt::format("expected at most {} pipeline chunks (pp*vpp) for the model's "
                                 "{} {}, got {}",
                                 num_units, num_units, what, chunks));
  if (s.vpp > 1 && num_units % chunks != 0)
    throw InputError(key, fmt::format("expected pp*vpp = {} to divide the model's {} {}", chunks,
                                      num_units, what));
  // Chunk c holds base units, plus one for c in 1..rem.
  const std::int64_t base = num_units / chunks, rem = num_units % chunks;
  std::vector<std::pair<int, int>> ranges;
  std::int64_t next_unit = 0;
  for (std::int64_t c = 0; c < chunks; ++c) {
    const std::int64_t count = base + (c >= 1 && c <= rem ? 1 : 0);
    const int first = c == 0 ? 0 : units[static_cast<std::size_t>(next_unit)];
    next_unit += count;
    const int end = c + 1 == chunks ? static_cast<int>(m.layers.size())
                                    : units[static_cast<std::size_t>(next_unit)];
    ranges.emplace_back(first, end);
  }
  return ranges;
}

}  // namespace

Result<Plan> plan_from_strategy(const Strategy& strategy, const model::Model& m,
                                const cluster::Cluster& c, std::string_view source) {
  return capture_errors(std::string(source), [&] {
    const Strategy s = resolve(strategy, m, c);
    Plan p;
    p.model = m.name;
    p.cluster = c.reference_or_name();
    p.planner = "strategy:" + to_string(s);
    p.global_batch = s.gbs;
    p.num_microbatches =
        static_cast<int>(s.gbs / product({s.dp, static_cast<std::int64_t>(s.mbs)}));
    p.schedule = s.schedule;
    p.recompute = s.recompute;
    p.attention = s.attention;
    p.adam = s.adam;
    p.loss = s.loss;
    p.metrics = s.metrics;
    p.precision = s.precision;
    p.overlap = s.overlap;
    p.zero_stage = s.zero;
    p.sequence_parallel = s.sp;
    p.batch_norm = s.bn;
    p.grad_priority = s.grad_priority;
    p.loss_bound = s.loss_bound;
    p.multipath = s.multipath;
    const auto ranges = chunk_layers(s, m);
    for (std::size_t chunk = 0; chunk < ranges.size(); ++chunk) {
      const int pp_rank = static_cast<int>(chunk % static_cast<std::size_t>(s.pp));
      Stage st;
      st.first_layer = ranges[chunk].first;
      st.num_layers = ranges[chunk].second - ranges[chunk].first;
      for (int dp_rank = 0; dp_rank < s.dp; ++dp_rank) {
        Replica r;
        r.batch_share = 1.0 / s.dp;
        for (int tp_rank = 0; tp_rank < s.tp; ++tp_rank)
          r.devices.push_back(pp_rank * (s.dp * s.tp) + dp_rank * s.tp + tp_rank);
        st.replicas.push_back(std::move(r));
      }
      p.stages.push_back(std::move(st));
    }
    return p;
  });
}

}  // namespace hetplan::plan
