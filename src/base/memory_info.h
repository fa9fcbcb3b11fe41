// The host's memory as the kernel reports it (/proc/meminfo), for choices made at load
// (EngineOptions::bf16_weights's automatic mode).
//
// Contract: free functions, any thread; they read the file each call (no cache).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "base/status.h"

namespace ecoserve {

// MemAvailable of a /proc/meminfo text, in bytes ("MemAvailable:   123 kB"); INVALID_ARGUMENT
// when the line is missing or malformed.
StatusOr<std::int64_t> parse_mem_available(std::string_view meminfo);

// MemAvailable of the file at `path` (default /proc/meminfo), in bytes; UNAVAILABLE when the
// file cannot be read.
StatusOr<std::int64_t> mem_available_bytes(const std::string& path = "/proc/meminfo");

}  // namespace ecoserve
