// kiln/cuda/tensor.hpp: kiln::cuda_tensor, a tensor in device memory, and the copies between it
// and host tensors.
// IWYU pragma: private, include <kiln/kiln.hpp>
#pragma once

#include <kiln/core/tensor.hpp>
#include <kiln/cuda/policy.hpp>
#include <kiln/cuda/runtime.hpp>

#include <memory>
#include <utility>

namespace kiln {

// A tensor in device memory: shared storage, extents, strides (in elements, 0 and negative
// allowed) and a pointer to its first element. It is a handle, like torch.Tensor and kiln::var:
// copying one aliases the same elements (device copies are explicit: kiln::clone), and views
// (kiln::transpose, kiln::slice, ...) are cuda_tensors sharing the storage. Expressions hold their
// device operands by handle, so `auto e = kiln::exp(kiln::to_device(x));` never dangles.
//
// The elements are reachable only by kernels: kiln::eval(kiln::cuda{}, t, expr) writes them,
// kiln::to_host(t) and t.item() copy them back. Reading one on the host is a compile error.
template <class T, int R>
class cuda_tensor {
  static_assert(R >= 0, "kiln: a tensor's rank cannot be negative");
  static_assert(element<T>, "kiln: tensors hold arithmetic element types (float, double, int32, int64, bool...)");

 public:
  using value_type = T;
  static constexpr int rank = R;
  static constexpr bool is_kiln_expression = true;

  // Extents all zero (one element for rank 0).
  cuda_tensor() : cuda_tensor(extents<R>{}) {}
  // Zero-filled.
  explicit cuda_tensor(extents<R> const& shape) : cuda_tensor(shape, uninitialized) {
    if (size() != 0)
      detail::check(cudaMemsetAsync(data_, 0, static_cast<std::size_t>(size()) * sizeof(T), detail::stream()),
                    "cudaMemsetAsync");
  }
  cuda_tensor(extents<R> const& shape, uninitialized_t)
      : storage_(detail::device_allocate<T>(detail::checked_count<R>(shape))), data_(storage_.get()), shape_(shape),
        strides_(contiguous_strides<R>(shape)) {}
  // A view sharing `base`'s storage (kiln::transpose, kiln::slice, ...).
  template <int B>
  cuda_tensor(cuda_tensor<T, B> const& base, T* data, extents<R> const& shape, extents<R> const& strides)
      : storage_(base.storage()), data_(data), shape_(shape), strides_(strides) {}

  T* data() const noexcept { return data_; }
  extents<R> const& shape() const noexcept { return shape_; }
  extents<R> const& strides() const noexcept { return strides_; }
  index_t extent(int d) const noexcept { return shape_[d]; }
  index_t size() const noexcept { return element_count<R>(shape_); }
  bool empty() const noexcept { return size() == 0; }
  bool is_contiguous() const noexcept { return tensor_view<T const, R>(data_, shape_, strides_).is_contiguous(); }
  std::shared_ptr<T> const& storage() const noexcept { return storage_; }

  // The single element of a size-1 tensor, copied to the host (waits for the kernels before it).
  T item() const {
    if (size() != 1) throw shape_error("item() needs exactly one element, not shape " + shape_string(shape_));
    T value;
    detail::check(cudaMemcpyAsync(&value, data_, sizeof(T), cudaMemcpyDeviceToHost, detail::stream()),
                  "cudaMemcpyAsync");
    detail::synchronize();
    return value;
  }

  // Element access would read device memory from the host.
  template <class... I>
  void operator()(I...) const {
    static_assert(detail::always_false<I...>,
                  "kiln: a cuda_tensor's elements are in device memory: copy it to the host with kiln::to_host first");
  }
  template <class... I>
  void at(I...) const {
    static_assert(detail::always_false<I...>,
                  "kiln: a cuda_tensor's elements are in device memory: copy it to the host with kiln::to_host first");
  }

 private:
  std::shared_ptr<T> storage_;
  T* data_ = nullptr;
  extents<R> shape_{};
  extents<R> strides_{};
};

namespace detail {
template <class T, int R>
inline constexpr bool on_device<cuda_tensor<T, R>> = true;

template <class X>
inline constexpr bool is_cuda_tensor = false;
template <class T, int R>
inline constexpr bool is_cuda_tensor<cuda_tensor<T, R>> = true;
}  // namespace detail

// A contiguous device copy of a host tensor or view (a strided view is gathered on the host first).
template <viewable X>
auto to_device(X const& x) -> cuda_tensor<std::remove_const_t<typename decltype(as_view(x))::value_type>,
                                          decltype(as_view(x))::rank> {
  auto const v = as_view(x);
  using T = std::remove_const_t<typename decltype(v)::value_type>;
  constexpr int R = decltype(v)::rank;
  if (!v.is_contiguous()) return to_device(tensor<T, R>(v));
  cuda_tensor<T, R> out(v.shape(), uninitialized);
  if (!out.empty())
    detail::check(cudaMemcpyAsync(out.data(), v.data(), static_cast<std::size_t>(out.size()) * sizeof(T),
                                  cudaMemcpyHostToDevice, detail::stream()),
                  "cudaMemcpyAsync");
  detail::synchronize();  // the host buffer may be freed as soon as this returns
  return out;
}

}  // namespace kiln
