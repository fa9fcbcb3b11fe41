#include "cluster/instance_backend.h"

namespace ecoserve::cluster {

void fill_model_fields(const model::LlamaModel& model, instance::InstanceOptions& options) {
  options.vocab_size = model.config().n_vocab;
  options.eog_token_ids = model.tokenizer().eog_token_ids();
}

StatusOr<std::unique_ptr<InstanceBackend>> InstanceBackend::create(std::shared_ptr<const model::LlamaModel> model,
                                                                   const engine::EngineOptions& engine_options,
                                                                   instance::InstanceOptions instance_options,
                                                                   const Clock* clock) {
  if (!model) return invalid_argument_error("instance backend: no model");
  ECO_ASSIGN_OR_RETURN(std::unique_ptr<engine::ModelRunner> runner, engine::ModelRunner::create(model, engine_options));
  fill_model_fields(*model, instance_options);
  std::unique_ptr<InstanceBackend> b(new InstanceBackend());
  b->num_kv_blocks_ = runner->num_kv_blocks();
  b->num_host_blocks_ = runner->num_host_blocks();
  b->bf16_weights_decision_ = runner->bf16_weights_decision();
  ECO_ASSIGN_OR_RETURN(b->loop_, instance::InstanceLoop::create(std::move(runner), instance_options, clock));
  b->model_ = std::move(model);
  b->copier_ = std::thread([raw = b.get()] { raw->copier_main(); });
  return b;
}

InstanceBackend::~InstanceBackend() {
  {
    std::lock_guard<std::mutex> lock(copy_mu_);
    copy_stop_ = true;
  }
  copy_cv_.notify_all();
  if (copier_.joinable()) copier_.join();
  if (loop_) loop_->stop();
}

void InstanceBackend::copier_main() {
  std::unique_lock<std::mutex> lock(copy_mu_);
  for (;;) {
    copy_cv_.wait(lock, [&] { return copy_stop_ || !copy_tasks_.empty(); });
    if (copy_tasks_.empty()) return;  // stopping, nothing left
    std::function<void()> task = std::move(copy_tasks_.front());
    copy_tasks_.pop_front();
    lock.unlock();
    task();
    lock.lock();
  }
}

void InstanceBackend::copy_async(std::function<void()> task) {
  {
    std::lock_guard<std::mutex> lock(copy_mu_);
    if (!copy_stop_) {
      copy_tasks_.push_back(std::move(task));
      copy_cv_.notify_one();
      return;
    }
  }
  task();
}

void InstanceBackend::start() { loop_->start(); }

Status InstanceBackend::submit(instance::GenerationRequest request, instance::EventSink sink) {
  return loop_->submit(std::move(request), std::move(sink));
}

void InstanceBackend::cancel(RequestId id) { loop_->cancel(id); }

void InstanceBackend::take_prefilled_kv(RequestId id, std::function<void(StatusOr<std::vector<uint8_t>>)> done) {
  auto shared = std::make_shared<std::function<void(StatusOr<std::vector<uint8_t>>)>>(std::move(done));
  const bool queued = loop_->post([id, shared](instance::InstanceCore& core, Executor& executor) {
    StatusOr<std::vector<uint8_t>> blob = core.export_held(id, executor);
    (void)core.release_held(id);  // the blob is a copy: the transfer no longer needs the blocks
    (*shared)(std::move(blob));
  });
  if (!queued) (*shared)(unavailable_error("the instance is stopping"));
}

void InstanceBackend::migrate_out(RequestId id, int32_t begin, bool stop, ChunkDone done) {
  auto shared = std::make_shared<ChunkDone>(std::move(done));
  const bool queued = loop_->post([this, id, begin, stop, shared](instance::InstanceCore& core, Executor& executor) {
    StatusOr<instance::MigrationSource> src = core.migrate_out_begin(id, begin, stop);
    if (!src.ok()) return (*shared)(src.status());
    auto source = std::make_shared<instance::MigrationSource>(std::move(*src));
    const Executor* ex = &executor;  // lives as long as the loop, which outlives the copier
    copy_async([this, source, ex, shared] {
      StatusOr<instance::MigrationChunk> chunk = instance::InstanceCore::export_source(*source, *ex);
      const bool failed_stop = !chunk.ok() && source->last;
      // Back on the loop thread: drop the pins (and resume a request whose
      // stop-and-copy could not be read). A stopping loop takes its blocks with it.
      (void)loop_->post([source, failed_stop](instance::InstanceCore& core, Executor&) {
        core.migrate_out_unpin(*source);
        if (failed_stop) (void)core.migrate_out_finish(source->id, /*committed=*/false);
      });
      (*shared)(std::move(chunk));
    });
  });
  if (!queued) (*shared)(unavailable_error("the instance is stopping"));
}

void InstanceBackend::migrate_out_finish(RequestId id, bool committed, StatusDone done) {
  auto shared = std::make_shared<StatusDone>(std::move(done));
  const bool queued = loop_->post([id, committed, shared](instance::InstanceCore& core, Executor&) {
    (*shared)(core.migrate_out_finish(id, committed));
  });
  if (!queued) (*shared)(unavailable_error("the instance is stopping"));
}

void InstanceBackend::migrate_in_reserve(RequestId id, int32_t num_tokens, StatusDone done) {
  auto shared = std::make_shared<StatusDone>(std::move(done));
  const bool queued = loop_->post([id, num_tokens, shared](instance::InstanceCore& core, Executor&) {
    (*shared)(core.migrate_in_reserve(id, num_tokens));
  });
  if (!queued) (*shared)(unavailable_error("the instance is stopping"));
}

void InstanceBackend::migrate_in_load(RequestId id, instance::MigrationChunk chunk, StatusDone done) {
  auto shared = std::make_shared<StatusDone>(std::move(done));
  auto c = std::make_shared<instance::MigrationChunk>(std::move(chunk));
  const bool queued = loop_->post([id, c, shared](instance::InstanceCore& core, Executor& executor) {
    (*shared)(core.migrate_in_load(id, *c, executor));
  });
  if (!queued) (*shared)(unavailable_error("the instance is stopping"));
}

void InstanceBackend::migrate_in_commit(instance::MigrationChunk last, instance::EventSink sink, StatusDone done) {
  auto shared = std::make_shared<StatusDone>(std::move(done));
  auto c = std::make_shared<instance::MigrationChunk>(std::move(last));
  const bool queued = loop_->post([c, sink = std::move(sink), shared](instance::InstanceCore& core,
                                                                       Executor& executor) mutable {
    (*shared)(core.migrate_in_commit(*c, std::move(sink), executor));
  });
  if (!queued) (*shared)(unavailable_error("the instance is stopping"));
}

void InstanceBackend::migrate_in_cancel(RequestId id) {
  (void)loop_->post([id](instance::InstanceCore& core, Executor&) { core.migrate_in_cancel(id); });
}

Status InstanceBackend::submit_prefilled(instance::GenerationRequest request, std::vector<int32_t> output_tokens,
                                         std::vector<uint8_t> kv, instance::EventSink sink) {
  return loop_->submit_prefilled(std::move(request), std::move(output_tokens), std::move(kv), std::move(sink));
}

std::vector<InstanceReport> InstanceBackend::instances() const {
  InstanceReport r;
  r.name = "0";
  r.role = role_;
  r.status = loop_->status();
  r.healthy = r.status.running;
  return {r};
}

}  // namespace ecoserve::cluster
