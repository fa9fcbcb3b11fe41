// Bf16WeightTiles: the bf16 tiles' weights made once give every product the bits of the
// per-call copies (tiles and vectors, matmul and matmul_many, one and two threads, one and
// two chunks of tokens), are read in place of the weights, and refuse what they cannot
// hold. The products are skipped on a CPU without AMX-BF16.
#include "kernels/bf16_weight_tiles.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "base/thread_pool.h"
#include "kernels/cpu_features.h"
#include "kernels/matmul.h"
#include "kernels/matmul_test_util.h"

namespace ecoserve::kernels {
namespace {

using testing::make_matrix;
using testing::PackedMatrix;

bool have_tiles() { return amx_bf16_supported(detect_cpu_features()); }
bool have_vectors() { return bf16_vectors_supported(detect_cpu_features()); }

KernelContext bf16_context(ThreadPool* pool, Isa isa, const Bf16WeightTiles* made) {
  KernelContext ctx(pool, isa);
  ctx.amx_bf16 = ctx.bf16_vectors = true;
  ctx.bf16_weights = made;
  return ctx;
}

TEST(Bf16WeightTilesTest, MadeTilesGiveTheCopiesBits) {
  if (!have_tiles() && !have_vectors()) GTEST_SKIP() << "this CPU has no AVX-512 BF16: no bf16 tiles to make";
  ThreadPool pool1(1), pool2(2);
  struct Case {
    GgmlType type;
    std::int64_t rows, cols;
  };
  // Odd group counts (136, 40, 56, 72 rows) end on a lone 8-row group.
  for (auto [type, rows, cols] :
       {Case{GgmlType::kQ8_0, 136, 2048}, Case{GgmlType::kQ4_K, 136, 768}, Case{GgmlType::kQ6_K, 40, 768},
        Case{GgmlType::kF16, 136, 800}, Case{GgmlType::kF32, 56, 352}, Case{GgmlType::kBF16, 72, 1056}}) {
    const PackedMatrix m = make_matrix(rows, cols, 21, type), m2 = make_matrix(48, cols, 22, type);
    const WeightView w = m.engine_view(), w2 = m2.engine_view();
    Bf16WeightTiles tiles;
    ASSERT_TRUE(tiles.add(w, pool2).ok()) << type_name(type);
    ASSERT_NE(tiles.find(w), nullptr);
    EXPECT_EQ(tiles.find(w2), nullptr);
    EXPECT_EQ(tiles.bytes(), (rows + 15) / 16 * 16 * cols * 2);
    // The vectors take the GGUF-row types only (Q8_0 and Q4_K go to the int8 kernels there).
    const bool rows8 = type == GgmlType::kQ8_0 || type == GgmlType::kQ4_K;
    int compared = 0;
    for (Isa isa : {Isa::kAvx512Amx, Isa::kAvx512VnniZmm}) {
      if (isa == Isa::kAvx512VnniZmm && (rows8 || !have_vectors())) continue;
      if (isa == Isa::kAvx512Amx && !have_tiles()) continue;
      for (ThreadPool* pool : {&pool1, &pool2}) {
        const std::int64_t from =
            isa == Isa::kAvx512Amx ? amx_bf16_min_tokens(type) : bf16_vectors_min_tokens(type);
        // 35 and 56: two tile calls per slab (a pair and a lone tile of 3; a pair and a pair
        // whose second tile has 8 tokens), 300: two chunks of tokens.
        for (std::int64_t n : {from, std::int64_t{35}, std::int64_t{56}, std::int64_t{300}}) {
          const std::vector<float> x = testing::make_acts(n, cols, 23);
          KernelContext copies = bf16_context(pool, isa, nullptr), made = bf16_context(pool, isa, &tiles);
          // Both on the bf16 path (the copies from their own threshold).
          const bool on = bf16_products_apply(made, w, n) && bf16_products_apply(copies, w, n);
          if (!on) continue;
          std::vector<float> y(n * rows, NAN), ym(n * rows, NAN), y2(n * 48, NAN), y2m(n * 48, NAN);
          matmul(w, x.data(), n, y.data(), copies);
          matmul(w, x.data(), n, ym.data(), made);
          const std::string what = std::string(type_name(type)) + " " + std::string(isa_name(isa)) + " tokens " +
                                   std::to_string(n) + " threads " + std::to_string(pool->num_threads());
          ASSERT_EQ(std::memcmp(y.data(), ym.data(), y.size() * 4), 0) << what;
          // Fused with a matrix whose tiles were not made: each its own bits.
          std::fill(ym.begin(), ym.end(), NAN);
          const MatmulTarget fused[] = {{&w2, y2m.data()}, {&w, ym.data()}};
          matmul_many(fused, x.data(), n, made);
          matmul(w2, x.data(), n, y2.data(), copies);
          ASSERT_EQ(std::memcmp(y.data(), ym.data(), y.size() * 4), 0) << what << " fused";
          ASSERT_EQ(std::memcmp(y2.data(), y2m.data(), y2.size() * 4), 0) << what << " fused, not made";
          ++compared;
        }
      }
    }
    // 4 batches (the copies' own threshold, 35, 56, 300) x 2 pools on each path: the tiles,
    // and the vectors for the GGUF-row types.
    EXPECT_EQ(compared, (have_tiles() ? 8 : 0) + (rows8 || !have_vectors() ? 0 : 8)) << type_name(type);
  }
}

// With the tiles made, the bf16 tiles start at amx_bf16_min_tokens(type, true) and the bf16
// vectors (the avx512vnni-zmm level) at bf16_vectors_min_tokens(type, true): a batch of that
// many gives each token's row of a batch of 64 (bits independent of the batch), one token
// fewer the level's own kernels' bits.
TEST(Bf16WeightTilesTest, MadeTilesStartAtTheirOwnThresholds) {
  if (!have_tiles() && !have_vectors()) GTEST_SKIP() << "this CPU has no AVX-512 BF16: no bf16 tiles to make";
  ThreadPool pool(2);
  int checked = 0;
  for (Isa isa : {Isa::kAvx512Amx, Isa::kAvx512VnniZmm}) {
    const bool tiles_level = isa == Isa::kAvx512Amx;
    if (tiles_level ? !have_tiles() : !have_vectors()) continue;
    for (GgmlType type :
         {GgmlType::kQ8_0, GgmlType::kQ4_K, GgmlType::kQ6_K, GgmlType::kF16, GgmlType::kF32, GgmlType::kBF16}) {
      const bool rows8 = type == GgmlType::kQ8_0 || type == GgmlType::kQ4_K;
      if (!tiles_level && rows8) continue;  // the int8 kernels there
      const std::int64_t rows = 40, cols = 768;
      const std::int64_t from =
          tiles_level ? amx_bf16_min_tokens(type, true) : bf16_vectors_min_tokens(type, true);
      const std::int64_t own_from = tiles_level ? amx_bf16_min_tokens(type) : bf16_vectors_min_tokens(type);
      const std::string what = std::string(type_name(type)) + " " + std::string(isa_name(isa));
      EXPECT_LE(from, own_from) << what;
      const PackedMatrix m = make_matrix(rows, cols, 51, type);
      const WeightView w = m.engine_view();
      Bf16WeightTiles tiles;
      ASSERT_TRUE(tiles.add(w, pool).ok());
      KernelContext made = bf16_context(&pool, isa, &tiles);
      KernelContext copies = bf16_context(&pool, isa, nullptr);
      KernelContext own = bf16_context(&pool, isa, nullptr);
      own.amx_bf16 = own.bf16_vectors = false;
      EXPECT_TRUE(bf16_products_apply(made, w, from)) << what;
      EXPECT_FALSE(bf16_products_apply(made, w, from - 1)) << what;
      EXPECT_EQ(bf16_products_apply(copies, w, from), from >= own_from) << what;
      const std::vector<float> x = testing::make_acts(64, cols, 52);
      std::vector<float> ref(64 * rows), y(from * rows), below(from * rows), own_below(from * rows);
      matmul(w, x.data(), 64, ref.data(), copies);
      matmul(w, x.data(), from, y.data(), made);
      EXPECT_EQ(std::memcmp(y.data(), ref.data(), y.size() * 4), 0) << what << " " << from << " tokens";
      matmul(w, x.data(), from - 1, below.data(), made);
      matmul(w, x.data(), from - 1, own_below.data(), own);
      EXPECT_EQ(std::memcmp(below.data(), own_below.data(), (from - 1) * rows * 4), 0) << what;
      EXPECT_NE(std::memcmp(below.data(), ref.data(), (from - 1) * rows * 4), 0) << what;
      ++checked;
    }
  }
  EXPECT_EQ(checked, (have_tiles() ? 6 : 0) + (have_vectors() ? 4 : 0));
}

// The thresholds themselves: made tiles start float weights lower on both levels (their own
// kernels read the weights and, for F32, twice the bytes) and Q6_K too; the vectors (tuned on
// Zen 5) start every type they take below 32 even with per-call copies.
TEST(Bf16WeightTilesTest, MadeThresholds) {
  EXPECT_EQ(amx_bf16_min_tokens(GgmlType::kF32), 12);
  EXPECT_EQ(amx_bf16_min_tokens(GgmlType::kF32, true), 4);
  EXPECT_EQ(amx_bf16_min_tokens(GgmlType::kF16, true), 4);
  EXPECT_EQ(amx_bf16_min_tokens(GgmlType::kBF16, true), 4);
  EXPECT_EQ(amx_bf16_min_tokens(GgmlType::kF16), 8);
  EXPECT_EQ(amx_bf16_min_tokens(GgmlType::kQ6_K, true), 8);
  EXPECT_EQ(bf16_vectors_min_tokens(GgmlType::kF32), 16);
  EXPECT_EQ(bf16_vectors_min_tokens(GgmlType::kF32, true), 2);
  for (GgmlType type : {GgmlType::kF16, GgmlType::kBF16}) {
    EXPECT_EQ(bf16_vectors_min_tokens(type), 8) << type_name(type);
    EXPECT_EQ(bf16_vectors_min_tokens(type, true), 4) << type_name(type);
  }
  EXPECT_EQ(bf16_vectors_min_tokens(GgmlType::kQ6_K), 16);
  EXPECT_EQ(bf16_vectors_min_tokens(GgmlType::kQ6_K, true), 8);
  for (GgmlType type : {GgmlType::kQ8_0, GgmlType::kQ4_K}) {
    EXPECT_EQ(bf16_vectors_min_tokens(type), kAmxBf16MinTokens) << type_name(type) << ": not taken by the vectors";
  }
}

// The products read the made tiles, not the weights: bytes changed after add() (which the
// contract forbids) leave a made context's results those of the old weights.
TEST(Bf16WeightTilesTest, ProductsReadTheMadeTiles) {
  if (!have_tiles()) GTEST_SKIP() << "this CPU has no AMX-BF16 and AVX-512 BF16: no bf16 tiles to make";
  ThreadPool pool(2);
  const std::int64_t rows = 64, cols = 512, n = 40;
  const PackedMatrix a = make_matrix(rows, cols, 31, GgmlType::kQ8_0), b = make_matrix(rows, cols, 32, GgmlType::kQ8_0);
  std::vector<std::uint8_t> bytes = a.packed;
  WeightView w = a.packed_view();
  w.data = bytes.data();
  Bf16WeightTiles tiles;
  ASSERT_TRUE(tiles.add(w, pool).ok());
  const std::vector<float> x = testing::make_acts(n, cols, 33);
  KernelContext copies = bf16_context(&pool, Isa::kAvx512Amx, nullptr);
  KernelContext made = bf16_context(&pool, Isa::kAvx512Amx, &tiles);
  std::vector<float> ya(n * rows), yb(n * rows), ym(n * rows);
  matmul(w, x.data(), n, ya.data(), copies);
  std::memcpy(bytes.data(), b.packed.data(), bytes.size());
  matmul(w, x.data(), n, yb.data(), copies);
  matmul(w, x.data(), n, ym.data(), made);
  EXPECT_NE(std::memcmp(ya.data(), yb.data(), ya.size() * 4), 0) << "the two matrices differ";
  EXPECT_EQ(std::memcmp(ya.data(), ym.data(), ya.size() * 4), 0) << "the made tiles are the old weights'";
  // A second add of the same data keeps the first tiles.
  ASSERT_TRUE(tiles.add(w, pool).ok());
  EXPECT_EQ(tiles.size(), 1u);
  matmul(w, x.data(), n, ym.data(), made);
  EXPECT_EQ(std::memcmp(ya.data(), ym.data(), ya.size() * 4), 0);
}

TEST(Bf16WeightTilesTest, RefusesWhatTheTilesDoNotTake) {
  ThreadPool pool(1);
  Bf16WeightTiles tiles;
  const PackedMatrix q4 = make_matrix(32, 256, 41, GgmlType::kQ4_0);
  const Status st = tiles.add(q4.gguf_view(), pool);
  EXPECT_EQ(st.code(), StatusCode::kFailedPrecondition) << st.to_string();
  EXPECT_EQ(Bf16WeightTiles::bytes_for(q4.gguf_view()), 0);
  // Q8_0 in GGUF rows: the tiles take it only in kRows8.
  const PackedMatrix q8 = make_matrix(32, 256, 42, GgmlType::kQ8_0);
  EXPECT_EQ(tiles.add(q8.gguf_view(), pool).code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(Bf16WeightTiles::bytes_for(q8.packed_view()), 32 * 256 * 2);
  if (!have_tiles() && !have_vectors()) {
    EXPECT_EQ(tiles.add(q8.packed_view(), pool).code(), StatusCode::kFailedPrecondition) << "no AVX-512 BF16 here";
  }
  EXPECT_EQ(tiles.size(), 0u);
  EXPECT_EQ(tiles.bytes(), 0);
}

TEST(Bf16WeightsEnvTest, ReadsZeroOneOrAuto) {
  ASSERT_EQ(setenv("ECOSERVE_BF16_WEIGHTS", "1", 1), 0);
  EXPECT_EQ(*bf16_weights_from_env(), Bf16WeightsMode::kOn);
  ASSERT_EQ(setenv("ECOSERVE_BF16_WEIGHTS", "0", 1), 0);
  EXPECT_EQ(*bf16_weights_from_env(), Bf16WeightsMode::kOff);
  ASSERT_EQ(setenv("ECOSERVE_BF16_WEIGHTS", "auto", 1), 0);
  EXPECT_EQ(*bf16_weights_from_env(), Bf16WeightsMode::kAuto);
  for (const char* bad_value : {"yes", "", "AUTO", "2"}) {
    ASSERT_EQ(setenv("ECOSERVE_BF16_WEIGHTS", bad_value, 1), 0);
    const StatusOr<Bf16WeightsMode> bad = bf16_weights_from_env();
    EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument) << bad_value;
    EXPECT_NE(bad.status().message().find("ECOSERVE_BF16_WEIGHTS"), std::string::npos) << bad.status().to_string();
  }
  ASSERT_EQ(unsetenv("ECOSERVE_BF16_WEIGHTS"), 0);
  EXPECT_EQ(*bf16_weights_from_env(), Bf16WeightsMode::kAuto) << "auto by default";
  for (Bf16WeightsMode mode : {Bf16WeightsMode::kOff, Bf16WeightsMode::kOn, Bf16WeightsMode::kAuto}) {
    EXPECT_EQ(*parse_bf16_weights_mode(bf16_weights_mode_name(mode), "x"), mode);
  }
}

// kAuto's rule: the tiles within `share` of the memory available less the KV cache.
TEST(Bf16WeightsAutoTest, FitsWithinTheShareOfAvailableMemoryLessTheKvCache) {
  constexpr std::int64_t kGb = 1'000'000'000;
  EXPECT_TRUE(bf16_weights_auto_fits(2 * kGb, 20 * kGb, 2 * kGb, 0.25));    // 2 <= 4.5
  EXPECT_TRUE(bf16_weights_auto_fits(4 * kGb, 18 * kGb, 2 * kGb, 0.25));    // 4 <= 4: the bound is in
  EXPECT_FALSE(bf16_weights_auto_fits(4 * kGb + 1, 18 * kGb, 2 * kGb, 0.25));
  EXPECT_FALSE(bf16_weights_auto_fits(2 * kGb, 20 * kGb, 2 * kGb, 0.25 / 4));  // serve's 4 instances: 1.125 each
  EXPECT_FALSE(bf16_weights_auto_fits(1, 2 * kGb, 2 * kGb, 1.0)) << "the KV cache takes it all";
  EXPECT_FALSE(bf16_weights_auto_fits(1, kGb, 2 * kGb, 1.0)) << "the KV cache takes more than there is";
  EXPECT_FALSE(bf16_weights_auto_fits(0, 20 * kGb, 0, 0.25)) << "no tiles to make";
}

TEST(Bf16WeightsAutoTest, SummariesNameTheMode) {
  CpuFeatures none;
  EXPECT_NE(bf16_weights_summary(Bf16WeightsMode::kAuto, none).find("not on this CPU"), std::string::npos);
  EXPECT_NE(bf16_weights_summary(Bf16WeightsMode::kOn, none).find("refuse to start"), std::string::npos);
  CpuFeatures vectors_only;  // Zen 5: AVX-512 BF16 at the avx512vnni-zmm level, no AMX
  vectors_only.avx2 = vectors_only.fma = vectors_only.f16c = vectors_only.avx512f = vectors_only.avx512bw =
      vectors_only.avx512vl = vectors_only.avx512dq = vectors_only.avx512_vnni = vectors_only.avx512_bf16 =
          vectors_only.full_rate_512 = true;
  ASSERT_TRUE(bf16_vectors_supported(vectors_only));
  ASSERT_FALSE(amx_bf16_supported(vectors_only));
  const std::string s = bf16_weights_summary(Bf16WeightsMode::kAuto, vectors_only);
  EXPECT_EQ(s.rfind("auto", 0), 0u) << s;
  EXPECT_NE(s.find("bf16 vectors"), std::string::npos) << s;
  EXPECT_EQ(s.find("bf16 tiles"), std::string::npos) << s;
  const CpuFeatures cpu = detect_cpu_features();
  if (!amx_bf16_supported(cpu)) GTEST_SKIP() << "no AMX-BF16 here: the CPU's own summaries are checked above";
  EXPECT_EQ(bf16_weights_summary(Bf16WeightsMode::kAuto, cpu).rfind("auto", 0), 0u);
  EXPECT_EQ(bf16_weights_summary(Bf16WeightsMode::kOn, cpu).rfind("on", 0), 0u);
  EXPECT_EQ(bf16_weights_summary(Bf16WeightsMode::kOff, cpu).rfind("off", 0), 0u);
}

}  // namespace
}  // namespace ecoserve::kernels
