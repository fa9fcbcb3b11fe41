#include "model/llama_model.h"

#include <xxhash.h>

#include <algorithm>

#include "kernels/packed_weights.h"
#include "kernels/quant.h"

namespace ecoserve::model {

namespace {

using kernels::GgmlType;
using kernels::WeightView;

std::string dims_string(const std::vector<int64_t>& dims) {
  std::string s = "{";
  for (size_t i = 0; i < dims.size(); ++i) s += (i ? ", " : "") + std::to_string(dims[i]);
  return s + "}";
}

class TensorLoader {
 public:
  explicit TensorLoader(const GgufFile& f) : f_(f) {}

  // A matrix of `rows` outputs x `cols` inputs (ggml dims {cols, rows}).
  StatusOr<WeightView> matrix(const std::string& name, int64_t rows, int64_t cols) const {
    const GgufTensor* t = f_.find_tensor(name);
    if (!t) return invalid_argument_error("model: missing tensor '{}'", name);
    if (t->dims.size() != 2 || t->dims[0] != cols || t->dims[1] != rows) {
      return invalid_argument_error("model: tensor '{}' has shape {}, expected {{{}, {}}}", name,
                                    dims_string(t->dims), cols, rows);
    }
    const kernels::TypeTraits* tr = kernels::type_traits(t->type);
    if (!tr || !tr->supported) {
      return invalid_argument_error("model: tensor '{}' has type {} which ecoserve cannot compute "
                                    "(supported: f32, f16, bf16, q8_0, q4_0, q4_K, q6_K)",
                                    name, kernels::type_name(t->type));
    }
    return WeightView{t->type, t->data, rows, cols, kernels::row_bytes(*tr, cols)};
  }

  // A vector of n values converted to float.
  StatusOr<std::vector<float>> vector(const std::string& name, int64_t n) const {
    const GgufTensor* t = f_.find_tensor(name);
    if (!t) return invalid_argument_error("model: missing tensor '{}'", name);
    if (t->dims.size() != 1 || t->dims[0] != n) {
      return invalid_argument_error("model: tensor '{}' has shape {}, expected {{{}}}", name,
                                    dims_string(t->dims), n);
    }
    const kernels::TypeTraits* tr = kernels::type_traits(t->type);
    if (!tr || !tr->supported || n % tr->block_elems != 0) {
      return invalid_argument_error("model: tensor '{}' has unsupported type {}", name,
                                    kernels::type_name(t->type));
    }
    std::vector<float> out(n);
    kernels::dequantize_row(t->type, t->data, out.data(), n);
    return out;
  }

  bool has(const std::string& name) const { return f_.find_tensor(name) != nullptr; }

 private:
  const GgufFile& f_;
};

}  // namespace

StatusOr<std::shared_ptr<const LlamaModel>> LlamaModel::load(const std::string& path, GgufFile::Load load) {
  ECO_ASSIGN_OR_RETURN(std::unique_ptr<GgufFile> file, GgufFile::open(path, load));
  return from_gguf(std::move(file));
}

StatusOr<std::shared_ptr<const LlamaModel>> LlamaModel::from_gguf(std::unique_ptr<GgufFile> file) {
  std::shared_ptr<LlamaModel> m(new LlamaModel());
  m->file_ = std::move(file);
  ECO_RETURN_IF_ERROR(m->init());
  return std::shared_ptr<const LlamaModel>(std::move(m));
}

Status LlamaModel::init() {
  const GgufFile& f = *file_;
  LlamaConfig& c = config_;
  auto arch = f.get_string("general.architecture");
  if (!arch.ok()) return invalid_argument_error("model: no general.architecture in '{}'", f.path());
  c.arch = *arch;
  if (c.arch != "llama" && c.arch != "qwen2") {
    return invalid_argument_error(
        "model: unsupported architecture '{}' (ecoserve runs: llama, qwen2)", c.arch);
  }
  if (auto name = f.get_string("general.name"); name.ok()) c.name = *name;
  const std::string p = c.arch + ".";
  auto req_int = [&](const std::string& key) -> StatusOr<int64_t> {
    auto v = f.get_int(p + key);
    if (!v.ok()) return invalid_argument_error("model: {}", v.status().message());
    if (*v <= 0 || *v > (1 << 24)) return invalid_argument_error("model: {}{} = {} is out of range", p, key, *v);
    return *v;
  };
  ECO_ASSIGN_OR_RETURN(int64_t n_embd, req_int("embedding_length"));
  ECO_ASSIGN_OR_RETURN(int64_t n_layer, req_int("block_count"));
  ECO_ASSIGN_OR_RETURN(int64_t n_ff, req_int("feed_forward_length"));
  ECO_ASSIGN_OR_RETURN(int64_t n_head, req_int("attention.head_count"));
  ECO_ASSIGN_OR_RETURN(int64_t n_head_kv, f.get_int_or(p + "attention.head_count_kv", n_head));
  ECO_ASSIGN_OR_RETURN(int64_t n_ctx, f.get_int_or(p + "context_length", 2048));
  ECO_ASSIGN_OR_RETURN(double eps, f.get_float_or(p + "attention.layer_norm_rms_epsilon", 1e-5));
  ECO_ASSIGN_OR_RETURN(double base, f.get_float_or(p + "rope.freq_base", 10000.0));
  c.n_embd = static_cast<int32_t>(n_embd);
  c.n_layer = static_cast<int32_t>(n_layer);
  c.n_ff = static_cast<int32_t>(n_ff);
  c.n_head = static_cast<int32_t>(n_head);
  c.n_head_kv = static_cast<int32_t>(n_head_kv);
  c.n_ctx_train = static_cast<int32_t>(std::max<int64_t>(1, n_ctx));
  c.rms_eps = static_cast<float>(eps);
  c.rope_freq_base = static_cast<float>(base);
  if (c.n_embd % c.n_head != 0) {
    return invalid_argument_error("model: embedding_length {} not divisible by head_count {}", c.n_embd, c.n_head);
  }
  if (c.n_head_kv <= 0 || c.n_head % c.n_head_kv != 0) {
    return invalid_argument_error("model: head_count {} not a multiple of head_count_kv {}", c.n_head, c.n_head_kv);
  }
  c.head_dim = c.n_embd / c.n_head;
  ECO_ASSIGN_OR_RETURN(int64_t rope_dim, f.get_int_or(p + "rope.dimension_count", c.head_dim));
  if (rope_dim <= 0 || rope_dim > c.head_dim || rope_dim % 2 != 0) {
    return invalid_argument_error("model: rope.dimension_count {} invalid for head_dim {}", rope_dim, c.head_dim);
  }
  c.rope_dim = static_cast<int32_t>(rope_dim);
  // Linear RoPE scaling: rope.scaling.type = "linear" with rope.scaling.factor, or the
  // older rope.scale_linear key.
  double factor = 1.0;
  if (auto type = f.get_string(p + "rope.scaling.type"); type.ok()) {
    if (*type == "linear") {
      ECO_ASSIGN_OR_RETURN(factor, f.get_float_or(p + "rope.scaling.factor", 1.0));
    } else if (*type != "none") {
      return invalid_argument_error("model: rope scaling type '{}' is not supported (only linear)", *type);
    }
  } else {
    ECO_ASSIGN_OR_RETURN(factor, f.get_float_or(p + "rope.scale_linear", 1.0));
  }
  if (factor <= 0) return invalid_argument_error("model: rope scaling factor {} must be positive", factor);
  c.rope_freq_scale = static_cast<float>(1.0 / factor);
  c.rope_neox = c.arch == "qwen2";
  c.qkv_bias = c.arch == "qwen2";

  ECO_ASSIGN_OR_RETURN(tokenizer_, Tokenizer::from_gguf(f));
  if (auto t = f.get_string("tokenizer.chat_template"); t.ok()) chat_template_ = *t;

  TensorLoader L(f);
  const GgufTensor* embd = f.find_tensor("token_embd.weight");
  if (!embd) return invalid_argument_error("model: missing tensor 'token_embd.weight'");
  if (embd->dims.size() != 2) return invalid_argument_error("model: token_embd.weight must be 2-D");
  c.n_vocab = static_cast<int32_t>(embd->dims[1]);
  if (c.n_vocab < tokenizer_->vocab_size()) {
    return invalid_argument_error("model: token_embd has {} rows but the tokenizer has {} tokens", c.n_vocab,
                                  tokenizer_->vocab_size());
  }
  ECO_ASSIGN_OR_RETURN(token_embd_, L.matrix("token_embd.weight", c.n_vocab, c.n_embd));
  ECO_ASSIGN_OR_RETURN(output_norm_, L.vector("output_norm.weight", c.n_embd));
  if (L.has("output.weight")) {
    ECO_ASSIGN_OR_RETURN(output_, L.matrix("output.weight", c.n_vocab, c.n_embd));
  } else {
    output_ = token_embd_;
    c.tied_embeddings = true;
  }
  const int64_t q_dim = static_cast<int64_t>(c.n_head) * c.head_dim;
  const int64_t kv_dim = c.kv_dim();
  // Every layer has at least 9 tensors: a block_count the tensor directory cannot
  // hold is an error here, before the layer table is allocated (2^24 layers would
  // be ~7 GB of LayerWeights for a file of a few KB; found by fuzz/gguf_fuzz.cc).
  constexpr int64_t kTensorsPerLayer = 9;
  if (static_cast<int64_t>(c.n_layer) > static_cast<int64_t>(f.tensors().size()) / kTensorsPerLayer) {
    return invalid_argument_error("model: block_count {} needs at least {} tensors, the file has {}", c.n_layer,
                                  static_cast<int64_t>(c.n_layer) * kTensorsPerLayer, f.tensors().size());
  }
  layers_.resize(c.n_layer);
  for (int32_t i = 0; i < c.n_layer; ++i) {
    const std::string b = "blk." + std::to_string(i) + ".";
    LayerWeights& l = layers_[i];
    ECO_ASSIGN_OR_RETURN(l.attn_norm, L.vector(b + "attn_norm.weight", c.n_embd));
    ECO_ASSIGN_OR_RETURN(l.wq, L.matrix(b + "attn_q.weight", q_dim, c.n_embd));
    ECO_ASSIGN_OR_RETURN(l.wk, L.matrix(b + "attn_k.weight", kv_dim, c.n_embd));
    ECO_ASSIGN_OR_RETURN(l.wv, L.matrix(b + "attn_v.weight", kv_dim, c.n_embd));
    ECO_ASSIGN_OR_RETURN(l.wo, L.matrix(b + "attn_output.weight", c.n_embd, q_dim));
    if (c.qkv_bias) {
      ECO_ASSIGN_OR_RETURN(l.bq, L.vector(b + "attn_q.bias", q_dim));
      ECO_ASSIGN_OR_RETURN(l.bk, L.vector(b + "attn_k.bias", kv_dim));
      ECO_ASSIGN_OR_RETURN(l.bv, L.vector(b + "attn_v.bias", kv_dim));
    }
    ECO_ASSIGN_OR_RETURN(l.ffn_norm, L.vector(b + "ffn_norm.weight", c.n_embd));
    ECO_ASSIGN_OR_RETURN(l.w_gate, L.matrix(b + "ffn_gate.weight", c.n_ff, c.n_embd));
    ECO_ASSIGN_OR_RETURN(l.w_up, L.matrix(b + "ffn_up.weight", c.n_ff, c.n_embd));
    ECO_ASSIGN_OR_RETURN(l.w_down, L.matrix(b + "ffn_down.weight", c.n_embd, c.n_ff));
  }

  // Parameter count and fingerprint: configuration, tensor directory, and a sample
  // of each tensor's bytes (head and tail), cheap even for multi-GB files.
  XXH3_state_t* st = XXH3_createState();
  XXH3_64bits_reset(st);
  XXH3_64bits_update(st, c.arch.data(), c.arch.size());
  const int32_t ints[] = {c.n_vocab, c.n_embd, c.n_layer, c.n_head, c.n_head_kv, c.n_ff, c.rope_dim};
  XXH3_64bits_update(st, ints, sizeof(ints));
  const float floats[] = {c.rope_freq_base, c.rope_freq_scale, c.rms_eps};
  XXH3_64bits_update(st, floats, sizeof(floats));
  for (const GgufTensor& t : f.tensors()) {
    c.num_params += t.num_elements();
    XXH3_64bits_update(st, t.name.data(), t.name.size());
    XXH3_64bits_update(st, t.dims.data(), t.dims.size() * sizeof(int64_t));
    XXH3_64bits_update(st, &t.type, sizeof(t.type));
    const size_t n = std::min<size_t>(t.nbytes, 256);
    XXH3_64bits_update(st, t.data, n);
    XXH3_64bits_update(st, t.data + t.nbytes - n, n);
  }
  fingerprint_ = XXH3_64bits_digest(st);
  XXH3_freeState(st);
  // After the fingerprint, which samples the file's bytes as stored.
  if (file_->private_copy()) ECO_RETURN_IF_ERROR(pack_matrices());
  return ok_status();
}

Status LlamaModel::pack_matrices() {
  std::vector<WeightView*> views = {&token_embd_};
  if (!config_.tied_embeddings) views.push_back(&output_);
  for (LayerWeights& l : layers_) {
    for (WeightView* v : {&l.wq, &l.wk, &l.wv, &l.wo, &l.w_gate, &l.w_up, &l.w_down}) views.push_back(v);
  }
  for (WeightView* v : views) {
    if (!kernels::can_pack_rows8(*v)) continue;
    const std::int64_t rows = v->rows, cols = v->cols;
    const kernels::GgmlType type = v->type;
    ECO_RETURN_IF_ERROR(file_->rewrite_bytes(static_cast<const uint8_t*>(v->data), rows * v->row_bytes,
                                             [&](const uint8_t* old, uint8_t* out) {
                                               kernels::pack_rows8(type, old, rows, cols, out);
                                             }));
    v->layout = kernels::WeightLayout::kRows8;
  }
  if (config_.tied_embeddings) output_ = token_embd_;
  return ok_status();
}

void LlamaModel::embed(int32_t token, float* out) const { kernels::dequantize_weight_row(token_embd_, token, out); }

}  // namespace ecoserve::model
