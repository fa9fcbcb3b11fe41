// VocabTokenizer: what the SentencePiece-style and byte-level BPE tokenizers
// share: the token table from GGUF metadata, special ids, and llama.cpp's
// special-token partition of the input. Subclasses only tokenize plain text
// and render normal tokens.
// Immutable after creation; thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "model/tokenizer.h"

namespace ecoserve::model {

// Everything read from tokenizer.* metadata that both tokenizer kinds use.
struct VocabData {
  std::string model;  // "llama" | "gpt2"
  std::string pre;    // "default" when absent
  std::vector<std::string> tokens;
  std::vector<float> scores;     // empty if absent
  std::vector<TokenType> types;  // same size as tokens
  std::int32_t bos_id = -1;
  std::int32_t eos_id = -1;
  std::int32_t unk_id = -1;
  std::int32_t pad_id = -1;
  std::int32_t eot_id = -1;
  std::int32_t eom_id = -1;
  bool add_bos = false;
  bool add_eos = false;
  bool add_space_prefix = false;
};

// Reads tokenizer.* keys with llama.cpp's defaults for the model kind.
StatusOr<VocabData> read_vocab_data(const GgufFile& file);

class VocabTokenizer : public Tokenizer {
 public:
  explicit VocabTokenizer(VocabData data);

  std::vector<std::int32_t> encode(std::string_view text, bool add_special,
                                   bool parse_special = false) const override;
  std::string token_to_piece(std::int32_t id, bool render_special = false) const override;

  std::int32_t vocab_size() const override { return static_cast<std::int32_t>(data_.tokens.size()); }
  std::string_view token_text(std::int32_t id) const override;
  TokenType token_type(std::int32_t id) const override;
  std::int32_t bos_id() const override { return data_.bos_id; }
  std::int32_t eos_id() const override { return data_.eos_id; }
  bool add_bos() const override { return data_.add_bos; }
  bool add_eos() const override { return data_.add_eos; }
  bool add_space_prefix() const override { return data_.add_space_prefix; }
  bool is_eog(std::int32_t id) const override;
  std::string_view model_name() const override { return data_.model; }
  std::string_view pre_name() const override { return data_.pre; }
  std::int32_t find_token(std::string_view text) const override;

  // A piece of the input after special-token partition: a token id, or raw text.
  struct Fragment {
    std::int32_t token = -1;  // >= 0: a special token
    std::size_t offset = 0;   // raw text [offset, offset + length)
    std::size_t length = 0;
  };
  // llama.cpp's tokenizer_st_partition: every special token, longest text first,
  // splits the raw fragments at each occurrence. Control and unknown tokens only
  // when parse_special; user-defined tokens always.
  std::vector<Fragment> partition(std::string_view text, bool parse_special) const;

 protected:
  // Appends the tokens of plain text. `after_special` is true at the start of the
  // input and right after a special token.
  virtual void encode_text(std::string_view text, bool after_special,
                           std::vector<std::int32_t>& out) const = 0;
  // The bytes of a normal token.
  virtual std::string normal_piece(std::int32_t id) const = 0;

  const VocabData& data() const { return data_; }
  // Hash lookup of an exact token text, -1 if none.
  std::int32_t lookup(std::string_view text) const;

 private:
  struct StringHash {
    using is_transparent = void;
    std::size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };
  VocabData data_;
  std::unordered_map<std::string, std::int32_t, StringHash, std::equal_to<>> token_to_id_;
  std::vector<std::int32_t> special_tokens_;  // control / user-defined / unknown, longest first
  std::vector<bool> eog_;
};

// Factories for the two kinds (tokenizer_spm.cc, tokenizer_bpe.cc).
StatusOr<std::unique_ptr<Tokenizer>> make_spm_tokenizer(VocabData data);
StatusOr<std::unique_ptr<Tokenizer>> make_bpe_tokenizer(VocabData data,
                                                        std::vector<std::string> merges);

}  // namespace ecoserve::model
