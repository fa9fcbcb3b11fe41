#include "sim/sim_instance.h"

#include <utility>

namespace ecoserve::sim {

StatusOr<std::unique_ptr<SimInstance>> SimInstance::create(InstanceId id, SimInstanceOptions options,
                                                           std::shared_ptr<const policy::CostModel> cost_model,
                                                           SimRuntime& runtime, EventHandler on_event) {
  if (!cost_model) return invalid_argument_error("instance {}: no cost model", options.name);
  if (options.executor.num_kv_blocks <= 0 || options.executor.block_size <= 0 || options.executor.max_context <= 0) {
    return invalid_argument_error("instance {}: {} KV blocks of {} tokens, context {}", options.name,
                                  options.executor.num_kv_blocks, options.executor.block_size,
                                  options.executor.max_context);
  }
  std::unique_ptr<SimInstance> inst(
      new SimInstance(id, std::move(options), std::move(cost_model), runtime, std::move(on_event)));
  auto core = instance::InstanceCore::create(inst->options_.core, inst->executor_);
  if (!core.ok()) return core.status().with_prefix("instance " + inst->options_.name);
  inst->core_ = std::move(core).value();
  return inst;
}

SimInstance::SimInstance(InstanceId id, SimInstanceOptions options, std::shared_ptr<const policy::CostModel> cost_model,
                         SimRuntime& runtime, EventHandler on_event)
    : id_(id),
      options_(std::move(options)),
      runtime_(runtime),
      on_event_(std::move(on_event)),
      executor_(options_.executor, std::move(cost_model)) {}

instance::EventSink SimInstance::sink() {
  return [this](const instance::TokenEvent& ev) { (in_step_ ? buffer_ : immediate_).push_back(ev); };
}

void SimInstance::add_request(instance::GenerationRequest request) {
  core_->add_request(std::move(request), sink(), runtime_.now());
  schedule_flush();
  kick();
}

void SimInstance::abort(RequestId id) {
  const RequestId ids[] = {id};
  core_->abort(ids);
  schedule_flush();
  kick();
}

void SimInstance::add_prefilled_request(instance::GenerationRequest request, std::vector<int32_t> output_tokens,
                                        std::vector<uint8_t> kv) {
  core_->add_prefilled_request(std::move(request), std::move(output_tokens), std::move(kv), sink(), runtime_.now());
  schedule_flush();
  kick();
}

void SimInstance::post(std::function<void(instance::InstanceCore&, Executor&)> fn) {
  if (busy_) {
    posted_.push_back(std::move(fn));
    return;
  }
  fn(*core_, executor_);
  schedule_flush();
  kick();
}

int32_t SimInstance::phase() const { return static_cast<int32_t>(core_->scheduler().policy().phase()); }
TimePoint SimInstance::last_phase_switch() const { return core_->scheduler().policy().last_phase_switch(); }

void SimInstance::schedule_flush() {
  if (immediate_.empty() || flush_pending_) return;
  flush_pending_ = true;
  runtime_.schedule_at(runtime_.now(), [this] {
    flush_pending_ = false;
    std::vector<instance::TokenEvent> events;
    events.swap(immediate_);
    deliver(events);
  });
}

void SimInstance::deliver(std::vector<instance::TokenEvent>& events) {
  for (const instance::TokenEvent& ev : events) on_event_(id_, ev);
  events.clear();
}

void SimInstance::kick() {
  if (busy_ || attempt_pending_) return;
  attempt_pending_ = true;
  if (poll_pending_) {
    runtime_.cancel(poll_event_);
    poll_pending_ = false;
  }
  runtime_.schedule_at(runtime_.now(), [this] { try_step(); });
}

void SimInstance::try_step() {
  attempt_pending_ = false;
  if (busy_) return;
  const TimePoint start = runtime_.now();
  in_step_ = true;
  const instance::StepReport report = core_->step(start, executor_);
  in_step_ = false;
  if (!report.ran) {
    schedule_flush();  // a step that ran nothing can still end requests (errors, unfit ones)
    if (core_->has_unfinished() && !poll_pending_) {
      poll_pending_ = true;
      poll_event_ = runtime_.schedule_after(options_.idle_poll, [this] {
        poll_pending_ = false;
        kick();
      });
    }
    return;
  }
  double seconds = executor_.last_seconds();
  if (SimHost* host = options_.host) {
    seconds *= host->busy > 0 ? host->shared : host->alone;
    ++host->busy;
  }
  busy_ = true;
  ++counters_.steps;
  counters_.busy_seconds += seconds;
  counters_.prefill_tokens += report.prompt_tokens;
  counters_.decode_tokens += report.num_tokens - report.prompt_tokens;
  if (options_.record_steps) {
    instance::StepRecord r;
    r.start = start;
    r.seconds = seconds;
    r.num_prefill_seqs = report.num_prefill_seqs;
    r.num_decode_seqs = report.num_decode_seqs;
    r.num_prefill_tokens = report.prompt_tokens;
    r.num_decode_tokens = report.num_tokens - report.prompt_tokens;
    r.phase = report.phase;
    steps_.push_back(r);
  }
  runtime_.schedule_at(start + from_seconds(seconds), [this] { finish_step(); });
}

void SimInstance::finish_step() {
  busy_ = false;
  if (options_.host) --options_.host->busy;
  delivering_.swap(buffer_);  // both keep their capacity from step to step
  deliver(delivering_);
  if (!posted_.empty()) {
    std::vector<std::function<void(instance::InstanceCore&, Executor&)>> work;
    work.swap(posted_);
    for (auto& fn : work) fn(*core_, executor_);
  }
  schedule_flush();
  if (core_->has_unfinished() || core_->num_held() > 0) kick();
}

}  // namespace ecoserve::sim
