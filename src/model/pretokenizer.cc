#include "model/pretokenizer.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <utility>

namespace ecoserve::model {

namespace {

// The GPT-2 pattern (as llama.cpp writes it; a trailing `|\s+` would change nothing:
// whitespace it would add is split off on its own anyway).
constexpr const char* kGpt2 =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S))";

// Llama 3's pattern with the case-insensitive contractions spelled out.
constexpr const char* kLlama3 =
    R"((?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

// Qwen2: like Llama 3 but digits one by one.
constexpr const char* kQwen2 =
    R"((?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

// DeepSeek LLM's letters: the cased-letter ranges of its tokenizer.json.
constexpr const char* kDeepseekLetters =
    R"(\s?[A-Za-z\x{B5}\x{C0}-\x{D6}\x{D8}-\x{F6}\x{F8}-\x{1BA}\x{1BC}-\x{1BF}\x{1C4}-\x{293})"
    R"(\x{295}-\x{2AF}\x{370}-\x{373}\x{376}\x{377}\x{37B}-\x{37D}\x{37F}\x{386}\x{388}-\x{38A})"
    R"(\x{38C}\x{38E}-\x{3A1}\x{3A3}-\x{3F5}\x{3F7}-\x{481}\x{48A}-\x{52F}\x{531}-\x{556})"
    R"(\x{10A0}-\x{10C5}\x{13A0}-\x{13F5}\x{13F8}-\x{13FD}\x{1C90}-\x{1CBA}\x{1CBD}-\x{1CBF})"
    R"(\x{1D00}-\x{1D2B}\x{1D6B}-\x{1D77}\x{1D79}-\x{1D9A}\x{1E00}-\x{1F15}\x{1F18}-\x{1F1D})"
    R"(\x{1F20}-\x{1F45}\x{1F48}-\x{1F4D}\x{1F50}-\x{1F57}\x{1F59}\x{1F5B}\x{1F5D}\x{1F5F}-\x{1F7D})"
    R"(\x{1F80}-\x{1FB4}\x{1FB6}-\x{1FBC}\x{1FBE}\x{1FC2}-\x{1FC4}\x{1FC6}-\x{1FCC}\x{1FD0}-\x{1FD3})"
    R"(\x{1FD6}-\x{1FDB}\x{1FE0}-\x{1FEC}\x{1FF2}-\x{1FF4}\x{1FF6}-\x{1FFC}\x{2102}\x{2107})"
    R"(\x{210A}-\x{2113}\x{2115}\x{2119}-\x{211D}\x{2124}\x{2126}\x{2128}\x{212A}-\x{212D})"
    R"(\x{212F}-\x{2134}\x{2139}\x{213C}-\x{213F}\x{2145}-\x{2149}\x{214E}\x{2183}\x{2184})"
    R"(\x{2C00}-\x{2C7B}\x{2C7E}-\x{2CE4}\x{2CEB}-\x{2CEE}\x{2CF2}\x{2CF3}\x{A640}-\x{A66D})"
    R"(\x{A680}-\x{A69B}\x{A722}-\x{A76F}\x{A771}-\x{A787}\x{A78B}-\x{A78E}\x{AB70}-\x{ABBF})"
    R"(\x{FB00}-\x{FB06}\x{FB13}-\x{FB17}\x{FF21}-\x{FF3A}\x{FF41}-\x{FF5A}\x{10400}-\x{1044F})"
    R"(\x{104B0}-\x{104D3}\x{104D8}-\x{104FB}\x{10C80}-\x{10CB2}\x{10CC0}-\x{10CF2}\x{118A0}-\x{118DF})"
    R"(\x{1E900}-\x{1E943}]+)";
constexpr const char* kDeepseekPunct =
    R"(\s?[!-/:-~\x{FF01}-\x{FF0F}\x{FF1A}-\x{FF5E}\x{2018}-\x{201F}\x{3000}-\x{3002}]+)";
constexpr const char* kCjk = R"([\x{4E00}-\x{9FA5}\x{0800}-\x{4E00}\x{AC00}-\x{D7FF}]+)";
constexpr const char* kBloom = R"( ?[^(\s|.,!?\x{2026}\x{3002}\x{FF0C}\x{3001}\x{0964}\x{06D4}\x{060C})]+)";

// \s and \S widened to Unicode White_Space (PCRE2's UCP \s lacks U+0085).
std::string widen_whitespace(std::string_view p) {
  std::string out;
  out.reserve(p.size() + 16);
  bool in_class = false;
  for (std::size_t i = 0; i < p.size(); ++i) {
    const char c = p[i];
    if (c == '\\' && i + 1 < p.size()) {
      const char n = p[i + 1];
      if (n == 's') {
        out += in_class ? R"(\s\x{85})" : R"([\s\x{85}])";
      } else if (n == 'S' && !in_class) {
        out += R"([^\s\x{85}])";
      } else {
        out += c;
        out += n;
      }
      ++i;
      continue;
    }
    if (c == '[' && !in_class) {
      in_class = true;
    } else if (c == ']' && in_class) {
      in_class = false;
    }
    out += c;
  }
  return out;
}

}  // namespace

struct Pretokenizer::Compiled {
  pcre2_code* code = nullptr;
  std::string pattern;
};

Pretokenizer::Pretokenizer() = default;

Pretokenizer::~Pretokenizer() {
  for (auto& p : patterns_) pcre2_code_free(p.code);
}

StatusOr<std::vector<std::string>> Pretokenizer::regexes_for(std::string_view pre) {
  using V = std::vector<std::string>;
  if (pre == "default") {
    return V{R"([\p{P}\$\+<=>\^~\|]+)", kGpt2, R"(\p{N}+)", "[0-9][0-9][0-9]"};
  }
  if (pre == "gpt-2" || pre == "gpt2" || pre == "phi-2" || pre == "mpt" || pre == "olmo" ||
      pre == "jais" || pre == "roberta-bpe" || pre == "gigachat" || pre == "jina-es" ||
      pre == "jina-de" || pre == "jina-v1-en" || pre == "jina-v2-es" || pre == "jina-v2-de" ||
      pre == "jina-v2-code") {
    return V{kGpt2};
  }
  if (pre == "llama3" || pre == "llama-v3" || pre == "llama-bpe" || pre == "falcon3" ||
      pre == "dbrx" || pre == "smaug-bpe" || pre == "chatglm-bpe") {
    return V{kLlama3};
  }
  if (pre == "qwen2" || pre == "qwen2.5" || pre == "qwen-2.5" || pre == "deepseek-r1-qwen" ||
      pre == "stablelm2" || pre == "megrez") {
    return V{kQwen2};
  }
  if (pre == "deepseek-llm") {
    return V{"[\r\n]", kDeepseekLetters, kDeepseekPunct, R"(\s+$)", kCjk, R"(\p{N}+)"};
  }
  if (pre == "deepseek-coder") {
    return V{"[\r\n]", R"(\s?\p{L}+)", R"(\s?\p{P}+)", kCjk, R"(\p{N})"};
  }
  if (pre == "falcon") {
    return V{R"([\p{P}\$\+<=>\^~\|`]+)", kGpt2, "[0-9][0-9][0-9]"};
  }
  if (pre == "starcoder" || pre == "refact" || pre == "command-r" || pre == "smollm" ||
      pre == "codeshell" || pre == "exaone" || pre == "minerva-7b") {
    return V{R"(\p{N})", kGpt2};
  }
  if (pre == "poro-chat" || pre == "bloom" || pre == "gpt3-finnish") return V{kBloom};
  if (pre == "viking") return V{kBloom, R"(\p{N})"};
  return not_found_error("tokenizer: unsupported pre-tokenizer '{}' (tokenizer.ggml.pre)", pre);
}

StatusOr<std::unique_ptr<Pretokenizer>> Pretokenizer::create(const std::vector<std::string>& regexes) {
  std::unique_ptr<Pretokenizer> p(new Pretokenizer());
  for (const std::string& r : regexes) {
    const std::string pattern = widen_whitespace(r);
    int err = 0;
    PCRE2_SIZE err_offset = 0;
    pcre2_code* code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
                                     PCRE2_UTF | PCRE2_UCP | PCRE2_DOLLAR_ENDONLY, &err, &err_offset,
                                     nullptr);
    if (code == nullptr) {
      PCRE2_UCHAR msg[256];
      pcre2_get_error_message(err, msg, sizeof(msg));
      return invalid_argument_error("tokenizer: pre-tokenizer regex '{}' does not compile at {}: {}", r,
                                    err_offset, reinterpret_cast<const char*>(msg));
    }
    // JIT is an optimisation only: matching falls back to the interpreter without it.
    (void)pcre2_jit_compile(code, PCRE2_JIT_COMPLETE);
    p->patterns_.push_back(Compiled{code, pattern});
  }
  return p;
}

std::vector<std::string_view> Pretokenizer::split(std::string_view text) const {
  std::vector<std::string_view> pieces;
  if (text.empty()) return pieces;
  pieces.push_back(text);
  std::vector<std::string_view> next;
  for (const Compiled& c : patterns_) {
    pcre2_match_data* md = pcre2_match_data_create_from_pattern(c.code, nullptr);
    next.clear();
    next.reserve(pieces.size() * 2);
    for (std::string_view seg : pieces) {
      const auto* subject = reinterpret_cast<PCRE2_SPTR>(seg.data());
      std::size_t last = 0;  // end of the last emitted piece
      std::size_t pos = 0;   // where to search next
      while (pos <= seg.size()) {
        int rc = pcre2_match(c.code, subject, seg.size(), pos, PCRE2_NO_UTF_CHECK, md, nullptr);
        if (rc == PCRE2_ERROR_JIT_STACKLIMIT) {
          rc = pcre2_match(c.code, subject, seg.size(), pos, PCRE2_NO_UTF_CHECK | PCRE2_NO_JIT, md,
                           nullptr);
        }
        if (rc < 0) break;  // no match (or a resource limit): the rest stays one piece
        const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md);
        const std::size_t start = ov[0], end = ov[1];
        if (end == start) {  // empty match: skip one character
          if (start >= seg.size()) break;
          pos = start + 1;
          while (pos < seg.size() && (static_cast<unsigned char>(seg[pos]) & 0xC0) == 0x80) ++pos;
          continue;
        }
        if (start > last) next.push_back(seg.substr(last, start - last));
        next.push_back(seg.substr(start, end - start));
        last = pos = end;
      }
      if (last < seg.size()) next.push_back(seg.substr(last));
    }
    pcre2_match_data_free(md);
    std::swap(pieces, next);
  }
  return pieces;
}

}  // namespace ecoserve::model
