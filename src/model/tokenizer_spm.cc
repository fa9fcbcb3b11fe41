// SentencePiece-style BPE ("llama" vocabularies), with llama.cpp's behaviour:
// spaces escaped to U+2581, a space prefix at the start of the text and after a
// special token, greedy merging of the adjacent pair whose merged text is the
// highest-scoring token (leftmost on ties), byte fallback to <0xNN> tokens.
#include <array>
#include <cstdio>
#include <queue>

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

    struct Symbol {
      int prev;
      int next;
      std::size_t offset;
      std::size_t n;
    };
    std::vector<Symbol> symbols;
    symbols.reserve(text.size());
    for (std::size_t off = 0; off < text.size();) {
      // One symbol per valid character; an invalid byte is a symbol of its own (llama.cpp
      // would let a bad lead byte swallow the next bytes, e.g. a following "▁").
      const utf8::DecodedChar d = utf8::decode_char(text, off);
      const std::size_t len = d.status == utf8::CharStatus::kValid ? d.length : 1;
      const int index = static_cast<int>(symbols.size());
      symbols.push_back(Symbol{index - 1, off + len == text.size() ? -1 : index + 1, off, len});
      off += len;
    }

    struct Bigram {
      int left;
      int right;
      float score;
      std::size_t size;
    };
    struct Less {
      bool operator()(const Bigram& l, const Bigram& r) const {
        return l.score < r.score || (l.score == r.score && l.left > r.left);
      }
    };
    std::priority_queue<Bigram, std::vector<Bigram>, Less> queue;
    const std::string_view tv(text);
    auto try_add = [&](int left, int right) {
      if (left < 0 || right < 0) return;
      const std::size_t size = symbols[left].n + symbols[right].n;
      const std::int32_t id = lookup(tv.substr(symbols[left].offset, size));
      if (id < 0) return;
      const float score = data().scores.empty() ? 0.0f : data().scores[id];
      queue.push(Bigram{left, right, score, size});
    };
    for (int i = 1; i < static_cast<int>(symbols.size()); ++i) try_add(i - 1, i);

    while (!queue.empty()) {
      const Bigram b = queue.top();
      queue.pop();
      Symbol& l = symbols[b.left];
      Symbol& r = symbols[b.right];
      if (l.n == 0 || r.n == 0 || l.n + r.n != b.size) continue;  // stale
      l.n += r.n;
      r.n = 0;
      l.next = r.next;
      if (r.next >= 0) symbols[r.next].prev = b.left;
      try_add(l.prev, b.left);
      try_add(b.left, l.next);
    }

    for (int i = 0; i != -1; i = symbols[i].next) {
      const Symbol& s = symbols[i];
      const std::string_view piece = tv.substr(s.offset, s.n);
      const std::int32_t id = lookup(piece);
      if (id >= 0) {
        out.push_back(id);
        continue;
      }
      for (char c : piece) {
        const std::int32_t bid = byte_to_token_[static_cast<std::uint8_t>(c)];
        if (bid >= 0) out.push_back(bid);
      }
    }
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
