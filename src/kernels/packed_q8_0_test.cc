#include "kernels/packed_q8_0.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "base/fp16.h"
#include "base/thread_pool.h"
#include "kernels/cpu_features.h"
#include "kernels/matmul.h"
#include "kernels/matmul_kernels.h"
#include "kernels/quant.h"

namespace ecoserve::kernels {
namespace {

// A Q8_0 matrix in GGUF's layout and its kRows8 repacking.
struct Q8Matrix {
  std::int64_t rows, cols;
  std::size_t row_bytes;
  std::vector<std::uint8_t> gguf, packed;

  WeightView gguf_view() const { return WeightView{GgmlType::kQ8_0, gguf.data(), rows, cols, row_bytes}; }
  WeightView packed_view() const {
    return WeightView{GgmlType::kQ8_0, packed.data(), rows, cols, row_bytes, WeightLayout::kRows8};
  }
};

Q8Matrix make_q8(std::int64_t rows, std::int64_t cols, std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, 0.5f);
  Q8Matrix m{rows, cols, row_bytes(*type_traits(GgmlType::kQ8_0), cols), {}, {}};
  m.gguf.resize(m.row_bytes * rows);
  std::vector<float> src(cols);
  for (std::int64_t r = 0; r < rows; ++r) {
    for (auto& v : src) v = dist(rng);
    if (r % 5 == 1) src[r % cols] = 6.0f;                 // an outlier: a q of +-127
    if (r == 2) std::fill(src.begin(), src.end(), 0.0f);  // an all-zero row
    if (r % 7 == 3) src[(r * 3) % cols] = -7.0f;          // and a -127
    quantize_row(GgmlType::kQ8_0, src.data(), m.gguf.data() + r * m.row_bytes, cols);
  }
  m.packed.resize(m.gguf.size());
  pack_q8_0_rows8(m.gguf.data(), rows, cols, m.packed.data());
  return m;
}

std::vector<float> make_acts(std::int64_t n, std::int64_t cols, std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> x(n * cols);
  for (auto& v : x) v = dist(rng);
  for (std::int64_t t = 0; t < n; t += 3) x[t * cols + (t * 7) % cols] = -9.0f;  // -127 after quantization
  if (n > 1) std::fill(x.begin() + cols, x.begin() + 2 * cols, 0.0f);            // an all-zero token
  return x;
}

TEST(PackedQ8Test, LayoutIsAsDocumentedAndRoundTrips) {
  const Q8Matrix m = make_q8(16, 96, 3);
  const std::int64_t nb = 3;
  // Row 9 = group 1, lane 1; block 2, value 13 = chunk 3, byte 1.
  const auto* blk = reinterpret_cast<const BlockQ8_0*>(m.gguf.data() + 9 * m.row_bytes) + 2;
  const std::uint8_t* group = m.packed.data() + 8 * m.row_bytes;
  EXPECT_EQ(group[16 * nb + 256 * 2 + 32 * 3 + 4 * 1 + 1], static_cast<std::uint8_t>(blk->qs[13]) ^ 0x80u);
  std::uint16_t d;
  std::memcpy(&d, group + 2 * (2 * 8 + 1), 2);
  EXPECT_EQ(d, blk->d);
  std::vector<std::uint8_t> row(m.row_bytes);
  std::vector<float> a(m.cols), b(m.cols);
  for (std::int64_t r = 0; r < m.rows; ++r) {
    unpack_q8_0_rows8_row(m.packed.data(), m.cols, r, row.data());
    EXPECT_EQ(std::memcmp(row.data(), m.gguf.data() + r * m.row_bytes, m.row_bytes), 0) << "row " << r;
    dequantize_weight_row(m.gguf_view(), r, a.data());
    dequantize_weight_row(m.packed_view(), r, b.data());
    EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size() * 4), 0) << "row " << r;
  }
  // Rows longer than dequantize_weight_row's 64-block stack buffer.
  const Q8Matrix wide = make_q8(8, 32 * 150, 4);
  std::vector<float> wa(wide.cols), wb(wide.cols);
  dequantize_weight_row(wide.gguf_view(), 5, wa.data());
  dequantize_weight_row(wide.packed_view(), 5, wb.data());
  EXPECT_EQ(std::memcmp(wa.data(), wb.data(), wa.size() * 4), 0);
}

TEST(PackedQ8Test, OnlyQ8_0WithWholeGroupsCanBePacked) {
  std::vector<std::uint8_t> data(34 * 16);
  EXPECT_TRUE(can_pack_rows8(WeightView{GgmlType::kQ8_0, data.data(), 16, 32, 34}));
  EXPECT_FALSE(can_pack_rows8(WeightView{GgmlType::kQ8_0, data.data(), 12, 32, 34}));
  EXPECT_FALSE(can_pack_rows8(WeightView{GgmlType::kQ4_0, data.data(), 16, 32, 18}));
  EXPECT_FALSE(can_pack_rows8(WeightView{GgmlType::kQ8_0, data.data(), 16, 32, 34, WeightLayout::kRows8}));
}

// The kRows8 kernels against the exact-integer formula in float64:
// y = sum_b dw_b * dx_b * isum_b, with the activations quantized as the
// kernels quantize them; |err| <= 1e-5 * sum_b |dw_b * dx_b * isum_b|.
TEST(PackedQ8Test, MatchesTheIntegerFormulaAtEveryIsaLevel) {
  ThreadPool pool1(1), pool2(2);
  std::uint32_t seed = 10;
  for (std::int64_t cols : {32, 96, 512}) {
    for (std::int64_t rows : {8, 24, 136}) {
      const Q8Matrix m = make_q8(rows, cols, seed++);
      for (std::int64_t n : {1, 3, 4, 7, 130}) {
        const std::vector<float> x = make_acts(n, cols, seed++);
        std::vector<std::uint8_t> scratch(detail::quantized_acts_bytes(n, cols));
        const detail::QuantizedActs acts = detail::layout_quantized_acts(scratch.data(), n, cols);
        detail::quantize_acts(x.data(), cols, 0, n, acts);
        const std::int64_t nb = cols / 32;
        std::vector<double> ref(n * rows), bound(n * rows);
        for (std::int64_t t = 0; t < n; ++t) {
          for (std::int64_t r = 0; r < rows; ++r) {
            const auto* blk = reinterpret_cast<const BlockQ8_0*>(m.gguf.data() + r * m.row_bytes);
            for (std::int64_t b = 0; b < nb; ++b) {
              std::int64_t isum = 0;
              for (int k = 0; k < 32; ++k) isum += blk[b].qs[k] * acts.q[t * acts.q_stride + 32 * b + k];
              const double v = double(fp16_to_fp32(blk[b].d)) * acts.d[t * nb + b] * double(isum);
              ref[t * rows + r] += v;
              bound[t * rows + r] += std::fabs(v);
            }
          }
        }
        for (ThreadPool* pool : {&pool1, &pool2}) {
          for (Isa isa : supported_isas(detect_cpu_features())) {
            KernelContext ctx(pool, isa);
            std::vector<float> y(n * rows, NAN);
            matmul(m.packed_view(), x.data(), n, y.data(), ctx);
            for (std::int64_t i = 0; i < n * rows; ++i) {
              ASSERT_LE(std::fabs(y[i] - ref[i]), 1e-5 * bound[i] + 1e-30)
                  << "rows=" << rows << " cols=" << cols << " n=" << n << " isa=" << isa_name(isa)
                  << " threads=" << pool->num_threads() << " token " << i / rows << " row " << i % rows;
            }
          }
        }
      }
    }
  }
}

// Every ISA level, thread count and batch size gives bitwise the same rows,
// and a token computed alone equals the same token inside any batch (a
// prompt's last token and the same token decoded alone agree exactly).
TEST(PackedQ8Test, BitwiseTheSameAcrossIsaLevelsBatchesAndThreads) {
  const CpuFeatures cpu = detect_cpu_features();
  for (Isa isa : all_isas()) {
    if (!isa_supported(isa, cpu)) {
      std::printf("[ SKIPPED  ] ISA level %s: not supported by this CPU\n", std::string(isa_name(isa)).c_str());
    }
  }
  ThreadPool pool1(1), pool2(2);
  for (std::int64_t cols : {64, 768}) {
    const std::int64_t rows = 136;  // 17 groups: remainders of every group tile
    const Q8Matrix m = make_q8(rows, cols, 77);
    const std::int64_t n = 131;
    const std::vector<float> x = make_acts(n, cols, 78);
    std::vector<float> alone(n * rows);
    KernelContext base(&pool1, Isa::kAvx2);
    for (std::int64_t t = 0; t < n; ++t) matmul(m.packed_view(), x.data() + t * cols, 1, alone.data() + t * rows, base);
    for (Isa isa : supported_isas(cpu)) {
      for (ThreadPool* pool : {&pool1, &pool2}) {
        KernelContext ctx(pool, isa);
        for (std::int64_t k : {1, 2, 3, 4, 5, 6, 13, 64, 131}) {
          for (std::int64_t first : {std::int64_t{0}, n - k}) {
            std::vector<float> y(k * rows, NAN);
            matmul(m.packed_view(), x.data() + first * cols, k, y.data(), ctx);
            ASSERT_EQ(std::memcmp(y.data(), alone.data() + first * rows, y.size() * 4), 0)
                << "cols=" << cols << " tokens " << first << ".." << first + k << " isa=" << isa_name(isa)
                << " threads=" << pool->num_threads();
          }
        }
      }
    }
  }
}

TEST(PackedQ8DeathTest, Rows8NeedsQ8_0AndWholeGroups) {
  ThreadPool pool(1);
  KernelContext ctx(&pool);
  std::vector<std::uint8_t> data(34 * 16);
  std::vector<float> x(32), y(16);
  EXPECT_DEATH(matmul(WeightView{GgmlType::kQ8_0, data.data(), 12, 32, 34, WeightLayout::kRows8}, x.data(), 1,
                      y.data(), ctx),
               "kRows8 layout needs q8_0 with rows % 8 == 0, not q8_0 with 12 rows");
  EXPECT_DEATH(matmul(WeightView{GgmlType::kQ4_0, data.data(), 16, 32, 18, WeightLayout::kRows8}, x.data(), 1,
                      y.data(), ctx),
               "kRows8 layout needs q8_0");
}

}  // namespace
}  // namespace ecoserve::kernels
