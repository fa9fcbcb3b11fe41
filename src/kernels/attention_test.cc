#include "kernels/attention.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "base/fp16.h"
#include "kernels/attention_rows.h"

namespace ecoserve::kernels {
namespace {

// Plain double-precision causal attention of one query against keys/values [0, n).
std::vector<double> reference(const float* q, const std::vector<std::vector<float>>& k,
                              const std::vector<std::vector<float>>& v, int n, int hd, float scale) {
  std::vector<double> s(n), out(hd, 0.0);
  double mx = -1e300, sum = 0;
  for (int j = 0; j < n; ++j) {
    double dotv = 0;
    for (int i = 0; i < hd; ++i) dotv += static_cast<double>(q[i]) * k[j][i];
    s[j] = dotv * scale;
    mx = std::max(mx, s[j]);
  }
  for (int j = 0; j < n; ++j) sum += (s[j] = std::exp(s[j] - mx));
  for (int j = 0; j < n; ++j) {
    for (int i = 0; i < hd; ++i) out[i] += s[j] / sum * v[j][i];
  }
  return out;
}

class AttentionTest : public ::testing::TestWithParam<int> {};

TEST_P(AttentionTest, ChunkAndOneAgreeWithReferenceThroughScatteredBlocks) {
  const int n_head = 4, n_head_kv = 2, hd = GetParam(), block = 5, start = 13, n_q = 150;
  const int n_ctx = start + n_q, kv_dim = n_head_kv * hd, q_dim = n_head * hd;
  const int n_blocks = (n_ctx + block - 1) / block;
  std::mt19937 rng(7);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  // Blocks in reverse physical order, with one unused block in between each.
  std::vector<BlockId> table;
  for (int b = 0; b < n_blocks; ++b) table.push_back(BlockId(2 * (n_blocks - 1 - b) + 1));
  const int phys = 2 * n_blocks + 1;
  std::vector<float> kc(static_cast<size_t>(phys) * block * kv_dim, NAN), vc(kc.size(), NAN);
  std::vector<std::vector<std::vector<float>>> K(n_head_kv), V(n_head_kv);  // [kvh][pos][i]
  for (int p = 0; p < n_ctx; ++p) {
    const size_t slot = (static_cast<size_t>(table[p / block].value) * block + p % block) * kv_dim;
    for (int h = 0; h < n_head_kv; ++h) {
      std::vector<float> kr(hd), vr(hd);
      for (int i = 0; i < hd; ++i) {
        kc[slot + h * hd + i] = kr[i] = nd(rng);
        vc[slot + h * hd + i] = vr[i] = nd(rng);
      }
      K[h].push_back(kr);
      V[h].push_back(vr);
    }
  }
  std::vector<float> q(static_cast<size_t>(n_q) * q_dim);
  for (auto& x : q) x = nd(rng);
  const PagedKvView kv{kc.data(), vc.data(), kv_dim, block, table};
  const AttentionDims dims{n_head, n_head_kv, hd, 1.0f / std::sqrt(static_cast<float>(hd))};
  AttentionScratch scratch;
  std::vector<float> chunk_out(q.size(), 0.0f), one_out(hd);
  for (int kvh = 0; kvh < n_head_kv; ++kvh) {
    attend_chunk(q.data(), q_dim, n_q, start, kvh, kv, dims, chunk_out.data(), q_dim, scratch);
  }
  for (int t = 0; t < n_q; t += 7) {
    for (int h = 0; h < n_head; ++h) {
      const float* qh = q.data() + static_cast<size_t>(t) * q_dim + h * hd;
      const int kvh = h / (n_head / n_head_kv);
      auto ref = reference(qh, K[kvh], V[kvh], start + t + 1, hd, dims.scale);
      attend_one(qh, kvh, start + t + 1, kv, dims, one_out.data(), scratch);
      for (int i = 0; i < hd; ++i) {
        EXPECT_NEAR(one_out[i], ref[i], 1e-5) << "one t=" << t << " h=" << h << " i=" << i;
        EXPECT_NEAR(chunk_out[static_cast<size_t>(t) * q_dim + h * hd + i], ref[i], 1e-5)
            << "chunk t=" << t << " h=" << h << " i=" << i;
      }
    }
  }
}

// An fp16 cache gives bitwise the output of a float32 cache holding the same
// (fp16-rounded) values: the kernels widen fp16 exactly and then do the same
// float arithmetic. Both kernels, scattered blocks.
TEST_P(AttentionTest, F16CacheEqualsF32CacheOfTheRoundedValues) {
  const int n_head = 4, n_head_kv = 2, hd = GetParam(), block = 3, n_ctx = 41, kv_dim = n_head_kv * hd;
  const int q_dim = n_head * hd, n_blocks = (n_ctx + block - 1) / block;
  std::vector<BlockId> table;
  for (int b = 0; b < n_blocks; ++b) table.push_back(BlockId((b * 7) % n_blocks));
  std::mt19937 rng(11);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  const size_t n = static_cast<size_t>(n_blocks) * block * kv_dim;
  std::vector<float> k32(n), v32(n);
  std::vector<uint16_t> k16(n), v16(n);
  for (size_t i = 0; i < n; ++i) {
    k16[i] = fp32_to_fp16(nd(rng));
    v16[i] = fp32_to_fp16(nd(rng));
    k32[i] = fp16_to_fp32(k16[i]);
    v32[i] = fp16_to_fp32(v16[i]);
  }
  std::vector<float> q(static_cast<size_t>(n_ctx) * q_dim);
  for (auto& x : q) x = nd(rng);
  const PagedKvView kv32{k32.data(), v32.data(), kv_dim, block, table, false};
  const PagedKvView kv16{k16.data(), v16.data(), kv_dim, block, table, true};
  const AttentionDims dims{n_head, n_head_kv, hd, 1.0f / std::sqrt(static_cast<float>(hd))};
  AttentionScratch scratch;
  std::vector<float> a(hd), b(hd);
  for (int t : {0, 5, 40}) {
    for (int h = 0; h < n_head; ++h) {
      const float* qh = q.data() + static_cast<size_t>(t) * q_dim + h * hd;
      attend_one(qh, h / 2, t + 1, kv32, dims, a.data(), scratch);
      attend_one(qh, h / 2, t + 1, kv16, dims, b.data(), scratch);
      ASSERT_EQ(a, b) << "one t=" << t << " h=" << h;
    }
  }
  std::vector<float> ca(q.size()), cb(q.size());
  for (int kvh = 0; kvh < n_head_kv; ++kvh) {
    attend_chunk(q.data(), q_dim, n_ctx, 0, kvh, kv32, dims, ca.data(), q_dim, scratch);
    attend_chunk(q.data(), q_dim, n_ctx, 0, kvh, kv16, dims, cb.data(), q_dim, scratch);
  }
  EXPECT_EQ(ca, cb);
}

// The fused chunk kernel (head_dim a multiple of 16) computes each query row from its
// own query and positions only: a prompt attended in one chunk or in several (any
// starts, tiles cut in different places, GQA groups of 8 and MHA), at every ISA level
// this CPU has, gives the AVX2 build's bits for the whole prompt, and those agree with
// the reference.
TEST_P(AttentionTest, ChunkRowsDoNotDependOnHowThePromptIsChunked) {
  const int hd = GetParam();
  if (hd % 16 != 0) GTEST_SKIP() << "head_dim " << hd << " takes the OpenBLAS path, whose rounding depends on the tile";
  for (const auto& [n_head, n_head_kv] : {std::pair{8, 1}, std::pair{3, 3}, std::pair{16, 2}}) {
    const int block = 7, n_ctx = 203, kv_dim = n_head_kv * hd, q_dim = n_head * hd;
    const int n_blocks = (n_ctx + block - 1) / block;
    std::vector<BlockId> table;
    for (int b = 0; b < n_blocks; ++b) table.push_back(BlockId((b * 5) % n_blocks));
    std::mt19937 rng(static_cast<unsigned>(19 + n_head));
    std::normal_distribution<float> nd(0.0f, 1.0f);
    std::vector<float> kc(static_cast<size_t>(n_blocks) * block * kv_dim), vc(kc.size());
    for (auto& x : kc) x = nd(rng);
    for (auto& x : vc) x = nd(rng);
    std::vector<float> q(static_cast<size_t>(n_ctx) * q_dim);
    for (auto& x : q) x = 2.0f * nd(rng);
    const PagedKvView kv{kc.data(), vc.data(), kv_dim, block, table};
    AttentionDims dims{n_head, n_head_kv, hd, 1.0f / std::sqrt(static_cast<float>(hd))};
    dims.isa = Isa::kAvx2;
    AttentionScratch scratch;
    std::vector<float> whole(q.size(), NAN);
    for (int kvh = 0; kvh < n_head_kv; ++kvh) {
      attend_chunk(q.data(), q_dim, n_ctx, 0, kvh, kv, dims, whole.data(), q_dim, scratch);
    }
    for (Isa isa : supported_isas(detect_cpu_features())) {
      AttentionDims d = dims;
      d.isa = isa;
      for (const std::vector<int>& cuts : {std::vector<int>{203}, std::vector<int>{1, 64, 203},
                                           std::vector<int>{37, 101, 190, 203}}) {
        std::vector<float> parts(q.size(), NAN);
        int start = 0;
        for (int end : cuts) {
          for (int kvh = 0; kvh < n_head_kv; ++kvh) {
            attend_chunk(q.data() + static_cast<size_t>(start) * q_dim, q_dim, end - start, start, kvh, kv, d,
                         parts.data() + static_cast<size_t>(start) * q_dim, q_dim, scratch);
          }
          start = end;
        }
        for (size_t i = 0; i < q.size(); ++i) {
          ASSERT_EQ(parts[i], whole[i]) << isa_name(isa) << ", heads " << n_head << "/" << n_head_kv << ", "
                                        << cuts.size() << " chunks, token " << i / q_dim << " element " << i % q_dim;
        }
      }
    }
    // And the reference, for a few tokens of every head.
    for (int t : {0, 63, 64, 130, 202}) {
      for (int h = 0; h < n_head; ++h) {
        const int kvh = h / (n_head / n_head_kv);
        std::vector<std::vector<float>> K, V;
        for (int p = 0; p <= t; ++p) {
          const size_t slot = (static_cast<size_t>(table[p / block].value) * block + p % block) * kv_dim + kvh * hd;
          K.emplace_back(kc.data() + slot, kc.data() + slot + hd);
          V.emplace_back(vc.data() + slot, vc.data() + slot + hd);
        }
        const float* qh = q.data() + static_cast<size_t>(t) * q_dim + h * hd;
        const std::vector<double> ref = reference(qh, K, V, t + 1, hd, dims.scale);
        for (int i = 0; i < hd; ++i) {
          ASSERT_NEAR(whole[static_cast<size_t>(t) * q_dim + h * hd + i], ref[i], 1e-5)
              << "heads " << n_head << "/" << n_head_kv << " t=" << t << " h=" << h << " i=" << i;
        }
      }
    }
  }
}

// 16, 32, 64, 128 take the fused kernel; 24 the OpenBLAS one.
INSTANTIATE_TEST_SUITE_P(HeadDims, AttentionTest, ::testing::Values(16, 24, 32, 64, 128));

// A paged cache of n_ctx positions in scattered blocks (reverse order, gaps), random
// K/V in float32 or fp16, with the values the kernels see kept for the reference.
struct TestCache {
  int n_head_kv, hd, block;
  bool f16;
  std::vector<BlockId> table;
  std::vector<float> k32, v32;
  std::vector<uint16_t> k16, v16;
  std::vector<std::vector<std::vector<float>>> K, V;  // [kvh][pos][i], as the kernels read them

  // v_scale: V's values are N(0, v_scale) (clamped to +-65000, within fp16's range).
  TestCache(int n_ctx, int n_head_kv_, int hd_, int block_, bool f16_, uint32_t seed, float v_scale = 1.0f)
      : n_head_kv(n_head_kv_), hd(hd_), block(block_), f16(f16_), K(n_head_kv_), V(n_head_kv_) {
    const int kv_dim = n_head_kv * hd, n_blocks = (n_ctx + block - 1) / block;
    for (int b = 0; b < n_blocks; ++b) table.push_back(BlockId(2 * (n_blocks - 1 - b) + 1));
    const size_t n = static_cast<size_t>(2 * n_blocks + 1) * block * kv_dim;
    k32.assign(n, NAN);
    v32.assign(n, NAN);
    k16.assign(n, 0x7e00);  // fp16 NaN in unused slots
    v16.assign(n, 0x7e00);
    std::mt19937 rng(seed);
    std::normal_distribution<float> nd(0.0f, 1.0f);
    for (int p = 0; p < n_ctx; ++p) {
      const size_t slot = (static_cast<size_t>(table[p / block].value) * block + p % block) * kv_dim;
      for (int h = 0; h < n_head_kv; ++h) {
        std::vector<float> kr(hd), vr(hd);
        for (int i = 0; i < hd; ++i) {
          const size_t e = slot + h * hd + i;
          kr[i] = nd(rng);
          vr[i] = std::clamp(nd(rng) * v_scale, -65000.0f, 65000.0f);
          if (f16) {
            k16[e] = fp32_to_fp16(kr[i]);
            v16[e] = fp32_to_fp16(vr[i]);
            kr[i] = fp16_to_fp32(k16[e]);
            vr[i] = fp16_to_fp32(v16[e]);
          } else {
            k32[e] = kr[i];
            v32[e] = vr[i];
          }
        }
        K[h].push_back(std::move(kr));
        V[h].push_back(std::move(vr));
      }
    }
  }
  PagedKvView view() const {
    if (f16) return PagedKvView{k16.data(), v16.data(), int64_t{n_head_kv} * hd, block, table, true};
    return PagedKvView{k32.data(), v32.data(), int64_t{n_head_kv} * hd, block, table, false};
  }
};

// Tolerance of the decode kernels against the double reference: float accumulation
// over up to a few thousand positions of O(1) values (outputs are O(1) averages).
constexpr double kDecodeTol = 2e-5;

void expect_near_ref(const float* out, const std::vector<double>& ref, const std::string& what) {
  for (size_t i = 0; i < ref.size(); ++i) {
    ASSERT_NEAR(out[i], ref[i], kDecodeTol * std::max(1.0, std::abs(ref[i]))) << what << " i=" << i;
  }
}

struct DecodeCase {
  int n_head, n_head_kv, hd;
  bool f16;
};

class DecodeTest : public ::testing::TestWithParam<DecodeCase> {};

AttentionDims dims_of(const DecodeCase& c) {
  return AttentionDims{c.n_head, c.n_head_kv, c.hd, 1.0f / std::sqrt(static_cast<float>(c.hd))};
}

// One token's [n_head][head_dim] query row, N(0, 1) values.
std::vector<float> random_query(const DecodeCase& c, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<float> q(static_cast<size_t>(c.n_head) * c.hd);
  for (auto& x : q) x = nd(rng);
  return q;
}

// The register width profile --roofline counts decode attention at: 512 bits only
// where pick_rows_fn_zmm has one (the zmm level, g 2/4/8, head_dim 64/128) and the cache
// runs it (fp16 always, f32 for g 8 always and for g 2/4 where f32_wide).
TEST(DecodeAttentionWidthTest, FiveTwelveBitsOnlyWhereTheZmmKernelRuns) {
  for (bool wide : {false, true}) {
    EXPECT_EQ(decode_attention_vector_bits(Isa::kAvx512VnniZmm, 128, 4, true, wide), 512);
    EXPECT_EQ(decode_attention_vector_bits(Isa::kAvx512VnniZmm, 64, 8, true, wide), 512);
    EXPECT_EQ(decode_attention_vector_bits(Isa::kAvx512VnniZmm, 64, 2, true, wide), 512);
    EXPECT_EQ(decode_attention_vector_bits(Isa::kAvx512VnniZmm, 64, 1, true, wide), 256) << "MHA";
    EXPECT_EQ(decode_attention_vector_bits(Isa::kAvx512VnniZmm, 64, 1, false, wide), 256) << "MHA, f32";
    EXPECT_EQ(decode_attention_vector_bits(Isa::kAvx512VnniZmm, 96, 4, true, wide), 256) << "head_dim 96";
    EXPECT_EQ(decode_attention_vector_bits(Isa::kAvx512Vnni, 128, 4, true, wide), 256);
    EXPECT_EQ(decode_attention_vector_bits(Isa::kAvx512Vnni, 128, 4, false, wide), 256);
    EXPECT_EQ(decode_attention_vector_bits(Isa::kAvx2, 128, 4, true, wide), 256);
  }
  EXPECT_EQ(decode_attention_vector_bits(Isa::kAvx512VnniZmm, 128, 4, false, false), 256) << "f32 cache";
  EXPECT_EQ(decode_attention_vector_bits(Isa::kAvx512VnniZmm, 128, 4, false, true), 512) << "f32 cache, wide";
  EXPECT_EQ(decode_attention_vector_bits(Isa::kAvx512VnniZmm, 64, 8, false, true), 512) << "f32 cache, wide";
  EXPECT_EQ(decode_attention_vector_bits(Isa::kAvx512VnniZmm, 64, 8, false, false), 512) << "f32 cache, group 8";
  EXPECT_EQ(decode_attention_vector_bits(Isa::kAvx512VnniZmm, 128, 8, false, false), 512) << "f32 cache, group 8";
  EXPECT_EQ(decode_attention_vector_bits(Isa::kAvx512VnniZmm, 64, 2, false, false), 256) << "f32 cache, group 2";
  EXPECT_EQ(decode_attention_vector_bits(Isa::kAvx512Vnni, 64, 8, false, false), 256) << "f32 cache, group 8";
}

// The 512-bit decode kernel's two prefetch orders (AttentionDims::row_prefetch) read the
// same rows in the same order and differ only in their prefetches: the same bits, for
// every group it runs (2, 4, 8), both head sizes and both cache types, over a context
// that is not a multiple of the tile (1000 positions: a last partial tile of 8).
TEST(DecodeAttentionPrefetchTest, BothOrdersGiveTheSameBits) {
  const std::vector<Isa> isas = supported_isas(detect_cpu_features());
  if (std::find(isas.begin(), isas.end(), Isa::kAvx512VnniZmm) == isas.end()) {
    GTEST_SKIP() << "this CPU has no avx512vnni-zmm level: the 512-bit decode kernel does not run here";
  }
  for (const DecodeCase c : {DecodeCase{8, 4, 64, true}, DecodeCase{16, 4, 128, false}, DecodeCase{16, 2, 64, true},
                             DecodeCase{16, 2, 128, false}}) {
    const TestCache cache(1000, c.n_head_kv, c.hd, 16, c.f16, 7);
    const std::vector<float> q = random_query(c, 8);
    std::vector<float> out[2];
    for (bool rows : {false, true}) {
      AttentionDims d = dims_of(c);
      d.isa = Isa::kAvx512VnniZmm;
      d.f32_wide = true;
      d.row_prefetch = rows;
      AttentionScratch scratch;
      out[rows].assign(q.size(), NAN);
      attend_token(q.data(), 1000, cache.view(), d, out[rows].data(), scratch);
    }
    ASSERT_EQ(decode_attention_vector_bits(Isa::kAvx512VnniZmm, c.hd, c.n_head / c.n_head_kv, c.f16, true), 512);
    EXPECT_EQ(std::memcmp(out[0].data(), out[1].data(), q.size() * sizeof(float)), 0)
        << c.n_head << "/" << c.n_head_kv << " d " << c.hd << (c.f16 ? " fp16" : " f32");
    for (float x : out[0]) ASSERT_TRUE(std::isfinite(x));
  }
}

// attend_range's page leaders (detail::page_jumps): one call per page the rows reach by a
// jump, none for the pages of a run of consecutive blocks, whatever the row size.
TEST(DecodeAttentionPrefetchTest, PageLeadersOnlyWhereTheRowsJump) {
  std::vector<uintptr_t> got;
  auto note = [&](uintptr_t x) { got.push_back(x); };
  uintptr_t last = 0;
  for (uintptr_t a = 0x10000; a < 0x10000 + 32 * 512; a += 512) detail::page_jumps(a, 512, &last, note);
  EXPECT_EQ(got, std::vector<uintptr_t>{0x10000}) << "32 rows of 512 bytes over 4 consecutive pages";
  EXPECT_EQ(last, uintptr_t{0x13});
  got.clear();
  detail::page_jumps(0x80200, 512, &last, note);   // a scattered block, mid-page
  detail::page_jumps(0x80400, 512, &last, note);   // the same page
  detail::page_jumps(0x7f000, 512, &last, note);   // the page before: a jump too
  detail::page_jumps(0x100800, 4096, &last, note);  // two pages, the second follows the first
  detail::page_jumps(0x101800, 4096, &last, note);  // its second page follows too
  detail::page_jumps(0x102800, 64, &last, note);    // the same page as the last byte read
  EXPECT_EQ(got, (std::vector<uintptr_t>{0x80200, 0x7f000, 0x100800}));
  EXPECT_EQ(last, uintptr_t{0x102});
}

// ECOSERVE_ATTENTION_ROW_PREFETCH sets the order (0 or 1; row order, 1, where unset);
// anything else is an error naming the variable.
TEST(DecodeAttentionPrefetchTest, EnvironmentSetsTheOrder) {
  EXPECT_TRUE(attention_row_prefetch_for(detect_cpu_features()));
  ASSERT_EQ(unsetenv("ECOSERVE_ATTENTION_ROW_PREFETCH"), 0);
  EXPECT_TRUE(*attention_row_prefetch_from_env());
  EXPECT_EQ(AttentionDims{}.row_prefetch, default_attention_row_prefetch());
  for (auto [text, rows] : {std::pair{"0", false}, {"1", true}}) {
    ASSERT_EQ(setenv("ECOSERVE_ATTENTION_ROW_PREFETCH", text, 1), 0);
    EXPECT_EQ(*attention_row_prefetch_from_env(), rows) << text;
  }
  for (const char* text : {"2", "rows", ""}) {
    ASSERT_EQ(setenv("ECOSERVE_ATTENTION_ROW_PREFETCH", text, 1), 0);
    const StatusOr<bool> bad = attention_row_prefetch_from_env();
    ASSERT_FALSE(bad.ok()) << text;
    EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(bad.status().message(), "ECOSERVE_ATTENTION_ROW_PREFETCH: '" + std::string(text) + "' is not 0 or 1");
  }
  ASSERT_EQ(unsetenv("ECOSERVE_ATTENTION_ROW_PREFETCH"), 0);
}

// f32 caches take the 512-bit kernel on Intel CPUs unless ECOSERVE_ATTENTION_F32_WIDE
// says otherwise (0 or 1; anything else is an error naming the variable).
TEST(DecodeAttentionWidthTest, VendorAndEnvironmentSetTheF32Width) {
  const CpuFeatures cpu = detect_cpu_features();
  CpuFeatures intel = cpu, amd = cpu;
  intel.vendor = "GenuineIntel";
  amd.vendor = "AuthenticAMD";
  EXPECT_TRUE(attention_f32_wide_for(intel));
  EXPECT_FALSE(attention_f32_wide_for(amd));
  ASSERT_EQ(unsetenv("ECOSERVE_ATTENTION_F32_WIDE"), 0);
  EXPECT_EQ(*attention_f32_wide_from_env(), attention_f32_wide_for(cpu));
  EXPECT_EQ(default_attention_f32_wide(), *attention_f32_wide_from_env());
  EXPECT_EQ(AttentionDims{}.f32_wide, default_attention_f32_wide());
  for (auto [text, wide] : {std::pair{"0", false}, {"1", true}}) {
    ASSERT_EQ(setenv("ECOSERVE_ATTENTION_F32_WIDE", text, 1), 0);
    EXPECT_EQ(*attention_f32_wide_from_env(), wide) << text;
  }
  for (const char* text : {"2", "-1", "yes", "", "1 "}) {
    ASSERT_EQ(setenv("ECOSERVE_ATTENTION_F32_WIDE", text, 1), 0);
    const StatusOr<bool> bad = attention_f32_wide_from_env();
    ASSERT_FALSE(bad.ok()) << text;
    EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(bad.status().message(), "ECOSERVE_ATTENTION_F32_WIDE: '" + std::string(text) + "' is not 0 or 1");
  }
  ASSERT_EQ(unsetenv("ECOSERVE_ATTENTION_F32_WIDE"), 0);
}

TEST(PrefillAttentionWidthTest, FiveTwelveBitsOnTheZmmLevelsFusedKernel) {
  EXPECT_EQ(prefill_attention_vector_bits(Isa::kAvx512VnniZmm, 128), 512);
  EXPECT_EQ(prefill_attention_vector_bits(Isa::kAvx512VnniZmm, 64), 512);
  EXPECT_EQ(prefill_attention_vector_bits(Isa::kAvx512VnniZmm, 16), 512);
  EXPECT_EQ(prefill_attention_vector_bits(Isa::kAvx512VnniZmm, 24), 256) << "head_dim 24: OpenBLAS";
  EXPECT_EQ(prefill_attention_vector_bits(Isa::kAvx512Vnni, 128), 256);
  EXPECT_EQ(prefill_attention_vector_bits(Isa::kAvxVnni, 128), 256);
  EXPECT_EQ(prefill_attention_vector_bits(Isa::kAvx2, 64), 256);
}

// attend_token (all heads in one pass), attend_group (one KV head's g heads) and
// attend_one agree with the double reference at 1 token, contexts that are not
// multiples of the block size, and a long one; and attend_group equals per-head
// attend_one within the same tolerance.
TEST_P(DecodeTest, TokenGroupAndOneAgreeWithReference) {
  const DecodeCase c = GetParam();
  const int g = c.n_head / c.n_head_kv, block = 16;
  const TestCache cache(5000, c.n_head_kv, c.hd, block, c.f16, 3);
  const PagedKvView kv = cache.view();
  const AttentionDims dims = dims_of(c);
  const std::vector<float> q = random_query(c, 5);
  AttentionScratch scratch;
  std::vector<float> tok(q.size()), grp(q.size()), one(q.size());
  for (int n_ctx : {1, 7, 16, 33, 200, 5000}) {
    attend_token(q.data(), n_ctx, kv, dims, tok.data(), scratch);
    for (int kvh = 0; kvh < c.n_head_kv; ++kvh) {
      attend_group(q.data() + kvh * g * c.hd, kvh, n_ctx, kv, dims, grp.data() + kvh * g * c.hd, scratch);
    }
    for (int h = 0; h < c.n_head; ++h) {
      const float* qh = q.data() + h * c.hd;
      attend_one(qh, h / g, n_ctx, kv, dims, one.data() + h * c.hd, scratch);
      const auto ref = reference(qh, cache.K[h / g], cache.V[h / g], n_ctx, c.hd, dims.scale);
      const std::string at = "n_ctx=" + std::to_string(n_ctx) + " h=" + std::to_string(h);
      expect_near_ref(tok.data() + h * c.hd, ref, "token " + at);
      expect_near_ref(grp.data() + h * c.hd, ref, "group " + at);
      expect_near_ref(one.data() + h * c.hd, ref, "one " + at);
      for (int i = 0; i < c.hd; ++i) {
        ASSERT_NEAR(grp[h * c.hd + i], one[h * c.hd + i], kDecodeTol) << "group vs one " << at << " i=" << i;
      }
    }
  }
}

// attend_kv_heads over a split of the KV heads writes exactly attend_token's rows for
// its heads (the same arithmetic per head: bitwise), and no other rows.
TEST_P(DecodeTest, KvHeadRangesEqualTheWholeToken) {
  const DecodeCase c = GetParam();
  const int n_ctx = 77;
  const TestCache cache(n_ctx, c.n_head_kv, c.hd, 16, c.f16, 11);
  const PagedKvView kv = cache.view();
  const AttentionDims dims = dims_of(c);
  const std::vector<float> q = random_query(c, 12);
  AttentionScratch scratch;
  std::vector<float> whole(q.size());
  attend_token(q.data(), n_ctx, kv, dims, whole.data(), scratch);
  const int g = c.n_head / c.n_head_kv;
  for (int cut = 1; cut < c.n_head_kv; ++cut) {
    std::vector<float> split(q.size(), 12345.0f);
    attend_kv_heads(q.data(), 0, cut, n_ctx, kv, dims, split.data(), scratch);
    for (size_t i = static_cast<size_t>(cut) * g * c.hd; i < split.size(); ++i) {
      ASSERT_EQ(split[i], 12345.0f) << "cut " << cut << " wrote past its heads at " << i;
    }
    attend_kv_heads(q.data(), cut, c.n_head_kv, n_ctx, kv, dims, split.data(), scratch);
    for (size_t i = 0; i < whole.size(); ++i) ASSERT_EQ(split[i], whole[i]) << "cut " << cut << " i=" << i;
  }
}

// Every kernel path this CPU runs (the decode kernel's AVX2 build, its AVX-512VL build
// at avx512vnni and its 512-bit one at avx512vnni-zmm), with f32_wide off and on, gives
// the AVX2 build's bits for whole tokens, head ranges and position ranges, except the
// 512-bit kernel's score pass (fp16 caches, f32 ones of group 8, and the others' with
// f32_wide; GQA groups 2-8),
// which sums each score in its own order: its results agree with the AVX2 build's
// within kDecodeTol (relative, 1 at least) and its head ranges give its own whole
// token's bits.
TEST_P(DecodeTest, EveryIsaLevelGivesTheSameBits) {
  const DecodeCase c = GetParam();
  const TestCache cache(1234, c.n_head_kv, c.hd, 16, c.f16, 31);
  const PagedKvView kv = cache.view();
  AttentionDims base = dims_of(c);
  base.isa = Isa::kAvx2;
  const std::vector<float> q = random_query(c, 32);
  AttentionScratch scratch;
  std::vector<std::pair<Isa, bool>> levels_and_widths;
  for (Isa isa : supported_isas(detect_cpu_features())) {
    for (bool wide : {false, true}) levels_and_widths.emplace_back(isa, wide);
  }
  const int g = c.n_head / c.n_head_kv;
  auto near = [](const std::vector<float>& got, const std::vector<float>& want, const std::string& what) {
    ASSERT_EQ(got.size(), want.size()) << what;
    for (size_t i = 0; i < got.size(); ++i) {
      ASSERT_NEAR(got[i], want[i], kDecodeTol * std::max(1.0, std::abs(static_cast<double>(want[i]))))
          << what << " i=" << i;
    }
  };
  for (int n_ctx : {1, 7, 40, 200, 1234}) {
    std::vector<float> want(q.size()), head_want(q.size());
    attend_token(q.data(), n_ctx, kv, base, want.data(), scratch);
    attend_kv_heads(q.data(), 0, 1, n_ctx, kv, base, head_want.data(), scratch);
    AttentionPartial part_want;
    attend_partial(q.data(), n_ctx / 3, n_ctx, kv, base, part_want, scratch);
    for (auto [isa, wide] : levels_and_widths) {
      AttentionDims d = base;
      d.isa = isa;
      d.f32_wide = wide;
      std::vector<float> got(q.size()), head_got(q.size());
      attend_token(q.data(), n_ctx, kv, d, got.data(), scratch);
      attend_kv_heads(q.data(), 0, 1, n_ctx, kv, d, head_got.data(), scratch);
      AttentionPartial part_got;
      attend_partial(q.data(), n_ctx / 3, n_ctx, kv, d, part_got, scratch);
      const std::string what =
          std::string(isa_name(isa)) + (wide ? " f32_wide" : "") + " at " + std::to_string(n_ctx);
      const size_t first_head = static_cast<size_t>(g) * c.hd;
      ASSERT_TRUE(std::equal(head_got.begin(), head_got.begin() + first_head, got.begin())) << what;
      if (isa >= Isa::kAvx512VnniZmm && (c.f16 || wide || g == 8) && g >= 2 && c.hd % 16 == 0) {
        near(got, want, what);
        near(part_got.max, part_want.max, what + " max");
        near(part_got.sum, part_want.sum, what + " sum");
        near(part_got.acc, part_want.acc, what + " acc");
        continue;
      }
      ASSERT_EQ(got, want) << what;
      ASSERT_TRUE(std::equal(head_got.begin(), head_got.begin() + first_head, head_want.begin())) << what;
      ASSERT_EQ(part_got.max, part_want.max) << what;
      ASSERT_EQ(part_got.sum, part_want.sum) << what;
      ASSERT_EQ(part_got.acc, part_want.acc) << what;
    }
  }
}

// A call streaming into the next token's context (DecodeStream: the next context
// shorter or longer than the prefetch distance, this call's start prefetched or not)
// gives attend_token's bits without one; the next context's rows are only prefetched.
TEST_P(DecodeTest, StreamingIntoTheNextTokenChangesNoBit) {
  const DecodeCase c = GetParam();
  const TestCache cache(77, c.n_head_kv, c.hd, 16, c.f16, 21);
  const PagedKvView kv = cache.view();
  // Another sequence in the same cache: the blocks in the other order.
  const std::vector<BlockId> other(cache.table.rbegin(), cache.table.rend());
  PagedKvView next = kv;
  next.block_table = other;
  const AttentionDims dims = dims_of(c);
  const std::vector<float> q = random_query(c, 22);
  AttentionScratch scratch;
  for (int n_ctx : {1, 7, 40, 77}) {
    std::vector<float> plain(q.size());
    attend_token(q.data(), n_ctx, kv, dims, plain.data(), scratch);
    for (int next_n_ctx : {1, 5, 33, 77}) {
      for (bool started : {false, true}) {
        DecodeStream stream;
        stream.next = &next;
        stream.next_n_ctx = next_n_ctx;
        stream.started = started;
        std::vector<float> streamed(q.size(), 12345.0f);
        attend_token(q.data(), n_ctx, kv, dims, streamed.data(), scratch, stream);
        for (size_t i = 0; i < plain.size(); ++i) {
          ASSERT_EQ(streamed[i], plain[i]) << "n_ctx " << n_ctx << " next " << next_n_ctx << " i=" << i;
        }
      }
    }
  }
}

// attend_partial over split ranges (including an empty one), merged, equals
// attend_token over the whole context.
TEST_P(DecodeTest, PartialsMergeToTheWholeContext) {
  const DecodeCase c = GetParam();
  const int n_ctx = 1234;
  const TestCache cache(n_ctx, c.n_head_kv, c.hd, 16, c.f16, 9);
  const PagedKvView kv = cache.view();
  const AttentionDims dims = dims_of(c);
  const std::vector<float> q = random_query(c, 6);
  AttentionScratch scratch;
  std::vector<float> whole(q.size()), merged(q.size());
  attend_token(q.data(), n_ctx, kv, dims, whole.data(), scratch);
  const int cuts[] = {0, 1, 500, 500, 1234};  // [0,1) [1,500) [500,500) [500,1234)
  std::vector<AttentionPartial> parts(4);
  for (int i = 0; i < 4; ++i) attend_partial(q.data(), cuts[i], cuts[i + 1], kv, dims, parts[i], scratch);
  merge_partials(parts, c.n_head, c.hd, merged.data());
  for (size_t i = 0; i < whole.size(); ++i) ASSERT_NEAR(merged[i], whole[i], kDecodeTol) << "i=" << i;
}

// sum_j w_j |v_j[i]| for one query (w: the exact softmax weights): the scale of the
// half-precision value pass's rounding (AttentionDims::fp16_math).
std::vector<double> weighted_abs(const float* q, const std::vector<std::vector<float>>& k,
                                 const std::vector<std::vector<float>>& v, int n, int hd, float scale) {
  std::vector<std::vector<float>> av(v);
  for (auto& row : av) {
    for (float& x : row) x = std::abs(x);
  }
  return reference(q, k, av, n, hd, scale);
}

// The largest sum_i |q_i K_ji| * scale over the positions j: the scale of a half-precision
// score's rounding.
double max_abs_score(const float* q, const std::vector<std::vector<float>>& k, int n, int hd, float scale) {
  double worst = 0;
  for (int j = 0; j < n; ++j) {
    double s = 0;
    for (int i = 0; i < hd; ++i) s += std::abs(static_cast<double>(q[i]) * k[j][i]);
    worst = std::max(worst, s * scale);
  }
  return worst;
}

// With fp16_math, fp16 caches on the 512-bit kernel (where the CPU has AVX512-FP16) are
// within the value pass's bound of the double reference: weights and products rounded to
// fp16, tiles summed in two chains of up to 8 and the chains added in fp16
// (attention_rows_fp16_impl.h: 10 * 2^-11 of sum w |v|, plus 2^-21 (1 + |v|) per position
// for weights or products below fp16's normal range; the worst measured 2.7 * 2^-11); V of
// s.d. 1, and of s.d. 16000 (values near fp16's largest: the chains must not overflow).
// Groups of 8 and 4 also score in half precision (scores_lanes_half): each score within D =
// (C + 3) 2^-11 sum_i |q_i K_i| scale (C = hd / 8 for groups of 8, hd / 16 for groups of 4:
// the terms of an fp16 chain; + hd 2^-24 below fp16's normal range), which
// moves each weight by a factor within e^(+-2D), so the output by at most (e^(2D) - 1) sum
// w |v| more. The mean error must also stay under 2^-7 of the mean sum w |v| (a query laid
// out wrongly gives errors of the order of the values). Every other case (f32 caches, other
// shapes, no AVX512-FP16) gives the float value pass's bits exactly.
TEST_P(DecodeTest, HalfPrecisionValuePassWithinItsBound) {
  const DecodeCase c = GetParam();
  const int g = c.n_head / c.n_head_kv;
  const bool applies = decode_attention_fp16_math(true, Isa::kAvx512VnniZmm, c.f16) &&
                       decode_attention_vector_bits(Isa::kAvx512VnniZmm, c.hd, g, c.f16, true) == 512;
  const std::vector<float> q = random_query(c, 61);
  AttentionScratch scratch;
  for (float v_scale : {1.0f, 16000.0f}) {
    for (int n_ctx : {1, 7, 40, 700}) {
      const TestCache cache(n_ctx, c.n_head_kv, c.hd, 16, c.f16, 29 + n_ctx, v_scale);
      AttentionDims d = dims_of(c);
      d.isa = Isa::kAvx512VnniZmm;
      if (!isa_supported(d.isa, detect_cpu_features())) GTEST_SKIP() << "no avx512vnni-zmm level on this CPU";
      std::vector<float> plain(q.size()), half(q.size());
      attend_token(q.data(), n_ctx, cache.view(), d, plain.data(), scratch);
      d.fp16_math = true;
      attend_token(q.data(), n_ctx, cache.view(), d, half.data(), scratch);
      if (!applies) {
        ASSERT_EQ(half, plain) << "n_ctx " << n_ctx;
        continue;
      }
      bool differs = false;
      double vmax = 0, err_sum = 0, mag_sum = 0;
      for (const auto& head : cache.V) {
        for (const auto& row : head) {
          for (float x : row) vmax = std::max(vmax, static_cast<double>(std::abs(x)));
        }
      }
      for (int h = 0; h < c.n_head; ++h) {
        const float* qh = q.data() + static_cast<size_t>(h) * c.hd;
        const int kvh = h / g;
        const std::vector<double> ref = reference(qh, cache.K[kvh], cache.V[kvh], n_ctx, c.hd, d.scale);
        const std::vector<double> mag = weighted_abs(qh, cache.K[kvh], cache.V[kvh], n_ctx, c.hd, d.scale);
        const int chain = g == 8 ? c.hd / 8 : g == 4 ? c.hd / 16 : -1;  // terms per fp16 chain
        const double score_err =
            chain < 0 ? 0.0
                      : (chain + 3) * std::ldexp(max_abs_score(qh, cache.K[kvh], n_ctx, c.hd, d.scale), -11) +
                            c.hd * std::ldexp(d.scale, -24);
        for (int i = 0; i < c.hd; ++i) {
          const size_t e = static_cast<size_t>(h) * c.hd + i;
          const double bound = 10 * std::ldexp(mag[i], -11) + n_ctx * std::ldexp(1.0 + vmax, -21) +
                               kDecodeTol * mag[i] + std::expm1(2 * score_err) * mag[i];
          ASSERT_LE(std::abs(half[e] - ref[i]), bound)
              << "v_scale " << v_scale << " n_ctx " << n_ctx << " h " << h << " i " << i;
          differs = differs || half[e] != plain[e];
          err_sum += std::abs(half[e] - ref[i]);
          mag_sum += mag[i];
        }
      }
      EXPECT_LT(err_sum, std::ldexp(mag_sum, -7)) << "v_scale " << v_scale << " n_ctx " << n_ctx;
      if (n_ctx == 700) {
        EXPECT_TRUE(differs) << "v_scale " << v_scale << ": the half-precision pass did not run";
      }
    }
  }
}

// dims_of(c) on the avx512vnni-zmm level with fp16_math, for the half-precision tests of fp16
// caches: the reason to skip, or empty where they run.
std::string half_precision_dims(const DecodeCase& c, AttentionDims& d) {
  if (!c.f16) return "f32 cache";
  d = dims_of(c);
  d.isa = Isa::kAvx512VnniZmm;
  d.fp16_math = true;
  return isa_supported(d.isa, detect_cpu_features()) ? "" : "no avx512vnni-zmm level on this CPU";
}

// The half-precision value pass cannot overflow: every weight 1 (a zero query, all scores
// equal) and every V value 65000 (fp16 64992, near its largest) give 64992 in every output
// lane, not infinity (tiles of 16 and a partial one). With the weights rounded as p / 8
// (and its chains added in fp16) a tile's sum would reach 2 * 64992: this test failed so.
TEST_P(DecodeTest, HalfPrecisionValuePassDoesNotOverflow) {
  const DecodeCase c = GetParam();
  AttentionDims d;
  if (const std::string skip = half_precision_dims(c, d); !skip.empty()) GTEST_SKIP() << skip;
  for (int n_ctx : {16, 33, 200}) {
    TestCache cache(n_ctx, c.n_head_kv, c.hd, 16, true, 5 + n_ctx);
    const size_t block_elems = static_cast<size_t>(cache.block) * c.n_head_kv * c.hd;
    for (BlockId b : cache.table) {
      const size_t first = static_cast<size_t>(b.value) * block_elems;
      std::fill_n(cache.v16.begin() + first, block_elems, fp32_to_fp16(65000.0f));
    }
    const std::vector<float> q(static_cast<size_t>(c.n_head) * c.hd, 0.0f);
    std::vector<float> out(q.size());
    AttentionScratch scratch;
    attend_token(q.data(), n_ctx, cache.view(), d, out.data(), scratch);
    for (size_t i = 0; i < out.size(); ++i) ASSERT_EQ(out[i], 64992.0f) << "n_ctx " << n_ctx << " i " << i;
  }
}

// A half-precision score beyond fp16's range (products of 2^15-sized K values and queries
// near 8 after the scale) is scored again in float: position 5's K row is 30000 in every
// dimension and the query 64 in every dimension, so its score (1.5e7 for head_dim 64) takes
// all the weight and the output is position 5's V row (within the value pass's rounding), not NaN.
TEST_P(DecodeTest, HalfPrecisionScoresBeyondFp16RangeAreScoredInFloat) {
  const DecodeCase c = GetParam();
  AttentionDims d;
  if (const std::string skip = half_precision_dims(c, d); !skip.empty()) GTEST_SKIP() << skip;
  for (int n_ctx : {6, 40, 300}) {
    TestCache cache(n_ctx, c.n_head_kv, c.hd, 16, true, 7 + n_ctx);
    const size_t row = static_cast<size_t>(c.n_head_kv) * c.hd;
    const size_t slot = (static_cast<size_t>(cache.table[5 / 16].value) * 16 + 5 % 16) * row;
    std::fill_n(cache.k16.begin() + slot, row, fp32_to_fp16(30000.0f));
    const std::vector<float> q(static_cast<size_t>(c.n_head) * c.hd, 64.0f);
    std::vector<float> out(q.size());
    AttentionScratch scratch;
    attend_token(q.data(), n_ctx, cache.view(), d, out.data(), scratch);
    const int g = c.n_head / c.n_head_kv;
    for (int h = 0; h < c.n_head; ++h) {
      for (int i = 0; i < c.hd; ++i) {
        const float v = cache.V[h / g][5][i];
        ASSERT_NEAR(out[static_cast<size_t>(h) * c.hd + i], v, std::ldexp(std::abs(v), -9) + 1e-6)
            << "n_ctx " << n_ctx << " h " << h << " i " << i;
      }
    }
  }
}

// The gate: fp16 caches, the avx512vnni-zmm level or above, a CPU with AVX512-FP16; and
// ECOSERVE_ATTENTION_FP16_MATH (unset: on; 0 or 1, anything else an error).
TEST(DecodeAttentionFp16MathTest, GateAndEnvironment) {
  const bool cpu = detect_cpu_features().avx512_fp16;
  EXPECT_EQ(decode_attention_fp16_math(true, Isa::kAvx512VnniZmm, true), cpu);
  EXPECT_EQ(decode_attention_fp16_math(true, Isa::kAvx512Amx, true), cpu);
  EXPECT_FALSE(decode_attention_fp16_math(false, Isa::kAvx512VnniZmm, true));
  EXPECT_FALSE(decode_attention_fp16_math(true, Isa::kAvx512VnniZmm, false)) << "f32 cache";
  EXPECT_FALSE(decode_attention_fp16_math(true, Isa::kAvx512Vnni, true)) << "256-bit level";
  EXPECT_FALSE(AttentionDims{}.fp16_math) << "callers opt in (the engine from its options)";
  ASSERT_EQ(unsetenv("ECOSERVE_ATTENTION_FP16_MATH"), 0);
  EXPECT_TRUE(*attention_fp16_math_from_env());
  for (auto [text, on] : {std::pair{"0", false}, {"1", true}}) {
    ASSERT_EQ(setenv("ECOSERVE_ATTENTION_FP16_MATH", text, 1), 0);
    EXPECT_EQ(*attention_fp16_math_from_env(), on) << text;
  }
  ASSERT_EQ(setenv("ECOSERVE_ATTENTION_FP16_MATH", "half", 1), 0);
  const StatusOr<bool> bad = attention_fp16_math_from_env();
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(bad.status().message(), "ECOSERVE_ATTENTION_FP16_MATH: 'half' is not 0 or 1");
  ASSERT_EQ(unsetenv("ECOSERVE_ATTENTION_FP16_MATH"), 0);
}

// GQA group sizes 1, 2, 4 and 8 (the position-major kernel's; 3: the per-KV-head one),
// head counts that fill whole 8-head vectors and ones that end in a masked partial one
// (12 and 4 heads), head_dim 64 and 128, float32 and fp16 caches.
INSTANTIATE_TEST_SUITE_P(Shapes, DecodeTest,
                         ::testing::Values(DecodeCase{8, 8, 64, false}, DecodeCase{8, 8, 128, true},
                                           DecodeCase{16, 4, 64, true}, DecodeCase{16, 4, 128, false},
                                           DecodeCase{16, 4, 128, true}, DecodeCase{8, 1, 64, false},
                                           DecodeCase{6, 2, 64, false}, DecodeCase{4, 2, 24, true},
                                           DecodeCase{16, 8, 64, false}, DecodeCase{16, 8, 128, true},
                                           DecodeCase{12, 12, 64, true}, DecodeCase{12, 6, 128, false},
                                           DecodeCase{4, 4, 64, false}, DecodeCase{12, 3, 64, true},
                                           DecodeCase{16, 2, 128, true}, DecodeCase{8, 4, 64, true},
                                           DecodeCase{32, 4, 64, true}, DecodeCase{16, 2, 128, false}),
                         [](const ::testing::TestParamInfo<DecodeCase>& i) {
                           const DecodeCase& c = i.param;
                           return "h" + std::to_string(c.n_head) + "_kv" + std::to_string(c.n_head_kv) + "_d" +
                                  std::to_string(c.hd) + (c.f16 ? "_f16" : "_f32");
                         });

}  // namespace
}  // namespace ecoserve::kernels
