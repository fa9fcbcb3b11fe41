// CostProfile: measured step times of one model on one machine (plain data).
//
// `ecoserve profile cost` measures it with the real engine (engine/cost_profiler.h
// writes and reads it as JSON); policy::ProfiledCostModel interpolates it to
// predict the time of any step, for EcoServe's constraint checks (padg routing,
// TemporalPolicy) and, later, the simulator's CPU cost model. Lives in base/
// because both engine/ (which measures it) and policy/ (which reads it) use it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace ecoserve {

struct CostProfile {
  // One prefill-only step: `tokens` new prompt tokens of one sequence, starting at
  // position `context` (its cached or already computed prefix).
  struct PrefillPoint {
    int32_t tokens = 0;
    int32_t context = 0;
    double seconds = 0.0;
  };
  // One decode-only step: `batch` sequences, each with `context` tokens of KV.
  struct DecodePoint {
    int32_t batch = 0;
    int32_t context = 0;
    double seconds = 0.0;
  };

  std::string model_id;   // file name and size of the GGUF (as transport::InstanceInfo::model_id)
  std::string machine;    // CPU model name as measured (free text, for the reader)
  int32_t threads = 0;    // engine threads when measured
  std::string kv_cache_dtype = "f32";
  std::vector<PrefillPoint> prefill;  // sorted by (context, tokens)
  std::vector<DecodePoint> decode;    // sorted by (context, batch)
};

}  // namespace ecoserve
