// Conversion of karpathy/llama2.c "legacy" checkpoints (+ their tokenizer.bin)
// to GGUF llama models.
//
// Checkpoint: 7 int32 (dim, hidden_dim, n_layers, n_heads, n_kv_heads,
// vocab_size (negative: separate classifier), seq_len), then float32 arrays
// (token embedding, rms_att, wq, wk, wv, wo, rms_ffn, w1, w2, w3, rms_final,
// freq_cis_real, freq_cis_imag, [wcls]). llama2.c rotates adjacent pairs, as
// ggml's normal RoPE mode for arch llama does, so weights are copied unpermuted.
// Tokenizer: int32 max_token_length, then per token float32 score, int32 length, bytes.
// Pure functions; every size is checked against the file before it is used.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"
#include "model/gguf.h"

namespace ecoserve::model {

struct Llama2cConfig {
  int dim = 0;
  int hidden_dim = 0;
  int n_layers = 0;
  int n_heads = 0;
  int n_kv_heads = 0;
  int vocab_size = 0;            // absolute value
  bool shared_classifier = true; // vocab_size was positive: no separate wcls (tied output)
  int seq_len = 0;
};

// Reads and validates the header (and that the file has exactly the bytes it implies).
StatusOr<Llama2cConfig> read_llama2c_config(const std::string& checkpoint_path);

struct Llama2cVocab {
  std::vector<std::string> tokens;   // SentencePiece form: ' ' -> U+2581, <s>, </s>
  std::vector<float> scores;
  std::vector<std::int32_t> token_types;  // llama.cpp token types (1 normal, 2 unknown, 3 control, 6 byte)
};
StatusOr<Llama2cVocab> read_llama2c_tokenizer(const std::string& tokenizer_path, int vocab_size);

// Fills w with the model's metadata and tensors (F32).
Status build_llama2c_gguf(const std::string& checkpoint_path, const std::string& tokenizer_path, GgufWriter& w,
                          Llama2cConfig* config_out = nullptr);
Status convert_llama2c(const std::string& checkpoint_path, const std::string& tokenizer_path,
                       const std::string& out_path);

}  // namespace ecoserve::model
