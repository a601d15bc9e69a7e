// The strategy shorthand: "key=value,key=value", each key at most once.
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <charconv>
#include <climits>

#include "hetplan/core/nearest_name.h"
#include "hetplan/plan/strategy.h"

namespace hetplan::plan {
namespace {

constexpr std::array<std::string_view, 20> kKeys{
    "dp",        "tp",      "pp",        "vpp",  "mbs",  "gbs",           "recompute",
    "attention", "zero",    "schedule",  "sp",   "bn",   "grad_priority", "loss_bound",
    "multipath", "overlap", "precision", "adam", "loss", "metrics"};

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

// A positive integer no larger than max; the whole value must be digits.
std::int64_t positive_int(std::string_view item, std::string_view value, std::int64_t max) {
  std::int64_t x = 0;
  auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), x);
  if (ec != std::errc() || end != value.data() + value.size() || x < 1 || x > max)
    throw InputError(std::string(item), max < INT_MAX
                                            ? fmt::format("expected an integer in 1..{}", max)
                                            : std::string("expected a positive integer"));
  return x;
}

// A single digit in 0..max (max <= 9), for `expected`'s message.
int digit(std::string_view item, std::string_view value, int max, const std::string& expected) {
  if (value.size() != 1 || value[0] < '0' || value[0] > '0' + max)
    throw InputError(std::string(item), expected);
  return value[0] - '0';
}

// A fraction in [0, kMaxLossBound]; the whole value must be a number.
double loss_fraction(std::string_view item, std::string_view value) {
  double x = -1;
  auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), x);
  if (ec != std::errc() || end != value.data() + value.size() || !(x >= 0 && x <= kMaxLossBound))
    throw InputError(std::string(item),
                     fmt::format("expected a number in [0, {:g}] (the fraction of gradient bytes "
                                 "that may be dropped per iteration)",
                                 kMaxLossBound));
  return x;
}

void apply(Strategy& s, std::string_view key, std::string_view value, std::string_view item) {
  const std::string field(item);
  if (key == "dp")
    s.dp = static_cast<int>(positive_int(item, value, INT_MAX));
  else if (key == "tp")
    s.tp = static_cast<int>(positive_int(item, value, INT_MAX));
  else if (key == "pp")
    s.pp = static_cast<int>(positive_int(item, value, INT_MAX));
  else if (key == "vpp")
    s.vpp = static_cast<int>(positive_int(item, value, INT_MAX));
  else if (key == "mbs")
    s.mbs = static_cast<double>(positive_int(item, value, INT_MAX));
  else if (key == "gbs")
    s.gbs = positive_int(item, value, kMaxGlobalBatch);
  else if (key == "recompute") {
    auto r = recompute_from_string(value);
    if (!r) throw InputError(field, fmt::format("expected one of {}", recompute_names()));
    s.recompute = *r;
  } else if (key == "attention") {
    auto a = attention_from_string(value);
    if (!a) throw InputError(field, fmt::format("expected one of {}", attention_names()));
    s.attention = *a;
  } else if (key == "precision") {
    auto d = precision_from_string(value);
    if (!d) throw InputError(field, fmt::format("expected one of {}", precision_names()));
    s.precision = *d;
  } else if (key == "adam") {
    auto a = adam_from_string(value);
    if (!a) throw InputError(field, fmt::format("expected one of {}", adam_names()));
    s.adam = *a;
  } else if (key == "loss") {
    auto l = loss_from_string(value);
    if (!l) throw InputError(field, fmt::format("expected one of {}", loss_names()));
    s.loss = *l;
  } else if (key == "metrics") {
    s.metrics =
        digit(item, value, kMaxMetrics, fmt::format("expected an integer in 0..{}", kMaxMetrics));
  } else if (key == "overlap") {
    auto o = overlap_from_string(value);
    if (!o) throw InputError(field, fmt::format("expected one of {}", overlap_names()));
    s.overlap = *o;
  } else if (key == "zero") {
    s.zero = digit(item, value, 3, "expected 0, 1, 2 or 3");
  } else if (key == "schedule") {
    auto v = schedule_from_string(value);
    if (!v) throw InputError(field, fmt::format("expected one of {}", schedule_names()));
    s.schedule = *v;
    s.schedule_given = true;
  } else if (key == "sp") {
    if (value == "1" || value == "true")
      s.sp = true;
    else if (value == "0" || value == "false")
      s.sp = false;
    else
      throw InputError(field, "expected 0, 1, true or false");
  } else if (key == "bn") {
    auto v = batch_norm_from_string(value);
    if (!v) throw InputError(field, fmt::format("expected one of {}", batch_norm_names()));
    s.bn = *v;
  } else if (key == "grad_priority") {
    auto v = grad_priority_from_string(value);
    if (!v) throw InputError(field, fmt::format("expected one of {}", grad_priority_names()));
    s.grad_priority = *v;
  } else if (key == "loss_bound") {
    s.loss_bound = loss_fraction(item, value);
  } else if (key == "multipath") {
    auto v = multipath_from_string(value);
    if (!v) throw InputError(field, fmt::format("expected one of {}", multipath_names()));
    s.multipath = *v;
  }
}

std::string allowed_keys() {
  std::string out;
  for (std::string_view k : kKeys) {
    if (!out.empty()) out += ", ";
    out += k;
  }
  return out;
}

Strategy parse(std::string_view text) {
  Strategy s;
  std::array<bool, kKeys.size()> seen{};
  text = trim(text);
  if (text.empty()) return s;
  std::size_t index = 0;
  while (true) {
    std::size_t comma = text.find(',');
    std::string_view item = trim(text.substr(0, comma));
    if (item.empty())
      throw InputError(fmt::format("item {}", index + 1),
                       "empty: expected key=value pairs separated by commas");
    std::size_t eq = item.find('=');
    if (eq == std::string_view::npos) throw InputError(std::string(item), "expected key=value");
    std::string_view key = trim(item.substr(0, eq));
    std::string_view value = trim(item.substr(eq + 1));
    auto it = std::find(kKeys.begin(), kKeys.end(), key);
    if (it == kKeys.end())
      throw InputError(std::string(item), fmt::format("unknown key{} (allowed: {})",
                                                      did_you_mean(key, kKeys), allowed_keys()));
    auto k = static_cast<std::size_t>(it - kKeys.begin());
    if (seen[k]) throw InputError(std::string(item), fmt::format("{} is given twice", key));
    seen[k] = true;
    apply(s, key, value, item);
    if (comma == std::string_view::npos) break;
    text.remove_prefix(comma + 1);
    ++index;
  }
  // Keys that only make sense together.
  if (s.vpp > 1 && s.pp == 1)
    throw InputError(fmt::format("vpp={}", s.vpp),
                     "expected pp > 1 (virtual stages interleave over the pipeline ranks)");
  if (s.vpp > 1 && s.schedule_given && s.schedule != Schedule::interleaved)
    throw InputError(fmt::format("schedule={}", to_string(s.schedule)),
                     fmt::format("expected schedule=interleaved with vpp={}", s.vpp));
  if (s.vpp == 1 && s.schedule == Schedule::interleaved)
    throw InputError("schedule=interleaved", "expected vpp > 1 (model chunks per pipeline rank)");
  if (s.vpp > 1) s.schedule = Schedule::interleaved;
  if (s.loss_bound > 0 && s.grad_priority == GradPriority::none)
    throw InputError(fmt::format("loss_bound={:g}", s.loss_bound),
                     "expected grad_priority=layer or grad_priority=layer+magnitude (late chunks "
                     "are dropped lowest priority first)");
  return s;
}

}  // namespace

std::string to_string(const Strategy& s) {
  std::string out;
  if (s.dp > 0) out += fmt::format("dp={},", s.dp);
  out += fmt::format("tp={},pp={},vpp={},mbs={},", s.tp, s.pp, s.vpp, s.mbs);
  if (s.gbs > 0) out += fmt::format("gbs={},", s.gbs);
  out += fmt::format("recompute={},zero={},schedule={},sp={}", recompute_name(s.recompute), s.zero,
                     to_string(s.schedule), s.sp ? 1 : 0);
  if (s.attention != cost::Attention::plain)
    out += fmt::format(",attention={}", attention_name(s.attention));
  if (s.precision) out += fmt::format(",precision={}", precision_name(*s.precision));
  if (s.adam != cost::AdamKernels::fused) out += fmt::format(",adam={}", adam_name(s.adam));
  if (s.loss != cost::Loss::unfused) out += fmt::format(",loss={}", loss_name(s.loss));
  if (s.metrics != 0) out += fmt::format(",metrics={}", s.metrics);
  if (s.overlap != Overlap::none) out += fmt::format(",overlap={}", to_string(s.overlap));
  if (s.bn != BatchNormStats::local) out += fmt::format(",bn={}", to_string(s.bn));
  if (s.grad_priority != GradPriority::none)
    out += fmt::format(",grad_priority={}", to_string(s.grad_priority));
  if (s.loss_bound != 0) out += fmt::format(",loss_bound={:g}", s.loss_bound);
  if (s.multipath != Multipath::ecmp) out += fmt::format(",multipath={}", to_string(s.multipath));
  return out;
}

Result<Strategy> parse_strategy(std::string_view text, std::string_view source) {
  return capture_errors(std::string(source), [&] { return parse(text); });
}

}  // namespace hetplan::plan
