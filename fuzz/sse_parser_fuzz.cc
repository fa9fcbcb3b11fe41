// Fuzz target: the bench's Server-Sent-Events parser (loadgen::SseParser) and
// the stream-chunk parser behind it (loadgen::parse_stream_data).
//
// Input: byte 0 gives the number of split points (0..16), the next bytes their
// places (each byte b puts a split at b/255 of the body), the rest is the body.
// SseParser's contract is that feed() takes the body "in any split, even
// mid-line" (a "\r\n" split between two feeds included): the events of the
// split feed must equal those of one feed of the whole body. Every event's data
// then goes through parse_stream_data, which must not throw.
#include <algorithm>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "fuzz_util.h"
#include "loadgen/sse_parser.h"

namespace {

using ecoserve::loadgen::SseEvent;
using ecoserve::loadgen::SseParser;

std::vector<SseEvent> parse_in_pieces(std::string_view body, const std::vector<std::size_t>& cuts) {
  std::vector<SseEvent> events;
  SseParser parser([&events](const SseEvent& e) { events.push_back(e); });
  std::size_t pos = 0;
  for (std::size_t cut : cuts) {
    parser.feed(body.substr(pos, cut - pos));
    pos = cut;
  }
  parser.feed(body.substr(pos));
  parser.finish();
  return events;
}

std::string describe(const std::vector<SseEvent>& events) {
  std::string s;
  for (const SseEvent& e : events) s += "[" + e.type + "|" + e.data + "]";
  return s;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  ecoserve::fuzz::InputReader in(data, size);
  const int num_cuts = in.byte() % 17;
  const std::string_view places = in.take(num_cuts);
  const std::string_view body = in.rest();
  std::vector<std::size_t> cuts;
  for (char c : places) cuts.push_back(static_cast<std::uint8_t>(c) * body.size() / 255);
  std::sort(cuts.begin(), cuts.end());

  const std::vector<SseEvent> whole = parse_in_pieces(body, {});
  const std::vector<SseEvent> pieces = parse_in_pieces(body, cuts);
  FUZZ_CHECK(whole.size() == pieces.size(), describe(whole) + " vs " + describe(pieces));
  for (std::size_t i = 0; i < whole.size(); ++i) {
    FUZZ_CHECK(whole[i].type == pieces[i].type && whole[i].data == pieces[i].data,
               describe(whole) + " vs " + describe(pieces));
  }

  for (const SseEvent& e : whole) {
    // Lines end at '\r' or '\n': neither can be inside a field, '\n' only joins data lines.
    FUZZ_CHECK(e.type.find_first_of("\r\n") == std::string::npos, e.type);
    FUZZ_CHECK(e.data.find('\r') == std::string::npos, e.data);
    auto chunk = ecoserve::loadgen::parse_stream_data(e.data);
    if (chunk.ok() && chunk->done) {
      FUZZ_CHECK(e.data.find("[DONE]") != std::string::npos, e.data);
    }
    if (chunk.ok() && chunk->has_usage) FUZZ_CHECK(chunk->error.empty());
  }
  return 0;
}
