#include "server/prepare_generation.h"

#include <algorithm>

#include <fmt/format.h>

#include "server/http_route.h"

namespace ecoserve::server {

int32_t max_token_bytes(const model::Tokenizer& tokenizer) {
  size_t longest = 4;
  for (int32_t id = 0; id < tokenizer.vocab_size(); ++id) longest = std::max(longest, tokenizer.token_text(id).size());
  return static_cast<int32_t>(longest);
}

std::variant<PreparedGeneration, ApiError> prepare_generation(const PrepareContext& ctx, Endpoint endpoint,
                                                              std::string_view body) {
  auto parsed = parse_completion_request(body, endpoint);
  if (auto* e = std::get_if<ApiError>(&parsed)) return *e;
  PreparedGeneration out;
  out.request = std::move(std::get<CompletionRequest>(parsed));
  CompletionRequest& r = out.request;
  const bool chat = endpoint == Endpoint::kChatCompletions;
  if (!r.model.empty() && r.model != ctx.served_model_name) {
    return not_found(fmt::format("The model `{}` does not exist; this server serves `{}`", r.model,
                                 ctx.served_model_name),
                     "model", "model_not_found");
  }
  const model::Tokenizer& tok = *ctx.tokenizer;
  const char* where = chat ? "messages" : "prompt";
  if (chat) {
    int64_t bytes = 0;
    for (const ChatMessage& m : r.messages) bytes += static_cast<int64_t>(m.content.size());
    if (auto e = check_prompt_bytes(bytes, ctx.max_context, ctx.max_token_bytes, where)) return *e;
    out.prompt = tok.encode(render_chat(ctx.chat_template, r.messages, ctx.bos_text, ctx.eos_text),
                            /*add_special=*/true, /*parse_special=*/true);
  } else if (r.prompt_is_tokens) {
    for (int32_t t : r.prompt_tokens) {
      if (t >= tok.vocab_size()) {
        return bad_request(
            fmt::format("prompt token id {} is out of range (vocabulary size {})", t, tok.vocab_size()), "prompt");
      }
    }
    out.prompt = r.prompt_tokens;
  } else {
    if (auto e = check_prompt_bytes(static_cast<int64_t>(r.prompt.size()), ctx.max_context, ctx.max_token_bytes,
                                    where)) {
      return *e;
    }
    out.prompt = tok.encode(r.prompt, /*add_special=*/true, /*parse_special=*/true);
  }
  if (out.prompt.empty()) return bad_request("the prompt encodes to no tokens", where);

  const int32_t max_ctx = ctx.max_context;
  const int32_t plen = static_cast<int32_t>(std::min<size_t>(out.prompt.size(), INT32_MAX));
  int32_t max_tokens = r.max_tokens.value_or(chat ? std::max(0, max_ctx - plen) : 16);
  if (!r.max_tokens && !chat) max_tokens = std::min(max_tokens, std::max(1, max_ctx - plen));
  if (max_tokens < 1 || static_cast<int64_t>(plen) + max_tokens > max_ctx) {
    return bad_request(
        fmt::format("This model's maximum context length is {} tokens. However, you requested {} tokens ({} in "
                    "the {}, {} in the completion). Please reduce the length of the {} or completion.",
                    max_ctx, static_cast<int64_t>(plen) + std::max(max_tokens, 1), plen, where,
                    std::max(max_tokens, 1), where),
        where);
  }
  out.max_tokens = max_tokens;
  return out;
}

}  // namespace ecoserve::server
