// kiln: lazy, fused tensor expressions. The one header to include.
#pragma once

#include <kiln/core/config.hpp>
#include <kiln/core/error.hpp>
#include <kiln/core/extents.hpp>
#include <kiln/core/dtype.hpp>
#include <kiln/core/policy.hpp>
#include <kiln/core/tensor.hpp>
#include <kiln/core/views.hpp>
#include <kiln/core/factories.hpp>

#include <kiln/expr/leaf.hpp>
#include <kiln/expr/map.hpp>
#include <kiln/ops/arithmetic.hpp>
#include <kiln/ops/transcendental.hpp>
#include <kiln/ops/activation.hpp>
#include <kiln/ops/rounding.hpp>
#include <kiln/ops/compare.hpp>
#include <kiln/expr/reduce.hpp>
#include <kiln/expr/scan.hpp>

#include <kiln/eval/assign.hpp>

#include <kiln/autodiff/var.hpp>
#include <kiln/autodiff/record.hpp>
#include <kiln/autodiff/functional.hpp>

#include <kiln/debug/print.hpp>

// The CUDA backend: the kiln::cuda tag everywhere (so that misusing it is a plain error), the
// kernels only where nvcc compiles the translation unit.
#include <kiln/cuda/policy.hpp>
#if defined(__CUDACC__)
#include <kiln/cuda/backward.hpp>
#endif
