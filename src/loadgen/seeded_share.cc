#include "loadgen/seeded_share.h"

#include <algorithm>
#include <cmath>
#include <utility>

namespace ecoserve::loadgen {
namespace {

// splitmix64's finalizer (Steele, Lea, Flood 2014).
std::uint64_t mix(std::uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

}  // namespace

Status validate_share(double fraction, std::string_view flag) {
  if (!(fraction >= 0.0 && fraction <= 1.0))  // NaN fails too
    return invalid_argument_error("{} must be in [0, 1], got {}", flag, fraction);
  return ok_status();
}

std::size_t share_count(std::size_t n, double fraction) {
  if (!(fraction > 0.0)) return 0;
  if (fraction >= 1.0) return n;
  double k = std::floor(fraction * static_cast<double>(n) + 0.5);
  return std::min(n, static_cast<std::size_t>(k));
}

std::vector<bool> choose_seeded_share(std::size_t n, double fraction, std::uint64_t seed, std::uint64_t stream) {
  std::vector<bool> chosen(n, false);
  const std::size_t k = share_count(n, fraction);
  if (k == 0) return chosen;
  const std::uint64_t base = mix(mix(seed) ^ mix(stream + 0x51ed27aa3c4b8d1fULL));
  std::vector<std::pair<std::uint64_t, std::size_t>> keys(n);
  for (std::size_t i = 0; i < n; ++i) keys[i] = {mix(base ^ mix(static_cast<std::uint64_t>(i))), i};
  std::nth_element(keys.begin(), keys.begin() + static_cast<std::ptrdiff_t>(k - 1), keys.end());
  for (std::size_t j = 0; j < k; ++j) chosen[keys[j].second] = true;
  return chosen;
}

}  // namespace ecoserve::loadgen
