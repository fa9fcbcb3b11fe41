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
  ECO_ASSIGN_OR_RETURN(b->loop_, instance::InstanceLoop::create(std::move(runner), instance_options, clock));
  b->model_ = std::move(model);
  return b;
}

InstanceBackend::~InstanceBackend() {
  if (loop_) loop_->stop();
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
  const bool queued = loop_->post([id, begin, stop, shared](instance::InstanceCore& core, Executor& executor) {
    (*shared)(stop ? core.migrate_out_stop(id, begin, executor) : core.migrate_out_copy(id, begin, executor));
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
