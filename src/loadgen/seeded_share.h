// Seeded shares of a workload: which requests belong to a class given as a fraction
// (--high-priority-fraction: the high-priority requests; --long-fraction: the long ones).
//
// choose_seeded_share() picks exactly share_count(n, fraction) = round(fraction x n)
// (halves up) of the indices 0..n-1: those with the smallest keys
// splitmix64(seed, stream, index), ties by index. The choice depends only on
// (n, fraction, seed, stream): not on arrival times, prompts or lengths, nor on the
// standard library's distributions (the same set on every platform). A larger
// fraction chooses a superset of a smaller one's indices; different streams give
// independent choices from one seed. Pure functions.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace ecoserve::loadgen {

// Streams of the shares bench draws (one per class kind).
inline constexpr std::uint64_t kHighPriorityStream = 1;
inline constexpr std::uint64_t kLongRequestStream = 2;

// INVALID_ARGUMENT "<flag> must be in [0, 1], got <fraction>" unless 0 <= fraction <= 1.
Status validate_share(double fraction, std::string_view flag);

// round(fraction x n), halves up; fraction is clamped to [0, 1].
std::size_t share_count(std::size_t n, double fraction);

// chosen[i] is true for the share_count(n, fraction) chosen indices.
std::vector<bool> choose_seeded_share(std::size_t n, double fraction, std::uint64_t seed, std::uint64_t stream);

}  // namespace ecoserve::loadgen
