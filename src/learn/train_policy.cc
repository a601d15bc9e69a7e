// AlphaZero-style training of TAG's network and policy-gradient training of HeteroG's decoder
// (train_policy.h).
#include "hetplan/learn/train_policy.h"

#include <fmt/format.h>

#include <chrono>
#include <deque>
#include <filesystem>
#include <memory>
#include <random>

#include "hetplan/cluster/cluster_file.h"
#include "hetplan/model/zoo.h"
#include "hetplan/search/estimate.h"
#include "hetplan/search/evaluate.h"
#include "hetplan/search/mcts.h"
#include "hetplan/search/tag.h"
#include "tag_net.h"

namespace hetplan::learn {
namespace {

// The network under training as the tree search's prior (no gradients).
class TrainingGuide : public search::TagGuide {
 public:
  explicit TrainingGuide(TagNet& net) : net_(net) {}
  std::string describe() const override { return "the network in training"; }
  std::vector<double> prior(const search::TagGraph& graph, const search::TagState& state) override {
    torch::NoGradGuard no_grad;
    if (cached_ != &graph) {  // the trainer holds one problem (and its graph) at a time
      tensors_ = to_tensors(graph);
      cached_ = &graph;
    }
    const auto p = torch::softmax(net_->forward(tensors_, state).policy, 0);
    return {p.data_ptr<float>(), p.data_ptr<float>() + p.size(0)};
  }
  std::vector<double> decode(const search::TagGraph& graph,
                             const search::TagState& state) override {
    torch::NoGradGuard no_grad;
    const auto p = torch::softmax(net_->forward(to_tensors(graph), state).decoder, 0);
    return {p.data_ptr<float>(), p.data_ptr<float>() + p.size(0)};
  }
  void forget() { cached_ = nullptr; }

 private:
  TagNet& net_;
  const search::TagGraph* cached_ = nullptr;
  GraphTensors tensors_;
};

struct Sample {
  std::shared_ptr<const GraphTensors> graph;
  search::TagState state;
  torch::Tensor target;  // visit distribution over the decision's options
  double value = 0;
};

// One case set up for searching: the model, the cluster and the search's context.
struct Setup {
  model::Model model;
  cluster::Cluster cluster;
  search::SearchOptions options;
  std::unique_ptr<search::Evaluator> evaluator;
  std::unique_ptr<search::Estimator> estimator;
  search::Deadline deadline{0};
  std::unique_ptr<search::Context> ctx;
};

Result<std::unique_ptr<Setup>> set_up(const TrainingCase& tc, std::uint64_t seed) {
  auto m = model::load_model(tc.model, "training case");
  if (!m) return m.error();
  auto c = cluster::parse_cluster_yaml(tc.cluster_yaml, "training case");
  if (!c) return c.error();
  auto s = std::make_unique<Setup>();
  s->model = std::move(*m);
  s->cluster = std::move(*c);
  s->options.global_batch = tc.global_batch;
  s->options.seed = seed;
  s->evaluator = std::make_unique<search::Evaluator>(s->model, s->cluster, s->options);
  s->estimator = std::make_unique<search::Estimator>(s->model, s->cluster, s->options);
  s->ctx = std::make_unique<search::Context>(
      search::Context{s->model, s->cluster, s->options, *s->evaluator, *s->estimator, s->deadline});
  return s;
}

Error option_error(const std::string& what) { return Error{"train-policy: " + what}; }

}  // namespace

Result<TrainReport> train_policy(const TrainOptions& o,
                                 const std::function<void(const std::string&)>& progress) {
  if (o.out.empty()) return option_error("--out: expected a file to write");
  if (o.iterations < 1) return option_error("--iterations: expected at least 1");
  if (o.epochs < 1) return option_error("--epochs: expected at least 1");
  if (o.cases_per_iteration < 1) return option_error("--cases: expected at least 1");
  if (o.simulations < 2) return option_error("--simulations: expected at least 2");
  if (o.decoder_samples < 0 || o.decoder_samples == 1)
    return option_error("--decoder-samples: expected 0 or at least 2");
  if (o.hidden < 4 || o.hidden > 512) return option_error("--hidden: expected 4 to 512");
  if (o.rounds < 0 || o.rounds > 8) return option_error("--rounds: expected 0 to 8");
  const auto dir = std::filesystem::path(o.out).parent_path();
  if (!dir.empty() && !std::filesystem::is_directory(dir))
    return option_error(fmt::format("--out: {}: no such directory", dir.string()));
  auto say = [&](const std::string& line) {
    if (progress) progress(line);
  };

  torch::set_num_threads(1);
  torch::manual_seed(static_cast<std::uint64_t>(o.seed));
  TagNet net(NetShape{o.hidden, o.rounds});
  if (!o.init.empty()) {
    try {
      net = load_net(o.init);
    } catch (const std::exception& e) {
      return Error{fmt::format("--init: {}", e.what())};
    }
  }
  net->train();
  torch::optim::Adam adam(net->parameters(), torch::optim::AdamOptions(1e-3).weight_decay(1e-5));
  TrainingGuide guide(net);
  std::mt19937_64 gen(o.seed ^ 0x5eedULL);
  const auto cases = training_cases(o.seed, o.iterations * o.cases_per_iteration);
  std::deque<Sample> replay;
  constexpr std::size_t kReplay = 3000;
  const auto start = std::chrono::steady_clock::now();
  auto elapsed = [&] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  };
  TrainReport report;
  for (int it = 0; it < o.iterations; ++it) {
    double search_value = 0, decoder_value = 0;
    int searched = 0, decoded = 0;
    for (int k = 0; k < o.cases_per_iteration; ++k) {
      const std::size_t index = static_cast<std::size_t>(it * o.cases_per_iteration + k);
      const TrainingCase& tc = cases[index];
      auto setup = set_up(tc, o.seed + index);
      if (!setup) return Error{fmt::format("{}: {}", tc.name, setup.error().message)};
      const search::Context& ctx = *(*setup)->ctx;
      auto grouping = search::tag_grouping(ctx, 0);
      if (!grouping) continue;
      guide.forget();
      search::TagProblem problem(ctx, std::move(*grouping), nullptr, &guide);
      if (!problem.baseline().ok) continue;
      // AlphaZero's search in steps with the network's prior, Dirichlet noise at each root: a
      // policy target at every decision.
      search::TagOptions to;
      to.simulations = o.simulations;
      search::MctsOptions mo = search::mcts_options(to, o.seed + index);
      mo.dirichlet_fraction = 0.25;
      const search::MctsResult r = search::mcts_stepwise(problem, mo);
      auto tensors = std::make_shared<const GraphTensors>(to_tensors(problem.graph()));
      for (const auto& pt : r.policy) {
        // Visits to masked options (sufficient factors where none apply: the all-reduce plan
        // again) count for none.
        search::TagState state = search::tag_state(problem, pt.prefix);
        std::vector<float> v(pt.visits.begin(), pt.visits.end());
        float total = 0;
        for (std::size_t a = 0; a < v.size(); ++a) {
          if (a >= state.mask.size() || state.mask[a] == 0) v[a] = 0;
          total += v[a];
        }
        if (total <= 0) continue;
        for (float& x : v) x /= total;
        replay.push_back(
            Sample{tensors, std::move(state), torch::tensor(v, torch::kFloat32), r.value});
        ++report.samples;
      }
      while (replay.size() > kReplay) replay.pop_front();
      search_value += r.value;
      ++searched;
      // HeteroG's decoder: sequences drawn from it, reinforced by their simulated value over the
      // mean of the draws (REINFORCE with a baseline).
      if (o.decoder_samples > 0) {
        std::vector<torch::Tensor> logps;
        std::vector<double> values;
        for (int s = 0; s < o.decoder_samples; ++s) {
          std::vector<int> seq;
          torch::Tensor logp = torch::zeros({});
          while (static_cast<int>(seq.size()) < problem.depth()) {
            const auto out = net->forward(*tensors, search::tag_state(problem, seq));
            const auto lp = torch::log_softmax(out.decoder, 0);
            const auto probs = lp.exp().detach();
            std::vector<double> w(probs.data_ptr<float>(), probs.data_ptr<float>() + probs.size(0));
            std::discrete_distribution<int> pick(w.begin(), w.end());
            const int a = pick(gen);
            logp = logp + lp[a];
            seq.push_back(a);
          }
          values.push_back(problem.evaluate(seq));
          logps.push_back(logp);
        }
        double mean = 0;
        for (double v : values) mean += v / static_cast<double>(values.size());
        torch::Tensor loss = torch::zeros({});
        for (std::size_t s = 0; s < values.size(); ++s)
          loss = loss - (values[s] - mean) * logps[s] / static_cast<double>(values.size());
        adam.zero_grad();
        loss.backward();
        adam.step();
        decoder_value += mean;
        ++decoded;
      }
    }
    // Learning: the policy head towards the visit counts, the value head towards the searches'
    // best values, in mini-batches over the shuffled replay buffer.
    std::vector<std::size_t> idx(replay.size());
    for (std::size_t i = 0; i < idx.size(); ++i) idx[i] = i;
    double policy_loss = 0, value_loss = 0;
    long terms = 0;
    constexpr std::size_t kBatch = 16;
    for (int e = 0; e < o.epochs; ++e) {
      std::shuffle(idx.begin(), idx.end(), gen);
      for (std::size_t b = 0; b < idx.size(); b += kBatch) {
        adam.zero_grad();
        torch::Tensor loss = torch::zeros({});
        const std::size_t end = std::min(idx.size(), b + kBatch);
        for (std::size_t i = b; i < end; ++i) {
          const Sample& s = replay[idx[i]];
          const auto out = net->forward(*s.graph, s.state);
          const auto pl = -(s.target * torch::log_softmax(out.policy, 0)).sum();
          const auto vl = (out.value - s.value).pow(2);
          loss = loss + (pl + 0.25 * vl) / static_cast<double>(end - b);
          policy_loss += pl.item<double>();
          value_loss += vl.item<double>();
          ++terms;
        }
        loss.backward();
        adam.step();
      }
    }
    report.iterations = it + 1;
    report.cases += searched;
    report.policy_loss = terms ? policy_loss / terms : 0;
    report.value_loss = terms ? value_loss / terms : 0;
    report.mean_search_value = searched ? search_value / searched : 0;
    report.mean_decoder_value = decoded ? decoder_value / decoded : 0;
    report.seconds = elapsed();
    const std::string tmp = o.out + ".tmp";
    try {
      save_net(net, tmp);
      std::filesystem::rename(tmp, o.out);
    } catch (const std::exception& e) {
      std::error_code ignored;
      std::filesystem::remove(tmp, ignored);
      return Error{fmt::format("--out: {}: cannot write: {}", o.out, e.what())};
    }
    say(fmt::format(
        "train-policy: round {}/{}, {} cases, {} targets, policy loss {:.3f}, value loss {:.3f}, "
        "search value {:.3f}, decoder value {:.3f}, {:.0f} s",
        it + 1, o.iterations, report.cases, replay.size(), report.policy_loss, report.value_loss,
        report.mean_search_value, report.mean_decoder_value, report.seconds));
    if (o.time_limit_s > 0 && report.seconds >= o.time_limit_s) break;
  }
  return report;
}

}  // namespace hetplan::learn
