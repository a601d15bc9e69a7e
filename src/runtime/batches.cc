#include "batches.h"

#include <fmt/format.h>

#include <fstream>
#include <iterator>

namespace hetplan::runtime::detail {
namespace {

at::Generator generator(std::uint64_t seed) { return at::detail::createCPUGenerator(seed); }

// The fraction of an encoder's tokens masked for masked language modelling (BERT's 15%).
constexpr double kMaskedFraction = 0.15;

}  // namespace

Result<BatchSource> BatchSource::create(const model::Model& m, std::uint64_t seed,
                                        const std::string& text_file) {
  BatchSource b;
  b.m_ = &m;
  b.seed_ = seed;
  if (m.family == model::Family::mlp || m.family == model::Family::cnn ||
      m.family == model::Family::vision_transformer) {
    if (!text_file.empty())
      return Error{fmt::format(
          "--data: a text file feeds language models; {} trains on synthetic data", m.name)};
    b.in_ = m.family == model::Family::mlp ? m.ops.front().gemm.k : 3 * 4 * 4;
    b.teacher_ = torch::randn({b.in_, m.num_classes}, generator(seed * 2 + 1));
    return b;
  }
  if (!text_file.empty()) {
    std::ifstream in(text_file, std::ios::binary);
    if (!in) return Error{fmt::format("--data: {}: cannot read the file", text_file)};
    std::vector<unsigned char> bytes((std::istreambuf_iterator<char>(in)),
                                     std::istreambuf_iterator<char>());
    if (static_cast<std::int64_t>(bytes.size()) < m.seq_len + 2)
      return Error{fmt::format("--data: {}: expected at least {} bytes (a sequence), got {}",
                               text_file, m.seq_len + 2, bytes.size())};
    if (m.vocab < 256)
      return Error{fmt::format(
          "--data: {}: byte-level tokens need a vocabulary of at least 256; the model has {}",
          text_file, m.vocab)};
    b.text_ =
        torch::from_blob(bytes.data(), {static_cast<std::int64_t>(bytes.size())}, torch::kUInt8)
            .to(torch::kLong);
  }
  return b;
}

Batch BatchSource::global(int step, std::int64_t samples) const {
  auto gen = generator(seed_ * 1000003ULL + static_cast<std::uint64_t>(step) * 7919ULL + 17);
  if (m_->family == model::Family::mlp) {
    auto x = torch::randn({samples, in_}, gen);
    return Batch{x, torch::matmul(x, teacher_).argmax(1)};
  }
  if (m_->family == model::Family::cnn || m_->family == model::Family::vision_transformer) {
    auto x = torch::randn({samples, 3, m_->image_size, m_->image_size}, gen);
    auto pooled = torch::adaptive_avg_pool2d(x, {4, 4}).flatten(1);
    return Batch{x, torch::matmul(pooled, teacher_).argmax(1)};
  }
  const std::int64_t s = m_->seq_len;
  if (m_->family != model::Family::encoder) {
    const torch::Tensor tokens = stream(samples, s + 1, gen);
    return Batch{tokens.slice(1, 0, s), tokens.slice(1, 1, s + 1)};
  }
  // Masked language modelling and next-sentence prediction: the second half of a sequence
  // continues the first (label 0) or, for half the samples, comes from another stream (1).
  const std::int64_t half = s / 2;
  torch::Tensor tokens = stream(samples, s, gen);
  const torch::Tensor other = stream(samples, s - half, gen);
  const torch::Tensor random_next = torch::rand({samples}, gen) < 0.5;
  tokens.slice(1, half, s)
      .copy_(torch::where(random_next.unsqueeze(1), other, tokens.slice(1, half, s)));
  const torch::Tensor masked = torch::rand({samples, s}, gen) < kMaskedFraction;
  const torch::Tensor mask_id = torch::full({}, m_->vocab - 1, torch::kLong);
  torch::Tensor targets = torch::empty({samples, s + 1}, torch::kLong);
  targets.slice(1, 0, s).copy_(
      torch::where(masked, tokens, torch::full({}, kIgnoredLabel, torch::kLong)));
  targets.select(1, s).copy_(random_next.to(torch::kLong));
  return Batch{torch::where(masked, mask_id, tokens), targets};
}

torch::Tensor BatchSource::stream(std::int64_t samples, std::int64_t length,
                                  at::Generator& gen) const {
  if (text_.defined()) {
    auto starts = torch::randint(0, text_.size(0) - length, {samples, 1}, gen);
    return text_.index({starts + torch::arange(length, torch::kLong)});
  }
  const std::int64_t vocab = m_->vocab;
  auto noise = torch::randint(0, vocab, {samples, length}, gen);
  auto random = torch::rand({samples, length}, gen) < 0.1;
  torch::Tensor tokens = noise.clone();
  for (std::int64_t t = 1; t < length; ++t) {
    auto next = (tokens.select(1, t - 1) * 31 + 7).remainder(vocab);
    tokens.select(1, t).copy_(torch::where(random.select(1, t), noise.select(1, t), next));
  }
  return tokens;
}

}  // namespace hetplan::runtime::detail
