// LengthDistribution: token lengths for synthetic workloads.
//
// Spec strings (parse()):
//   "128"                       constant
//   "uniform:LO:HI"             integers uniform in [LO, HI]
//   "lognormal:MEAN:MEDIAN"     lognormal with that mean and median (MEAN >= MEDIAN)
//   "alpaca" | "sharegpt" | "longbench"   EcoServe Table 4 presets (input or output side)
// Presets (mean / median):  alpaca in 20.63/17, out 163.80/119; sharegpt in 343.76/148,
// out 237.20/152; longbench in 2686.89/2736.5, out 101.78/19. All are lognormal
// (sigma = sqrt(2 ln(mean/median))) except longbench input, whose mean is below its
// median: it is a reflected lognormal X = 3236.5 - Y, Y lognormal with median 500 and
// mean 549.61, so that X has median 2736.5 and mean 2686.89.
// Samples are rounded, multiplied by the length scale, and clamped to >= 1.
// Value type; sampling takes the caller's RNG (deterministic for a given seed).
#pragma once

#include <cstdint>
#include <random>
#include <string>
#include <string_view>

#include "base/status.h"

namespace ecoserve::loadgen {

enum class LengthSide { kInput, kOutput };

class LengthDistribution {
 public:
  enum class Kind { kConstant, kUniform, kLognormal, kReflectedLognormal };

  static StatusOr<LengthDistribution> parse(std::string_view spec, LengthSide side);
  static LengthDistribution constant(std::int64_t n);
  // Lognormal with the given mean and median (mean >= median > 0).
  static LengthDistribution lognormal(double mean, double median);
  // max - lognormal(median max-median_x, mean max-mean_x): for mean < median.
  static LengthDistribution reflected_lognormal(double max, double mean, double median);

  // Continuous sample (before rounding/scaling), for tests of the shape.
  double sample_real(std::mt19937_64& rng) const;
  // round(sample_real * scale), at least 1.
  std::int64_t sample(std::mt19937_64& rng, double scale = 1.0) const;

  // The distribution's mean (before rounding and scaling; the lognormal presets'
  // documented means, e.g. 343.76 for sharegpt's input).
  double mean() const;
  Kind kind() const { return kind_; }
  std::string describe() const;

 private:
  Kind kind_ = Kind::kConstant;
  double a_ = 1, b_ = 1;   // constant: a; uniform: [a,b]; lognormal: mu, sigma
  double max_ = 0;         // reflected
  std::string name_;
};

}  // namespace ecoserve::loadgen
