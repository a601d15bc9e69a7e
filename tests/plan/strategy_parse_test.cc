#include <gtest/gtest.h>

#include "hetplan/plan/strategy.h"

namespace hetplan::plan {
namespace {

std::string error_of(std::string_view text) {
  auto s = parse_strategy(text);
  return s.ok() ? std::string("ok") : s.error().message;
}

TEST(StrategyParse, IssueExampleGivesTheExactStruct) {
  auto s = parse_strategy(
      "dp=8,tp=8,pp=12,mbs=1,gbs=1536,recompute=full,zero=1,schedule=interleaved,vpp=3,sp=1");
  ASSERT_TRUE(s.ok()) << s.error().message;
  Strategy expected;
  expected.dp = 8;
  expected.tp = 8;
  expected.pp = 12;
  expected.vpp = 3;
  expected.mbs = 1;
  expected.gbs = 1536;
  expected.recompute = cost::Recompute::full;
  expected.zero = 1;
  expected.schedule = Schedule::interleaved;
  expected.schedule_given = true;
  expected.sp = true;
  EXPECT_EQ(*s, expected);
  EXPECT_EQ(to_string(*s),
            "dp=8,tp=8,pp=12,vpp=3,mbs=1,gbs=1536,recompute=full,zero=1,schedule=interleaved,sp=1");
}

TEST(StrategyParse, EmptyGivesDefaults) {
  auto s = parse_strategy("");
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(*s, Strategy{});
  EXPECT_EQ(to_string(*s), "tp=1,pp=1,vpp=1,mbs=1,recompute=none,zero=0,schedule=1f1b,sp=0");
}

TEST(StrategyParse, SpacesAndSpellings) {
  auto s = parse_strategy(" tp = 2 , pp=2, sp=true, schedule=gpipe ,recompute=selective ");
  ASSERT_TRUE(s.ok()) << s.error().message;
  EXPECT_EQ(s->tp, 2);
  EXPECT_EQ(s->pp, 2);
  EXPECT_TRUE(s->sp);
  EXPECT_EQ(s->schedule, Schedule::gpipe);
  EXPECT_TRUE(s->schedule_given);
  EXPECT_EQ(s->recompute, cost::Recompute::selective);
  EXPECT_FALSE(parse_strategy("sp=false")->sp);
  EXPECT_FALSE(parse_strategy("sp=0")->sp);
}

TEST(StrategyParse, VppImpliesInterleaved) {
  auto s = parse_strategy("pp=4,vpp=2");
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->schedule, Schedule::interleaved);
  EXPECT_FALSE(s->schedule_given);
}

TEST(StrategyParse, CanonicalTextParsesBack) {
  auto s = parse_strategy(
      "gbs=64,dp=4,tp=2,pp=2,vpp=2,zero=3,recompute=selective,mbs=2,bn=synced,attention=flash");
  ASSERT_TRUE(s.ok()) << s.error().message;
  auto again = parse_strategy(to_string(*s));
  ASSERT_TRUE(again.ok()) << again.error().message;
  Strategy expected = *s;
  expected.schedule_given = true;
  EXPECT_EQ(*again, expected);
  EXPECT_EQ(again->attention, cost::Attention::flash);
  EXPECT_EQ(parse_strategy(to_string(*parse_strategy("tp=2,attention=flash1")))->attention,
            cost::Attention::flash1);
  // Plain attention, the default, is left out of the text.
  EXPECT_EQ(to_string(*parse_strategy("tp=2")).find("attention"), std::string::npos);
  // So is overlap=none; any other overlap is written and read back.
  EXPECT_EQ(to_string(*parse_strategy("tp=2")).find("overlap"), std::string::npos);
  for (const char* o : {"tp", "param", "tp+param"}) {
    auto with = parse_strategy(std::string("tp=2,zero=1,overlap=") + o);
    ASSERT_TRUE(with.ok()) << with.error().message;
    EXPECT_EQ(to_string(with->overlap), std::string(o));
    EXPECT_NE(to_string(*with).find(std::string(",overlap=") + o), std::string::npos);
    auto back = parse_strategy(to_string(*with));
    ASSERT_TRUE(back.ok()) << back.error().message;
    EXPECT_EQ(back->overlap, with->overlap);
  }
  // A precision is written where given (after attention) and read back; unset, it is left out.
  EXPECT_EQ(to_string(*parse_strategy("tp=2")).find("precision"), std::string::npos);
  EXPECT_FALSE(parse_strategy("tp=2")->precision.has_value());
  for (auto [name, dtype] :
       {std::pair{"bf16", model::DType::bf16}, std::pair{"fp16", model::DType::fp16},
        std::pair{"fp32", model::DType::fp32}, std::pair{"tf32", model::DType::tf32}}) {
    auto with = parse_strategy(std::string("dp=2,attention=flash,precision=") + name);
    ASSERT_TRUE(with.ok()) << with.error().message;
    EXPECT_EQ(with->precision, dtype);
    EXPECT_NE(to_string(*with).find(std::string(",attention=flash,precision=") + name),
              std::string::npos)
        << to_string(*with);
    auto back = parse_strategy(to_string(*with));
    ASSERT_TRUE(back.ok()) << back.error().message;
    EXPECT_EQ(back->precision, dtype);
  }
  // So is the loss's form.
  EXPECT_EQ(to_string(*parse_strategy("loss=unfused")).find("loss="), std::string::npos);
  auto fused_loss = parse_strategy("dp=2,loss=fused");
  ASSERT_TRUE(fused_loss.ok());
  EXPECT_EQ(fused_loss->loss, cost::Loss::fused);
  EXPECT_NE(to_string(*fused_loss).find(",loss=fused"), std::string::npos);
  EXPECT_EQ(parse_strategy(to_string(*fused_loss))->loss, cost::Loss::fused);
  // Training metrics: left out at 0, written and read back otherwise.
  EXPECT_EQ(to_string(*parse_strategy("metrics=0")).find("metrics="), std::string::npos);
  auto metrics = parse_strategy("dp=2,loss=fused,metrics=2");
  ASSERT_TRUE(metrics.ok());
  EXPECT_NE(to_string(*metrics).find(",loss=fused,metrics=2"), std::string::npos);
  EXPECT_EQ(parse_strategy(to_string(*metrics))->metrics, 2);
  // So is the Adam step's form: fused (the default) is left out, the others written and read back.
  EXPECT_EQ(to_string(*parse_strategy("adam=fused")).find("adam"), std::string::npos);
  for (auto [name, kernels] : {std::pair{"foreach", cost::AdamKernels::foreach},
                               std::pair{"per-tensor", cost::AdamKernels::per_tensor}}) {
    auto with = parse_strategy(std::string("dp=2,adam=") + name);
    ASSERT_TRUE(with.ok()) << with.error().message;
    EXPECT_EQ(with->adam, kernels);
    EXPECT_NE(to_string(*with).find(std::string(",adam=") + name), std::string::npos);
    auto back = parse_strategy(to_string(*with));
    ASSERT_TRUE(back.ok()) << back.error().message;
    EXPECT_EQ(back->adam, kernels);
  }
}

TEST(StrategyParse, Errors) {
  EXPECT_EQ(error_of("tp=2,foo=1"),
            "--strategy: foo=1: unknown key (allowed: dp, tp, pp, vpp, mbs, gbs, recompute, "
            "attention, zero, schedule, sp, bn, grad_priority, loss_bound, multipath, overlap, "
            "precision, adam, loss, metrics)");
  EXPECT_EQ(error_of("metrics=9"), "--strategy: metrics=9: expected an integer in 0..8");
  EXPECT_EQ(error_of("metrics=-1"), "--strategy: metrics=-1: expected an integer in 0..8");
  EXPECT_EQ(error_of("loss=flash"), "--strategy: loss=flash: expected one of unfused|fused");
  EXPECT_EQ(error_of("adam=apex"),
            "--strategy: adam=apex: expected one of fused|foreach|per-tensor");
  EXPECT_EQ(error_of("precision=fp8"),
            "--strategy: precision=fp8: expected one of bf16|fp16|fp32|tf32");
  EXPECT_EQ(error_of("overlap=all"),
            "--strategy: overlap=all: expected one of none|tp|param|tp+param");
  EXPECT_EQ(error_of("attention=fast"),
            "--strategy: attention=fast: expected one of plain|flash|flash1");
  EXPECT_EQ(error_of("tp=two"), "--strategy: tp=two: expected a positive integer");
  EXPECT_EQ(error_of("bn=sync"), "--strategy: bn=sync: expected one of local|synced");
  EXPECT_EQ(error_of("tp=2.5"), "--strategy: tp=2.5: expected a positive integer");
  EXPECT_EQ(error_of("pp=0"), "--strategy: pp=0: expected a positive integer");
  EXPECT_EQ(error_of("dp=-4"), "--strategy: dp=-4: expected a positive integer");
  EXPECT_EQ(error_of("gbs="), "--strategy: gbs=: expected an integer in 1..1048576");
  EXPECT_EQ(error_of("tp=99999999999"), "--strategy: tp=99999999999: expected a positive integer");
  EXPECT_EQ(error_of("tp=2,tp=4"), "--strategy: tp=4: tp is given twice");
  EXPECT_EQ(error_of("tp"), "--strategy: tp: expected key=value");
  EXPECT_EQ(error_of("tp=2,,pp=2"),
            "--strategy: item 2: empty: expected key=value pairs separated by commas");
  EXPECT_EQ(error_of("zero=4"), "--strategy: zero=4: expected 0, 1, 2 or 3");
  EXPECT_EQ(error_of("recompute=some"),
            "--strategy: recompute=some: expected one of none|selective|full");
  EXPECT_EQ(error_of("schedule=zb"),
            "--strategy: schedule=zb: expected one of gpipe|1f1b|interleaved");
  EXPECT_EQ(error_of("sp=yes"), "--strategy: sp=yes: expected 0, 1, true or false");
  EXPECT_EQ(
      error_of("vpp=2"),
      "--strategy: vpp=2: expected pp > 1 (virtual stages interleave over the pipeline ranks)");
  EXPECT_EQ(error_of("pp=2,vpp=2,schedule=1f1b"),
            "--strategy: schedule=1f1b: expected schedule=interleaved with vpp=2");
  EXPECT_EQ(error_of("pp=2,schedule=interleaved"),
            "--strategy: schedule=interleaved: expected vpp > 1 (model chunks per pipeline rank)");
  auto named = parse_strategy("tp=x", "-s");
  ASSERT_FALSE(named.ok());
  EXPECT_EQ(named.error().message, "-s: tp=x: expected a positive integer");
}

}  // namespace
}  // namespace hetplan::plan
