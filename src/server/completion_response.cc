#include "server/completion_response.h"

#include <algorithm>
#include <cmath>

namespace ecoserve::server {

using nlohmann::json;

namespace {

double clamp_logprob(float lp) {
  if (!std::isfinite(lp)) return -9999.0;
  return std::max(-9999.0, static_cast<double>(lp));
}

json bytes_of(const std::string& s) {
  json arr = json::array();
  for (unsigned char c : s) arr.push_back(static_cast<int>(c));
  return arr;
}

const char* object_name(const CompletionJob& job, bool chunk) {
  if (!job.chat) return "text_completion";
  return chunk ? "chat.completion.chunk" : "chat.completion";
}

}  // namespace

json chunk_json(const CompletionJob& job, int32_t index, const json& delta_or_text, const json& logprobs,
                const json& finish_reason) {
  json choice = {{"index", index}};
  choice[job.chat ? "delta" : "text"] = delta_or_text;
  choice["logprobs"] = logprobs;
  choice["finish_reason"] = finish_reason;
  json j = {{"id", job.id},
            {"object", object_name(job, true)},
            {"created", job.created},
            {"model", job.model},
            {"choices", json::array({choice})}};
  if (job.include_usage) j["usage"] = nullptr;
  return j;
}

json usage_json(const CompletionJob& job) {
  int32_t completion = 0;
  for (const CompletionChoice& c : job.choices) completion += c.text->num_tokens();
  json u = {{"prompt_tokens", job.prompt_tokens},
            {"completion_tokens", completion},
            {"total_tokens", job.prompt_tokens + completion}};
  if (job.cached_tokens > 0) u["prompt_tokens_details"] = {{"cached_tokens", job.cached_tokens}};
  return u;
}

json usage_chunk_json(const CompletionJob& job) {
  return {{"id", job.id},
          {"object", object_name(job, true)},
          {"created", job.created},
          {"model", job.model},
          {"choices", json::array()},
          {"usage", usage_json(job)}};
}

void add_logprobs(const model::Tokenizer& tok, const CompletionJob& job, CompletionChoice& c,
                  const instance::TokenEvent& ev, size_t text_offset) {
  const std::string piece = tok.token_to_piece(ev.token, /*render_special=*/true);
  if (job.chat) {
    json tops = json::array();
    for (const auto& t : ev.top_logprobs) {
      const std::string p = tok.token_to_piece(t.token, true);
      tops.push_back({{"token", p}, {"logprob", clamp_logprob(t.logprob)}, {"bytes", bytes_of(p)}});
    }
    c.lp_content.push_back(
        {{"token", piece}, {"logprob", clamp_logprob(ev.logprob)}, {"bytes", bytes_of(piece)}, {"top_logprobs", tops}});
  } else {
    json tops = json::object();
    for (const auto& t : ev.top_logprobs) tops[tok.token_to_piece(t.token, true)] = clamp_logprob(t.logprob);
    c.lp_tokens.push_back(piece);
    c.lp_token_logprobs.push_back(clamp_logprob(ev.logprob));
    c.lp_top.push_back(job.top_logprobs > 0 ? tops : json(nullptr));
    c.lp_offsets.push_back(text_offset);
  }
}

json take_logprobs(const CompletionJob& job, CompletionChoice& c) {
  if (!job.logprobs) return nullptr;
  json out;
  if (job.chat) {
    out = {{"content", c.lp_content}};
    c.lp_content = json::array();
  } else {
    out = {{"tokens", c.lp_tokens},
           {"token_logprobs", c.lp_token_logprobs},
           {"top_logprobs", c.lp_top},
           {"text_offset", c.lp_offsets}};
    c.lp_tokens = json::array();
    c.lp_token_logprobs = json::array();
    c.lp_top = json::array();
    c.lp_offsets = json::array();
  }
  return out;
}

json final_response_json(CompletionJob& job) {
  json choices = json::array();
  for (size_t i = 0; i < job.choices.size(); ++i) {
    CompletionChoice& c = job.choices[i];
    json lp = take_logprobs(job, c);
    json choice = {{"index", i}};
    if (job.chat) {
      choice["message"] = {{"role", "assistant"}, {"content", c.text->text()}};
    } else {
      choice["text"] = c.text->text();
    }
    choice["logprobs"] = lp;
    choice["finish_reason"] = c.finish_reason;
    choices.push_back(std::move(choice));
  }
  return {{"id", job.id},
          {"object", object_name(job, false)},
          {"created", job.created},
          {"model", job.model},
          {"choices", choices},
          {"usage", usage_json(job)}};
}

}  // namespace ecoserve::server
