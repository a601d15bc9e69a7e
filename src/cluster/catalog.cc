// The device catalog. Figures are vendor data-sheet peaks, dense (no structured sparsity), as
// collected in shared/reference/hardware.md; each entry names its data sheet in `source`.
//
// Conventions:
// - peak_fp16: dense FP16/BF16 tensor-core rate (FP32 accumulate where the vendor gives two
//   figures, as for GeForce cards); 0 where FP16 is not usable for training (GTX-1080Ti), so
//   peak() falls back to FP32.
// - peak_fp32: dense FP32 on the regular cores (not TF32, not the AMD matrix rate).
// - peak_fp8: dense FP8 tensor rate, 0 where the part has none.
// - peak_tf32: dense TF32 tensor rate (kTf32), 0 where the part has none (before Ampere; CDNA2).
// - memory: the vendor's "80 GB" read as 80e9 bytes. Cards expose a little more (an "80GB" A100
//   reports 80 GiB) but the CUDA context and allocator reserve take some back, so the decimal
//   figure is a fair "usable" value and is what the data sheet states.
// - memory_bandwidth: vendor GB/s times 1e9.
#include <string>
#include <vector>

#include "hetplan/cluster/device_type.h"

namespace hetplan::cluster {
namespace {

DeviceType make(std::string name, std::vector<std::string> aliases, std::string vendor,
                Architecture arch, double fp16_tflops, double fp32_tflops, double fp8_tflops,
                double memory_gb, double bandwidth_gbps, std::string source) {
  DeviceType t;
  t.name = std::move(name);
  t.aliases = std::move(aliases);
  t.vendor = std::move(vendor);
  t.architecture = arch;
  t.peak_fp16 = FlopsPerSecond(fp16_tflops * 1e12);
  t.peak_fp32 = FlopsPerSecond(fp32_tflops * 1e12);
  t.peak_fp8 = FlopsPerSecond(fp8_tflops * 1e12);
  t.memory = Bytes(memory_gb * 1e9);
  t.memory_bandwidth = BytesPerSecond(bandwidth_gbps * 1e9);
  t.source = std::move(source);
  return t;
}

// On-demand USD per GPU-hour, as gathered in docs/research/gpu-prices.md (which gives the URL,
// date and derivation of each). Types with no sourced price (GTX-1080Ti, A100-PCIE-40GB, A30, the
// emulation CPU) have none: price_per_hour stays 0 and a cost objective asks for one.
struct Price {
  const char* type;
  double usd_per_hour;
  const char* source;
};
constexpr Price kPrices[] = {
    {"P100-PCIE-16GB", 2.07, "Azure NC6s v2 list price (1x P100), undated"},
    {"V100-SXM2-16GB", 3.06, "AWS p3.16xlarge on-demand us-east-1, $24.48/h / 8"},
    {"V100-SXM2-32GB", 3.90, "AWS p3dn.24xlarge on-demand us-east-1, $31.218/h / 8"},
    {"V100-PCIE-16GB", 3.06, "Azure NC6s v3 list price (1x V100 PCIe)"},
    {"A100-SXM4-40GB", 2.74,
     "AWS p4d.24xlarge on-demand us-east-1, $21.96/h / 8, retrieved 2026-11-09"},
    {"A100-SXM4-80GB", 3.43,
     "AWS p4de.24xlarge on-demand us-east-1, $27.45/h / 8, retrieved 2026-11-09"},
    {"A100-PCIE-80GB", 3.67,
     "Azure NC24ads A100 v4 eastus (1x A100 PCIe 80GB), retrieved 2026-11-09"},
    {"H100-SXM5-80GB", 6.88,
     "AWS p5.48xlarge on-demand us-east-1, $55.04/h / 8, retrieved 2026-11-09"},
    {"H100-PCIE-80GB", 3.29, "Lambda 1x H100 PCIe, read 2026-09-20"},
    {"H200-SXM-141GB", 7.91, "AWS p5en.48xlarge on-demand us-east-1, $63.30/h / 8, Aug 2026"},
    {"GH200", 2.29, "Lambda 1x GH200 96GB, read 2026-09-20"},
    {"A10", 1.29, "Lambda 1x A10, read 2026-09-20"},
    {"T4", 0.526, "AWS g4dn.xlarge on-demand (1x T4), 2025"},
    {"L4", 0.805, "AWS g6.xlarge on-demand us-east-1 (1x L4), 2026"},
    {"L40S", 1.861, "AWS g6e.xlarge on-demand us-east-1 (1x L40S), 2026"},
    {"RTX-3090", 0.16, "Akash Network GPU price list, starting price, read 2026-09-20"},
    {"RTX-4090", 0.34, "RunPod Community Cloud, checked 2026-09-25"},
    {"MI250X", 1.35, "Runcrate on-demand via gpu.blog (low confidence), undated"},
    {"MI300X", 2.59, "DigitalOcean gpu-mi300x1-192gb list price, collected 2026-10-07"},
};

// Dense TF32 tensor-core TFLOP/s, from the same data sheets as each type's other figures (they
// print the rate with structured sparsity beside it, twice this): A100 (every form) 156; H100 SXM5,
// H200 and GH200 494.7 (989 sparse), H100 PCIe 378 (756); A10 62.5, A30 82; L4 60 (120), L40S 183
// (366); GeForce RTX 3090 35.6 (the GA102 whitepaper's, as its FP16 figure) and RTX 4090 82.6 (the
// Ada whitepaper's); MI300X 653.7 (AMD's data sheet, 1,307.4 sparse). P100, GTX-1080Ti, V100, T4
// have no TF32 path, nor has MI250X (CDNA2: FP32 matrix only): fp32 peaks there.
struct Tf32 {
  const char* type;
  double tflops;
};
constexpr Tf32 kTf32[] = {
    {"A100-SXM4-40GB", 156},
    {"A100-SXM4-80GB", 156},
    {"A100-PCIE-40GB", 156},
    {"A100-PCIE-80GB", 156},
    {"H100-SXM5-80GB", 494.7},
    {"H100-PCIE-80GB", 378},
    {"H200-SXM-141GB", 494.7},
    {"GH200", 494.7},
    {"A10", 62.5},
    {"A30", 82},
    {"L4", 60},
    {"L40S", 183},
    {"RTX-3090", 35.6},
    {"RTX-4090", 82.6},
    {"MI300X", 653.7},
};

void set_tf32(std::vector<DeviceType>& catalog) {
  for (const Tf32& r : kTf32)
    for (DeviceType& t : catalog)
      if (t.name == r.type) t.peak_tf32 = FlopsPerSecond(r.tflops * 1e12);
}

void set_prices(std::vector<DeviceType>& catalog) {
  for (const Price& p : kPrices)
    for (DeviceType& t : catalog)
      if (t.name == p.type) {
        t.price_per_hour = UsdPerHour(p.usd_per_hour);
        t.price_source = p.source;
      }
}

std::vector<DeviceType> build_catalog() {
  const std::string ref = "shared/reference/hardware.md; ";
  return {
      // NVIDIA Tesla P100 PCIe data sheet (2016): 18.7 FP16 (no tensor cores), 9.3 FP32, 732 GB/s.
      make("P100-PCIE-16GB", {"p100", "p100-16gb", "p100-pcie"}, "NVIDIA", Architecture::pascal,
           18.7, 9.3, 0, 16, 732, ref + "NVIDIA Tesla P100 PCIe data sheet"),
      // NVIDIA GeForce GTX 1080 Ti specifications: 11.3 FP32, 11 GB GDDR5X, 484 GB/s; FP16 runs at
      // 1/64 rate on GP102, unusable for training.
      make("GTX-1080Ti", {"1080ti", "gtx1080ti", "gtx-1080-ti"}, "NVIDIA", Architecture::pascal, 0,
           11.3, 0, 11, 484, ref + "NVIDIA GeForce GTX 1080 Ti specifications"),
      // NVIDIA Tesla V100 data sheet (SXM2): 125 tensor, 15.7 FP32, 900 GB/s, NVLink 2 150 GB/s.
      make("V100-SXM2-16GB", {"v100", "v100-16gb", "v100-sxm2"}, "NVIDIA", Architecture::volta, 125,
           15.7, 0, 16, 900, ref + "NVIDIA Tesla V100 data sheet (SXM2)"),
      make("V100-SXM2-32GB", {"v100-32gb"}, "NVIDIA", Architecture::volta, 125, 15.7, 0, 32, 900,
           ref + "NVIDIA Tesla V100 data sheet (SXM2)"),
      // NVIDIA Tesla V100 data sheet (PCIe): 112 tensor, 14 FP32.
      make("V100-PCIE-16GB", {"v100-pcie"}, "NVIDIA", Architecture::volta, 112, 14, 0, 16, 900,
           ref + "NVIDIA Tesla V100 data sheet (PCIe)"),
      // NVIDIA A100 data sheet: 312 BF16 tensor, 19.5 FP32; 40GB 1,555 GB/s, 80GB SXM 2,039 GB/s,
      // 80GB PCIe 1,935 GB/s.
      make("A100-SXM4-40GB", {"a100-40gb"}, "NVIDIA", Architecture::ampere, 312, 19.5, 0, 40, 1555,
           ref + "NVIDIA A100 Tensor Core GPU data sheet"),
      make("A100-SXM4-80GB", {"a100", "a100-80gb", "a100-sxm"}, "NVIDIA", Architecture::ampere, 312,
           19.5, 0, 80, 2039, ref + "NVIDIA A100 Tensor Core GPU data sheet"),
      make("A100-PCIE-40GB", {"a100-pcie", "a100-40gb-pcie"}, "NVIDIA", Architecture::ampere, 312,
           19.5, 0, 40, 1555, ref + "NVIDIA A100 Tensor Core GPU data sheet"),
      make("A100-PCIE-80GB", {"a100-80gb-pcie"}, "NVIDIA", Architecture::ampere, 312, 19.5, 0, 80,
           1935, ref + "NVIDIA A100 Tensor Core GPU data sheet"),
      // NVIDIA H100 data sheet: SXM5 989 BF16 / 67 FP32 / 1,979 FP8, 3.35 TB/s; PCIe 756 / 51 /
      // 1,513, 2 TB/s.
      make("H100-SXM5-80GB", {"h100", "h100-sxm", "h100-80gb"}, "NVIDIA", Architecture::hopper, 989,
           67, 1979, 80, 3350, ref + "NVIDIA H100 Tensor Core GPU data sheet (SXM5)"),
      make("H100-PCIE-80GB", {"h100-pcie"}, "NVIDIA", Architecture::hopper, 756, 51, 1513, 80, 2000,
           ref + "NVIDIA H100 Tensor Core GPU data sheet (PCIe)"),
      // NVIDIA H200 data sheet: same compute as H100 SXM, 141 GB HBM3e at 4.8 TB/s.
      make("H200-SXM-141GB", {"h200", "h200-sxm"}, "NVIDIA", Architecture::hopper, 989, 67, 1979,
           141, 4800, ref + "NVIDIA H200 Tensor Core GPU data sheet"),
      // NVIDIA GH200 Grace Hopper Superchip data sheet (96 GB HBM3 variant), GPU figures only.
      make("GH200", {"gh200-96gb", "grace-hopper"}, "NVIDIA", Architecture::hopper, 989, 67, 1979,
           96, 4000, ref + "NVIDIA GH200 Grace Hopper Superchip data sheet (96 GB HBM3)"),
      // NVIDIA A10, A30, T4, L4, L40S data sheets.
      make("A10", {"a10-24gb"}, "NVIDIA", Architecture::ampere, 125, 31.2, 0, 24, 600,
           ref + "NVIDIA A10 data sheet"),
      make("A30", {"a30-24gb"}, "NVIDIA", Architecture::ampere, 165, 10.3, 0, 24, 933,
           ref + "NVIDIA A30 data sheet"),
      make("T4", {"t4-16gb", "tesla-t4"}, "NVIDIA", Architecture::turing, 65, 8.1, 0, 16, 320,
           ref + "NVIDIA T4 data sheet"),
      make("L4", {"l4-24gb"}, "NVIDIA", Architecture::ada, 121, 30.3, 242.5, 24, 300,
           ref + "NVIDIA L4 data sheet"),
      make("L40S", {"l40s-48gb"}, "NVIDIA", Architecture::ada, 362, 91.6, 733, 48, 864,
           ref + "NVIDIA L40S data sheet"),
      // GeForce RTX 3090 / 4090: FP16 tensor with FP32 accumulate (Ampere GA102 and Ada AD102
      // architecture whitepapers).
      make("RTX-3090", {"3090", "rtx3090"}, "NVIDIA", Architecture::ampere, 71, 35.6, 0, 24, 936,
           ref + "NVIDIA Ampere GA102 GPU architecture whitepaper"),
      make("RTX-4090", {"4090", "rtx4090"}, "NVIDIA", Architecture::ada, 165, 82.6, 0, 24, 1008,
           ref + "NVIDIA Ada GPU architecture whitepaper"),
      // AMD Instinct MI250X data sheet (both dies): 383 FP16/BF16 matrix, 47.9 FP32 vector.
      make("MI250X", {"instinct-mi250x"}, "AMD", Architecture::cdna2, 383, 47.9, 0, 128, 3277,
           ref + "AMD Instinct MI250X data sheet"),
      // AMD Instinct MI300X data sheet: 1,307 BF16 dense, 163.4 FP32, 2,615 FP8 dense.
      make("MI300X", {"instinct-mi300x"}, "AMD", Architecture::cdna3, 1307, 163.4, 2615, 192, 5300,
           ref + "AMD Instinct MI300X data sheet"),
      // A generic CPU worker for running plans on CPUs (emulation): a few cores of a server, not a
      // data-sheet part. FP16 falls back to FP32.
      make("cpu", {"host"}, "generic", Architecture::cpu, 0, 0.1, 0, 16, 50,
           "generic CPU worker for emulation (no data sheet): 16 GB, 50 GB/s, 100 GFLOP/s FP32"),
  };
}

}  // namespace

const std::vector<DeviceType>& device_catalog() {
  static const std::vector<DeviceType> catalog = [] {
    auto types = build_catalog();
    set_prices(types);
    set_tf32(types);
    return types;
  }();
  return catalog;
}

}  // namespace hetplan::cluster
