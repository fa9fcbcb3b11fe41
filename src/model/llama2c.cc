#include "model/llama2c.h"

#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>

#include <fmt/format.h>

namespace ecoserve::model {
namespace {

StatusOr<std::vector<std::uint8_t>> read_file(const std::string& path, std::string_view what) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) {
    return not_found_error("llama2c: {} '{}' not found (or not a regular file)", what, path);
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) return permission_denied_error("llama2c: cannot open {} '{}': {}", what, path, std::strerror(errno));
  const auto size = std::filesystem::file_size(path, ec);
  if (ec) return internal_error("llama2c: cannot stat '{}': {}", path, ec.message());
  std::vector<std::uint8_t> bytes(size);
  if (size && !in.read(reinterpret_cast<char*>(bytes.data()), static_cast<std::streamsize>(size))) {
    return internal_error("llama2c: cannot read {} '{}'", what, path);
  }
  return bytes;
}

StatusOr<Llama2cConfig> parse_header(const std::vector<std::uint8_t>& bytes, const std::string& path) {
  if (bytes.size() < 28) {
    return data_loss_error("llama2c: checkpoint '{}' is truncated: {} bytes, the header alone needs 28", path,
                           bytes.size());
  }
  std::int32_t h[7];
  std::memcpy(h, bytes.data(), 28);
  Llama2cConfig c;
  c.dim = h[0];
  c.hidden_dim = h[1];
  c.n_layers = h[2];
  c.n_heads = h[3];
  c.n_kv_heads = h[4];
  c.shared_classifier = h[5] > 0;
  c.vocab_size = h[5] == INT32_MIN ? 0 : (h[5] < 0 ? -h[5] : h[5]);
  c.seq_len = h[6];
  auto in_range = [](int v, int hi) { return v > 0 && v <= hi; };
  if (!in_range(c.dim, 1 << 16) || !in_range(c.hidden_dim, 1 << 18) || !in_range(c.n_layers, 1024) ||
      !in_range(c.n_heads, 1024) || !in_range(c.n_kv_heads, 1024) || !in_range(c.vocab_size, 1 << 22) ||
      !in_range(c.seq_len, 1 << 24)) {
    return invalid_argument_error(
        "llama2c: checkpoint '{}' has an implausible header (dim {}, hidden {}, layers {}, heads {}, kv heads {}, "
        "vocab {}, seq_len {}): not a llama2.c legacy checkpoint?",
        path, h[0], h[1], h[2], h[3], h[4], h[5], h[6]);
  }
  if (c.dim % c.n_heads != 0 || c.n_heads % c.n_kv_heads != 0 || (c.dim / c.n_heads) % 2 != 0) {
    return invalid_argument_error("llama2c: checkpoint '{}': dim {} / heads {} / kv heads {} are inconsistent", path,
                                  c.dim, c.n_heads, c.n_kv_heads);
  }
  return c;
}

// Float counts of each array, in file order.
struct Layout {
  std::int64_t emb, rms_att, wq, wk, wv, wo, rms_ffn, w1, w2, w3, rms_final, freq, wcls;
  std::int64_t total() const {
    return emb + rms_att + wq + wk + wv + wo + rms_ffn + w1 + w2 + w3 + rms_final + 2 * freq + wcls;
  }
};

Layout layout_of(const Llama2cConfig& c) {
  const std::int64_t d = c.dim, h = c.hidden_dim, l = c.n_layers, v = c.vocab_size;
  const std::int64_t head = d / c.n_heads, kv = head * c.n_kv_heads;
  return Layout{v * d, l * d, l * d * d, l * kv * d, l * kv * d, l * d * d, l * d,
                l * h * d, l * d * h, l * h * d, d, c.seq_len * head / 2, c.shared_classifier ? 0 : v * d};
}

}  // namespace

namespace {
StatusOr<Llama2cConfig> validate(const std::vector<std::uint8_t>& bytes, const std::string& checkpoint_path) {
  ECO_ASSIGN_OR_RETURN(Llama2cConfig c, parse_header(bytes, checkpoint_path));
  const std::uint64_t expected = 28 + 4 * static_cast<std::uint64_t>(layout_of(c).total());
  if (bytes.size() != expected) {
    return data_loss_error("llama2c: checkpoint '{}' has {} bytes but its header implies {} ({})", checkpoint_path,
                           bytes.size(), expected, bytes.size() < expected ? "truncated" : "trailing data");
  }
  return c;
}
}  // namespace

StatusOr<Llama2cConfig> read_llama2c_config(const std::string& checkpoint_path) {
  ECO_ASSIGN_OR_RETURN(auto bytes, read_file(checkpoint_path, "checkpoint"));
  return validate(bytes, checkpoint_path);
}

StatusOr<Llama2cVocab> read_llama2c_tokenizer(const std::string& tokenizer_path, int vocab_size) {
  ECO_ASSIGN_OR_RETURN(auto bytes, read_file(tokenizer_path, "tokenizer"));
  std::size_t pos = 0;
  auto need = [&](std::size_t n, std::string_view what, int i) -> Status {
    if (n > bytes.size() - pos) {
      return data_loss_error("llama2c: tokenizer '{}' truncated reading {} of token {} (expected {} tokens)",
                             tokenizer_path, what, i, vocab_size);
    }
    return ok_status();
  };
  ECO_RETURN_IF_ERROR(need(4, "max_token_length", -1));
  pos += 4;
  Llama2cVocab v;
  v.tokens.reserve(vocab_size);
  for (int i = 0; i < vocab_size; ++i) {
    ECO_RETURN_IF_ERROR(need(8, "score and length", i));
    float score;
    std::int32_t len;
    std::memcpy(&score, bytes.data() + pos, 4);
    std::memcpy(&len, bytes.data() + pos + 4, 4);
    pos += 8;
    if (len < 0) {
      return data_loss_error("llama2c: tokenizer '{}' token {} has negative length {}", tokenizer_path, i, len);
    }
    ECO_RETURN_IF_ERROR(need(static_cast<std::size_t>(len), "bytes", i));
    std::string raw(reinterpret_cast<const char*>(bytes.data() + pos), static_cast<std::size_t>(len));
    pos += static_cast<std::size_t>(len);

    std::string text;
    std::int32_t type = 1;  // NORMAL
    if (i == 0) {
      text = raw;  // <unk>
      type = 2;    // UNKNOWN
    } else if (i == 1 || i == 2) {
      text = i == 1 ? "<s>" : "</s>";  // llama2.c stores "\n<s>\n" / "\n</s>\n"
      type = 3;                        // CONTROL
    } else if (raw.size() == 6 && raw.compare(0, 3, "<0x") == 0 && raw[5] == '>' &&
               std::isxdigit(static_cast<unsigned char>(raw[3])) && std::isxdigit(static_cast<unsigned char>(raw[4]))) {
      text = raw;
      type = 6;  // BYTE
    } else {
      for (char ch : raw) {
        if (ch == ' ') {
          text += "\xE2\x96\x81";  // U+2581
        } else {
          text += ch;
        }
      }
    }
    v.tokens.push_back(std::move(text));
    v.scores.push_back(score);
    v.token_types.push_back(type);
  }
  return v;
}

Status build_llama2c_gguf(const std::string& checkpoint_path, const std::string& tokenizer_path, GgufWriter& w,
                          Llama2cConfig* config_out) {
  ECO_ASSIGN_OR_RETURN(auto raw, read_file(checkpoint_path, "checkpoint"));
  ECO_ASSIGN_OR_RETURN(Llama2cConfig c, validate(raw, checkpoint_path));
  ECO_ASSIGN_OR_RETURN(Llama2cVocab vocab, read_llama2c_tokenizer(tokenizer_path, c.vocab_size));
  auto bytes = std::make_shared<const std::vector<std::uint8_t>>(std::move(raw));
  const Layout lay = layout_of(c);
  const std::int64_t d = c.dim, head = c.dim / c.n_heads, kv = head * c.n_kv_heads, hid = c.hidden_dim;

  const std::string stem = std::filesystem::path(checkpoint_path).stem().string();
  w.set_string("general.architecture", "llama");
  w.set_string("general.name", stem);
  w.set_uint32("llama.context_length", static_cast<std::uint32_t>(c.seq_len));
  w.set_uint32("llama.embedding_length", static_cast<std::uint32_t>(d));
  w.set_uint32("llama.block_count", static_cast<std::uint32_t>(c.n_layers));
  w.set_uint32("llama.feed_forward_length", static_cast<std::uint32_t>(hid));
  w.set_uint32("llama.attention.head_count", static_cast<std::uint32_t>(c.n_heads));
  w.set_uint32("llama.attention.head_count_kv", static_cast<std::uint32_t>(c.n_kv_heads));
  w.set_uint32("llama.rope.dimension_count", static_cast<std::uint32_t>(head));
  w.set_float32("llama.rope.freq_base", 10000.0f);
  w.set_float32("llama.attention.layer_norm_rms_epsilon", 1e-5f);
  w.set_uint32("general.file_type", 0);  // ALL_F32
  w.set_uint32("llama.vocab_size", static_cast<std::uint32_t>(c.vocab_size));
  w.set_string("tokenizer.ggml.model", "llama");
  w.set_string_array("tokenizer.ggml.tokens", std::move(vocab.tokens));
  w.set_float32_array("tokenizer.ggml.scores", vocab.scores);
  w.set_int32_array("tokenizer.ggml.token_type", vocab.token_types);
  w.set_uint32("tokenizer.ggml.bos_token_id", 1);
  w.set_uint32("tokenizer.ggml.eos_token_id", 2);
  w.set_uint32("tokenizer.ggml.unknown_token_id", 0);
  w.set_bool("tokenizer.ggml.add_bos_token", true);
  w.set_bool("tokenizer.ggml.add_eos_token", false);

  // Float offset of each array in the checkpoint (after the 7-int header).
  std::int64_t off = 0;
  const std::int64_t o_emb = off; off += lay.emb;
  const std::int64_t o_rms_att = off; off += lay.rms_att;
  const std::int64_t o_wq = off; off += lay.wq;
  const std::int64_t o_wk = off; off += lay.wk;
  const std::int64_t o_wv = off; off += lay.wv;
  const std::int64_t o_wo = off; off += lay.wo;
  const std::int64_t o_rms_ffn = off; off += lay.rms_ffn;
  const std::int64_t o_w1 = off; off += lay.w1;
  const std::int64_t o_w2 = off; off += lay.w2;
  const std::int64_t o_w3 = off; off += lay.w3;
  const std::int64_t o_rms_final = off; off += lay.rms_final;
  off += 2 * lay.freq;  // freq_cis_real / imag: recomputed by the engine from the rope base
  const std::int64_t o_wcls = off;

  // A slice of `count` floats at float offset `at` becomes a tensor with ggml dims (row-major copy).
  auto slice = [&](const std::string& name, std::vector<std::int64_t> dims, std::int64_t at, std::int64_t count) {
    return w.add_tensor_lazy(name, std::move(dims), kernels::GgmlType::kF32,
                             [bytes, at, count](std::uint8_t* dst, std::size_t nbytes) -> Status {
                               const std::size_t start = 28 + 4 * static_cast<std::size_t>(at);
                               if (nbytes != 4 * static_cast<std::size_t>(count) || start + nbytes > bytes->size()) {
                                 return internal_error("llama2c: slice out of range");
                               }
                               std::memcpy(dst, bytes->data() + start, nbytes);
                               return ok_status();
                             });
  };
  ECO_RETURN_IF_ERROR(slice("token_embd.weight", {d, c.vocab_size}, o_emb, lay.emb));
  ECO_RETURN_IF_ERROR(slice("output_norm.weight", {d}, o_rms_final, d));
  if (!c.shared_classifier) ECO_RETURN_IF_ERROR(slice("output.weight", {d, c.vocab_size}, o_wcls, lay.wcls));
  for (std::int64_t l = 0; l < c.n_layers; ++l) {
    const std::string b = fmt::format("blk.{}.", l);
    ECO_RETURN_IF_ERROR(slice(b + "attn_norm.weight", {d}, o_rms_att + l * d, d));
    ECO_RETURN_IF_ERROR(slice(b + "attn_q.weight", {d, d}, o_wq + l * d * d, d * d));
    ECO_RETURN_IF_ERROR(slice(b + "attn_k.weight", {d, kv}, o_wk + l * kv * d, kv * d));
    ECO_RETURN_IF_ERROR(slice(b + "attn_v.weight", {d, kv}, o_wv + l * kv * d, kv * d));
    ECO_RETURN_IF_ERROR(slice(b + "attn_output.weight", {d, d}, o_wo + l * d * d, d * d));
    ECO_RETURN_IF_ERROR(slice(b + "ffn_norm.weight", {d}, o_rms_ffn + l * d, d));
    ECO_RETURN_IF_ERROR(slice(b + "ffn_gate.weight", {d, hid}, o_w1 + l * hid * d, hid * d));
    ECO_RETURN_IF_ERROR(slice(b + "ffn_down.weight", {hid, d}, o_w2 + l * d * hid, d * hid));
    ECO_RETURN_IF_ERROR(slice(b + "ffn_up.weight", {d, hid}, o_w3 + l * hid * d, hid * d));
  }
  if (config_out) *config_out = c;
  return ok_status();
}

Status convert_llama2c(const std::string& checkpoint_path, const std::string& tokenizer_path,
                       const std::string& out_path) {
  GgufWriter w;
  ECO_RETURN_IF_ERROR(build_llama2c_gguf(checkpoint_path, tokenizer_path, w));
  return w.write(out_path);
}

}  // namespace ecoserve::model
