// Fuzz target: the GGUF reader (model::GgufFile::from_bytes) on arbitrary bytes,
// and what the server builds from a file that parses: the tokenizer
// (Tokenizer::from_gguf, then encoding and decoding with it) and the model
// (LlamaModel::from_gguf). A corrupt file must give a Status, never a crash, an
// out-of-bounds read or a huge allocation. A file that parses and that
// GgufWriter can represent must survive a write and a re-read unchanged.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "fuzz_util.h"
#include "model/gguf.h"
#include "model/llama_model.h"
#include "model/tokenizer.h"

namespace {

using namespace ecoserve::model;

bool same_double(double a, double b) { return (std::isnan(a) && std::isnan(b)) || a == b; }

bool same_value(const GgufValue& a, const GgufValue& b) {
  if (a.type() != b.type()) return false;
  if (a.is_string()) return a.string_value() == b.string_value();
  if (a.is_float()) return same_double(a.float_value(), b.float_value());
  if (a.is_integer()) return a.int_value() == b.int_value();
  const GgufValue::Array& x = a.array();
  const GgufValue::Array& y = b.array();
  if (x.elem_type != y.elem_type || x.ints != y.ints || x.strings != y.strings) return false;
  if (x.floats.size() != y.floats.size()) return false;
  for (std::size_t i = 0; i < x.floats.size(); ++i) {
    if (!same_double(x.floats[i], y.floats[i])) return false;
  }
  return true;
}

// Every accessor answers a value or a Status, consistently with the value's type.
void walk(const GgufFile& f) {
  FUZZ_CHECK(f.version() == 2 || f.version() == 3);
  FUZZ_CHECK(f.alignment() > 0 && (f.alignment() & (f.alignment() - 1)) == 0);
  for (const auto& [key, value] : f.metadata()) {
    FUZZ_CHECK(f.find(key) == &value, key);
    (void)value.to_display_string();
    FUZZ_CHECK(f.get_int(key).ok() == value.is_integer(), key);
    FUZZ_CHECK(f.get_string(key).ok() == value.is_string(), key);
    (void)f.get_float(key);
    (void)f.get_bool(key);
    (void)f.get_string_array(key);
    (void)f.get_float_array(key);
    (void)f.get_int_array(key);
  }
  for (const GgufTensor& t : f.tensors()) {
    FUZZ_CHECK(f.find_tensor(t.name) == &t, t.name);
    FUZZ_CHECK(t.dims.size() <= 4);
    (void)t.num_elements();
    if (t.nbytes > 0) {
      // Inside the file (ASan checks the reads): its first and last byte.
      volatile std::uint8_t first = t.data[0];
      volatile std::uint8_t last = t.data[t.nbytes - 1];
      (void)first;
      (void)last;
    }
  }
}

// Writes the file again with GgufWriter and reads it back: the same metadata and
// tensors (offsets may differ: the writer packs the data section).
void check_round_trip(const GgufFile& f) {
  GgufWriter w;
  for (const auto& [key, value] : f.metadata()) {
    if (value.is_array() && value.array().elem_type == GgufValueType::kArray) return;  // kept as sizes only
    w.set(key, value);
  }
  w.set_alignment(f.alignment());
  std::size_t total = 0;
  for (const GgufTensor& t : f.tensors()) {
    total += t.nbytes;
    if (total > (1u << 20)) return;
    std::vector<std::uint8_t> bytes(t.data, t.data + t.nbytes);
    if (!w.add_tensor(t.name, t.dims, t.type, std::move(bytes)).ok()) return;  // e.g. 0-D or long names
  }
  auto written = w.to_bytes();
  FUZZ_CHECK(written.ok(), written.status().to_string());
  auto back = GgufFile::from_bytes(std::move(*written));
  FUZZ_CHECK(back.ok(), back.status().to_string());
  const GgufFile& g = **back;
  FUZZ_CHECK(g.alignment() == f.alignment());
  // general.alignment is written as uint32 and only when it is not the default 32.
  std::size_t compared = 0;
  for (const auto& [key, value] : f.metadata()) {
    if (key == "general.alignment") continue;
    const GgufValue* other = g.find(key);
    FUZZ_CHECK(other != nullptr && same_value(value, *other), key);
    ++compared;
  }
  FUZZ_CHECK(g.metadata().size() == compared + (g.find("general.alignment") ? 1 : 0));
  FUZZ_CHECK(g.tensors().size() == f.tensors().size());
  for (std::size_t i = 0; i < f.tensors().size(); ++i) {
    const GgufTensor& a = f.tensors()[i];
    const GgufTensor& b = g.tensors()[i];
    FUZZ_CHECK(a.name == b.name && a.dims == b.dims && a.type == b.type && a.nbytes == b.nbytes, a.name);
    FUZZ_CHECK(a.nbytes == 0 || std::memcmp(a.data, b.data, a.nbytes) == 0, a.name);
    FUZZ_CHECK(b.offset % g.alignment() == 0, b.name);
  }
}

void exercise_tokenizer(const Tokenizer& tok, std::string_view sample) {
  const std::int32_t n = tok.vocab_size();
  FUZZ_CHECK(n > 0);
  FUZZ_CHECK(tok.bos_id() >= -1 && tok.bos_id() < n);
  FUZZ_CHECK(tok.eos_id() >= -1 && tok.eos_id() < n);
  for (std::int32_t id = 0; id < n && id < 512; ++id) {
    (void)tok.token_to_piece(id, true);
    (void)tok.token_type(id);
    (void)tok.is_eog(id);
    FUZZ_CHECK(tok.find_token(tok.token_text(id)) >= 0);
  }
  for (std::string_view text : {std::string_view("Hello world! 123 <s></s><|endoftext|> \xC3\xA9\xFF\n\t"), sample}) {
    for (bool parse_special : {false, true}) {
      const std::vector<std::int32_t> ids = tok.encode(text, /*add_special=*/true, parse_special);
      for (std::int32_t id : ids) FUZZ_CHECK(id >= 0 && id < n);
      (void)tok.decode(ids, /*render_special=*/parse_special);
      IncrementalDetokenizer detok(tok);
      for (std::int32_t id : ids) (void)detok.push(id);
      (void)detok.flush();
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  auto file = GgufFile::from_bytes(std::vector<std::uint8_t>(data, data + size));
  if (!file.ok()) {
    FUZZ_CHECK(!file.status().message().empty());
    return 0;
  }
  walk(**file);
  check_round_trip(**file);

  auto tok = Tokenizer::from_gguf(**file);
  if (tok.ok()) {
    const std::string_view bytes(reinterpret_cast<const char*>(data), size);
    exercise_tokenizer(**tok, bytes.substr(bytes.size() / 2, 256));
  }
  auto model = LlamaModel::from_gguf(std::move(*file));
  if (model.ok()) {
    const LlamaConfig& c = (*model)->config();
    FUZZ_CHECK(c.n_vocab >= (*model)->tokenizer().vocab_size());
    FUZZ_CHECK(c.n_embd > 0 && c.n_layer > 0 && c.head_dim * c.n_head == c.n_embd);
    FUZZ_CHECK(static_cast<std::int32_t>((*model)->layers().size()) == c.n_layer);
    std::vector<float> row(static_cast<std::size_t>(c.n_embd));
    (*model)->embed(0, row.data());
    (*model)->embed(c.n_vocab - 1, row.data());
  }
  return 0;
}
