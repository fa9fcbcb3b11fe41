// BenchmarkRunner: sends a workload to an OpenAI-compatible server and records
// every request's timeline.
//
// One io_context on the calling thread drives everything: a timer releases each
// request at its release time (seconds from the start), at most max_concurrency
// run at once (the rest wait in FIFO order; their TTFT/E2E count from when they are
// sent), each request opens its own HTTP/1.1 connection, POSTs a streamed
// completion, and its SSE body is parsed as bytes arrive; the Clock's time of each
// content chunk is recorded. Failures (refused/reset connections, HTTP status codes,
// --request-timeout, errors inside the stream, garbage) are recorded per request and
// never stop the run.
// With an API key, every request (and discover_model) sends "Authorization: Bearer KEY".
// Token counts: usage (stream_options.include_usage) when the server sends it; else
// the tokenizer's count of the generated text when the PromptBuilder is exact; else
// the number of content chunks (approximate).
// Not thread-safe; run() may be called repeatedly (a goodput search does).
#pragma once

#include <cstdio>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "base/clock.h"
#include "base/status.h"
#include "loadgen/dataset.h"
#include "loadgen/prompt_builder.h"
#include "loadgen/request_record.h"
#include "loadgen/server_url.h"

namespace ecoserve::loadgen {

struct RunnerOptions {
  ServerUrl url;
  Endpoint endpoint = Endpoint::kCompletions;
  std::string model;
  std::string api_key;      // non-empty: sent as "Authorization: Bearer <api_key>"
  double request_timeout_s = 600;
  int max_concurrency = 0;  // 0 = unlimited
  bool ignore_eos = true;
  double temperature = 0.0;
  bool keep_text = false;   // keep generated text in the records
  std::FILE* progress = nullptr;  // progress bar target (stderr), or nullptr for none
  std::string progress_label;
};

struct RunResult {
  std::vector<RequestRecord> records;  // in workload order
  double duration_s = 0;               // start to the last completion
};

class BenchmarkRunner {
 public:
  // `clock` and `builder` are borrowed and must outlive the runner.
  BenchmarkRunner(RunnerOptions options, const Clock& clock, const PromptBuilder& builder);

  // release_times_s[i] is when requests[i] is released (sizes must match).
  // Fails only if it cannot start (the host does not resolve, bad sizes).
  StatusOr<RunResult> run(std::span<const BenchRequest> requests,
                          std::span<const double> release_times_s);

  // The JSON body sent for one request (exposed for tests and --result-json): model,
  // prompt or messages, max_tokens, stream, stream_options, temperature, ignore_eos
  // (when asked) and "priority" when the request has one (its high-priority class).
  std::string request_body(const BenchRequest& r) const;

 private:
  RunnerOptions options_;
  const Clock& clock_;
  const PromptBuilder& builder_;
};

// GET {url}{target} (with the API key, if any): the body of a 200. UNAUTHENTICATED on
// 401, INVALID_ARGUMENT on 400/404, UNAVAILABLE otherwise (messages name the URL).
StatusOr<std::string> http_get(const ServerUrl& url, const std::string& target, const std::string& api_key = "",
                               double timeout_s = 30.0);

// GET {url}/v1/models (with the API key, if any) and return the first model id
// (for when --model is not given). A non-200 answer names the status and the
// server's error message: UNAUTHENTICATED for 401, PERMISSION_DENIED for 403,
// UNAVAILABLE otherwise.
StatusOr<std::string> discover_model(const ServerUrl& url, const std::string& api_key = "",
                                     double timeout_s = 10);

// The API key bench sends and where it came from.
struct ApiKeyChoice {
  std::string key;     // empty: no Authorization header
  std::string source;  // "--api-key", "OPENAI_API_KEY" or "" (none)
};

// --api-key when given (an empty value means: send none, even if the environment
// has one), else the OPENAI_API_KEY environment value `env` (nullptr or empty: none),
// as the openai clients do. INVALID_ARGUMENT, naming the source but not the key,
// when the key holds a control character or a non-ASCII byte (it must fit in a header).
StatusOr<ApiKeyChoice> choose_api_key(const std::optional<std::string>& flag, const char* env);

}  // namespace ecoserve::loadgen
