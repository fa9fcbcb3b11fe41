// Dataset statistics for `ecoserve bench stats`: length distributions and the
// prefix-repetition degree of a prompt dataset.
//
// Prefix repetition: every prompt's token ids (ShareGPT with --tokenizer; without one,
// whitespace-separated words stand in for tokens; Mooncake: its hash_ids, each worth
// block_tokens tokens) go into a PrefixTree; nodes seen fewer than min_count times
// are pruned; a prompt "shares a prefix" when its surviving prefix is at least
// min_prefix tokens. Azure and synthetic workloads have no prompt content: no prefix stats.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"
#include "loadgen/dataset.h"
#include "loadgen/prompt_builder.h"

namespace ecoserve::model {
class Tokenizer;
}

namespace ecoserve::loadgen {

struct LengthStats {
  std::size_t count = 0;
  double mean = 0, median = 0, p90 = 0, p99 = 0, min = 0, max = 0;
  std::int64_t sum = 0;
};
LengthStats length_stats(const std::vector<std::int64_t>& lengths);
// A text histogram: `bins` equal-width bins from min to p99, plus one overflow bin.
std::string text_histogram(const std::vector<std::int64_t>& lengths, int bins = 12, int width = 40);

struct PrefixStats {
  std::int64_t min_count = 2;
  std::int64_t min_prefix_tokens = 64;
  std::size_t prompts = 0;
  std::size_t prompts_sharing = 0;          // surviving prefix >= min_prefix_tokens
  double share = 0;                         // prompts_sharing / prompts
  double mean_surviving_prefix_tokens = 0;
  double shared_token_fraction = 0;         // sum of surviving prefixes / sum of prompt lengths
  std::size_t trie_nodes = 0;
};
// sequences: token (or block) ids per prompt; unit_tokens: tokens per id (512 for Mooncake blocks).
PrefixStats prefix_stats(const std::vector<std::vector<std::int64_t>>& sequences, std::int64_t min_count,
                         std::int64_t min_prefix_tokens, std::int64_t unit_tokens = 1);

struct StatsOptions {
  DatasetKind kind = DatasetKind::kShareGpt;
  std::string path;
  std::int64_t min_count = 2;
  std::int64_t min_prefix_tokens = 64;
  std::int64_t mooncake_block_tokens = 512;
  const model::Tokenizer* tokenizer = nullptr;  // borrowed, optional
};

struct DatasetStats {
  std::size_t entries = 0;
  bool exact_tokens = false;
  std::vector<std::int64_t> input_lengths;
  std::vector<std::int64_t> output_lengths;  // empty when the dataset has none
  std::optional<PrefixStats> prefix;
  std::optional<double> span_s;  // traces: last timestamp - first
};

StatusOr<DatasetStats> compute_dataset_stats(const StatsOptions& options);
std::string format_dataset_stats(const DatasetStats& stats, const StatsOptions& options);

}  // namespace ecoserve::loadgen
