#include "kernels/matmul.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "kernels/cpu_features.h"
#include "kernels/matmul_kernels.h"
#include "kernels/matmul_test_util.h"
#include "kernels/packed_weights.h"
#include "kernels/quant.h"

namespace ecoserve::kernels {
namespace {

struct Matrix {
  GgmlType type;
  std::int64_t rows, cols;
  std::size_t row_bytes;
  std::vector<std::uint8_t> data;
  std::vector<float> deq;  // dequantized [rows][cols]

  WeightView view() const { return WeightView{type, data.data(), rows, cols, row_bytes}; }
};

Matrix make_matrix(GgmlType type, std::int64_t rows, std::int64_t cols, std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, 0.5f);
  Matrix m{type, rows, cols, row_bytes(*type_traits(type), cols), {}, {}};
  m.data.resize(m.row_bytes * rows);
  m.deq.resize(rows * cols);
  std::vector<float> src(cols);
  for (std::int64_t r = 0; r < rows; ++r) {
    for (auto& v : src) v = dist(rng);
    if (r % 5 == 1) src[r % cols] = 6.0f;                 // an outlier now and then
    if (r == 2) std::fill(src.begin(), src.end(), 0.0f);  // an all-zero row
    quantize_row(type, src.data(), m.data.data() + r * m.row_bytes, cols);
    dequantize_row(type, m.data.data() + r * m.row_bytes, m.deq.data() + r * cols, cols);
  }
  return m;
}

using testing::make_acts;

bool is_float(GgmlType t) { return t == GgmlType::kF32 || t == GgmlType::kF16 || t == GgmlType::kBF16; }

// Checks y against the float64 product of the dequantized weights and x.
// Float types: |err| <= 1e-5 * sum|w*x|. Quantized types, whose activations are
// rounded to int8 per block of 32 (per 256 for Q4_K/Q6_K; scale amax/127, so
// each x moves by at most amax/254):
// |err| <= 1.02 * sum_blocks (amax_b / 254) * sum_b |w| + 1e-5 * sum|w*x|.
void expect_matches_reference(const Matrix& m, const std::vector<float>& x, std::int64_t n, const std::vector<float>& y,
                              const std::string& label) {
  const std::int64_t cols = m.cols;
  int failures = 0;
  for (std::int64_t t = 0; t < n; ++t) {
    const float* xt = x.data() + t * cols;
    for (std::int64_t r = 0; r < m.rows; ++r) {
      const float* wr = m.deq.data() + r * cols;
      double ref = 0, abs_sum = 0, quant_bound = 0;
      for (std::int64_t c = 0; c < cols; ++c) {
        ref += double(wr[c]) * xt[c];
        abs_sum += std::fabs(double(wr[c]) * xt[c]);
      }
      if (!is_float(m.type)) {
        // Activations share a scale per 32 values, or per 256 for K-quant weights.
        const std::int64_t group = detail::takes_k_format(m.type) ? 256 : 32;
        for (std::int64_t b = 0; b < cols / 32; ++b) {
          double amax = 0, wabs = 0;
          const std::int64_t g0 = 32 * b / group * group;
          for (std::int64_t j = g0; j < g0 + group; ++j) amax = std::max(amax, std::fabs(double(xt[j])));
          for (int j = 0; j < 32; ++j) wabs += std::fabs(double(wr[32 * b + j]));
          quant_bound += amax / 254.0 * wabs;
        }
      }
      const double tol = 1.02 * quant_bound + 1e-5 * abs_sum + 1e-30;
      const double err = std::fabs(double(y[t * m.rows + r]) - ref);
      if (err > tol && ++failures <= 5) {
        ADD_FAILURE() << label << " t=" << t << " r=" << r << " y=" << y[t * m.rows + r] << " ref=" << ref
                      << " err=" << err << " tol=" << tol;
      }
    }
  }
  EXPECT_EQ(failures, 0) << label;
}

struct Case {
  GgmlType type;
  std::int64_t cols;
};

const Case kCases[] = {
    {GgmlType::kF32, 45},   {GgmlType::kF32, 96},   {GgmlType::kF16, 40},   {GgmlType::kF16, 256},
    {GgmlType::kBF16, 29},  {GgmlType::kBF16, 96},  {GgmlType::kQ8_0, 32},  {GgmlType::kQ8_0, 160},
    {GgmlType::kQ4_0, 64},  {GgmlType::kQ4_0, 160}, {GgmlType::kQ4_K, 256}, {GgmlType::kQ4_K, 512},
    {GgmlType::kQ6_K, 256}, {GgmlType::kQ6_K, 512},
};

TEST(MatmulTest, MatchesFloat64ReferenceForEveryTypeShapeAndThreadCount) {
  ThreadPool pool1(1), pool2(2);
  std::uint32_t seed = 1;
  for (const Case& c : kCases) {
    for (std::int64_t rows : {1, 5, 37, 70}) {
      const Matrix m = make_matrix(c.type, rows, c.cols, seed++);
      for (std::int64_t n : {1, 2, 3, 4, 7, 32, 65, 130}) {  // 65, 130: the OpenBLAS path
        const std::vector<float> x = make_acts(n, c.cols, seed++);
        for (ThreadPool* pool : {&pool1, &pool2}) {
          for (Isa isa : supported_isas(detect_cpu_features())) {
            KernelContext ctx(pool, isa);
            std::vector<float> y(n * rows, NAN);
            matmul(m.view(), x.data(), n, y.data(), ctx);
            expect_matches_reference(m, x, n, y,
                                     std::string(type_name(c.type)) + " rows=" + std::to_string(rows) +
                                         " cols=" + std::to_string(c.cols) + " n=" + std::to_string(n) +
                                         " threads=" + std::to_string(pool->num_threads()) + " isa=" +
                                         std::string(isa_name(isa)));
          }
        }
      }
    }
  }
}

// Each output element's arithmetic is independent of the batch and the thread
// count: a token alone at 1 thread gives bitwise the same row as inside a 130-token
// batch (a prompt; decode batches go to the same kernels) at 2 threads.
TEST(MatmulTest, BitwiseSameAloneOrBatchedAndAtAnyThreadCount) {
  ThreadPool pool1(1), pool2(2);
  KernelContext ctx1(&pool1), ctx2(&pool2);
  for (GgmlType type : {GgmlType::kF32, GgmlType::kF16, GgmlType::kBF16, GgmlType::kQ8_0, GgmlType::kQ4_0,
                        GgmlType::kQ4_K, GgmlType::kQ6_K}) {
    const std::int64_t rows = 133, cols = 512, n = 130;
    const Matrix m = make_matrix(type, rows, cols, 99);
    const std::vector<float> x = make_acts(n, cols, 7);
    std::vector<float> batched(n * rows), batched1(n * rows), alone(rows);
    matmul(m.view(), x.data(), n, batched.data(), ctx2);
    matmul(m.view(), x.data(), n, batched1.data(), ctx1);
    EXPECT_EQ(std::memcmp(batched.data(), batched1.data(), batched.size() * 4), 0) << type_name(type);
    for (std::int64_t t = 0; t < n; ++t) {
      matmul(m.view(), x.data() + t * cols, 1, alone.data(), ctx1);
      ASSERT_EQ(std::memcmp(alone.data(), batched.data() + t * rows, rows * 4), 0) << type_name(type) << " token " << t;
    }
    // Sub-batches starting mid-way match too (different tile alignment; 2-4
    // tokens take the multi-stream gemv path, 5 the tiles).
    for (std::int64_t k : {2, 3, 4, 5}) {
      for (KernelContext* ctx : {&ctx1, &ctx2}) {
        std::vector<float> sub(k * rows);
        matmul(m.view(), x.data() + 11 * cols, k, sub.data(), *ctx);
        EXPECT_EQ(std::memcmp(sub.data(), batched.data() + 11 * rows, sub.size() * 4), 0)
            << type_name(type) << " sub-batch of " << k << " threads " << ctx->pool->num_threads();
      }
    }
  }
}

// matmul_many equals matmul per target, bitwise: fused (quantized types sharing an
// activation format, rows % 16 == 0; GGUF and kRows8 layouts, decode and tile batches,
// 1 and 2 threads) and falling back (a float matrix, mixed formats, odd rows).
TEST(MatmulTest, ManyTargetsEqualOneMatmulEach) {
  ThreadPool pool1(1), pool2(2);
  KernelContext ctx1(&pool1), ctx2(&pool2);
  const std::int64_t cols = 512;
  struct Case {
    const char* name;
    std::vector<std::pair<GgmlType, std::int64_t>> mats;  // type, rows
    bool pack;                                            // Q8_0 / Q4_K in kRows8
  };
  const std::vector<Case> cases = {
      {"q8_0 qkv", {{GgmlType::kQ8_0, 96}, {GgmlType::kQ8_0, 32}, {GgmlType::kQ8_0, 32}}, false},
      {"q8_0 qkv packed", {{GgmlType::kQ8_0, 96}, {GgmlType::kQ8_0, 32}, {GgmlType::kQ8_0, 32}}, true},
      {"q4_k + q6_k", {{GgmlType::kQ4_K, 64}, {GgmlType::kQ6_K, 48}}, false},
      {"q4_k packed + q6_k", {{GgmlType::kQ4_K, 64}, {GgmlType::kQ6_K, 48}}, true},
      {"q4_0 gate/up", {{GgmlType::kQ4_0, 80}, {GgmlType::kQ4_0, 80}}, false},
      {"mixed formats", {{GgmlType::kQ8_0, 32}, {GgmlType::kQ4_K, 32}}, false},
      {"with a float matrix", {{GgmlType::kQ8_0, 32}, {GgmlType::kF16, 32}}, false},
      {"odd rows", {{GgmlType::kQ8_0, 40}, {GgmlType::kQ8_0, 24}}, false},
  };
  for (const Case& c : cases) {
    std::vector<Matrix> mats;
    std::vector<WeightView> views;
    for (std::size_t i = 0; i < c.mats.size(); ++i) {
      mats.push_back(make_matrix(c.mats[i].first, c.mats[i].second, cols, 300 + static_cast<std::uint32_t>(i)));
    }
    for (Matrix& m : mats) {
      WeightView v = m.view();
      if (c.pack && can_pack_rows8(v)) {
        std::vector<std::uint8_t> packed(m.data.size());
        pack_rows8(m.type, m.data.data(), m.rows, m.cols, packed.data());
        m.data = std::move(packed);
        v = m.view();
        v.layout = WeightLayout::kRows8;
      }
      views.push_back(v);
    }
    for (std::int64_t n : {1, 3, 40}) {
      const std::vector<float> x = make_acts(n, cols, 17);
      for (KernelContext* ctx : {&ctx1, &ctx2}) {
        std::vector<std::vector<float>> many(views.size()), one(views.size());
        std::vector<MatmulTarget> targets;
        for (std::size_t i = 0; i < views.size(); ++i) {
          many[i].assign(n * views[i].rows, -1.0f);
          one[i].assign(n * views[i].rows, -2.0f);
          targets.push_back({&views[i], many[i].data()});
          matmul(views[i], x.data(), n, one[i].data(), *ctx);
        }
        matmul_many(targets, x.data(), n, *ctx);
        for (std::size_t i = 0; i < views.size(); ++i) {
          EXPECT_EQ(std::memcmp(many[i].data(), one[i].data(), many[i].size() * 4), 0)
              << c.name << " matrix " << i << " tokens " << n << " threads " << ctx->pool->num_threads();
        }
      }
    }
  }
}

// Integer dot products are exact, and every ISA level's kernels do the same
// float arithmetic around them: results are bitwise equal across levels, for
// decode batches (gemv) and tiles alike. The float types' kernels differ only in
// tile shape (4 x 3 or 4 x 6 per register tile; avx512vnni-zmm: 4 x 8 with two rows per
// 512-bit register, and tokens in lanes from 32), not in any element's sums; 67 rows and 203
// columns give the tiles an odd last row and a zero-padded tail. Levels
// this CPU lacks are skipped (and named in the test's output).
TEST(MatmulTest, EveryIsaLevelGivesBitwiseTheSameResults) {
  const CpuFeatures cpu = detect_cpu_features();
  const std::vector<Isa> isas = supported_isas(cpu);
  ASSERT_FALSE(isas.empty());
  ASSERT_EQ(isas.front(), Isa::kAvx2);
  for (Isa isa : all_isas()) {
    if (!isa_supported(isa, cpu)) {
      std::printf("[ SKIPPED  ] ISA level %s: not supported by this CPU\n", std::string(isa_name(isa)).c_str());
    }
  }
  ThreadPool pool1(1), pool2(2);
  for (GgmlType type : {GgmlType::kQ8_0, GgmlType::kQ4_0, GgmlType::kQ4_K, GgmlType::kQ6_K, GgmlType::kF32,
                        GgmlType::kF16, GgmlType::kBF16}) {
    // 768: nb % 8 == 0 but 3 super-blocks; 256: one; 203: a float row's zero-padded tail.
    for (std::int64_t cols : {is_float(type) ? std::int64_t{203} : std::int64_t{256}, std::int64_t{768}}) {
      const std::int64_t rows = 67;
      const Matrix m = make_matrix(type, rows, cols, 41);
      // 130: a prompt, also on the int8 kernels; 33, 45, 64: float weights' tokens-in-lanes
      // path on avx512vnni-zmm (a second chunk of one token, of 13: one register of
      // tokens, partly used; two whole chunks); 20: Q6_K's tokens in lanes from 16.
      for (std::int64_t n : {1, 2, 3, 4, 5, 8, 13, 20, 33, 45, 64, 130}) {
        const std::vector<float> x = make_acts(n, cols, 43);
        std::vector<float> ref(n * rows);
        KernelContext base(&pool1, Isa::kAvx2);
        matmul(m.view(), x.data(), n, ref.data(), base);
        // Every token alone (the GEMV).
        std::vector<float> alone(n * rows);
        for (std::int64_t t = 0; t < n; ++t) matmul(m.view(), x.data() + t * cols, 1, alone.data() + t * rows, base);
        EXPECT_EQ(std::memcmp(alone.data(), ref.data(), ref.size() * 4), 0)
            << type_name(type) << " cols=" << cols << ": a token of " << n << " differs from it alone";
        for (Isa isa : isas) {
          for (ThreadPool* pool : {&pool1, &pool2}) {
            KernelContext ctx(pool, isa);
            // The GEMV batches also with every software prefetch distance: none, one line, 1 KiB
            // (the Intel default) and one past every row here (prefetches beyond the matrix);
            // Q6_K batches with its tokens-in-lanes kernel off and on.
            for (std::int32_t prefetch :
                 n <= 4 ? std::vector<std::int32_t>{0, 64, 1024, 65536} : std::vector<std::int32_t>{0}) {
              for (bool q6k_lanes : type == GgmlType::kQ6_K && n > 4 ? std::vector<bool>{false, true}
                                                                     : std::vector<bool>{ctx.q6k_lanes}) {
                ctx.gemv_prefetch = prefetch;
                ctx.q6k_lanes = q6k_lanes;
                std::vector<float> y(n * rows, NAN);
                matmul(m.view(), x.data(), n, y.data(), ctx);
                EXPECT_EQ(std::memcmp(y.data(), ref.data(), y.size() * 4), 0)
                    << type_name(type) << " cols=" << cols << " n=" << n << " isa=" << isa_name(isa)
                    << " threads=" << pool->num_threads() << " gemv_prefetch=" << prefetch
                    << " q6k_lanes=" << q6k_lanes;
              }
            }
          }
        }
      }
    }
  }
}

// Large batches (prompts) are deterministic and bitwise the same at any thread
// count, and close to the double-precision reference: 600 rows split over 1, 2 and
// 3 threads.
TEST(MatmulTest, LargeBatchRepeatsExactlyAndMatchesAcrossThreadCounts) {
  ThreadPool pool1(1), pool2(2), pool3(3);
  KernelContext ctx1(&pool1), ctx2(&pool2), ctx3(&pool3);
  // The level's own kernels (the bf16 tiles have their own tests: matmul_amx_bf16_test.cc).
  for (KernelContext* c : {&ctx1, &ctx2, &ctx3}) c->amx_bf16 = c->bf16_vectors = false;
  for (GgmlType type : {GgmlType::kF32, GgmlType::kF16, GgmlType::kBF16, GgmlType::kQ8_0, GgmlType::kQ6_K}) {
    const std::int64_t rows = 600, cols = 256, n = 75;
    const Matrix m = make_matrix(type, rows, cols, 5);
    const std::vector<float> x = make_acts(n, cols, 6);
    std::vector<float> a(n * rows), b(n * rows), c(n * rows), d(n * rows);
    matmul(m.view(), x.data(), n, a.data(), ctx2);
    matmul(m.view(), x.data(), n, b.data(), ctx2);
    matmul(m.view(), x.data(), n, c.data(), ctx1);
    matmul(m.view(), x.data(), n, d.data(), ctx3);
    EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size() * 4), 0) << type_name(type) << ": 2 threads, twice";
    EXPECT_EQ(std::memcmp(a.data(), c.data(), a.size() * 4), 0) << type_name(type) << ": 2 threads vs 1";
    EXPECT_EQ(std::memcmp(d.data(), c.data(), a.size() * 4), 0) << type_name(type) << ": 3 threads vs 1";
    expect_matches_reference(m, x, n, c, std::string(type_name(type)) + " large batch, 1 thread");
  }
}

// Which kernels a float-weight matmul takes, and the register width profile counts for it.
TEST(MatmulTest, FloatKernelsByLevelAndBatch) {
  using K = FloatMatmulKernel;
  for (Isa isa : all_isas()) {
    EXPECT_EQ(float_matmul_kernel(isa, 1), K::kGemv);
    EXPECT_EQ(float_matmul_kernel(isa, 4), K::kGemv);
    EXPECT_EQ(float_matmul_kernel(isa, 5), K::kTiles);
    EXPECT_EQ(float_matmul_kernel(isa, 31), K::kTiles);
    EXPECT_EQ(float_matmul_vector_bits(isa, 4), 256) << "the GEMV";
    EXPECT_EQ(float_matmul_vector_bits(isa, 31), isa >= Isa::kAvx512VnniZmm ? 512 : 256) << "the tiles";
  }
  EXPECT_EQ(float_matmul_kernel(Isa::kAvx512VnniZmm, 32), K::kLanes);
  EXPECT_EQ(float_matmul_kernel(Isa::kAvx512VnniZmm, 512), K::kLanes);
  EXPECT_EQ(float_matmul_vector_bits(Isa::kAvx512VnniZmm, 32), 512);
  EXPECT_EQ(float_matmul_kernel(Isa::kAvx512Vnni, 32), K::kTiles);
  // Prompts below the zmm level: the tiles, at 256 bits.
  for (Isa isa : {Isa::kAvx2, Isa::kAvxVnni, Isa::kAvx512Vnni}) {
    EXPECT_EQ(float_matmul_kernel(isa, 64), K::kTiles);
    EXPECT_EQ(float_matmul_kernel(isa, 512), K::kTiles);
    EXPECT_EQ(float_matmul_vector_bits(isa, 512), 256);
  }
  EXPECT_EQ(float_matmul_kernel_name(K::kGemv), "gemv");
  EXPECT_EQ(float_matmul_kernel_name(K::kTiles), "tiles");
  EXPECT_EQ(float_matmul_kernel_name(K::kLanes), "tokens in lanes");
  EXPECT_EQ(float_matmul_kernels_summary(Isa::kAvx2), "gemv up to 4 tokens, tiles from 5");
  EXPECT_EQ(float_matmul_kernels_summary(Isa::kAvx512Vnni), "gemv up to 4 tokens, tiles from 5");
  EXPECT_EQ(float_matmul_kernels_summary(Isa::kAvx512VnniZmm),
            "gemv up to 4 tokens, tiles (512-bit) from 5, tokens in lanes from 32");
  EXPECT_EQ(float_matmul_kernels_summary(Isa::kAvx512Amx),
            "gemv up to 4 tokens, tiles (512-bit) from 5, tokens in lanes from 32");
}

TEST(MatmulTest, KnownSmallProductIsExact) {
  // Q8_0 with integer-valued weights and activations whose block amax is 127:
  // everything is exactly representable, so the result is exact.
  ThreadPool pool(1);
  KernelContext ctx(&pool);
  const std::int64_t rows = 3, cols = 64;
  std::vector<float> wf(rows * cols), x(cols);
  for (std::int64_t c = 0; c < cols; ++c) {
    x[c] = static_cast<float>((c % 2 == 0 ? 1 : -1) * (c == 0 || c == 32 ? 127 : c % 7));
    for (std::int64_t r = 0; r < rows; ++r)
      wf[r * cols + c] = static_cast<float>((c == 5 || c == 37) ? 127 : (c + r) % 5 - 2);
  }
  for (GgmlType type : {GgmlType::kF32, GgmlType::kQ8_0}) {
    const std::size_t rb = row_bytes(*type_traits(type), cols);
    std::vector<std::uint8_t> data(rb * rows);
    for (std::int64_t r = 0; r < rows; ++r) quantize_row(type, wf.data() + r * cols, data.data() + r * rb, cols);
    std::vector<float> y(rows);
    matmul(WeightView{type, data.data(), rows, cols, rb}, x.data(), 1, y.data(), ctx);
    for (std::int64_t r = 0; r < rows; ++r) {
      double ref = 0;
      for (std::int64_t c = 0; c < cols; ++c) ref += double(wf[r * cols + c]) * x[c];
      EXPECT_EQ(y[r], static_cast<float>(ref)) << type_name(type) << " row " << r;
    }
  }
}

// Q4_K at its largest integer sums: every nibble 15 and every 6-bit scale 63 (min 0), times
// activations that quantize to +-127. AVX2 adds a sub-block's 8 vpmaddubsw pair sums as int16
// (q4k_sub_blocks16: 8 * 2 * 15 * 127 = 30480, under 2^15), so a wider sum or a saturated
// pair would show here; every level, the GEMV and the batched tiles, kRows8 and GGUF rows.
TEST(MatmulTest, Q4kLargestSumsAreExactOnEveryLevel) {
  const std::int64_t rows = 16, cols = 512;
  const std::size_t rb = row_bytes(*type_traits(GgmlType::kQ4_K), cols);
  std::vector<std::uint8_t> gguf(rb * rows);
  for (std::int64_t sb = 0; sb < rows * cols / 256; ++sb) {
    BlockQ4_K blk{};
    blk.d = 0x3C00;  // 1.0
    blk.dmin = 0;
    for (int i = 0; i < 4; ++i) {
      blk.scales[i] = 0xFF;      // scales 0-3: 63; bits 4-5 of scales 4-7
      blk.scales[i + 4] = 0x00;  // mins 0-3: 0
      blk.scales[i + 8] = 0x0F;  // scales 4-7: 15 | 48 = 63, mins 4-7: 0
    }
    std::memset(blk.qs, 0xFF, sizeof(blk.qs));
    std::memcpy(gguf.data() + sb * sizeof(BlockQ4_K), &blk, sizeof(blk));
  }
  std::vector<std::uint8_t> packed(gguf.size());
  pack_rows8(GgmlType::kQ4_K, gguf.data(), rows, cols, packed.data());
  // Token t: +1 everywhere (t % 3 == 0), -1 (t % 3 == 1), or +1 / -1 by super-block.
  const std::int64_t n = 7;
  std::vector<float> x(n * cols);
  std::vector<double> want(n);
  for (std::int64_t t = 0; t < n; ++t) {
    for (std::int64_t c = 0; c < cols; ++c) {
      x[t * cols + c] = t % 3 == 0 ? 1.0f : t % 3 == 1 ? -1.0f : (c / 256 % 2 == 0 ? 1.0f : -1.0f);
      want[t] += 945.0 * x[t * cols + c];  // 1.0 * 63 * 15 per weight
    }
  }
  ThreadPool pool(1);
  for (Isa isa : supported_isas(detect_cpu_features())) {
    KernelContext ctx(&pool, isa);
    for (WeightLayout layout : {WeightLayout::kRows8, WeightLayout::kGguf}) {
      const WeightView w{GgmlType::kQ4_K, layout == WeightLayout::kRows8 ? packed.data() : gguf.data(), rows, cols, rb,
                         layout};
      for (std::int64_t tokens : {std::int64_t{1}, n}) {
        std::vector<float> y(tokens * rows, NAN);
        matmul(w, x.data(), tokens, y.data(), ctx);
        for (std::int64_t t = 0; t < tokens; ++t) {
          for (std::int64_t r = 0; r < rows; ++r) {
            EXPECT_NEAR(y[t * rows + r], want[t], 1e-5 * 945.0 * cols)
                << isa_name(isa) << (layout == WeightLayout::kRows8 ? " rows8" : " gguf") << " tokens=" << tokens
                << " t=" << t << " r=" << r;
          }
        }
      }
    }
  }
}

TEST(MatmulDeathTest, BadInputNamesTheProblem) {
  ThreadPool pool(1);
  KernelContext ctx(&pool);
  std::vector<std::uint8_t> data(1024);
  std::vector<float> x(64), y(4);
  EXPECT_DEATH(matmul(WeightView{GgmlType::kQ5_K, data.data(), 1, 256, 176}, x.data(), 1, y.data(), ctx),
               "unsupported weight type q5_K");
  EXPECT_DEATH(matmul(WeightView{GgmlType::kQ8_0, data.data(), 1, 48, 51}, x.data(), 1, y.data(), ctx),
               "not a multiple");
  EXPECT_DEATH(matmul(WeightView{GgmlType::kQ8_0, data.data(), 1, 64, 70}, x.data(), 1, y.data(), ctx), "row_bytes=70");
  // A prefetch distance that is not whole lines, on one matrix and on a fused pair.
  ctx.gemv_prefetch = 100;
  const WeightView w{GgmlType::kQ8_0, data.data(), 1, 64, 68};
  EXPECT_DEATH(matmul(w, x.data(), 1, y.data(), ctx),
               "gemv_prefetch must be a multiple of 64 in \\[0, 65536\\], not 100");
  const MatmulTarget targets[] = {{&w, y.data()}, {&w, y.data() + 1}};
  EXPECT_DEATH(matmul_many(targets, x.data(), 1, ctx), "gemv_prefetch must be a multiple of 64");
  ctx.gemv_prefetch = -64;
  EXPECT_DEATH(matmul(WeightView{GgmlType::kF16, data.data(), 1, 64, 128}, x.data(), 1, y.data(), ctx), "not -64");
}

}  // namespace
}  // namespace ecoserve::kernels
