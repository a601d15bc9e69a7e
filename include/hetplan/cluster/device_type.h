// Device types: peak rates, memory and bandwidth, from vendors' data sheets (see catalog.cc for
// the source of every figure).
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "hetplan/core/units.h"
#include "hetplan/model/model.h"

namespace hetplan::cluster {

// The GPU architecture (generation) of a device type: what its tensor cores compute and how
// efficiently. `unknown` for a cluster file's own type that does not say.
enum class Architecture { unknown, pascal, volta, turing, ampere, ada, hopper, cdna2, cdna3, cpu };

// "Ampere", "CDNA3", "unknown".
std::string_view architecture_name(Architecture a);
// Case-insensitive: "hopper", "Hopper"; nullopt for anything else.
std::optional<Architecture> parse_architecture(std::string_view name);
// Every architecture's name, for error messages ("Pascal, Volta, ...").
std::string architecture_names();

struct DeviceType {
  std::string name;                  // canonical catalog name, "A100-SXM4-80GB"
  std::vector<std::string> aliases;  // "a100-80gb", "a100"
  std::string vendor;                // "NVIDIA", "AMD"
  FlopsPerSecond peak_fp16;          // dense tensor-core FP16/BF16 (0 where not usable)
  FlopsPerSecond peak_fp32;          // dense FP32 (non-tensor)
  FlopsPerSecond peak_fp8;           // dense FP8 (0 where unsupported)
  FlopsPerSecond peak_tf32;          // dense TF32 tensor-core rate (0 where unsupported)
  Bytes memory;                      // usable device memory
  BytesPerSecond memory_bandwidth;
  std::string source;                // where the figures come from
  Architecture architecture = Architecture::unknown;
  // On-demand rental price per GPU-hour; 0 where none is known. The catalog's figures and their
  // sources are in docs/research/gpu-prices.md; a cluster file's `prices` overrides them.
  UsdPerHour price_per_hour;
  std::string price_source;  // where the price comes from ("" when unknown)

  // Peak for a compute dtype: bf16/fp16 -> peak_fp16 (falling back to fp32 when 0), fp32 -> fp32,
  // tf32 -> peak_tf32 (falling back to fp32 when 0).
  FlopsPerSecond peak(model::DType t) const;
  // Whether the tensor cores compute BF16: false for the architectures known to lack it (Pascal,
  // Volta, Turing), which train 16-bit mixed precision in FP16 with loss scaling instead; true
  // otherwise (an unknown architecture is taken to have it).
  bool has_bf16() const;
  auto operator<=>(const DeviceType&) const = default;
};

const std::vector<DeviceType>& device_catalog();
// Case-insensitive lookup by canonical name or alias.
std::optional<DeviceType> find_device_type(std::string_view name);

}  // namespace hetplan::cluster
