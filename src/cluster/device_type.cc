#include "hetplan/cluster/device_type.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <utility>

namespace hetplan::cluster {
namespace {

bool iequals(std::string_view a, std::string_view b) {
  return a.size() == b.size() &&
         std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) ==
                  std::tolower(static_cast<unsigned char>(y));
         });
}

constexpr std::array<std::pair<Architecture, std::string_view>, 10> kArchitectureNames{{
    {Architecture::pascal, "Pascal"},
    {Architecture::volta, "Volta"},
    {Architecture::turing, "Turing"},
    {Architecture::ampere, "Ampere"},
    {Architecture::ada, "Ada"},
    {Architecture::hopper, "Hopper"},
    {Architecture::cdna2, "CDNA2"},
    {Architecture::cdna3, "CDNA3"},
    {Architecture::cpu, "CPU"},
    {Architecture::unknown, "unknown"},
}};

}  // namespace

std::string_view architecture_name(Architecture a) {
  for (const auto& [arch, name] : kArchitectureNames)
    if (arch == a) return name;
  return "unknown";
}

std::optional<Architecture> parse_architecture(std::string_view name) {
  for (const auto& [arch, text] : kArchitectureNames)
    if (iequals(text, name)) return arch;
  return std::nullopt;
}

std::string architecture_names() {
  std::string out;
  for (const auto& [arch, name] : kArchitectureNames) {
    if (arch == Architecture::unknown) continue;
    if (!out.empty()) out += ", ";
    out += name;
  }
  return out;
}

bool DeviceType::has_bf16() const {
  switch (architecture) {
    case Architecture::pascal:
    case Architecture::volta:
    case Architecture::turing:
      return false;
    case Architecture::unknown:
    case Architecture::ampere:
    case Architecture::ada:
    case Architecture::hopper:
    case Architecture::cdna2:
    case Architecture::cdna3:
    case Architecture::cpu:
      return true;
  }
  return true;
}

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
    case model::DType::tf32:
      if (peak_tf32 > none) return peak_tf32;
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
