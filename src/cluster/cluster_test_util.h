// Test helpers shared by the cluster tests (header-only, tests only).
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "base/instance_types.h"
#include "model/llama_model.h"
#include "policy/cost_model.h"

namespace ecoserve::cluster::testing {

// Predicts 0.4 s per prefill chunk and 10 ms per decode step, whatever their size:
// with a 1 s TTFT SLO two prompts fit an instance under padg.
class ConstantPrefillCost final : public policy::CostModel {
 public:
  double step_seconds(const policy::StepShape& s) const override {
    return 0.4 * s.prefill_seqs + (s.decode_seqs > 0 ? 0.01 : 0.0);
  }
  std::string_view name() const override { return "constant"; }
};

// A request of `text` (BOS included) that ignores end-of-generation, seeded with
// 40 + id: the same request gives the same tokens on any instance.
inline instance::GenerationRequest seeded_request(const model::LlamaModel& model, uint64_t id, const std::string& text,
                                                  float temperature, int32_t max_tokens) {
  instance::GenerationRequest r;
  r.id = RequestId(id);
  r.prompt = model.tokenizer().encode(text, true);
  r.sampling.temperature = temperature;
  r.sampling.max_tokens = max_tokens;
  r.sampling.ignore_eos = true;
  r.sampling.has_seed = true;
  r.sampling.seed = 40 + id;
  return r;
}

// What a request produced: its tokens, final reason and error, and how many
// final events it got (exactly one, always).
struct Outcome {
  std::vector<int32_t> tokens;
  std::string reason;
  std::string error;
  int32_t finals = 0;
};

// Collects the events of a set of requests (thread-safe sinks); wait() blocks
// until `n` final events came, or fails the test after `timeout`.
class Collector {
 public:
  // `also` sees each event after it was recorded (outside the lock).
  instance::EventSink sink(std::function<void(const instance::TokenEvent&)> also = nullptr) {
    return [this, also](const instance::TokenEvent& ev) {
      {
        std::lock_guard<std::mutex> lock(mu_);
        Outcome& o = got_[ev.id.value];
        if (ev.token >= 0) o.tokens.push_back(ev.token);
        if (ev.finished) {
          o.reason = ev.finish_reason;
          o.error = ev.error;
          ++o.finals;
          ++finished_;
        }
      }
      cv_.notify_all();
      if (also) also(ev);
    };
  }
  std::map<uint64_t, Outcome> wait(size_t n, std::chrono::seconds timeout = std::chrono::seconds(60)) {
    std::unique_lock<std::mutex> lock(mu_);
    EXPECT_TRUE(cv_.wait_for(lock, timeout, [&] { return finished_ >= n; })) << "requests did not finish";
    return got_;
  }
  size_t tokens_of(uint64_t id) {
    std::lock_guard<std::mutex> lock(mu_);
    return got_[id].tokens.size();
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::map<uint64_t, Outcome> got_;
  size_t finished_ = 0;
};

}  // namespace ecoserve::cluster::testing
