// Fuzz target: the chat templates (server::render_chat for every
// ChatTemplateKind) and the recognition of a GGUF's Jinja template
// (detect_chat_template, chat_template_from_name) on arbitrary strings.
//
// Input: byte 0 picks the BOS/EOS texts; the rest is a list of messages
// separated by '\0', each starting with a byte that picks its role (system,
// user, assistant, tool, or the bytes up to '\x01' as a role of its own), then
// the content. The whole input is also given to detect_chat_template.
//
// Checked, from chat_template.h/.cc: chatml and zephyr keep every content
// verbatim, llama-3 and the [INST] templates keep it trimmed of surrounding
// white space; chatml, zephyr and llama-3 end with the assistant's generation
// prompt, and chatml is exactly the concatenation of its turns.
#include <cctype>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "fuzz_util.h"
#include "server/chat_template.h"

namespace {

using ecoserve::server::ChatMessage;
using ecoserve::server::ChatTemplateKind;

constexpr ChatTemplateKind kKinds[] = {ChatTemplateKind::kLlama2, ChatTemplateKind::kLlama3,
                                       ChatTemplateKind::kChatml, ChatTemplateKind::kZephyr,
                                       ChatTemplateKind::kMistral};

std::string_view trimmed(std::string_view s) {
  auto space = [](char c) { return std::isspace(static_cast<unsigned char>(c)) != 0; };
  while (!s.empty() && space(s.front())) s.remove_prefix(1);
  while (!s.empty() && space(s.back())) s.remove_suffix(1);
  return s;
}

bool contains(std::string_view hay, std::string_view needle) { return hay.find(needle) != std::string_view::npos; }

void check_render(ChatTemplateKind kind, const std::vector<ChatMessage>& messages, std::string_view bos,
                  std::string_view eos) {
  const std::string out = ecoserve::server::render_chat(kind, messages, bos, eos);
  const std::string name(ecoserve::server::chat_template_name(kind));
  for (const ChatMessage& m : messages) {
    const bool verbatim = kind == ChatTemplateKind::kChatml || kind == ChatTemplateKind::kZephyr;
    FUZZ_CHECK(contains(out, verbatim ? std::string_view(m.content) : trimmed(m.content)), name + ": " + m.content);
  }
  switch (kind) {
    case ChatTemplateKind::kChatml: {
      std::string expected;
      for (const ChatMessage& m : messages) expected += "<|im_start|>" + m.role + "\n" + m.content + "<|im_end|>\n";
      expected += "<|im_start|>assistant\n";
      FUZZ_CHECK(out == expected, out);
      break;
    }
    case ChatTemplateKind::kZephyr:
      FUZZ_CHECK(out.ends_with("<|assistant|>\n"), out);
      break;
    case ChatTemplateKind::kLlama3:
      FUZZ_CHECK(out.ends_with("<|start_header_id|>assistant<|end_header_id|>\n\n"), out);
      break;
    case ChatTemplateKind::kLlama2:
    case ChatTemplateKind::kMistral:
      // A user turn, or a system turn with text, opens an [INST] block (an empty
      // system message adds nothing); an assistant turn always adds a space.
      for (const ChatMessage& m : messages) {
        if (m.role == "assistant") FUZZ_CHECK(!out.empty());
        if (m.role != "assistant" && (m.role != "system" || !trimmed(m.content).empty())) {
          FUZZ_CHECK(contains(out, "[INST] "), name + ": " + out);
        }
      }
      break;
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view whole(reinterpret_cast<const char*>(data), size);
  if (const auto kind = ecoserve::server::detect_chat_template(whole)) {
    FUZZ_CHECK(ecoserve::server::chat_template_from_name(ecoserve::server::chat_template_name(*kind)) == kind);
  } else {
    FUZZ_CHECK(!contains(whole, "<|im_start|>"));
  }
  if (const auto kind = ecoserve::server::chat_template_from_name(whole)) {
    FUZZ_CHECK(contains(ecoserve::server::chat_template_names(), ecoserve::server::chat_template_name(*kind)), whole);
  }

  ecoserve::fuzz::InputReader in(data, size);
  const std::uint8_t flags = in.byte();
  constexpr std::string_view kBos[] = {"<s>", "", "<|begin_of_text|>", "<|im_start|>"};
  constexpr std::string_view kEos[] = {"</s>", "", "<|eot_id|>", "<|im_end|>"};
  const std::string_view bos = kBos[flags & 3];
  const std::string_view eos = kEos[(flags >> 2) & 3];

  std::vector<ChatMessage> messages;
  while (!in.empty() && messages.size() < 64) {
    const std::string_view body = in.take_until('\0');
    ecoserve::fuzz::InputReader m(reinterpret_cast<const std::uint8_t*>(body.data()), body.size());
    ChatMessage cm;
    switch (m.byte() % 5) {
      case 0: cm.role = "system"; break;
      case 1: cm.role = "user"; break;
      case 2: cm.role = "assistant"; break;
      case 3: cm.role = "tool"; break;
      default: cm.role = std::string(m.take_until('\x01')); break;
    }
    cm.content = std::string(m.rest());
    messages.push_back(std::move(cm));
  }
  for (ChatTemplateKind kind : kKinds) check_render(kind, messages, bos, eos);
  return 0;
}
