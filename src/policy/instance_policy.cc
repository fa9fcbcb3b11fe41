#include "policy/instance_policy.h"

namespace ecoserve::policy {

const char* phase_name(InstancePhase phase) {
  switch (phase) {
    case InstancePhase::kMixed: return "mixed";
    case InstancePhase::kPrefill: return "prefill";
    case InstancePhase::kDecode: return "decode";
  }
  return "unknown";
}

}  // namespace ecoserve::policy
