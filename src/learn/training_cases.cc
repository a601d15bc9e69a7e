// Generated training cases for TAG's network (train_policy.h).
#include <fmt/format.h>

#include <cmath>
#include <random>

#include "hetplan/learn/train_policy.h"

namespace hetplan::learn {
namespace {

// Draws by modulo and by scaling the engine's output directly: the same sequence with any
// standard library (its distributions are not portable).
struct Draw {
  std::mt19937_64 gen;
  int pick(int n) { return static_cast<int>(gen() % static_cast<std::uint64_t>(n)); }
  template <class T>
  const T& one_of(const std::vector<T>& v) {
    return v[static_cast<std::size_t>(pick(static_cast<int>(v.size())))];
  }
  double uniform() { return static_cast<double>(gen() >> 11) * 0x1.0p-53; }
  double log_uniform(double lo, double hi) {
    return std::exp(std::log(lo) + uniform() * (std::log(hi) - std::log(lo)));
  }
};

// Sizes beside the presets' (ResNet-50 and VGG-16 at 224, Inception-v3 at 299, BERT-base and
// -large, GPT-2): the held-out benchmark runs those.
std::string random_model(Draw& r) {
  switch (r.pick(5)) {
    case 0:
      return fmt::format("resnet:depth={},width={},image={}", r.one_of<int>({18, 34, 50}),
                         r.one_of<int>({16, 32}), r.one_of<int>({64, 96, 128}));
    case 1:
      return fmt::format("vgg:depth={},image={}", r.one_of<int>({11, 13, 16}),
                         r.one_of<int>({64, 96, 128}));
    case 2:
      return fmt::format("inception:image={}", r.one_of<int>({96, 128, 160}));
    case 3: {
      const int hidden = r.one_of<int>({256, 384, 512});
      return fmt::format("bert:layers={},hidden={},heads={},seq={},vocab={}",
                         r.one_of<int>({2, 4, 6}), hidden, hidden / 64, r.one_of<int>({128, 256}),
                         r.one_of<int>({8192, 30522}));
    }
    default: {
      const int hidden = r.one_of<int>({256, 384, 512});
      return fmt::format("gpt:layers={},hidden={},heads={},seq={},vocab={}",
                         r.one_of<int>({2, 4, 6}), hidden, hidden / 64, r.one_of<int>({128, 256}),
                         r.one_of<int>({8192, 32000}));
    }
  }
}

const std::vector<std::string> kDevices = {
    "V100-SXM2-16GB", "P100-PCIE-16GB", "GTX-1080Ti", "T4", "A10",
    "RTX-3090",       "A100-SXM4-40GB", "L4"};

std::string gbps(double x) { return fmt::format("{:.3g}Gbps", x); }

// Machines of one to four devices of one type each, a switch between them (1 to 100 Gb/s NICs);
// or, one time in four, an irregular explicit topology.
std::string random_cluster(Draw& r, std::string& summary) {
  const int machines = 2 + r.pick(3);
  if (r.pick(4) == 0) {
    std::string devices, links;
    summary = "irregular";
    int n = 0;
    for (int m = 0; m < machines; ++m) {
      const std::string& type = r.one_of(kDevices);
      const int count = r.one_of<int>({1, 2, 4});
      const bool nvlink = r.pick(2) == 0;
      summary += fmt::format(" {}x{}", count, type);
      for (int k = 0; k < count; ++k, ++n) {
        devices += fmt::format("  - {{name: g{}, device: {}, node: m{}}}\n", n, type, m);
        links += fmt::format("  - {{from: g{}, to: tor, bandwidth: {}, latency: 20us}}\n", n,
                             gbps(r.log_uniform(1, 100)));
        if (k > 0)
          links += fmt::format("  - {{from: g{}, to: g{}, bandwidth: {}, latency: 5us}}\n", n - 1,
                               n, nvlink ? "150GB/s" : "15.75GB/s");
      }
    }
    return fmt::format("version: 1\ndevices:\n{}switches:\n  - {{name: tor}}\nlinks:\n{}", devices,
                       links);
  }
  std::string yaml = "version: 1\nnodes:\n";
  const double nic = r.log_uniform(1, 100);
  summary = fmt::format("switch {}", gbps(nic));
  for (int m = 0; m < machines; ++m) {
    const std::string& type = r.one_of(kDevices);
    const int count = r.one_of<int>({1, 2, 4});
    const bool nvlink = r.pick(2) == 0;
    summary += fmt::format(" {}x{}", count, type);
    yaml += fmt::format(
        "  - group: m{}\n    count: 1\n    device: {}\n    devices_per_node: {}\n"
        "    intra_node: {{bandwidth: {}, latency: 5us}}\n"
        "    nic: {{bandwidth: {}, count: 1, latency: 30us}}\n",
        m, type, count, nvlink ? "150GB/s" : "15.75GB/s", gbps(nic));
  }
  return yaml + "network: {kind: switch}\n";
}

}  // namespace

std::vector<TrainingCase> training_cases(std::uint64_t seed, int count) {
  Draw r{std::mt19937_64(seed)};
  std::vector<TrainingCase> cases;
  for (int i = 0; i < count; ++i) {
    TrainingCase c;
    c.model = random_model(r);
    std::string summary;
    c.cluster_yaml = random_cluster(r, summary);
    c.global_batch = r.one_of<long long>({64, 128, 256});
    c.name = fmt::format("{} on {}, batch {}", c.model, summary, c.global_batch);
    cases.push_back(std::move(c));
  }
  return cases;
}

}  // namespace hetplan::learn
