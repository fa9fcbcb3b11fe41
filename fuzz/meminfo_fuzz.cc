// Fuzz target: the /proc/meminfo reader (parse_mem_available), whose answer sizes the bf16
// weight tiles an engine makes at load (EngineOptions::bf16_weights, auto). The input is the
// whole file's text.
//
// Properties: it never crashes or throws; an error is INVALID_ARGUMENT with a message; a
// result is a whole number of KiB, not negative, and the first "MemAvailable:" line of the
// text (at a line start) reads back as that many kB.
#include <algorithm>
#include <cstdint>
#include <string>
#include <string_view>

#include "base/memory_info.h"
#include "fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const ecoserve::StatusOr<std::int64_t> n = ecoserve::parse_mem_available(text);
  if (!n.ok()) {
    FUZZ_CHECK(n.status().code() == ecoserve::StatusCode::kInvalidArgument, n.status().to_string());
    FUZZ_CHECK(!n.status().message().empty(), text);
    return 0;
  }
  FUZZ_CHECK(*n >= 0 && *n % 1024 == 0, text);
  // The line it read: the first that starts with the key; past the key and blanks, digits
  // whose value is the result's KiB, then " kB".
  std::size_t at = 0;
  if (!text.starts_with("MemAvailable:")) {
    const std::size_t newline = text.find("\nMemAvailable:");
    FUZZ_CHECK(newline != std::string_view::npos, text);
    at = newline + 1;
  }
  const std::size_t end = std::min(text.find('\n', at), text.size());
  std::string_view rest = text.substr(at, end - at).substr(13);
  while (!rest.empty() && (rest.front() == ' ' || rest.front() == '\t')) rest.remove_prefix(1);
  FUZZ_CHECK(rest.ends_with(" kB"), rest);
  rest.remove_suffix(3);
  FUZZ_CHECK(!rest.empty(), text);
  std::int64_t kb = 0;
  for (char c : rest) {
    FUZZ_CHECK(c >= '0' && c <= '9', rest);
    FUZZ_CHECK(kb <= *n / 1024, rest);  // (no overflow: the value only grows to the result)
    kb = kb * 10 + (c - '0');
  }
  FUZZ_CHECK(kb == *n / 1024, rest);
  return 0;
}
