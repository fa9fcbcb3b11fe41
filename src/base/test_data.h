// Locating ../shared/data for tests: read in place, never copied.
// Usage in a test:
//   auto path = ecoserve::shared_data_path("models/tinystories-656k-q8_0.gguf");
//   if (!path) GTEST_SKIP() << ecoserve::missing_data_message("models/tinystories-656k-q8_0.gguf");
#pragma once

#include <cstdlib>
#include <filesystem>
#include <optional>
#include <string>

namespace ecoserve {

// $ECOSERVE_SHARED_DATA, else the path compiled in (ECOSERVE_SHARED_DATA), else ../shared/data.
inline std::string shared_data_root() {
  if (const char* env = std::getenv("ECOSERVE_SHARED_DATA"); env && *env) return env;
#ifdef ECOSERVE_SHARED_DATA
  return ECOSERVE_SHARED_DATA;
#else
  return "../shared/data";
#endif
}

inline std::optional<std::string> shared_data_path(const std::string& relative) {
  std::filesystem::path p = std::filesystem::path(shared_data_root()) / relative;
  std::error_code ec;
  if (!std::filesystem::exists(p, ec)) return std::nullopt;
  return p.string();
}

inline std::string missing_data_message(const std::string& relative) {
  return "shared data file '" + relative + "' not found under " + shared_data_root() +
         " (set ECOSERVE_SHARED_DATA); skipping";
}

}  // namespace ecoserve
