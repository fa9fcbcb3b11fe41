#include "kernels/attention.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "base/fp16.h"

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

// 16, 32, 64, 128 take the register-blocked path; 24 the generic one.
INSTANTIATE_TEST_SUITE_P(HeadDims, AttentionTest, ::testing::Values(16, 24, 32, 64, 128));

}  // namespace
}  // namespace ecoserve::kernels
