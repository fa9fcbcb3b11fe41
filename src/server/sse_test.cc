#include "server/sse.h"

#include <gtest/gtest.h>

namespace ecoserve::server {
namespace {

TEST(Sse, EventFraming) {
  EXPECT_EQ(sse_event(nlohmann::json{{"text", "a\nb"}}), "data: {\"text\":\"a\\nb\"}\n\n");
  EXPECT_EQ(kSseDone, "data: [DONE]\n\n");
}

TEST(Sse, InvalidUtf8IsReplacedNotThrown) {
  EXPECT_EQ(sse_event(nlohmann::json{{"t", std::string("\xE2\x82")}}), "data: {\"t\":\"\xEF\xBF\xBD\"}\n\n");
}

TEST(Sse, HttpChunks) {
  EXPECT_EQ(http_chunk("hello world, this!"), "12\r\nhello world, this!\r\n");
  EXPECT_EQ(http_chunk(""), "");
  EXPECT_EQ(kLastChunk, "0\r\n\r\n");
}

}  // namespace
}  // namespace ecoserve::server
