#include "model/gguf.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <limits>

#include <fmt/format.h>

namespace ecoserve::model {
namespace {

constexpr std::uint32_t kGgufMagic = 0x46554747;  // "GGUF" little-endian
constexpr std::uint32_t kDefaultAlignment = 32;
constexpr int kMaxDims = 4;
constexpr int kMaxArrayDepth = 4;

bool valid_value_type(std::uint32_t t) { return t <= static_cast<std::uint32_t>(GgufValueType::kFloat64); }

// Smallest encoded size of one value of type t (used to bound counts before allocating).
std::size_t min_encoded_size(GgufValueType t) {
  switch (t) {
    case GgufValueType::kUint8:
    case GgufValueType::kInt8:
    case GgufValueType::kBool: return 1;
    case GgufValueType::kUint16:
    case GgufValueType::kInt16: return 2;
    case GgufValueType::kUint32:
    case GgufValueType::kInt32:
    case GgufValueType::kFloat32: return 4;
    case GgufValueType::kUint64:
    case GgufValueType::kInt64:
    case GgufValueType::kFloat64:
    case GgufValueType::kString: return 8;  // string: its uint64 length
    case GgufValueType::kArray: return 12;  // uint32 type + uint64 count
  }
  return 1;
}

bool is_int_type(GgufValueType t) {
  switch (t) {
    case GgufValueType::kUint8:
    case GgufValueType::kInt8:
    case GgufValueType::kUint16:
    case GgufValueType::kInt16:
    case GgufValueType::kUint32:
    case GgufValueType::kInt32:
    case GgufValueType::kUint64:
    case GgufValueType::kInt64:
    case GgufValueType::kBool: return true;
    default: return false;
  }
}
bool is_float_type(GgufValueType t) { return t == GgufValueType::kFloat32 || t == GgufValueType::kFloat64; }

std::uint64_t align_up(std::uint64_t x, std::uint64_t a) { return (x + a - 1) / a * a; }

// Bounds-checked little-endian cursor over the file bytes.
class Reader {
 public:
  Reader(const std::uint8_t* base, std::size_t size) : base_(base), size_(size) {}
  std::size_t pos() const { return pos_; }
  std::size_t remaining() const { return size_ - pos_; }

  Status need(std::size_t n, std::string_view what) const {
    if (n > remaining()) {
      return data_loss_error("gguf: file truncated reading {} at offset {}: needs {} bytes, {} left", what, pos_,
                             n, remaining());
    }
    return ok_status();
  }
  template <typename T>
  StatusOr<T> read(std::string_view what) {
    ECO_RETURN_IF_ERROR(need(sizeof(T), what));
    T v;
    std::memcpy(&v, base_ + pos_, sizeof(T));
    pos_ += sizeof(T);
    return v;
  }
  StatusOr<std::string> read_string(std::string_view what) {
    ECO_ASSIGN_OR_RETURN(std::uint64_t len, read<std::uint64_t>(what));
    if (len > remaining()) {
      return data_loss_error("gguf: file truncated or corrupt: string length {} of {} at offset {} exceeds the {} bytes left", len,
                             what, pos_ - 8, remaining());
    }
    std::string s(reinterpret_cast<const char*>(base_ + pos_), static_cast<std::size_t>(len));
    pos_ += static_cast<std::size_t>(len);
    return s;
  }

 private:
  const std::uint8_t* base_;
  std::size_t size_;
  std::size_t pos_ = 0;
};

StatusOr<std::int64_t> read_int_of(Reader& r, GgufValueType t, const std::string& what) {
  switch (t) {
    case GgufValueType::kUint8: { ECO_ASSIGN_OR_RETURN(auto v, r.read<std::uint8_t>(what)); return std::int64_t{v}; }
    case GgufValueType::kInt8: { ECO_ASSIGN_OR_RETURN(auto v, r.read<std::int8_t>(what)); return std::int64_t{v}; }
    case GgufValueType::kUint16: { ECO_ASSIGN_OR_RETURN(auto v, r.read<std::uint16_t>(what)); return std::int64_t{v}; }
    case GgufValueType::kInt16: { ECO_ASSIGN_OR_RETURN(auto v, r.read<std::int16_t>(what)); return std::int64_t{v}; }
    case GgufValueType::kUint32: { ECO_ASSIGN_OR_RETURN(auto v, r.read<std::uint32_t>(what)); return std::int64_t{v}; }
    case GgufValueType::kInt32: { ECO_ASSIGN_OR_RETURN(auto v, r.read<std::int32_t>(what)); return std::int64_t{v}; }
    case GgufValueType::kInt64: { ECO_ASSIGN_OR_RETURN(auto v, r.read<std::int64_t>(what)); return v; }
    case GgufValueType::kUint64: {
      ECO_ASSIGN_OR_RETURN(auto v, r.read<std::uint64_t>(what));
      if (v > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())) {
        return invalid_argument_error("gguf: uint64 value {} of {} is above INT64_MAX (unsupported)", v, what);
      }
      return static_cast<std::int64_t>(v);
    }
    case GgufValueType::kBool: {
      ECO_ASSIGN_OR_RETURN(auto v, r.read<std::uint8_t>(what));
      return std::int64_t{v != 0};
    }
    default: return internal_error("gguf: not an integer type");
  }
}

StatusOr<double> read_float_of(Reader& r, GgufValueType t, const std::string& what) {
  if (t == GgufValueType::kFloat32) {
    ECO_ASSIGN_OR_RETURN(float v, r.read<float>(what));
    return static_cast<double>(v);
  }
  ECO_ASSIGN_OR_RETURN(double v, r.read<double>(what));
  return v;
}

StatusOr<GgufValue> read_value(Reader& r, GgufValueType t, const std::string& key, int depth);

StatusOr<GgufValue::Array> read_array(Reader& r, const std::string& key, int depth) {
  if (depth > kMaxArrayDepth) return invalid_argument_error("gguf: arrays nested too deeply in key '{}'", key);
  ECO_ASSIGN_OR_RETURN(std::uint32_t raw_elem, r.read<std::uint32_t>("array element type of '" + key + "'"));
  if (!valid_value_type(raw_elem)) {
    return invalid_argument_error("gguf: unknown array element type {} in key '{}'", raw_elem, key);
  }
  const auto elem = static_cast<GgufValueType>(raw_elem);
  ECO_ASSIGN_OR_RETURN(std::uint64_t count, r.read<std::uint64_t>("array count of '" + key + "'"));
  if (count > r.remaining() / min_encoded_size(elem)) {
    return data_loss_error("gguf: array count {} of key '{}' ({}) cannot fit in the {} bytes left in the file", count,
                           key, gguf_value_type_name(elem), r.remaining());
  }
  GgufValue::Array a;
  a.elem_type = elem;
  const std::string what = "array element of '" + key + "'";
  if (elem == GgufValueType::kString) {
    a.strings.reserve(count);
    for (std::uint64_t i = 0; i < count; ++i) {
      ECO_ASSIGN_OR_RETURN(std::string s, r.read_string(what));
      a.strings.push_back(std::move(s));
    }
  } else if (is_float_type(elem)) {
    a.floats.reserve(count);
    for (std::uint64_t i = 0; i < count; ++i) {
      ECO_ASSIGN_OR_RETURN(double v, read_float_of(r, elem, what));
      a.floats.push_back(v);
    }
  } else if (elem == GgufValueType::kArray) {
    a.ints.reserve(count);  // nested arrays: sizes only
    for (std::uint64_t i = 0; i < count; ++i) {
      ECO_ASSIGN_OR_RETURN(GgufValue::Array inner, read_array(r, key, depth + 1));
      a.ints.push_back(static_cast<std::int64_t>(inner.size()));
    }
  } else {
    a.ints.reserve(count);
    for (std::uint64_t i = 0; i < count; ++i) {
      ECO_ASSIGN_OR_RETURN(std::int64_t v, read_int_of(r, elem, what));
      a.ints.push_back(v);
    }
  }
  return a;
}

StatusOr<GgufValue> read_value(Reader& r, GgufValueType t, const std::string& key, int depth) {
  const std::string what = "value of '" + key + "'";
  if (t == GgufValueType::kString) {
    ECO_ASSIGN_OR_RETURN(std::string s, r.read_string(what));
    return GgufValue::of_string(std::move(s));
  }
  if (t == GgufValueType::kArray) {
    ECO_ASSIGN_OR_RETURN(GgufValue::Array a, read_array(r, key, depth + 1));
    return GgufValue::of_array(std::move(a));
  }
  if (is_float_type(t)) {
    ECO_ASSIGN_OR_RETURN(double v, read_float_of(r, t, what));
    return GgufValue::of_float(t, v);
  }
  ECO_ASSIGN_OR_RETURN(std::int64_t v, read_int_of(r, t, what));
  return GgufValue::of_int(t, v);
}

// ---- writer helpers ----
void put_bytes(std::vector<std::uint8_t>& out, const void* p, std::size_t n) {
  const auto* b = static_cast<const std::uint8_t*>(p);
  out.insert(out.end(), b, b + n);
}
template <typename T>
void put(std::vector<std::uint8_t>& out, T v) {
  put_bytes(out, &v, sizeof(T));
}
void put_string(std::vector<std::uint8_t>& out, const std::string& s) {
  put<std::uint64_t>(out, s.size());
  put_bytes(out, s.data(), s.size());
}

void put_int_of(std::vector<std::uint8_t>& out, GgufValueType t, std::int64_t v) {
  switch (t) {
    case GgufValueType::kUint8: put<std::uint8_t>(out, static_cast<std::uint8_t>(v)); break;
    case GgufValueType::kInt8: put<std::int8_t>(out, static_cast<std::int8_t>(v)); break;
    case GgufValueType::kUint16: put<std::uint16_t>(out, static_cast<std::uint16_t>(v)); break;
    case GgufValueType::kInt16: put<std::int16_t>(out, static_cast<std::int16_t>(v)); break;
    case GgufValueType::kUint32: put<std::uint32_t>(out, static_cast<std::uint32_t>(v)); break;
    case GgufValueType::kInt32: put<std::int32_t>(out, static_cast<std::int32_t>(v)); break;
    case GgufValueType::kUint64: put<std::uint64_t>(out, static_cast<std::uint64_t>(v)); break;
    case GgufValueType::kInt64: put<std::int64_t>(out, v); break;
    case GgufValueType::kBool: put<std::uint8_t>(out, v != 0 ? 1 : 0); break;
    default: break;
  }
}
void put_float_of(std::vector<std::uint8_t>& out, GgufValueType t, double v) {
  if (t == GgufValueType::kFloat32) {
    put<float>(out, static_cast<float>(v));
  } else {
    put<double>(out, v);
  }
}

void put_value(std::vector<std::uint8_t>& out, const GgufValue& v) {
  put<std::uint32_t>(out, static_cast<std::uint32_t>(v.type()));
  if (v.is_string()) {
    put_string(out, v.string_value());
  } else if (v.is_array()) {
    const auto& a = v.array();
    put<std::uint32_t>(out, static_cast<std::uint32_t>(a.elem_type));
    put<std::uint64_t>(out, a.size());
    if (a.elem_type == GgufValueType::kString) {
      for (const auto& s : a.strings) put_string(out, s);
    } else if (is_float_type(a.elem_type)) {
      for (double f : a.floats) put_float_of(out, a.elem_type, f);
    } else {
      for (std::int64_t i : a.ints) put_int_of(out, a.elem_type, i);
    }
  } else if (v.is_float()) {
    put_float_of(out, v.type(), v.float_value());
  } else {
    put_int_of(out, v.type(), v.int_value());
  }
}

std::string quote(std::string_view s) {
  std::string out = "\"";
  for (char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      case '\r': out += "\\r"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          out += fmt::format("\\x{:02x}", static_cast<unsigned char>(c));
        } else {
          out += c;
        }
    }
  }
  return out + "\"";
}

}  // namespace

std::string_view gguf_value_type_name(GgufValueType t) {
  switch (t) {
    case GgufValueType::kUint8: return "uint8";
    case GgufValueType::kInt8: return "int8";
    case GgufValueType::kUint16: return "uint16";
    case GgufValueType::kInt16: return "int16";
    case GgufValueType::kUint32: return "uint32";
    case GgufValueType::kInt32: return "int32";
    case GgufValueType::kFloat32: return "float32";
    case GgufValueType::kBool: return "bool";
    case GgufValueType::kString: return "string";
    case GgufValueType::kArray: return "array";
    case GgufValueType::kUint64: return "uint64";
    case GgufValueType::kInt64: return "int64";
    case GgufValueType::kFloat64: return "float64";
  }
  return "unknown";
}

// ---------------- GgufValue ----------------

std::size_t GgufValue::Array::size() const {
  if (elem_type == GgufValueType::kString) return strings.size();
  if (is_float_type(elem_type)) return floats.size();
  return ints.size();
}

GgufValue GgufValue::of_int(GgufValueType t, std::int64_t v) {
  GgufValue r;
  r.type_ = t;
  r.int_ = t == GgufValueType::kBool ? (v != 0) : v;
  return r;
}
GgufValue GgufValue::of_float(GgufValueType t, double v) {
  GgufValue r;
  r.type_ = t;
  r.float_ = v;
  return r;
}
GgufValue GgufValue::of_string(std::string v) {
  GgufValue r;
  r.type_ = GgufValueType::kString;
  r.string_ = std::move(v);
  return r;
}
GgufValue GgufValue::of_array(Array a) {
  GgufValue r;
  r.type_ = GgufValueType::kArray;
  r.array_ = std::move(a);
  return r;
}

bool GgufValue::is_integer() const { return is_int_type(type_); }
bool GgufValue::is_float() const { return is_float_type(type_); }

std::string GgufValue::to_display_string(std::size_t max_elems) const {
  if (is_string()) return quote(string_);
  if (type_ == GgufValueType::kBool) return int_ ? "true" : "false";
  if (type_ == GgufValueType::kFloat32) return fmt::format("{}", static_cast<float>(float_));
  if (is_float()) return fmt::format("{}", float_);
  if (is_integer()) return fmt::format("{}", int_);
  // Array.
  const std::size_t n = array_.size();
  std::string out = "[";
  for (std::size_t i = 0; i < n && i < max_elems; ++i) {
    if (i) out += ", ";
    if (array_.elem_type == GgufValueType::kString) {
      out += quote(array_.strings[i]);
    } else if (is_float_type(array_.elem_type)) {
      if (array_.elem_type == GgufValueType::kFloat32) {
        out += fmt::format("{}", static_cast<float>(array_.floats[i]));
      } else {
        out += fmt::format("{}", array_.floats[i]);
      }
    } else if (array_.elem_type == GgufValueType::kBool) {
      out += array_.ints[i] ? "true" : "false";
    } else if (array_.elem_type == GgufValueType::kArray) {
      out += fmt::format("[{} elements]", array_.ints[i]);
    } else {
      out += fmt::format("{}", array_.ints[i]);
    }
  }
  if (n > max_elems) out += ", ...";
  out += fmt::format("] ({} x {})", n, gguf_value_type_name(array_.elem_type));
  return out;
}

std::int64_t GgufTensor::num_elements() const {
  std::int64_t n = 1;
  for (std::int64_t d : dims) n *= d;
  return n;
}

// ---------------- GgufFile ----------------

GgufFile::~GgufFile() {
  if (mapping_ != nullptr) munmap(mapping_, mapping_bytes_);
}

StatusOr<std::unique_ptr<GgufFile>> GgufFile::open(const std::string& path, Load load) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    const int err = errno;
    if (err == ENOENT) return not_found_error("gguf: cannot open '{}': {}", path, std::strerror(err));
    return permission_denied_error("gguf: cannot open '{}': {}", path, std::strerror(err));
  }
  struct stat st;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return invalid_argument_error("gguf: '{}' is not a regular file", path);
  }
  std::unique_ptr<GgufFile> f(new GgufFile());
  f->path_ = path;
  f->size_ = static_cast<std::size_t>(st.st_size);
  if (f->size_ > 0) {
    if (load == Load::kMmap) {
      f->mapping_bytes_ = f->size_;
      void* m = mmap(nullptr, f->size_, PROT_READ, MAP_PRIVATE, fd, 0);
      if (m == MAP_FAILED) {
        const int err = errno;
        ::close(fd);
        return internal_error("gguf: cannot mmap '{}': {}", path, std::strerror(err));
      }
      f->mapping_ = m;
    } else {
      constexpr std::size_t kHugePage = 2u << 20;
      f->mapping_bytes_ = (f->size_ + kHugePage - 1) / kHugePage * kHugePage;
      void* m = mmap(nullptr, f->mapping_bytes_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
      if (m == MAP_FAILED) {
        const int err = errno;
        ::close(fd);
        return resource_exhausted_error("gguf: cannot allocate {} bytes for '{}': {}", f->size_, path,
                                        std::strerror(err));
      }
      f->mapping_ = m;
      madvise(m, f->mapping_bytes_, MADV_HUGEPAGE);  // a hint; fine if THP is off
      std::size_t off = 0;
      while (off < f->size_) {
        const ssize_t n = pread(fd, static_cast<char*>(m) + off, f->size_ - off, static_cast<off_t>(off));
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) {
          const int err = n < 0 ? errno : EIO;
          ::close(fd);
          return data_loss_error("gguf: reading '{}' failed at byte {}: {}", path, off, std::strerror(err));
        }
        off += static_cast<std::size_t>(n);
      }
      mprotect(m, f->mapping_bytes_, PROT_READ);
      f->private_copy_ = true;
    }
    f->base_ = static_cast<const std::uint8_t*>(f->mapping_);
  }
  ::close(fd);
  Status s = f->parse();
  if (!s.ok()) return s.with_prefix(path);
  return f;
}

StatusOr<std::unique_ptr<GgufFile>> GgufFile::from_bytes(std::vector<std::uint8_t> bytes) {
  std::unique_ptr<GgufFile> f(new GgufFile());
  f->owned_ = std::move(bytes);
  f->base_ = f->owned_.data();
  f->size_ = f->owned_.size();
  f->path_ = "<memory>";
  f->private_copy_ = true;
  ECO_RETURN_IF_ERROR(f->parse());
  return f;
}

Status GgufFile::rewrite_bytes(const std::uint8_t* data, std::size_t n,
                               const std::function<void(const std::uint8_t* old, std::uint8_t* out)>& fn) {
  if (!private_copy_) return failed_precondition_error("gguf: '{}' is mapped shared; its bytes cannot change", path_);
  if (data < base_ || n > size_ || static_cast<std::size_t>(data - base_) > size_ - n) {
    return invalid_argument_error("gguf: rewrite of {} bytes at {} is outside '{}'", n, static_cast<const void*>(data),
                                  path_);
  }
  if (n == 0) return ok_status();
  const std::vector<std::uint8_t> old(data, data + n);
  auto* out = const_cast<std::uint8_t*>(data);
  if (mapping_ == nullptr) {  // from_bytes: a vector we own
    fn(old.data(), out);
    return ok_status();
  }
  const auto page = static_cast<std::uintptr_t>(sysconf(_SC_PAGESIZE));
  const std::uintptr_t lo = reinterpret_cast<std::uintptr_t>(data) / page * page;
  const std::uintptr_t hi = (reinterpret_cast<std::uintptr_t>(data) + n + page - 1) / page * page;
  if (mprotect(reinterpret_cast<void*>(lo), hi - lo, PROT_READ | PROT_WRITE) != 0) {
    return internal_error("gguf: mprotect of '{}' failed: {}", path_, std::strerror(errno));
  }
  fn(old.data(), out);
  mprotect(reinterpret_cast<void*>(lo), hi - lo, PROT_READ);
  return ok_status();
}

Status GgufFile::parse() {
  Reader r(base_, size_);
  ECO_ASSIGN_OR_RETURN(std::uint32_t magic, r.read<std::uint32_t>("header magic"));
  if (magic != kGgufMagic) {
    return invalid_argument_error("gguf: bad magic 0x{:08x} (expected 0x{:08x} \"GGUF\"): not a GGUF file", magic,
                                  kGgufMagic);
  }
  ECO_ASSIGN_OR_RETURN(version_, r.read<std::uint32_t>("header version"));
  if (version_ != 2 && version_ != 3) {
    return invalid_argument_error("gguf: unsupported version {} (only versions 2 and 3 are supported)", version_);
  }
  ECO_ASSIGN_OR_RETURN(std::uint64_t n_tensors, r.read<std::uint64_t>("header tensor count"));
  ECO_ASSIGN_OR_RETURN(std::uint64_t n_kv, r.read<std::uint64_t>("header metadata count"));
  // A tensor info takes at least 8 (name length) + 4 (n_dims) + 4 (type) + 8 (offset) bytes,
  // a key/value at least 8 (key length) + 4 (type) + 1 (value).
  if (n_tensors > r.remaining() / 24) {
    return data_loss_error("gguf: tensor count {} cannot fit in a {}-byte file", n_tensors, size_);
  }
  if (n_kv > r.remaining() / 13) {
    return data_loss_error("gguf: metadata count {} cannot fit in a {}-byte file", n_kv, size_);
  }
  kv_.reserve(n_kv);
  for (std::uint64_t i = 0; i < n_kv; ++i) {
    ECO_ASSIGN_OR_RETURN(std::string key, r.read_string(fmt::format("metadata key #{}", i)));
    ECO_ASSIGN_OR_RETURN(std::uint32_t raw_type, r.read<std::uint32_t>("value type of '" + key + "'"));
    if (!valid_value_type(raw_type)) {
      return invalid_argument_error("gguf: unknown metadata value type {} for key '{}'", raw_type, key);
    }
    ECO_ASSIGN_OR_RETURN(GgufValue value, read_value(r, static_cast<GgufValueType>(raw_type), key, 0));
    if (kv_index_.count(key) != 0) return invalid_argument_error("gguf: duplicate metadata key '{}'", key);
    kv_index_.emplace(key, kv_.size());
    kv_.emplace_back(std::move(key), std::move(value));
  }
  if (const GgufValue* a = find("general.alignment")) {
    if (!a->is_integer() || a->type() == GgufValueType::kBool) {
      return invalid_argument_error("gguf: general.alignment must be an integer, got {}",
                                    gguf_value_type_name(a->type()));
    }
    const std::int64_t al = a->int_value();
    if (al <= 0 || al > (1 << 30) || (al & (al - 1)) != 0) {
      return invalid_argument_error("gguf: general.alignment {} is not a power of two", al);
    }
    alignment_ = static_cast<std::uint32_t>(al);
  }

  tensors_.reserve(n_tensors);
  for (std::uint64_t i = 0; i < n_tensors; ++i) {
    GgufTensor t;
    ECO_ASSIGN_OR_RETURN(t.name, r.read_string(fmt::format("name of tensor #{}", i)));
    const std::string what = "tensor '" + t.name + "'";
    ECO_ASSIGN_OR_RETURN(std::uint32_t n_dims, r.read<std::uint32_t>("n_dims of " + what));
    if (n_dims > kMaxDims) {
      return invalid_argument_error("gguf: {} has n_dims {} (at most {} dimensions allowed)", what, n_dims, kMaxDims);
    }
    std::int64_t n_elems = 1;
    for (std::uint32_t d = 0; d < n_dims; ++d) {
      ECO_ASSIGN_OR_RETURN(std::uint64_t dim, r.read<std::uint64_t>("dims of " + what));
      if (dim > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()) ||
          (dim != 0 && n_elems > std::numeric_limits<std::int64_t>::max() / static_cast<std::int64_t>(dim))) {
        return invalid_argument_error("gguf: {} element count overflows (dimension {} = {})", what, d, dim);
      }
      n_elems *= static_cast<std::int64_t>(dim);
      t.dims.push_back(static_cast<std::int64_t>(dim));
    }
    ECO_ASSIGN_OR_RETURN(std::uint32_t raw_type, r.read<std::uint32_t>("type of " + what));
    const kernels::TypeTraits* traits = kernels::type_traits_of(raw_type);
    if (traits == nullptr) return invalid_argument_error("gguf: {} has unknown ggml type number {}", what, raw_type);
    t.type = static_cast<kernels::GgmlType>(raw_type);
    ECO_ASSIGN_OR_RETURN(t.offset, r.read<std::uint64_t>("offset of " + what));
    const std::int64_t row = t.dims.empty() ? 1 : t.dims[0];
    if (row % traits->block_elems != 0) {
      return invalid_argument_error("gguf: {} row length {} is not a multiple of the {} block size {}", what, row,
                                    traits->name, traits->block_elems);
    }
    const std::uint64_t n_blocks = static_cast<std::uint64_t>(n_elems / traits->block_elems);
    if (n_blocks != 0 && traits->block_bytes > std::numeric_limits<std::uint64_t>::max() / n_blocks) {
      return invalid_argument_error("gguf: {} byte size overflows", what);
    }
    const std::uint64_t nbytes = n_blocks * traits->block_bytes;
    if (nbytes > size_) {
      return data_loss_error("gguf: {} needs {} bytes of data, more than the whole {}-byte file (past end)", what,
                             nbytes, size_);
    }
    t.nbytes = static_cast<std::size_t>(nbytes);
    if (tensor_index_.count(t.name) != 0) return invalid_argument_error("gguf: duplicate tensor name '{}'", t.name);
    tensor_index_.emplace(t.name, tensors_.size());
    tensors_.push_back(std::move(t));
  }

  const std::uint64_t data_start = align_up(r.pos(), alignment_);
  for (GgufTensor& t : tensors_) {
    if (t.offset % alignment_ != 0) {
      return invalid_argument_error("gguf: tensor '{}' offset {} is not aligned to {} bytes (misaligned)", t.name,
                                    t.offset, alignment_);
    }
    if (t.nbytes == 0) {
      t.data = base_;  // nothing to read
      continue;
    }
    if (data_start > size_ || t.offset > size_ - data_start || t.nbytes > size_ - data_start - t.offset) {
      return data_loss_error("gguf: tensor '{}' data [{}, {}) lies past end of file ({} bytes; data section at {})",
                             t.name, t.offset, t.offset + t.nbytes, size_, data_start);
    }
    t.data = base_ + data_start + t.offset;
  }
  return ok_status();
}

const GgufValue* GgufFile::find(std::string_view key) const {
  auto it = kv_index_.find(key);
  return it == kv_index_.end() ? nullptr : &kv_[it->second].second;
}

const GgufTensor* GgufFile::find_tensor(std::string_view name) const {
  auto it = tensor_index_.find(name);
  return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

namespace {
Status missing(std::string_view key) { return not_found_error("gguf: metadata key '{}' not found", key); }
Status wrong_type(std::string_view key, const GgufValue& v, std::string_view want) {
  std::string got(gguf_value_type_name(v.type()));
  if (v.is_array()) got += fmt::format(" of {}", gguf_value_type_name(v.array().elem_type));
  return invalid_argument_error("gguf: metadata key '{}' is {}, expected {}", key, got, want);
}
}  // namespace

StatusOr<std::string> GgufFile::get_string(std::string_view key) const {
  const GgufValue* v = find(key);
  if (!v) return missing(key);
  if (!v->is_string()) return wrong_type(key, *v, "string");
  return v->string_value();
}
StatusOr<std::int64_t> GgufFile::get_int(std::string_view key) const {
  const GgufValue* v = find(key);
  if (!v) return missing(key);
  if (!v->is_integer()) return wrong_type(key, *v, "an integer");
  return v->int_value();
}
StatusOr<double> GgufFile::get_float(std::string_view key) const {
  const GgufValue* v = find(key);
  if (!v) return missing(key);
  if (!v->is_float() && !(v->is_integer() && v->type() != GgufValueType::kBool)) return wrong_type(key, *v, "a number");
  return v->float_value();
}
StatusOr<bool> GgufFile::get_bool(std::string_view key) const {
  const GgufValue* v = find(key);
  if (!v) return missing(key);
  if (!v->is_integer()) return wrong_type(key, *v, "bool");
  return v->int_value() != 0;
}
StatusOr<std::vector<std::string>> GgufFile::get_string_array(std::string_view key) const {
  const GgufValue* v = find(key);
  if (!v) return missing(key);
  if (!v->is_array() || v->array().elem_type != GgufValueType::kString) return wrong_type(key, *v, "array of string");
  return v->array().strings;
}
StatusOr<std::vector<double>> GgufFile::get_float_array(std::string_view key) const {
  const GgufValue* v = find(key);
  if (!v) return missing(key);
  if (!v->is_array()) return wrong_type(key, *v, "array of numbers");
  const auto& a = v->array();
  if (is_float_type(a.elem_type)) return a.floats;
  if (is_int_type(a.elem_type)) return std::vector<double>(a.ints.begin(), a.ints.end());
  return wrong_type(key, *v, "array of numbers");
}
StatusOr<std::vector<std::int64_t>> GgufFile::get_int_array(std::string_view key) const {
  const GgufValue* v = find(key);
  if (!v) return missing(key);
  if (!v->is_array() || !is_int_type(v->array().elem_type)) return wrong_type(key, *v, "array of integers");
  return v->array().ints;
}
StatusOr<std::int64_t> GgufFile::get_int_or(std::string_view key, std::int64_t def) const {
  if (!find(key)) return def;
  return get_int(key);
}
StatusOr<double> GgufFile::get_float_or(std::string_view key, double def) const {
  if (!find(key)) return def;
  return get_float(key);
}
StatusOr<bool> GgufFile::get_bool_or(std::string_view key, bool def) const {
  if (!find(key)) return def;
  return get_bool(key);
}

// ---------------- GgufWriter ----------------

void GgufWriter::set(std::string key, GgufValue value) {
  for (auto& [k, v] : kv_) {
    if (k == key) {
      v = std::move(value);
      return;
    }
  }
  kv_.emplace_back(std::move(key), std::move(value));
}
void GgufWriter::set_string(std::string key, std::string v) { set(std::move(key), GgufValue::of_string(std::move(v))); }
void GgufWriter::set_uint32(std::string key, std::uint32_t v) {
  set(std::move(key), GgufValue::of_int(GgufValueType::kUint32, v));
}
void GgufWriter::set_int32(std::string key, std::int32_t v) {
  set(std::move(key), GgufValue::of_int(GgufValueType::kInt32, v));
}
void GgufWriter::set_float32(std::string key, float v) {
  set(std::move(key), GgufValue::of_float(GgufValueType::kFloat32, v));
}
void GgufWriter::set_bool(std::string key, bool v) { set(std::move(key), GgufValue::of_int(GgufValueType::kBool, v)); }
void GgufWriter::set_string_array(std::string key, std::vector<std::string> v) {
  GgufValue::Array a;
  a.elem_type = GgufValueType::kString;
  a.strings = std::move(v);
  set(std::move(key), GgufValue::of_array(std::move(a)));
}
void GgufWriter::set_float32_array(std::string key, const std::vector<float>& v) {
  GgufValue::Array a;
  a.elem_type = GgufValueType::kFloat32;
  a.floats.assign(v.begin(), v.end());
  set(std::move(key), GgufValue::of_array(std::move(a)));
}
void GgufWriter::set_int32_array(std::string key, const std::vector<std::int32_t>& v) {
  GgufValue::Array a;
  a.elem_type = GgufValueType::kInt32;
  a.ints.assign(v.begin(), v.end());
  set(std::move(key), GgufValue::of_array(std::move(a)));
}
void GgufWriter::set_alignment(std::uint32_t alignment) {
  ECO_CHECK_MSG(alignment > 0 && (alignment & (alignment - 1)) == 0, "alignment {} not a power of two", alignment);
  alignment_ = alignment;
  if (alignment != kDefaultAlignment) {
    set_uint32("general.alignment", alignment);
  } else {
    std::erase_if(kv_, [](const auto& kv) { return kv.first == "general.alignment"; });
  }
}

Status GgufWriter::check_new_tensor(const std::string& name, const std::vector<std::int64_t>& dims,
                                    kernels::GgmlType type, std::size_t* nbytes) const {
  if (name.empty() || name.size() >= 64) {
    return invalid_argument_error("gguf writer: tensor name '{}' must have 1..63 bytes", name);
  }
  for (const auto& t : tensors_) {
    if (t.name == name) return invalid_argument_error("gguf writer: duplicate tensor name '{}'", name);
  }
  if (dims.empty() || dims.size() > kMaxDims) {
    return invalid_argument_error("gguf writer: tensor '{}' has {} dims (1..4 allowed)", name, dims.size());
  }
  const kernels::TypeTraits* traits = kernels::type_traits(type);
  if (!traits) return invalid_argument_error("gguf writer: tensor '{}' has unknown type", name);
  std::int64_t n = 1;
  for (std::int64_t d : dims) {
    if (d < 0 || (d != 0 && n > std::numeric_limits<std::int64_t>::max() / d)) {
      return invalid_argument_error("gguf writer: tensor '{}' has a bad dimension {}", name, d);
    }
    n *= d;
  }
  if (dims[0] % traits->block_elems != 0) {
    return invalid_argument_error("gguf writer: tensor '{}' row length {} is not a multiple of {} ({})", name, dims[0],
                                  traits->block_elems, traits->name);
  }
  *nbytes = kernels::row_bytes(*traits, n);
  return ok_status();
}

Status GgufWriter::add_tensor(std::string name, std::vector<std::int64_t> dims, kernels::GgmlType type,
                              std::vector<std::uint8_t> data) {
  std::size_t nbytes = 0;
  ECO_RETURN_IF_ERROR(check_new_tensor(name, dims, type, &nbytes));
  if (data.size() != nbytes) {
    return invalid_argument_error("gguf writer: tensor '{}' data has {} bytes, expected {}", name, data.size(), nbytes);
  }
  tensors_.push_back(PendingTensor{std::move(name), std::move(dims), type, std::move(data), nbytes, nullptr});
  return ok_status();
}

Status GgufWriter::add_tensor_lazy(std::string name, std::vector<std::int64_t> dims, kernels::GgmlType type,
                                   TensorFiller fill) {
  std::size_t nbytes = 0;
  ECO_RETURN_IF_ERROR(check_new_tensor(name, dims, type, &nbytes));
  if (!fill) return invalid_argument_error("gguf writer: tensor '{}' has no filler", name);
  tensors_.push_back(PendingTensor{std::move(name), std::move(dims), type, {}, nbytes, std::move(fill)});
  return ok_status();
}

std::vector<std::uint8_t> GgufWriter::header_bytes() const {
  std::vector<std::uint8_t> out;
  put<std::uint32_t>(out, kGgufMagic);
  put<std::uint32_t>(out, 3);
  put<std::uint64_t>(out, tensors_.size());
  put<std::uint64_t>(out, kv_.size());
  for (const auto& [k, v] : kv_) {
    put_string(out, k);
    put_value(out, v);
  }
  std::uint64_t offset = 0;
  for (const auto& t : tensors_) {
    put_string(out, t.name);
    put<std::uint32_t>(out, static_cast<std::uint32_t>(t.dims.size()));
    for (std::int64_t d : t.dims) put<std::uint64_t>(out, static_cast<std::uint64_t>(d));
    put<std::uint32_t>(out, static_cast<std::uint32_t>(t.type));
    put<std::uint64_t>(out, offset);
    offset += align_up(t.nbytes, alignment_);
  }
  out.resize(align_up(out.size(), alignment_), 0);
  return out;
}

namespace {
Status check_nested(const std::vector<std::pair<std::string, GgufValue>>& kv) {
  for (const auto& [k, v] : kv) {
    if (v.is_array() && v.array().elem_type == GgufValueType::kArray) {
      return unimplemented_error("gguf writer: nested arrays (key '{}') cannot be written", k);
    }
  }
  return ok_status();
}
}  // namespace

StatusOr<std::vector<std::uint8_t>> GgufWriter::to_bytes() const {
  ECO_RETURN_IF_ERROR(check_nested(kv_));
  std::vector<std::uint8_t> out = header_bytes();
  for (const auto& t : tensors_) {
    const std::size_t start = out.size();
    out.resize(start + align_up(t.nbytes, alignment_), 0);
    if (t.fill) {
      ECO_RETURN_IF_ERROR(t.fill(out.data() + start, t.nbytes));
    } else if (t.nbytes) {
      std::memcpy(out.data() + start, t.data.data(), t.nbytes);
    }
  }
  return out;
}

Status GgufWriter::write(const std::string& path) const {
  ECO_RETURN_IF_ERROR(check_nested(kv_));
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) return permission_denied_error("gguf writer: cannot create '{}': {}", path, std::strerror(errno));
  auto fail = [&](std::string_view what) {
    const int err = errno;
    std::fclose(f);
    std::remove(path.c_str());
    return internal_error("gguf writer: {} '{}': {}", what, path, std::strerror(err));
  };
  const std::vector<std::uint8_t> header = header_bytes();
  if (std::fwrite(header.data(), 1, header.size(), f) != header.size()) return fail("cannot write");
  std::vector<std::uint8_t> buf;
  for (const auto& t : tensors_) {
    const std::size_t padded = align_up(t.nbytes, alignment_);
    const std::uint8_t* src = t.data.data();
    if (t.fill) {
      buf.assign(padded, 0);
      Status s = t.fill(buf.data(), t.nbytes);
      if (!s.ok()) {
        std::fclose(f);
        std::remove(path.c_str());
        return s;
      }
      src = buf.data();
    } else if (padded != t.nbytes) {
      buf.assign(padded, 0);
      if (t.nbytes) std::memcpy(buf.data(), t.data.data(), t.nbytes);
      src = buf.data();
    }
    if (padded && std::fwrite(src, 1, padded, f) != padded) return fail("cannot write");
  }
  if (std::fclose(f) != 0) {
    std::remove(path.c_str());
    return internal_error("gguf writer: cannot close '{}': {}", path, std::strerror(errno));
  }
  return ok_status();
}

}  // namespace ecoserve::model
