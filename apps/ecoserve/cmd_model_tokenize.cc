// ecoserve model tokenize FILE TEXT | --file PATH: prints token ids like
// llama.cpp's llama-tokenize (one "ID -> 'piece'" line per token, or --ids).
#include <cstdio>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>

#include "apps/ecoserve/commands.h"
#include "model/gguf.h"
#include "model/tokenizer.h"

namespace ecoserve::apps {

namespace {

struct TokenizeArgs {
  std::string model;
  std::string text;
  std::string file;
  bool ids = false;
  bool no_bos = false;
  bool parse_special = false;
  bool show_count = false;
};

bool valid_utf8(const std::string& s) {
  std::size_t i = 0;
  while (i < s.size()) {
    const auto c = static_cast<unsigned char>(s[i]);
    std::size_t n = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xE ? 3 : (c >> 3) == 0x1E ? 4 : 0;
    if (n == 0 || i + n > s.size()) return false;
    for (std::size_t k = 1; k < n; ++k) {
      if ((static_cast<unsigned char>(s[i + k]) & 0xC0) != 0x80) return false;
    }
    i += n;
  }
  return true;
}

// Bytes that do not form valid UTF-8 are shown as \xNN.
std::string printable(const std::string& piece) {
  if (valid_utf8(piece)) return piece;
  std::string out;
  for (char c : piece) {
    const auto b = static_cast<unsigned char>(c);
    if (b < 0x80) {
      out += c;
    } else {
      char buf[8];
      std::snprintf(buf, sizeof(buf), "\\x%02X", b);
      out += buf;
    }
  }
  return out;
}

int run_tokenize(const TokenizeArgs& a) {
  std::string text = a.text;
  if (!a.file.empty()) {
    std::ifstream in(a.file, std::ios::binary);
    if (!in) {
      std::fprintf(stderr, "ecoserve model tokenize: cannot read --file '%s'\n", a.file.c_str());
      return 1;
    }
    std::stringstream ss;
    ss << in.rdbuf();
    text = ss.str();
  }
  auto file = model::GgufFile::open(a.model);
  if (!file.ok()) {
    std::fprintf(stderr, "ecoserve model tokenize: %s\n", file.status().to_string().c_str());
    return 1;
  }
  auto tok = model::Tokenizer::from_gguf(**file);
  if (!tok.ok()) {
    std::fprintf(stderr, "ecoserve model tokenize: %s: %s\n", a.model.c_str(),
                 tok.status().to_string().c_str());
    return 1;
  }
  const model::Tokenizer& t = **tok;
  const auto ids = t.encode(text, /*add_special=*/!a.no_bos, a.parse_special);
  if (a.ids) {
    std::string line = "[";
    for (std::size_t i = 0; i < ids.size(); ++i) {
      if (i) line += ", ";
      line += std::to_string(ids[i]);
    }
    line += "]";
    std::printf("%s\n", line.c_str());
  } else {
    for (std::int32_t id : ids) {
      const std::string piece = t.token_to_piece(id, /*render_special=*/true);
      const bool ok = valid_utf8(piece);
      std::printf("%6d -> '%s'%s\n", id, printable(piece).c_str(), ok ? "" : " (utf-8 decode failure)");
    }
  }
  if (a.show_count) std::printf("Total number of tokens: %zu\n", ids.size());
  return 0;
}

}  // namespace

void add_model_tokenize_subcommand(CLI::App* model_cmd, int& exit_code) {
  auto args = std::make_shared<TokenizeArgs>();
  auto* cmd = model_cmd->add_subcommand(
      "tokenize",
      "Tokenize text with the tokenizer inside a GGUF file and print the token ids\n"
      "(like llama.cpp's llama-tokenize).");
  cmd->add_option("FILE", args->model, "GGUF model or vocabulary file")->required();
  CLI::Option* text_opt = cmd->add_option("TEXT", args->text, "Text to tokenize (or use --file)");
  cmd->add_option("--file", args->file, "Read the text to tokenize from this file");
  cmd->add_flag("--ids", args->ids, "Print only the list of ids, as [1, 2, 3]");
  cmd->add_flag("--no-bos", args->no_bos, "Do not add the special tokens (BOS/EOS) the model asks for");
  cmd->add_flag("--parse-special", args->parse_special,
                "Recognise special/control token texts (e.g. <s>, <|im_end|>) in the text");
  cmd->add_flag("--show-count", args->show_count, "Also print the number of tokens");
  cmd->callback([args, text_opt, &exit_code] {
    if (text_opt->count() == 0 && args->file.empty()) {
      std::fprintf(stderr, "ecoserve model tokenize: give TEXT or --file PATH\n");
      exit_code = 2;
      return;
    }
    if (text_opt->count() > 0 && !args->file.empty()) {
      std::fprintf(stderr, "ecoserve model tokenize: give TEXT or --file, not both\n");
      exit_code = 2;
      return;
    }
    exit_code = run_tokenize(*args);
  });
}

}  // namespace ecoserve::apps
