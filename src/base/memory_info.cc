#include "base/memory_info.h"

#include <algorithm>
#include <charconv>
#include <fstream>
#include <sstream>

namespace ecoserve {

StatusOr<std::int64_t> parse_mem_available(std::string_view meminfo) {
  constexpr std::string_view kKey = "MemAvailable:";
  std::size_t at = 0;
  while (at < meminfo.size()) {
    const std::size_t end = std::min(meminfo.find('\n', at), meminfo.size());
    std::string_view line = meminfo.substr(at, end - at);
    at = end + 1;
    if (!line.starts_with(kKey)) continue;
    line.remove_prefix(kKey.size());
    while (!line.empty() && (line.front() == ' ' || line.front() == '\t')) line.remove_prefix(1);
    std::int64_t kb = 0;
    if (line.empty() || line.front() < '0' || line.front() > '9') {
      return invalid_argument_error("meminfo: malformed MemAvailable line '{}{}'", kKey, line);
    }
    const auto [p, ec] = std::from_chars(line.data(), line.data() + line.size(), kb);
    const std::string_view unit = line.substr(static_cast<std::size_t>(p - line.data()));
    if (ec != std::errc() || kb < 0 || unit != " kB" || kb > (INT64_MAX >> 10)) {
      return invalid_argument_error("meminfo: malformed MemAvailable line '{}{}'", kKey, line);
    }
    return kb << 10;
  }
  return invalid_argument_error("meminfo: no MemAvailable line");
}

StatusOr<std::int64_t> mem_available_bytes(const std::string& path) {
  std::ifstream in(path);
  if (!in) return unavailable_error("meminfo: cannot read {}", path);
  std::ostringstream text;
  text << in.rdbuf();
  return parse_mem_available(text.str());
}

}  // namespace ecoserve
