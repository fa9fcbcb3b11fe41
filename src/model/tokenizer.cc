#include "model/tokenizer.h"

#include "model/tokenizer_utf8.h"
#include "model/tokenizer_vocab.h"

namespace ecoserve::model {

StatusOr<std::unique_ptr<Tokenizer>> Tokenizer::from_gguf(const GgufFile& file) {
  ECO_ASSIGN_OR_RETURN(VocabData data, read_vocab_data(file));
  if (data.model == "llama") return make_spm_tokenizer(std::move(data));
  if (file.find("tokenizer.ggml.merges") == nullptr) {
    return not_found_error("tokenizer: gpt2 tokenizer without tokenizer.ggml.merges");
  }
  ECO_ASSIGN_OR_RETURN(std::vector<std::string> merges, file.get_string_array("tokenizer.ggml.merges"));
  return make_bpe_tokenizer(std::move(data), std::move(merges));
}

std::vector<std::int32_t> Tokenizer::eog_token_ids() const {
  std::vector<std::int32_t> ids;
  for (std::int32_t id = 0; id < vocab_size(); ++id) {
    if (is_eog(id)) ids.push_back(id);
  }
  return ids;
}

std::string Tokenizer::decode(std::span<const std::int32_t> ids, bool render_special) const {
  std::string out;
  const std::size_t first = (!ids.empty() && bos_id() >= 0 && ids[0] == bos_id()) ? 1 : 0;
  const bool strip = add_space_prefix();
  for (std::size_t i = 0; i < ids.size(); ++i) {
    std::string piece = token_to_piece(ids[i], render_special);
    if (strip && i == first && !piece.empty() && piece[0] == ' ') piece.erase(0, 1);
    out += piece;
  }
  return out;
}

IncrementalDetokenizer::IncrementalDetokenizer(const Tokenizer& tokenizer, bool render_special,
                                               bool strip_leading_space)
    : tokenizer_(tokenizer),
      render_special_(render_special),
      first_(strip_leading_space && tokenizer.add_space_prefix()) {}

std::string IncrementalDetokenizer::push(std::int32_t id) {
  std::string piece = tokenizer_.token_to_piece(id, render_special_);
  if (first_ && !(tokenizer_.bos_id() >= 0 && id == tokenizer_.bos_id())) {
    if (!piece.empty() && piece[0] == ' ') piece.erase(0, 1);
    first_ = false;
  }
  pending_ += piece;

  // Emit every complete character; hold back a trailing incomplete one.
  std::string out;
  std::size_t i = 0;
  while (i < pending_.size()) {
    const utf8::DecodedChar d = utf8::decode_char(pending_, i);
    if (d.status == utf8::CharStatus::kIncomplete) break;
    if (d.status == utf8::CharStatus::kValid) {
      out.append(pending_, i, d.length);
      i += d.length;
    } else {
      out.append(utf8::kReplacement);
      i += 1;
    }
  }
  pending_.erase(0, i);
  return out;
}

std::string IncrementalDetokenizer::flush() {
  if (pending_.empty()) return {};
  pending_.clear();
  return std::string(utf8::kReplacement);
}

}  // namespace ecoserve::model
