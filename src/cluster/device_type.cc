#include <algorithm>
#include <cctype>

#include "hetplan/cluster/device_type.h"

namespace hetplan::cluster {
namespace {

bool iequals(std::string_view a, std::string_view b) {
  return a.size() == b.size() &&
         std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) ==
                  std::tolower(static_cast<unsigned char>(y));
         });
}

}  // namespace

FlopsPerSecond DeviceType::peak(model::DType t) const {
  const FlopsPerSecond none(0);
  switch (t) {
    case model::DType::fp8:
      if (peak_fp8 > none) return peak_fp8;
      [[fallthrough]];
    case model::DType::fp16:
    case model::DType::bf16:
      if (peak_fp16 > none) return peak_fp16;
      return peak_fp32;
    case model::DType::fp32:
    case model::DType::int32:
    case model::DType::int64:
      return peak_fp32;
  }
  return peak_fp32;
}

std::optional<DeviceType> find_device_type(std::string_view name) {
  for (const DeviceType& t : device_catalog()) {
    if (iequals(t.name, name)) return t;
    for (const std::string& a : t.aliases)
      if (iequals(a, name)) return t;
  }
  return std::nullopt;
}

}  // namespace hetplan::cluster
