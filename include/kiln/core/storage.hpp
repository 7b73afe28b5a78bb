// kiln/core/storage.hpp: the owning, aligned buffer behind a tensor.
// IWYU pragma: private, include <kiln/kiln.hpp>
#pragma once

#include <kiln/core/config.hpp>

#include <algorithm>
#include <cstring>
#include <limits>
#include <memory>
#include <new>
#include <type_traits>
#include <utility>

namespace kiln::detail {

// A fixed-size buffer of trivially copyable elements, aligned to `storage_alignment`. Copying
// copies the elements; moving steals the pointer and leaves the source empty (size 0), so a
// moved-from buffer never claims elements it no longer has.
template <class T>
class aligned_buffer {
  static_assert(std::is_trivially_copyable_v<T>, "kiln tensors hold trivially copyable elements");

 public:
  aligned_buffer() noexcept = default;
  // Zero-filled when `zero` is set, left uninitialised otherwise (kiln::empty).
  aligned_buffer(index_t n, bool zero) : data_(allocate(n)), size_(n) {
    if (zero && n > 0) std::memset(static_cast<void*>(data_.get()), 0, bytes());
  }
  aligned_buffer(aligned_buffer const& other) : aligned_buffer(other.size_, false) {
    if (size_ > 0) std::memcpy(static_cast<void*>(data_.get()), other.data_.get(), bytes());
  }
  aligned_buffer(aligned_buffer&& other) noexcept
      : data_(std::move(other.data_)), size_(std::exchange(other.size_, 0)) {}
  aligned_buffer& operator=(aligned_buffer const& other) {
    if (this != &other) *this = aligned_buffer(other);
    return *this;
  }
  aligned_buffer& operator=(aligned_buffer&& other) noexcept {
    data_ = std::move(other.data_);
    size_ = std::exchange(other.size_, 0);
    return *this;
  }

  T* data() noexcept { return data_.get(); }
  T const* data() const noexcept { return data_.get(); }
  index_t size() const noexcept { return size_; }

 private:
  struct release {
    void operator()(T* p) const noexcept {
      ::operator delete(static_cast<void*>(p), std::align_val_t{storage_alignment});
    }
  };
  static T* allocate(index_t n) {
    if (n == 0) return nullptr;
    // The byte count must not wrap: a wrapped size would allocate less than the shape needs.
    if (static_cast<std::size_t>(n) > std::numeric_limits<std::size_t>::max() / sizeof(T))
      throw std::bad_array_new_length();
    return static_cast<T*>(
        ::operator new(static_cast<std::size_t>(n) * sizeof(T), std::align_val_t{storage_alignment}));
  }
  std::size_t bytes() const noexcept { return static_cast<std::size_t>(size_) * sizeof(T); }

  std::unique_ptr<T, release> data_;
  index_t size_ = 0;
};

}  // namespace kiln::detail
