// Chat templates: OpenAI chat messages -> one prompt string, for the template
// families ecoserve supports natively (no Jinja interpreter): llama-2, llama-3,
// chatml, zephyr and mistral. A GGUF's tokenizer.chat_template (Jinja text) is
// recognised by distinctive markers. Rendered prompts never start with the BOS
// token: the tokenizer adds it (add_special = true). Pure functions.
#pragma once

#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace ecoserve::server {

struct ChatMessage {
  std::string role;     // "system" | "user" | "assistant" (others rendered verbatim as a role)
  std::string content;
};

enum class ChatTemplateKind { kLlama2, kLlama3, kChatml, kZephyr, kMistral };

// "llama-2" | "llama-3" | "chatml" | "zephyr" | "mistral".
std::string_view chat_template_name(ChatTemplateKind kind);
// Accepts the names above (also "llama2", "llama3"); nullopt for anything else.
std::optional<ChatTemplateKind> chat_template_from_name(std::string_view name);
// The comma-separated list of accepted names, for help and error texts.
std::string chat_template_names();
// The family of a Jinja chat template, or nullopt when it is unknown (or empty).
std::optional<ChatTemplateKind> detect_chat_template(std::string_view jinja);

// Renders `messages` with the generation prompt for the assistant's reply appended.
// `eos` is the model's end-of-sequence text ("</s>") used between turns by
// llama-2, zephyr and mistral; `bos` the begin-of-sequence text llama-2 puts
// before every turn after the first.
std::string render_chat(ChatTemplateKind kind, std::span<const ChatMessage> messages,
                        std::string_view bos = "<s>", std::string_view eos = "</s>");

}  // namespace ecoserve::server
