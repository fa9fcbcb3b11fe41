// Sampler: penalties, greedy / temperature / top-k / top-p / min-p, counter-based draws.
//
// Cost per row of V logits, all O(V) with no full sort: greedy is one argmax pass;
// top-k (k <= 256) is one scan with a k-heap plus k exps; otherwise V exps (AVX2,
// 8 at a time), and top-p finds its nucleus boundary with a histogram of the
// weights' float bits, sorting only the one bucket the boundary falls in. The
// log-softmax normaliser is computed only when logprobs are asked for (or comes
// for free at temperature 1).
#include "engine/sampler.h"

#include "kernels/ops.h"

#include <immintrin.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>

namespace ecoserve::engine {
namespace {

constexpr float kGreedyTemperature = 1e-5f;  // temperatures below this mean greedy
constexpr int32_t kMaxTopLogprobs = 20;

uint64_t splitmix64_mix(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// Candidate token with its unnormalised probability weight.
struct Cand {
  float w;
  int32_t id;
};

// Order: larger value first, lower id on ties (makes every selection deterministic).
struct ByWeightDesc {
  bool operator()(const Cand& a, const Cand& b) const {
    return a.w > b.w || (a.w == b.w && a.id < b.id);
  }
};

bool in_vocab(int32_t t, size_t n) { return t >= 0 && static_cast<size_t>(t) < n; }

void apply_penalties(std::span<float> logits, const SamplingParams& p,
                     std::span<const int32_t> prompt_tokens, std::span<const int32_t> output_tokens) {
  const size_t n = logits.size();
  if (p.repetition_penalty != 1.0f && p.repetition_penalty > 0.0f) {
    std::vector<int32_t> seen;
    seen.reserve(prompt_tokens.size() + output_tokens.size());
    for (int32_t t : prompt_tokens)
      if (in_vocab(t, n)) seen.push_back(t);
    for (int32_t t : output_tokens)
      if (in_vocab(t, n)) seen.push_back(t);
    std::sort(seen.begin(), seen.end());
    seen.erase(std::unique(seen.begin(), seen.end()), seen.end());
    const float r = p.repetition_penalty;
    for (int32_t t : seen) {
      float& l = logits[t];
      l = l > 0.0f ? l / r : l * r;
    }
  }
  if ((p.frequency_penalty != 0.0f || p.presence_penalty != 0.0f) && !output_tokens.empty()) {
    std::vector<int32_t> out;
    out.reserve(output_tokens.size());
    for (int32_t t : output_tokens)
      if (in_vocab(t, n)) out.push_back(t);
    std::sort(out.begin(), out.end());
    for (size_t i = 0; i < out.size();) {
      size_t j = i;
      while (j < out.size() && out[j] == out[i]) ++j;
      float& l = logits[out[i]];
      l -= p.frequency_penalty * static_cast<float>(j - i);
      l -= p.presence_penalty;
      i = j;
    }
  }
}

// Lowest id among the maximal logits (NaN never wins; all NaN gives 0). Two vector passes:
// the largest value (vmaxps keeps its second operand, the running maxima, when the logit is
// NaN), then the first logit equal to it (-0 equals +0, as the scalar > scan treated them).
int32_t argmax(std::span<const float> logits) {
  const float* x = logits.data();
  const size_t n = logits.size();
  constexpr float kNegInf = -std::numeric_limits<float>::infinity();
  __m256 vm = _mm256_set1_ps(kNegInf);
  size_t i = 0;
  for (; i + 8 <= n; i += 8) vm = _mm256_max_ps(_mm256_loadu_ps(x + i), vm);
  alignas(32) float lanes[8];
  _mm256_store_ps(lanes, vm);
  float best = kNegInf;
  for (const float v : lanes) best = v > best ? v : best;
  for (; i < n; ++i) best = x[i] > best ? x[i] : best;
  if (best == kNegInf) {  // every logit is -inf or NaN
    for (i = 0; i < n; ++i)
      if (!std::isnan(x[i])) return static_cast<int32_t>(i);
    return 0;
  }
  const __m256 vb = _mm256_set1_ps(best);
  for (i = 0; i + 8 <= n; i += 8) {
    const int mask = _mm256_movemask_ps(_mm256_cmp_ps(_mm256_loadu_ps(x + i), vb, _CMP_EQ_OQ));
    if (mask != 0) return static_cast<int32_t>(i + std::countr_zero(static_cast<unsigned>(mask)));
  }
  for (; i < n; ++i)
    if (x[i] == best) return static_cast<int32_t>(i);
  return 0;  // not reached: best is one of the logits
}

// The n largest logits, descending, lowest id first on ties.
std::vector<TokenLogprob> top_n(std::span<const float> logits, int32_t n, double lse) {
  std::vector<Cand> best;  // sorted descending, at most n
  best.reserve(static_cast<size_t>(n) + 1);
  const ByWeightDesc cmp;
  for (size_t i = 0; i < logits.size(); ++i) {
    Cand c{logits[i], static_cast<int32_t>(i)};
    if (std::isnan(c.w)) continue;
    if (best.size() == static_cast<size_t>(n) && !cmp(c, best.back())) continue;
    best.insert(std::upper_bound(best.begin(), best.end(), c, cmp), c);
    if (best.size() > static_cast<size_t>(n)) best.pop_back();
  }
  std::vector<TokenLogprob> out;
  out.reserve(best.size());
  for (const Cand& c : best) out.push_back({c.id, static_cast<float>(c.w - lse)});
  return out;
}

// exp(x) for x <= 0 (weights relative to the max logit), relative error ~2e-7;
// 0 for x < -87 (and -inf, NaN). Same math in the scalar and AVX2 versions.
constexpr float kExpLow = -87.0f;
constexpr float kLog2e = 1.44269504088896341f;
constexpr float kLn2Hi = 0.693359375f;
constexpr float kLn2Lo = -2.12194440e-4f;

float exp_nonpos(float x) {
  if (!(x >= kExpLow)) return 0.0f;
  const float n = std::nearbyint(x * kLog2e);
  const float r = x - n * kLn2Hi - n * kLn2Lo;
  float p = 1.0f / 720.0f;
  p = p * r + 1.0f / 120.0f;
  p = p * r + 1.0f / 24.0f;
  p = p * r + 1.0f / 6.0f;
  p = p * r + 0.5f;
  p = p * r + 1.0f;
  p = p * r + 1.0f;
  const uint32_t bits = static_cast<uint32_t>(static_cast<int32_t>(n) + 127) << 23;
  return p * std::bit_cast<float>(bits);
}

// out[i] = exp_nonpos((x[i] - max_v) * inv_t).
void weights_from_logits(const float* x, size_t n, float max_v, float inv_t, float* out) {
  size_t i = 0;
  const __m256 vmax = _mm256_set1_ps(max_v);
  const __m256 vinv = _mm256_set1_ps(inv_t);
  const __m256 vlow = _mm256_set1_ps(kExpLow);
  for (; i + 8 <= n; i += 8) {
    const __m256 v = _mm256_mul_ps(_mm256_sub_ps(_mm256_loadu_ps(x + i), vmax), vinv);
    const __m256 ok = _mm256_cmp_ps(v, vlow, _CMP_GE_OQ);
    const __m256 nf = _mm256_round_ps(_mm256_mul_ps(v, _mm256_set1_ps(kLog2e)),
                                      _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    // Same operation order as exp_nonpos (no FMA contraction) for identical results.
    __m256 r = _mm256_sub_ps(v, _mm256_mul_ps(nf, _mm256_set1_ps(kLn2Hi)));
    r = _mm256_sub_ps(r, _mm256_mul_ps(nf, _mm256_set1_ps(kLn2Lo)));
    __m256 p = _mm256_set1_ps(1.0f / 720.0f);
    p = _mm256_add_ps(_mm256_mul_ps(p, r), _mm256_set1_ps(1.0f / 120.0f));
    p = _mm256_add_ps(_mm256_mul_ps(p, r), _mm256_set1_ps(1.0f / 24.0f));
    p = _mm256_add_ps(_mm256_mul_ps(p, r), _mm256_set1_ps(1.0f / 6.0f));
    p = _mm256_add_ps(_mm256_mul_ps(p, r), _mm256_set1_ps(0.5f));
    p = _mm256_add_ps(_mm256_mul_ps(p, r), _mm256_set1_ps(1.0f));
    p = _mm256_add_ps(_mm256_mul_ps(p, r), _mm256_set1_ps(1.0f));
    // Lanes below kExpLow may hold garbage n; they are masked to 0 below.
    const __m256i ni = _mm256_cvtps_epi32(_mm256_max_ps(nf, _mm256_set1_ps(-126.0f)));
    const __m256 scale =
        _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(ni, _mm256_set1_epi32(127)), 23));
    _mm256_storeu_ps(out + i, _mm256_and_ps(_mm256_mul_ps(p, scale), ok));
  }
  for (; i < n; ++i) out[i] = exp_nonpos((x[i] - max_v) * inv_t);
}

// Largest of x[0, n), ignoring NaN; -inf when empty or all NaN.
float max_of(const float* x, size_t n) {
  __m256 acc = _mm256_set1_ps(-std::numeric_limits<float>::infinity());
  size_t i = 0;
  // _mm256_max_ps returns its second operand when the first is NaN.
  for (; i + 8 <= n; i += 8) acc = _mm256_max_ps(_mm256_loadu_ps(x + i), acc);
  alignas(32) float lanes[8];
  _mm256_store_ps(lanes, acc);
  float m = lanes[0];
  for (int j = 1; j < 8; ++j) m = lanes[j] > m ? lanes[j] : m;
  for (; i < n; ++i) m = x[i] > m ? x[i] : m;
  return m;
}

// Sum of w[0, n) in double with independent accumulators (no serial add chain).
double sum_weights(const float* w, size_t n) {
  __m256d acc0 = _mm256_setzero_pd();
  __m256d acc1 = _mm256_setzero_pd();
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 v = _mm256_loadu_ps(w + i);
    acc0 = _mm256_add_pd(acc0, _mm256_cvtps_pd(_mm256_castps256_ps128(v)));
    acc1 = _mm256_add_pd(acc1, _mm256_cvtps_pd(_mm256_extractf128_ps(v, 1)));
  }
  alignas(32) double lanes[4];
  _mm256_store_pd(lanes, _mm256_add_pd(acc0, acc1));
  double s = (lanes[0] + lanes[1]) + (lanes[2] + lanes[3]);
  for (; i < n; ++i) s += w[i];
  return s;
}

// Index of the draw: the first i whose running sum of w exceeds u * total (blocks
// of 64 are skipped by their sums). Falls back to the last positive weight.
size_t draw_index(const float* w, size_t n, double total, double u) {
  const double target = u * total;
  double cum = 0.0;
  constexpr size_t kBlock = 64;
  for (size_t b = 0; b < n; b += kBlock) {
    const size_t e = std::min(n, b + kBlock);
    const double bs = sum_weights(w + b, e - b);
    if (cum + bs <= target) {
      cum += bs;
      continue;
    }
    for (size_t i = b; i < e; ++i) {
      cum += w[i];
      if (cum > target) return i;
    }
  }
  for (size_t i = n; i-- > 0;)
    if (w[i] > 0.0f) return i;
  return 0;
}

// log(sum(exp(logits))) given their max (finite).
double log_sum_exp(std::span<const float> logits, float max_v) {
  std::vector<float> w(logits.size());
  weights_from_logits(logits.data(), logits.size(), max_v, 1.0f, w.data());
  return static_cast<double>(max_v) + std::log(sum_weights(w.data(), w.size()));
}

// The k largest logits (lowest id first on ties), in any order. One scan with a
// min-heap of the k best so far: later elements have larger ids, so they enter
// only when strictly larger than the worst kept.
std::vector<Cand> top_k_logits(std::span<const float> logits, size_t k) {
  std::vector<Cand> heap;
  heap.reserve(k);
  const ByWeightDesc cmp;  // as a heap comparator: the top is the worst candidate
  size_t i = 0;
  for (; i < logits.size() && heap.size() < k; ++i)
    heap.push_back({logits[i], static_cast<int32_t>(i)});
  std::make_heap(heap.begin(), heap.end(), cmp);
  for (; i < logits.size(); ++i) {
    if (logits[i] > heap.front().w) {
      std::pop_heap(heap.begin(), heap.end(), cmp);
      heap.back() = {logits[i], static_cast<int32_t>(i)};
      std::push_heap(heap.begin(), heap.end(), cmp);
    }
  }
  return heap;
}

// Bucket of a weight in (0, 1] by its float bits (monotone: larger weight, lower
// bucket); 8 buckets per octave; weight 0 falls in the last bucket.
constexpr uint32_t kOneBits = 0x3F800000u;
constexpr int kBucketShift = 20;
constexpr size_t kNumBuckets = (kOneBits >> kBucketShift) + 1;

size_t bucket_of(float w) {
  const uint32_t bits = std::bit_cast<uint32_t>(w);
  return bits >= kOneBits ? 0 : (kOneBits - bits) >> kBucketShift;
}

// The last candidate (in ByWeightDesc order) of the smallest prefix whose weight
// reaches `need`; id -1 when every candidate is needed. ids == nullptr means id = index.
Cand nucleus_boundary(const float* w, const int32_t* ids, size_t n, double need) {
  // Four interleaved histograms: consecutive weights often share a bucket, and one
  // array would make every add wait for the previous one.
  std::vector<double> hist(4 * kNumBuckets, 0.0);
  size_t i = 0;
  for (; i + 4 <= n; i += 4) {
    hist[bucket_of(w[i])] += w[i];
    hist[kNumBuckets + bucket_of(w[i + 1])] += w[i + 1];
    hist[2 * kNumBuckets + bucket_of(w[i + 2])] += w[i + 2];
    hist[3 * kNumBuckets + bucket_of(w[i + 3])] += w[i + 3];
  }
  for (; i < n; ++i) hist[bucket_of(w[i])] += w[i];
  std::vector<double> mass(kNumBuckets);
  for (size_t b = 0; b < kNumBuckets; ++b)
    mass[b] = (hist[b] + hist[kNumBuckets + b]) + (hist[2 * kNumBuckets + b] + hist[3 * kNumBuckets + b]);
  double acc = 0.0;
  size_t b = 0;
  for (; b < kNumBuckets; ++b) {
    if (acc + mass[b] >= need) break;
    acc += mass[b];
  }
  if (b == kNumBuckets) return {0.0f, -1};
  std::vector<Cand> in_bucket;
  for (i = 0; i < n; ++i)
    if (bucket_of(w[i]) == b) in_bucket.push_back({w[i], ids ? ids[i] : static_cast<int32_t>(i)});
  std::sort(in_bucket.begin(), in_bucket.end(), ByWeightDesc{});
  for (const Cand& c : in_bucket) {
    acc += c.w;
    if (acc >= need) return c;
  }
  return in_bucket.back();  // rounding: the whole bucket was needed
}

// Samples with temperature, top-k, top-p and min-p. `logits` are penalised, not scaled.
// Sets *lse_out to the log-sum-exp of the unscaled logits when it comes for free
// (temperature 1, no top-k), else leaves it untouched.
// Candidates are kept in id order and dropped ones get weight 0, so the draw does
// not depend on how the selection steps order their work.
int32_t sample_stochastic(std::span<const float> logits, const SamplingParams& p,
                          double u, double* lse_out) {
  const size_t n = logits.size();
  const float inv_t = 1.0f / p.temperature;
  const float max_v = max_of(logits.data(), n);
  if (!std::isfinite(max_v)) return argmax(logits);

  // Weights exp((l - max) / t) in id order; the largest is 1.
  std::vector<float> w;
  std::vector<int32_t> ids;  // empty: the candidates are the whole vocabulary
  if (p.top_k > 0 && static_cast<size_t>(p.top_k) < n) {
    const size_t k = static_cast<size_t>(p.top_k);
    std::vector<Cand> top;
    if (k <= 256) {
      top = top_k_logits(logits, k);
    } else {
      top.resize(n);
      for (size_t i = 0; i < n; ++i) top[i] = {logits[i], static_cast<int32_t>(i)};
      std::nth_element(top.begin(), top.begin() + (k - 1), top.end(), ByWeightDesc{});
      top.resize(k);
    }
    std::sort(top.begin(), top.end(), [](const Cand& a, const Cand& b) { return a.id < b.id; });
    for (const Cand& c : top) {
      w.push_back(exp_nonpos((c.w - max_v) * inv_t));
      ids.push_back(c.id);
    }
  } else {
    w.resize(n);
    weights_from_logits(logits.data(), n, max_v, inv_t, w.data());
  }
  const size_t m = w.size();
  const int32_t* id_ptr = ids.empty() ? nullptr : ids.data();
  double total = sum_weights(w.data(), m);
  if (p.temperature == 1.0f && ids.empty())
    *lse_out = static_cast<double>(max_v) + std::log(total);

  // top-p keeps the candidates ordered (weight desc, id asc) up to the boundary;
  // min-p those with weight >= min_p (relative to the max weight, 1).
  const Cand boundary = p.top_p < 1.0f
                            ? nucleus_boundary(w.data(), id_ptr, m,
                                               static_cast<double>(std::max(p.top_p, 0.0f)) * total)
                            : Cand{0.0f, -1};
  const float min_w = p.min_p > 0.0f ? p.min_p : 0.0f;
  if (boundary.id >= 0 || min_w > 0.0f) {
    // Kept: ordered no later than the boundary (w > bw, or w == bw and id <= bid), and w >= min_w.
    const float bw = boundary.id >= 0 ? boundary.w : -1.0f;
    const int32_t bid = boundary.id;
    size_t i = 0;
    if (!id_ptr) {  // AVX2: ids are the indices
      const __m256 vbw = _mm256_set1_ps(bw);
      const __m256 vmin = _mm256_set1_ps(min_w);
      const __m256i vbid = _mm256_set1_epi32(bid);
      __m256i idx = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
      for (; i + 8 <= m; i += 8) {
        const __m256 x = _mm256_loadu_ps(w.data() + i);
        const __m256 id_ok = _mm256_castsi256_ps(_mm256_cmpgt_epi32(idx, vbid));  // id > bid
        const __m256 tie = _mm256_andnot_ps(id_ok, _mm256_cmp_ps(x, vbw, _CMP_EQ_OQ));
        __m256 keep = _mm256_or_ps(_mm256_cmp_ps(x, vbw, _CMP_GT_OQ), tie);
        keep = _mm256_and_ps(keep, _mm256_cmp_ps(x, vmin, _CMP_GE_OQ));
        _mm256_storeu_ps(w.data() + i, _mm256_and_ps(x, keep));
        idx = _mm256_add_epi32(idx, _mm256_set1_epi32(8));
      }
    }
    for (; i < m; ++i) {
      const float x = w[i];
      const int32_t id = id_ptr ? id_ptr[i] : static_cast<int32_t>(i);
      const bool keep = (x > bw || (x == bw && id <= bid)) && x >= min_w;
      w[i] = keep ? x : 0.0f;
    }
    total = sum_weights(w.data(), m);
  }
  if (!(total > 0.0)) return argmax(logits);
  const size_t i = draw_index(w.data(), m, total, u);
  return id_ptr ? id_ptr[i] : static_cast<int32_t>(i);
}

}  // namespace

double uniform_from(uint64_t seed, uint64_t index) {
  const uint64_t z = splitmix64_mix(splitmix64_mix(seed) + (index + 1) * 0x9E3779B97F4A7C15ull);
  return static_cast<double>(z >> 11) * 0x1.0p-53;
}

SampleResult sample_token(std::span<float> logits, const SamplingParams& params,
                          std::span<const int32_t> prompt_tokens,
                          std::span<const int32_t> output_tokens, uint64_t seed) {
  SampleResult result;
  if (logits.empty()) return result;
  apply_penalties(logits, params, prompt_tokens, output_tokens);

  const bool want_logprobs = params.logprobs || params.top_logprobs > 0;
  double lse = std::numeric_limits<double>::quiet_NaN();
  const bool greedy = params.temperature < kGreedyTemperature || params.top_k == 1;
  if (greedy) {
    result.token = argmax(logits);
  } else {
    const double u = uniform_from(seed, output_tokens.size());
    result.token = sample_stochastic(logits, params, u, &lse);
  }

  if (want_logprobs) {
    if (std::isnan(lse)) lse = log_sum_exp(logits, max_of(logits.data(), logits.size()));
    result.logprob = static_cast<float>(logits[result.token] - lse);
    const int32_t n = std::min<int32_t>(std::min(params.top_logprobs, kMaxTopLogprobs),
                                        static_cast<int32_t>(logits.size()));
    if (n > 0) result.top_logprobs = top_n(logits, n, lse);
  }

  // The caller sees the logits as sampled: penalised, then scaled by temperature.
  if (params.temperature >= kGreedyTemperature && params.temperature != 1.0f) {
    kernels::scale_inplace(logits.data(), 1.0f / params.temperature,
                           static_cast<int64_t>(logits.size()));
  }
  return result;
}

}  // namespace ecoserve::engine
