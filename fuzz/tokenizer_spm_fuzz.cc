// Fuzz target: the SentencePiece-style tokenizer ("llama" vocabularies) on
// arbitrary text, with llama.cpp's llama-spm vocabulary (32000 tokens, byte
// fallback) and the 512-token vocabulary of the TinyStories model (no byte
// tokens: unknown characters become <unk>).
//
// What the tokenizer guarantees, and is checked here:
// - every id is in the vocabulary; add_special adds BOS exactly when add_bos();
// - with byte fallback (every <0xNN> token present), decode(encode(x)) == x for
//   any bytes x without U+2581 "▁" (SentencePiece's escaped space, which decodes
//   to ' ') and with or without BOS: raw bytes survive through byte tokens, and
//   the space prefix encode adds is removed by decode;
// - with byte fallback, no control token comes out of the text without parse_special;
// - IncrementalDetokenizer's chunks are valid UTF-8, and they join to decode()
//   whenever decode() is valid UTF-8.
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
  bool byte_fallback = false;  // all 256 <0xNN> tokens present
};
std::vector<Vocab>* g_vocabs = nullptr;

std::string ids_string(const std::vector<std::int32_t>& ids) {
  std::string s;
  for (std::int32_t id : ids) s += std::to_string(id) + " ";
  return s;
}

void check_incremental(const Tokenizer& tok, const std::vector<std::int32_t>& ids) {
  IncrementalDetokenizer detok(tok);
  std::string joined;
  for (std::int32_t id : ids) {
    const std::string chunk = detok.push(id);
    FUZZ_CHECK(utf8::is_valid(chunk), chunk);
    joined += chunk;
  }
  const std::string tail = detok.flush();
  FUZZ_CHECK(utf8::is_valid(tail), tail);
  joined += tail;
  const std::string decoded = tok.decode(ids);
  if (utf8::is_valid(decoded)) FUZZ_CHECK(joined == decoded, joined + " vs " + decoded);
}

void run(const Vocab& v, std::string_view text) {
  const Tokenizer& tok = *v.loaded.tokenizer;
  const std::int32_t n = tok.vocab_size();
  const std::vector<std::int32_t> plain = tok.encode(text, /*add_special=*/false, /*parse_special=*/false);
  const std::vector<std::int32_t> with_bos = tok.encode(text, /*add_special=*/true, /*parse_special=*/false);
  for (std::int32_t id : plain) {
    FUZZ_CHECK(id >= 0 && id < n, ids_string(plain));
    // Without byte tokens an unknown character becomes <unk>, a control token in some vocabularies.
    if (v.byte_fallback) FUZZ_CHECK(tok.token_type(id) != TokenType::kControl, ids_string(plain));
  }
  // add_special only adds BOS/EOS around the same ids.
  std::vector<std::int32_t> expected;
  if (tok.add_bos()) expected.push_back(tok.bos_id());
  expected.insert(expected.end(), plain.begin(), plain.end());
  if (tok.add_eos()) expected.push_back(tok.eos_id());
  FUZZ_CHECK(with_bos == expected, ids_string(with_bos) + "vs " + ids_string(expected));

  if (v.byte_fallback && text.find("\xE2\x96\x81") == std::string_view::npos) {
    const std::string back = tok.decode(plain);
    FUZZ_CHECK(back == text, back + " | ids " + ids_string(plain));
    FUZZ_CHECK(tok.decode(with_bos) == text, ids_string(with_bos));
  }
  check_incremental(tok, with_bos);

  // Control tokens in the text: ids still in range, decoding never fails.
  const std::vector<std::int32_t> special = tok.encode(text, /*add_special=*/true, /*parse_special=*/true);
  for (std::int32_t id : special) FUZZ_CHECK(id >= 0 && id < n, ids_string(special));
  (void)tok.decode(special, /*render_special=*/true);
  IncrementalDetokenizer detok(tok, /*render_special=*/true, /*strip_leading_space=*/false);
  for (std::int32_t id : special) FUZZ_CHECK(utf8::is_valid(detok.push(id)));
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int* /*argc*/, char*** /*argv*/) {
  g_vocabs = new std::vector<Vocab>();
  for (auto& loaded : ecoserve::fuzz::load_shared_tokenizers(
           {"vocab/ggml-vocab-llama-spm.gguf", "models/tinystories-656k-q8_0.gguf"})) {
    FUZZ_CHECK(loaded.tokenizer->model_name() == "llama", loaded.name);
    Vocab v;
    v.byte_fallback = true;
    for (int b = 0; b < 256; ++b) {
      char name[8];
      std::snprintf(name, sizeof(name), "<0x%02X>", b);
      v.byte_fallback = v.byte_fallback && loaded.tokenizer->find_token(name) >= 0;
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
