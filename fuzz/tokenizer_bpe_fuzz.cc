// Fuzz target: the byte-level BPE tokenizer ("gpt2" vocabularies) on arbitrary
// text, with llama.cpp's gpt-2, falcon and deepseek-llm vocabularies (three
// pre-tokenizers; deepseek-llm has user-defined tokens split out of plain text).
//
// What the tokenizer guarantees, and is checked here:
// - every id is in the vocabulary; add_special adds BOS/EOS exactly as add_bos()/add_eos() say;
// - invalid UTF-8 is replaced by U+FFFD before tokenizing, and byte-level BPE
//   with a token for every byte loses nothing else: decode(encode(x)) == x for
//   valid UTF-8 x, and is valid UTF-8 for any x (== the sanitized x when no
//   user-defined token splits the text). A vocabulary without a token for some
//   byte drops that byte (llama.cpp does the same; falcon's lacks 28: control bytes,
//   0xC0, 0xC1, 0xF2 and 0xF5-0xFF), so valid text holding one of them (0xF2 leads
//   valid 4-byte characters) may decode to invalid UTF-8;
// - with parse_special the control tokens found in the text render back to their
//   text: decode(encode(x, parse_special), render_special) == x for valid UTF-8 x;
// - IncrementalDetokenizer's chunks are valid UTF-8 and join to decode().
#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "fuzz_util.h"
#include "fuzz_vocab.h"
#include "model/tokenizer.h"
#include "model/tokenizer_utf8.h"

namespace {

using ecoserve::model::IncrementalDetokenizer;
using ecoserve::model::Tokenizer;
using ecoserve::model::TokenType;
namespace utf8 = ecoserve::model::utf8;

struct Vocab {
  ecoserve::fuzz::LoadedTokenizer loaded;
  bool has_user_defined = false;
  // One token per byte (GPT-2's byte-to-character table): any text can be
  // encoded without loss. A vocabulary missing some drops those bytes, as llama.cpp does.
  bool all_bytes = false;
  std::array<bool, 256> has_byte{};  // whether byte b's character is a token
};

// GPT-2's byte-level alphabet: printable Latin-1 bytes stand for themselves, the
// other 68 bytes for U+0100, U+0101, ... in byte order.
std::string byte_char(int b) {
  static std::vector<std::string> table = [] {
    std::vector<std::string> t(256);
    int next = 256;
    for (int i = 0; i < 256; ++i) {
      const bool keep = (i >= 33 && i <= 126) || (i >= 161 && i <= 172) || (i >= 174 && i <= 255);
      const int cp = keep ? i : next++;
      ecoserve::model::utf8::append_codepoint(t[i], static_cast<std::uint32_t>(cp));
    }
    return t;
  }();
  return table[b];
}
std::vector<Vocab>* g_vocabs = nullptr;

std::string ids_string(const std::vector<std::int32_t>& ids) {
  std::string s;
  for (std::int32_t id : ids) s += std::to_string(id) + " ";
  return s;
}

void run(const Vocab& v, std::string_view text) {
  const Tokenizer& tok = *v.loaded.tokenizer;
  const std::int32_t n = tok.vocab_size();
  const bool valid = utf8::is_valid(text);

  const std::vector<std::int32_t> plain = tok.encode(text, /*add_special=*/false, /*parse_special=*/false);
  for (std::int32_t id : plain) {
    FUZZ_CHECK(id >= 0 && id < n, ids_string(plain));
    FUZZ_CHECK(tok.token_type(id) != TokenType::kControl, v.loaded.name + ": " + ids_string(plain));
  }
  const std::string back = tok.decode(plain);
  if (!v.all_bytes) {
    // Valid text stays valid unless it holds a byte without a token: dropping one byte of
    // a multi-byte character (falcon has no token for 0xF2, a 4-byte lead) leaves the rest.
    bool covered = true;
    for (char c : text) covered = covered && v.has_byte[static_cast<std::uint8_t>(c)];
    FUZZ_CHECK(utf8::is_valid(back) || !valid || !covered, back);
  } else if (valid) {
    FUZZ_CHECK(back == text, v.loaded.name + ": " + back + " | ids " + ids_string(plain));
  } else {
    FUZZ_CHECK(utf8::is_valid(back), back);
    if (!v.has_user_defined) FUZZ_CHECK(back == utf8::sanitize(text), back);
  }

  std::vector<std::int32_t> expected;
  if (tok.add_bos()) expected.push_back(tok.bos_id());
  expected.insert(expected.end(), plain.begin(), plain.end());
  if (tok.add_eos()) expected.push_back(tok.eos_id());
  const std::vector<std::int32_t> with_special = tok.encode(text, /*add_special=*/true, /*parse_special=*/false);
  FUZZ_CHECK(with_special == expected, ids_string(with_special) + "vs " + ids_string(expected));

  IncrementalDetokenizer detok(tok);
  std::string joined;
  for (std::int32_t id : with_special) {
    const std::string chunk = detok.push(id);
    FUZZ_CHECK(utf8::is_valid(chunk), chunk);
    joined += chunk;
  }
  joined += detok.flush();
  // The stream is the whole decode with invalid UTF-8 replaced (decode() returns the
  // raw bytes, which are invalid when a vocabulary without all 256 bytes met invalid input).
  FUZZ_CHECK(joined == utf8::sanitize(tok.decode(with_special)), joined + " vs decode " + tok.decode(with_special));

  const std::vector<std::int32_t> special = tok.encode(text, /*add_special=*/false, /*parse_special=*/true);
  for (std::int32_t id : special) FUZZ_CHECK(id >= 0 && id < n, ids_string(special));
  if (valid && v.all_bytes) {
    const std::string rendered = tok.decode(special, /*render_special=*/true);
    FUZZ_CHECK(rendered == text, v.loaded.name + ": " + rendered + " | ids " + ids_string(special));
  }
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int* /*argc*/, char*** /*argv*/) {
  g_vocabs = new std::vector<Vocab>();
  for (auto& loaded : ecoserve::fuzz::load_shared_tokenizers(
           {"vocab/ggml-vocab-gpt-2.gguf", "vocab/ggml-vocab-falcon.gguf", "vocab/ggml-vocab-deepseek-llm.gguf"})) {
    FUZZ_CHECK(loaded.tokenizer->model_name() == "gpt2", loaded.name);
    Vocab v;
    for (std::int32_t id = 0; id < loaded.tokenizer->vocab_size(); ++id) {
      v.has_user_defined = v.has_user_defined || loaded.tokenizer->token_type(id) == TokenType::kUserDefined;
    }
    v.all_bytes = true;
    std::string missing;
    for (int b = 0; b < 256; ++b) {
      v.has_byte[b] = loaded.tokenizer->find_token(byte_char(b)) >= 0;
      v.all_bytes = v.all_bytes && v.has_byte[b];
      if (!v.has_byte[b]) missing += " " + std::to_string(b);
    }
    if (!v.all_bytes) {
      std::fprintf(stderr, "fuzz: %s has no token for bytes%s: no round-trip check\n", loaded.name.c_str(),
                   missing.c_str());
    }
    v.loaded = std::move(loaded);
    g_vocabs->push_back(std::move(v));
  }
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  for (const Vocab& v : *g_vocabs) run(v, text);
  return 0;
}
