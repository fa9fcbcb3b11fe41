// attend_chunk in bf16 (attention_bf16_impl.h), on AMX-BF16 tiles (AttentionDims::amx_bf16;
// attention_rows_avx512amx.cc) and on AVX512-BF16 vectors (AttentionDims::bf16_vectors;
// attention_rows_avx512bf16.cc): within bf16's bound of a double reference, the same bits
// whatever the chunking, fp16 caches as their float values, and the float kernels wherever
// neither applies. Each path is skipped, saying why, on CPUs without it. And the decode
// kernel's bf16 score pass (AttentionDims::bf16_scores; attention_rows_avx512bf16dec.cc).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "base/fp16.h"
#include "kernels/attention.h"
#include "kernels/matmul.h"
#include "kernels/vec_math.h"

namespace ecoserve::kernels {
namespace {

// The two bf16 paths.
enum class Path { kTiles, kVectors };

const char* path_name(Path p) { return p == Path::kTiles ? "tiles" : "vectors"; }

// Empty when `p` runs on this CPU, else why not.
std::string missing(Path p) {
  const CpuFeatures cpu = detect_cpu_features();
  if (p == Path::kTiles) {
    return amx_bf16_supported(cpu) ? "" : "this CPU has no AMX-BF16: attend_chunk's bf16 tiles do not run here";
  }
  return cpu.avx512_bf16 && isa_supported(Isa::kAvx512VnniZmm, cpu)
             ? ""
             : "this CPU has no AVX512-BF16 at the avx512vnni-zmm level: attend_chunk's bf16 vectors do not run here";
}

// A paged cache (blocks in a shuffled physical order) of n_ctx positions of N(0, 1) keys
// and values, with queries of `q_sd` standard deviation for n_ctx tokens.
struct Case {
  int n_head, n_head_kv, hd, block, n_ctx;
  bool f16;
  float q_sd;
};

struct Data {
  std::vector<BlockId> table;
  std::vector<float> k, v, q;           // float caches (for f16: the fp16 values widened)
  std::vector<uint16_t> k16, v16;
  int kv_dim = 0, q_dim = 0;
  PagedKvView view(bool f16) const {
    if (f16) return PagedKvView{k16.data(), v16.data(), kv_dim, block, table, true};
    return PagedKvView{k.data(), v.data(), kv_dim, block, table, false};
  }
  int block = 0;
  // Position p's row of KV head h (float values).
  const float* krow(int p, int h, int hd) const { return k.data() + slot(p) * kv_dim + h * hd; }
  const float* vrow(int p, int h, int hd) const { return v.data() + slot(p) * kv_dim + h * hd; }
  size_t slot(int p) const { return static_cast<size_t>(table[p / block].value) * block + p % block; }
};

Data make_data(const Case& c, unsigned seed) {
  Data d;
  d.block = c.block;
  d.kv_dim = c.n_head_kv * c.hd;
  d.q_dim = c.n_head * c.hd;
  const int n_blocks = (c.n_ctx + c.block - 1) / c.block;
  for (int b = 0; b < n_blocks; ++b) d.table.push_back(BlockId((b * 5 + 3) % n_blocks));
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  const size_t n = static_cast<size_t>(n_blocks) * c.block * d.kv_dim;
  d.k.resize(n);
  d.v.resize(n);
  d.k16.resize(n);
  d.v16.resize(n);
  for (size_t i = 0; i < n; ++i) {
    d.k16[i] = fp32_to_fp16(nd(rng));
    d.v16[i] = fp32_to_fp16(nd(rng));
    d.k[i] = fp16_to_fp32(d.k16[i]);
    d.v[i] = fp16_to_fp32(d.v16[i]);
  }
  d.q.resize(static_cast<size_t>(c.n_ctx) * d.q_dim);
  for (auto& x : d.q) x = c.q_sd * nd(rng);
  return d;
}

// The float kernels' settings, or `p`'s (on the level it runs at).
AttentionDims float_dims(const Case& c) {
  return AttentionDims{c.n_head, c.n_head_kv, c.hd, 1.0f / std::sqrt(static_cast<float>(c.hd))};
}
AttentionDims dims_of(const Case& c, Path p) {
  AttentionDims d = float_dims(c);
  if (p == Path::kTiles) {
    d.amx_bf16 = true;
    d.isa = Isa::kAvx512Amx;
  } else {
    d.bf16_vectors = true;
    d.isa = Isa::kAvx512VnniZmm;
  }
  return d;
}

// Chunks [0, cuts[0]), [cuts[0], cuts[1]), ... of the prompt through attend_chunk.
std::vector<float> run(const Case& c, const Data& data, const AttentionDims& d, const std::vector<int>& cuts) {
  std::vector<float> out(data.q.size(), NAN);
  AttentionScratch scratch;
  const PagedKvView kv = data.view(c.f16);
  int start = 0;
  for (int end : cuts) {
    for (int kvh = 0; kvh < c.n_head_kv; ++kvh) {
      attend_chunk(data.q.data() + static_cast<size_t>(start) * data.q_dim, data.q_dim, end - start, start, kvh, kv,
                   d, out.data() + static_cast<size_t>(start) * data.q_dim, data.q_dim, scratch);
    }
    start = end;
  }
  return out;
}

// Every element of the bf16 result within the bound of bf16's roundings of the double
// reference: a score's error is at most 2^-8 * scale * sum_i |q_i k_i| (q and k each
// rounded to bf16, relative 2^-9; the sum in float adds far less), a weight's relative error
// then at most that (natural log units; with the weights' own bf16 rounding, 2^-9, and V's,
// 2^-9, on top). The output, a weighted mean of the values, moves by at most 2 * (the
// largest score error + 2^-8) * max |v| (the mean of |v|-bounded values whose weights change
// by a relative eps moves by at most 2 eps max |v|).
void expect_within_bf16_bound(const Case& c, const Data& data, const std::vector<float>& out, const char* what) {
  const int g = c.n_head / c.n_head_kv;
  const float scale = 1.0f / std::sqrt(static_cast<float>(c.hd));
  double worst = 0.0;
  for (int t = 0; t < c.n_ctx; t += 9) {
    for (int h = 0; h < c.n_head; ++h) {
      const int kvh = h / g;
      const float* q = data.q.data() + static_cast<size_t>(t) * data.q_dim + h * c.hd;
      std::vector<double> s(t + 1), o(c.hd, 0.0);
      double mx = -1e300, sum = 0.0, score_err = 0.0, vmax = 0.0;
      for (int j = 0; j <= t; ++j) {
        const float* k = data.krow(j, kvh, c.hd);
        double dot = 0.0, mag = 0.0;
        for (int i = 0; i < c.hd; ++i) {
          dot += static_cast<double>(q[i]) * k[i];
          mag += std::fabs(static_cast<double>(q[i]) * k[i]);
        }
        s[j] = dot * scale;
        score_err = std::max(score_err, std::ldexp(mag * scale, -8));
        mx = std::max(mx, s[j]);
        const float* v = data.vrow(j, kvh, c.hd);
        for (int i = 0; i < c.hd; ++i) vmax = std::max(vmax, std::fabs(static_cast<double>(v[i])));
      }
      for (int j = 0; j <= t; ++j) sum += (s[j] = std::exp(s[j] - mx));
      for (int j = 0; j <= t; ++j) {
        for (int i = 0; i < c.hd; ++i) o[i] += s[j] / sum * data.vrow(j, kvh, c.hd)[i];
      }
      const double bound = 2.0 * (score_err + std::ldexp(1.0, -8)) * vmax;
      for (int i = 0; i < c.hd; ++i) {
        const double err = std::fabs(out[static_cast<size_t>(t) * data.q_dim + h * c.hd + i] - o[i]);
        ASSERT_LE(err, bound) << what << " token " << t << " head " << h << " dim " << i;
        worst = std::max(worst, err / bound);
      }
    }
  }
  ::testing::Test::RecordProperty(std::string("worst_fraction_of_bound_") + what, std::to_string(worst));
}

class Bf16AttentionGateTest : public ::testing::TestWithParam<Path> {};
class Bf16AttentionTest : public ::testing::TestWithParam<std::tuple<Path, Case>> {};

TEST_P(Bf16AttentionTest, WithinBf16BoundOfTheReference) {
  const auto [path, c] = GetParam();
  if (const std::string why = missing(path); !why.empty()) GTEST_SKIP() << why;
  const Data data = make_data(c, 5);
  const std::vector<float> out = run(c, data, dims_of(c, path), {c.n_ctx});
  expect_within_bf16_bound(c, data, out, c.f16 ? "f16" : "f32");
  // Not the float kernels' bits (bf16 ran), but near them.
  const std::vector<float> flt = run(c, data, float_dims(c), {c.n_ctx});
  EXPECT_NE(out, flt);
}

// Chunks of 32+ tokens cut anywhere (query tiles of 16 rows cut in different places, steps
// of 32 positions) give the whole prompt's bits. Every case has 97+ tokens, so that each
// chunk below has 32+ (a shorter one runs the float kernel).
TEST_P(Bf16AttentionTest, ChunksOfThirtyTwoOrMoreGiveTheWholePromptsBits) {
  const auto [path, c] = GetParam();
  if (const std::string why = missing(path); !why.empty()) GTEST_SKIP() << why;
  ASSERT_GE(c.n_ctx, 97);
  const Data data = make_data(c, 9);
  const AttentionDims d = dims_of(c, path);
  const std::vector<float> whole = run(c, data, d, {c.n_ctx});
  for (const std::vector<int>& cuts : {std::vector<int>{32, c.n_ctx}, std::vector<int>{33, 65, c.n_ctx},
                                       std::vector<int>{c.n_ctx - 33, c.n_ctx}}) {
    const std::vector<float> parts = run(c, data, d, cuts);
    for (size_t i = 0; i < whole.size(); ++i) {
      ASSERT_EQ(parts[i], whole[i]) << cuts.size() << " chunks, token " << i / data.q_dim << " element "
                                    << i % data.q_dim;
    }
  }
}

// Either path reads an fp16 cache as its float values: the same bits as a float cache of them.
TEST_P(Bf16AttentionTest, F16CacheGivesTheBitsOfItsFloatValues) {
  auto [path, c] = GetParam();
  if (const std::string why = missing(path); !why.empty()) GTEST_SKIP() << why;
  const Data data = make_data(c, 13);
  c.f16 = true;
  const std::vector<float> a = run(c, data, dims_of(c, path), {c.n_ctx});
  c.f16 = false;
  const std::vector<float> b = run(c, data, dims_of(c, path), {c.n_ctx});
  EXPECT_EQ(a, b);
}

// The tiles and the vectors round the same operands to bf16 but sum in their own orders: on a
// CPU with both, their results differ somewhere yet stay within the bound (each checked above).
TEST(Bf16AttentionPathsTest, TilesAndVectorsSumInTheirOwnOrders) {
  for (Path p : {Path::kTiles, Path::kVectors}) {
    if (const std::string why = missing(p); !why.empty()) GTEST_SKIP() << why;
  }
  const Case c{16, 2, 128, 16, 181, true, 1.0f};
  const Data data = make_data(c, 21);
  EXPECT_NE(run(c, data, dims_of(c, Path::kTiles), {c.n_ctx}), run(c, data, dims_of(c, Path::kVectors), {c.n_ctx}));
}

// Chunks under 32 tokens, head sizes not a multiple of 32, the switch off and other levels run
// the float kernels: their bits exactly.
TEST_P(Bf16AttentionGateTest, ShortChunksOtherHeadSizesAndOtherLevelsRunTheFloatKernels) {
  const Path path = GetParam();
  if (const std::string why = missing(path); !why.empty()) GTEST_SKIP() << why;
  for (int hd : {16, 48, 64}) {
    const Case c{8, 2, hd, 16, 31, false, 1.0f};
    const Data data = make_data(c, 17);
    const std::vector<float> flt = run(c, data, float_dims(c), {c.n_ctx});
    EXPECT_EQ(run(c, data, dims_of(c, path), {c.n_ctx}), flt) << "31 tokens, head_dim " << hd;
    const Case longer{8, 2, hd, 16, 64, false, 1.0f};
    const Data data2 = make_data(longer, 17);
    const std::vector<float> flt2 = run(longer, data2, float_dims(longer), {64});
    // The other level: tiles asked for at avx512vnni-zmm, vectors at avx512vnni (and at
    // avx512amx, where amx_bf16 decides).
    AttentionDims other = dims_of(longer, path);
    other.isa = path == Path::kTiles ? Isa::kAvx512VnniZmm : Isa::kAvx512Vnni;
    EXPECT_EQ(run(longer, data2, other, {64}), flt2) << "level below, head_dim " << hd;
    AttentionDims off = dims_of(longer, path);
    off.amx_bf16 = off.bf16_vectors = false;
    EXPECT_EQ(run(longer, data2, off, {64}), flt2) << "switch off, head_dim " << hd;
    const std::vector<float> bf16 = run(longer, data2, dims_of(longer, path), {64});
    if (hd % 32 == 0) {
      EXPECT_NE(bf16, flt2) << "head_dim " << hd;
    } else {
      EXPECT_EQ(bf16, flt2) << "head_dim " << hd;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Paths, Bf16AttentionGateTest, ::testing::Values(Path::kTiles, Path::kVectors),
                         [](const ::testing::TestParamInfo<Path>& info) { return std::string(path_name(info.param)); });

// The vectors' gate: the switch, the avx512vnni-zmm level only (avx512amx: amx_bf16
// decides), a CPU with AVX512-BF16, head_dim a multiple of 32, kAmxBf16MinTokens or more
// tokens; and ECOSERVE_ATTENTION_BF16 (unset: CpuFeatures::fast_bf16_dot; 0 or 1, anything else an error).
TEST(Bf16VectorsGateTest, SwitchLevelCpuHeadSizeTokensAndEnvironment) {
  const bool cpu = detect_cpu_features().avx512_bf16;
  EXPECT_EQ(prefill_attention_bf16_vectors(true, Isa::kAvx512VnniZmm, 64, 32), cpu);
  EXPECT_EQ(prefill_attention_bf16_vectors(true, Isa::kAvx512VnniZmm, 128, 4096), cpu);
  EXPECT_FALSE(prefill_attention_bf16_vectors(false, Isa::kAvx512VnniZmm, 64, 32));
  EXPECT_FALSE(prefill_attention_bf16_vectors(true, Isa::kAvx512VnniZmm, 64, 31)) << "31 tokens";
  EXPECT_FALSE(prefill_attention_bf16_vectors(true, Isa::kAvx512VnniZmm, 48, 64)) << "head_dim 48";
  EXPECT_FALSE(prefill_attention_bf16_vectors(true, Isa::kAvx512Vnni, 64, 64)) << "256-bit level";
  EXPECT_FALSE(prefill_attention_bf16_vectors(true, Isa::kAvx512Amx, 64, 64)) << "the tiles' level";
  EXPECT_FALSE(AttentionDims{}.bf16_vectors) << "callers opt in (the engine from its options)";
  ASSERT_EQ(unsetenv("ECOSERVE_ATTENTION_BF16"), 0);
  EXPECT_EQ(*attention_bf16_from_env(), detect_cpu_features().fast_bf16_dot) << "unset: where vdpbf16ps is fast";
  for (auto [text, on] : {std::pair{"0", false}, {"1", true}}) {
    ASSERT_EQ(setenv("ECOSERVE_ATTENTION_BF16", text, 1), 0);
    EXPECT_EQ(*attention_bf16_from_env(), on) << text;
  }
  ASSERT_EQ(setenv("ECOSERVE_ATTENTION_BF16", "fast", 1), 0);
  const StatusOr<bool> bad = attention_bf16_from_env();
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(bad.status().message(), "ECOSERVE_ATTENTION_BF16: 'fast' is not 0 or 1");
  ASSERT_EQ(unsetenv("ECOSERVE_ATTENTION_BF16"), 0);
}

// The decode kernel's bf16 score pass (AttentionDims::bf16_scores): one token's heads over
// an fp16 cache of n_ctx positions (blocks of 16 in a shuffled order).
struct DecodeCase {
  int n_head, n_head_kv, hd, n_ctx;
};
class Bf16DecodeScoresTest : public ::testing::TestWithParam<DecodeCase> {};

// The double reference of one token's attention with the score scale in log2 units, as the
// kernels take it: bf16 = true rounds the query (times that scale, in float) and K to bf16
// first.
std::vector<double> decode_reference(const Case& c, const Data& data, const float* q, bool bf16) {
  const int g = c.n_head / c.n_head_kv;
  const float s2 = 1.0f / std::sqrt(static_cast<float>(c.hd)) * SoftmaxExp2Constants::kLog2e;
  auto round = [&](float x) { return bf16 ? bf16_to_fp32(fp32_to_bf16(x)) : x; };
  std::vector<double> out(static_cast<size_t>(c.n_head) * c.hd, 0.0);
  for (int h = 0; h < c.n_head; ++h) {
    std::vector<double> s(c.n_ctx);
    double mx = -1e300, sum = 0.0;
    for (int j = 0; j < c.n_ctx; ++j) {
      const float* k = data.krow(j, h / g, c.hd);
      double dot = 0.0;
      for (int i = 0; i < c.hd; ++i) dot += static_cast<double>(round(q[h * c.hd + i] * s2)) * round(k[i]);
      mx = std::max(mx, s[j] = dot);
    }
    for (int j = 0; j < c.n_ctx; ++j) sum += (s[j] = std::exp2(s[j] - mx));
    for (int j = 0; j < c.n_ctx; ++j) {
      for (int i = 0; i < c.hd; ++i) out[h * c.hd + i] += s[j] / sum * data.vrow(j, h / g, c.hd)[i];
    }
  }
  return out;
}

// Within float rounding (1e-4 of the largest |v|) of the reference with the query and K in
// bf16, and, past one position, measurably off the unrounded one (the bf16 kernel ran: the
// roundings move a score by about 2^-9 of sum |q k|). attend_kv_heads, a KV head at a time,
// gives attend_token's bits.
TEST_P(Bf16DecodeScoresTest, ScoresAreThoseOfTheQueryAndKeysInBf16) {
  const DecodeCase dc = GetParam();
  const CpuFeatures cpu = detect_cpu_features();
  if (!cpu.avx512_bf16 || !isa_supported(Isa::kAvx512VnniZmm, cpu)) {
    GTEST_SKIP() << "this CPU has no AVX512-BF16 at the avx512vnni-zmm level: the bf16 score pass does not run here";
  }
  const Case c{dc.n_head, dc.n_head_kv, dc.hd, 16, dc.n_ctx, true, 4.0f};
  const Data data = make_data(c, 13);
  AttentionDims d = float_dims(c);
  d.isa = Isa::kAvx512VnniZmm;
  d.fp16_math = false;
  d.bf16_scores = true;
  ASSERT_TRUE(decode_attention_bf16_scores(true, false, d.isa, true, c.n_head / c.n_head_kv, c.hd));
  const float* q = data.q.data() + static_cast<size_t>(c.n_ctx - 1) * data.q_dim;
  std::vector<float> out(data.q_dim, NAN), by_heads(data.q_dim, NAN);
  AttentionScratch scratch;
  attend_token(q, c.n_ctx, data.view(true), d, out.data(), scratch);
  for (int kvh = 0; kvh < c.n_head_kv; ++kvh) {
    attend_kv_heads(q, kvh, kvh + 1, c.n_ctx, data.view(true), d, by_heads.data(), scratch);
  }
  const std::vector<double> rounded = decode_reference(c, data, q, true), exact = decode_reference(c, data, q, false);
  double vmax = 0.0, off_exact = 0.0;
  for (float v : data.v) vmax = std::max(vmax, std::fabs(static_cast<double>(v)));
  const double tol = 1e-4 * vmax;
  for (int i = 0; i < data.q_dim; ++i) {
    ASSERT_NEAR(out[i], rounded[i], tol) << "head " << i / c.hd << " dim " << i % c.hd;
    ASSERT_EQ(by_heads[i], out[i]) << "head " << i / c.hd << " dim " << i % c.hd;
    off_exact = std::max(off_exact, std::fabs(out[i] - exact[i]));
  }
  if (c.n_ctx > 1) {
    EXPECT_GT(off_exact, 10 * tol) << "the float score pass ran, not the bf16 one";
  }
  // Off, the float score pass: near the unrounded reference.
  d.bf16_scores = false;
  attend_token(q, c.n_ctx, data.view(true), d, out.data(), scratch);
  for (int i = 0; i < data.q_dim; ++i) ASSERT_NEAR(out[i], exact[i], tol) << "float scores, element " << i;
}

INSTANTIATE_TEST_SUITE_P(Shapes, Bf16DecodeScoresTest,
                         ::testing::Values(DecodeCase{32, 4, 64, 1}, DecodeCase{32, 4, 64, 37},
                                           DecodeCase{8, 1, 64, 300}, DecodeCase{16, 2, 128, 129},
                                           DecodeCase{32, 4, 128, 1000}),
                         [](const ::testing::TestParamInfo<DecodeCase>& info) {
                           const DecodeCase& c = info.param;
                           return "heads" + std::to_string(c.n_head) + "_" + std::to_string(c.n_head_kv) + "_hd" +
                                  std::to_string(c.hd) + "_ctx" + std::to_string(c.n_ctx);
                         });

// The bf16 score pass's gate: the switch, an fp16 cache, groups of 8, head_dim 64 or 128, the
// avx512vnni-zmm level or above on a CPU with AVX512-BF16, and not where the half-precision
// value pass (its own kernel) runs.
TEST(Bf16ScoresGateTest, SwitchCacheGroupHeadSizeLevelAndCpu) {
  const CpuFeatures cpu = detect_cpu_features();
  const bool on = cpu.avx512_bf16;
  EXPECT_EQ(decode_attention_bf16_scores(true, false, Isa::kAvx512VnniZmm, true, 8, 64), on);
  EXPECT_EQ(decode_attention_bf16_scores(true, false, Isa::kAvx512Amx, true, 8, 128), on);
  EXPECT_FALSE(decode_attention_bf16_scores(false, false, Isa::kAvx512VnniZmm, true, 8, 64)) << "switch off";
  EXPECT_FALSE(decode_attention_bf16_scores(true, false, Isa::kAvx512VnniZmm, false, 8, 64)) << "f32 cache";
  EXPECT_FALSE(decode_attention_bf16_scores(true, false, Isa::kAvx512VnniZmm, true, 4, 64)) << "groups of 4";
  EXPECT_FALSE(decode_attention_bf16_scores(true, false, Isa::kAvx512VnniZmm, true, 8, 96)) << "head_dim 96";
  EXPECT_FALSE(decode_attention_bf16_scores(true, false, Isa::kAvx512Vnni, true, 8, 64)) << "256-bit level";
  EXPECT_EQ(decode_attention_bf16_scores(true, true, Isa::kAvx512VnniZmm, true, 8, 64), on && !cpu.avx512_fp16)
      << "the half-precision value pass where the CPU has it";
  EXPECT_FALSE(AttentionDims{}.bf16_scores) << "callers opt in (the engine from its options)";
}

// Peaked scores (queries of standard deviation 6: many rows' weights dominated by one
// position, the running max raised often) stay within the bound and finite.
INSTANTIATE_TEST_SUITE_P(
    Shapes, Bf16AttentionTest,
    ::testing::Combine(::testing::Values(Path::kTiles, Path::kVectors),
                       ::testing::Values(Case{8, 1, 64, 16, 203, false, 1.0f}, Case{4, 2, 64, 7, 150, true, 1.0f},
                                         Case{32, 4, 64, 16, 170, false, 1.0f}, Case{16, 2, 128, 16, 181, true, 1.0f},
                                         Case{3, 3, 128, 5, 97, false, 1.0f}, Case{8, 2, 64, 16, 160, false, 6.0f},
                                         Case{32, 8, 128, 16, 140, true, 3.0f}, Case{6, 2, 96, 16, 110, false, 1.0f},
                                         Case{4, 1, 256, 16, 100, true, 2.0f}, Case{4, 1, 32, 16, 120, false, 6.0f},
                                         Case{8, 1, 64, 16, 130, true, 12.0f})),
    [](const ::testing::TestParamInfo<std::tuple<Path, Case>>& info) {
      const Case& c = std::get<1>(info.param);
      return std::string(path_name(std::get<0>(info.param))) + "_heads" + std::to_string(c.n_head) + "_" +
             std::to_string(c.n_head_kv) + "_hd" + std::to_string(c.hd) + "_block" + std::to_string(c.block) + "_ctx" +
             std::to_string(c.n_ctx) + (c.f16 ? "_f16" : "_f32") + "_qsd" + std::to_string(static_cast<int>(c.q_sd));
    });

}  // namespace
}  // namespace ecoserve::kernels
