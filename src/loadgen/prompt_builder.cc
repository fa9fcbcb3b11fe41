#include "loadgen/prompt_builder.h"

#include <algorithm>
#include <array>

#include "model/tokenizer.h"

namespace ecoserve::loadgen {
namespace {

constexpr std::array<std::string_view, 64> kWords = {
    "the",   "of",    "and",   "to",    "in",     "is",    "you",   "that",  "it",    "he",
    "was",   "for",   "on",    "are",   "as",     "with",  "his",   "they",  "at",    "be",
    "this",  "have",  "from",  "or",    "one",    "had",   "by",    "word",  "but",   "not",
    "what",  "all",   "were",  "we",    "when",   "your",  "can",   "said",  "there", "use",
    "an",    "each",  "which", "she",   "do",     "how",   "their", "if",    "will",  "up",
    "other", "about", "out",   "many",  "then",   "them",  "these", "so",    "some",  "her",
    "would", "make",  "like",  "time"};

bool plain_piece(std::string_view piece) {
  if (piece.empty()) return false;
  for (unsigned char c : piece) {
    if (c < 0x20 || c == 0x7f) return false;  // no control characters / newlines
    if (c >= 0x80) return false;              // ASCII only: no split UTF-8 sequences
  }
  return true;
}

}  // namespace

PromptBuilder::PromptBuilder(const model::Tokenizer* tokenizer) : tokenizer_(tokenizer) {
  if (!tokenizer_) return;
  for (std::int32_t id = 0; id < tokenizer_->vocab_size(); ++id) {
    if (tokenizer_->token_type(id) != model::TokenType::kNormal) continue;
    std::string piece = tokenizer_->token_to_piece(id);
    if (!plain_piece(piece)) continue;
    // Keep only tokens the tokenizer itself produces for their text (some vocabularies
    // hold tokens that no merge sequence reaches): this makes lengths converge fast.
    auto alone = tokenizer_->encode(piece, false, /*parse_special=*/true);
    bool round_trips = alone.size() == 1 && alone[0] == id;
    if (!round_trips && piece[0] == ' ') {
      auto bare = tokenizer_->encode(std::string_view(piece).substr(1), false, /*parse_special=*/true);
      round_trips = bare.size() == 1 && bare[0] == id;
    }
    if (!round_trips) continue;
    pool_.push_back(id);
    if (piece.size() >= 2 && piece[0] == ' ' && piece[1] != ' ') space_pool_.push_back(id);
  }
  if (pool_.empty()) tokenizer_ = nullptr;  // nothing usable: fall back to words
  if (space_pool_.empty()) space_pool_ = pool_;
}

std::int64_t PromptBuilder::count_tokens(std::string_view text) const {
  if (tokenizer_) return static_cast<std::int64_t>(tokenizer_->encode(text, false, /*parse_special=*/true).size());
  return std::max<std::int64_t>(1, static_cast<std::int64_t>((text.size() + 3) / 4));
}

std::int32_t PromptBuilder::random_token(std::mt19937_64& rng, bool want_leading_space) const {
  const auto& pool = want_leading_space ? space_pool_ : pool_;
  std::uniform_int_distribution<std::size_t> u(0, pool.size() - 1);
  return pool[u(rng)];
}

std::string PromptBuilder::random_words(std::int64_t n, std::mt19937_64& rng) const {
  std::uniform_int_distribution<std::size_t> u(0, kWords.size() - 1);
  std::string out;
  for (std::int64_t i = 0; i < n; ++i) {
    out += ' ';
    out += kWords[u(rng)];
  }
  return out;
}

std::string PromptBuilder::fit_tokens(std::vector<std::int32_t> ids, std::int64_t n,
                                      std::mt19937_64& rng) const {
  std::string best = tokenizer_->decode(ids);
  std::int64_t best_err = -1;
  for (int iter = 0; iter < 24; ++iter) {
    std::string text = tokenizer_->decode(ids);
    auto m = static_cast<std::int64_t>(tokenizer_->encode(text, false, /*parse_special=*/true).size());
    std::int64_t err = std::abs(m - n);
    if (best_err < 0 || err < best_err) {
      best = text;
      best_err = err;
    }
    if (m == n) return text;
    if (m > n) {
      auto drop = static_cast<std::size_t>(std::max<std::int64_t>(1, (m - n + 1) / 2 + (iter > 8)));
      if (drop >= ids.size()) drop = ids.size() - 1;
      if (drop == 0) break;
      ids.resize(ids.size() - drop);
    } else {
      for (std::int64_t i = 0; i < n - m; ++i) ids.push_back(random_token(rng, true));
    }
  }
  return best;
}

std::string PromptBuilder::random_prompt(std::int64_t n, std::mt19937_64& rng) const {
  n = std::max<std::int64_t>(1, n);
  if (!tokenizer_) return random_words(n, rng);
  std::vector<std::int32_t> ids;
  ids.reserve(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) ids.push_back(random_token(rng, i == 0));
  return fit_tokens(std::move(ids), n, rng);
}

std::string PromptBuilder::block_prompt(std::span<const std::int64_t> hash_ids,
                                        std::int64_t block_tokens, std::int64_t n) const {
  block_tokens = std::max<std::int64_t>(1, block_tokens);
  std::string out;
  std::int64_t remaining = std::max<std::int64_t>(1, n);
  for (std::size_t i = 0; i < hash_ids.size() && remaining > 0; ++i) {
    bool last = i + 1 == hash_ids.size();
    std::int64_t take = last ? remaining : std::min(remaining, block_tokens);
    // The block's content depends only on its hash id (and a prefix of it when partial).
    std::mt19937_64 rng(0x6d6f6f6e63616b65ULL ^ static_cast<std::uint64_t>(hash_ids[i]) * 0x9e3779b97f4a7c15ULL);
    if (!tokenizer_) {
      out += random_words(take, rng);
    } else {
      std::vector<std::int32_t> ids;
      for (std::int64_t k = 0; k < take; ++k) ids.push_back(random_token(rng, k == 0));
      std::string text = fit_tokens(std::move(ids), take, rng);
      if (!out.empty() && (text.empty() || text[0] != ' ')) out += ' ';
      out += text;
    }
    remaining -= take;
  }
  if (remaining > 0) {
    std::mt19937_64 rng(static_cast<std::uint64_t>(n));
    out += random_prompt(remaining, rng);
  }
  return out;
}

}  // namespace ecoserve::loadgen
