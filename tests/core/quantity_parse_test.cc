#include "hetplan/core/quantity_parse.h"

#include <gtest/gtest.h>

namespace hetplan {
namespace {

TEST(QuantityParse, Bytes) {
  EXPECT_DOUBLE_EQ(parse_bytes("80GiB")->value, 80.0 * 1024 * 1024 * 1024);
  EXPECT_DOUBLE_EQ(parse_bytes("16 GB")->value, 16e9);
  EXPECT_DOUBLE_EQ(parse_bytes("512")->value, 512.0);
  EXPECT_FALSE(parse_bytes("-1GB"));
  EXPECT_FALSE(parse_bytes("GB"));
  EXPECT_FALSE(parse_bytes("12 parsecs"));
}

TEST(QuantityParse, Bandwidth) {
  EXPECT_DOUBLE_EQ(parse_bandwidth("300GB/s")->value, 300e9);
  EXPECT_DOUBLE_EQ(parse_bandwidth("200Gbps")->value, 25e9);
  EXPECT_DOUBLE_EQ(parse_bandwidth("25 Gb/s")->value, 25e9 / 8);
  EXPECT_FALSE(parse_bandwidth("300GB"));
  EXPECT_FALSE(parse_bandwidth("-5GB/s"));
}

TEST(QuantityParse, Duration) {
  EXPECT_DOUBLE_EQ(parse_duration("5us")->value, 5e-6);
  EXPECT_DOUBLE_EQ(parse_duration("1.5ms")->value, 1.5e-3);
  EXPECT_DOUBLE_EQ(parse_duration("2e-6s")->value, 2e-6);
  EXPECT_FALSE(parse_duration("5 fortnights"));
}

TEST(QuantityParse, FlopsRate) {
  EXPECT_DOUBLE_EQ(parse_flops_rate("312TFLOPS")->value, 312e12);
  EXPECT_DOUBLE_EQ(parse_flops_rate("19.5T")->value, 19.5e12);
}

}  // namespace
}  // namespace hetplan
