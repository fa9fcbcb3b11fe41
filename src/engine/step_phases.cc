#include "engine/step_phases.h"

namespace ecoserve::engine {

std::string_view step_phase_name(StepPhase p) {
  switch (p) {
    case StepPhase::kLinear: return "linear layers";
    case StepPhase::kAttention: return "attention";
    case StepPhase::kOutput: return "output layer";
    case StepPhase::kSampling: return "sampling";
    case StepPhase::kOther: return "other";
  }
  return "?";
}

std::string_view step_phase_key(StepPhase p) {
  switch (p) {
    case StepPhase::kLinear: return "linear";
    case StepPhase::kAttention: return "attention";
    case StepPhase::kOutput: return "output";
    case StepPhase::kSampling: return "sampling";
    case StepPhase::kOther: return "other";
  }
  return "?";
}

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
