#include "loadgen/dataset.h"

#include <fstream>
#include <sstream>

#include <gtest/gtest.h>

#include "base/test_data.h"
#include "loadgen/arrival_process.h"
#include "loadgen/length_distribution.h"
#include "loadgen/seeded_share.h"

namespace ecoserve::loadgen {
namespace {

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::size_t count_occurrences(const std::string& hay, const std::string& needle) {
  std::size_t n = 0;
  for (auto p = hay.find(needle); p != std::string::npos; p = hay.find(needle, p + needle.size())) ++n;
  return n;
}

TEST(Dataset, AzureTraceMatchesIndependentCount) {
  const std::string rel = "traces/azure_llm_2023_conv.csv";
  auto path = shared_data_path(rel);
  if (!path) GTEST_SKIP() << missing_data_message(rel);
  // Independent parse: split lines, sum the 2nd and 3rd columns.
  std::istringstream in(slurp(*path));
  std::string line;
  std::getline(in, line);  // header
  std::size_t rows = 0;
  std::int64_t sum_in = 0, sum_out = 0;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    ++rows;
    auto a = line.find(','), b = line.rfind(',');
    sum_in += std::stoll(line.substr(a + 1, b - a - 1));
    sum_out += std::stoll(line.substr(b + 1));
  }
  auto entries = load_azure_trace(*path);
  ASSERT_TRUE(entries.ok()) << entries.status().to_string();
  ASSERT_EQ(entries->size(), rows);
  EXPECT_EQ(rows, 19366u);
  std::int64_t got_in = 0, got_out = 0;
  for (const auto& e : *entries) {
    got_in += e.input_tokens;
    got_out += e.output_tokens;
  }
  EXPECT_EQ(got_in, sum_in);
  EXPECT_EQ(got_out, sum_out);
  // 2023-11-16 18:15:46.6805900 -> 19:14:08.4025270 is 3501.721937 s.
  EXPECT_DOUBLE_EQ(*entries->front().timestamp_s, 0.0);
  EXPECT_NEAR(*entries->back().timestamp_s, 3501.721937, 1e-4);
  for (std::size_t i = 1; i < entries->size(); ++i)
    ASSERT_GE(*(*entries)[i].timestamp_s, *(*entries)[i - 1].timestamp_s) << i;
}

TEST(Dataset, MooncakeTraceMatchesIndependentCount) {
  const std::string rel = "traces/mooncake_synthetic.jsonl";
  auto path = shared_data_path(rel);
  if (!path) GTEST_SKIP() << missing_data_message(rel);
  std::istringstream in(slurp(*path));
  std::string line;
  std::size_t rows = 0, hash_ids = 0;
  std::int64_t sum_in = 0, sum_out = 0, last_ts = 0;
  auto field = [](const std::string& l, const std::string& key) {
    auto p = l.find("\"" + key + "\": ");
    return std::stoll(l.substr(p + key.size() + 4));
  };
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    ++rows;
    sum_in += field(line, "input_length");
    sum_out += field(line, "output_length");
    last_ts = field(line, "timestamp");
    auto open = line.find('['), close = line.find(']');
    if (close > open + 1) hash_ids += count_occurrences(line.substr(open, close - open), ",") + 1;
  }
  auto entries = load_mooncake_trace(*path);
  ASSERT_TRUE(entries.ok()) << entries.status().to_string();
  ASSERT_EQ(entries->size(), rows);
  std::int64_t got_in = 0, got_out = 0;
  std::size_t got_hash = 0;
  for (const auto& e : *entries) {
    got_in += e.input_tokens;
    got_out += e.output_tokens;
    got_hash += e.hash_ids.size();
  }
  EXPECT_EQ(got_in, sum_in);
  EXPECT_EQ(got_out, sum_out);
  EXPECT_EQ(got_hash, hash_ids);
  EXPECT_DOUBLE_EQ(*entries->back().timestamp_s, static_cast<double>(last_ts) / 1000.0);
  EXPECT_EQ(entries->front().hash_ids.size(), 79u);
}

TEST(Dataset, ShareGptFirstHumanTurn) {
  const std::string rel = "prompts/sharegpt_v3_1000.json";
  auto path = shared_data_path(rel);
  if (!path) GTEST_SKIP() << missing_data_message(rel);
  std::string text = slurp(*path);
  std::size_t humans = count_occurrences(text, "\"from\": \"human\"");
  auto entries = load_sharegpt(*path);
  ASSERT_TRUE(entries.ok()) << entries.status().to_string();
  EXPECT_EQ(entries->size(), humans);
  EXPECT_EQ(entries->size(), 1000u);
  EXPECT_EQ(entries->front().prompt.rfind("a. A blog is a type of website", 0), 0u);
  for (const auto& e : *entries) EXPECT_TRUE(e.response.empty());  // responses are absent here
}

TEST(Dataset, ShareGptResponsesAndBadInput) {
  std::string dir = ::testing::TempDir();
  std::string good = dir + "/sg_good.json";
  std::ofstream(good) << R"([{"conversations":[{"from":"system","value":"s"},{"from":"human","value":"hi there"},)"
                         R"({"from":"gpt","value":"hello you, 12345678"}]},{"conversations":[]}])";
  auto e = load_sharegpt(good);
  ASSERT_TRUE(e.ok()) << e.status().to_string();
  ASSERT_EQ(e->size(), 1u);
  EXPECT_EQ((*e)[0].prompt, "hi there");
  EXPECT_EQ((*e)[0].response, "hello you, 12345678");
  // Output length from the assistant turn (approximate: 19 chars -> 5 tokens).
  WorkloadOptions o;
  o.kind = DatasetKind::kShareGpt;
  o.path = good;
  PromptBuilder approx;
  auto w = build_workload(o, approx);
  ASSERT_TRUE(w.ok());
  EXPECT_EQ((*w)[0].output_tokens, 5);
  EXPECT_EQ((*w)[0].input_tokens, 2);

  std::string bad = dir + "/sg_bad.json";
  std::ofstream(bad) << "{not json";
  EXPECT_EQ(load_sharegpt(bad).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(load_sharegpt(dir + "/missing.json").status().code(), StatusCode::kNotFound);
  std::string badcsv = dir + "/az_bad.csv";
  std::ofstream(badcsv) << "TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46.68,12,x\n";
  auto st = load_azure_trace(badcsv).status();
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("line 2"), std::string::npos) << st.message();
}

TEST(Dataset, DatetimeParsing) {
  auto a = parse_datetime_seconds("1970-01-02 00:00:01.5");
  ASSERT_TRUE(a.ok());
  EXPECT_DOUBLE_EQ(*a, 86401.5);
  auto b = parse_datetime_seconds("2024-03-01 00:00:00");  // leap year: Feb has 29 days
  auto c = parse_datetime_seconds("2024-02-28 00:00:00");
  EXPECT_DOUBLE_EQ(*b - *c, 2 * 86400.0);
  EXPECT_FALSE(parse_datetime_seconds("yesterday").ok());
}

TEST(Dataset, MooncakeWorkloadSharesPrefixBlocks) {
  std::string path = ::testing::TempDir() + "/mc.jsonl";
  std::ofstream(path) << R"({"timestamp": 0, "input_length": 20, "output_length": 3, "hash_ids": [1, 2, 3]})" "\n"
                      << R"({"timestamp": 500, "input_length": 18, "output_length": 4, "hash_ids": [1, 2, 9]})" "\n";
  WorkloadOptions o;
  o.kind = DatasetKind::kMooncake;
  o.path = path;
  o.length_scale = 0.5;
  o.mooncake_block_tokens = 16;  // -> 8 after scaling
  PromptBuilder approx;
  auto w = build_workload(o, approx);
  ASSERT_TRUE(w.ok()) << w.status().to_string();
  ASSERT_EQ(w->size(), 2u);
  EXPECT_EQ((*w)[0].input_tokens, 10);
  EXPECT_EQ((*w)[1].input_tokens, 9);
  EXPECT_EQ((*w)[0].output_tokens, 2);
  EXPECT_DOUBLE_EQ(*(*w)[1].timestamp_s, 0.5);
  // Request 0 = 8 words of block 1 + 2 of block 2; request 1 = the same 8 + 1 of block 2.
  const auto& p0 = (*w)[0].prompt;
  const auto& p1 = (*w)[1].prompt;
  auto words = [](const std::string& s) {
    std::vector<std::string> v;
    std::istringstream in(s);
    for (std::string x; in >> x;) v.push_back(x);
    return v;
  };
  auto w0 = words(p0), w1 = words(p1);
  ASSERT_EQ(w0.size(), 10u);
  ASSERT_EQ(w1.size(), 9u);
  for (int i = 0; i < 9; ++i) EXPECT_EQ(w0[i], w1[i]) << i;  // block 1 + first word of block 2
}

std::size_t word_count(const std::string& s) {
  std::istringstream in(s);
  std::size_t n = 0;
  for (std::string w; in >> w;) ++n;
  return n;
}

TEST(Workload, HighPriorityShareIsExactSeededAndLeavesTheRestAlone) {
  WorkloadOptions o;
  o.num_prompts = 50;
  o.input_len = LengthDistribution::constant(8);
  o.output_len = LengthDistribution::constant(4);
  PromptBuilder approx;
  auto plain = build_workload(o, approx);
  ASSERT_TRUE(plain.ok());
  o.high_priority_fraction = 0.1;
  auto w = build_workload(o, approx);
  ASSERT_TRUE(w.ok()) << w.status().to_string();
  std::vector<std::int64_t> high;
  for (const auto& r : *w) {
    if (r.priority_class == PriorityClass::kHigh) {
      high.push_back(r.index);
      ASSERT_TRUE(r.priority.has_value());
      EXPECT_EQ(*r.priority, -1);
    } else {
      EXPECT_FALSE(r.priority.has_value()) << r.index;
    }
  }
  // Seed 0, 10% of 50: exactly these 5 (seeded_share_test.cc has the same set).
  EXPECT_EQ(high, (std::vector<std::int64_t>{17, 28, 30, 37, 40}));
  // Prompts and lengths are those of the run without classes.
  for (std::size_t i = 0; i < w->size(); ++i) {
    EXPECT_EQ((*w)[i].prompt, (*plain)[i].prompt) << i;
    EXPECT_EQ((*w)[i].input_tokens, (*plain)[i].input_tokens) << i;
    EXPECT_FALSE((*plain)[i].priority.has_value());
  }
  // The set does not depend on the lengths; the value is the one asked for.
  o.input_len = *LengthDistribution::parse("uniform:5:500", LengthSide::kInput);
  o.high_priority_value = 3;
  auto other = build_workload(o, approx);
  ASSERT_TRUE(other.ok());
  for (std::size_t i = 0; i < other->size(); ++i) {
    EXPECT_EQ((*other)[i].priority_class, (*w)[i].priority_class) << i;
    if ((*other)[i].priority) {
      EXPECT_EQ(*(*other)[i].priority, 3);
    }
  }
}

TEST(Workload, LongMixGivesTheLongLengthsToASeededShare) {
  WorkloadOptions o;
  o.num_prompts = 40;
  o.seed = 5;
  o.input_len = LengthDistribution::constant(16);
  o.output_len = LengthDistribution::constant(8);
  o.long_fraction = 0.25;
  o.long_input_len = LengthDistribution::constant(500);
  o.long_output_len = LengthDistribution::constant(64);
  PromptBuilder approx;
  auto w = build_workload(o, approx);
  ASSERT_TRUE(w.ok()) << w.status().to_string();
  const auto chosen = choose_seeded_share(40, 0.25, 5, kLongRequestStream);
  int num_long = 0;
  for (const auto& r : *w) {
    const bool want_long = chosen[static_cast<std::size_t>(r.index)];
    EXPECT_EQ(r.long_request, want_long) << r.index;
    num_long += r.long_request;
    EXPECT_EQ(r.input_tokens, want_long ? 500 : 16) << r.index;
    EXPECT_EQ(r.output_tokens, want_long ? 64 : 8) << r.index;
    EXPECT_EQ(word_count(r.prompt), static_cast<std::size_t>(r.input_tokens)) << r.index;
    EXPECT_EQ(r.priority_class, PriorityClass::kNormal);
  }
  EXPECT_EQ(num_long, 10);
  // --length-scale applies to the long lengths; a side without a long length keeps the normal one.
  o.length_scale = 0.5;
  o.long_output_len.reset();
  auto scaled = build_workload(o, approx);
  ASSERT_TRUE(scaled.ok());
  for (const auto& r : *scaled) {
    EXPECT_EQ(r.input_tokens, r.long_request ? 250 : 8) << r.index;
    EXPECT_EQ(r.output_tokens, 4) << r.index;
  }
  // Independent of the high-priority share drawn from the same seed.
  o.high_priority_fraction = 0.25;
  auto both = build_workload(o, approx);
  ASSERT_TRUE(both.ok());
  int long_and_high = 0;
  for (std::size_t i = 0; i < both->size(); ++i) {
    EXPECT_EQ((*both)[i].long_request, (*scaled)[i].long_request) << i;
    long_and_high += (*both)[i].long_request && (*both)[i].priority_class == PriorityClass::kHigh;
  }
  EXPECT_LT(long_and_high, 10);
}

TEST(Workload, LongMixOnATraceReplacesTheTraceLengths) {
  std::string path = ::testing::TempDir() + "/mc_long.jsonl";
  {
    std::ofstream out(path);
    for (int i = 0; i < 20; ++i)
      out << R"({"timestamp": )" << i * 100 << R"(, "input_length": 30, "output_length": 5, "hash_ids": [1, 2]})" "\n";
  }
  WorkloadOptions o;
  o.kind = DatasetKind::kMooncake;
  o.path = path;
  o.mooncake_block_tokens = 16;
  o.long_fraction = 0.1;
  o.long_input_len = LengthDistribution::constant(300);
  PromptBuilder approx;
  auto w = build_workload(o, approx);
  ASSERT_TRUE(w.ok()) << w.status().to_string();
  int num_long = 0;
  for (const auto& r : *w) {
    num_long += r.long_request;
    EXPECT_EQ(r.input_tokens, r.long_request ? 300 : 30) << r.index;
    EXPECT_EQ(r.output_tokens, 5) << r.index;  // no long output length: the trace's
    EXPECT_EQ(word_count(r.prompt), static_cast<std::size_t>(r.input_tokens)) << r.index;
    EXPECT_NEAR(*r.timestamp_s, 0.1 * static_cast<double>(r.index), 1e-9);  // arrivals untouched
  }
  EXPECT_EQ(num_long, 2);
}

TEST(Workload, ClassOptionsAreValidated) {
  PromptBuilder approx;
  auto error = [&](const WorkloadOptions& o) { return build_workload(o, approx).status().message(); };
  WorkloadOptions o;
  o.num_prompts = 4;
  o.high_priority_fraction = 1.5;
  EXPECT_EQ(error(o), "--high-priority-fraction must be in [0, 1], got 1.5");
  o.high_priority_fraction = -0.1;
  EXPECT_EQ(error(o), "--high-priority-fraction must be in [0, 1], got -0.1");
  o.high_priority_fraction = 0.5;
  o.high_priority_value = std::int64_t{1} << 31;
  EXPECT_EQ(error(o), "--high-priority-value must be a 32-bit integer, got 2147483648");
  o.high_priority_value = -1;
  o.long_fraction = 2;
  EXPECT_EQ(error(o), "--long-fraction must be in [0, 1], got 2");
  o.long_fraction = 0.5;
  EXPECT_EQ(error(o), "--long-fraction needs --long-input-len and/or --long-output-len");
  o.long_output_len = LengthDistribution::constant(100);
  EXPECT_TRUE(build_workload(o, approx).ok());
}

TEST(LengthDistribution, PresetsMatchTable4) {
  struct Case {
    const char* name;
    LengthSide side;
    double mean, median;
  };
  const Case cases[] = {{"alpaca", LengthSide::kInput, 20.63, 17},      {"alpaca", LengthSide::kOutput, 163.80, 119},
                        {"sharegpt", LengthSide::kInput, 343.76, 148},  {"sharegpt", LengthSide::kOutput, 237.20, 152},
                        {"longbench", LengthSide::kInput, 2686.89, 2736.5},
                        {"longbench", LengthSide::kOutput, 101.78, 19}};
  for (const auto& c : cases) {
    auto d = LengthDistribution::parse(c.name, c.side);
    ASSERT_TRUE(d.ok());
    std::mt19937_64 rng(42);
    const int n = 200000;
    std::vector<double> v;
    v.reserve(n);
    double sum = 0;
    for (int i = 0; i < n; ++i) {
      double x = static_cast<double>(d->sample(rng));
      v.push_back(x);
      sum += x;
    }
    std::nth_element(v.begin(), v.begin() + n / 2, v.end());
    double median = v[n / 2];
    EXPECT_NEAR(sum / n, c.mean, c.mean * 0.04) << c.name;
    EXPECT_NEAR(d->mean(), c.mean, 1e-9 * c.mean) << c.name;  // the closed form
    EXPECT_NEAR(median, c.median, std::max(1.0, c.median * 0.03)) << c.name;
  }
}

TEST(LengthDistribution, ParseAndScale) {
  auto c = LengthDistribution::parse("128", LengthSide::kInput);
  ASSERT_TRUE(c.ok());
  std::mt19937_64 rng(1);
  EXPECT_EQ(c->sample(rng), 128);
  EXPECT_EQ(c->sample(rng, 0.25), 32);
  EXPECT_EQ(c->sample(rng, 0.001), 1);  // clamped
  auto u = LengthDistribution::parse("uniform:5:7", LengthSide::kOutput);
  ASSERT_TRUE(u.ok());
  for (int i = 0; i < 100; ++i) {
    auto x = u->sample(rng);
    EXPECT_GE(x, 5);
    EXPECT_LE(x, 7);
  }
  EXPECT_DOUBLE_EQ(c->mean(), 128.0);
  EXPECT_DOUBLE_EQ(u->mean(), 6.0);
  EXPECT_FALSE(LengthDistribution::parse("lognormal:10:20", LengthSide::kInput).ok());
  EXPECT_FALSE(LengthDistribution::parse("banana", LengthSide::kInput).ok());
  EXPECT_FALSE(LengthDistribution::parse("-3", LengthSide::kInput).ok());
}

TEST(ArrivalProcess, PoissonMeanInterArrival) {
  auto p = ArrivalProcess::create({.rate = 8.0, .burstiness = 1.0, .seed = 1234});
  ASSERT_TRUE(p.ok());
  double sum = 0;
  for (int i = 0; i < 10000; ++i) sum += p->next_interval();
  EXPECT_NEAR(sum / 10000, 1.0 / 8.0, 0.02 / 8.0);
}

TEST(ArrivalProcess, GammaBurstiness) {
  // Mean stays 1/rate; the coefficient of variation is 1/sqrt(burstiness).
  for (double k : {0.25, 4.0}) {
    auto p = ArrivalProcess::create({.rate = 5.0, .burstiness = k, .seed = 7});
    ASSERT_TRUE(p.ok());
    std::vector<double> v;
    for (int i = 0; i < 20000; ++i) v.push_back(p->next_interval());
    double mean = 0, var = 0;
    for (double x : v) mean += x;
    mean /= v.size();
    for (double x : v) var += (x - mean) * (x - mean);
    var /= v.size();
    EXPECT_NEAR(mean, 0.2, 0.2 * 0.05) << k;
    EXPECT_NEAR(std::sqrt(var) / mean, 1.0 / std::sqrt(k), 0.08 / std::sqrt(k)) << k;
  }
  auto constant = ArrivalProcess::create({.rate = 4.0, .burstiness = INFINITY});
  auto t = constant->times(3);
  EXPECT_DOUBLE_EQ(t[2], 0.5);
  auto inf = ArrivalProcess::create({});
  EXPECT_DOUBLE_EQ(inf->times(5)[4], 0.0);
  EXPECT_FALSE(ArrivalProcess::create({.rate = 0}).ok());
  EXPECT_FALSE(ArrivalProcess::create({.rate = 1, .burstiness = -1}).ok());
  // Same seed, same schedule.
  auto a = ArrivalProcess::create({.rate = 3, .seed = 99})->times(50);
  auto b = ArrivalProcess::create({.rate = 3, .seed = 99})->times(50);
  EXPECT_EQ(a, b);
}

}  // namespace
}  // namespace ecoserve::loadgen
