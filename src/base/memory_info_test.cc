#include "base/memory_info.h"

#include <gtest/gtest.h>

namespace ecoserve {
namespace {

TEST(MemoryInfoTest, ParsesMemAvailableInBytes) {
  const StatusOr<std::int64_t> n =
      parse_mem_available("MemTotal:       24608572 kB\nMemFree:         1000 kB\nMemAvailable:   20123456 kB\n"
                          "Buffers:          123 kB\n");
  ASSERT_TRUE(n.ok()) << n.status().to_string();
  EXPECT_EQ(*n, 20123456ll * 1024);
}

TEST(MemoryInfoTest, MissingOrMalformedLinesAreErrors) {
  for (const char* text : {"MemTotal: 1 kB\n", "", "MemAvailable: lots\n", "MemAvailable: 12 MB\n",
                           "MemAvailable: -5 kB\n", "MemAvailable: -0 kB\n", "MemAvailable: +5 kB\n",
                           "MemAvailable: 99999999999999999999 kB\n"}) {
    const StatusOr<std::int64_t> n = parse_mem_available(text);
    ASSERT_FALSE(n.ok()) << text;
    EXPECT_EQ(n.status().code(), StatusCode::kInvalidArgument) << text;
  }
  // A key that only starts the same way is not it.
  EXPECT_FALSE(parse_mem_available("MemAvailableX: 5 kB\n").ok());
}

TEST(MemoryInfoTest, ReadsTheHostsFileAndNamesAMissingOne) {
  const StatusOr<std::int64_t> host = mem_available_bytes();
  ASSERT_TRUE(host.ok()) << host.status().to_string();
  EXPECT_GT(*host, 0);
  const StatusOr<std::int64_t> missing = mem_available_bytes("/nonexistent/meminfo");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(missing.status().message().find("/nonexistent/meminfo"), std::string::npos);
}

}  // namespace
}  // namespace ecoserve
