# Run by ctest for the compile-fail tests:
#   cmake -DKILN_CXX=<compiler> -DKILN_SOURCE=<file.cpp> -DKILN_EXPECT=pass|fail
#         [-DKILN_REGEX=<regex>] -P compile_check.cmake -- <compiler flags...>
cmake_minimum_required(VERSION 3.20)

set(flags)
set(after_separator OFF)
math(EXPR last_arg "${CMAKE_ARGC} - 1")
foreach(i RANGE ${last_arg})
  if(after_separator)
    list(APPEND flags "${CMAKE_ARGV${i}}")
  elseif("${CMAKE_ARGV${i}}" STREQUAL "--")
    set(after_separator ON)
  endif()
endforeach()

# Plain ASCII quotes in diagnostics whatever the caller's locale, so regexes stay simple.
set(ENV{LC_ALL} C)
execute_process(
  COMMAND "${KILN_CXX}" ${flags} "${KILN_SOURCE}"
  RESULT_VARIABLE result
  OUTPUT_VARIABLE output
  ERROR_VARIABLE output)

if(KILN_EXPECT STREQUAL "pass")
  if(NOT result EQUAL 0)
    message(FATAL_ERROR "${KILN_SOURCE} must compile without KILN_SHOULD_FAIL, but failed (${result}):\n${output}")
  endif()
elseif(KILN_EXPECT STREQUAL "fail")
  if(result EQUAL 0)
    message(FATAL_ERROR "${KILN_SOURCE} compiled with KILN_SHOULD_FAIL, but must not")
  endif()
  if(NOT output MATCHES "${KILN_REGEX}")
    message(FATAL_ERROR "${KILN_SOURCE} failed to compile as expected, but no diagnostic matched '${KILN_REGEX}':\n${output}")
  endif()
  message(STATUS "failed to compile as expected; diagnostic matched '${KILN_REGEX}'")
else()
  message(FATAL_ERROR "KILN_EXPECT must be 'pass' or 'fail', got '${KILN_EXPECT}'")
endif()
