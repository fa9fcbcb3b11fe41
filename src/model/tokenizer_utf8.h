// Small UTF-8 helpers shared by the tokenizers (internal to model/).
// Pure functions; thread-safe.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace ecoserve::model::utf8 {

// Length of the UTF-8 sequence announced by lead byte `c` (1 for ASCII and for a
// stray continuation byte, as llama.cpp does).
inline std::size_t sequence_length(char c) {
  static constexpr std::uint8_t kLen[16] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4};
  return kLen[static_cast<std::uint8_t>(c) >> 4];
}

inline void append_codepoint(std::string& out, std::uint32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

inline constexpr std::string_view kReplacement = "\xEF\xBF\xBD";  // U+FFFD

// Result of decoding one character at `pos`.
enum class CharStatus { kValid, kIncomplete, kInvalid };
struct DecodedChar {
  CharStatus status;
  std::size_t length;  // bytes consumed (kValid), bytes available (kIncomplete), 1 (kInvalid)
  std::uint32_t codepoint;
};

// Strict decoder (no overlongs, no surrogates, max U+10FFFF). A prefix of a
// valid sequence that runs into the end of `s` is kIncomplete.
inline DecodedChar decode_char(std::string_view s, std::size_t pos) {
  const auto b0 = static_cast<std::uint8_t>(s[pos]);
  if (b0 < 0x80) return {CharStatus::kValid, 1, b0};
  std::size_t n;
  std::uint32_t cp;
  std::uint8_t lo = 0x80, hi = 0xBF;  // allowed range of the second byte
  if (b0 >= 0xC2 && b0 <= 0xDF) {
    n = 2; cp = b0 & 0x1F;
  } else if (b0 >= 0xE0 && b0 <= 0xEF) {
    n = 3; cp = b0 & 0x0F;
    if (b0 == 0xE0) lo = 0xA0;
    if (b0 == 0xED) hi = 0x9F;
  } else if (b0 >= 0xF0 && b0 <= 0xF4) {
    n = 4; cp = b0 & 0x07;
    if (b0 == 0xF0) lo = 0x90;
    if (b0 == 0xF4) hi = 0x8F;
  } else {
    return {CharStatus::kInvalid, 1, 0};
  }
  for (std::size_t i = 1; i < n; ++i) {
    if (pos + i >= s.size()) return {CharStatus::kIncomplete, i, 0};
    const auto b = static_cast<std::uint8_t>(s[pos + i]);
    const std::uint8_t l = (i == 1) ? lo : 0x80, h = (i == 1) ? hi : 0xBF;
    if (b < l || b > h) return {CharStatus::kInvalid, 1, 0};
    cp = (cp << 6) | (b & 0x3F);
  }
  return {CharStatus::kValid, n, cp};
}

// Copy of `s` with every invalid byte sequence replaced by U+FFFD (an
// incomplete trailing sequence too).
inline std::string sanitize(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  std::size_t i = 0;
  while (i < s.size()) {
    const DecodedChar d = decode_char(s, i);
    if (d.status == CharStatus::kValid) {
      out.append(s.substr(i, d.length));
      i += d.length;
    } else {
      out.append(kReplacement);
      i += (d.status == CharStatus::kIncomplete) ? d.length : 1;
    }
  }
  return out;
}

inline bool is_valid(std::string_view s) {
  std::size_t i = 0;
  while (i < s.size()) {
    const DecodedChar d = decode_char(s, i);
    if (d.status != CharStatus::kValid) return false;
    i += d.length;
  }
  return true;
}

}  // namespace ecoserve::model::utf8
