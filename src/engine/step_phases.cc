#include "engine/step_phases.h"

namespace ecoserve::engine {

namespace {
// Indexed by StepPhase: the name printed, and the JSON key.
constexpr std::string_view kNames[kNumStepPhases][2] = {
    {"linear layers", "linear"}, {"attention", "attention"}, {"output layer", "output"},
    {"sampling", "sampling"},    {"other", "other"}};
}  // namespace

std::string_view step_phase_name(StepPhase p) { return kNames[static_cast<int>(p)][0]; }

std::string_view step_phase_key(StepPhase p) { return kNames[static_cast<int>(p)][1]; }

Duration StepPhaseTimes::total() const {
  Duration sum{};
  for (Duration d : time) sum += d;
  return sum;
}

StepPhaseTimes& StepPhaseTimes::operator+=(const StepPhaseTimes& o) {
  for (int i = 0; i < kNumStepPhases; ++i) time[i] += o.time[i];
  steps += o.steps;
  return *this;
}

PhaseTimer::PhaseTimer(const Clock* clock, StepPhaseTimes* into, StepPhase first)
    : clock_(into != nullptr ? clock : nullptr), into_(into), current_(first) {
  if (clock_ != nullptr) since_ = clock_->now();
}

PhaseTimer::~PhaseTimer() {
  if (clock_ == nullptr) return;
  switch_to(current_);
  ++into_->steps;
}

void PhaseTimer::switch_to(StepPhase p) {
  const TimePoint now = clock_->now();
  (*into_)[current_] += now - since_;
  since_ = now;
  current_ = p;
}

}  // namespace ecoserve::engine
