// kiln/core/error.hpp: the exceptions kiln throws.
// IWYU pragma: private, include <kiln/kiln.hpp>
#pragma once

#include <stdexcept>
#include <string>

namespace kiln {

// Shapes that cannot be combined (broadcasting, assignment, reshape, slicing). The message names
// the shapes involved, e.g. "cannot broadcast [3, 4] with [5]".
struct shape_error : std::invalid_argument {
  using std::invalid_argument::invalid_argument;
};

// A C++ scalar that an operation refuses, as PyTorch refuses it, rather than wrap it or compute
// with it: a value that the type it converts to cannot hold (a branch of `where`, addcmul's
// value, an integer tensor's exponent in `pow`), or a negative integer power of an integer tensor.
// The message names the operation, the value and the type.
struct value_error : std::invalid_argument {
  using std::invalid_argument::invalid_argument;
};

// Gradients asked for in a way that has no answer: backward() of a non-scalar without a
// cotangent, of a var that does not require gradients, or through a tape already consumed.
struct gradient_error : std::logic_error {
  using std::logic_error::logic_error;
};

// A CUDA runtime call that failed (kiln::cuda{} and kiln::cuda_tensor, in code compiled by nvcc):
// what() is "<api>: <cudaGetErrorString>", e.g. "cudaMalloc: out of memory"; api() names the call.
struct cuda_error : std::runtime_error {
  cuda_error(std::string const& api, std::string const& message)
      : std::runtime_error(api + ": " + message), api_(api) {}
  std::string const& api() const noexcept { return api_; }

 private:
  std::string api_;
};

}  // namespace kiln
