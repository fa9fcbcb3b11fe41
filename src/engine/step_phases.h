// Where a forward step's wall time goes: StepPhaseTimes sums, per phase, the time
// ModelRunner::execute spends in it (when a phase clock is set: set_phase_clock), and
// PhaseTimer is the stopwatch execute moves from phase to phase.
//
// The phases are the parts a roofline bounds apart: the decoder layers' linear layers
// (Q/K/V, O, gate/up, down: weight reads or multiply-adds; with them the SiLU gating of
// down's input, which kernels::matmul_gated makes inside its packing where the bf16
// products run), attention (KV reads and its multiply-adds), the output layer (final norm
// and vocabulary projection of the sampled rows), sampling, and the rest (embedding,
// norms, RoPE, KV writes, residual adds, the step's bookkeeping). Each is wall time on the
// thread that runs the step, with the pool's threads working inside it, so the phases of a
// step add up to the step's time.
//
// Plain data and a stopwatch: not thread-safe; the thread that calls execute owns both.
#pragma once

#include <array>
#include <cstdint>
#include <string_view>

#include "base/clock.h"

namespace ecoserve::engine {

enum class StepPhase : std::uint8_t { kLinear, kAttention, kOutput, kSampling, kOther };
inline constexpr int kNumStepPhases = 5;
inline constexpr std::array<StepPhase, kNumStepPhases> kAllStepPhases = {
    StepPhase::kLinear, StepPhase::kAttention, StepPhase::kOutput, StepPhase::kSampling, StepPhase::kOther};

// "linear layers", "attention", "output layer", "sampling", "other".
std::string_view step_phase_name(StepPhase p);
// The same as one word for JSON keys: "linear", "attention", "output", "sampling", "other".
std::string_view step_phase_key(StepPhase p);

struct StepPhaseTimes {
  std::array<Duration, kNumStepPhases> time{};  // indexed by StepPhase
  std::int64_t steps = 0;                      // steps timed

  Duration& operator[](StepPhase p) { return time[static_cast<int>(p)]; }
  Duration operator[](StepPhase p) const { return time[static_cast<int>(p)]; }
  Duration total() const;
  StepPhaseTimes& operator+=(const StepPhaseTimes& o);
};

// Charges the time between successive enter() calls to the phase entered first, from
// construction (in `first`) to destruction, and counts one step at destruction. With a
// null clock it does nothing (execute's default: no clock reads).
class PhaseTimer {
 public:
  PhaseTimer(const Clock* clock, StepPhaseTimes* into, StepPhase first);
  ~PhaseTimer();
  PhaseTimer(const PhaseTimer&) = delete;
  PhaseTimer& operator=(const PhaseTimer&) = delete;

  void enter(StepPhase p) {
    if (clock_ != nullptr) switch_to(p);
  }

 private:
  void switch_to(StepPhase p);

  const Clock* clock_;
  StepPhaseTimes* into_;
  StepPhase current_;
  TimePoint since_{};
};

}  // namespace ecoserve::engine
