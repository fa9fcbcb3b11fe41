// GGUF v2/v3 files: reading (mmap, bounds-checked) and writing.
//
// GgufFile owns a read-only mapping of one file (or an in-memory copy of a
// buffer, for tests) and the parsed metadata and tensor directory. Every count,
// length, offset and size read from the file is checked against the file size
// before use, so a corrupt or hostile file yields a DATA_LOSS / INVALID_ARGUMENT
// Status naming what is wrong, never a crash or a huge allocation.
// Immutable after open(); safe to read from many threads.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "base/status.h"
#include "kernels/ggml_type.h"

namespace ecoserve::model {

enum class GgufValueType : std::uint32_t {
  kUint8 = 0,
  kInt8 = 1,
  kUint16 = 2,
  kInt16 = 3,
  kUint32 = 4,
  kInt32 = 5,
  kFloat32 = 6,
  kBool = 7,
  kString = 8,
  kArray = 9,
  kUint64 = 10,
  kInt64 = 11,
  kFloat64 = 12,
};
std::string_view gguf_value_type_name(GgufValueType t);

// One metadata value: a scalar, a string, or an array of one element type.
// Arrays of integers are held widened to int64 (uint64 values above INT64_MAX
// are rejected at parse time), floats to double, bools to int64 0/1.
class GgufValue {
 public:
  struct Array {
    GgufValueType elem_type = GgufValueType::kUint8;
    std::vector<std::int64_t> ints;       // integer and bool elements
    std::vector<double> floats;           // float32/float64 elements
    std::vector<std::string> strings;     // string elements
    // Nested arrays are legal GGUF but unused by models; kept as sizes only.
    std::size_t size() const;
  };

  GgufValue() = default;
  static GgufValue of_int(GgufValueType t, std::int64_t v);   // integer types and bool
  static GgufValue of_float(GgufValueType t, double v);       // float32 / float64
  static GgufValue of_string(std::string v);
  static GgufValue of_array(Array a);

  GgufValueType type() const { return type_; }
  bool is_integer() const;   // any integer type or bool
  bool is_float() const;
  bool is_string() const { return type_ == GgufValueType::kString; }
  bool is_array() const { return type_ == GgufValueType::kArray; }

  std::int64_t int_value() const { return int_; }
  double float_value() const { return is_float() ? float_ : static_cast<double>(int_); }
  const std::string& string_value() const { return string_; }
  const Array& array() const { return array_; }

  // Human-readable, arrays abbreviated (for `model info`).
  std::string to_display_string(std::size_t max_elems = 8) const;

 private:
  GgufValueType type_ = GgufValueType::kUint8;
  std::int64_t int_ = 0;
  double float_ = 0;
  std::string string_;
  Array array_;
};

struct GgufTensor {
  std::string name;
  std::vector<std::int64_t> dims;  // ggml order: dims[0] is the fastest-varying (row length)
  kernels::GgmlType type = kernels::GgmlType::kF32;
  std::uint64_t offset = 0;        // from the start of the data section
  const std::uint8_t* data = nullptr;
  std::size_t nbytes = 0;
  std::int64_t num_elements() const;
};

class GgufFile {
 public:
  // How the file's bytes reach memory.
  enum class Load {
    kMmap,            // map the file read-only (shared page cache; fastest to open)
    kReadHugePages,   // read into anonymous memory backed by transparent huge pages:
                      // fewer TLB misses when the weights are streamed every token
                      // (~8% faster decode here), at the cost of a private copy
  };
  // Opens and parses a file. NOT_FOUND if it cannot be opened; DATA_LOSS/INVALID_ARGUMENT
  // with a message naming the field when it is corrupt.
  static StatusOr<std::unique_ptr<GgufFile>> open(const std::string& path, Load load = Load::kMmap);
  // Parses bytes held in memory (the GgufFile keeps its own copy).
  static StatusOr<std::unique_ptr<GgufFile>> from_bytes(std::vector<std::uint8_t> bytes);

  ~GgufFile();
  GgufFile(const GgufFile&) = delete;
  GgufFile& operator=(const GgufFile&) = delete;

  std::uint32_t version() const { return version_; }
  std::uint32_t alignment() const { return alignment_; }
  std::size_t file_size() const { return size_; }
  const std::string& path() const { return path_; }

  // Metadata in file order.
  const std::vector<std::pair<std::string, GgufValue>>& metadata() const { return kv_; }
  const GgufValue* find(std::string_view key) const;

  // Typed getters: NOT_FOUND if absent, INVALID_ARGUMENT if of another type.
  StatusOr<std::string> get_string(std::string_view key) const;
  StatusOr<std::int64_t> get_int(std::string_view key) const;     // any integer type or bool
  StatusOr<double> get_float(std::string_view key) const;         // float or integer types
  StatusOr<bool> get_bool(std::string_view key) const;
  StatusOr<std::vector<std::string>> get_string_array(std::string_view key) const;
  StatusOr<std::vector<double>> get_float_array(std::string_view key) const;
  StatusOr<std::vector<std::int64_t>> get_int_array(std::string_view key) const;
  // With defaults, for optional keys (still an error if present with a wrong type).
  StatusOr<std::int64_t> get_int_or(std::string_view key, std::int64_t def) const;
  StatusOr<double> get_float_or(std::string_view key, double def) const;
  StatusOr<bool> get_bool_or(std::string_view key, bool def) const;

  const std::vector<GgufTensor>& tensors() const { return tensors_; }
  const GgufTensor* find_tensor(std::string_view name) const;

  // Whether the bytes are this object's private copy (Load::kReadHugePages,
  // from_bytes), which rewrite_bytes may change, rather than a shared mapping.
  bool private_copy() const { return private_copy_; }
  // Replaces bytes [data, data + n) of the file (inside one tensor's data) with
  // what fn(old, out) writes to out, given a copy of the old bytes; the rest
  // stays read-only. FAILED_PRECONDITION on a shared mapping, INVALID_ARGUMENT
  // for a range outside the file. Callers own the meaning of the new bytes
  // (LlamaModel repacks Q8_0 and Q4_K matrices, kernels/packed_weights.h). Not thread-safe:
  // only before the file is shared.
  Status rewrite_bytes(const std::uint8_t* data, std::size_t n,
                       const std::function<void(const std::uint8_t* old, std::uint8_t* out)>& fn);

 private:
  GgufFile() = default;
  Status parse();

  std::string path_;
  const std::uint8_t* base_ = nullptr;
  std::size_t size_ = 0;
  void* mapping_ = nullptr;               // mmap'd region, or null
  std::size_t mapping_bytes_ = 0;
  std::vector<std::uint8_t> owned_;       // for from_bytes
  bool private_copy_ = false;
  std::uint32_t version_ = 0;
  std::uint32_t alignment_ = 32;
  std::vector<std::pair<std::string, GgufValue>> kv_;
  std::map<std::string, std::size_t, std::less<>> kv_index_;
  std::vector<GgufTensor> tensors_;
  std::map<std::string, std::size_t, std::less<>> tensor_index_;
};

// Builds a GGUF v3 file that llama.cpp loads unchanged: metadata in insertion
// order (general.alignment written when not 32), tensor data aligned.
class GgufWriter {
 public:
  void set(std::string key, GgufValue value);   // replaces an existing key, keeps its position
  void set_string(std::string key, std::string v);
  void set_uint32(std::string key, std::uint32_t v);
  void set_int32(std::string key, std::int32_t v);
  void set_float32(std::string key, float v);
  void set_bool(std::string key, bool v);
  void set_string_array(std::string key, std::vector<std::string> v);
  void set_float32_array(std::string key, const std::vector<float>& v);
  void set_int32_array(std::string key, const std::vector<std::int32_t>& v);
  void set_alignment(std::uint32_t alignment);

  // data must be exactly the encoded size of dims in type (INVALID_ARGUMENT otherwise).
  Status add_tensor(std::string name, std::vector<std::int64_t> dims, kernels::GgmlType type,
                    std::vector<std::uint8_t> data);

  // Fills dst[0..nbytes) with a tensor's encoded data when the file is written.
  using TensorFiller = std::function<Status(std::uint8_t* dst, std::size_t nbytes)>;
  // Like add_tensor, but the data is produced by `fill` at write time (called once per
  // to_bytes()/write()), so huge models are written without holding every tensor in memory.
  Status add_tensor_lazy(std::string name, std::vector<std::int64_t> dims, kernels::GgmlType type,
                         TensorFiller fill);

  StatusOr<std::vector<std::uint8_t>> to_bytes() const;
  // Streams the file (header, then one tensor at a time) to `path`.
  Status write(const std::string& path) const;

 private:
  struct PendingTensor {
    std::string name;
    std::vector<std::int64_t> dims;
    kernels::GgmlType type;
    std::vector<std::uint8_t> data;
    std::size_t nbytes = 0;
    TensorFiller fill;  // set for lazy tensors (data empty)
  };
  Status check_new_tensor(const std::string& name, const std::vector<std::int64_t>& dims,
                          kernels::GgmlType type, std::size_t* nbytes) const;
  std::vector<std::uint8_t> header_bytes() const;  // through the padding before the data section
  std::uint32_t alignment_ = 32;
  std::vector<std::pair<std::string, GgufValue>> kv_;
  std::vector<PendingTensor> tensors_;
};

}  // namespace ecoserve::model
