// PromptBuilder: makes prompt text of a given token length, and counts tokens.
//
// With a tokenizer (ecoserve's GGUF tokenizer) prompts are random vocabulary
// tokens, decoded and then trimmed/extended until the text re-encodes (without
// BOS/EOS) to exactly the asked number of tokens; counts are exact.
// Without one, prompts are random common English words, counted as one token per
// word (close for Llama/GPT tokenizers), and text is counted as ceil(chars / 4)
// tokens: all counts are approximate (exact() is false) and reports say so.
// Block prompts (Mooncake): the content of each block is derived only from its
// hash id, so requests sharing hash_ids share the same prefix text.
// The tokenizer is borrowed (must outlive the builder). Immutable; thread-safe.
#pragma once

#include <cstdint>
#include <random>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace ecoserve::model {
class Tokenizer;
}

namespace ecoserve::loadgen {

class PromptBuilder {
 public:
  explicit PromptBuilder(const model::Tokenizer* tokenizer = nullptr);

  bool exact() const { return tokenizer_ != nullptr; }
  std::int64_t count_tokens(std::string_view text) const;

  // Random prompt of n tokens (n >= 1).
  std::string random_prompt(std::int64_t n, std::mt19937_64& rng) const;
  // Prompt of n tokens made of blocks of block_tokens tokens; block i's content is a
  // function of hash_ids[i] only. Tokens beyond hash_ids.size()*block_tokens come from
  // extra (random) content of the last hash id.
  std::string block_prompt(std::span<const std::int64_t> hash_ids, std::int64_t block_tokens,
                           std::int64_t n) const;

 private:
  // Exactly-n-token text starting from a draw of ids (tokenizer mode).
  std::string fit_tokens(std::vector<std::int32_t> ids, std::int64_t n, std::mt19937_64& rng) const;
  std::int32_t random_token(std::mt19937_64& rng, bool want_leading_space) const;
  std::string random_words(std::int64_t n, std::mt19937_64& rng) const;

  const model::Tokenizer* tokenizer_;
  std::vector<std::int32_t> pool_;        // plain text tokens
  std::vector<std::int32_t> space_pool_;  // those whose piece starts with ' '
};

}  // namespace ecoserve::loadgen
