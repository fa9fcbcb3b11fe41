// Logging goes through spdlog. init_logging() sets the level once at start-up
// from a name ("trace".."off"); libraries just call spdlog::info(...) etc.
#pragma once

#include <spdlog/spdlog.h>

#include <string_view>

namespace ecoserve {

// Sets spdlog's default logger to stderr with the given level name.
void init_logging(std::string_view level = "info");

}  // namespace ecoserve
