// Workloads for `ecoserve bench`: dataset loaders and the request list they produce.
//
// Loaders read files as they are (no scaling, no prompt building):
//   sharegpt  JSON list of {id?, conversations: [{from, value}, ...]}: the prompt is the
//             first "human" turn; the output length comes from the next "gpt" turn when
//             present (its token count), else it is 0 (= use --output-len).
//   azure     CSV TIMESTAMP,ContextTokens,GeneratedTokens; TIMESTAMP is
//             "YYYY-MM-DD HH:MM:SS[.fraction]"; times are made relative to the first row.
//   mooncake  JSONL {timestamp (ms), input_length, output_length, hash_ids}.
// build_workload() then takes --num-prompts entries (ShareGPT: a seeded shuffle; traces:
// the first N in order), applies --length-scale to every length it generates (synthetic,
// azure, mooncake input/output lengths and the 512-token hash block; ShareGPT prompt text
// is real text and is not scaled) and makes the prompt texts with a PromptBuilder.
// Classes (seeded shares, see seeded_share.h; both independent of each other):
//   long mix      a long_fraction share of the requests take their lengths from
//                 long_input_len / long_output_len (scaled like synthetic lengths; a side
//                 without one keeps what the dataset gives) and get a random prompt of that
//                 length (ShareGPT's text and Mooncake's shared blocks are not used for them);
//                 the rest keep the dataset's. Synthetic: the rest sample input_len/output_len.
//   priorities    a high_priority_fraction share is PriorityClass::kHigh and sends
//                 "priority": high_priority_value; the rest send none.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "loadgen/length_distribution.h"
#include "loadgen/prompt_builder.h"
#include "loadgen/request_record.h"

namespace ecoserve::loadgen {

enum class DatasetKind { kShareGpt, kAzure, kMooncake, kSynthetic };
StatusOr<DatasetKind> parse_dataset_kind(std::string_view name);
std::string_view dataset_kind_name(DatasetKind kind);

// One row of a dataset file.
struct DatasetEntry {
  std::string prompt;                 // sharegpt only
  std::string response;               // sharegpt, when the assistant turn is present
  std::int64_t input_tokens = 0;      // traces (sharegpt: 0 until counted)
  std::int64_t output_tokens = 0;     // traces; 0 = not in the dataset
  std::optional<double> timestamp_s;  // traces, relative to the first row
  std::vector<std::int64_t> hash_ids; // mooncake
};

StatusOr<std::vector<DatasetEntry>> load_sharegpt(const std::string& path);
StatusOr<std::vector<DatasetEntry>> load_azure_trace(const std::string& path);
StatusOr<std::vector<DatasetEntry>> load_mooncake_trace(const std::string& path);
StatusOr<std::vector<DatasetEntry>> load_dataset(DatasetKind kind, const std::string& path);

// "2023-11-16 18:15:46.6805900" -> seconds since 1970-01-01 (UTC, no zone handling).
StatusOr<double> parse_datetime_seconds(std::string_view s);

// One request to send.
struct BenchRequest {
  std::int64_t index = 0;
  std::string prompt;
  std::int64_t input_tokens = 0;   // exact with a tokenizer, else approximate
  std::int64_t output_tokens = 0;  // max_tokens
  std::optional<double> timestamp_s;  // trace time, if the dataset has one
  PriorityClass priority_class = PriorityClass::kNormal;
  std::optional<std::int64_t> priority = std::nullopt;  // sent as "priority" when set (kHigh requests)
  bool long_request = false;              // lengths from the long mix
  // Mooncake: the prompt's shared 512-token blocks (scaled to hash_block_tokens).
  std::vector<std::int64_t> hash_ids;
  std::int64_t hash_block_tokens = 0;
};

struct WorkloadOptions {
  DatasetKind kind = DatasetKind::kSynthetic;
  std::string path;                   // for file datasets
  std::int64_t num_prompts = 0;       // 0 = whole file (synthetic: required > 0)
  LengthDistribution input_len = LengthDistribution::constant(128);   // synthetic
  LengthDistribution output_len = LengthDistribution::constant(128);  // synthetic, sharegpt fallback
  double length_scale = 1.0;
  std::int64_t mooncake_block_tokens = 512;  // before scaling
  std::uint64_t seed = 0;
  // Long mix: a seeded share with other lengths (none when long_fraction is 0).
  double long_fraction = 0.0;
  std::optional<LengthDistribution> long_input_len;   // unset: the dataset's input length
  std::optional<LengthDistribution> long_output_len;  // unset: the dataset's output length
  // Priority classes: a seeded share sends "priority": high_priority_value.
  double high_priority_fraction = 0.0;
  std::int64_t high_priority_value = -1;
  // Leave every prompt text empty (the simulator needs lengths only): the lengths,
  // classes and timestamps are the same as with prompts, for the same seed.
  bool lengths_only = false;
};

StatusOr<std::vector<BenchRequest>> build_workload(const WorkloadOptions& options,
                                                   const PromptBuilder& builder);

}  // namespace ecoserve::loadgen
