// LlamaModel: the weights and configuration of a Llama-family model from GGUF.
//
// Supports general.architecture "llama" (Llama 2/3, TinyLlama, Mistral) and
// "qwen2" (q/k/v biases, NeoX-style RoPE): GQA, tied embeddings (no
// output.weight: the token embedding is reused), RoPE base and linear scaling,
// RMSNorm epsilon. Owns the GgufFile mapping; matrices are views into it (no
// copy); norms and biases are converted to float at load. When the file is a
// private copy (Load::kReadHugePages), Q8_0 and Q4_K matrices with rows % 8
// == 0 are repacked in place to WeightLayout::kRows8 (kernels/packed_weights.h:
// ~2.5x faster Q8_0 prefill with VNNI); with kMmap they keep GGUF's layout (the mapping
// stays shared between processes). The two give the same tokens up to float
// rounding, not bitwise.
// Immutable after load(); shared by every engine that serves it (thread-safe).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "base/status.h"
#include "kernels/matmul.h"
#include "model/gguf.h"
#include "model/tokenizer.h"

namespace ecoserve::model {

struct LlamaConfig {
  std::string arch;            // "llama" | "qwen2"
  std::string name;            // general.name, if any
  int32_t n_vocab = 0;
  int32_t n_embd = 0;
  int32_t n_layer = 0;
  int32_t n_head = 0;
  int32_t n_head_kv = 0;
  int32_t head_dim = 0;        // n_embd / n_head
  int32_t n_ff = 0;
  int32_t rope_dim = 0;        // rotated dimensions per head (<= head_dim)
  float rope_freq_base = 10000.0f;
  float rope_freq_scale = 1.0f;  // 1 / linear scaling factor
  bool rope_neox = false;        // qwen2: rotate halves; llama: adjacent pairs
  float rms_eps = 1e-5f;
  int32_t n_ctx_train = 2048;
  bool tied_embeddings = false;
  bool qkv_bias = false;
  int64_t num_params = 0;

  int32_t kv_dim() const { return n_head_kv * head_dim; }
};

struct LayerWeights {
  std::vector<float> attn_norm;
  kernels::WeightView wq, wk, wv, wo;
  std::vector<float> bq, bk, bv;  // empty unless qkv_bias
  std::vector<float> ffn_norm;
  kernels::WeightView w_gate, w_up, w_down;
};

class LlamaModel {
 public:
  // NOT_FOUND for a missing file; INVALID_ARGUMENT naming the architecture for an
  // unsupported one, or the tensor/key that is missing or has the wrong shape/type.
  // load = GgufFile::Load::kReadHugePages copies the weights into huge-page memory
  // (faster decode); kMmap maps the file (less memory, shared between processes).
  static StatusOr<std::shared_ptr<const LlamaModel>> load(const std::string& path,
                                                          GgufFile::Load load = GgufFile::Load::kReadHugePages);
  static StatusOr<std::shared_ptr<const LlamaModel>> from_gguf(std::unique_ptr<GgufFile> file);

  const LlamaConfig& config() const { return config_; }
  const Tokenizer& tokenizer() const { return *tokenizer_; }
  const GgufFile& gguf() const { return *file_; }
  // tokenizer.chat_template, or "" when the file has none.
  const std::string& chat_template() const { return chat_template_; }
  // A stable hash of the configuration, tensor directory and weight samples; two
  // engines can exchange KV only when their fingerprints match.
  uint64_t fingerprint() const { return fingerprint_; }

  const kernels::WeightView& token_embd() const { return token_embd_; }
  const kernels::WeightView& output() const { return output_; }  // = token_embd when tied
  const std::vector<float>& output_norm() const { return output_norm_; }
  const std::vector<LayerWeights>& layers() const { return layers_; }

  // Row `token` of the embedding as floats (either layout).
  void embed(int32_t token, float* out) const;

 private:
  LlamaModel() = default;
  Status init();
  Status pack_matrices();

  std::unique_ptr<GgufFile> file_;
  std::unique_ptr<Tokenizer> tokenizer_;
  LlamaConfig config_;
  std::string chat_template_;
  uint64_t fingerprint_ = 0;
  kernels::WeightView token_embd_;
  kernels::WeightView output_;
  std::vector<float> output_norm_;
  std::vector<LayerWeights> layers_;
};

}  // namespace ecoserve::model
