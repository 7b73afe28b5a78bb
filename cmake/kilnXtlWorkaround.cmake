# Debian's libxsimd-dev 8.1 exports the `xsimd` target with INTERFACE_LINK_LIBRARIES "xtl"
# but its config never looks xtl up, so every consumer ends up linking a bogus -lxtl.
# kiln doesn't use xsimd's optional xtl complex support: use the real xtl target if it is
# installed, otherwise an empty stand-in. Used by the build and by the installed kilnConfig.
if(TARGET xsimd AND NOT TARGET xtl)
  get_target_property(_kiln_xsimd_links xsimd INTERFACE_LINK_LIBRARIES)
  if("xtl" IN_LIST _kiln_xsimd_links)
    find_package(xtl QUIET CONFIG)
    if(NOT TARGET xtl)
      add_library(xtl INTERFACE IMPORTED)
    endif()
  endif()
  unset(_kiln_xsimd_links)
endif()
