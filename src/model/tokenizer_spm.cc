// SentencePiece-style BPE ("llama" vocabularies), with llama.cpp's behaviour:
// spaces escaped to U+2581, a space prefix at the start of the text and after a
// special token, greedy merging of the adjacent pair whose merged text is the
// highest-scoring token (leftmost on ties), byte fallback to <0xNN> tokens.
#include <array>
#include <cstdio>
#include <optional>

#include "model/tokenizer_merge.h"
#include "model/tokenizer_utf8.h"
#include "model/tokenizer_vocab.h"

namespace ecoserve::model {

namespace {

constexpr std::string_view kSpace = "\xE2\x96\x81";  // U+2581 "▁"

// Parses "<0xNN>"; -1 if `text` is not of that form.
int parse_byte_token(std::string_view text) {
  if (text.size() != 6 || text.substr(0, 3) != "<0x" || text[5] != '>') return -1;
  int v = 0;
  for (int i = 3; i < 5; ++i) {
    const char c = text[i];
    v <<= 4;
    if (c >= '0' && c <= '9') v |= c - '0';
    else if (c >= 'A' && c <= 'F') v |= c - 'A' + 10;
    else if (c >= 'a' && c <= 'f') v |= c - 'a' + 10;
    else return -1;
  }
  return v;
}

class SpmTokenizer final : public VocabTokenizer {
 public:
  explicit SpmTokenizer(VocabData data) : VocabTokenizer(std::move(data)) {
    for (int b = 0; b < 256; ++b) {
      char buf[8];
      std::snprintf(buf, sizeof(buf), "<0x%02X>", b);
      std::int32_t id = lookup(buf);
      if (id < 0) id = lookup(std::string(1, static_cast<char>(b)));
      if (id < 0) id = this->data().unk_id;
      byte_to_token_[b] = id;
    }
  }

 protected:
  void encode_text(std::string_view raw, bool after_special, std::vector<std::int32_t>& out) const override {
    // Escape spaces (and add the prefix space).
    std::string text;
    text.reserve(raw.size() * 2 + 3);
    if (data().add_space_prefix && after_special) text.append(kSpace);
    for (char c : raw) {
      if (c == ' ') text.append(kSpace);
      else text += c;
    }
    if (text.empty()) return;

    SymbolMerger merger;
    // One symbol per valid character; an invalid byte is a symbol of its own (llama.cpp
    // would let a bad lead byte swallow the next bytes, e.g. a following "▁").
    merger.reset(text, [](std::string_view t, std::size_t off) -> std::size_t {
      const utf8::DecodedChar d = utf8::decode_char(t, off);
      return d.status == utf8::CharStatus::kValid ? d.length : 1;
    });
    merger.merge<float>([this](std::string_view merged, std::size_t /*left_size*/) -> std::optional<float> {
      const std::int32_t id = lookup(merged);
      if (id < 0) return std::nullopt;
      return data().scores.empty() ? 0.0f : data().scores[id];
    });
    merger.emit([this](std::string_view piece) { return lookup(piece); }, byte_to_token_, out);
  }

  std::string normal_piece(std::int32_t id) const override {
    const std::string& t = data().tokens[id];
    if (data().types[id] == TokenType::kByte) {
      const int b = parse_byte_token(t);
      if (b >= 0) return std::string(1, static_cast<char>(b));
      return t;
    }
    std::string out;
    out.reserve(t.size());
    for (std::size_t i = 0; i < t.size();) {
      if (t.compare(i, kSpace.size(), kSpace) == 0) {
        out += ' ';
        i += kSpace.size();
      } else {
        out += t[i++];
      }
    }
    return out;
  }

 private:
  std::array<std::int32_t, 256> byte_to_token_{};
};

}  // namespace

StatusOr<std::unique_ptr<Tokenizer>> make_spm_tokenizer(VocabData data) {
  return std::unique_ptr<Tokenizer>(new SpmTokenizer(std::move(data)));
}

}  // namespace ecoserve::model
