#include "base/log.h"

#include <spdlog/sinks/stdout_color_sinks.h>

namespace ecoserve {

void init_logging(std::string_view level) {
  auto logger = spdlog::stderr_color_mt("ecoserve");
  spdlog::set_default_logger(logger);
  spdlog::set_pattern("[%Y-%m-%d %H:%M:%S.%e] [%^%l%$] %v");
  spdlog::set_level(spdlog::level::from_str(std::string(level)));
}

}  // namespace ecoserve
