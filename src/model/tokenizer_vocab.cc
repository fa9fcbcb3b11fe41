#include "model/tokenizer_vocab.h"

#include <algorithm>
#include <numeric>

namespace ecoserve::model {

namespace {

constexpr std::string_view kEogTexts[] = {
    "<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>", "<|eom_id|>",
    "<EOT>",      "_<EOT>",     "<|end_of_text|>",
    "<\xEF\xBD\x9C" "end\xE2\x96\x81" "of\xE2\x96\x81" "sentence\xEF\xBD\x9C>",  // DeepSeek
};

TokenType to_token_type(std::int64_t v) {
  if (v >= 0 && v <= 6) return static_cast<TokenType>(v);
  return TokenType::kUndefined;
}

// Reads an optional token id key; keeps `def` when absent or out of range (like llama.cpp).
StatusOr<std::int32_t> read_id(const GgufFile& f, std::string_view key, std::int32_t def,
                               std::size_t n_tokens) {
  ECO_ASSIGN_OR_RETURN(std::int64_t v, f.get_int_or(key, -1));
  if (f.find(key) == nullptr) return def;
  if (v < 0 || static_cast<std::size_t>(v) >= n_tokens) return def;
  return static_cast<std::int32_t>(v);
}

bool is_llama3_pre(std::string_view pre) {
  return pre == "llama3" || pre == "llama-v3" || pre == "llama-bpe" || pre == "falcon3";
}

}  // namespace

StatusOr<VocabData> read_vocab_data(const GgufFile& f) {
  VocabData d;
  if (f.find("tokenizer.ggml.model") == nullptr) {
    return not_found_error("tokenizer: the file has no tokenizer (tokenizer.ggml.model missing)");
  }
  ECO_ASSIGN_OR_RETURN(d.model, f.get_string("tokenizer.ggml.model"));
  const bool spm = d.model == "llama";
  if (!spm && d.model != "gpt2") {
    return invalid_argument_error(
        "tokenizer: unsupported tokenizer.ggml.model '{}' (supported: llama, gpt2)", d.model);
  }
  d.pre = "default";
  if (f.find("tokenizer.ggml.pre") != nullptr) {
    ECO_ASSIGN_OR_RETURN(d.pre, f.get_string("tokenizer.ggml.pre"));
  }
  if (f.find("tokenizer.ggml.tokens") == nullptr) {
    return not_found_error("tokenizer: tokenizer.ggml.tokens missing");
  }
  ECO_ASSIGN_OR_RETURN(d.tokens, f.get_string_array("tokenizer.ggml.tokens"));
  if (d.tokens.empty()) return invalid_argument_error("tokenizer: tokenizer.ggml.tokens is empty");
  if (d.tokens.size() > static_cast<std::size_t>(INT32_MAX)) {
    return invalid_argument_error("tokenizer: {} tokens is too many", d.tokens.size());
  }
  const std::size_t n = d.tokens.size();
  for (std::size_t i = 0; i < n; ++i) {
    if (d.tokens[i].empty()) d.tokens[i] = "[EMPTY_" + std::to_string(i) + "]";
  }
  if (f.find("tokenizer.ggml.scores") != nullptr) {
    ECO_ASSIGN_OR_RETURN(std::vector<double> scores, f.get_float_array("tokenizer.ggml.scores"));
    if (scores.size() != n) {
      return invalid_argument_error("tokenizer: tokenizer.ggml.scores has {} entries for {} tokens",
                                    scores.size(), n);
    }
    d.scores.assign(scores.begin(), scores.end());
  }
  d.types.assign(n, TokenType::kNormal);
  if (f.find("tokenizer.ggml.token_type") != nullptr) {
    ECO_ASSIGN_OR_RETURN(std::vector<std::int64_t> types, f.get_int_array("tokenizer.ggml.token_type"));
    if (types.size() != n) {
      return invalid_argument_error("tokenizer: tokenizer.ggml.token_type has {} entries for {} tokens",
                                    types.size(), n);
    }
    for (std::size_t i = 0; i < n; ++i) d.types[i] = to_token_type(types[i]);
  }

  // llama.cpp's defaults: SentencePiece vocabularies use <unk>=0, <s>=1, </s>=2.
  auto valid = [n](std::int32_t id) { return id >= 0 && static_cast<std::size_t>(id) < n ? id : -1; };
  ECO_ASSIGN_OR_RETURN(d.bos_id, read_id(f, "tokenizer.ggml.bos_token_id", spm ? valid(1) : -1, n));
  ECO_ASSIGN_OR_RETURN(d.eos_id, read_id(f, "tokenizer.ggml.eos_token_id", spm ? valid(2) : -1, n));
  ECO_ASSIGN_OR_RETURN(d.unk_id, read_id(f, "tokenizer.ggml.unknown_token_id", spm ? valid(0) : -1, n));
  ECO_ASSIGN_OR_RETURN(d.pad_id, read_id(f, "tokenizer.ggml.padding_token_id", -1, n));
  ECO_ASSIGN_OR_RETURN(d.eot_id, read_id(f, "tokenizer.ggml.eot_token_id", -1, n));
  ECO_ASSIGN_OR_RETURN(d.eom_id, read_id(f, "tokenizer.ggml.eom_token_id", -1, n));

  ECO_ASSIGN_OR_RETURN(d.add_bos,
                       f.get_bool_or("tokenizer.ggml.add_bos_token", spm || is_llama3_pre(d.pre)));
  ECO_ASSIGN_OR_RETURN(d.add_eos, f.get_bool_or("tokenizer.ggml.add_eos_token", false));
  ECO_ASSIGN_OR_RETURN(d.add_space_prefix, f.get_bool_or("tokenizer.ggml.add_space_prefix", spm));
  if (d.add_bos && d.bos_id < 0) d.add_bos = false;
  if (d.add_eos && d.eos_id < 0) d.add_eos = false;
  return d;
}

VocabTokenizer::VocabTokenizer(VocabData data) : data_(std::move(data)) {
  const std::size_t n = data_.tokens.size();
  token_to_id_.reserve(n * 2);
  for (std::size_t i = 0; i < n; ++i) token_to_id_[data_.tokens[i]] = static_cast<std::int32_t>(i);

  // End-of-generation tokens; tokens that look like EOT are made control tokens (llama.cpp does too).
  eog_.assign(n, false);
  for (std::string_view t : kEogTexts) {
    const std::int32_t id = lookup(t);
    if (id < 0) continue;
    if (data_.eot_id < 0 && t != "<|eom_id|>") data_.eot_id = id;
    if (data_.types[id] != TokenType::kControl) data_.types[id] = TokenType::kControl;
    eog_[id] = true;
  }
  for (std::int32_t id : {data_.eos_id, data_.eot_id, data_.eom_id}) {
    if (id >= 0) eog_[id] = true;
  }

  for (std::size_t i = 0; i < n; ++i) {
    const TokenType t = data_.types[i];
    if (t == TokenType::kControl || t == TokenType::kUserDefined || t == TokenType::kUnknown) {
      special_tokens_.push_back(static_cast<std::int32_t>(i));
    }
  }
  std::stable_sort(special_tokens_.begin(), special_tokens_.end(), [this](std::int32_t a, std::int32_t b) {
    return data_.tokens[a].size() > data_.tokens[b].size();
  });
}

std::int32_t VocabTokenizer::lookup(std::string_view text) const {
  auto it = token_to_id_.find(text);
  return it == token_to_id_.end() ? -1 : it->second;
}

std::int32_t VocabTokenizer::find_token(std::string_view text) const { return lookup(text); }

std::string_view VocabTokenizer::token_text(std::int32_t id) const {
  if (id < 0 || id >= vocab_size()) return {};
  return data_.tokens[id];
}

TokenType VocabTokenizer::token_type(std::int32_t id) const {
  if (id < 0 || id >= vocab_size()) return TokenType::kUndefined;
  return data_.types[id];
}

bool VocabTokenizer::is_eog(std::int32_t id) const {
  return id >= 0 && id < vocab_size() && eog_[id];
}

std::vector<VocabTokenizer::Fragment> VocabTokenizer::partition(std::string_view text,
                                                                bool parse_special) const {
  std::vector<Fragment> frags;
  if (text.empty()) return frags;
  frags.push_back(Fragment{-1, 0, text.size()});
  std::vector<Fragment> next;
  for (std::int32_t id : special_tokens_) {
    const TokenType type = data_.types[id];
    if (!parse_special && (type == TokenType::kControl || type == TokenType::kUnknown)) continue;
    const std::string& tok = data_.tokens[id];
    if (text.find(tok) == std::string_view::npos) continue;
    next.clear();
    for (const Fragment& f : frags) {
      if (f.token >= 0) {
        next.push_back(f);
        continue;
      }
      const std::size_t end = f.offset + f.length;
      std::size_t pos = f.offset;
      while (true) {
        const std::size_t m = text.find(tok, pos);
        if (m == std::string_view::npos || m + tok.size() > end) break;
        if (m > pos) next.push_back(Fragment{-1, pos, m - pos});
        next.push_back(Fragment{id, 0, 0});
        pos = m + tok.size();
      }
      if (pos < end) next.push_back(Fragment{-1, pos, end - pos});
    }
    frags.swap(next);
  }
  return frags;
}

std::vector<std::int32_t> VocabTokenizer::encode(std::string_view text, bool add_special,
                                                 bool parse_special) const {
  std::vector<std::int32_t> out;
  out.reserve(text.size() / 3 + 4);
  if (add_special && data_.add_bos) out.push_back(data_.bos_id);
  bool after_special = true;
  for (const Fragment& f : partition(text, parse_special)) {
    if (f.token >= 0) {
      out.push_back(f.token);
      after_special = true;
    } else {
      encode_text(text.substr(f.offset, f.length), after_special, out);
      after_special = false;
    }
  }
  if (add_special && data_.add_eos) out.push_back(data_.eos_id);
  return out;
}

std::string VocabTokenizer::token_to_piece(std::int32_t id, bool render_special) const {
  if (id < 0 || id >= vocab_size()) return {};
  switch (data_.types[id]) {
    case TokenType::kControl:
    case TokenType::kUnknown:
      return render_special ? data_.tokens[id] : std::string();
    case TokenType::kUserDefined:
      return data_.tokens[id];
    case TokenType::kNormal:
    case TokenType::kByte:
      return normal_piece(id);
    default:
      return {};
  }
}

}  // namespace ecoserve::model
