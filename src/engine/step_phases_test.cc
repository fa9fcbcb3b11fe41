// PhaseTimer charges the time between enter() calls to the phase entered, closes the
// last phase and counts the step at destruction, and does nothing without a clock.
#include "engine/step_phases.h"

#include <gtest/gtest.h>

namespace ecoserve::engine {
namespace {

using std::chrono::microseconds;

TEST(PhaseTimerTest, ChargesEachIntervalToThePhaseEntered) {
  ManualClock clock;
  StepPhaseTimes times;
  {
    PhaseTimer timer(&clock, &times, StepPhase::kOther);
    clock.advance(microseconds(3));
    timer.enter(StepPhase::kLinear);
    clock.advance(microseconds(10));
    timer.enter(StepPhase::kAttention);
    clock.advance(microseconds(5));
    timer.enter(StepPhase::kLinear);
    clock.advance(microseconds(7));
    timer.enter(StepPhase::kOutput);
    clock.advance(microseconds(2));
    timer.enter(StepPhase::kSampling);
    clock.advance(microseconds(1));
  }
  EXPECT_EQ(times[StepPhase::kOther], microseconds(3));
  EXPECT_EQ(times[StepPhase::kLinear], microseconds(17));
  EXPECT_EQ(times[StepPhase::kAttention], microseconds(5));
  EXPECT_EQ(times[StepPhase::kOutput], microseconds(2));
  EXPECT_EQ(times[StepPhase::kSampling], microseconds(1));
  EXPECT_EQ(times.total(), microseconds(28));
  EXPECT_EQ(times.steps, 1);
}

TEST(PhaseTimerTest, StepsAddUpAndNullClockDoesNothing) {
  ManualClock clock;
  StepPhaseTimes times;
  for (int step = 0; step < 3; ++step) {
    PhaseTimer timer(&clock, &times, StepPhase::kLinear);
    clock.advance(microseconds(4));
  }
  {
    PhaseTimer off(nullptr, &times, StepPhase::kAttention);
    off.enter(StepPhase::kOther);
    clock.advance(microseconds(100));
  }
  EXPECT_EQ(times[StepPhase::kLinear], microseconds(12));
  EXPECT_EQ(times.total(), microseconds(12));
  EXPECT_EQ(times.steps, 3);

  StepPhaseTimes more;
  more[StepPhase::kAttention] = microseconds(6);
  more.steps = 2;
  times += more;
  EXPECT_EQ(times[StepPhase::kAttention], microseconds(6));
  EXPECT_EQ(times.total(), microseconds(18));
  EXPECT_EQ(times.steps, 5);
}

TEST(StepPhaseTest, NamesAndKeys) {
  EXPECT_EQ(step_phase_name(StepPhase::kLinear), "linear layers");
  EXPECT_EQ(step_phase_name(StepPhase::kOutput), "output layer");
  EXPECT_EQ(step_phase_key(StepPhase::kLinear), "linear");
  EXPECT_EQ(step_phase_key(StepPhase::kOther), "other");
  for (StepPhase p : kAllStepPhases) EXPECT_NE(step_phase_key(p), "?");
}

}  // namespace
}  // namespace ecoserve::engine
