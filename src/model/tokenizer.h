// Tokenizer: text <-> token ids, built from a GGUF file's tokenizer.* metadata.
//
// Supports tokenizer.ggml.model "llama" (SentencePiece-style: scores, byte
// fallback <0xNN>, leading-space "▁" handling) and "gpt2" (byte-level BPE with
// merges and the pre-tokenizer regexes named by tokenizer.ggml.pre: default/gpt-2,
// llama3 (llama-bpe), qwen2, deepseek-llm, falcon, ...). Special/control tokens
// are matched in the text when parse_special is true.
// Immutable after creation; thread-safe.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "model/gguf.h"

namespace ecoserve::model {

enum class TokenType : std::int32_t {
  kUndefined = 0,
  kNormal = 1,
  kUnknown = 2,
  kControl = 3,
  kUserDefined = 4,
  kUnused = 5,
  kByte = 6,
};

class Tokenizer {
 public:
  // INVALID_ARGUMENT/NOT_FOUND with a clear message for a missing or unsupported tokenizer.
  static StatusOr<std::unique_ptr<Tokenizer>> from_gguf(const GgufFile& file);
  virtual ~Tokenizer() = default;

  // add_special: prepend BOS / append EOS as the model's metadata says
  // (tokenizer.ggml.add_bos_token / add_eos_token, with llama.cpp's defaults).
  // parse_special: recognise control/user-defined token texts inside `text`.
  virtual std::vector<std::int32_t> encode(std::string_view text, bool add_special,
                                           bool parse_special = false) const = 0;

  // The raw bytes a token stands for (byte tokens decoded, "▁" -> ' ', GPT-2 byte map undone).
  // Control tokens give "" unless render_special.
  virtual std::string token_to_piece(std::int32_t id, bool render_special = false) const = 0;
  // Concatenated pieces; SentencePiece's leading space after BOS is removed like llama.cpp.
  std::string decode(std::span<const std::int32_t> ids, bool render_special = false) const;

  virtual std::int32_t vocab_size() const = 0;
  virtual std::string_view token_text(std::int32_t id) const = 0;  // as stored in the vocab
  virtual TokenType token_type(std::int32_t id) const = 0;
  virtual std::int32_t bos_id() const = 0;  // -1 if none
  virtual std::int32_t eos_id() const = 0;  // -1 if none
  virtual bool add_bos() const = 0;
  virtual bool add_eos() const = 0;
  // SentencePiece-style: a space is prepended to the text before tokenizing, and
  // decode()/IncrementalDetokenizer strip it from the first non-BOS token.
  virtual bool add_space_prefix() const { return false; }
  // End-of-generation tokens: eos, eot (tokenizer.ggml.eot_token_id), <|im_end|>, <|eot_id|>, ...
  virtual bool is_eog(std::int32_t id) const = 0;
  // Every id for which is_eog() holds, ascending.
  std::vector<std::int32_t> eog_token_ids() const;
  // "llama" or "gpt2"; and the pre-tokenizer name ("default" when absent).
  virtual std::string_view model_name() const = 0;
  virtual std::string_view pre_name() const = 0;
  // Id of a token whose text is exactly `text`, or -1.
  virtual std::int32_t find_token(std::string_view text) const = 0;
};

// Turns a stream of token ids into text chunks, never splitting a UTF-8 character
// between chunks: bytes of an incomplete character are held back until the next
// token completes it (or flush() at the end, which emits any leftover bytes as U+FFFD).
// Also strips the SentencePiece leading space of the first token like decode()
// (pass strip_leading_space = false when the ids continue a prompt, e.g. for a
// completion, so " there" after "Once upon a time" keeps its space).
// One per sequence; not thread-safe.
class IncrementalDetokenizer {
 public:
  explicit IncrementalDetokenizer(const Tokenizer& tokenizer, bool render_special = false,
                                  bool strip_leading_space = true);
  // Text that became complete with this token (possibly empty).
  std::string push(std::int32_t id);
  std::string flush();

 private:
  const Tokenizer& tokenizer_;
  bool render_special_;
  bool first_ = true;  // no non-BOS token seen yet (and stripping enabled)
  std::string pending_;
};

}  // namespace ecoserve::model
