// Device prices: the catalog's sourced defaults, a cluster file's `prices` and `price_per_hour`,
// and the aliases a file used.
#include <gtest/gtest.h>

#include "cluster_text.h"
#include "hetplan/cluster/device_type.h"

namespace hetplan::cluster {
namespace {

using testing::parse;

const char* kTwoGroups = R"(version: 1
nodes:
  - {group: fast, count: 1, device: %s, devices_per_node: 4, intra_node: {bandwidth: 300GB/s},
     nic: {bandwidth: 200Gbps}}
  - {group: slow, count: 2, device: L4, devices_per_node: 2, intra_node: {bandwidth: 32GB/s},
     nic: {bandwidth: 100Gbps}}
%s)";

std::string two_groups(const std::string& fast, const std::string& tail = "") {
  char buf[1024];
  std::snprintf(buf, sizeof buf, kTwoGroups, fast.c_str(), tail.c_str());
  return buf;
}

TEST(Prices, CatalogDefaultsCarryTheirSource) {
  const auto a100 = find_device_type("A100-SXM4-80GB");
  ASSERT_TRUE(a100);
  EXPECT_DOUBLE_EQ(a100->price_per_hour.value, 3.43);
  EXPECT_NE(a100->price_source.find("p4de"), std::string::npos) << a100->price_source;
  const auto h100 = find_device_type("h100");
  ASSERT_TRUE(h100);
  EXPECT_DOUBLE_EQ(h100->price_per_hour.value, 6.88);
  // No sourced price: none is made up.
  for (const char* name : {"GTX-1080Ti", "A100-PCIE-40GB", "A30", "cpu"}) {
    const auto t = find_device_type(name);
    ASSERT_TRUE(t) << name;
    EXPECT_EQ(t->price_per_hour.value, 0) << name;
    EXPECT_TRUE(t->price_source.empty()) << name;
  }
  int priced = 0;
  for (const auto& t : device_catalog()) priced += !t.price_source.empty();
  EXPECT_EQ(priced, 19);
}

TEST(Prices, ClusterPriceIsTheSumOverDevices) {
  const Cluster c = parse(two_groups("H100-SXM5-80GB"));
  EXPECT_NEAR(c.price_per_hour().value, 4 * 6.88 + 4 * 0.805, 1e-9);
}

TEST(Prices, FilePricesOverrideTheCatalogByAnyName) {
  const Cluster c = parse(two_groups("H100-SXM5-80GB", "prices: {h100: 2.5, L4: 0}\n"));
  EXPECT_DOUBLE_EQ(c.device_types[0].price_per_hour.value, 2.5);
  EXPECT_EQ(c.device_types[0].price_source, "cluster file");
  // 0 is a price (owned GPUs), not "unknown".
  EXPECT_DOUBLE_EQ(c.device_types[1].price_per_hour.value, 0);
  EXPECT_EQ(c.device_types[1].price_source, "cluster file");
  EXPECT_NEAR(c.price_per_hour().value, 10, 1e-9);
}

TEST(Prices, UnpricedTypeGetsOneFromTheFile) {
  const Cluster c = parse(two_groups("GTX-1080Ti", "prices: {GTX-1080Ti: 0.1}\n"));
  EXPECT_DOUBLE_EQ(c.device_types[0].price_per_hour.value, 0.1);
}

TEST(Prices, CustomTypeTakesPricePerHour) {
  const Cluster c = parse(two_groups(
      "MyGPU",
      "device_types:\n  - {name: MyGPU, peak_fp32: 20TFLOPS, memory: 24GB, memory_bandwidth: "
      "900GB/s, price_per_hour: 0.75}\n"));
  EXPECT_DOUBLE_EQ(c.device_types[0].price_per_hour.value, 0.75);
  EXPECT_EQ(c.device_types[0].price_source, "cluster file");
}

TEST(Prices, BadPricesNameTheField) {
  struct Case {
    std::string tail, field;
  } cases[] = {
      {"prices: {h100: -1}\n", "prices.h100: expected US dollars per GPU-hour"},
      {"prices: {h100: cheap}\n", "prices.h100: expected a number"},
      {"prices: {h100: 2000}\n", "prices.h100: expected US dollars per GPU-hour"},
      {"prices: {NoSuchGPU: 1}\n", "prices.NoSuchGPU: unknown device type 'NoSuchGPU'"},
      {"prices: {h100: 1, H100-SXM5-80GB: 2}\n", "a second price for H100-SXM5-80GB"},
      {"prices: [1, 2]\n", "prices: expected a mapping"},
  };
  for (const auto& k : cases) {
    auto r = parse_cluster_yaml(two_groups("H100-SXM5-80GB", k.tail), "t.yaml");
    ASSERT_FALSE(r.ok()) << k.tail;
    EXPECT_NE(r.error().message.find("t.yaml: "), std::string::npos) << r.error().message;
    EXPECT_NE(r.error().message.find(k.field), std::string::npos) << r.error().message;
  }
}

TEST(Prices, AliasesUsedAreRecordedOnce) {
  Cluster c = parse(two_groups("h100"));
  ASSERT_EQ(c.type_aliases.size(), 1u);
  EXPECT_EQ(c.type_aliases[0].written, "h100");
  EXPECT_EQ(c.type_aliases[0].canonical, "H100-SXM5-80GB");
  // The canonical name, in any case, is no alias.
  EXPECT_TRUE(parse(two_groups("h100-sxm5-80gb")).type_aliases.empty());
  const Cluster e = parse(R"(version: 1
devices:
  - {name: a, device: a100}
  - {name: b, device: a100}
  - {name: c, device: a100-80gb}
links:
  - {from: a, to: b, bandwidth: 100GB/s}
  - {from: b, to: c, bandwidth: 100GB/s}
)");
  ASSERT_EQ(e.type_aliases.size(), 2u);
  EXPECT_EQ(e.type_aliases[0].written, "a100");
  EXPECT_EQ(e.type_aliases[1].written, "a100-80gb");
  EXPECT_EQ(e.type_aliases[1].canonical, "A100-SXM4-80GB");
}

TEST(DeviceTypes, CustomTypeNamesItsArchitecture) {
  const char* custom =
      "device_types:\n  - {name: MyGPU, peak_fp16: 65TFLOPS, peak_fp32: 8TFLOPS, memory: 16GB, "
      "memory_bandwidth: 320GB/s%s}\n";
  char buf[512];
  std::snprintf(buf, sizeof buf, custom, ", architecture: turing");
  const Cluster c = parse(two_groups("MyGPU", buf));
  EXPECT_EQ(c.device_types[0].architecture, Architecture::turing);
  EXPECT_FALSE(c.device_types[0].has_bf16());
  std::snprintf(buf, sizeof buf, custom, "");
  EXPECT_EQ(parse(two_groups("MyGPU", buf)).device_types[0].architecture, Architecture::unknown);
  std::snprintf(buf, sizeof buf, custom, ", architecture: Kepler");
  const auto bad = parse_cluster_yaml(two_groups("MyGPU", buf), "t.yaml");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message.find("device_types[0].architecture: unknown architecture "
                                     "'Kepler' (expected one of Pascal, Volta,"),
            std::string::npos)
      << bad.error().message;
}

}  // namespace
}  // namespace hetplan::cluster
