// Byte-level BPE ("gpt2" vocabularies), with llama.cpp's behaviour: the text is
// split into words by the pre-tokenizer regexes, each word's bytes are mapped to
// printable characters with GPT-2's byte-to-unicode table, and adjacent symbols
// are merged lowest merge rank first (leftmost on ties).
#include <array>
#include <optional>
#include <unordered_map>

#include "model/pretokenizer.h"
#include "model/tokenizer_merge.h"
#include "model/tokenizer_utf8.h"
#include "model/tokenizer_vocab.h"

namespace ecoserve::model {

namespace {

// GPT-2's table: printable Latin-1 bytes map to themselves, the other 68 bytes to
// U+0100.. in byte order.
struct ByteMap {
  std::array<std::string, 256> byte_to_utf8;
  std::array<int, 324> cp_to_byte;
  ByteMap() {
    cp_to_byte.fill(-1);
    int next = 256;
    for (int b = 0; b < 256; ++b) {
      const bool keep = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255);
      const int cp = keep ? b : next++;
      utf8::append_codepoint(byte_to_utf8[b], static_cast<std::uint32_t>(cp));
      cp_to_byte[cp] = b;
    }
  }
};

class BpeTokenizer final : public VocabTokenizer {
 public:
  BpeTokenizer(VocabData data, std::unique_ptr<Pretokenizer> pre,
               std::unordered_map<std::string, int> ranks)
      : VocabTokenizer(std::move(data)), pre_(std::move(pre)), ranks_(std::move(ranks)) {
    const std::string_view p = pre_name();
    ignore_merges_ = p == "llama3" || p == "llama-v3" || p == "llama-bpe" || p == "falcon3";
    for (int b = 0; b < 256; ++b) byte_tokens_[b] = lookup(std::string(1, static_cast<char>(b)));
  }

 protected:
  void encode_text(std::string_view raw, bool /*after_special*/,
                   std::vector<std::int32_t>& out) const override {
    std::string sanitized;
    std::string_view text = raw;
    if (!utf8::is_valid(raw)) {
      sanitized = utf8::sanitize(raw);
      text = sanitized;
    }
    std::string word;
    std::string key;
    SymbolMerger merger;
    for (std::string_view w : pre_->split(text)) {
      word.clear();
      for (char c : w) word += map_.byte_to_utf8[static_cast<std::uint8_t>(c)];
      encode_word(word, merger, key, out);
    }
  }

  std::string normal_piece(std::int32_t id) const override {
    const std::string& t = data().tokens[id];
    std::string out;
    out.reserve(t.size());
    std::size_t i = 0;
    while (i < t.size()) {
      const utf8::DecodedChar d = utf8::decode_char(t, i);
      if (d.status != utf8::CharStatus::kValid) {
        out += t[i++];
        continue;
      }
      if (d.codepoint < map_.cp_to_byte.size() && map_.cp_to_byte[d.codepoint] >= 0) {
        out += static_cast<char>(map_.cp_to_byte[d.codepoint]);
      } else {
        out.append(t, i, d.length);  // not a byte-level character: keep it as is
      }
      i += d.length;
    }
    return out;
  }

 private:
  // Merge rank of the pair `merged` split at `left_size`, as a merge priority
  // (lower rank merges first); std::nullopt when the pair is not a merge.
  std::optional<int> priority(std::string_view merged, std::size_t left_size, std::string& key) const {
    key.assign(merged.substr(0, left_size));
    key += '\xFF';
    key.append(merged.substr(left_size));
    auto it = ranks_.find(key);
    if (it == ranks_.end()) return std::nullopt;
    return -it->second;
  }

  void encode_word(std::string_view word, SymbolMerger& merger, std::string& key,
                   std::vector<std::int32_t>& out) const {
    if (word.empty()) return;
    if (ignore_merges_) {
      const std::int32_t id = lookup(word);
      if (id >= 0) {
        out.push_back(id);
        return;
      }
    }
    merger.reset(word, [](std::string_view t, std::size_t off) { return utf8::sequence_length(t[off]); });
    merger.merge<int>([&](std::string_view merged, std::size_t left_size) {
      return priority(merged, left_size, key);
    });
    // Not in the vocabulary: single-byte tokens where they exist (llama.cpp).
    merger.emit([this](std::string_view piece) { return lookup(piece); }, byte_tokens_, out);
  }

  ByteMap map_;
  std::unique_ptr<Pretokenizer> pre_;
  std::unordered_map<std::string, int> ranks_;
  std::array<std::int32_t, 256> byte_tokens_{};  // the token of each lone byte, -1 if none
  bool ignore_merges_ = false;
};

}  // namespace

StatusOr<std::unique_ptr<Tokenizer>> make_bpe_tokenizer(VocabData data, std::vector<std::string> merges) {
  ECO_ASSIGN_OR_RETURN(std::vector<std::string> regexes, Pretokenizer::regexes_for(data.pre));
  ECO_ASSIGN_OR_RETURN(std::unique_ptr<Pretokenizer> pre, Pretokenizer::create(regexes));
  std::unordered_map<std::string, int> ranks;
  ranks.reserve(merges.size() * 2);
  for (std::size_t i = 0; i < merges.size(); ++i) {
    const std::string& m = merges[i];
    const std::size_t sp = m.find(' ', 1);
    if (sp == std::string::npos) continue;  // malformed: never matches (llama.cpp ignores it too)
    std::string key = m.substr(0, sp);
    key += '\xFF';
    key.append(m, sp + 1);
    ranks.emplace(std::move(key), static_cast<int>(i));  // first occurrence wins
  }
  return std::unique_ptr<Tokenizer>(new BpeTokenizer(std::move(data), std::move(pre), std::move(ranks)));
}

}  // namespace ecoserve::model
