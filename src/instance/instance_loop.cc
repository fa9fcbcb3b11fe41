#include "instance/instance_loop.h"

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>

namespace ecoserve::instance {

namespace {

struct Incoming {
  GenerationRequest request;
  EventSink sink;
  TimePoint arrival;
};

// Exponential moving average with a fixed weight (recent steps dominate).
void ema(double& acc, double v, int64_t n) { acc = n <= 1 ? v : 0.9 * acc + 0.1 * v; }

// Times the execute() of each step with the loop's clock (the core has none).
class TimedExecutor final : public Executor {
 public:
  TimedExecutor(Executor& inner, const Clock& clock) : inner_(inner), clock_(clock) {}
  StatusOr<StepOutput> execute(const StepPlan& plan) override {
    start = clock_.now();
    auto out = inner_.execute(plan);
    end = clock_.now();
    return out;
  }
  int32_t block_size() const override { return inner_.block_size(); }
  int32_t num_kv_blocks() const override { return inner_.num_kv_blocks(); }
  int32_t num_host_blocks() const override { return inner_.num_host_blocks(); }
  int32_t max_context() const override { return inner_.max_context(); }
  StatusOr<std::vector<uint8_t>> export_kv(std::span<const BlockId> blocks, int32_t begin,
                                           int32_t end_token) const override {
    return inner_.export_kv(blocks, begin, end_token);
  }
  StatusOr<int32_t> import_kv(std::span<const uint8_t> blob, std::span<const BlockId> blocks) override {
    return inner_.import_kv(blob, blocks);
  }
  TimePoint start{}, end{};

 private:
  Executor& inner_;
  const Clock& clock_;
};

}  // namespace

InstanceCoreOptions InstanceOptions::core_options() const {
  InstanceCoreOptions o;
  o.policy = policy;
  o.max_num_seqs = max_num_seqs;
  o.max_num_batched_tokens = max_num_batched_tokens;
  o.chunk_size = chunk_size;
  o.enable_prefix_caching = enable_prefix_caching;
  o.preemption_mode = preemption_mode;
  o.vocab_size = vocab_size;
  o.eog_token_ids = eog_token_ids;
  o.cost_model = cost_model;
  return o;
}

struct InstanceLoop::Impl {
  std::unique_ptr<Executor> executor;
  InstanceOptions options;
  const Clock* clock = nullptr;
  std::unique_ptr<InstanceCore> core;  // loop thread only (validate() is const and pure)

  mutable std::mutex mu;
  std::condition_variable cv;
  std::deque<Incoming> incoming;
  std::vector<RequestId> cancels;
  std::deque<InstanceLoop::CoreTask> tasks;
  bool stopping = false;
  bool draining = false;
  int32_t queued = 0;  // incoming + the scheduler's waiting (under mu)
  InstanceStatus snapshot;
  std::deque<StepRecord> steps;  // the timeline ring (under mu)
  std::thread thread;
  bool started = false;

  void run();
  void publish(bool running_flag);
};

InstanceLoop::InstanceLoop(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

InstanceLoop::~InstanceLoop() { stop(); }

StatusOr<std::unique_ptr<InstanceLoop>> InstanceLoop::create(std::unique_ptr<Executor> executor,
                                                             const InstanceOptions& options, const Clock* clock) {
  if (!executor) return invalid_argument_error("instance: no executor");
  if (!clock) return invalid_argument_error("instance: no clock");
  auto impl = std::make_unique<Impl>();
  ECO_ASSIGN_OR_RETURN(impl->core, InstanceCore::create(options.core_options(), *executor));
  impl->executor = std::move(executor);
  impl->options = options;
  impl->clock = clock;
  // The core's real counts (free and total KV blocks, ...) from the start: start()
  // marks the snapshot running before the thread's first publish, and a router that
  // read zero blocks there took a healthy, idle instance for a full one (llumnix
  // migrated its first request away to "balance" or "defragment" it).
  impl->core->fill_status(impl->snapshot);
  impl->snapshot.last_heartbeat = clock->now();
  return std::unique_ptr<InstanceLoop>(new InstanceLoop(std::move(impl)));
}

void InstanceLoop::start() {
  std::lock_guard<std::mutex> lock(impl_->mu);
  if (impl_->started) return;
  impl_->started = true;
  impl_->snapshot.running = true;
  impl_->snapshot.last_heartbeat = impl_->clock->now();
  impl_->thread = std::thread([this] { impl_->run(); });
}

void InstanceLoop::begin_drain() {
  std::lock_guard<std::mutex> lock(impl_->mu);
  impl_->draining = true;
}

bool InstanceLoop::idle() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->queued == 0 && impl_->snapshot.num_running == 0 && impl_->snapshot.num_swapped == 0 &&
         impl_->snapshot.num_migrating == 0 && impl_->incoming.empty();
}

void InstanceLoop::stop() {
  {
    std::lock_guard<std::mutex> lock(impl_->mu);
    impl_->stopping = true;
  }
  impl_->cv.notify_all();
  if (impl_->thread.joinable()) impl_->thread.join();
  // Requests never seen by the loop thread still get their final event.
  std::deque<Incoming> left;
  {
    std::lock_guard<std::mutex> lock(impl_->mu);
    left.swap(impl_->incoming);
    impl_->snapshot.running = false;
  }
  // Tasks the thread never ran: run them here (the thread is gone; the core is ours).
  std::deque<CoreTask> tasks;
  {
    std::lock_guard<std::mutex> lock(impl_->mu);
    tasks.swap(impl_->tasks);
  }
  for (auto& t : tasks) t(*impl_->core, *impl_->executor);
  if (!tasks.empty()) impl_->core->abort_all();
  for (auto& in : left) {
    TokenEvent ev;
    ev.id = in.request.id;
    ev.finished = true;
    ev.finish_reason = "abort";
    ev.prompt_tokens = static_cast<int32_t>(in.request.prompt.size());
    in.sink(ev);
  }
}

Status InstanceLoop::submit(GenerationRequest request, EventSink sink) {
  ECO_RETURN_IF_ERROR(impl_->core->validate(request));
  if (!sink) return invalid_argument_error("no event sink");
  {
    std::lock_guard<std::mutex> lock(impl_->mu);
    if (impl_->stopping || impl_->draining) return unavailable_error("the server is shutting down");
    if (impl_->queued >= impl_->options.max_waiting) {
      return resource_exhausted_error("the waiting queue is full ({} requests); retry later", impl_->options.max_waiting);
    }
    impl_->queued++;
    impl_->incoming.push_back(Incoming{std::move(request), std::move(sink), impl_->clock->now()});
  }
  impl_->cv.notify_one();
  return ok_status();
}

void InstanceLoop::cancel(RequestId id) {
  {
    std::lock_guard<std::mutex> lock(impl_->mu);
    impl_->cancels.push_back(id);
  }
  impl_->cv.notify_one();
}

bool InstanceLoop::post(CoreTask task) {
  {
    std::lock_guard<std::mutex> lock(impl_->mu);
    if (impl_->stopping) return false;
    impl_->tasks.push_back(std::move(task));
  }
  impl_->cv.notify_one();
  return true;
}

Status InstanceLoop::submit_prefilled(GenerationRequest request, std::vector<int32_t> output_tokens,
                                      std::vector<uint8_t> kv, EventSink sink) {
  if (!sink) return invalid_argument_error("no event sink");
  {
    std::lock_guard<std::mutex> lock(impl_->mu);
    if (impl_->stopping) return unavailable_error("the instance is stopping");
  }
  const TimePoint arrival = impl_->clock->now();
  const bool queued = post([request = std::move(request), output_tokens = std::move(output_tokens),
                            kv = std::move(kv), sink = std::move(sink), arrival](InstanceCore& core, Executor&) mutable {
    core.add_prefilled_request(std::move(request), std::move(output_tokens), std::move(kv), std::move(sink), arrival);
  });
  if (!queued) return unavailable_error("the instance is stopping");
  return ok_status();
}

void InstanceLoop::freeze_for_testing(Duration d) {
  post([d](InstanceCore&, Executor&) { std::this_thread::sleep_for(d); });
}

InstanceStatus InstanceLoop::status() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->snapshot;
}

std::vector<StepRecord> InstanceLoop::timeline(TimePoint since) const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  std::vector<StepRecord> out;
  for (const StepRecord& r : impl_->steps) {
    if (r.start >= since) out.push_back(r);
  }
  return out;
}

int32_t InstanceLoop::max_context() const { return impl_->core->max_context(); }
const InstanceOptions& InstanceLoop::options() const { return impl_->options; }

void InstanceLoop::Impl::publish(bool running_flag) {
  std::lock_guard<std::mutex> lock(mu);
  snapshot.running = running_flag;
  snapshot.last_heartbeat = clock->now();
  snapshot.in_step = false;
  core->fill_status(snapshot);
  snapshot.num_waiting += static_cast<int32_t>(incoming.size());
  for (const Incoming& in : incoming) snapshot.num_waiting_tokens += static_cast<int64_t>(in.request.prompt.size());
  queued = snapshot.num_waiting;
}

void InstanceLoop::Impl::run() {
  TimedExecutor timed(*executor, *clock);
  while (true) {
    std::deque<Incoming> batch;
    std::vector<RequestId> to_cancel;
    std::deque<InstanceLoop::CoreTask> to_run;
    {
      std::unique_lock<std::mutex> lock(mu);
      if (!stopping && incoming.empty() && cancels.empty() && tasks.empty() && !core->has_unfinished()) {
        cv.wait_for(lock, options.idle_heartbeat);
      }
      if (stopping) break;
      batch.swap(incoming);
      to_cancel.swap(cancels);
      to_run.swap(tasks);
    }
    for (auto& t : to_run) t(*core, *executor);
    for (auto& in : batch) core->add_request(std::move(in.request), std::move(in.sink), in.arrival);
    if (!to_cancel.empty()) core->abort(to_cancel);
    if (!core->has_unfinished()) {
      publish(true);
      continue;
    }
    const TimePoint t0 = clock->now();
    {
      std::lock_guard<std::mutex> lock(mu);  // a long step is work, not silence (loop_alive)
      snapshot.in_step = true;
      snapshot.step_started = t0;
    }
    const StepReport report = core->step(t0, timed);
    if (!report.ran) {
      // Nothing fits right now (e.g. all blocks held): beat and wait for a change.
      publish(true);
      std::unique_lock<std::mutex> lock(mu);
      cv.wait_for(lock, std::chrono::milliseconds(5));
      continue;
    }
    const double plan_seconds = to_seconds(timed.start - t0);
    const double execute_seconds = to_seconds(timed.end - timed.start);
    {
      std::lock_guard<std::mutex> lock(mu);
      snapshot.in_step = false;
      snapshot.steps++;
      snapshot.last_step_seconds = execute_seconds;
      StepRecord rec;
      rec.start = t0;
      rec.seconds = to_seconds(timed.end - t0);
      rec.num_prefill_seqs = report.num_prefill_seqs;
      rec.num_decode_seqs = report.num_decode_seqs;
      rec.num_prefill_tokens = report.prompt_tokens;
      rec.num_decode_tokens = std::max<int64_t>(0, report.num_tokens - report.prompt_tokens);
      rec.phase = report.phase;
      steps.push_back(rec);
      while (static_cast<int32_t>(steps.size()) > std::max(1, options.timeline_capacity)) steps.pop_front();
      ema(snapshot.mean_step_seconds, execute_seconds, snapshot.steps);
      ema(snapshot.mean_plan_seconds, plan_seconds, snapshot.steps);
    }
    if (options.on_step) {
      StepStats st;
      st.plan_seconds = plan_seconds;
      st.execute_seconds = execute_seconds;
      st.num_seqs = report.num_seqs;
      st.num_tokens = report.num_tokens;
      st.num_prefill_seqs = report.num_prefill_seqs;
      st.num_decode_seqs = report.num_decode_seqs;
      options.on_step(st);
    }
    publish(true);
  }
  // Stopping: every request still known gets its final event.
  core->abort_all();
  publish(false);
}

}  // namespace ecoserve::instance
