#include "server/chat_template.h"

#include <cctype>
#include <optional>
#include <string>

namespace ecoserve::server {

namespace {

std::string_view trim(std::string_view s) {
  size_t b = 0, e = s.size();
  while (b < e && std::isspace(static_cast<unsigned char>(s[b]))) ++b;
  while (e > b && std::isspace(static_cast<unsigned char>(s[e - 1]))) --e;
  return s.substr(b, e - b);
}

bool contains(std::string_view hay, std::string_view needle) { return hay.find(needle) != std::string_view::npos; }

// [INST]-style templates: system text is folded into the next user turn.
std::string render_inst(bool llama2, std::span<const ChatMessage> messages, std::string_view bos,
                        std::string_view eos) {
  std::string out;
  // The system text waiting for the next user turn; set (maybe empty) once a system
  // message is seen.
  std::optional<std::string> pending_system;
  bool first_user = true;
  for (const ChatMessage& m : messages) {
    if (m.role == "system") {
      if (!pending_system) {
        pending_system.emplace();
      } else if (!pending_system->empty()) {
        *pending_system += "\n\n";
      }
      *pending_system += trim(m.content);
      continue;
    }
    if (m.role == "assistant") {
      out += ' ';
      out += trim(m.content);
      if (llama2) out += ' ';
      out += eos;
      continue;
    }
    // user (and any other role) opens an [INST] block.
    if (!first_user && llama2) out += bos;
    std::string content;
    if (pending_system && !pending_system->empty()) {
      content = llama2 ? "<<SYS>>\n" + *pending_system + "\n<</SYS>>\n\n" : *pending_system + "\n\n";
    }
    pending_system.reset();
    content += trim(m.content);
    out += "[INST] ";
    out += content;
    out += " [/INST]";
    first_user = false;
  }
  // A system message with no user turn after it (its content may be empty: the
  // prompt still gets the [INST] block the model answers after).
  if (pending_system) {
    if (!first_user && llama2) out += bos;
    out += llama2 ? "[INST] <<SYS>>\n" + *pending_system + "\n<</SYS>>\n\n [/INST]"
                  : "[INST] " + *pending_system + " [/INST]";
  }
  return out;
}

}  // namespace

std::string_view chat_template_name(ChatTemplateKind kind) {
  switch (kind) {
    case ChatTemplateKind::kLlama2: return "llama-2";
    case ChatTemplateKind::kLlama3: return "llama-3";
    case ChatTemplateKind::kChatml: return "chatml";
    case ChatTemplateKind::kZephyr: return "zephyr";
    case ChatTemplateKind::kMistral: return "mistral";
  }
  return "chatml";
}

std::optional<ChatTemplateKind> chat_template_from_name(std::string_view name) {
  if (name == "llama-2" || name == "llama2") return ChatTemplateKind::kLlama2;
  if (name == "llama-3" || name == "llama3") return ChatTemplateKind::kLlama3;
  if (name == "chatml") return ChatTemplateKind::kChatml;
  if (name == "zephyr") return ChatTemplateKind::kZephyr;
  if (name == "mistral") return ChatTemplateKind::kMistral;
  return std::nullopt;
}

std::string chat_template_names() { return "llama-2, llama-3, chatml, zephyr, mistral"; }

std::optional<ChatTemplateKind> detect_chat_template(std::string_view jinja) {
  if (contains(jinja, "<|start_header_id|>") && contains(jinja, "<|eot_id|>")) return ChatTemplateKind::kLlama3;
  if (contains(jinja, "<|im_start|>")) return ChatTemplateKind::kChatml;
  if (contains(jinja, "<|user|>") && contains(jinja, "<|assistant|>") && !contains(jinja, "<|end|>"))
    return ChatTemplateKind::kZephyr;
  if (contains(jinja, "<<SYS>>") && contains(jinja, "[INST]")) return ChatTemplateKind::kLlama2;
  if (contains(jinja, "[INST]") && contains(jinja, "[/INST]")) return ChatTemplateKind::kMistral;
  return std::nullopt;
}

std::string render_chat(ChatTemplateKind kind, std::span<const ChatMessage> messages, std::string_view bos,
                        std::string_view eos) {
  std::string out;
  switch (kind) {
    case ChatTemplateKind::kLlama2:
      return render_inst(/*llama2=*/true, messages, bos, eos);
    case ChatTemplateKind::kMistral:
      return render_inst(/*llama2=*/false, messages, bos, eos);
    case ChatTemplateKind::kLlama3:
      for (const ChatMessage& m : messages) {
        out += "<|start_header_id|>" + m.role + "<|end_header_id|>\n\n";
        out += trim(m.content);
        out += "<|eot_id|>";
      }
      out += "<|start_header_id|>assistant<|end_header_id|>\n\n";
      return out;
    case ChatTemplateKind::kChatml:
      for (const ChatMessage& m : messages) out += "<|im_start|>" + m.role + "\n" + m.content + "<|im_end|>\n";
      out += "<|im_start|>assistant\n";
      return out;
    case ChatTemplateKind::kZephyr:
      for (const ChatMessage& m : messages) {
        out += "<|" + m.role + "|>\n" + m.content;
        out += eos;
        out += "\n";
      }
      out += "<|assistant|>\n";
      return out;
  }
  return out;
}

}  // namespace ecoserve::server
