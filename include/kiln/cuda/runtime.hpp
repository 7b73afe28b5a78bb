// kiln/cuda/runtime.hpp: the CUDA runtime as kiln uses it. Every runtime call goes through
// `check`, which turns a failure into kiln::cuda_error; device memory is allocated stream-ordered
// on the default stream and owned by shared handles.
// IWYU pragma: private, include <kiln/kiln.hpp>
#pragma once

#include <kiln/core/config.hpp>
#include <kiln/core/error.hpp>

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <memory>

namespace kiln::detail {

// Throws kiln::cuda_error naming `api` unless `status` is cudaSuccess.
inline void check(cudaError_t status, char const* api) {
  if (status != cudaSuccess) throw cuda_error(api, cudaGetErrorString(status));
}

// After a kernel launch: a bad configuration or an earlier asynchronous fault is reported here.
inline void check_launch(char const* kernel) {
  check(cudaGetLastError(), kernel);
}

// Device memory for n elements of T, freed when the last handle to it goes. Allocation is
// stream-ordered (the driver's pool reuses memory without a device-wide synchronisation).
template <class T>
std::shared_ptr<T> device_allocate(index_t n) {
  if (n == 0) return {};
  void* p = nullptr;
  check(cudaMallocAsync(&p, static_cast<std::size_t>(n) * sizeof(T), cudaStreamPerThread), "cudaMallocAsync");
  // A destructor cannot throw: a failed free (after an earlier device fault, which was reported
  // where it happened) is written to stderr instead.
  return std::shared_ptr<T>(static_cast<T*>(p), [](T* q) {
    if (cudaError_t const status = cudaFreeAsync(q, cudaStreamPerThread); status != cudaSuccess)
      std::fprintf(stderr, "kiln: cudaFreeAsync: %s\n", cudaGetErrorString(status));
  });
}

// The stream every kiln kernel, copy and allocation runs on: the calling thread's default stream,
// so host threads do not serialise on one another.
inline cudaStream_t stream() noexcept {
  return cudaStreamPerThread;
}

// Waits for the work queued so far, reporting any asynchronous fault.
inline void synchronize() {
  check(cudaStreamSynchronize(stream()), "cudaStreamSynchronize");
}

inline constexpr int block_size = 256;

// A grid-stride launch shape for n work items of `per_block` items each: enough blocks to fill
// the device several times over, never more than the work needs.
inline unsigned grid_size(index_t n, index_t per_block) {
  int device = 0, sms = 0;
  check(cudaGetDevice(&device), "cudaGetDevice");
  check(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device), "cudaDeviceGetAttribute");
  index_t const needed = (n + per_block - 1) / per_block;
  return static_cast<unsigned>(std::clamp<index_t>(needed, 1, index_t(sms) * 16));
}

}  // namespace kiln::detail
