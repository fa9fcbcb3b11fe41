#include "kernels/packed_weights.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "base/fp16.h"
#include "base/thread_pool.h"
#include "kernels/cpu_features.h"
#include "kernels/matmul.h"
#include "kernels/matmul_kernels.h"
#include "kernels/matmul_test_util.h"
#include "kernels/quant.h"

namespace ecoserve::kernels {
namespace {

using testing::make_acts;
using testing::make_matrix;
using testing::PackedMatrix;

TEST(PackedWeightsTest, LayoutIsAsDocumentedAndRoundTrips) {
  // 7 blocks per row: a run of 4 (1088 bytes), then a run of 3.
  const PackedMatrix m = make_matrix(16, 224, 3);
  const std::uint8_t* group = m.packed.data() + 8 * m.row_bytes;
  // Row 9 = group 1, lane 1; block 2 (run 0), value 13 = chunk 3, byte 1.
  const auto* blk = reinterpret_cast<const BlockQ8_0*>(m.gguf.data() + 9 * m.row_bytes) + 2;
  EXPECT_EQ(group[16 * 4 + 256 * 2 + 32 * 3 + 4 * 1 + 1], static_cast<std::uint8_t>(blk->qs[13]) ^ 0x80u);
  std::uint16_t d;
  std::memcpy(&d, group + 16 * 2 + 2 * 1, 2);
  EXPECT_EQ(d, blk->d);
  // Block 5 = block 1 of run 1 (3 blocks, from byte 1088), value 30 = chunk 7, byte 2.
  const auto* blk5 = reinterpret_cast<const BlockQ8_0*>(m.gguf.data() + 9 * m.row_bytes) + 5;
  EXPECT_EQ(group[1088 + 16 * 3 + 256 * 1 + 32 * 7 + 4 * 1 + 2], static_cast<std::uint8_t>(blk5->qs[30]) ^ 0x80u);
  std::memcpy(&d, group + 1088 + 16 * 1 + 2 * 1, 2);
  EXPECT_EQ(d, blk5->d);
  std::vector<std::uint8_t> row(m.row_bytes);
  std::vector<float> a(m.cols), b(m.cols);
  for (std::int64_t r = 0; r < m.rows; ++r) {
    unpack_rows8_row(GgmlType::kQ8_0, m.packed.data(), m.cols, r, row.data());
    EXPECT_EQ(std::memcmp(row.data(), m.gguf.data() + r * m.row_bytes, m.row_bytes), 0) << "row " << r;
    dequantize_weight_row(m.gguf_view(), r, a.data());
    dequantize_weight_row(m.packed_view(), r, b.data());
    EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size() * 4), 0) << "row " << r;
  }
  // Rows longer than dequantize_weight_row's 64-block stack buffer.
  const PackedMatrix wide = make_matrix(8, 32 * 150, 4);
  std::vector<float> wa(wide.cols), wb(wide.cols);
  dequantize_weight_row(wide.gguf_view(), 5, wa.data());
  dequantize_weight_row(wide.packed_view(), 5, wb.data());
  EXPECT_EQ(std::memcmp(wa.data(), wb.data(), wa.size() * 4), 0);
}

// Q4_K: every byte of every row comes back (scales and mins re-encoded in
// ggml's 12-byte form), and the first super-block's fields sit where documented.
TEST(PackedWeightsTest, Q4KLayoutIsAsDocumentedAndRoundTrips) {
  const PackedMatrix m = make_matrix(24, 512, 5, GgmlType::kQ4_K);
  std::vector<std::uint8_t> row(m.row_bytes);
  std::vector<float> a(m.cols), b(m.cols);
  for (std::int64_t r = 0; r < m.rows; ++r) {
    unpack_rows8_row(GgmlType::kQ4_K, m.packed.data(), m.cols, r, row.data());
    ASSERT_EQ(std::memcmp(row.data(), m.gguf.data() + r * m.row_bytes, m.row_bytes), 0) << "row " << r;
    dequantize_weight_row(m.gguf_view(), r, a.data());
    dequantize_weight_row(m.packed_view(), r, b.data());
    EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size() * 4), 0) << "row " << r;
  }
  // Row 11 = group 1, lane 3; super-block 1 (at 1152 in the group); sub-block 5.
  const auto& blk = reinterpret_cast<const BlockQ4_K*>(m.gguf.data() + 11 * m.row_bytes)[1];
  const std::uint8_t* sup = m.packed.data() + 8 * m.row_bytes + 1152;
  std::uint16_t d;
  std::memcpy(&d, sup + 2 * 3, 2);
  EXPECT_EQ(d, blk.d);
  std::memcpy(&d, sup + 16 + 2 * 3, 2);
  EXPECT_EQ(d, blk.dmin);
  const int sc5 = (blk.scales[9] & 0xF) | ((blk.scales[1] >> 6) << 4);
  const int mn5 = (blk.scales[9] >> 4) | ((blk.scales[5] >> 6) << 4);
  const int e = 5 * 8 + 3;             // the scale's byte
  const int mi = (5 / 2) * 16 + 3 * 2 + 1;  // the min's number: pair 2, row 3, odd; >= 32: high nibble of mi - 32
  EXPECT_EQ(sup[32 + e] & 63, sc5);
  EXPECT_EQ(((sup[32 + mi] >> 6) << 4) | (sup[96 + mi - 32] >> 4), mn5);
  // Value 6 of sub-block 3 = high nibble of qs[32 * 1 + 6]: pair 1, chunk 1, byte 2 of lane 3.
  EXPECT_EQ(sup[128 + 256 * 1 + 32 * 1 + 4 * 3 + 2], blk.qs[32 + 6]);
}

TEST(PackedWeightsTest, OnlyQ8_0AndQ4KWithWholeGroupsCanBePacked) {
  std::vector<std::uint8_t> data(144 * 16);
  EXPECT_TRUE(can_pack_rows8(WeightView{GgmlType::kQ8_0, data.data(), 16, 32, 34}));
  EXPECT_TRUE(can_pack_rows8(WeightView{GgmlType::kQ4_K, data.data(), 16, 256, 144}));
  EXPECT_FALSE(can_pack_rows8(WeightView{GgmlType::kQ4_K, data.data(), 4, 256, 144}));
  EXPECT_FALSE(can_pack_rows8(WeightView{GgmlType::kQ6_K, data.data(), 8, 256, 210}));
  EXPECT_FALSE(can_pack_rows8(WeightView{GgmlType::kQ8_0, data.data(), 12, 32, 34}));
  EXPECT_FALSE(can_pack_rows8(WeightView{GgmlType::kQ4_0, data.data(), 16, 32, 18}));
  EXPECT_FALSE(can_pack_rows8(WeightView{GgmlType::kQ8_0, data.data(), 16, 32, 34, WeightLayout::kRows8}));
}

// The kRows8 kernels against the exact-integer formula in float64:
// y = sum_b dw_b * dx_b * isum_b, with the activations quantized as the
// kernels quantize them; |err| <= 1e-5 * sum_b |dw_b * dx_b * isum_b|.
// The exact-integer formula of the kRows8 kernels in float64, with the
// activations quantized as the kernels quantize them. Q8_0: y = sum_b dw_b *
// dx_b * isum_b. Q4_K: y = sum_s d_s * dx_s * sum_sb sc * dot_sb - dmin_s * dx_s
// * sum_sb mn * (sum of the sub-block's 32 q). bound: the sum of |terms|.
void integer_formula(const PackedMatrix& m, const detail::QuantizedActs& acts, std::int64_t n, std::vector<double>* ref,
                     std::vector<double>* bound) {
  ref->assign(n * m.rows, 0.0);
  bound->assign(n * m.rows, 0.0);
  for (std::int64_t t = 0; t < n; ++t) {
    const std::int8_t* xq = acts.q + t * acts.q_stride;
    for (std::int64_t r = 0; r < m.rows; ++r) {
      const std::uint8_t* row = m.gguf.data() + r * m.row_bytes;
      auto add = [&](double v) {
        (*ref)[t * m.rows + r] += v;
        (*bound)[t * m.rows + r] += std::fabs(v);
      };
      if (m.type == GgmlType::kQ8_0) {
        const auto* blk = reinterpret_cast<const BlockQ8_0*>(row);
        for (std::int64_t b = 0; b < acts.nb; ++b) {
          std::int64_t isum = 0;
          for (int k = 0; k < 32; ++k) isum += blk[b].qs[k] * xq[32 * b + k];
          add(double(fp16_to_fp32(blk[b].d)) * acts.d[t * acts.nb + b] * double(isum));
        }
        continue;
      }
      const auto* blk = reinterpret_cast<const BlockQ4_K*>(row);
      for (std::int64_t s = 0; s < acts.nb / 8; ++s) {
        const std::uint8_t* q = blk[s].scales;
        std::int64_t isum = 0, mins = 0;
        for (int sb = 0; sb < 8; ++sb) {
          const int sc = sb < 4 ? q[sb] & 63 : (q[sb + 4] & 0xF) | ((q[sb - 4] >> 6) << 4);
          const int mn = sb < 4 ? q[sb + 4] & 63 : (q[sb + 4] >> 4) | ((q[sb] >> 6) << 4);
          std::int64_t dot = 0, xsum = 0;
          for (int i = 0; i < 32; ++i) {
            const int v = (blk[s].qs[32 * (sb / 2) + i] >> (4 * (sb % 2))) & 0xF;
            const int x = xq[256 * s + 32 * sb + i];
            dot += v * x;
            xsum += x;
          }
          isum += sc * dot;
          mins += mn * xsum;
        }
        const double dx = acts.d[t * (acts.nb / 8) + s];
        add(double(fp16_to_fp32(blk[s].d)) * dx * double(isum));
        add(-double(fp16_to_fp32(blk[s].dmin)) * dx * double(mins));
      }
    }
  }
}

TEST(PackedWeightsTest, MatchesTheIntegerFormulaAtEveryIsaLevel) {
  ThreadPool pool1(1), pool2(2);
  std::uint32_t seed = 10;
  for (GgmlType type : {GgmlType::kQ8_0, GgmlType::kQ4_K}) {
    const std::vector<std::int64_t> col_set =
        type == GgmlType::kQ8_0 ? std::vector<std::int64_t>{32, 96, 224, 512} : std::vector<std::int64_t>{256, 768};
    for (std::int64_t cols : col_set) {
      for (std::int64_t rows : {8, 24, 136}) {
        const PackedMatrix m = make_matrix(rows, cols, seed++, type);
        for (std::int64_t n : {1, 2, 3, 4, 7, 130}) {
          const std::vector<float> x = make_acts(n, cols, seed++);
          std::vector<std::uint8_t> scratch(detail::quantized_acts_bytes(n, cols));
          const detail::QuantizedActs acts =
              detail::layout_quantized_acts(scratch.data(), n, cols, detail::takes_k_format(type));
          detail::quantize_acts(x.data(), cols, 0, n, acts);
          std::vector<double> ref, bound;
          integer_formula(m, acts, n, &ref, &bound);
          for (ThreadPool* pool : {&pool1, &pool2}) {
            for (Isa isa : supported_isas(detect_cpu_features())) {
              KernelContext ctx(pool, isa);
              ctx.amx_bf16 = false;
              std::vector<float> y(n * rows, NAN);
              matmul(m.packed_view(), x.data(), n, y.data(), ctx);
              for (std::int64_t i = 0; i < n * rows; ++i) {
                ASSERT_LE(std::fabs(y[i] - ref[i]), 1e-5 * bound[i] + 1e-30)
                    << type_name(type) << " rows=" << rows << " cols=" << cols << " n=" << n
                    << " isa=" << isa_name(isa) << " threads=" << pool->num_threads() << " token " << i / rows
                    << " row " << i % rows;
              }
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
TEST(PackedWeightsTest, BitwiseTheSameAcrossIsaLevelsBatchesAndThreads) {
  const CpuFeatures cpu = detect_cpu_features();
  for (Isa isa : all_isas()) {
    if (!isa_supported(isa, cpu)) {
      std::printf("[ SKIPPED  ] ISA level %s: not supported by this CPU\n", std::string(isa_name(isa)).c_str());
    }
  }
  ThreadPool pool1(1), pool2(2);
  // Q8_0 at 800 columns: 25 blocks, a run of 1 after 6 of 4, and an odd block after the
  // AMX tiles' pairs of blocks (the avx512amx level: 64 and 131 tokens run its tiles).
  for (auto [type, cols] : {std::pair{GgmlType::kQ8_0, 64}, std::pair{GgmlType::kQ8_0, 768},
                            std::pair{GgmlType::kQ8_0, 800}, std::pair{GgmlType::kQ4_K, 256},
                            std::pair{GgmlType::kQ4_K, 768}}) {
    const std::int64_t rows = 136;  // 17 groups: remainders of every group tile
    const PackedMatrix m = make_matrix(rows, cols, 77, type);
    const std::int64_t n = 131;
    const std::vector<float> x = make_acts(n, cols, 78);
    std::vector<float> alone(n * rows);
    KernelContext base(&pool1, Isa::kAvx2);
    base.amx_bf16 = false;
    for (std::int64_t t = 0; t < n; ++t) matmul(m.packed_view(), x.data() + t * cols, 1, alone.data() + t * rows, base);
    for (Isa isa : supported_isas(cpu)) {
      for (ThreadPool* pool : {&pool1, &pool2}) {
        KernelContext ctx(pool, isa);
        ctx.amx_bf16 = false;  // the int8 levels' bits (matmul_amx_bf16_test.cc: the bf16 tiles)
        for (std::int64_t k : {1, 2, 3, 4, 5, 6, 13, 14, 15, 16, 64, 110, 131}) {
          // One token: also every count of weight streams (17 groups: 2 x 8 + 1, 4 x 4 + 1);
          // 1-4 tokens (the GEMV) and 5-15 (Q8_0's streaming wide tile where the GEMV
          // prefetches; 16: the blocked or AMX tiles): also every prefetch distance,
          // none to past the matrix; 5 or more: both Q4_K tiles of the zmm level (1 x 7 and
          // 2 x 3; the odd group's narrow tile and token remainders of either), each with and
          // (where the CPU has GFNI) without its GFNI form; 64 or more: Q8_0's and Q4_K's tokens
          // in lanes on the zmm level (chunks of 96 tokens: 110 ends in a register of 14, 131 of
          // 3; Q4_K's 17 groups: 8 pairs and one group alone, or split over two threads).
          const std::vector<std::int32_t> counts = k == 1 ? std::vector<std::int32_t>{0, 2, 4} : std::vector{0};
          const std::vector<std::int32_t> distances = k <= 15 ? std::vector{0, 64, 1024, 65536} : std::vector{0};
          struct Tiles {
            std::int32_t q4k_pairs;
            bool q4k_gfni, q8_lanes, q4k_lanes;
          };
          std::vector<Tiles> tiles{{1, false, false, false}};
          if (k >= 5) tiles.push_back({2, false, false, false});
          if (k >= 5 && cpu.gfni) tiles.insert(tiles.end(), {{1, true, false, false}, {2, true, false, false}});
          if (k >= 32) tiles.push_back({1, false, true, true});
          for (std::int32_t streams : counts) {
            for (std::int32_t prefetch : distances) {
              for (const Tiles& tile : tiles) {
                ctx.gemv_streams = streams;
                ctx.gemv_prefetch = prefetch;
                ctx.q4k_tile_pairs = tile.q4k_pairs;
                ctx.q4k_gfni = tile.q4k_gfni;
                ctx.q8_lanes = tile.q8_lanes;
                ctx.q4k_lanes = tile.q4k_lanes;
                for (std::int64_t first : {std::int64_t{0}, n - k}) {
                  std::vector<float> y(k * rows, NAN);
                  matmul(m.packed_view(), x.data() + first * cols, k, y.data(), ctx);
                  ASSERT_EQ(std::memcmp(y.data(), alone.data() + first * rows, y.size() * 4), 0)
                      << type_name(type) << " cols=" << cols << " tokens " << first << ".." << first + k
                      << " isa=" << isa_name(isa) << " threads=" << pool->num_threads()
                      << " gemv_streams=" << streams << " gemv_prefetch=" << prefetch
                      << " q4k_tile_pairs=" << tile.q4k_pairs << " q4k_gfni=" << tile.q4k_gfni
                      << " q8_lanes=" << tile.q8_lanes << " q4k_lanes=" << tile.q4k_lanes;
                }
              }
            }
          }
        }
      }
    }
  }
}

TEST(PackedWeightsDeathTest, Rows8NeedsQ8_0OrQ4KAndWholeGroups) {
  ThreadPool pool(1);
  KernelContext ctx(&pool);
  std::vector<std::uint8_t> data(34 * 16);
  std::vector<float> x(32), y(16);
  EXPECT_DEATH(matmul(WeightView{GgmlType::kQ8_0, data.data(), 12, 32, 34, WeightLayout::kRows8}, x.data(), 1,
                      y.data(), ctx),
               "kRows8 layout needs q8_0 or q4_K with rows % 8 == 0, not q8_0 with 12 rows");
  EXPECT_DEATH(matmul(WeightView{GgmlType::kQ4_0, data.data(), 16, 32, 18, WeightLayout::kRows8}, x.data(), 1,
                      y.data(), ctx),
               "kRows8 layout needs q8_0 or q4_K with rows % 8 == 0, not q4_0");
  ctx.gemv_streams = 3;
  EXPECT_DEATH(matmul(WeightView{GgmlType::kQ8_0, data.data(), 16, 32, 34, WeightLayout::kRows8}, x.data(), 1,
                      y.data(), ctx),
               "gemv_streams must be 0, 2 or 4, not 3");
  ctx.gemv_streams = 0;
  ctx.q4k_tile_pairs = 3;
  EXPECT_DEATH(matmul(WeightView{GgmlType::kQ8_0, data.data(), 16, 32, 34, WeightLayout::kRows8}, x.data(), 1,
                      y.data(), ctx),
               "q4k_tile_pairs must be 1 or 2, not 3");
  ctx.q4k_tile_pairs = 1;
  if (!detect_cpu_features().gfni) {
    ctx.q4k_gfni = true;
    EXPECT_DEATH(matmul(WeightView{GgmlType::kQ8_0, data.data(), 16, 32, 34, WeightLayout::kRows8}, x.data(), 1,
                        y.data(), ctx),
                 "q4k_gfni is set on a CPU without GFNI");
  }
}

}  // namespace
}  // namespace ecoserve::kernels
