#include "loadgen/dataset_stats.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <numeric>

#include <fmt/format.h>

#include "loadgen/metrics.h"
#include "loadgen/prefix_tree.h"
#include "model/tokenizer.h"

namespace ecoserve::loadgen {

LengthStats length_stats(const std::vector<std::int64_t>& lengths) {
  LengthStats s;
  s.count = lengths.size();
  if (lengths.empty()) return s;
  std::vector<double> v(lengths.begin(), lengths.end());
  std::sort(v.begin(), v.end());
  s.sum = std::accumulate(lengths.begin(), lengths.end(), std::int64_t{0});
  s.mean = static_cast<double>(s.sum) / static_cast<double>(v.size());
  s.median = percentile_sorted(v, 50);
  s.p90 = percentile_sorted(v, 90);
  s.p99 = percentile_sorted(v, 99);
  s.min = v.front();
  s.max = v.back();
  return s;
}

std::string text_histogram(const std::vector<std::int64_t>& lengths, int bins, int width) {
  if (lengths.empty()) return "  (no data)\n";
  auto st = length_stats(lengths);
  double lo = st.min, hi = std::max(st.p99, st.min + 1);
  double w = std::max(1.0, std::ceil((hi - lo) / bins));
  std::vector<std::size_t> counts(static_cast<std::size_t>(bins) + 1, 0);
  for (auto x : lengths) {
    auto b = static_cast<std::size_t>(std::floor((static_cast<double>(x) - lo) / w));
    counts[std::min<std::size_t>(b, static_cast<std::size_t>(bins))]++;
  }
  std::size_t peak = *std::max_element(counts.begin(), counts.end());
  std::string o;
  for (int i = 0; i <= bins; ++i) {
    std::size_t c = counts[static_cast<std::size_t>(i)];
    if (i == bins && c == 0) break;
    std::string range = i < bins ? fmt::format("[{:>7.0f}, {:>7.0f})", lo + i * w, lo + (i + 1) * w)
                                 : fmt::format("[{:>7.0f},     max]", lo + i * w);
    int bar = peak ? static_cast<int>(std::lround(static_cast<double>(c) * width / static_cast<double>(peak))) : 0;
    o += fmt::format("  {} {:>7} {}\n", range, c, std::string(static_cast<std::size_t>(bar), '#'));
  }
  return o;
}

PrefixStats prefix_stats(const std::vector<std::vector<std::int64_t>>& sequences, std::int64_t min_count,
                         std::int64_t min_prefix_tokens, std::int64_t unit_tokens) {
  PrefixStats s;
  s.min_count = min_count;
  s.min_prefix_tokens = min_prefix_tokens;
  s.prompts = sequences.size();
  PrefixTree tree;
  for (const auto& seq : sequences) tree.insert(seq);
  s.trie_nodes = tree.num_nodes();
  double total_tokens = 0, shared_tokens = 0;
  for (const auto& seq : sequences) {
    std::int64_t surviving = tree.surviving_prefix(seq, min_count) * unit_tokens;
    if (surviving >= min_prefix_tokens && surviving > 0) ++s.prompts_sharing;
    shared_tokens += static_cast<double>(surviving);
    total_tokens += static_cast<double>(seq.size()) * static_cast<double>(unit_tokens);
  }
  if (s.prompts > 0) {
    s.share = static_cast<double>(s.prompts_sharing) / static_cast<double>(s.prompts);
    s.mean_surviving_prefix_tokens = shared_tokens / static_cast<double>(s.prompts);
  }
  if (total_tokens > 0) s.shared_token_fraction = shared_tokens / total_tokens;
  return s;
}

namespace {

std::vector<std::int64_t> word_ids(const std::string& text) {
  std::vector<std::int64_t> ids;
  std::size_t i = 0;
  std::hash<std::string_view> h;
  while (i < text.size()) {
    while (i < text.size() && std::isspace(static_cast<unsigned char>(text[i]))) ++i;
    std::size_t j = i;
    while (j < text.size() && !std::isspace(static_cast<unsigned char>(text[j]))) ++j;
    if (j > i) ids.push_back(static_cast<std::int64_t>(h(std::string_view(text).substr(i, j - i))));
    i = j;
  }
  return ids;
}

}  // namespace

StatusOr<DatasetStats> compute_dataset_stats(const StatsOptions& o) {
  if (o.min_count < 1) return invalid_argument_error("--min-count must be >= 1, got {}", o.min_count);
  if (o.min_prefix_tokens < 0) return invalid_argument_error("--min-prefix must be >= 0, got {}", o.min_prefix_tokens);
  ECO_ASSIGN_OR_RETURN(std::vector<DatasetEntry> entries, load_dataset(o.kind, o.path));
  DatasetStats s;
  s.entries = entries.size();
  s.exact_tokens = o.tokenizer != nullptr || o.kind != DatasetKind::kShareGpt;
  PromptBuilder counter(o.tokenizer);
  std::vector<std::vector<std::int64_t>> seqs;
  for (const auto& e : entries) {
    if (o.kind == DatasetKind::kShareGpt) {
      if (o.tokenizer) {
        auto ids = o.tokenizer->encode(e.prompt, false);
        s.input_lengths.push_back(static_cast<std::int64_t>(ids.size()));
        seqs.emplace_back(ids.begin(), ids.end());
      } else {
        s.input_lengths.push_back(counter.count_tokens(e.prompt));
        seqs.push_back(word_ids(e.prompt));
      }
      if (!e.response.empty()) s.output_lengths.push_back(counter.count_tokens(e.response));
    } else {
      s.input_lengths.push_back(e.input_tokens);
      s.output_lengths.push_back(e.output_tokens);
      if (o.kind == DatasetKind::kMooncake) seqs.push_back(e.hash_ids);
    }
  }
  if (!entries.empty() && entries.back().timestamp_s) s.span_s = *entries.back().timestamp_s;
  if (!seqs.empty()) {
    std::int64_t unit = o.kind == DatasetKind::kMooncake ? o.mooncake_block_tokens : 1;
    s.prefix = prefix_stats(seqs, o.min_count, o.min_prefix_tokens, unit);
  }
  return s;
}

std::string format_dataset_stats(const DatasetStats& s, const StatsOptions& o) {
  std::string out = fmt::format("{:=^50}\n", " Dataset Statistics ");
  out += fmt::format("{:<40} {}\n", "Dataset:", fmt::format("{} ({})", dataset_kind_name(o.kind), o.path));
  out += fmt::format("{:<40} {}\n", "Entries:", s.entries);
  if (s.span_s) out += fmt::format("{:<40} {:.2f}\n", "Trace span (s):", *s.span_s);
  if (!s.exact_tokens)
    out += "Token counts are approximate (no --tokenizer: ~4 characters per token).\n";
  auto block = [&](const char* title, const std::vector<std::int64_t>& v) {
    out += fmt::format("{:-^50}\n", title);
    if (v.empty()) {
      out += "  not in the dataset\n";
      return;
    }
    auto st = length_stats(v);
    out += fmt::format("{:<40} {}\n", "Count:", st.count);
    out += fmt::format("{:<40} {:.2f}\n", "Mean:", st.mean);
    out += fmt::format("{:<40} {:.1f}\n", "Median:", st.median);
    out += fmt::format("{:<40} {:.1f}\n", "P90:", st.p90);
    out += fmt::format("{:<40} {:.1f}\n", "P99:", st.p99);
    out += fmt::format("{:<40} {:.0f}\n", "Min:", st.min);
    out += fmt::format("{:<40} {:.0f}\n", "Max:", st.max);
    out += fmt::format("{:<40} {}\n", "Total:", st.sum);
    out += text_histogram(v);
  };
  block("Input length (tokens)", s.input_lengths);
  block("Output length (tokens)", s.output_lengths);
  out += fmt::format("{:-^50}\n", "Prefix repetition");
  if (!s.prefix) {
    out += "  no prompt content in this dataset (prefix sharing not defined)\n";
  } else {
    const auto& p = *s.prefix;
    if (o.kind == DatasetKind::kMooncake)
      out += fmt::format("  (trie over hash_ids; each id = {} tokens)\n", o.mooncake_block_tokens);
    else if (!o.tokenizer)
      out += "  (trie over whitespace-separated words; pass --tokenizer for token ids)\n";
    out += fmt::format("{:<40} {}\n", "Min node count (N):", p.min_count);
    out += fmt::format("{:<40} {}\n", "Min shared prefix (L tokens):", p.min_prefix_tokens);
    out += fmt::format("{:<40} {}\n", "Trie nodes:", p.trie_nodes);
    out += fmt::format("{:<40} {}/{}\n", "Prompts with shared prefix >= L:", p.prompts_sharing, p.prompts);
    out += fmt::format("{:<40} {:.2f}\n", "Share of prompts (%):", p.share * 100);
    out += fmt::format("{:<40} {:.1f}\n", "Mean surviving prefix (tokens):", p.mean_surviving_prefix_tokens);
    out += fmt::format("{:<40} {:.2f}\n", "Prompt tokens in shared prefixes (%):", p.shared_token_fraction * 100);
  }
  out += std::string(50, '=') + "\n";
  return out;
}

}  // namespace ecoserve::loadgen
