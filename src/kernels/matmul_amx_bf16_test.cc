// The bf16 prompt kernel (matmul_amx_bf16_impl.h) on both its paths: the avx512amx level's
// tiles (KernelContext::amx_bf16; Q8_0 and Q4_K in kRows8, Q6_K, F32, F16 and BF16 in GGUF
// rows) and the avx512vnni-zmm level's AVX512-BF16 vectors (KernelContext::bf16_vectors;
// the GGUF-row types): within the bf16 bound of a double reference, the same bits whatever
// the batch, the token's place in it, the thread count and the fused targets, and taken
// only where amx_bf16_applies / bf16_vectors_applies say. Each path is skipped on a CPU
// that cannot run it.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "base/thread_pool.h"
#include "kernels/bf16_weight_tiles.h"
#include "kernels/cpu_features.h"
#include "kernels/matmul.h"
#include "kernels/matmul_test_util.h"
#include "kernels/ops.h"
#include "kernels/packed_weights.h"
#include "kernels/quant.h"

namespace ecoserve::kernels {
namespace {

using testing::make_matrix;
using testing::PackedMatrix;

class AmxBf16Test : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!amx_bf16_supported(detect_cpu_features())) {
      GTEST_SKIP() << "this CPU has no AMX-BF16 and AVX-512 BF16 (or Linux did not grant the tile state): "
                      "the avx512amx level's bf16 tiles cannot run here";
    }
  }
  static KernelContext bf16_context(ThreadPool* pool) {
    KernelContext ctx(pool, Isa::kAvx512Amx);
    ctx.amx_bf16 = true;
    return ctx;
  }
};

// The two paths of the bf16 products: true = AVX512-BF16 vectors, false = AMX tiles.
class Bf16PathTest : public ::testing::TestWithParam<bool> {
 protected:
  void SetUp() override {
    const CpuFeatures cpu = detect_cpu_features();
    if (vectors() && !bf16_vectors_supported(cpu)) {
      GTEST_SKIP() << "this CPU has no AVX-512 BF16 with the avx512vnni-zmm level: the bf16 vectors cannot run here";
    }
    if (!vectors() && !amx_bf16_supported(cpu)) {
      GTEST_SKIP() << "this CPU has no AMX-BF16 and AVX-512 BF16 (or Linux did not grant the tile state): "
                      "the avx512amx level's bf16 tiles cannot run here";
    }
  }
  static bool vectors() { return GetParam(); }
  static Isa isa() { return vectors() ? Isa::kAvx512VnniZmm : Isa::kAvx512Amx; }
  static KernelContext bf16_context(ThreadPool* pool) {
    KernelContext ctx(pool, isa());
    ctx.amx_bf16 = ctx.bf16_vectors = true;
    return ctx;
  }
  // The level's own kernels: int8 (tiles or registers), or float FMAs for float weights.
  static KernelContext own_context(ThreadPool* pool) {
    KernelContext ctx(pool, isa());
    ctx.amx_bf16 = ctx.bf16_vectors = false;
    return ctx;
  }
  static bool applies(const KernelContext& ctx, const WeightView& w, std::int64_t n) {
    return vectors() ? bf16_vectors_applies(ctx, w, n) : amx_bf16_applies(ctx, w, n);
  }
  // The vectors leave Q8_0 and Q4_K (kRows8) to the int8 kernels.
  static bool on_path(GgmlType type) { return !vectors() || (type != GgmlType::kQ8_0 && type != GgmlType::kQ4_K); }
};
INSTANTIATE_TEST_SUITE_P(Paths, Bf16PathTest, ::testing::Values(false, true),
                         [](const ::testing::TestParamInfo<bool>& info) { return info.param ? "vectors" : "tiles"; });

// Each output within the bound of two bf16 roundings per product (2^-8 of sum |w x|,
// plus the float sums') of the double product of the dequantized weights and x; the
// int8 tiles' result is another rounding of the same product, so the two agree within it.
TEST_P(Bf16PathTest, WithinTheBf16BoundOfTheExactProduct) {
  ThreadPool pool(2);
  struct Case {
    GgmlType type;
    std::int64_t rows, cols;
  };
  for (auto [type, rows, cols] :
       {Case{GgmlType::kQ8_0, 136, 800}, Case{GgmlType::kQ8_0, 64, 2048}, Case{GgmlType::kQ8_0, 24, 64},
        Case{GgmlType::kQ4_K, 136, 768}, Case{GgmlType::kQ4_K, 40, 2304}, Case{GgmlType::kQ6_K, 136, 768},
        Case{GgmlType::kQ6_K, 24, 2304}, Case{GgmlType::kF16, 136, 800}, Case{GgmlType::kF16, 40, 2048},
        Case{GgmlType::kF32, 56, 352}, Case{GgmlType::kBF16, 72, 1056}}) {
    if (!on_path(type)) continue;
    const PackedMatrix m = make_matrix(rows, cols, 5, type);
    const std::int64_t n = 131;
    const std::vector<float> x = testing::make_acts(n, cols, 6);
    std::vector<float> y(n * rows, NAN), yi(n * rows, NAN), w(cols);
    KernelContext ctx = bf16_context(&pool);
    ASSERT_TRUE(applies(ctx, m.engine_view(), n)) << type_name(type);
    matmul(m.engine_view(), x.data(), n, y.data(), ctx);
    KernelContext int8 = own_context(&pool);
    matmul(m.engine_view(), x.data(), n, yi.data(), int8);
    double worst = 0;
    for (std::int64_t r = 0; r < rows; ++r) {
      dequantize_weight_row(m.gguf_view(), r, w.data());
      for (std::int64_t t = 0; t < n; ++t) {
        double exact = 0, mag = 0;
        for (std::int64_t c = 0; c < cols; ++c) {
          exact += double(w[c]) * x[t * cols + c];
          mag += std::fabs(double(w[c]) * x[t * cols + c]);
        }
        const double bound = mag * (1.0 / 256 + cols * 1.2e-7) + 1e-30;
        const double err = std::fabs(y[t * rows + r] - exact);
        ASSERT_LE(err, bound) << type_name(type) << " rows " << rows << " cols " << cols << " row " << r << " token "
                              << t;
        worst = std::max(worst, err / bound);
        // The int8 tiles' activations are rounded to 1/254 of their block's largest value
        // (float weights: the level's float kernels, within the float sums' bound).
        ASSERT_LE(std::fabs(y[t * rows + r] - yi[t * rows + r]), 2 * bound + mag / 64)
            << type_name(type) << " row " << r << " token " << t;
      }
    }
    std::printf("%s rows %lld cols %lld: worst error %.3f of the bound\n", std::string(type_name(type)).c_str(),
                static_cast<long long>(rows),
                static_cast<long long>(cols), worst);
    // Not the level's own bits: the path ran.
    EXPECT_NE(std::memcmp(y.data(), yi.data(), y.size() * 4), 0) << type_name(type);
  }
}

// A token's row is the same bits alone in a batch of 64, inside batches of 65 to 600 (one
// or two chunks of tokens, runs of columns of several lengths), at its every place, on
// one or two threads, and fused with other targets (matmul_many).
TEST_P(Bf16PathTest, BitwiseTheSameAcrossBatchesPlacesThreadsAndFusion) {
  ThreadPool pool1(1), pool2(2);
  for (GgmlType type : {GgmlType::kQ8_0, GgmlType::kQ4_K, GgmlType::kQ6_K, GgmlType::kF16}) {
    if (!on_path(type)) continue;
    const std::int64_t rows = 136, cols = 2048;  // 17 groups: an 8-row group at the end
    const PackedMatrix m = make_matrix(rows, cols, 7, type);
    const std::int64_t n = 600;
    const std::vector<float> x = testing::make_acts(n, cols, 8);
    // Reference: tokens in batches of 64 from every 64th (and the last 64), one thread.
    std::vector<float> ref(n * rows, NAN);
    KernelContext base = bf16_context(&pool1);
    for (std::int64_t t0 = 0; t0 < n; t0 += 64) {
      const std::int64_t first = std::min(t0, n - 64);
      matmul(m.engine_view(), x.data() + first * cols, 64, ref.data() + first * rows, base);
    }
    for (ThreadPool* pool : {&pool1, &pool2}) {
      KernelContext ctx = bf16_context(pool);
      for (std::int64_t k : {65, 96, 120, 131, 257, 600}) {
        for (std::int64_t first : {std::int64_t{0}, n - k}) {
          std::vector<float> y(k * rows, NAN);
          matmul(m.engine_view(), x.data() + first * cols, k, y.data(), ctx);
          ASSERT_EQ(std::memcmp(y.data(), ref.data() + first * rows, y.size() * 4), 0)
              << type_name(type) << " tokens " << first << ".." << first + k << " threads " << pool->num_threads();
        }
      }
      // Fused: the matrix's first 128 rows and a second matrix, one pass.
      const PackedMatrix m2 = make_matrix(48, cols, 9, type);
      WeightView top = m.engine_view();
      top.rows = 128;
      std::vector<float> y1(n * 128, NAN), y2(n * 48, NAN), y2ref(n * 48, NAN);
      const WeightView v2 = m2.engine_view();
      const MatmulTarget fused[] = {{&top, y1.data()}, {&v2, y2.data()}};
      matmul_many(fused, x.data(), n, ctx);
      matmul(v2, x.data(), n, y2ref.data(), base);
      for (std::int64_t t = 0; t < n; ++t) {
        ASSERT_EQ(std::memcmp(y1.data() + t * 128, ref.data() + t * rows, 128 * 4), 0)
            << type_name(type) << " fused, token " << t;
      }
      EXPECT_EQ(std::memcmp(y2.data(), y2ref.data(), y2.size() * 4), 0) << type_name(type) << " fused second target";
    }
  }
}

// matmul_gated (silu(gate) * up made inside the activations' packing where the bf16 products
// run) gives the bits of silu_mul then matmul: Q8_0 / F16 down projections with 2048 and 5632
// columns, with and without tiles made at load, batches across the 256-token chunks and
// ragged last tiles, one and two threads; and the level's own kernels (no bf16) the same.
TEST_P(Bf16PathTest, GatedDownProjectionIsSiluMulThenMatmul) {
  ThreadPool pool1(1), pool2(2);
  for (GgmlType type : {GgmlType::kQ8_0, GgmlType::kF16}) {
    if (!on_path(type)) continue;
    for (std::int64_t cols : {2048, 5632}) {
      const std::int64_t rows = 48;
      const PackedMatrix m = make_matrix(rows, cols, 21, type);
      const WeightView w = m.engine_view();
      Bf16WeightTiles made;
      ASSERT_TRUE(made.add(w, pool2).ok());
      for (std::int64_t n : {16, 37, 300}) {
        std::vector<float> gate = testing::make_acts(n, cols, 22), up = testing::make_acts(n, cols, 23);
        for (float& g : gate) g *= 4.0f;  // SiLU's curve, not only its linear middle
        std::vector<float> x(gate.size());
        silu_mul(gate.data(), up.data(), static_cast<std::int64_t>(gate.size()), x.data());
        for (ThreadPool* pool : {&pool1, &pool2}) {
          for (bool with_made : {false, true}) {
            for (bool bf16 : {true, false}) {
              KernelContext ctx = bf16 ? bf16_context(pool) : own_context(pool);
              if (with_made) ctx.bf16_weights = &made;
              if (!bf16 || n == 300) {
                ASSERT_EQ(applies(ctx, w, n), bf16) << n;  // both ways covered
              }
              std::vector<float> ref(n * rows, NAN), y(n * rows, NAN), g = gate;
              matmul(w, x.data(), n, ref.data(), ctx);
              matmul_gated(w, g.data(), up.data(), n, y.data(), ctx);
              ASSERT_EQ(std::memcmp(y.data(), ref.data(), y.size() * 4), 0)
                  << type_name(type) << " cols " << cols << " tokens " << n << " threads " << pool->num_threads()
                  << " made " << with_made << " bf16 " << bf16;
            }
          }
        }
      }
    }
  }
}

// Fused targets of which only some take the bf16 products (here a Q4_0 value matrix beside
// Q4_K query and key - F16 on the vectors, which leave Q4_K to the int8 kernels - and a
// Q6_K one that does take them): each target's rows are those of its own matmul.
TEST_P(Bf16PathTest, FusedTargetsSplitByPath) {
  ThreadPool pool(2);
  KernelContext ctx = bf16_context(&pool);
  const std::int64_t cols = 512, n = 70;
  const GgmlType qk = vectors() ? GgmlType::kF16 : GgmlType::kQ4_K;
  const PackedMatrix q = make_matrix(64, cols, 11, qk), k = make_matrix(32, cols, 12, qk);
  const PackedMatrix v = make_matrix(32, cols, 13, GgmlType::kQ4_0), o = make_matrix(40, cols, 15, GgmlType::kQ6_K);
  const WeightView qv = q.engine_view(), kv = k.engine_view(), vv = v.gguf_view(), ov = o.gguf_view();
  ASSERT_TRUE(applies(ctx, qv, n));
  ASSERT_TRUE(applies(ctx, ov, n));
  ASSERT_FALSE(applies(ctx, vv, n));
  const std::vector<float> x = testing::make_acts(n, cols, 14);
  std::vector<float> yq(n * 64), yk(n * 32), yv(n * 32), yo(n * 40), rq(n * 64), rk(n * 32), rv(n * 32), ro(n * 40);
  const MatmulTarget fused[] = {{&qv, yq.data()}, {&vv, yv.data()}, {&kv, yk.data()}, {&ov, yo.data()}};
  matmul_many(fused, x.data(), n, ctx);
  matmul(qv, x.data(), n, rq.data(), ctx);
  matmul(kv, x.data(), n, rk.data(), ctx);
  matmul(vv, x.data(), n, rv.data(), ctx);
  matmul(ov, x.data(), n, ro.data(), ctx);
  EXPECT_EQ(std::memcmp(yq.data(), rq.data(), yq.size() * 4), 0) << "query (bf16)";
  EXPECT_EQ(std::memcmp(yk.data(), rk.data(), yk.size() * 4), 0) << "key (bf16)";
  EXPECT_EQ(std::memcmp(yv.data(), rv.data(), yv.size() * 4), 0) << "Q4_0 value (int8)";
  EXPECT_EQ(std::memcmp(yo.data(), ro.data(), yo.size() * 4), 0) << "Q6_K (bf16)";
}

TEST_F(AmxBf16Test, TakenOnlyWhereItApplies) {
  ThreadPool pool(1);
  const PackedMatrix m = make_matrix(16, 64, 3);
  KernelContext ctx = bf16_context(&pool);
  EXPECT_TRUE(amx_bf16_applies(ctx, m.engine_view(), kAmxBf16MinTokens));
  EXPECT_FALSE(amx_bf16_applies(ctx, m.engine_view(), kAmxBf16MinTokens - 1));
  EXPECT_FALSE(amx_bf16_applies(ctx, m.gguf_view(), 512)) << "GGUF layout";
  const PackedMatrix q4k = make_matrix(16, 256, 3, GgmlType::kQ4_K);
  EXPECT_TRUE(amx_bf16_applies(ctx, q4k.packed_view(), kAmxBf16MinTokens));
  EXPECT_FALSE(amx_bf16_applies(ctx, q4k.gguf_view(), 512)) << "Q4_K in the GGUF layout";
  EXPECT_FALSE(amx_bf16_applies(ctx, q4k.packed_view(), kAmxBf16MinTokens - 1));
  // The GGUF-row types from fewer tokens: Q6_K 16, F32 12, F16 and BF16 8.
  const PackedMatrix q6k = make_matrix(16, 256, 3, GgmlType::kQ6_K);
  EXPECT_TRUE(amx_bf16_applies(ctx, q6k.gguf_view(), 16));
  EXPECT_FALSE(amx_bf16_applies(ctx, q6k.gguf_view(), 15));
  EXPECT_FALSE(amx_bf16_applies(ctx, make_matrix(16, 64, 3, GgmlType::kQ4_0).gguf_view(), 512)) << "Q4_0";
  for (auto [type, from] : {std::pair{GgmlType::kF32, 12}, {GgmlType::kF16, 8}, {GgmlType::kBF16, 8}}) {
    EXPECT_EQ(amx_bf16_min_tokens(type), from) << type_name(type);
    EXPECT_TRUE(amx_bf16_applies(ctx, make_matrix(24, 96, 3, type).gguf_view(), from)) << type_name(type);
    EXPECT_FALSE(amx_bf16_applies(ctx, make_matrix(24, 96, 3, type).gguf_view(), from - 1)) << type_name(type);
    EXPECT_FALSE(amx_bf16_applies(ctx, make_matrix(24, 80, 3, type).gguf_view(), 512)) << "cols % 32 != 0";
    EXPECT_FALSE(amx_bf16_applies(ctx, make_matrix(20, 96, 3, type).gguf_view(), 512)) << "rows % 8 != 0";
  }
  ctx.isa = Isa::kAvx512VnniZmm;
  EXPECT_FALSE(amx_bf16_applies(ctx, m.engine_view(), 512)) << "a lower level";
  ctx.isa = Isa::kAvx512Amx;
  ctx.amx_bf16 = false;
  EXPECT_FALSE(amx_bf16_applies(ctx, m.engine_view(), 512)) << "off";
  // Below the threshold the int8 tiles run: the bits of the level without bf16.
  const std::int64_t n = kAmxBf16MinTokens - 1;
  const std::vector<float> x = testing::make_acts(n, 64, 4);
  std::vector<float> a(n * 16), b(n * 16);
  matmul(m.engine_view(), x.data(), n, a.data(), ctx);
  ctx.amx_bf16 = true;
  matmul(m.engine_view(), x.data(), n, b.data(), ctx);
  EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size() * 4), 0);
}

// Decode batches of float weights and Q6_K on the tiles (from amx_bf16_min_tokens, under 16
// tokens one partial token tile): a token's row the same bits in batches of 8 to 31 at any
// place and on one or two threads as in a batch of 131 (whose error bound
// WithinTheBf16BoundOfTheExactProduct checks), and not the bits of the level's own kernels
// (the tiles ran); one token fewer than the threshold gives the level's own bits.
TEST_F(AmxBf16Test, SmallBatchesOfFloatWeightsAndQ6kRunOnTheTiles) {
  ThreadPool pool1(1), pool2(2);
  for (GgmlType type : {GgmlType::kF16, GgmlType::kBF16, GgmlType::kF32, GgmlType::kQ6_K}) {
    const std::int64_t rows = 40, cols = 512, n = 131, from = amx_bf16_min_tokens(type);
    const PackedMatrix m = make_matrix(rows, cols, 21, type);
    const WeightView w = m.engine_view();
    const std::vector<float> x = testing::make_acts(n, cols, 22);
    KernelContext base = bf16_context(&pool1);
    std::vector<float> ref(n * rows, NAN);
    matmul(w, x.data(), n, ref.data(), base);
    KernelContext own(&pool1, Isa::kAvx512Amx);
    own.amx_bf16 = false;
    for (ThreadPool* pool : {&pool1, &pool2}) {
      KernelContext ctx = bf16_context(pool);
      for (std::int64_t k : {from, from + 1, std::int64_t{16}, std::int64_t{17}, std::int64_t{31}}) {
        if (k < from) continue;
        ASSERT_TRUE(amx_bf16_applies(ctx, w, k)) << type_name(type) << " " << k;
        for (std::int64_t first : {std::int64_t{0}, std::int64_t{5}, n - k}) {
          std::vector<float> y(k * rows, NAN), y_own(k * rows, NAN);
          matmul(w, x.data() + first * cols, k, y.data(), ctx);
          ASSERT_EQ(std::memcmp(y.data(), ref.data() + first * rows, y.size() * 4), 0)
              << type_name(type) << " tokens " << first << ".." << first + k << " threads " << pool->num_threads();
          matmul(w, x.data() + first * cols, k, y_own.data(), own);
          EXPECT_NE(std::memcmp(y.data(), y_own.data(), y.size() * 4), 0) << type_name(type) << " " << k;
        }
      }
      // Below the threshold: the level's own kernels.
      std::vector<float> y(from - 1 > 0 ? (from - 1) * rows : 0, NAN), y_own(y.size(), NAN);
      matmul(w, x.data(), from - 1, y.data(), ctx);
      matmul(w, x.data(), from - 1, y_own.data(), own);
      EXPECT_EQ(std::memcmp(y.data(), y_own.data(), y.size() * 4), 0) << type_name(type) << " " << from - 1;
    }
  }
}

// The vectors' gate: the avx512vnni-zmm level only, the GGUF-row types, bf16_vectors_min_tokens
// (F16: 8) or more tokens, on; below the threshold the bits of the level without them.
TEST(Bf16VectorsTest, TakenOnlyWhereItApplies) {
  if (!bf16_vectors_supported(detect_cpu_features())) {
    GTEST_SKIP() << "this CPU has no AVX-512 BF16 with the avx512vnni-zmm level";
  }
  ThreadPool pool(1);
  KernelContext ctx(&pool, Isa::kAvx512VnniZmm);
  ctx.bf16_vectors = true;
  const PackedMatrix f16 = make_matrix(24, 96, 3, GgmlType::kF16);
  const std::int64_t from = bf16_vectors_min_tokens(GgmlType::kF16);
  EXPECT_TRUE(bf16_vectors_applies(ctx, f16.gguf_view(), from));
  EXPECT_FALSE(bf16_vectors_applies(ctx, f16.gguf_view(), from - 1));
  for (GgmlType type : {GgmlType::kF32, GgmlType::kBF16}) {
    EXPECT_TRUE(bf16_vectors_applies(ctx, make_matrix(24, 96, 3, type).gguf_view(), 64)) << type_name(type);
    EXPECT_FALSE(bf16_vectors_applies(ctx, make_matrix(24, 80, 3, type).gguf_view(), 512)) << "cols % 32 != 0";
    EXPECT_FALSE(bf16_vectors_applies(ctx, make_matrix(20, 96, 3, type).gguf_view(), 512)) << "rows % 8 != 0";
  }
  EXPECT_TRUE(bf16_vectors_applies(ctx, make_matrix(16, 256, 3, GgmlType::kQ6_K).gguf_view(), 64));
  EXPECT_FALSE(bf16_vectors_applies(ctx, make_matrix(16, 64, 3).engine_view(), 512)) << "Q8_0 rows of 8";
  EXPECT_FALSE(bf16_vectors_applies(ctx, make_matrix(16, 256, 3, GgmlType::kQ4_K).engine_view(), 512)) << "Q4_K";
  ctx.isa = Isa::kAvx512Vnni;
  EXPECT_FALSE(bf16_vectors_applies(ctx, f16.gguf_view(), 512)) << "the 256-bit level";
  ctx.isa = Isa::kAvx512VnniZmm;
  ctx.bf16_vectors = false;
  EXPECT_FALSE(bf16_vectors_applies(ctx, f16.gguf_view(), 512)) << "off";
  const std::int64_t n = from - 1;
  const std::vector<float> x = testing::make_acts(n, 96, 4);
  std::vector<float> a(n * 24), b(n * 24);
  matmul(f16.gguf_view(), x.data(), n, a.data(), ctx);
  ctx.bf16_vectors = true;
  matmul(f16.gguf_view(), x.data(), n, b.data(), ctx);
  EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size() * 4), 0);
}

TEST(Bf16VectorsEnvTest, ReadsZeroOrOne) {
  ASSERT_EQ(setenv("ECOSERVE_MATMUL_BF16", "0", 1), 0);
  EXPECT_FALSE(*matmul_bf16_from_env());
  ASSERT_EQ(setenv("ECOSERVE_MATMUL_BF16", "1", 1), 0);
  EXPECT_TRUE(*matmul_bf16_from_env());
  ASSERT_EQ(setenv("ECOSERVE_MATMUL_BF16", "on", 1), 0);
  const StatusOr<bool> bad = matmul_bf16_from_env();
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("ECOSERVE_MATMUL_BF16"), std::string::npos) << bad.status().to_string();
  ASSERT_EQ(unsetenv("ECOSERVE_MATMUL_BF16"), 0);
  EXPECT_EQ(*matmul_bf16_from_env(), detect_cpu_features().fast_bf16_dot) << "by default where vdpbf16ps is fast";
}

TEST(AmxBf16EnvTest, ReadsZeroOrOne) {
  ASSERT_EQ(setenv("ECOSERVE_AMX_BF16", "1", 1), 0);
  EXPECT_TRUE(*amx_bf16_from_env());
  ASSERT_EQ(setenv("ECOSERVE_AMX_BF16", "0", 1), 0);
  EXPECT_FALSE(*amx_bf16_from_env());
  ASSERT_EQ(setenv("ECOSERVE_AMX_BF16", "yes", 1), 0);
  const StatusOr<bool> bad = amx_bf16_from_env();
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("ECOSERVE_AMX_BF16"), std::string::npos) << bad.status().to_string();
  ASSERT_EQ(unsetenv("ECOSERVE_AMX_BF16"), 0);
  EXPECT_TRUE(*amx_bf16_from_env()) << "on by default";
}

}  // namespace
}  // namespace ecoserve::kernels
