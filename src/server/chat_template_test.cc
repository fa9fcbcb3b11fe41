#include "server/chat_template.h"

#include <gtest/gtest.h>

namespace ecoserve::server {
namespace {

const std::vector<ChatMessage> kConversation = {
    {"system", "You are terse."},
    {"user", "Hi"},
    {"assistant", "Hello."},
    {"user", "Name a color"},
};

TEST(ChatTemplate, Llama2) {
  EXPECT_EQ(render_chat(ChatTemplateKind::kLlama2, kConversation),
            "[INST] <<SYS>>\nYou are terse.\n<</SYS>>\n\nHi [/INST] Hello. </s><s>[INST] Name a color [/INST]");
  std::vector<ChatMessage> one = {{"user", " Hi "}};
  EXPECT_EQ(render_chat(ChatTemplateKind::kLlama2, one), "[INST] Hi [/INST]");
}

TEST(ChatTemplate, Llama3) {
  EXPECT_EQ(render_chat(ChatTemplateKind::kLlama3, kConversation),
            "<|start_header_id|>system<|end_header_id|>\n\nYou are terse.<|eot_id|>"
            "<|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>"
            "<|start_header_id|>assistant<|end_header_id|>\n\nHello.<|eot_id|>"
            "<|start_header_id|>user<|end_header_id|>\n\nName a color<|eot_id|>"
            "<|start_header_id|>assistant<|end_header_id|>\n\n");
}

TEST(ChatTemplate, Chatml) {
  EXPECT_EQ(render_chat(ChatTemplateKind::kChatml, kConversation),
            "<|im_start|>system\nYou are terse.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n"
            "<|im_start|>assistant\nHello.<|im_end|>\n<|im_start|>user\nName a color<|im_end|>\n"
            "<|im_start|>assistant\n");
}

TEST(ChatTemplate, Zephyr) {
  EXPECT_EQ(render_chat(ChatTemplateKind::kZephyr, kConversation),
            "<|system|>\nYou are terse.</s>\n<|user|>\nHi</s>\n<|assistant|>\nHello.</s>\n"
            "<|user|>\nName a color</s>\n<|assistant|>\n");
}

TEST(ChatTemplate, MistralFoldsSystemIntoFirstUserTurn) {
  EXPECT_EQ(render_chat(ChatTemplateKind::kMistral, kConversation),
            "[INST] You are terse.\n\nHi [/INST] Hello.</s>[INST] Name a color [/INST]");
}

// A lone system message still gets the [INST] block the model answers after, also
// when its content is empty or missing (found by the http_request fuzzer: the prompt
// was empty).
TEST(ChatTemplate, InstTemplatesRenderALoneSystemMessage) {
  const std::vector<ChatMessage> empty_system = {{"system", ""}};
  EXPECT_EQ(render_chat(ChatTemplateKind::kLlama2, empty_system), "[INST] <<SYS>>\n\n<</SYS>>\n\n [/INST]");
  EXPECT_EQ(render_chat(ChatTemplateKind::kMistral, empty_system), "[INST]  [/INST]");
  const std::vector<ChatMessage> system = {{"system", "Be brief."}};
  EXPECT_EQ(render_chat(ChatTemplateKind::kMistral, system), "[INST] Be brief. [/INST]");
  // An empty system message before a user turn adds nothing to it.
  const std::vector<ChatMessage> then_user = {{"system", ""}, {"user", "Hi"}};
  EXPECT_EQ(render_chat(ChatTemplateKind::kLlama2, then_user), "[INST] Hi [/INST]");
  EXPECT_EQ(render_chat(ChatTemplateKind::kMistral, then_user), "[INST] Hi [/INST]");
}

TEST(ChatTemplate, DetectsFamiliesFromJinja) {
  EXPECT_EQ(detect_chat_template("{{ '<|start_header_id|>' + message['role'] + '<|end_header_id|>\n\n' + "
                                 "message['content'] | trim + '<|eot_id|>' }}"),
            ChatTemplateKind::kLlama3);
  EXPECT_EQ(detect_chat_template("{% for message in messages %}{{'<|im_start|>' + message['role'] + '\n' + "
                                 "message['content'] + '<|im_end|>' + '\n'}}{% endfor %}"),
            ChatTemplateKind::kChatml);
  EXPECT_EQ(detect_chat_template("{% if message['role'] == 'user' %}{{ '<|user|>\n' + message['content'] + eos_token }}"
                                 "{% elif message['role'] == 'assistant' %}{{ '<|assistant|>\n' }}{% endif %}"),
            ChatTemplateKind::kZephyr);
  EXPECT_EQ(detect_chat_template("{{ bos_token + '[INST] ' + '<<SYS>>\\n' + system_message + '\\n<</SYS>>\\n\\n' + "
                                 "content + ' [/INST]' }}"),
            ChatTemplateKind::kLlama2);
  EXPECT_EQ(detect_chat_template("{{ bos_token }}{% for message in messages %}{{ '[INST] ' + message['content'] + "
                                 "' [/INST]' }}{% endfor %}"),
            ChatTemplateKind::kMistral);
  EXPECT_EQ(detect_chat_template(""), std::nullopt);
  EXPECT_EQ(detect_chat_template("{{ messages[0]['content'] }}<|something|>"), std::nullopt);
}

TEST(ChatTemplate, Names) {
  for (auto k : {ChatTemplateKind::kLlama2, ChatTemplateKind::kLlama3, ChatTemplateKind::kChatml,
                 ChatTemplateKind::kZephyr, ChatTemplateKind::kMistral}) {
    EXPECT_EQ(chat_template_from_name(chat_template_name(k)), k);
  }
  EXPECT_EQ(chat_template_from_name("llama3"), ChatTemplateKind::kLlama3);
  EXPECT_EQ(chat_template_from_name("jinja"), std::nullopt);
}

}  // namespace
}  // namespace ecoserve::server
