// RequestRecord: everything `ecoserve bench` records about one request.
//
// Times are seconds relative to the benchmark start (t = 0 when the run begins).
// A record is filled by the HTTP client while the request runs and is read-only
// afterwards; metrics are pure functions of a vector of records.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ecoserve::loadgen {

// How a request failed. Counted per kind (and HTTP code) in the report.
enum class ErrorKind {
  kNone = 0,
  kConnectionRefused,  // connect() refused
  kConnectionError,    // other connect/resolve failures (unreachable, ...)
  kConnectionReset,    // reset or closed by the peer before the response ended
  kHttpStatus,         // non-2xx status; see http_status
  kTimeout,            // --request-timeout expired
  kStreamError,        // the server sent an error object inside the stream
  kProtocolError,      // unparsable HTTP / SSE / JSON
};

std::string_view error_kind_name(ErrorKind kind);

// The priority class of a request (--high-priority-fraction). kHigh requests send
// "priority": --high-priority-value in their body (vLLM's field: a lower value is
// served earlier, default 0); kNormal ones send no priority field.
enum class PriorityClass { kNormal = 0, kHigh };

// "normal" or "high": the key of the class in reports and --result-json.
constexpr std::string_view priority_class_name(PriorityClass c) {
  return c == PriorityClass::kHigh ? "high" : "normal";
}

struct RequestRecord {
  std::int64_t index = 0;        // position in the workload
  double scheduled_s = 0;        // when the arrival process released it
  double sent_s = 0;             // when it was sent (>= scheduled_s under --max-concurrency)
  double first_token_s = -1;     // first chunk with content; -1 if none
  double end_s = -1;             // response complete (or failure time)
  std::vector<double> chunk_s;   // wall time of every content chunk (first is first_token_s)
  std::int64_t input_tokens = 0;       // usage.prompt_tokens, else the workload's length
  std::int64_t output_tokens = 0;      // usage.completion_tokens, else counted
  std::int64_t expected_output_tokens = 0;  // max_tokens asked for
  bool output_tokens_from_usage = false;
  bool input_tokens_from_usage = false;
  bool success = false;
  ErrorKind error = ErrorKind::kNone;
  int http_status = 0;           // for kHttpStatus (and the status of successful ones: 200)
  std::string error_message;     // short, for the JSON record
  std::string generated_text;    // concatenated content (kept only if asked)
  PriorityClass priority_class = PriorityClass::kNormal;  // copied from the BenchRequest
  std::optional<std::int64_t> priority;  // the "priority" sent in the body, if any
  bool long_request = false;     // its lengths came from --long-input-len/--long-output-len

  // Derived (seconds). Valid only for successful requests with a first token.
  double ttft_s() const { return first_token_s - sent_s; }
  double e2e_s() const { return end_s - sent_s; }
};

// "connection_refused", "http_429", "timeout", ...: the key errors are counted under.
std::string error_key(const RequestRecord& r);

}  // namespace ecoserve::loadgen
