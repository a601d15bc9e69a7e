// load_model's specs: families, preset overrides, and one-line errors naming the key.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "hetplan/model/graph_json.h"
#include "hetplan/model/zoo.h"

namespace hetplan::model {
namespace {

std::string error_of(const std::string& text) {
  auto m = load_model(text);
  EXPECT_FALSE(m.ok()) << text;
  return m.ok() ? std::string() : m.error().message;
}

TEST(SpecParse, FamiliesBuild) {
  for (const char* spec :
       {"gpt:layers=2,hidden=64,heads=4", "llama:layers=2,hidden=64,heads=4,kv_heads=2",
        "bert:layers=2,hidden=64,heads=4", "vit:layers=2,hidden=64,heads=4,patch=8,image=32",
        "moe:layers=2,hidden=64,heads=4,experts=4,top_k=1", "resnet:depth=101", "vgg:depth=11",
        "inception", "inception:version=v3,image=75", "mlp:layers=2,hidden=8,in=4,out=3",
        " gpt : layers = 2 , hidden=64, heads=4 "}) {
    auto m = load_model(spec);
    EXPECT_TRUE(m.ok()) << spec << ": " << (m.ok() ? "" : m.error().message);
  }
}

TEST(SpecParse, FieldsAndDefaults) {
  auto m = load_model("gpt:layers=24,hidden=2304,heads=24,seq=2048,vocab=51200");
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(m->name, "gpt:layers=24,hidden=2304,heads=24,seq=2048,vocab=51200");
  EXPECT_EQ(m->family, Family::decoder_lm);
  EXPECT_EQ(m->ffn_hidden, 4 * 2304);
  EXPECT_EQ(m->head_dim, 96);
  EXPECT_EQ(m->num_blocks, 24);
  EXPECT_TRUE(m->is_language_model());
  auto llama = load_model("llama:layers=1,hidden=4096,heads=32");
  ASSERT_TRUE(llama.ok());
  EXPECT_EQ(llama->ffn_hidden, 11008);  // 2/3 of 4h rounded up to 256
  EXPECT_EQ(llama->kv_heads, 32);
  auto vit = load_model("vit-b16");
  ASSERT_TRUE(vit.ok());
  EXPECT_EQ(vit->seq_len, 197);
  EXPECT_FALSE(vit->is_language_model());
  EXPECT_EQ(load_model("mlp:layers=1,hidden=4,in=3,out=2")->family, Family::mlp);
  EXPECT_EQ(load_model("mixtral-8x7b")->family, Family::moe_lm);
}

TEST(SpecParse, PresetOverrides) {
  auto m = load_model("llama2-7b:layers=2,seq=128");
  ASSERT_TRUE(m.ok()) << m.error().message;
  EXPECT_EQ(m->num_blocks, 2);
  EXPECT_EQ(m->seq_len, 128);
  EXPECT_EQ(m->hidden, 4096);
  EXPECT_EQ(error_of("gpt3-1.3b:seq=abc"),
            "--model: gpt3-1.3b: seq=abc: expected an integer from 1 to 10000000");
}

TEST(SpecParse, ErrorsNameTheKeyAndTheExpectation) {
  EXPECT_EQ(error_of("gpt:layers=24,hidden=2304,heads=7"),
            "--model: gpt: heads=7: expected a divisor of hidden (2304)");
  EXPECT_EQ(error_of("gpt:layers=24,hidden=2304"),
            "--model: gpt: heads: missing; expected an integer from 1 to 2304");
  EXPECT_EQ(error_of("gpt:layers=0,hidden=64,heads=4"),
            "--model: gpt: layers=0: expected an integer from 1 to 10000");
  EXPECT_EQ(error_of("gpt:layers=-3,hidden=64,heads=4"),
            "--model: gpt: layers=-3: expected an integer from 1 to 10000");
  EXPECT_EQ(error_of("gpt:layers=2x,hidden=64,heads=4"),
            "--model: gpt: layers=2x: expected an integer from 1 to 10000");
  EXPECT_EQ(error_of("gpt:layers=99999999999999999999,hidden=64,heads=4"),
            "--model: gpt: layers=99999999999999999999: expected an integer from 1 to 10000");
  EXPECT_EQ(error_of("gpt:layers=2,hidden=64,heads=4,norm=mid"),
            "--model: gpt: norm=mid: expected one of pre, post");
  EXPECT_EQ(error_of("gpt:layers=2,hidden=64,heads=4,tied=maybe"),
            "--model: gpt: tied=maybe: expected true or false (or 1 or 0)");
  EXPECT_EQ(error_of("llama:layers=2,hidden=64,heads=4,kv_heads=3"),
            "--model: llama: kv_heads=3: expected a divisor of heads (4)");
  EXPECT_EQ(error_of("moe:layers=2,hidden=64,heads=4,experts=2,top_k=3"),
            "--model: moe: top_k=3: expected at most experts (2)");
  EXPECT_EQ(error_of("vit:layers=2,hidden=64,heads=4,image=30"),
            "--model: vit: image=30: expected a multiple of patch (16)");
  EXPECT_EQ(error_of("resnet:depth=35"),
            "--model: resnet: depth=35: expected 18, 34, 50, 101 or 152");
  EXPECT_EQ(error_of("vgg:depth=17"), "--model: vgg: depth=17: expected 11, 13, 16 or 19");
  EXPECT_EQ(error_of("gpt:layers=2,hidden=64,heads=4,layers=3"),
            "--model: gpt: layers: given twice; expected each key once");
  // Twice among a preset's overrides, though the preset's own spec has the key (found by fuzzing:
  // each override replaced the preset's value, and the last won).
  EXPECT_EQ(error_of("gpt3-1.3b:layers=3-1024,layers=5201"),
            "--model: gpt3-1.3b: layers: given twice; expected each key once");
  EXPECT_EQ(error_of("gpt:layers=2,hidden=64,heads=4,positions=8,seq=16"),
            "--model: gpt: positions=8: expected at least seq (16)");
  EXPECT_EQ(error_of("gpt:layers=2,hidden"), "--model: gpt: 'hidden': expected key=value");
  EXPECT_EQ(
      error_of("moe:layers=10000,hidden=1000000,heads=1,ffn=10000000,experts=4096"),
      "--model: moe: expected a model of at most 1e+15 parameters; this spec has about 1.23e+21");
}

TEST(SpecParse, UnknownKeyListsTheKnownOnes) {
  const std::string e = error_of("bert:layers=2,hidden=64,heads=4,experts=8");
  EXPECT_EQ(e,
            "--model: bert: experts=8: unknown key; expected one of layers, hidden, heads, seq, "
            "vocab, ffn, head, labels, dtype");
}

TEST(SpecParse, BertLabelsNeedTheClassificationHead) {
  EXPECT_EQ(error_of("bert:layers=2,hidden=64,heads=4,labels=3"),
            "--model: bert: labels=3: expected only with head=classification");
  EXPECT_EQ(error_of("bert:layers=2,hidden=64,heads=4,head=mlm"),
            "--model: bert: head=mlm: expected one of pretraining, classification");
}

TEST(SpecParse, DtypeSetsTheActivationBytes) {
  // Every family takes dtype=; activations are counted in it, parameters do not change.
  for (const char* spec :
       {"mlp:layers=1,hidden=4,in=3,out=2", "gpt:layers=1,hidden=64,heads=4", "resnet",
        "vit:layers=1,hidden=64,heads=4", "llama:layers=1,hidden=64,heads=4"}) {
    auto bf16 = load_model(spec);
    auto fp32 =
        load_model(std::string(spec) +
                   (std::string(spec).find(':') == std::string::npos ? ":" : ",") + "dtype=fp32");
    ASSERT_TRUE(bf16 && fp32) << spec;
    EXPECT_EQ(bf16->dtype, DType::bf16);
    EXPECT_EQ(fp32->dtype, DType::fp32);
    EXPECT_EQ(fp32->parameters(), bf16->parameters());
    EXPECT_DOUBLE_EQ(fp32->layer_output_bytes(0), 2 * bf16->layer_output_bytes(0)) << spec;
  }
  EXPECT_EQ(error_of("mlp:layers=1,hidden=4,in=3,out=2,dtype=int8"),
            "--model: mlp: dtype=int8: expected one of bf16, fp16, fp32, tf32");
}

TEST(SpecParse, LoadedInADtypeAsWithItsKey) {
  // A plan's precision builds the model as dtype= would, replacing the spec's own; the name stays
  // the spec as given (what plans and --model compare).
  for (const auto& [text, with_key] :
       {std::pair{"gpt3-125m", "gpt3-125m:dtype=fp32"},
        std::pair{"gpt3-125m:dtype=fp16,layers=2", "gpt3-125m:dtype=fp32,layers=2"},
        std::pair{"resnet:depth=18", "resnet:depth=18,dtype=fp32"}}) {
    auto built = load_model(text, "--model", DType::fp32);
    auto keyed = load_model(with_key);
    ASSERT_TRUE(built && keyed) << text;
    EXPECT_EQ(built->dtype, DType::fp32);
    EXPECT_EQ(built->name, text);
    EXPECT_EQ(built->parameters(), keyed->parameters());
    ASSERT_EQ(built->ops.size(), keyed->ops.size());
    for (std::size_t i = 0; i < built->ops.size(); ++i) {
      EXPECT_EQ(built->ops[i].bytes_read, keyed->ops[i].bytes_read) << text << " op " << i;
      EXPECT_EQ(built->ops[i].bytes_written, keyed->ops[i].bytes_written) << text << " op " << i;
    }
  }
  // A graph file's byte counts are its own dtype's: another dtype is refused, naming the file.
  auto gpt = load_model("gpt:layers=1,hidden=64,heads=4");
  ASSERT_TRUE(gpt);
  const auto file = std::filesystem::temp_directory_path() /
                    ("hetplan_dtype_" + std::to_string(::getpid()) + ".json");
  std::ofstream(file) << to_json(*gpt).dump();
  EXPECT_TRUE(load_model(file.string(), "--model", DType::bf16));
  auto refused = load_model(file.string(), "--model", DType::fp32);
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error().message,
            file.string() +
                ": dtype: the graph is costed in bf16 (its byte counts are that dtype's); "
                "expected fp32 for precision=fp32 (write the graph in fp32)");
  std::filesystem::remove(file);
}

TEST(SpecParse, UnknownNames) {
  const std::string e = error_of("gpt4");
  EXPECT_EQ(e.rfind("--model: 'gpt4': expected a preset name", 0), 0u) << e;
  EXPECT_NE(e.find("gpt:..."), std::string::npos) << e;
  EXPECT_EQ(error_of("  "),
            "--model: expected a model: a preset name, a family spec or a .json graph file");
  EXPECT_EQ(load_model("nope", "model").error().message.rfind("model: 'nope'", 0), 0u);
  EXPECT_EQ(error_of("/no/such/dir/model.json"),
            "/no/such/dir/model.json: cannot read: no such file");
  // A preset's keys after a comma, as a family's would be.
  EXPECT_EQ(error_of("bert-base,dtype=bf16"),
            "--model: 'bert-base,dtype=bf16': expected a preset's keys after a colon "
            "(bert-base:dtype=bf16)");
}

}  // namespace
}  // namespace hetplan::model
