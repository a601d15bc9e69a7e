// Every preset's parameter count against the published figure, and exact counts where a released
// implementation gives one (torchvision, Hugging Face, timm).
#include <gtest/gtest.h>

#include <cmath>

#include "hetplan/model/zoo.h"

namespace hetplan::model {
namespace {

std::int64_t params_of(const std::string& spec) {
  auto m = load_model(spec);
  EXPECT_TRUE(m.ok()) << (m.ok() ? "" : m.error().message);
  return m.ok() ? m->parameters() : -1;
}

TEST(PresetParameters, EveryPresetMatchesItsPublishedCount) {
  ASSERT_EQ(presets().size(), 27u);
  for (const PresetInfo& p : presets()) {
    auto m = load_model(p.name);
    ASSERT_TRUE(m.ok()) << p.name << ": " << m.error().message;
    const double got = static_cast<double>(m->parameters());
    EXPECT_LE(std::abs(got / p.published_parameters - 1), p.tolerance)
        << p.name << ": " << got << " vs published " << p.published_parameters;
    EXPECT_EQ(m->name, p.name);
    EXPECT_LE(p.tolerance, 0.02) << p.name;
  }
}

TEST(PresetParameters, MostPresetsAreWithinOnePercent) {
  int wider = 0;
  for (const PresetInfo& p : presets()) wider += p.tolerance > 0.01 ? 1 : 0;
  EXPECT_EQ(wider, 4);  // gpt3-350m, gpt3-1.3b, gpt3-2.7b, bert-large: see their descriptions
}

TEST(PresetParameters, ExactCountsOfReleasedImplementations) {
  EXPECT_EQ(params_of("resnet50"), 25'557'032);  // torchvision
  EXPECT_EQ(params_of("resnet101"), 44'549'160);
  EXPECT_EQ(params_of("resnet152"), 60'192'808);
  EXPECT_EQ(params_of("resnet:depth=18"), 11'689'512);  // torchvision resnet18
  EXPECT_EQ(params_of("resnet:depth=34"), 21'797'672);
  EXPECT_EQ(params_of("vgg16"), 138'357'544);
  EXPECT_EQ(params_of("vgg19"), 143'667'240);
  EXPECT_EQ(params_of("inception-v3"), 23'834'568);  // torchvision without AuxLogits
  EXPECT_EQ(params_of("opt-350m"), 331'196'416);     // Hugging Face facebook/opt-350m
  EXPECT_EQ(params_of("bert-base"), 110'106'428);    // BertForPreTraining
  // BertForSequenceClassification (the pooler and a 2-label classifier, no MLM head).
  EXPECT_EQ(params_of("bert-base:head=classification"), 109'483'778);
  EXPECT_EQ(params_of("vit-b16"), 86'567'656);       // timm vit_base_patch16_224
  EXPECT_EQ(params_of("llama2-7b"), 6'738'415'616);
  EXPECT_EQ(params_of("llama2-70b"), 68'976'648'192);
  EXPECT_EQ(params_of("llama3-8b"), 8'030'261'248);
  EXPECT_EQ(params_of("llama3-405b"), 405'853'388'800);
  EXPECT_EQ(params_of("mixtral-8x7b"), 46'702'792'704);
}

// GPT with tied embeddings: 12 l h^2 + 13 l h + (V + s) h + 2h (final norm).
TEST(PresetParameters, GptClosedForm) {
  const std::int64_t l = 12, h = 768, v = 50257, s = 2048;
  EXPECT_EQ(params_of("gpt3-125m"), 12 * l * h * h + 13 * l * h + (v + s) * h + 2 * h);
}

}  // namespace
}  // namespace hetplan::model
