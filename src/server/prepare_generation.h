// prepare_generation: the CPU-heavy first half of a generation request, from
// the request body to the prompt's token ids: parse and validate the body,
// check the model name, reject prompts whose byte length cannot fit the
// context before tokenizing them, render the chat template, tokenize, and
// check prompt + max_tokens against the context.
//
// Pure apart from reading the tokenizer (const, thread-safe): the server runs
// it on its tokenizer threads, never on an I/O thread, so a 4 MB prompt cannot
// hold up /health. Never throws for any body (exceptions from allocation are
// the caller's last resort).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "model/tokenizer.h"
#include "server/api_error.h"
#include "server/chat_template.h"
#include "server/openai_request.h"

namespace ecoserve::server {

// What the request is checked against; borrowed, must outlive the call.
struct PrepareContext {
  const model::Tokenizer* tokenizer = nullptr;
  ChatTemplateKind chat_template = ChatTemplateKind::kChatml;
  std::string bos_text = "<s>";
  std::string eos_text = "</s>";
  std::string served_model_name;   // a request naming another model gets 404
  int32_t max_context = 0;         // tokens per request (prompt + completion)
  int32_t max_token_bytes = 1;     // longest input span one token covers (see max_token_bytes())
};

struct PreparedGeneration {
  CompletionRequest request;
  std::vector<int32_t> prompt;     // token ids, BOS included
  int32_t max_tokens = 0;          // resolved: explicit, or the endpoint's default clipped to the context
};

std::variant<PreparedGeneration, ApiError> prepare_generation(const PrepareContext& ctx, Endpoint endpoint,
                                                              std::string_view body);

// The most input bytes any one token can stand for: the longest token text in
// the vocabulary (SPM's U+2581 and byte-level BPE's byte characters are never
// shorter than the bytes they stand for), at least 4 (one UTF-8 character
// mapped to <unk>).
int32_t max_token_bytes(const model::Tokenizer& tokenizer);

}  // namespace ecoserve::server
