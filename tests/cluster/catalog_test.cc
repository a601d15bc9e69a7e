#include <set>

#include <gtest/gtest.h>

#include "hetplan/cluster/device_type.h"

namespace hetplan::cluster {
namespace {

using model::DType;

TEST(Catalog, HoldsEveryRequiredDevice) {
  for (const char* name :
       {"P100-PCIE-16GB", "GTX-1080Ti", "V100-SXM2-16GB", "V100-SXM2-32GB", "V100-PCIE-16GB",
        "A100-SXM4-40GB", "A100-SXM4-80GB", "A100-PCIE-40GB", "A100-PCIE-80GB", "H100-SXM5-80GB",
        "H100-PCIE-80GB", "H200-SXM-141GB", "GH200", "A10", "A30", "T4", "L4", "L40S", "RTX-3090",
        "RTX-4090", "MI250X", "MI300X", "cpu"}) {
    auto t = find_device_type(name);
    ASSERT_TRUE(t.has_value()) << name;
    EXPECT_EQ(t->name, name);
    EXPECT_GT(t->peak_fp32.value, 0) << name;
    EXPECT_GT(t->memory.value, 0) << name;
    EXPECT_GT(t->memory_bandwidth.value, 0) << name;
    EXPECT_FALSE(t->source.empty()) << name;
  }
}

TEST(Catalog, ExactFigures) {
  auto a100 = find_device_type("A100-SXM4-80GB");
  ASSERT_TRUE(a100);
  EXPECT_DOUBLE_EQ(a100->peak_fp16.value, 312e12);
  EXPECT_DOUBLE_EQ(a100->peak_fp32.value, 19.5e12);
  EXPECT_DOUBLE_EQ(a100->memory_bandwidth.value, 2.039e12);
  EXPECT_DOUBLE_EQ(a100->memory.value, 80e9);

  auto h100 = find_device_type("H100-SXM5-80GB");
  ASSERT_TRUE(h100);
  EXPECT_DOUBLE_EQ(h100->peak_fp16.value, 989e12);
  EXPECT_DOUBLE_EQ(h100->peak_fp8.value, 1979e12);
  EXPECT_DOUBLE_EQ(h100->memory_bandwidth.value, 3.35e12);

  auto v100 = find_device_type("V100-SXM2-32GB");
  ASSERT_TRUE(v100);
  EXPECT_DOUBLE_EQ(v100->peak_fp16.value, 125e12);
  EXPECT_DOUBLE_EQ(v100->memory.value, 32e9);

  auto mi300 = find_device_type("MI300X");
  ASSERT_TRUE(mi300);
  EXPECT_DOUBLE_EQ(mi300->memory.value, 192e9);
  EXPECT_EQ(mi300->vendor, "AMD");
}

TEST(Catalog, PeakPerDtypeFallsBack) {
  auto gtx = find_device_type("GTX-1080Ti");
  ASSERT_TRUE(gtx);
  EXPECT_DOUBLE_EQ(gtx->peak(DType::bf16).value, 11.3e12);  // no usable FP16: FP32 rate
  EXPECT_DOUBLE_EQ(gtx->peak(DType::fp16).value, 11.3e12);
  auto a100 = find_device_type("a100-80gb");
  ASSERT_TRUE(a100);
  EXPECT_DOUBLE_EQ(a100->peak(DType::bf16).value, 312e12);
  EXPECT_DOUBLE_EQ(a100->peak(DType::fp32).value, 19.5e12);
  EXPECT_DOUBLE_EQ(a100->peak(DType::fp8).value, 312e12);  // no FP8 on A100: the FP16 rate
  EXPECT_DOUBLE_EQ(a100->peak(DType::tf32).value, 156e12);
  auto h100 = find_device_type("h100");
  ASSERT_TRUE(h100);
  EXPECT_DOUBLE_EQ(h100->peak(DType::tf32).value, 494.7e12);
  auto v100 = find_device_type("v100");  // no TF32 before Ampere: the FP32 rate
  ASSERT_TRUE(v100);
  EXPECT_DOUBLE_EQ(v100->peak(DType::tf32).value, 15.7e12);
  auto cpu = find_device_type("cpu");
  ASSERT_TRUE(cpu);
  EXPECT_DOUBLE_EQ(cpu->peak(DType::fp16).value, 100e9);
  EXPECT_DOUBLE_EQ(cpu->memory.value, 16e9);
  EXPECT_DOUBLE_EQ(cpu->memory_bandwidth.value, 50e9);
}

TEST(Catalog, Tf32WhereTheArchitectureHasIt) {
  // Ampere and later NVIDIA parts, and CDNA3, at half their dense 16-bit rate (the data sheets'
  // figures); none before Ampere, nor on CDNA2.
  for (const auto& t : device_catalog()) {
    const auto a = t.architecture;
    const bool has = a == Architecture::ampere || a == Architecture::ada ||
                     a == Architecture::hopper || a == Architecture::cdna3;
    EXPECT_EQ(t.peak_tf32.value > 0, has) << t.name;
    if (has) {
      EXPECT_NEAR(t.peak_tf32.value / t.peak_fp16.value, 0.5, 0.01) << t.name;
    }
  }
}

TEST(Catalog, AliasesAndCaseInsensitiveLookup) {
  EXPECT_EQ(find_device_type("a100-80gb")->name, "A100-SXM4-80GB");
  EXPECT_EQ(find_device_type("A100-80GB")->name, "A100-SXM4-80GB");
  EXPECT_EQ(find_device_type("a100-40gb")->name, "A100-SXM4-40GB");
  EXPECT_EQ(find_device_type("v100")->name, "V100-SXM2-16GB");
  EXPECT_EQ(find_device_type("h100")->name, "H100-SXM5-80GB");
  EXPECT_EQ(find_device_type("1080ti")->name, "GTX-1080Ti");
  EXPECT_EQ(find_device_type("gtx-1080ti")->name, "GTX-1080Ti");
  EXPECT_EQ(find_device_type("mi300x")->name, "MI300X");
  EXPECT_EQ(find_device_type("l40s")->name, "L40S");
  EXPECT_FALSE(find_device_type("V200").has_value());
  EXPECT_FALSE(find_device_type("").has_value());
}

TEST(Catalog, NamesAndAliasesAreUnique) {
  std::set<std::string> seen;
  for (const DeviceType& t : device_catalog()) {
    std::string n;
    for (char ch : t.name) n += static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
    EXPECT_TRUE(seen.insert(n).second) << t.name;
    for (const std::string& a : t.aliases) EXPECT_TRUE(seen.insert(a).second) << a;
  }
}

TEST(Catalog, EveryTypeHasItsArchitecture) {
  auto arch = [](const char* name) { return find_device_type(name)->architecture; };
  EXPECT_EQ(arch("P100-PCIE-16GB"), Architecture::pascal);
  EXPECT_EQ(arch("V100-SXM2-32GB"), Architecture::volta);
  EXPECT_EQ(arch("T4"), Architecture::turing);
  EXPECT_EQ(arch("A10"), Architecture::ampere);
  EXPECT_EQ(arch("RTX-4090"), Architecture::ada);
  EXPECT_EQ(arch("GH200"), Architecture::hopper);
  EXPECT_EQ(arch("MI250X"), Architecture::cdna2);
  EXPECT_EQ(arch("MI300X"), Architecture::cdna3);
  for (const DeviceType& t : device_catalog())
    EXPECT_NE(t.architecture, Architecture::unknown) << t.name;
}

TEST(Catalog, Bf16OnlyFromAmpereAndCdna2On) {
  for (const char* name : {"P100-PCIE-16GB", "GTX-1080Ti", "V100-PCIE-16GB", "T4"})
    EXPECT_FALSE(find_device_type(name)->has_bf16()) << name;
  for (const char* name : {"A100-SXM4-80GB", "L4", "H100-SXM5-80GB", "MI250X", "MI300X"})
    EXPECT_TRUE(find_device_type(name)->has_bf16()) << name;
  // A type of unknown architecture is taken to have it.
  EXPECT_TRUE(DeviceType{}.has_bf16());
}

TEST(Catalog, ArchitectureNamesReadBack) {
  for (const DeviceType& t : device_catalog())
    EXPECT_EQ(parse_architecture(architecture_name(t.architecture)), t.architecture) << t.name;
  EXPECT_EQ(parse_architecture("hopper"), Architecture::hopper);
  EXPECT_EQ(parse_architecture("Blackwell"), std::nullopt);
  EXPECT_EQ(architecture_names(), "Pascal, Volta, Turing, Ampere, Ada, Hopper, CDNA2, CDNA3, CPU");
}

}  // namespace
}  // namespace hetplan::cluster
