#include <algorithm>

#include "hetplan/model/zoo.h"

namespace hetplan::model {

// Architectures from the papers and released configurations; published counts from the same
// sources. Where a published count is a rounded name that the published architecture does not
// reach within 1%, the description gives the architecture's exact count and the tolerance says so.
const std::vector<PresetInfo>& presets() {
  static const std::vector<PresetInfo> list = {
      {"gpt3-125m", "gpt:layers=12,hidden=768,heads=12,seq=2048,vocab=50257",
       "GPT-3 Small (Brown et al. 2020, table 2.1), 125M", 125e6},
      {"gpt3-350m", "gpt:layers=24,hidden=1024,heads=16,seq=2048,vocab=50257",
       "GPT-3 Medium, published 350M; its table 2.1 architecture has 355.9M (1.7% more)", 350e6,
       0.02},
      {"gpt3-760m", "gpt:layers=24,hidden=1536,heads=16,seq=2048,vocab=50257", "GPT-3 Large, 760M",
       760e6},
      {"gpt3-1.3b", "gpt:layers=24,hidden=2048,heads=16,seq=2048,vocab=50257",
       "GPT-3 XL, published 1.3B; table 2.1's 24 heads of 128 do not fit d_model 2048, so 16 heads "
       "of "
       "128; the architecture has 1.316B (1.2% more)",
       1.3e9, 0.02},
      {"gpt3-2.7b", "gpt:layers=32,hidden=2560,heads=32,seq=2048,vocab=50257",
       "GPT-3 2.7B, published 2.7B; its architecture has 2.652B (1.8% fewer)", 2.7e9, 0.02},
      {"gpt3-6.7b", "gpt:layers=32,hidden=4096,heads=32,seq=2048,vocab=50257", "GPT-3 6.7B, 6.7B",
       6.7e9},
      {"gpt3-13b", "gpt:layers=40,hidden=5140,heads=40,head_dim=128,seq=2048,vocab=50257",
       "GPT-3 13B as table 2.1 prints it (d_model 5140, 40 heads of 128), 13.0B", 13.0e9},
      {"gpt3-175b", "gpt:layers=96,hidden=12288,heads=96,seq=2048,vocab=50257",
       "GPT-3 175B, 175.0B", 175.0e9},
      {"opt-350m",
       "gpt:layers=24,hidden=1024,heads=16,seq=2048,vocab=50272,embed=512,positions=2050,norm=post",
       "OPT-350M (Zhang et al. 2022): post-norm, 512-wide word embeddings projected to 1024, 331M",
       331e6},
      {"llama2-7b",
       "llama:layers=32,hidden=4096,heads=32,kv_heads=32,ffn=11008,seq=4096,vocab=32000",
       "Llama 2 7B (Touvron et al. 2023), 6.74B as released (named 7B)", 6.74e9},
      {"llama2-13b",
       "llama:layers=40,hidden=5120,heads=40,kv_heads=40,ffn=13824,seq=4096,vocab=32000",
       "Llama 2 13B, 13.02B as released", 13.02e9},
      {"llama2-70b",
       "llama:layers=80,hidden=8192,heads=64,kv_heads=8,ffn=28672,seq=4096,vocab=32000",
       "Llama 2 70B (GQA, 8 KV heads), 68.98B as released (named 70B)", 68.98e9},
      {"llama3-8b",
       "llama:layers=32,hidden=4096,heads=32,kv_heads=8,ffn=14336,seq=8192,vocab=128256",
       "Llama 3 8B (Dubey et al. 2024), 8.03B as released", 8.03e9},
      {"llama3-70b",
       "llama:layers=80,hidden=8192,heads=64,kv_heads=8,ffn=28672,seq=8192,vocab=128256",
       "Llama 3 70B, 70.55B as released (named 70B)", 70.55e9},
      {"llama3-405b",
       "llama:layers=126,hidden=16384,heads=128,kv_heads=8,ffn=53248,seq=8192,vocab=128256",
       "Llama 3 405B, 405B", 405e9},
      {"bert-base", "bert:layers=12,hidden=768,heads=12,seq=512,vocab=30522",
       "BERT-base (Devlin et al. 2019) with MLM and NSP heads, 110M", 110e6},
      {"bert-large", "bert:layers=24,hidden=1024,heads=16,seq=512,vocab=30522",
       "BERT-large with MLM and NSP heads, published 340M; its architecture has 336.2M (1.1% "
       "fewer)",
       340e6, 0.015},
      {"vit-b16", "vit:layers=12,hidden=768,heads=12,mlp=3072,patch=16,image=224,classes=1000",
       "ViT-B/16 (Dosovitskiy et al. 2021), 224px, 1000 classes, 86M", 86e6},
      {"vit-l16", "vit:layers=24,hidden=1024,heads=16,mlp=4096,patch=16,image=224,classes=1000",
       "ViT-L/16, 224px, 1000 classes, 307M", 307e6},
      {"vit-h14", "vit:layers=32,hidden=1280,heads=16,mlp=5120,patch=14,image=224,classes=1000",
       "ViT-H/14, 224px, 1000 classes, 632M", 632e6},
      {"mixtral-8x7b",
       "moe:layers=32,hidden=4096,heads=32,kv_heads=8,ffn=14336,seq=4096,vocab=32000,experts=8,top_"
       "k=2",
       "Mixtral 8x7B (Jiang et al. 2024), 8 experts top-2, 46.7B; trained at 32k context, preset "
       "seq 4096",
       46.7e9},
      {"resnet50", "resnet:depth=50", "ResNet-50 (He et al. 2016; torchvision v1.5), 25.6M",
       25.6e6},
      {"resnet101", "resnet:depth=101", "ResNet-101, 44.5M", 44.5e6},
      {"resnet152", "resnet:depth=152", "ResNet-152, 60.2M", 60.2e6},
      {"vgg16", "vgg:depth=16", "VGG-16 (Simonyan and Zisserman 2015), 138M", 138e6},
      {"vgg19", "vgg:depth=19", "VGG-19, 144M", 144e6},
      {"inception-v3", "inception:image=299",
       "Inception-v3 (Szegedy et al. 2016), conv + batchnorm + fc without the auxiliary head, "
       "23.8M",
       23.8e6},
  };
  return list;
}

const PresetInfo* find_preset(std::string_view name) {
  const auto& list = presets();
  auto it =
      std::find_if(list.begin(), list.end(), [&](const PresetInfo& p) { return p.name == name; });
  return it == list.end() ? nullptr : &*it;
}

}  // namespace hetplan::model
