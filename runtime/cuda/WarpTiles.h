//===- WarpTiles.h - a warp's matrix tiles in registers ---------*- C++ -*-===//
//
// Private to runtime/cuda. The tiles of tensor cores' mma.sync
// m16n8k16 (float accumulation of 16-bit products), held in registers in
// the layouts the PTX ISA documents, so a kernel can work on a product's
// elements where they lie (the online softmax of FlashAttention-2) and feed
// an accumulator straight back as the next product's operand. Lane l of a
// warp, with g = l / 4 and q = l % 4, holds:
//  - Acc16x8 (16 x 8 float): v[r] at row g + 8 (r / 2), column 2q + r % 2;
//  - A16x16 (16 x 16, 16-bit): v[r] the pair at row g + 8 (r % 2), columns
//    2q + 8 (r / 2) + {0, 1} (low half first);
//  - B16x8 (16 x 8, k x n, 16-bit): v[r] the pair at rows 2q + 8r + {0, 1},
//    column g.
// Written once for both builds of Device.h: on the device a thread holds its
// own lane's registers; in the host emulation one thread runs a whole warp
// and holds all 32 lanes' (kHeldLanes), the product is a loop over those
// layouts and a quad's reduction (the 4 lanes that share a row) adds in
// the order the shuffles do.
//
//===----------------------------------------------------------------------===//

#ifndef PPC_RUNTIME_CUDA_WARPTILES_H
#define PPC_RUNTIME_CUDA_WARPTILES_H

#include "Blocks.h"

#include <cstdint>
#include <cstring>

namespace ppc::runtime::cuda {

/// Lanes of a warp whose registers one thread holds, and warps of a block
/// one thread runs.
#if defined(__CUDA_ARCH__)
constexpr int kHeldLanes = 1;
#else
constexpr int kHeldLanes = 32;
#endif

/// The lane whose registers are held at `h`.
PPC_HD inline int heldLane(const BlockThreads &t, int h) {
#if defined(__CUDA_ARCH__)
  (void)h;
  return t.lane;
#else
  (void)t;
  return h;
#endif
}

/// Row and column of an accumulator's register r in lane l.
PPC_HD inline int accRow(int lane, int r) { return lane / 4 + 8 * (r / 2); }
PPC_HD inline int accCol(int lane, int r) { return 2 * (lane % 4) + r % 2; }

struct Acc16x8 {
  float v[kHeldLanes][4];
};
struct A16x16 {
  uint32_t v[kHeldLanes][4];
};
struct B16x8 {
  uint32_t v[kHeldLanes][2];
};

/// The 16-bit storage of `value`: bf16 or, else, f16.
template <bool kBf16> PPC_HD inline uint16_t halfBits(float value) {
  return kBf16 ? floatToBFloat16(value) : floatToHalf(value);
}
template <bool kBf16> PPC_HD inline float halfValue(uint16_t bits) {
  return kBf16 ? bfloat16ToFloat(bits) : halfToFloat(bits);
}

PPC_HD inline void zero(Acc16x8 &c) {
  PPC_UNROLL
  for (int h = 0; h < kHeldLanes; ++h)
    PPC_UNROLL
  for (int r = 0; r < 4; ++r)
    c.v[h][r] = 0.0f;
}

/// Two 16-bit values at `p` (4-byte aligned) as one register.
PPC_HD inline uint32_t loadPair(const uint16_t *p) {
  return *reinterpret_cast<const uint32_t *>(p);
}
PPC_HD inline uint32_t pack(uint16_t low, uint16_t high) {
  return uint32_t(low) | (uint32_t(high) << 16);
}

/// A = tile[row0 .., col0 ..] of a row-major 16-bit tile with leading
/// dimension ld (even; col0 even).
PPC_HD inline void loadA(const BlockThreads &t, A16x16 &a, const uint16_t *tile,
                         int ld, int row0, int col0) {
  PPC_UNROLL
  for (int h = 0; h < kHeldLanes; ++h) {
    const int l = heldLane(t, h);
    PPC_UNROLL
    for (int r = 0; r < 4; ++r)
      a.v[h][r] = loadPair(tile + (row0 + l / 4 + 8 * (r % 2)) * ld + col0 +
                           2 * (l % 4) + 8 * (r / 2));
  }
}

/// B(k, n) = tile[(n0 + n) * ld + k0 + k]: the tile's rows are B's columns
/// (the keys of a score product Q K^T).
PPC_HD inline void loadBFromRows(const BlockThreads &t, B16x8 &b,
                                 const uint16_t *tile, int ld, int n0, int k0) {
  PPC_UNROLL
  for (int h = 0; h < kHeldLanes; ++h) {
    const int l = heldLane(t, h);
    PPC_UNROLL
    for (int r = 0; r < 2; ++r)
      b.v[h][r] = loadPair(tile + (n0 + l / 4) * ld + k0 + 2 * (l % 4) + 8 * r);
  }
}

/// B(k, n) = tile[(k0 + k) * ld + n0 + n]: the tile's rows are B's rows
/// (the values of P V).
PPC_HD inline void loadBFromCols(const BlockThreads &t, B16x8 &b,
                                 const uint16_t *tile, int ld, int k0, int n0) {
  PPC_UNROLL
  for (int h = 0; h < kHeldLanes; ++h) {
    const int l = heldLane(t, h);
    PPC_UNROLL
    for (int r = 0; r < 2; ++r) {
      const uint16_t *p = tile + (k0 + 2 * (l % 4) + 8 * r) * ld + n0 + l / 4;
      b.v[h][r] = pack(p[0], p[ld]);
    }
  }
}

/// A = [left right] rounded to 16 bits: two accumulators side by side (16 x
/// 16) as the next product's left operand, without leaving the registers.
template <bool kBf16>
PPC_HD inline void toA(A16x16 &a, const Acc16x8 &left, const Acc16x8 &right) {
  PPC_UNROLL
  for (int h = 0; h < kHeldLanes; ++h) {
    a.v[h][0] =
        pack(halfBits<kBf16>(left.v[h][0]), halfBits<kBf16>(left.v[h][1]));
    a.v[h][1] =
        pack(halfBits<kBf16>(left.v[h][2]), halfBits<kBf16>(left.v[h][3]));
    a.v[h][2] =
        pack(halfBits<kBf16>(right.v[h][0]), halfBits<kBf16>(right.v[h][1]));
    a.v[h][3] =
        pack(halfBits<kBf16>(right.v[h][2]), halfBits<kBf16>(right.v[h][3]));
  }
}

/// c += a b on tensor cores, float accumulation.
template <bool kBf16>
PPC_HD inline void mma(Acc16x8 &c, const A16x16 &a, const B16x8 &b) {
#if defined(__CUDA_ARCH__)
#if __CUDA_ARCH__ >= 800
  float *d = c.v[0];
  const uint32_t *x = a.v[0], *y = b.v[0];
  if (kBf16)
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
                 "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
                 "{%0, %1, %2, %3};\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(x[0]), "r"(x[1]), "r"(x[2]), "r"(x[3]), "r"(y[0]),
                   "r"(y[1]));
  else
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
                 "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
                 "{%0, %1, %2, %3};\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(x[0]), "r"(x[1]), "r"(x[2]), "r"(x[3]), "r"(y[0]),
                   "r"(y[1]));
#else
  __trap(); // flashAttentionFits refuses devices before compute 8.0
#endif
#else
  // The same product over the documented layouts.
  auto half = [](uint32_t pair, int k) {
    return halfValue<kBf16>(static_cast<uint16_t>(k % 2 ? pair >> 16 : pair));
  };
  float out[32][4];
  for (int l = 0; l < 32; ++l)
    PPC_UNROLL
  for (int r = 0; r < 4; ++r) {
    const int row = accRow(l, r), col = accCol(l, r);
    float sum = c.v[l][r];
    for (int k = 0; k < 16; ++k) {
      const float av =
          half(a.v[(row % 8) * 4 + (k % 8) / 2][row / 8 + 2 * (k / 8)], k);
      const float bv = half(b.v[col * 4 + (k % 8) / 2][k / 8], k);
      sum += av * bv;
    }
    out[l][r] = sum;
  }
  std::memcpy(c.v, out, sizeof(out));
#endif
}

/// Each held lane's two row values (rows g and g + 8) reduced over the
/// quad of lanes that hold the same rows: all four get op(op(v0, v1),
/// op(v2, v3)).
template <typename Op>
PPC_HD inline void quadReduce(float (&v)[kHeldLanes][2], Op op) {
#if defined(__CUDA_ARCH__)
  for (int s = 0; s < 2; ++s) {
    v[0][s] = op(v[0][s], __shfl_xor_sync(0xffffffffu, v[0][s], 1));
    v[0][s] = op(v[0][s], __shfl_xor_sync(0xffffffffu, v[0][s], 2));
  }
#else
  for (int quad = 0; quad < 8; ++quad)
    for (int s = 0; s < 2; ++s) {
      float(*q)[2] = v + 4 * quad;
      const float all = op(op(q[0][s], q[1][s]), op(q[2][s], q[3][s]));
      for (int i = 0; i < 4; ++i)
        q[i][s] = all;
    }
#endif
}

} // namespace ppc::runtime::cuda

#endif // PPC_RUNTIME_CUDA_WARPTILES_H
