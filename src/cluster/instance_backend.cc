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
  loop_->post([id, done = std::move(done)](instance::InstanceCore& core, Executor& executor) {
    StatusOr<std::vector<uint8_t>> blob = core.export_held(id, executor);
    (void)core.release_held(id);  // the blob is a copy: the transfer no longer needs the blocks
    done(std::move(blob));
  });
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
