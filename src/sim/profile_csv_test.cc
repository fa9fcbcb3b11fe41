// parse_profile_csv: lines, fields and errors of a profile CSV read from text; and
// GpuProfile::parse, the in-memory load built on it (the fuzz target's entry),
// against GpuProfile::load of the real H100 profile and on the bounds that keep
// its predictions finite.
#include "sim/profile_csv.h"

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "base/test_data.h"
#include "sim/gpu_profile_cost_model.h"

namespace ecoserve::sim {
namespace {

std::string csv_error(std::string_view text, std::string_view header = "a,b,c") {
  auto csv = parse_profile_csv(text, header, "t.csv");
  if (csv.ok()) return "OK";
  EXPECT_EQ(csv.status().code(), StatusCode::kInvalidArgument);
  return csv.status().message();
}

TEST(ProfileCsvTest, ReadsLinesLikeGetline) {
  auto csv = parse_profile_csv("a,b,c\r\n1,2,3\n\n,x,\r\n4,5,6", "a,b,c", "t.csv");
  ASSERT_TRUE(csv.ok()) << csv.status().to_string();
  EXPECT_EQ(csv->file, "t.csv");
  EXPECT_EQ(csv->columns, (std::vector<std::string>{"a", "b", "c"}));
  ASSERT_EQ(csv->rows.size(), 3u);
  EXPECT_EQ(csv->rows[0].line, 2);
  EXPECT_EQ(csv->rows[0].fields, (std::vector<std::string>{"1", "2", "3"}));
  EXPECT_EQ(csv->rows[1].line, 4);  // line 3 is blank
  EXPECT_EQ(csv->rows[1].fields, (std::vector<std::string>{"", "x", ""}));
  EXPECT_EQ(csv->rows[2].line, 5);  // no final newline
  EXPECT_EQ(csv->rows[2].fields, (std::vector<std::string>{"4", "5", "6"}));
  auto header_only = parse_profile_csv("a,b,c\n", "a,b,c", "t.csv");
  ASSERT_TRUE(header_only.ok());
  EXPECT_TRUE(header_only->rows.empty());
}

TEST(ProfileCsvTest, Errors) {
  EXPECT_EQ(csv_error(""), "t.csv line 1: empty file, expected header 'a,b,c'");
  EXPECT_EQ(csv_error("\n"), "t.csv line 1: header is '', expected 'a,b,c'");
  EXPECT_EQ(csv_error("a,b\n"), "t.csv line 1: header is 'a,b', expected 'a,b,c'");
  EXPECT_EQ(csv_error("a,b,c\n1,2\n"), "t.csv line 2: 2 fields, expected 3 (a,b,c)");
  EXPECT_EQ(csv_error("a,b,c\n1,2,3\n\n1,2,3,4"), "t.csv line 4: 4 fields, expected 3 (a,b,c)");
  EXPECT_EQ(csv_error(std::string_view("a,b,c\n1,\0,3\n", 12)), "OK");  // a NUL is just a byte of a field
}

// The directory's files by name, as GpuProfile::parse takes them.
std::map<std::string, std::string> read_files(const std::string& dir) {
  std::map<std::string, std::string> files;
  for (const char* name :
       {"meta.json", "linear.csv", "attn_prefill.csv", "attn_decode.csv", "elementwise.csv", "layer_mixed.csv"}) {
    std::ifstream in(dir + "/" + name, std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    files[name] = ss.str();
  }
  return files;
}

constexpr const char* kProfile = "profiles/h100-bf16/meta.json";

TEST(GpuProfileParseTest, SameAsLoadOnTheH100Profile) {
  if (!shared_data_path(kProfile)) GTEST_SKIP() << missing_data_message(kProfile);
  const std::string dir = std::filesystem::path(*shared_data_path(kProfile)).parent_path().string();
  auto loaded = GpuProfile::load(dir);
  ASSERT_TRUE(loaded.ok()) << loaded.status().to_string();
  auto parsed = GpuProfile::parse(read_files(dir), dir);
  ASSERT_TRUE(parsed.ok()) << parsed.status().to_string();
  EXPECT_EQ((*parsed)->dir(), dir);
  EXPECT_EQ((*parsed)->launch_overhead_seconds(), (*loaded)->launch_overhead_seconds());
  EXPECT_EQ((*parsed)->elementwise_us_per_element(), (*loaded)->elementwise_us_per_element());
  EXPECT_EQ((*parsed)->describe_models(), (*loaded)->describe_models());
  const LayerMixedError a = profile_layer_mixed_error(**loaded, LayerMixedFit::kInSample);
  const LayerMixedError b = profile_layer_mixed_error(**parsed, LayerMixedFit::kInSample);
  EXPECT_EQ(a.mean_abs_pct, b.mean_abs_pct);
  EXPECT_NEAR(b.mean_abs_pct, 3.70, 0.005);
  for (const ProfiledModel& m : (*loaded)->models()) {
    for (int32_t tp : m.tps) {
      auto ta = (*loaded)->tables(m.name, tp);
      auto tb = (*parsed)->tables(m.name, tp);
      ASSERT_EQ(ta.ok(), tb.ok()) << m.name << " tp " << tp;
      if (!ta.ok()) continue;
      for (size_t g = 0; g < (*ta)->gemm.size(); ++g) {
        EXPECT_EQ((*ta)->gemm[g].y, (*tb)->gemm[g].y);
      }
      EXPECT_EQ((*ta)->prefill.contexts, (*tb)->prefill.contexts);
      EXPECT_EQ((*ta)->decode.contexts, (*tb)->decode.contexts);
    }
  }
}

// The toy profile of gpu_profile_cost_model_test.cc, smaller: the parse errors
// that only the in-memory load and the bounds give.
std::map<std::string, std::string> toy() {
  return {
      {"meta.json", R"({"models": {"toy": [8, 2, 2, 2, 16, 32]}, "tps": {"toy": [1]}})"},
      {"linear.csv",
       "model,tp,op,tokens,k,n,time_us\ntoy,1,qkv,1,8,24,20\ntoy,1,o,1,8,8,12\ntoy,1,gate_up,1,8,32,30\n"
       "toy,1,down,1,16,8,14\ntoy,1,lm_head,1,8,32,50\n"},
      {"attn_prefill.csv", "model,tp,q_len,kv_len,time_us\ntoy,1,16,16,10\n"},
      {"attn_decode.csv", "model,tp,batch,kv_len,time_us,kv_read_GBps\ntoy,1,1,128,10,1\n"},
      {"elementwise.csv",
       "model,op,tokens,time_us\ntoy,rmsnorm,4096,100\ntoy,rmsnorm,8192,150\n"
       "toy,residual_add,4096,20\ntoy,residual_add,8192,30\ntoy,silu_mul,4096,40\ntoy,silu_mul,8192,72\n"},
      {"layer_mixed.csv",
       "model,prefill_tokens,decode_batch,decode_kv_len,measured_eager_us,measured_cuda_graph_us,op_sum_us\n"
       "toy,0,1,128,100,80,100\n"},
  };
}

std::string parse_error(const std::map<std::string, std::string>& files) {
  auto p = GpuProfile::parse(files, "mem");
  return p.ok() ? "OK" : p.status().message();
}

TEST(GpuProfileParseTest, MissingFilesAndBounds) {
  EXPECT_EQ(parse_error(toy()), "OK");
  auto files = toy();
  files.erase("attn_decode.csv");
  auto missing = GpuProfile::parse(files, "mem");
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_EQ(missing.status().message(), "gpu profile: no file mem/attn_decode.csv");

  files = toy();
  files["attn_prefill.csv"] = "model,tp,q_len,kv_len,time_us\ntoy,1,16,16,1e300\n";
  EXPECT_EQ(parse_error(files), "attn_prefill.csv line 2: time_us '1e300' is more than 1e+09 us");
  files = toy();
  files["meta.json"] = R"({"models": {"toy": [8, 2, 2, 2, 16, 4294967296]}, "tps": {"toy": [1]}})";
  EXPECT_EQ(parse_error(files), "mem/meta.json: models.toy is not [hidden, layers, heads, kv_heads, ffn, vocab]");
  files["meta.json"] = R"({"models": {"toy": [8, 2, 2, 2, 16, 32]}, "tps": {"toy": [1, 4096]}})";
  EXPECT_EQ(parse_error(files), "mem/meta.json: tps.toy has a bad tp");
}

}  // namespace
}  // namespace ecoserve::sim
