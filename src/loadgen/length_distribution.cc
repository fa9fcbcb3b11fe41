#include "loadgen/length_distribution.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <vector>

namespace ecoserve::loadgen {
namespace {

std::vector<std::string_view> split(std::string_view s, char sep) {
  std::vector<std::string_view> out;
  std::size_t start = 0;
  while (true) {
    auto pos = s.find(sep, start);
    out.push_back(s.substr(start, pos == std::string_view::npos ? std::string_view::npos : pos - start));
    if (pos == std::string_view::npos) break;
    start = pos + 1;
  }
  return out;
}

StatusOr<double> parse_number(std::string_view s, std::string_view spec) {
  double v = 0;
  std::string str(s);
  char* end = nullptr;
  v = std::strtod(str.c_str(), &end);
  if (str.empty() || end != str.c_str() + str.size() || !std::isfinite(v))
    return invalid_argument_error("length distribution '{}': '{}' is not a number", spec, s);
  return v;
}

}  // namespace

LengthDistribution LengthDistribution::constant(std::int64_t n) {
  LengthDistribution d;
  d.kind_ = Kind::kConstant;
  d.a_ = static_cast<double>(n);
  d.name_ = std::to_string(n);
  return d;
}

LengthDistribution LengthDistribution::lognormal(double mean, double median) {
  LengthDistribution d;
  d.kind_ = Kind::kLognormal;
  d.a_ = std::log(median);
  d.b_ = std::sqrt(2.0 * std::log(mean / median));
  d.name_ = fmt::format("lognormal(mean {}, median {})", mean, median);
  return d;
}

LengthDistribution LengthDistribution::reflected_lognormal(double max, double mean, double median) {
  LengthDistribution d = lognormal(max - mean, max - median);
  d.kind_ = Kind::kReflectedLognormal;
  d.max_ = max;
  d.name_ = fmt::format("{} - lognormal (mean {}, median {})", max, mean, median);
  return d;
}

StatusOr<LengthDistribution> LengthDistribution::parse(std::string_view spec, LengthSide side) {
  bool in = side == LengthSide::kInput;
  LengthDistribution d;
  if (spec == "alpaca") {
    d = in ? lognormal(20.63, 17) : lognormal(163.80, 119);
  } else if (spec == "sharegpt") {
    d = in ? lognormal(343.76, 148) : lognormal(237.20, 152);
  } else if (spec == "longbench") {
    d = in ? reflected_lognormal(3236.5, 2686.89, 2736.5) : lognormal(101.78, 19);
  } else {
    auto parts = split(spec, ':');
    if (parts.size() == 1) {
      ECO_ASSIGN_OR_RETURN(double v, parse_number(parts[0], spec));
      if (v < 1 || v != std::floor(v))
        return invalid_argument_error("length '{}' must be a positive integer", spec);
      return constant(static_cast<std::int64_t>(v));
    }
    if (parts[0] == "uniform" && parts.size() == 3) {
      ECO_ASSIGN_OR_RETURN(double lo, parse_number(parts[1], spec));
      ECO_ASSIGN_OR_RETURN(double hi, parse_number(parts[2], spec));
      if (lo < 1 || hi < lo)
        return invalid_argument_error("length distribution '{}': need 1 <= LO <= HI", spec);
      d.kind_ = Kind::kUniform;
      d.a_ = std::floor(lo);
      d.b_ = std::floor(hi);
      d.name_ = std::string(spec);
      return d;
    }
    if (parts[0] == "lognormal" && parts.size() == 3) {
      ECO_ASSIGN_OR_RETURN(double mean, parse_number(parts[1], spec));
      ECO_ASSIGN_OR_RETURN(double median, parse_number(parts[2], spec));
      if (median <= 0 || mean < median)
        return invalid_argument_error("length distribution '{}': need MEAN >= MEDIAN > 0", spec);
      return lognormal(mean, median);
    }
    return invalid_argument_error(
        "bad length distribution '{}': expected N, uniform:LO:HI, lognormal:MEAN:MEDIAN, "
        "alpaca, sharegpt or longbench", spec);
  }
  d.name_ = fmt::format("{} ({})", spec, d.name_);
  return d;
}

double LengthDistribution::sample_real(std::mt19937_64& rng) const {
  switch (kind_) {
    case Kind::kConstant: return a_;
    case Kind::kUniform: {
      std::uniform_int_distribution<std::int64_t> u(static_cast<std::int64_t>(a_),
                                                    static_cast<std::int64_t>(b_));
      return static_cast<double>(u(rng));
    }
    case Kind::kLognormal: {
      std::normal_distribution<double> n(0.0, 1.0);
      return std::exp(a_ + b_ * n(rng));
    }
    case Kind::kReflectedLognormal: {
      std::normal_distribution<double> n(0.0, 1.0);
      return max_ - std::exp(a_ + b_ * n(rng));
    }
  }
  return a_;
}

std::int64_t LengthDistribution::sample(std::mt19937_64& rng, double scale) const {
  double v = std::round(sample_real(rng) * scale);
  return std::max<std::int64_t>(1, static_cast<std::int64_t>(v));
}

double LengthDistribution::mean() const {
  switch (kind_) {
    case Kind::kConstant: return a_;
    case Kind::kUniform: return (a_ + b_) / 2.0;
    case Kind::kLognormal: return std::exp(a_ + b_ * b_ / 2.0);
    case Kind::kReflectedLognormal: return max_ - std::exp(a_ + b_ * b_ / 2.0);
  }
  return a_;
}

std::string LengthDistribution::describe() const { return name_; }

}  // namespace ecoserve::loadgen
