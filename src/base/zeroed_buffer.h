// ZeroedBuffer<T>: zero-initialized memory straight from the OS (anonymous mmap).
// Pages are committed on first touch, so a large KV-cache budget costs no memory
// and no start-up time until it is used. Buffers of 2 MiB or more ask for
// transparent huge pages (MADV_HUGEPAGE: the kernel's THP "madvise" mode gives
// them only on request): decode attention reads each position's K/V rows
// scattered over the cache, and with 4 KiB pages every row is a TLB miss.
// Memory is then committed 2 MiB at a time. Move-only; not thread-safe to move.
#pragma once

#include <sys/mman.h>

#include <cstddef>
#include <cstring>
#include <utility>

#include "base/status.h"

namespace ecoserve {

template <typename T>
class ZeroedBuffer {
 public:
  ZeroedBuffer() = default;
  ZeroedBuffer(ZeroedBuffer&& o) noexcept : data_(std::exchange(o.data_, nullptr)), size_(std::exchange(o.size_, 0)) {}
  ZeroedBuffer& operator=(ZeroedBuffer&& o) noexcept {
    if (this != &o) {
      release();
      data_ = std::exchange(o.data_, nullptr);
      size_ = std::exchange(o.size_, 0);
    }
    return *this;
  }
  ZeroedBuffer(const ZeroedBuffer&) = delete;
  ZeroedBuffer& operator=(const ZeroedBuffer&) = delete;
  ~ZeroedBuffer() { release(); }

  // RESOURCE_EXHAUSTED when the address space cannot be reserved.
  static StatusOr<ZeroedBuffer> create(std::size_t count) {
    ZeroedBuffer b;
    if (count == 0) return b;
    void* p = mmap(nullptr, count * sizeof(T), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                   -1, 0);
    if (p == MAP_FAILED) {
      return resource_exhausted_error("cannot reserve {} bytes: {}", count * sizeof(T), std::strerror(errno));
    }
    if (count * sizeof(T) >= kHugePageBytes) madvise(p, count * sizeof(T), MADV_HUGEPAGE);  // advice only
    b.data_ = static_cast<T*>(p);
    b.size_ = count;
    return b;
  }

  T* data() { return data_; }
  const T* data() const { return data_; }
  std::size_t size() const { return size_; }

 private:
  static constexpr std::size_t kHugePageBytes = 2u << 20;
  void release() {
    if (data_ != nullptr) munmap(data_, size_ * sizeof(T));
    data_ = nullptr;
    size_ = 0;
  }
  T* data_ = nullptr;
  std::size_t size_ = 0;
};

}  // namespace ecoserve
