#!/usr/bin/env bash
# Packages kiln with Conan 2 (conanfile.py) and builds and runs test_package/ against the package,
# offline: xsimd is the system's (a [platform_requires] entry) rather than ConanCenter's. Works on
# a copy of the tree in a temporary directory, with a Conan home of its own there, since Conan
# writes into test_package/. Needs `conan` (pip install conan); ctest runs it where conan is found.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export CONAN_HOME="$work/conan-home"

src="$work/kiln"
mkdir -p "$src/tests"
cp -r "$root/conanfile.py" "$root/CMakeLists.txt" "$root/LICENSE" "$root/include" "$root/test_package" "$src/"
cp -r "$root/tests/consumer" "$src/tests/"

xsimd_config=$(echo '#include <xsimd/config/xsimd_config.hpp>' | ${CXX:-c++} -E -x c++ - |
  awk -F'"' '/xsimd_config.hpp"/ && !found { print $2; found = 1 }')
# (xsimd 8.1 defines no XSIMD_VERSION_PATCH.)
version() { awk -v name="XSIMD_VERSION_$1" '$1 == "#define" && $2 == name { print $3 }' "$xsimd_config"; }
xsimd_version="$(version MAJOR).$(version MINOR).$(version PATCH)"
xsimd_version=${xsimd_version%.}
[[ $xsimd_version == *.*.* ]] || xsimd_version+=.0

conan profile detect >/dev/null 2>&1  # the default profile, the build profile too
cat >"$work/profile" <<PROFILE
include(default)
[settings]
compiler.cppstd=20
[platform_requires]
xsimd/$xsimd_version
PROFILE
conan create "$src" --profile:all "$work/profile"
