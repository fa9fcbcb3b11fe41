// Helpers shared by the fuzz targets (fuzz/*_fuzz.cc): a property check that
// fails the run, and a reader that turns the first bytes of an input into
// choices (split points, flags) and the rest into data. Built both into the
// libFuzzer targets (clang) and into the replay drivers (g++, replay_main.cc).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>

// Fails the fuzz run when a property the code guarantees does not hold: prints
// what failed and traps, so libFuzzer saves the input as a crash and the replay
// driver dies with SIGILL (a failing ctest).
#define FUZZ_CHECK(cond, ...)                                                                  \
  do {                                                                                         \
    if (!(cond)) {                                                                             \
      std::fprintf(stderr, "FUZZ_CHECK failed at %s:%d: %s\n", __FILE__, __LINE__, #cond);    \
      ecoserve::fuzz::print_details(__VA_ARGS__);                                              \
      std::fflush(stderr);                                                                     \
      __builtin_trap();                                                                        \
    }                                                                                          \
  } while (0)

namespace ecoserve::fuzz {

inline void print_details() {}
// Details of a failed check, shown with escapes for non-printable bytes.
inline void print_details(std::string_view what) {
  std::string out;
  for (unsigned char c : what.substr(0, 2000)) {
    if (c >= 0x20 && c < 0x7f && c != '\\') {
      out += static_cast<char>(c);
    } else {
      char buf[8];
      std::snprintf(buf, sizeof(buf), "\\x%02x", c);
      out += buf;
    }
  }
  if (what.size() > 2000) out += "...";
  std::fprintf(stderr, "  %s\n", out.c_str());
}

// Reads choices from the front of a fuzz input; past the end every choice is 0.
class InputReader {
 public:
  InputReader(const std::uint8_t* data, std::size_t size)
      : data_(reinterpret_cast<const char*>(data), size) {}

  std::uint8_t byte() {
    if (data_.empty()) return 0;
    const auto b = static_cast<std::uint8_t>(data_.front());
    data_.remove_prefix(1);
    return b;
  }
  // Up to `n` bytes (fewer at the end of the input).
  std::string_view take(std::size_t n) {
    const std::string_view out = data_.substr(0, n);
    data_.remove_prefix(out.size());
    return out;
  }
  // Bytes up to (not including) the next `sep`, which is consumed; all the rest if none.
  std::string_view take_until(char sep) {
    const std::size_t pos = data_.find(sep);
    if (pos == std::string_view::npos) return take(data_.size());
    const std::string_view out = data_.substr(0, pos);
    data_.remove_prefix(pos + 1);
    return out;
  }
  std::string_view rest() const { return data_; }
  bool empty() const { return data_.empty(); }

 private:
  std::string_view data_;
};

}  // namespace ecoserve::fuzz
