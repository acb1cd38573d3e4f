# cmake/kolo_package.cmake - how another project finds and links kolo.
#
# `cmake --install BUILD [--prefix P] [--component C]` puts, per component:
#   kolo        lib/libkolo.so.1 -> libkolo.so.1.A.B (what programs load)
#   kolo-dev    include/kolo.h, kolo_fusion.h; lib/libkolo.so;
#               lib/libkolo_static.a; lib/pkgconfig/kolo.pc, kolo_static.pc;
#               lib/cmake/kolo/ (find_package(kolo): kolo::kolo,
#               kolo::kolo_static)
#   kolo-tools  bin/kolo-perf, kolo-memcpy-bw, kolo-mpi-ref (where built),
#               share/kolo/models (kolo-perf overlap's model files)
# A build on kolo's CPU model of the GPU (-DKOLO_CUDA=SIM) installs nothing:
# its libkolo.so would run CUDA on a test double (cudasim/).
#
# Another shared library of kolo's (the NCCL layer's libnccl.so.2) joins
# with kolo_export_only_api() and kolo_install_library() under components
# of its own; find_package(kolo) then gives kolo::<its target> too.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

set(KOLO_CMAKE_INSTALL_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/kolo)
if(KOLO_CUDA_SIM)
  install(CODE "message(FATAL_ERROR \"this build runs CUDA on kolo's CPU model of the GPU \
(-DKOLO_CUDA=SIM), a test double: install from a build with -DKOLO_CUDA=AUTO, ON or OFF\")")
endif()

# kolo_export_only_api(<target> <map> [<object libraries>...]): a shared
# library that exports exactly what its public headers declare: its sources
# and the OBJECT libraries it is made of compiled with hidden visibility,
# the headers' declarations marked "#pragma GCC visibility push(default)",
# and `map`, an ld version script, giving the exports their version node
# and hiding every other symbol that reaches the link (static libraries').
# tests/check_exports.sh checks the result.
function(kolo_export_only_api target map)
  set_target_properties(${target} ${ARGN} PROPERTIES C_VISIBILITY_PRESET hidden CXX_VISIBILITY_PRESET hidden
                        CUDA_VISIBILITY_PRESET hidden VISIBILITY_INLINES_HIDDEN ON)
  target_link_options(${target} PRIVATE "LINKER:--version-script=${map}")
  set_property(TARGET ${target} APPEND PROPERTY LINK_DEPENDS ${map})
endfunction()

# kolo_install_library(<target> COMPONENT <c> HEADERS <files...>): installs
# a shared library of kolo's, its SONAME link in component <c>, its
# development link and headers in <c>-dev, and its imported target
# kolo::<target> for find_package(kolo) (a targets file of its own, so that
# a prefix holding only some of kolo's libraries still loads).
function(kolo_install_library target)
  cmake_parse_arguments(arg "" "COMPONENT" "HEADERS" ${ARGN})
  if(KOLO_CUDA_SIM)
    return()
  endif()
  if(NOT arg_COMPONENT OR NOT arg_HEADERS)
    message(FATAL_ERROR "kolo_install_library(${target}): give COMPONENT and HEADERS")
  endif()
  install(TARGETS ${target} EXPORT kolo-${target}-targets
          LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT ${arg_COMPONENT}
                  NAMELINK_COMPONENT ${arg_COMPONENT}-dev
          INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
  install(FILES ${arg_HEADERS} DESTINATION ${CMAKE_INSTALL_INCLUDEDIR} COMPONENT ${arg_COMPONENT}-dev)
  install(EXPORT kolo-${target}-targets NAMESPACE kolo:: DESTINATION ${KOLO_CMAKE_INSTALL_DIR}
          COMPONENT ${arg_COMPONENT}-dev)
endfunction()

# libkolo_static.a and kolo::kolo_static, whose users also link its
# dependencies: the config file finds them (CUDAToolkit, Threads) before
# it loads the target.
function(kolo_install_kolo_static)
  if(KOLO_CUDA_SIM)
    return()
  endif()
  install(TARGETS kolo_static EXPORT kolo-kolo_static-targets
          ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT kolo-dev
          INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
  install(EXPORT kolo-kolo_static-targets NAMESPACE kolo:: DESTINATION ${KOLO_CMAKE_INSTALL_DIR}
          COMPONENT kolo-dev)
endfunction()

# The tools among `ARGN` that this build has, kolo-perf's model files and its plotter.
function(kolo_install_tools)
  if(KOLO_CUDA_SIM)
    return()
  endif()
  foreach(tool ${ARGN})
    if(TARGET ${tool})
      install(TARGETS ${tool} RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT kolo-tools)
    endif()
  endforeach()
  install(DIRECTORY ${CMAKE_SOURCE_DIR}/perf/models/ DESTINATION ${CMAKE_INSTALL_DATADIR}/kolo/models
          COMPONENT kolo-tools)
  install(PROGRAMS ${CMAKE_SOURCE_DIR}/perf/plot.py DESTINATION ${CMAKE_INSTALL_DATADIR}/kolo COMPONENT kolo-tools)
endfunction()

# koloConfig.cmake + its version file, kolo.pc and kolo_static.pc.
function(kolo_install_package)
  if(KOLO_CUDA_SIM)
    return()
  endif()
  set(dir ${CMAKE_BINARY_DIR}/package)
  # 0.x: a minor release may change the API; from 1.0 only a major one.
  if(PROJECT_VERSION_MAJOR EQUAL 0)
    set(compat SameMinorVersion)
  else()
    set(compat SameMajorVersion)
  endif()
  configure_package_config_file(${CMAKE_SOURCE_DIR}/cmake/koloConfig.cmake.in ${dir}/koloConfig.cmake
                                INSTALL_DESTINATION ${KOLO_CMAKE_INSTALL_DIR})
  write_basic_package_version_file(${dir}/koloConfigVersion.cmake COMPATIBILITY ${compat})
  install(FILES ${dir}/koloConfig.cmake ${dir}/koloConfigVersion.cmake
          DESTINATION ${KOLO_CMAKE_INSTALL_DIR} COMPONENT kolo-dev)

  # pkg-config: the prefix is found from the .pc file's own place, so that
  # `cmake --install --prefix` anywhere (and moving the tree) keeps it right.
  file(RELATIVE_PATH up /${CMAKE_INSTALL_LIBDIR}/pkgconfig /)
  set(KOLO_PC_PREFIX "\${pcfiledir}/${up}")
  string(REGEX REPLACE "/$" "" KOLO_PC_PREFIX "${KOLO_PC_PREFIX}")
  # What linking libkolo_static.a takes besides (kolo.pc's *.private: the
  # same for a static link of libkolo).
  set(KOLO_PC_LIBS "-lpthread -lrt -lm")
  if(KOLO_HAVE_IBVERBS)
    # Not "Requires.private: libibverbs": its .pc lists every verbs provider
    # for a fully static link, which a link of kolo's archive is not.
    set(KOLO_PC_LIBS "-libverbs ${KOLO_PC_LIBS}")
  endif()
  if(KOLO_HAVE_PMIX)
    set(KOLO_PC_LIBS "${KOLO_PMIX_PC_LINK_LIBRARIES} ${KOLO_PC_LIBS}")
  endif()
  if(KOLO_HAVE_CUDA)
    # cudart_static's own needs (-ldl -lrt -lpthread), and the C++ runtime
    # of the nvcc-compiled host code (guards of function-local statics).
    set(KOLO_PC_LIBS "-L${CUDAToolkit_LIBRARY_DIR} -lcudart_static -ldl ${KOLO_PC_LIBS} -lstdc++")
  endif()
  foreach(pc kolo kolo_static)
    configure_file(${CMAKE_SOURCE_DIR}/cmake/${pc}.pc.in ${dir}/${pc}.pc @ONLY)
    install(FILES ${dir}/${pc}.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig COMPONENT kolo-dev)
  endforeach()
endfunction()
