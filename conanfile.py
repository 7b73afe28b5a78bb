# Conan 2 recipe: kiln is header-only; its one dependency is xsimd (OpenMP comes with the compiler).
#   conan create .                       # package it (and run test_package/)
#   requires: kiln/0.1.0                 # then, in a consumer: find_package(kiln CONFIG REQUIRED)
#                                        # and target_link_libraries(app PRIVATE kiln::kiln)
import os
import re

from conan import ConanFile
from conan.tools.build import check_min_cppstd
from conan.tools.files import copy, load
from conan.tools.layout import basic_layout


class KilnConan(ConanFile):
    name = "kiln"
    description = ("Header-only C++20 tensor library: elementwise expressions and reductions fused into one "
                   "loop (SIMD, multi-core, CUDA) with reverse-mode gradients")
    license = "MIT"
    topics = ("tensor", "simd", "autodiff", "expression-templates", "header-only")
    package_type = "header-library"
    settings = "os", "arch", "compiler", "build_type"
    # kiln::par runs on all cores through OpenMP; without it, par runs as kiln::simd.
    options = {"with_openmp": [True, False]}
    default_options = {"with_openmp": True}
    exports_sources = "include/*", "LICENSE"
    no_copy_source = True

    def set_version(self):
        cmake_lists = load(self, os.path.join(self.recipe_folder, "CMakeLists.txt"))
        self.version = re.search(r"project\(kiln VERSION ([0-9.]+)", cmake_lists).group(1)

    def config_options(self):
        if self.settings.compiler not in ("gcc", "clang", "intel-cc"):
            del self.options.with_openmp  # MSVC's OpenMP 2.0 and Apple Clang's missing one: none

    def layout(self):
        basic_layout(self, src_folder=".")

    def requirements(self):
        # xsimd 8.1 (Debian 12) through 14: kiln's one seam, core/simd.hpp, spells the renamed calls.
        self.requires("xsimd/[>=8.1 <15]")

    def package_id(self):
        self.info.clear()

    def validate(self):
        check_min_cppstd(self, 20)

    def package(self):
        copy(self, "LICENSE", self.source_folder, os.path.join(self.package_folder, "licenses"))
        copy(self, "*.hpp", os.path.join(self.source_folder, "include"), os.path.join(self.package_folder, "include"))

    def package_info(self):
        self.cpp_info.set_property("cmake_file_name", "kiln")
        self.cpp_info.set_property("cmake_target_name", "kiln::kiln")
        self.cpp_info.bindirs = []
        self.cpp_info.libdirs = []
        self.cpp_info.requires = ["xsimd::xsimd"]
        if self.options.get_safe("with_openmp"):
            self.cpp_info.cxxflags = ["-fopenmp"]
            self.cpp_info.sharedlinkflags = ["-fopenmp"]
            self.cpp_info.exelinkflags = ["-fopenmp"]
