// Pretokenizer: splits text into words with a sequence of regexes, the way
// llama.cpp (and HF tokenizers' Sequence of Split(behavior=Isolated)) does for
// byte-level BPE vocabularies.
//
// The first regex splits the whole text; each later regex splits every piece
// produced so far. Matches and the text between them both become pieces, so
// the pieces always concatenate back to the input. Each piece is matched as a
// subject of its own ($ and lookarounds see the piece's ends).
//
// Regexes are PCRE2 (UTF + UCP, $ matches only at the end). `\s` / `\S` are
// widened to Unicode White_Space (adds U+0085) like llama.cpp's tables.
//
// Owns the compiled patterns; immutable after creation; split() is thread-safe.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace ecoserve::model {

class Pretokenizer {
 public:
  // Regex list for a tokenizer.ggml.pre name (llama.cpp's names: "default",
  // "gpt-2", "llama-bpe"/"llama3", "qwen2", "deepseek-llm", "deepseek-coder",
  // "falcon", "starcoder", ...). NOT_FOUND for an unknown name.
  static StatusOr<std::vector<std::string>> regexes_for(std::string_view pre_name);

  // INVALID_ARGUMENT naming the pattern if one does not compile.
  static StatusOr<std::unique_ptr<Pretokenizer>> create(const std::vector<std::string>& regexes);

  ~Pretokenizer();
  Pretokenizer(const Pretokenizer&) = delete;
  Pretokenizer& operator=(const Pretokenizer&) = delete;

  // `text` must be valid UTF-8 (callers sanitize first). The views point into `text`.
  std::vector<std::string_view> split(std::string_view text) const;

 private:
  Pretokenizer();
  struct Compiled;
  std::vector<Compiled> patterns_;
};

}  // namespace ecoserve::model
