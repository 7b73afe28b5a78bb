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
    set(sanitize_flags -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer)
    target_compile_options(${target} PRIVATE ${sanitize_flags})
    target_link_options(${target} PRIVATE ${sanitize_flags})
  endif()
endfunction()
