// InstanceBackend: the GenerationBackend of one embedded instance — an
// engine::ModelRunner (with its own thread pool) stepped by an
// instance::InstanceLoop. Thread-safe like the loop it wraps.
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>

#include "base/clock.h"
#include "cluster/generation_backend.h"
#include "engine/model_runner.h"
#include "instance/instance_loop.h"

namespace ecoserve::cluster {

// Migration copies (migrate_out) are read on a copier thread of their own while
// the loop keeps stepping: the loop thread only checks the request and pins its
// blocks (and suspends it for the stop-and-copy), so the request keeps decoding
// during the bulk copies (Llumnix's staged migration).
class InstanceBackend final : public GenerationBackend {
 public:
  // Builds the runner and the loop; `instance_options`' vocabulary and
  // end-of-generation ids are taken from the model.
  static StatusOr<std::unique_ptr<InstanceBackend>> create(std::shared_ptr<const model::LlamaModel> model,
                                                           const engine::EngineOptions& engine_options,
                                                           instance::InstanceOptions instance_options,
                                                           const Clock* clock);
  ~InstanceBackend() override;

  void start() override;
  Status submit(instance::GenerationRequest request, instance::EventSink sink) override;
  void cancel(RequestId id) override;
  std::shared_ptr<const model::LlamaModel> model() const override { return model_; }
  int32_t max_context() const override { return loop_->max_context(); }
  instance::InstanceStatus status() const override { return loop_->status(); }
  std::vector<InstanceReport> instances() const override;
  std::vector<InstanceTimeline> timeline(TimePoint since) const override {
    return {InstanceTimeline{"0", role_, loop_->timeline(since)}};
  }
  void begin_drain() override { loop_->begin_drain(); }
  bool idle() const override { return loop_->idle(); }
  void stop() override { loop_->stop(); }
  void take_prefilled_kv(RequestId id, std::function<void(StatusOr<std::vector<uint8_t>>)> done) override;
  Status submit_prefilled(instance::GenerationRequest request, std::vector<int32_t> output_tokens,
                          std::vector<uint8_t> kv, instance::EventSink sink) override;
  void migrate_out(RequestId id, int32_t begin, bool stop, ChunkDone done) override;
  void migrate_out_finish(RequestId id, bool committed, StatusDone done) override;
  void migrate_in_reserve(RequestId id, int32_t num_tokens, StatusDone done) override;
  void migrate_in_load(RequestId id, instance::MigrationChunk chunk, StatusDone done) override;
  void migrate_in_commit(instance::MigrationChunk last, instance::EventSink sink, StatusDone done) override;
  void migrate_in_cancel(RequestId id) override;
  // Test hook (InstanceLoop::freeze_for_testing): a hung engine behind a live process.
  void freeze_for_testing(Duration d) { loop_->freeze_for_testing(d); }
  // "mixed", or "prefill" with the prefill-only policy.
  void set_role(std::string role) { role_ = std::move(role); }

  // Block geometry of the engine (for log lines).
  int32_t num_kv_blocks() const { return num_kv_blocks_; }
  int32_t num_host_blocks() const { return num_host_blocks_; }
  // engine::ModelRunner::bf16_weights_decision() (for log lines).
  const std::string& bf16_weights_decision() const { return bf16_weights_decision_; }

 private:
  InstanceBackend() = default;
  std::shared_ptr<const model::LlamaModel> model_;
  // Runs `task` on the copier thread (inline once it has stopped).
  void copy_async(std::function<void()> task);
  void copier_main();

  std::unique_ptr<instance::InstanceLoop> loop_;
  std::mutex copy_mu_;
  std::condition_variable copy_cv_;
  std::deque<std::function<void()>> copy_tasks_;  // under copy_mu_
  bool copy_stop_ = false;                        // under copy_mu_
  std::thread copier_;
  int32_t num_kv_blocks_ = 0;
  int32_t num_host_blocks_ = 0;
  std::string bf16_weights_decision_;
  std::string role_ = "mixed";
};

// The instance options a model implies: its vocabulary size and end-of-generation ids.
void fill_model_fields(const model::LlamaModel& model, instance::InstanceOptions& options);

}  // namespace ecoserve::cluster
