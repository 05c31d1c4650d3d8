# cmake/install.cmake — `cmake --install build --prefix P` puts the engine where another project
# can use it, by CMake or by pkg-config (docs/YOUR_PROGRAM.md):
#   P/lib/libmoelab.a                          the engine (core, autograd, nn; CUDA when built)
#   P/include/moelab/{core,autograd,nn}/...    its headers, included as "nn/moe/moe_layer.h"
#   P/lib/cmake/moelab/                        find_package(moelab): the target moelab::moelab
#   P/lib/pkgconfig/moelab.pc                  pkg-config --cflags --libs moelab
# The target carries what the engine needs from its users' compilers: C++20, the include folder,
# the x86-64 level it was built for (moelab_arch: -march=x86-64-v3 by default), exact math
# (moelab_flags: EIGEN_FAST_MATH=0), OpenMP, Eigen, zlib, nlohmann_json, and with the CUDA backend
# MOELAB_HAVE_CUDA and the CUDA runtime. The experiment runner (tasks/) and the CLI are not
# installed: they are this repository's programs, not a library.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

target_compile_features(moelab INTERFACE cxx_std_20)
install(TARGETS moelab moelab_flags moelab_arch EXPORT moelabTargets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
        INCLUDES DESTINATION include/moelab)
install(DIRECTORY core autograd nn DESTINATION include/moelab FILES_MATCHING PATTERN "*.h")
install(EXPORT moelabTargets NAMESPACE moelab:: DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/moelab)
configure_package_config_file(cmake/moelabConfig.cmake.in ${CMAKE_CURRENT_BINARY_DIR}/moelabConfig.cmake
                              INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/moelab)
write_basic_package_version_file(${CMAKE_CURRENT_BINARY_DIR}/moelabConfigVersion.cmake VERSION 0.1.0
                                 COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/moelabConfig.cmake ${CMAKE_CURRENT_BINARY_DIR}/moelabConfigVersion.cmake
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/moelab)

# pkg-config: the same flags spelled out for a Makefile or a compiler line.
set(MOELAB_PC_CFLAGS "-std=c++20 -fopenmp -DEIGEN_FAST_MATH=0")
if(NOT MOELAB_NATIVE AND MOELAB_X86_64)
  string(APPEND MOELAB_PC_CFLAGS " -march=${MOELAB_BASE_ARCH} -mtune=generic")
elseif(MOELAB_NATIVE)
  string(APPEND MOELAB_PC_CFLAGS " -march=native")
endif()
set(MOELAB_PC_LIBS "-fopenmp")
if(MOELAB_HAVE_CUDA)
  string(APPEND MOELAB_PC_CFLAGS " -DMOELAB_HAVE_CUDA=1 -I${CUDAToolkit_INCLUDE_DIRS}")
  string(APPEND MOELAB_PC_LIBS " -L${CUDAToolkit_LIBRARY_DIR} -lcudart")
  foreach(lib ${CMAKE_DL_LIBS})
    string(APPEND MOELAB_PC_LIBS " -l${lib}")
  endforeach()
endif()
if(MOELAB_SANITIZE)  # a library built with the sanitizers needs their runtimes where it is linked
  string(APPEND MOELAB_PC_CFLAGS " -fsanitize=address,undefined")
  string(APPEND MOELAB_PC_LIBS " -fsanitize=address,undefined")
endif()
configure_file(cmake/moelab.pc.in ${CMAKE_CURRENT_BINARY_DIR}/moelab.pc @ONLY)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/moelab.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
