#include "model/gguf.h"

#include <gtest/gtest.h>

#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "base/fp16.h"
#include "base/test_data.h"
#include "kernels/quant.h"

namespace ecoserve::model {
namespace {

using kernels::GgmlType;

// ---------------- round trips ----------------

TEST(GgufTest, MetadataRoundTripEveryType) {
  GgufWriter w;
  w.set("u8", GgufValue::of_int(GgufValueType::kUint8, 250));
  w.set("i8", GgufValue::of_int(GgufValueType::kInt8, -100));
  w.set("u16", GgufValue::of_int(GgufValueType::kUint16, 65000));
  w.set("i16", GgufValue::of_int(GgufValueType::kInt16, -32000));
  w.set_uint32("u32", 4000000000u);
  w.set_int32("i32", -2000000000);
  w.set_float32("f32", 0.15625f);
  w.set_bool("b_true", true);
  w.set_bool("b_false", false);
  w.set_string("s", "héllo\nworld");
  w.set_string("empty", "");
  w.set("u64", GgufValue::of_int(GgufValueType::kUint64, 9000000000000000000LL));
  w.set("i64", GgufValue::of_int(GgufValueType::kInt64, -9000000000000000000LL));
  w.set("f64", GgufValue::of_float(GgufValueType::kFloat64, 3.141592653589793));
  w.set_string_array("strs", {"a", "", "▁the", "<0x0A>"});
  w.set_float32_array("floats", {1.5f, -2.25f, 0.0f});
  w.set_int32_array("ints", {1, -2, 2147483647});
  GgufValue::Array bools;
  bools.elem_type = GgufValueType::kBool;
  bools.ints = {1, 0, 1};
  w.set("bools", GgufValue::of_array(bools));
  GgufValue::Array u64s;
  u64s.elem_type = GgufValueType::kUint64;
  u64s.ints = {0, 1, 1LL << 62};
  w.set("u64s", GgufValue::of_array(u64s));
  GgufValue::Array f64s;
  f64s.elem_type = GgufValueType::kFloat64;
  f64s.floats = {1e-300, -0.1};
  w.set("f64s", GgufValue::of_array(f64s));
  GgufValue::Array i16s;
  i16s.elem_type = GgufValueType::kInt16;
  i16s.ints = {-5, 7};
  w.set("i16s", GgufValue::of_array(i16s));
  w.set_int32("i32", -2000000000);  // replacing keeps the position

  auto bytes = w.to_bytes();
  ASSERT_TRUE(bytes.ok()) << bytes.status().to_string();
  auto f = GgufFile::from_bytes(*bytes);
  ASSERT_TRUE(f.ok()) << f.status().to_string();
  const GgufFile& g = **f;
  EXPECT_EQ(g.version(), 3u);
  EXPECT_EQ(g.alignment(), 32u);
  ASSERT_EQ(g.metadata().size(), 21u);
  EXPECT_EQ(g.metadata()[0].first, "u8");
  EXPECT_EQ(g.metadata()[5].first, "i32");
  EXPECT_EQ(g.find("u8")->type(), GgufValueType::kUint8);
  EXPECT_EQ(*g.get_int("u8"), 250);
  EXPECT_EQ(*g.get_int("i8"), -100);
  EXPECT_EQ(g.find("u16")->type(), GgufValueType::kUint16);
  EXPECT_EQ(*g.get_int("u16"), 65000);
  EXPECT_EQ(*g.get_int("i16"), -32000);
  EXPECT_EQ(*g.get_int("u32"), 4000000000LL);
  EXPECT_EQ(*g.get_int("i32"), -2000000000);
  EXPECT_EQ(g.find("f32")->type(), GgufValueType::kFloat32);
  EXPECT_EQ(*g.get_float("f32"), 0.15625);
  EXPECT_TRUE(*g.get_bool("b_true"));
  EXPECT_FALSE(*g.get_bool("b_false"));
  EXPECT_EQ(g.find("b_true")->type(), GgufValueType::kBool);
  EXPECT_EQ(*g.get_string("s"), "héllo\nworld");
  EXPECT_EQ(*g.get_string("empty"), "");
  EXPECT_EQ(*g.get_int("u64"), 9000000000000000000LL);
  EXPECT_EQ(*g.get_int("i64"), -9000000000000000000LL);
  EXPECT_EQ(*g.get_float("f64"), 3.141592653589793);
  EXPECT_EQ(*g.get_string_array("strs"), (std::vector<std::string>{"a", "", "▁the", "<0x0A>"}));
  EXPECT_EQ(*g.get_float_array("floats"), (std::vector<double>{1.5, -2.25, 0.0}));
  EXPECT_EQ(*g.get_int_array("ints"), (std::vector<std::int64_t>{1, -2, 2147483647}));
  EXPECT_EQ(g.find("bools")->array().elem_type, GgufValueType::kBool);
  EXPECT_EQ(*g.get_int_array("bools"), (std::vector<std::int64_t>{1, 0, 1}));
  EXPECT_EQ(*g.get_int_array("u64s"), (std::vector<std::int64_t>{0, 1, 1LL << 62}));
  EXPECT_EQ(*g.get_float_array("f64s"), (std::vector<double>{1e-300, -0.1}));
  EXPECT_EQ(*g.get_int_array("i16s"), (std::vector<std::int64_t>{-5, 7}));
  EXPECT_EQ(g.find("i16s")->array().elem_type, GgufValueType::kInt16);

  // Getters: missing -> NOT_FOUND, wrong type -> INVALID_ARGUMENT, defaults.
  EXPECT_EQ(g.get_int("nope").status().code(), StatusCode::kNotFound);
  EXPECT_EQ(g.get_int("s").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(g.get_string("u8").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(g.get_string_array("ints").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(*g.get_int_or("nope", 7), 7);
  EXPECT_EQ(*g.get_float_or("nope", 2.5), 2.5);
  EXPECT_EQ(*g.get_bool_or("nope", true), true);
  EXPECT_EQ(g.get_int_or("s", 7).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(*g.get_float("u32"), 4000000000.0);  // integers read as floats

  // Byte-exact: writing what was read gives the same bytes.
  GgufWriter w2;
  for (const auto& [k, v] : g.metadata()) w2.set(k, v);
  EXPECT_EQ(*w2.to_bytes(), *bytes);

  EXPECT_EQ(g.find("strs")->to_display_string(2), "[\"a\", \"\", ...] (4 x string)");
  EXPECT_EQ(g.find("s")->to_display_string(), "\"héllo\\nworld\"");
  EXPECT_EQ(g.find("b_true")->to_display_string(), "true");
}

std::vector<std::uint8_t> encode(GgmlType type, const std::vector<float>& x) {
  const kernels::TypeTraits* t = kernels::type_traits(type);
  std::vector<std::uint8_t> out(kernels::row_bytes(*t, static_cast<std::int64_t>(x.size())));
  kernels::quantize_row(type, x.data(), out.data(), static_cast<std::int64_t>(x.size()));
  return out;
}

TEST(GgufTest, TensorRoundTripEverySupportedType) {
  const GgmlType types[] = {GgmlType::kF32,  GgmlType::kF16,  GgmlType::kBF16, GgmlType::kQ8_0,
                            GgmlType::kQ4_0, GgmlType::kQ4_K, GgmlType::kQ6_K};
  std::mt19937 rng(7);
  std::normal_distribution<float> dist(0, 1);
  GgufWriter w;
  w.set_string("general.architecture", "llama");
  std::vector<std::vector<std::uint8_t>> datas;
  for (GgmlType t : types) {
    std::vector<float> x(512 * 3);  // 3 rows of 512
    for (auto& v : x) v = dist(rng);
    datas.push_back(encode(t, x));
    ASSERT_TRUE(w.add_tensor(std::string("t.") + std::string(kernels::type_name(t)), {512, 3}, t, datas.back()).ok());
  }
  // A small odd-sized tensor so that padding is exercised, and a 1-D and a 4-D one.
  std::vector<std::uint8_t> odd(7 * 4);
  for (std::size_t i = 0; i < odd.size(); ++i) odd[i] = static_cast<std::uint8_t>(i * 13);
  ASSERT_TRUE(w.add_tensor("odd", {7}, GgmlType::kF32, odd).ok());
  std::vector<std::uint8_t> four(2 * 3 * 4 * 5 * 2, 0x5a);
  ASSERT_TRUE(w.add_tensor("four", {2, 3, 4, 5}, GgmlType::kF16, four).ok());

  auto bytes = w.to_bytes();
  ASSERT_TRUE(bytes.ok());
  auto f = GgufFile::from_bytes(*bytes);
  ASSERT_TRUE(f.ok()) << f.status().to_string();
  ASSERT_EQ((*f)->tensors().size(), 9u);
  for (std::size_t i = 0; i < 7; ++i) {
    const GgufTensor& t = (*f)->tensors()[i];
    EXPECT_EQ(t.type, types[i]);
    EXPECT_EQ(t.dims, (std::vector<std::int64_t>{512, 3}));
    EXPECT_EQ(t.num_elements(), 1536);
    EXPECT_EQ(t.offset % 32, 0u);
    EXPECT_EQ(reinterpret_cast<std::uintptr_t>(t.data) - reinterpret_cast<std::uintptr_t>((*f)->tensors()[0].data),
              t.offset);
    ASSERT_EQ(t.nbytes, datas[i].size());
    EXPECT_EQ(std::memcmp(t.data, datas[i].data(), t.nbytes), 0) << t.name;
  }
  const GgufTensor* o = (*f)->find_tensor("odd");
  ASSERT_NE(o, nullptr);
  EXPECT_EQ(o->nbytes, 28u);
  EXPECT_EQ(std::memcmp(o->data, odd.data(), 28), 0);
  const GgufTensor* q = (*f)->find_tensor("four");
  ASSERT_NE(q, nullptr);
  EXPECT_EQ(q->dims, (std::vector<std::int64_t>{2, 3, 4, 5}));
  EXPECT_EQ(std::memcmp(q->data, four.data(), four.size()), 0);
  EXPECT_EQ((*f)->find_tensor("missing"), nullptr);

  // Writing through a file (mmap reader, streaming writer) gives identical bytes.
  const std::string path =
      (std::filesystem::temp_directory_path() / ("gguf_test_" + std::to_string(::getpid()) + ".gguf")).string();
  ASSERT_TRUE(w.write(path).ok());
  auto mf = GgufFile::open(path);
  ASSERT_TRUE(mf.ok()) << mf.status().to_string();
  EXPECT_EQ((*mf)->file_size(), bytes->size());
  {
    std::FILE* fp = std::fopen(path.c_str(), "rb");
    ASSERT_NE(fp, nullptr);
    std::vector<std::uint8_t> on_disk(bytes->size() + 1);
    EXPECT_EQ(std::fread(on_disk.data(), 1, on_disk.size(), fp), bytes->size());
    std::fclose(fp);
    on_disk.resize(bytes->size());
    EXPECT_EQ(on_disk, *bytes);
  }
  for (std::size_t i = 0; i < 9; ++i) {
    EXPECT_EQ(std::memcmp((*mf)->tensors()[i].data, (*f)->tensors()[i].data, (*f)->tensors()[i].nbytes), 0);
  }
  std::remove(path.c_str());
}

TEST(GgufTest, LazyTensorsAndAlignment) {
  GgufWriter w;
  w.set_alignment(64);
  w.set_string("k", "v");
  ASSERT_TRUE(w.add_tensor_lazy("a", {3}, GgmlType::kF32, [](std::uint8_t* dst, std::size_t n) {
                 for (std::size_t i = 0; i < n; ++i) dst[i] = static_cast<std::uint8_t>(i + 1);
                 return ok_status();
               }).ok());
  ASSERT_TRUE(w.add_tensor("b", {32}, GgmlType::kQ8_0, std::vector<std::uint8_t>(34, 9)).ok());
  auto bytes = w.to_bytes();
  ASSERT_TRUE(bytes.ok());
  auto f = GgufFile::from_bytes(*bytes);
  ASSERT_TRUE(f.ok()) << f.status().to_string();
  EXPECT_EQ((*f)->alignment(), 64u);
  EXPECT_EQ(*(*f)->get_int("general.alignment"), 64);
  EXPECT_EQ((*f)->find("general.alignment")->type(), GgufValueType::kUint32);
  EXPECT_EQ((*f)->tensors()[1].offset, 64u);
  EXPECT_EQ((*f)->tensors()[0].data[11], 12);
  EXPECT_EQ(bytes->size() % 64, 0u);
  // A failing filler fails the write.
  GgufWriter bad;
  ASSERT_TRUE(bad.add_tensor_lazy("a", {1}, GgmlType::kF32, [](std::uint8_t*, std::size_t) {
                   return internal_error("boom");
                 }).ok());
  EXPECT_EQ(bad.to_bytes().status().message(), "boom");
}

TEST(GgufTest, WriterRejectsBadTensors) {
  GgufWriter w;
  EXPECT_FALSE(w.add_tensor("x", {33}, GgmlType::kQ8_0, std::vector<std::uint8_t>(34)).ok());   // not a block multiple
  EXPECT_FALSE(w.add_tensor("x", {32}, GgmlType::kQ8_0, std::vector<std::uint8_t>(33)).ok());   // wrong size
  EXPECT_FALSE(w.add_tensor("x", {1, 1, 1, 1, 1}, GgmlType::kF32, std::vector<std::uint8_t>(4)).ok());
  EXPECT_FALSE(w.add_tensor(std::string(64, 'n'), {1}, GgmlType::kF32, std::vector<std::uint8_t>(4)).ok());
  ASSERT_TRUE(w.add_tensor("x", {1}, GgmlType::kF32, std::vector<std::uint8_t>(4)).ok());
  EXPECT_FALSE(w.add_tensor("x", {1}, GgmlType::kF32, std::vector<std::uint8_t>(4)).ok());  // duplicate
}

TEST(GgufTest, UnsupportedTypeIsListed) {
  GgufWriter w;
  ASSERT_TRUE(w.add_tensor("q5", {256, 2}, GgmlType::kQ5_K, std::vector<std::uint8_t>(176 * 2, 1)).ok());
  auto f = GgufFile::from_bytes(*w.to_bytes());
  ASSERT_TRUE(f.ok()) << f.status().to_string();
  const GgufTensor* t = (*f)->find_tensor("q5");
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(t->type, GgmlType::kQ5_K);
  EXPECT_EQ(t->nbytes, 352u);
  EXPECT_FALSE(kernels::type_traits(t->type)->supported);
}

// ---------------- corrupt files ----------------

// Hand-assembled GGUF bytes, so each field can be broken on purpose.
class Bytes {
 public:
  Bytes& u32(std::uint32_t v) { return raw(&v, 4); }
  Bytes& u64(std::uint64_t v) { return raw(&v, 8); }
  Bytes& str(const std::string& s) {
    u64(s.size());
    return raw(s.data(), s.size());
  }
  Bytes& raw(const void* p, std::size_t n) {
    const auto* b = static_cast<const std::uint8_t*>(p);
    v_.insert(v_.end(), b, b + n);
    return *this;
  }
  Bytes& pad(std::size_t a) {
    v_.resize((v_.size() + a - 1) / a * a, 0);
    return *this;
  }
  Bytes& zeros(std::size_t n) {
    v_.resize(v_.size() + n, 0);
    return *this;
  }
  std::size_t size() const { return v_.size(); }
  std::vector<std::uint8_t> bytes() const { return v_; }

 private:
  std::vector<std::uint8_t> v_;
};

struct TensorSpec {
  std::string name = "w";
  std::vector<std::uint64_t> dims = {8, 2};
  std::uint32_t n_dims_override = 0;  // 0: dims.size()
  std::uint32_t type = 0;
  std::uint64_t offset = 0;
};

struct FileSpec {
  std::uint32_t magic = 0x46554747;
  std::uint32_t version = 3;
  std::int64_t tensor_count_override = -1;
  std::int64_t kv_count_override = -1;
  std::vector<TensorSpec> tensors = {TensorSpec{}};
  std::size_t data_bytes = 64;
};

// Header + kv "general.architecture" = "llama", kv "n" = u32 7, tensor infos, padded data.
std::vector<std::uint8_t> build(const FileSpec& s) {
  Bytes b;
  b.u32(s.magic).u32(s.version);
  b.u64(s.tensor_count_override >= 0 ? s.tensor_count_override : s.tensors.size());
  b.u64(s.kv_count_override >= 0 ? s.kv_count_override : 2);
  b.str("general.architecture").u32(8).str("llama");
  b.str("n").u32(4).u32(7);
  for (const auto& t : s.tensors) {
    b.str(t.name).u32(t.n_dims_override ? t.n_dims_override : static_cast<std::uint32_t>(t.dims.size()));
    for (auto d : t.dims) b.u64(d);
    b.u32(t.type).u64(t.offset);
  }
  b.pad(32).zeros(s.data_bytes);
  return b.bytes();
}

Status parse_status(std::vector<std::uint8_t> bytes) {
  auto f = GgufFile::from_bytes(std::move(bytes));
  return f.ok() ? ok_status() : f.status();
}

TEST(GgufCorruptTest, BaselineParses) {
  auto f = GgufFile::from_bytes(build(FileSpec{}));
  ASSERT_TRUE(f.ok()) << f.status().to_string();
  EXPECT_EQ(*(*f)->get_string("general.architecture"), "llama");
  EXPECT_EQ(*(*f)->get_int("n"), 7);
  EXPECT_EQ((*f)->tensors()[0].nbytes, 64u);
}

struct CorruptCase {
  std::string name;
  std::vector<std::uint8_t> bytes;
  std::string word;  // must appear in the error message
};

std::vector<CorruptCase> corrupt_cases() {
  std::vector<CorruptCase> c;
  const std::vector<std::uint8_t> good = build(FileSpec{});
  {
    FileSpec s;
    s.magic = 0x46554748;
    c.push_back({"bad_magic", build(s), "magic"});
  }
  {
    FileSpec s;
    s.version = 1;
    c.push_back({"version_1", build(s), "version"});
  }
  {
    FileSpec s;
    s.version = 4;
    c.push_back({"version_4", build(s), "version"});
  }
  c.push_back({"empty_file", {}, "truncated"});
  c.push_back({"truncated_header", std::vector<std::uint8_t>(good.begin(), good.begin() + 12), "truncated"});
  // Header is 24 bytes; key #0 length at 24..32, key bytes 32..52 ("general.architecture").
  {
    Bytes b;  // one key "general.architecture" cut after 8 of its 20 bytes
    b.u32(0x46554747).u32(3).u64(0).u64(1).u64(20).raw("general.", 8);
    c.push_back({"truncated_mid_key", b.bytes(), "string length 20 of metadata key #0"});
  }
  // Cut inside the value type of the first key (bytes 52..56).
  c.push_back({"truncated_mid_value_type", std::vector<std::uint8_t>(good.begin(), good.begin() + 54), "truncated"});
  {
    Bytes b;
    b.u32(0x46554747).u32(3).u64(0).u64(1).u64(1ULL << 60).zeros(40);
    c.push_back({"absurd_string_length", b.bytes(), "string length"});
  }
  {
    FileSpec s;
    s.tensor_count_override = 1LL << 40;
    c.push_back({"absurd_tensor_count", build(s), "tensor count"});
  }
  {
    FileSpec s;
    s.kv_count_override = 1LL << 50;
    c.push_back({"absurd_kv_count", build(s), "metadata count"});
  }
  {
    Bytes b;
    b.u32(0x46554747).u32(3).u64(0).u64(1).str("tokens").u32(9).u32(8).u64(1ULL << 58).zeros(64);
    c.push_back({"absurd_array_count", b.bytes(), "array count"});
  }
  {
    Bytes b;
    b.u32(0x46554747).u32(3).u64(0).u64(1).str("ints").u32(9).u32(5).u64(100).zeros(64);
    c.push_back({"array_count_past_end", b.bytes(), "array count"});
  }
  {
    Bytes b;
    b.u32(0x46554747).u32(3).u64(0).u64(1).str("k").u32(13).u32(0);
    c.push_back({"unknown_value_type", b.bytes(), "value type"});
  }
  {
    Bytes b;
    b.u32(0x46554747).u32(3).u64(0).u64(1).str("k").u32(9).u32(77).u64(0);
    c.push_back({"unknown_array_elem_type", b.bytes(), "element type"});
  }
  {
    Bytes b;
    b.u32(0x46554747).u32(3).u64(0).u64(2).str("k").u32(4).u32(1).str("k").u32(4).u32(2);
    c.push_back({"duplicate_key", b.bytes(), "duplicate"});
  }
  {
    Bytes b;
    b.u32(0x46554747).u32(3).u64(0).u64(1).str("general.alignment").u32(4).u32(48);
    c.push_back({"alignment_not_power_of_two", b.bytes(), "power of two"});
  }
  {
    FileSpec s;
    s.tensors[0].offset = 1024;
    c.push_back({"tensor_offset_past_end", build(s), "past end"});
  }
  {
    FileSpec s;
    s.data_bytes = 40;  // tensor needs 64 bytes
    c.push_back({"tensor_data_truncated", build(s), "past end"});
  }
  {
    FileSpec s;
    s.tensors[0].offset = 8;
    c.push_back({"misaligned_offset", build(s), "aligned"});
  }
  {
    FileSpec s;
    s.tensors[0].dims = {1, 1, 1, 1, 1};
    c.push_back({"n_dims_5", build(s), "n_dims"});
  }
  {
    FileSpec s;
    s.tensors[0].type = 99;
    c.push_back({"unknown_type_number", build(s), "unknown ggml type"});
  }
  {
    FileSpec s;
    s.tensors[0].type = 4;  // q4_2: removed from ggml, number not defined
    c.push_back({"removed_type_number", build(s), "unknown ggml type"});
  }
  {
    FileSpec s;
    s.tensors.push_back(TensorSpec{});
    s.tensors[1].offset = 64;
    s.data_bytes = 128;
    c.push_back({"duplicate_tensor_name", build(s), "duplicate"});
  }
  {
    FileSpec s;
    s.tensors[0].dims = {1ULL << 40, 1ULL << 40};
    c.push_back({"dims_overflow", build(s), "overflow"});
  }
  {
    FileSpec s;
    s.tensors[0].dims = {1ULL << 63, 1};
    c.push_back({"dim_above_int64", build(s), "overflow"});
  }
  {
    FileSpec s;
    s.tensors[0].dims = {1ULL << 30, 1ULL << 30};  // no overflow, but 4 EiB of data
    c.push_back({"huge_tensor", build(s), "past end"});
  }
  {
    FileSpec s;
    s.tensors[0].dims = {33, 1};
    s.tensors[0].type = 8;  // q8_0 needs multiples of 32
    c.push_back({"not_block_multiple", build(s), "block size"});
  }
  {
    Bytes b;
    b.u32(0x46554747).u32(3).u64(0).u64(1).str("big").u32(10).u64(~0ULL);
    c.push_back({"uint64_above_int64", b.bytes(), "INT64_MAX"});
  }
  return c;
}

TEST(GgufCorruptTest, EachCaseFailsWithANamedError) {
  for (const CorruptCase& cc : corrupt_cases()) {
    Status s = parse_status(cc.bytes);
    EXPECT_FALSE(s.ok()) << cc.name;
    EXPECT_NE(s.message().find(cc.word), std::string::npos)
        << cc.name << ": message '" << s.message() << "' lacks '" << cc.word << "'";
  }
}

TEST(GgufCorruptTest, EveryTruncationFailsCleanly) {
  GgufWriter w;
  w.set_string("general.architecture", "llama");
  w.set_string_array("tokenizer.ggml.tokens", {"a", "bb", "ccc"});
  w.set_float32_array("scores", {1, 2, 3});
  ASSERT_TRUE(w.add_tensor("t", {32, 2}, GgmlType::kQ8_0, std::vector<std::uint8_t>(68, 3)).ok());
  const std::vector<std::uint8_t> good = *w.to_bytes();
  ASSERT_TRUE(parse_status(good).ok());
  for (std::size_t n = 0; n + 28 < good.size(); ++n) {  // the last 28 bytes are padding after the tensor
    EXPECT_FALSE(parse_status(std::vector<std::uint8_t>(good.begin(), good.begin() + n)).ok()) << "prefix " << n;
  }
}

TEST(GgufCorruptTest, RandomByteFlipsNeverCrash) {
  GgufWriter w;
  w.set_string("general.architecture", "llama");
  w.set_string_array("tokenizer.ggml.tokens", {"a", "bb", "ccc"});
  w.set_int32("x", 5);
  ASSERT_TRUE(w.add_tensor("t", {32, 2}, GgmlType::kQ8_0, std::vector<std::uint8_t>(68, 3)).ok());
  ASSERT_TRUE(w.add_tensor("u", {4}, GgmlType::kF32, std::vector<std::uint8_t>(16, 3)).ok());
  const std::vector<std::uint8_t> good = *w.to_bytes();
  std::mt19937 rng(42);
  int failures = 0;
  for (int iter = 0; iter < 3000; ++iter) {
    std::vector<std::uint8_t> b = good;
    const int flips = 1 + static_cast<int>(rng() % 3);
    for (int k = 0; k < flips; ++k) b[rng() % 200] = static_cast<std::uint8_t>(rng());
    auto f = GgufFile::from_bytes(std::move(b));
    if (!f.ok()) {
      ++failures;
      EXPECT_FALSE(f.status().message().empty());
    } else {
      for (const auto& t : (*f)->tensors()) {  // every listed tensor lies inside the file
        EXPECT_LE(t.offset + t.nbytes + 1, (*f)->file_size() + 1);
      }
    }
  }
  EXPECT_GT(failures, 100);
}

TEST(GgufCorruptTest, OpenMissingFileIsNotFound) {
  auto f = GgufFile::open("/nonexistent/dir/model.gguf");
  ASSERT_FALSE(f.ok());
  EXPECT_EQ(f.status().code(), StatusCode::kNotFound);
  EXPECT_NE(f.status().message().find("/nonexistent/dir/model.gguf"), std::string::npos);
}

// ---------------- a real file ----------------

TEST(GgufRealFileTest, TinyStories656k) {
  const std::string rel = "models/tinystories-656k-q8_0.gguf";
  auto path = shared_data_path(rel);
  if (!path) GTEST_SKIP() << missing_data_message(rel);
  auto f = GgufFile::open(*path);
  ASSERT_TRUE(f.ok()) << f.status().to_string();
  const GgufFile& g = **f;
  EXPECT_EQ(*g.get_string("general.architecture"), "llama");
  EXPECT_EQ(*g.get_int("llama.block_count"), 2);
  EXPECT_EQ(*g.get_int("llama.embedding_length"), 128);
  EXPECT_EQ(*g.get_int("llama.attention.head_count"), 8);
  EXPECT_EQ(*g.get_int("llama.attention.head_count_kv"), 4);
  const GgufTensor* q = g.find_tensor("blk.0.attn_q.weight");
  ASSERT_NE(q, nullptr);
  EXPECT_EQ(q->type, GgmlType::kQ8_0);
  EXPECT_EQ(q->dims, (std::vector<std::int64_t>{128, 128}));
  EXPECT_EQ(q->nbytes, 128u * 128u / 32u * 34u);
  EXPECT_EQ(g.find_tensor("output.weight"), nullptr);
  EXPECT_NE(g.find_tensor("token_embd.weight"), nullptr);
  // Dequantizing a row gives finite, non-trivial values.
  std::vector<float> row(128);
  kernels::dequantize_row(q->type, q->data, row.data(), 128);
  double sum_sq = 0;
  for (float v : row) {
    ASSERT_TRUE(std::isfinite(v));
    sum_sq += v * v;
  }
  EXPECT_GT(sum_sq, 0.0);
}

}  // namespace
}  // namespace ecoserve::model

namespace ecoserve::model {
namespace {

TEST(GgufLoadModeTest, ReadIntoHugePagesEqualsMmap) {
  auto path = shared_data_path("models/tinystories-656k-q8_0.gguf");
  if (!path) GTEST_SKIP() << missing_data_message("models/tinystories-656k-q8_0.gguf");
  auto a = GgufFile::open(*path, GgufFile::Load::kMmap);
  auto b = GgufFile::open(*path, GgufFile::Load::kReadHugePages);
  ASSERT_TRUE(a.ok() && b.ok());
  ASSERT_EQ((*a)->tensors().size(), (*b)->tensors().size());
  EXPECT_EQ((*a)->metadata().size(), (*b)->metadata().size());
  for (size_t i = 0; i < (*a)->tensors().size(); ++i) {
    const auto& ta = (*a)->tensors()[i];
    const auto& tb = (*b)->tensors()[i];
    ASSERT_EQ(ta.nbytes, tb.nbytes);
    EXPECT_NE(ta.data, tb.data);
    EXPECT_EQ(std::memcmp(ta.data, tb.data, ta.nbytes), 0) << ta.name;
  }
  EXPECT_EQ(GgufFile::open("/nonexistent.gguf", GgufFile::Load::kReadHugePages).status().code(),
            StatusCode::kNotFound);
}

// rewrite_bytes changes a private copy's bytes (and only those), never a shared mapping's.
TEST(GgufLoadModeTest, RewriteBytesOnlyOnAPrivateCopy) {
  auto path = shared_data_path("models/tinystories-656k-q8_0.gguf");
  if (!path) GTEST_SKIP() << missing_data_message("models/tinystories-656k-q8_0.gguf");
  auto shared = GgufFile::open(*path, GgufFile::Load::kMmap);
  auto priv = GgufFile::open(*path, GgufFile::Load::kReadHugePages);
  ASSERT_TRUE(shared.ok() && priv.ok());
  EXPECT_FALSE((*shared)->private_copy());
  EXPECT_TRUE((*priv)->private_copy());
  const GgufTensor* ts = (*shared)->find_tensor("blk.0.attn_q.weight");
  const GgufTensor* tp = (*priv)->find_tensor("blk.0.attn_q.weight");
  ASSERT_TRUE(ts && tp);
  auto noop = [](const std::uint8_t*, std::uint8_t*) {};
  Status s = (*shared)->rewrite_bytes(ts->data, ts->nbytes, noop);
  EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(s.message().find("mapped shared"), std::string::npos) << s.message();
  EXPECT_EQ((*priv)->rewrite_bytes(ts->data, 16, noop).code(), StatusCode::kInvalidArgument);  // not its bytes
  EXPECT_EQ((*priv)->rewrite_bytes(tp->data, (*priv)->file_size(), noop).code(), StatusCode::kInvalidArgument);
  // Reverse the tensor's bytes: fn sees the old bytes, the file keeps what it wrote.
  ASSERT_TRUE((*priv)->rewrite_bytes(tp->data + 1, tp->nbytes - 1, [&](const std::uint8_t* old, std::uint8_t* out) {
                  for (std::size_t i = 0; i + 1 < tp->nbytes; ++i) out[i] = old[tp->nbytes - 2 - i];
                }).ok());
  EXPECT_EQ(tp->data[0], ts->data[0]);
  for (std::size_t i = 1; i < tp->nbytes; ++i) ASSERT_EQ(tp->data[i], ts->data[tp->nbytes - i]) << i;
  const GgufTensor* next = (*priv)->find_tensor("blk.0.attn_k.weight");
  EXPECT_EQ(std::memcmp(next->data, (*shared)->find_tensor("blk.0.attn_k.weight")->data, next->nbytes), 0);
}

}  // namespace
}  // namespace ecoserve::model
