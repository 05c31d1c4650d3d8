# cmake/precompiled_headers.cmake — precompiled standard and third-party headers: build time only.
#
# A 2-core ./test.sh compiles about 350 files. Much of each file's time goes to parsing the same
# library headers again: <memory> and <filesystem> take about a second each at -O1, nlohmann/json
# about 4 s (every runner/ header includes it, so every experiment and most tests pay it), CLI11
# about 8 s. Here each group of targets parses them once, into a precompiled header (GCC's .gch,
# via CMake's target_precompile_headers), and every file of the group starts from it.
#
# Groups: one per set of compile flags, since a precompiled header is valid only with the flags
# it was made with (CMake's REUSE_FROM shares one between targets whose flags are the same):
#   engine     the engine's portable objects (core/, autograd/, nn/): the standard headers
#   runner     runner/ and tasks/: the standard headers and nlohmann/json
#   tests      every test (compiled at -O1, see moelab_test_flags): the standard headers,
#              nlohmann/json and doctest
#   programs   examples/ and bench/ (compiled at -O1): the standard headers, nlohmann/json and
#              CLI11; not fma_peak and gemm_bench, whose timed loops keep -O3 (CMakeLists.txt)
# Left out on purpose:
#   - core/cpu/ (moelab_cpu_objects, moelab_alt_cpu_objects) and every file with its own compile
#     options (-ffp-contract=off, -mavx512f, ...): the files whose instruction set and rounding
#     decide result bits keep the plain build, where nothing but their own flags can be in play.
#   - cuda/ (nvcc has no use for GCC's precompiled headers).
# Only library headers are precompiled, never the project's own: a precompiled header is in every
# file of its group, so a file that forgets `#include <vector>` still compiles here; one that
# forgot a project header would hide a layering mistake (tests/layering_check.sh reads the
# #include lines, which are unchanged), and that stays impossible. What the precompiled headers
# change in the objects is said below (MOELAB_PCH_WARNINGS); a recorded run still reproduces bit
# for bit (tests/reproduce_check.sh).
# -DMOELAB_PRECOMPILED_HEADERS=OFF builds without them (e.g. to check that every file includes what
# it uses).
option(MOELAB_PRECOMPILED_HEADERS "Precompile the standard and third-party headers (build time only)" ON)

set(MOELAB_PCH_STANDARD <algorithm> <cmath> <cstdint> <cstdio> <cstdlib> <cstring> <filesystem> <fstream>
    <functional> <limits> <map> <memory> <optional> <set> <sstream> <string> <utility> <vector>)

# GCC before 13 does not keep `#pragma GCC diagnostic` in a precompiled header (GCC bug 64117).
# libstdc++ 12's char_traits.h silences three false positives of its own memcpy calls that way
# (-Wstringop-overflow, -Wstringop-overread, -Warray-bounds: "a bound of 2^63 bytes"), so with a
# precompiled header they surface in every file that copies a string. The same three are
# silenced here, for the precompiled targets only.
# What changes in the objects: the order in which GCC meets the declarations, so some inlining
# and cloning choices for non-arithmetic code (string and container helpers) and the layout. The
# floating-point instructions of every object file are the same with and without (counted per
# file with objdump: every add, mul, div, sqrt, min, max and FMA), and the engine's files whose
# rounding is pinned by flags are not precompiled at all (above).
set(MOELAB_PCH_WARNINGS "")
if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU" AND CMAKE_CXX_COMPILER_VERSION VERSION_LESS 13)
  set(MOELAB_PCH_WARNINGS -Wno-stringop-overflow -Wno-stringop-overread -Wno-array-bounds)
endif()

# moelab_precompile(OWNER HEADERS...): OWNER (a target of C++ files only) makes the group's
# precompiled header from HEADERS.
function(moelab_precompile owner)
  if(MOELAB_PRECOMPILED_HEADERS)
    target_precompile_headers(${owner} PRIVATE ${ARGN})
    target_compile_options(${owner} PRIVATE ${MOELAB_PCH_WARNINGS})
  endif()
endfunction()

# moelab_reuse_precompiled(TARGET OWNER): TARGET's files start from OWNER's precompiled header
# (and MOELAB_PCH_WARNINGS: its files lose the same pragmas).
function(moelab_reuse_precompiled target owner)
  if(MOELAB_PRECOMPILED_HEADERS)
    target_precompile_headers(${target} REUSE_FROM ${owner})
    target_compile_options(${target} PRIVATE ${MOELAB_PCH_WARNINGS})
  endif()
endfunction()
