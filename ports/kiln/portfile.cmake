# An overlay port for the kiln tree it sits in:
#   vcpkg install kiln --overlay-ports=<kiln>/ports
# or, in a manifest-mode project, "kiln" in vcpkg.json's dependencies and this folder in
# vcpkg-configuration.json's "overlay-ports". A registry port of a release would fetch the sources
# with vcpkg_from_github (the release's REF and SHA512) instead of SOURCE_PATH below.
set(SOURCE_PATH "${CMAKE_CURRENT_LIST_DIR}/../..")
set(VCPKG_BUILD_TYPE release)  # header-only: one configuration is the package

vcpkg_cmake_configure(
    SOURCE_PATH "${SOURCE_PATH}"
    OPTIONS
        -DKILN_BUILD_TESTS=OFF
        -DKILN_BUILD_EXAMPLES=OFF
        -DKILN_BUILD_BENCH=OFF
        -DKILN_ENABLE_CUDA=OFF
)
vcpkg_cmake_install()
# kiln installs its config to lib/cmake/kiln; vcpkg keeps configs in share/kiln.
vcpkg_cmake_config_fixup(CONFIG_PATH lib/cmake/kiln)
file(REMOVE_RECURSE "${CURRENT_PACKAGES_DIR}/lib")
vcpkg_install_copyright(FILE_LIST "${SOURCE_PATH}/LICENSE")
