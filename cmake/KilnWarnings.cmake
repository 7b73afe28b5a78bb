include_guard(GLOBAL)
include(CheckCXXCompilerFlag)

if(KILN_NATIVE)
  check_cxx_compiler_flag(-march=native KILN_HAVE_MARCH_NATIVE)
endif()

if(KILN_SANITIZE AND NOT CMAKE_CXX_COMPILER_ID MATCHES "GNU|Clang")
  message(FATAL_ERROR "KILN_SANITIZE needs GCC or Clang (compiler is ${CMAKE_CXX_COMPILER_ID})")
endif()

# kiln_target_flags(<target> [NO_SANITIZE])
#
# Warnings-as-errors, KILN_NATIVE and KILN_SANITIZE for kiln's own tests, examples and
# benchmarks. Deliberately never applied to the kiln target, so none of it reaches consumers.
function(kiln_target_flags target)
  cmake_parse_arguments(PARSE_ARGV 1 arg "NO_SANITIZE" "" "")

  if(CMAKE_CXX_COMPILER_ID MATCHES "GNU|Clang")
    target_compile_options(${target} PRIVATE -Wall -Wextra -Wpedantic -Werror)
  endif()

  if(KILN_NATIVE AND KILN_HAVE_MARCH_NATIVE)
    target_compile_options(${target} PRIVATE -march=native)
  endif()

  if(KILN_SANITIZE AND NOT arg_NO_SANITIZE)
    # UBSan's alignment check is left out: it doubled the sanitizer build's compile time (a check
    # on every reference bound in the tests' unoptimised templates) and has nothing to find in
    # kiln, whose scalar accesses go through pointers of the element type and whose vector loads
    # and stores are intrinsics the check does not see (a misaligned aligned load faults, and ASan
    # reports the fault). float-cast-overflow, which GCC leaves out of `undefined`, stays off too:
    # xsimd 8.1's SSE2 batch_cast from double to int64 (inside its exp) converts NaN and inf
    # element by element. kiln's own conversions are defined (detail::convert).
    set(sanitize_flags -fsanitize=address,undefined -fno-sanitize=alignment -fno-sanitize-recover=all
                       -fno-omit-frame-pointer)
    target_compile_options(${target} PRIVATE ${sanitize_flags})
    target_link_options(${target} PRIVATE ${sanitize_flags})
  endif()
endfunction()

# kiln_cuda_target_flags(<target>)
#
# The same for kiln's CUDA tests and benchmarks (.cu files): C++20, warnings as errors from nvcc's
# front end and from the host compiler. -Wpedantic stays off: the host compiler sees nvcc's
# generated code, which uses GCC extensions. No sanitizers (the sanitizer build has CUDA off).
function(kiln_cuda_target_flags target)
  # -std=c++20 by hand: CMake before 3.26 has no CUDA20 dialect flag for nvcc.
  target_compile_options(${target} PRIVATE $<$<COMPILE_LANGUAGE:CUDA>:-std=c++20 --Werror=all-warnings>)
  if(CMAKE_CXX_COMPILER_ID MATCHES "GNU|Clang")
    target_compile_options(${target} PRIVATE $<$<COMPILE_LANGUAGE:CUDA>:-Xcompiler=-Wall,-Wextra,-Werror>)
  endif()
endfunction()
