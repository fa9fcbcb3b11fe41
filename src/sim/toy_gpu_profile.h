// A toy H100-format operator profile (one model "toy", tp 1), as in-memory files for
// GpuProfile::parse: the fixture of gpu_profile_cost_model_test.cc (which derives its
// exact predictions) and the seed of the gpu_profile fuzz target.
#pragma once

#include <map>
#include <string>

namespace ecoserve::sim {

inline const std::map<std::string, std::string>& toy_gpu_profile_files() {
  static const std::map<std::string, std::string> files = {
      {"meta.json", R"({"gpu": "toy", "models": {"toy": [8, 2, 2, 2, 16, 32]}, "tps": {"toy": [1]}})"},
      {"linear.csv",
       "model,tp,op,tokens,k,n,time_us\n"
       "toy,1,qkv,1,8,24,20\ntoy,1,qkv,2,8,24,30\ntoy,1,qkv,4,8,24,26\n"
       "toy,1,o,1,8,8,12\ntoy,1,o,4,8,8,15\n"
       "toy,1,gate_up,1,8,32,30\ntoy,1,gate_up,4,8,32,40\n"
       "toy,1,down,1,16,8,14\ntoy,1,down,4,16,8,18\n"
       "toy,1,lm_head,1,8,32,50\ntoy,1,lm_head,4,8,32,62\n"},
      {"attn_prefill.csv",
       "model,tp,q_len,kv_len,time_us\ntoy,1,16,16,10\ntoy,1,32,32,20\ntoy,1,16,32,14\ntoy,1,32,48,30\n"},
      {"attn_decode.csv",
       "model,tp,batch,kv_len,time_us,kv_read_GBps\ntoy,1,1,128,10,1\ntoy,1,2,128,12,1\ntoy,1,1,256,11,1\n"
       "toy,1,2,256,16,1\n"},
      {"elementwise.csv",
       "model,op,tokens,time_us\ntoy,rmsnorm,1,500\ntoy,rmsnorm,4096,100\ntoy,rmsnorm,8192,150\n"
       "toy,residual_add,4096,20\ntoy,residual_add,8192,30\ntoy,silu_mul,4096,40\ntoy,silu_mul,8192,72\n"},
      {"layer_mixed.csv",
       "model,prefill_tokens,decode_batch,decode_kv_len,measured_eager_us,measured_cuda_graph_us,op_sum_us\n"
       "toy,0,2,128,100,79.740885,100\n"},
};
  return files;
}

}  // namespace ecoserve::sim
