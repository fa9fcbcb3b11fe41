// SymbolMerger: the greedy adjacent-pair merge that both vocabulary tokenizers
// run (llama.cpp's llm_tokenizer_spm / llm_tokenizer_bpe mechanism). The text is
// split into initial symbols, then the best-priority adjacent pair (leftmost on
// ties) is merged repeatedly until no pair has a priority; the final symbols are
// emitted as tokens, with a per-byte fallback for pieces not in the vocabulary.
// What differs between the tokenizers (how characters are cut, how a pair is
// ranked, which token a lone byte becomes) is passed in.
// Holds scratch reused across calls; one instance per thread.
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <queue>
#include <string_view>
#include <vector>

namespace ecoserve::model {

class SymbolMerger {
 public:
  // Starts on `text` (which must outlive the merge): one symbol per
  // char_length(text, offset) bytes, clamped to the end of the text.
  template <typename CharLength>
  void reset(std::string_view text, CharLength&& char_length) {
    text_ = text;
    symbols_.clear();
    for (std::size_t off = 0; off < text.size();) {
      const std::size_t len = std::min<std::size_t>(char_length(text, off), text.size() - off);
      const int index = static_cast<int>(symbols_.size());
      symbols_.push_back(Symbol{index - 1, off + len == text.size() ? -1 : index + 1, off, len});
      off += len;
    }
  }

  // Merges until no adjacent pair has a priority. pair_priority(merged, left_size)
  // gets the text of the two adjacent symbols and the length of the left one, and
  // returns std::nullopt when they never merge; the highest priority merges first,
  // the leftmost pair on ties.
  template <typename Priority, typename PairPriority>
  void merge(PairPriority&& pair_priority) {
    struct Bigram {
      int left;
      int right;
      Priority priority;
      std::size_t size;
    };
    struct Less {
      bool operator()(const Bigram& l, const Bigram& r) const {
        return l.priority < r.priority || (l.priority == r.priority && l.left > r.left);
      }
    };
    std::priority_queue<Bigram, std::vector<Bigram>, Less> queue;
    auto try_add = [&](int left, int right) {
      if (left < 0 || right < 0) return;
      const Symbol& l = symbols_[left];
      const std::size_t size = l.n + symbols_[right].n;
      const std::optional<Priority> p = pair_priority(text_.substr(l.offset, size), l.n);
      if (!p) return;
      queue.push(Bigram{left, right, *p, size});
    };
    for (int i = 1; i < static_cast<int>(symbols_.size()); ++i) try_add(i - 1, i);

    while (!queue.empty()) {
      const Bigram b = queue.top();
      queue.pop();
      Symbol& l = symbols_[b.left];
      Symbol& r = symbols_[b.right];
      if (l.n == 0 || r.n == 0 || l.n + r.n != b.size) continue;  // stale
      l.n += r.n;
      r.n = 0;
      l.next = r.next;
      if (r.next >= 0) symbols_[r.next].prev = b.left;
      try_add(l.prev, b.left);
      try_add(b.left, l.next);
    }
  }

  // Appends the token of each symbol left to right: lookup(piece) when >= 0, else
  // byte_tokens[b] for each byte b of the piece that has one (>= 0).
  template <typename Lookup>
  void emit(Lookup&& lookup, const std::array<std::int32_t, 256>& byte_tokens,
            std::vector<std::int32_t>& out) const {
    if (symbols_.empty()) return;
    for (int i = 0; i != -1; i = symbols_[i].next) {
      const Symbol& s = symbols_[i];
      const std::string_view piece = text_.substr(s.offset, s.n);
      const std::int32_t id = lookup(piece);
      if (id >= 0) {
        out.push_back(id);
        continue;
      }
      for (char c : piece) {
        const std::int32_t bid = byte_tokens[static_cast<std::uint8_t>(c)];
        if (bid >= 0) out.push_back(bid);
      }
    }
  }

 private:
  // The bytes [offset, offset + n) of the text, linked to the live neighbours;
  // n == 0 once merged into its left neighbour.
  struct Symbol {
    int prev;
    int next;
    std::size_t offset;
    std::size_t n;
  };

  std::string_view text_;
  std::vector<Symbol> symbols_;
};

}  // namespace ecoserve::model
