#include "loadgen/dataset.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <limits>
#include <numeric>
#include <random>
#include <sstream>

#include <nlohmann/json.hpp>

#include "loadgen/seeded_share.h"

namespace ecoserve::loadgen {
namespace {

StatusOr<std::string> read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return not_found_error("cannot open dataset file '{}'", path);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::int64_t scaled(std::int64_t n, double scale) {
  return std::max<std::int64_t>(1, std::llround(static_cast<double>(n) * scale));
}

bool parse_int(std::string_view s, std::int64_t& out) {
  while (!s.empty() && (s.back() == ' ' || s.back() == '\r')) s.remove_suffix(1);
  while (!s.empty() && s.front() == ' ') s.remove_prefix(1);
  if (s.empty()) return false;
  std::int64_t v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
    v = v * 10 + (c - '0');
  }
  out = v;
  return true;
}

// A long request of a file dataset: the long mix's lengths replace the entry's, and
// a new input length gets a random prompt of that length.
void make_long(BenchRequest& r, const WorkloadOptions& o, const PromptBuilder& builder, std::mt19937_64& rng,
               std::mt19937_64& prompt_rng) {
  r.long_request = true;
  if (o.long_input_len) {
    r.input_tokens = o.long_input_len->sample(rng, o.length_scale);
    r.prompt = o.lengths_only ? std::string() : builder.random_prompt(r.input_tokens, prompt_rng);
    r.hash_ids.clear();
  }
  if (o.long_output_len) r.output_tokens = o.long_output_len->sample(rng, o.length_scale);
}

// Marks the seeded high_priority_fraction share of `out` as high priority.
void assign_priorities(std::vector<BenchRequest>& out, const WorkloadOptions& o) {
  auto high = choose_seeded_share(out.size(), o.high_priority_fraction, o.seed, kHighPriorityStream);
  for (std::size_t i = 0; i < out.size(); ++i) {
    if (!high[i]) continue;
    out[i].priority_class = PriorityClass::kHigh;
    out[i].priority = o.high_priority_value;
  }
}

Status validate_classes(const WorkloadOptions& o) {
  ECO_RETURN_IF_ERROR(validate_share(o.long_fraction, "--long-fraction"));
  ECO_RETURN_IF_ERROR(validate_share(o.high_priority_fraction, "--high-priority-fraction"));
  if (o.long_fraction > 0 && !o.long_input_len && !o.long_output_len)
    return invalid_argument_error("--long-fraction needs --long-input-len and/or --long-output-len");
  if (o.high_priority_value < std::numeric_limits<std::int32_t>::min() ||
      o.high_priority_value > std::numeric_limits<std::int32_t>::max())
    return invalid_argument_error("--high-priority-value must be a 32-bit integer, got {}", o.high_priority_value);
  return ok_status();
}

}  // namespace

StatusOr<DatasetKind> parse_dataset_kind(std::string_view name) {
  if (name == "sharegpt") return DatasetKind::kShareGpt;
  if (name == "azure") return DatasetKind::kAzure;
  if (name == "mooncake") return DatasetKind::kMooncake;
  if (name == "synthetic" || name == "random") return DatasetKind::kSynthetic;
  return invalid_argument_error("unknown dataset '{}': expected sharegpt, azure, mooncake or synthetic",
                                name);
}

std::string_view dataset_kind_name(DatasetKind kind) {
  switch (kind) {
    case DatasetKind::kShareGpt: return "sharegpt";
    case DatasetKind::kAzure: return "azure";
    case DatasetKind::kMooncake: return "mooncake";
    case DatasetKind::kSynthetic: return "synthetic";
  }
  return "?";
}

StatusOr<std::vector<DatasetEntry>> load_sharegpt(const std::string& path) {
  ECO_ASSIGN_OR_RETURN(std::string text, read_file(path));
  nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return invalid_argument_error("sharegpt '{}': not valid JSON", path);
  if (!j.is_array()) return invalid_argument_error("sharegpt '{}': top level must be a list", path);
  std::vector<DatasetEntry> out;
  for (std::size_t i = 0; i < j.size(); ++i) {
    const auto& item = j[i];
    if (!item.is_object() || !item.contains("conversations") || !item["conversations"].is_array())
      return invalid_argument_error("sharegpt '{}': entry {} has no 'conversations' list", path, i);
    const auto& conv = item["conversations"];
    DatasetEntry e;
    bool have_prompt = false;
    for (const auto& turn : conv) {
      if (!turn.is_object() || !turn.contains("value") || !turn["value"].is_string()) continue;
      std::string from = turn.value("from", "");
      if (!have_prompt) {
        if (from == "human" || from == "user") {
          e.prompt = turn["value"].get<std::string>();
          have_prompt = true;
        }
      } else if (from == "gpt" || from == "assistant" || from == "chatgpt") {
        e.response = turn["value"].get<std::string>();
        break;
      }
    }
    if (!have_prompt || e.prompt.empty()) continue;  // nothing to send
    out.push_back(std::move(e));
  }
  if (out.empty()) return invalid_argument_error("sharegpt '{}': no entry with a human turn", path);
  return out;
}

StatusOr<double> parse_datetime_seconds(std::string_view s) {
  // YYYY-MM-DD HH:MM:SS[.frac]  (a 'T' separator is accepted too)
  int y, mo, d, h, mi;
  double sec;
  std::string str(s);
  char sep = 0;
  if (std::sscanf(str.c_str(), "%d-%d-%d%c%d:%d:%lf", &y, &mo, &d, &sep, &h, &mi, &sec) != 7 ||
      (sep != ' ' && sep != 'T') || mo < 1 || mo > 12 || d < 1 || d > 31 || h > 23 || mi > 59 ||
      sec < 0 || sec >= 61)
    return invalid_argument_error("bad timestamp '{}': expected YYYY-MM-DD HH:MM:SS[.fraction]", s);
  // Days from civil (proleptic Gregorian).
  int yy = y - (mo <= 2);
  int era = (yy >= 0 ? yy : yy - 399) / 400;
  unsigned yoe = static_cast<unsigned>(yy - era * 400);
  unsigned doy = (153 * (mo + (mo > 2 ? -3 : 9)) + 2) / 5 + d - 1;
  unsigned doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  long days = static_cast<long>(era) * 146097 + static_cast<long>(doe) - 719468;
  return static_cast<double>(days) * 86400.0 + h * 3600.0 + mi * 60.0 + sec;
}

StatusOr<std::vector<DatasetEntry>> load_azure_trace(const std::string& path) {
  std::ifstream in(path);
  if (!in) return not_found_error("cannot open dataset file '{}'", path);
  std::string line;
  if (!std::getline(in, line)) return invalid_argument_error("azure '{}': empty file", path);
  if (line.rfind("TIMESTAMP", 0) != 0)
    return invalid_argument_error("azure '{}': header must be TIMESTAMP,ContextTokens,GeneratedTokens",
                                  path);
  std::vector<DatasetEntry> out;
  std::optional<double> t0;
  std::size_t line_no = 1;
  while (std::getline(in, line)) {
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty()) continue;
    auto c1 = line.find(',');
    auto c2 = c1 == std::string::npos ? c1 : line.find(',', c1 + 1);
    if (c2 == std::string::npos)
      return invalid_argument_error("azure '{}' line {}: expected 3 comma-separated fields", path, line_no);
    ECO_ASSIGN_OR_RETURN(double t, parse_datetime_seconds(std::string_view(line).substr(0, c1)));
    DatasetEntry e;
    if (!parse_int(std::string_view(line).substr(c1 + 1, c2 - c1 - 1), e.input_tokens) ||
        !parse_int(std::string_view(line).substr(c2 + 1), e.output_tokens))
      return invalid_argument_error("azure '{}' line {}: token counts must be integers", path, line_no);
    if (!t0) t0 = t;
    e.timestamp_s = t - *t0;
    out.push_back(std::move(e));
  }
  if (out.empty()) return invalid_argument_error("azure '{}': no rows", path);
  return out;
}

StatusOr<std::vector<DatasetEntry>> load_mooncake_trace(const std::string& path) {
  std::ifstream in(path);
  if (!in) return not_found_error("cannot open dataset file '{}'", path);
  std::string line;
  std::vector<DatasetEntry> out;
  std::optional<double> t0;
  std::size_t line_no = 0;
  while (std::getline(in, line)) {
    ++line_no;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    nlohmann::json j = nlohmann::json::parse(line, nullptr, false);
    if (j.is_discarded() || !j.is_object())
      return invalid_argument_error("mooncake '{}' line {}: not a JSON object", path, line_no);
    auto num = [&](const char* key) -> const nlohmann::json* {
      auto it = j.find(key);
      return it != j.end() && it->is_number() ? &*it : nullptr;
    };
    const auto* ts = num("timestamp");
    const auto* il = num("input_length");
    const auto* ol = num("output_length");
    if (!ts || !il || !ol)
      return invalid_argument_error(
          "mooncake '{}' line {}: needs numeric timestamp, input_length and output_length", path, line_no);
    DatasetEntry e;
    double t = ts->get<double>() / 1000.0;
    if (!t0) t0 = t;
    e.timestamp_s = t - *t0;
    e.input_tokens = il->get<std::int64_t>();
    e.output_tokens = ol->get<std::int64_t>();
    if (auto it = j.find("hash_ids"); it != j.end()) {
      if (!it->is_array())
        return invalid_argument_error("mooncake '{}' line {}: hash_ids must be a list", path, line_no);
      for (const auto& h : *it) {
        if (!h.is_number_integer())
          return invalid_argument_error("mooncake '{}' line {}: hash_ids must be integers", path, line_no);
        e.hash_ids.push_back(h.get<std::int64_t>());
      }
    }
    out.push_back(std::move(e));
  }
  if (out.empty()) return invalid_argument_error("mooncake '{}': no rows", path);
  return out;
}

StatusOr<std::vector<DatasetEntry>> load_dataset(DatasetKind kind, const std::string& path) {
  switch (kind) {
    case DatasetKind::kShareGpt: return load_sharegpt(path);
    case DatasetKind::kAzure: return load_azure_trace(path);
    case DatasetKind::kMooncake: return load_mooncake_trace(path);
    case DatasetKind::kSynthetic: break;
  }
  return invalid_argument_error("dataset 'synthetic' has no file");
}

StatusOr<std::vector<BenchRequest>> build_workload(const WorkloadOptions& o,
                                                   const PromptBuilder& builder) {
  if (o.length_scale <= 0) return invalid_argument_error("--length-scale must be > 0, got {}", o.length_scale);
  if (o.num_prompts < 0) return invalid_argument_error("--num-prompts must be >= 0");
  ECO_RETURN_IF_ERROR(validate_classes(o));
  std::vector<BenchRequest> out;
  std::mt19937_64 rng(o.seed);
  // Prompt texts draw from their own stream, so lengths (and everything else drawn
  // from `rng`) are the same with and without them (lengths_only: the simulator).
  std::mt19937_64 prompt_rng(o.seed ^ 0x70726f6d7074ull);
  if (o.kind == DatasetKind::kSynthetic) {
    if (o.num_prompts <= 0) return invalid_argument_error("synthetic dataset needs --num-prompts > 0");
    const auto is_long =
        choose_seeded_share(static_cast<std::size_t>(o.num_prompts), o.long_fraction, o.seed, kLongRequestStream);
    for (std::int64_t i = 0; i < o.num_prompts; ++i) {
      BenchRequest r;
      r.index = i;
      r.long_request = is_long[static_cast<std::size_t>(i)];
      const LengthDistribution& in = r.long_request && o.long_input_len ? *o.long_input_len : o.input_len;
      const LengthDistribution& out_len = r.long_request && o.long_output_len ? *o.long_output_len : o.output_len;
      r.input_tokens = in.sample(rng, o.length_scale);
      r.output_tokens = out_len.sample(rng, o.length_scale);
      if (!o.lengths_only) r.prompt = builder.random_prompt(r.input_tokens, prompt_rng);
      out.push_back(std::move(r));
    }
    assign_priorities(out, o);
    return out;
  }
  ECO_ASSIGN_OR_RETURN(std::vector<DatasetEntry> entries, load_dataset(o.kind, o.path));
  std::vector<std::size_t> order(entries.size());
  std::iota(order.begin(), order.end(), 0);
  if (o.kind == DatasetKind::kShareGpt) std::shuffle(order.begin(), order.end(), rng);
  std::size_t n = o.num_prompts > 0 ? std::min<std::size_t>(order.size(), o.num_prompts) : order.size();
  if (o.num_prompts > 0 && static_cast<std::size_t>(o.num_prompts) > order.size() &&
      o.kind == DatasetKind::kShareGpt) {
    // Cycle through the prompts again to reach --num-prompts.
    n = static_cast<std::size_t>(o.num_prompts);
  }
  std::int64_t block = std::max<std::int64_t>(1, std::llround(o.mooncake_block_tokens * o.length_scale));
  const auto is_long = choose_seeded_share(n, o.long_fraction, o.seed, kLongRequestStream);
  for (std::size_t k = 0; k < n; ++k) {
    const DatasetEntry& e = entries[order[k % order.size()]];
    BenchRequest r;
    r.index = static_cast<std::int64_t>(k);
    r.timestamp_s = e.timestamp_s;
    switch (o.kind) {
      case DatasetKind::kShareGpt:
        r.prompt = e.prompt;
        r.input_tokens = builder.count_tokens(e.prompt);
        r.output_tokens = e.response.empty() ? o.output_len.sample(rng, o.length_scale)
                                             : builder.count_tokens(e.response);
        break;
      case DatasetKind::kAzure:
        r.input_tokens = scaled(e.input_tokens, o.length_scale);
        r.output_tokens = scaled(e.output_tokens, o.length_scale);
        if (!o.lengths_only) r.prompt = builder.random_prompt(r.input_tokens, prompt_rng);
        break;
      case DatasetKind::kMooncake:
        r.input_tokens = scaled(e.input_tokens, o.length_scale);
        r.output_tokens = scaled(e.output_tokens, o.length_scale);
        r.hash_ids = e.hash_ids;
        r.hash_block_tokens = block;
        if (!o.lengths_only) {
          r.prompt = e.hash_ids.empty() ? builder.random_prompt(r.input_tokens, prompt_rng)
                                        : builder.block_prompt(e.hash_ids, block, r.input_tokens);
        }
        break;
      case DatasetKind::kSynthetic: break;
    }
    if (is_long[k]) make_long(r, o, builder, rng, prompt_rng);
    out.push_back(std::move(r));
  }
  assign_priorities(out, o);
  return out;
}

}  // namespace ecoserve::loadgen
