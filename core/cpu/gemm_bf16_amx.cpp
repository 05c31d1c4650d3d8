// core/cpu/gemm_bf16_amx.cpp — the bf16 GEMM's 32 x 32 block on AMX tiles (TDPBF16PS).
//
// Compiled with -mamx-tile -mamx-bf16 (CMakeLists.txt) and only called where the CPU has AMX-BF16
// and Linux granted the process the tiles (cpu_has_amx_bf16, core/cpu/gemm_bf16.cpp). AMX has
// eight tile registers, each up to 16 rows of 64 bytes, set up by LDTILECFG from a 64-byte table
// (palette 1: bytes 16.. give each tile's row width in bytes, bytes 48.. its rows). Here every tile
// is 16 x 64 bytes: a C tile is 16 x 16 float32, an A tile 16 rows of 16 bf16 pairs, a B tile 16
// pairs of 16 columns (the same words as the VDPBF16PS kernel's B panel: a column's pair q in one
// 32-bit word, element 2q in the low half). TDPBF16PS C, A, B adds A @ B to C: 16 x 16 x 32
// multiply-adds.
//
// A block of C is 2 x 2 tiles (32 rows, 32 columns: one B panel of NR = 32, its two halves 64 bytes
// apart in each 128-byte row): for each chunk of 16 pairs, two A tiles and two B tiles are loaded
// and four TDPBF16PS run, so each loaded tile feeds two instructions. The four C tiles stay in
// registers over all of the block's pairs and are loaded from C (or zeroed) and stored once.
// A panel of 16 rows or fewer (the last of an expert's rows, often) takes the block's top half
// alone: tiles 0 and 1 get the same instructions in the same order, so the same bits, at half the
// work.
#include <immintrin.h>

#include <cstdint>

#include "core/cpu/gemm_bf16.h"

namespace moelab::cpu::gemm_bf16_detail {
namespace {

struct alignas(64) TileConfig {
  std::uint8_t palette = 1, start_row = 0;
  std::uint8_t reserved[14] = {};
  std::uint16_t bytes_per_row[16] = {};
  std::uint8_t rows[16] = {};
};

const TileConfig& all_tiles_16x64() {
  static const TileConfig config = [] {
    TileConfig c;
    for (int t = 0; t < 8; ++t) c.bytes_per_row[t] = 64, c.rows[t] = 16;
    return c;
  }();
  return config;
}

}  // namespace

// LDTILECFG is slow (it also zeroes every tile): once per product it took 1.6% of a bf16 64-expert
// step, whose 64 experts make some 1,500 products a step. So a thread configures its tiles at its
// first product and keeps them: nothing else in moelab touches the tiles, and the cost of keeping
// them is the OS saving their 8 KiB when it switches the thread out. (Code that ran other AMX
// work on the same thread and changed the configuration would have to call amx_tiles_end after.)
thread_local bool tiles_configured = false;

void amx_tiles_begin() {
  if (tiles_configured) return;
  _tile_loadconfig(&all_tiles_16x64());
  tiles_configured = true;
}

void amx_tiles_end() {
  _tile_release();
  tiles_configured = false;
}

void amx_bf16_block(std::int64_t chunks, const void* a, std::int64_t a_stride, const std::uint32_t* b_panel, float* c,
                    std::int64_t ldc, bool accumulate) {
  const std::int64_t c_stride = ldc * static_cast<std::int64_t>(sizeof(float));
  float* const c_low = c + 16 * ldc;  // rows 16..31
  if (accumulate) {
    _tile_loadd(0, c, c_stride);
    _tile_loadd(1, c + 16, c_stride);
    _tile_loadd(2, c_low, c_stride);
    _tile_loadd(3, c_low + 16, c_stride);
  } else {
    _tile_zero(0);
    _tile_zero(1);
    _tile_zero(2);
    _tile_zero(3);
  }
  const auto* a_top = static_cast<const char*>(a);
  const char* a_bottom = a_top + 16 * a_stride;
  constexpr std::int64_t b_stride = NR * sizeof(std::uint32_t);  // 128 bytes: a pair's 32 columns
  for (std::int64_t chunk = 0; chunk < chunks; ++chunk) {
    const std::int64_t a_at = chunk * AMX_PAIRS * static_cast<std::int64_t>(sizeof(std::uint32_t));
    const std::uint32_t* b = b_panel + chunk * AMX_PAIRS * NR;
    _tile_loadd(4, a_top + a_at, a_stride);
    _tile_loadd(5, a_bottom + a_at, a_stride);
    _tile_loadd(6, b, b_stride);
    _tile_loadd(7, b + 16, b_stride);
    _tile_dpbf16ps(0, 4, 6);
    _tile_dpbf16ps(1, 4, 7);
    _tile_dpbf16ps(2, 5, 6);
    _tile_dpbf16ps(3, 5, 7);
  }
  _tile_stored(0, c, c_stride);
  _tile_stored(1, c + 16, c_stride);
  _tile_stored(2, c_low, c_stride);
  _tile_stored(3, c_low + 16, c_stride);
}

void amx_bf16_block_top(std::int64_t chunks, const void* a, std::int64_t a_stride, const std::uint32_t* b_panel, float* c,
                        std::int64_t ldc, bool accumulate) {
  const std::int64_t c_stride = ldc * static_cast<std::int64_t>(sizeof(float));
  if (accumulate) {
    _tile_loadd(0, c, c_stride);
    _tile_loadd(1, c + 16, c_stride);
  } else {
    _tile_zero(0);
    _tile_zero(1);
  }
  const auto* a_top = static_cast<const char*>(a);
  constexpr std::int64_t b_stride = NR * sizeof(std::uint32_t);
  for (std::int64_t chunk = 0; chunk < chunks; ++chunk) {
    const std::uint32_t* b = b_panel + chunk * AMX_PAIRS * NR;
    _tile_loadd(4, a_top + chunk * AMX_PAIRS * static_cast<std::int64_t>(sizeof(std::uint32_t)), a_stride);
    _tile_loadd(6, b, b_stride);
    _tile_loadd(7, b + 16, b_stride);
    _tile_dpbf16ps(0, 4, 6);
    _tile_dpbf16ps(1, 4, 7);
  }
  _tile_stored(0, c, c_stride);
  _tile_stored(1, c + 16, c_stride);
}

}  // namespace moelab::cpu::gemm_bf16_detail
