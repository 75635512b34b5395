//===- FlashAttention.cu - ppc.attention without a score matrix -----------===//
//
// See FlashAttention.h. One block of 4 warps per tile of 64 query rows (the
// forward, the row statistics and the dQ pass, looping over tiles of 64
// keys) or of 64 keys (the dK/dV pass, looping over tiles of 64 query
// rows); warp w takes the tile's rows (keys) 16w..16w+15. Shared memory
// holds the 16-bit tiles of the operands only, each row padded by 8 values
// so a warp's loads fall in distinct banks; scores, probabilities and the
// accumulated results stay in registers (WarpTiles.h): a warp's scores
// against a tile are 8 accumulator tiles of 16 x 8, whose rows the lanes of
// a quad share for the row maximum and sum, and which become the next
// product's left operand as they are (P V, dS K, P^T dO, dS^T Q). The kernels
// are compiled per head-dim bound (16, 32, 64, 128: the arrays of registers
// need their sizes at compile time) and 16-bit type; a head dim between two
// bounds reads zeros past its columns.
//
//===----------------------------------------------------------------------===//

#include "FlashAttention.h"

#include "WarpTiles.h"

#include "ppc/Runtime/Boxes.h"

#include <algorithm>
#include <cmath>

namespace ppc::runtime::cuda {

namespace {

constexpr int kTile = 64; ///< query rows and keys per tile
constexpr int kWarps = 4; ///< warps per block, 16 rows (keys) each
constexpr int kThreads = 32 * kWarps;
constexpr int kMaxHeadDim = 128;
constexpr int kPad = 8;                ///< 16-bit values after each row
constexpr int kTileFrags = kTile / 8;  ///< accumulator tiles across a tile
constexpr int kTileSteps = kTile / 16; ///< product steps across a tile
constexpr float kLog2e = 1.4426950408889634f;

/// Warps of a block one thread runs: its own on the device; all in the
/// emulation, where a block has one thread.
#if defined(__CUDA_ARCH__)
constexpr int kHeldWarps = 1;
#else
constexpr int kHeldWarps = kWarps;
#endif

/// Where a view holds element (batch n, row, col) of its tensor: base +
/// the batch index's offsets (FlashShape::batchOffset) + (row - rowLo) *
/// ld + col. `aligned`: every row starts on 16 bytes (rows load 8 values at
/// a time).
struct ViewMap {
  int64_t base = 0;
  int64_t batchStride[kMaxRank] = {};
  int64_t rowLo = 0;
  int64_t ld = 0;
  bool aligned = false;
};

/// A partition as the kernels read it (by value).
struct FlashShape {
  int32_t batchRank = 0;
  int64_t batchLo[kMaxRank] = {}, batchExtent[kMaxRank] = {};
  int64_t batchShape[kMaxRank] = {};
  int64_t batches = 1;
  int64_t rowLo = 0, rowHi = 0; ///< the partition's query rows
  int64_t S = 0, T = 0;
  int32_t D = 0;
  float scale = 1;
  bool causal = false, dropout = false;
  /// Pairs of the zigzag order the positions are stored in (0: natural).
  int64_t zigzag = 0;
  DropoutMask mask{0, 0, 0.0};

  PPC_HD int64_t rows() const { return rowHi - rowLo; }
  PPC_HD int64_t rowTiles() const { return (rows() + kTile - 1) / kTile; }
  PPC_HD int64_t keyTiles() const { return (T + kTile - 1) / kTile; }
  /// The scores' scale in base 2: exp(scale x) = exp2(log2Scale() x).
  PPC_HD float log2Scale() const { return scale * kLog2e; }

  /// Offset in a view of (batch n, row lowest of the view's rows, col 0),
  /// n counting the partition's batches in row-major order: computed once
  /// per block, rows and columns added to it.
  PPC_HD int64_t batchOffset(const ViewMap &m, int64_t n) const {
    int64_t at = m.base;
    for (int d = batchRank - 1; d >= 0; --d) {
      at += (n % batchExtent[d]) * m.batchStride[d];
      n /= batchExtent[d];
    }
    return at;
  }
  /// Offset of (row, col) from a batch's batchOffset.
  PPC_HD static int64_t rowOffset(const ViewMap &m, int64_t row, int64_t col) {
    return (row - m.rowLo) * m.ld + col;
  }
  /// Flat index of (batch n, 0, 0) in the global [B..., S, T]
  /// probabilities, where dropout draws its mask (row i, key j: + i T + j).
  PPC_HD int64_t flatBase(int64_t n) const {
    int64_t index[kMaxRank];
    for (int d = batchRank - 1; d >= 0; --d) {
      index[d] = batchLo[d] + n % batchExtent[d];
      n /= batchExtent[d];
    }
    int64_t batch = 0;
    for (int d = 0; d < batchRank; ++d)
      batch = batch * batchShape[d] + index[d];
    return batch * S * T;
  }
  /// Key `key` is seen from query row `row` (and exists).
  PPC_HD bool sees(int64_t row, int64_t key) const {
    return key < T && keyVisible(causal, zigzag, T, row, key);
  }
  /// Keys [0, end) some row of the query tile from `r0` (nr rows) sees: in
  /// zigzag order any key may be (tiles are skipped by their positions).
  PPC_HD int64_t keysEnd(int64_t r0, int64_t nr) const {
    return causal && zigzag == 0 ? (r0 + nr < T ? r0 + nr : T) : T;
  }
  /// The least natural position of the n > 0 elements from `lo` (lo itself
  /// in natural order).
  PPC_HD int64_t firstPosition(int64_t lo, int64_t n) const {
    return zigzag == 0 ? lo : zigzagSpan(lo, lo + n, T, zigzag).first;
  }
  /// The greatest natural position of the n > 0 elements from `lo`.
  PPC_HD int64_t lastPosition(int64_t lo, int64_t n) const {
    return zigzag == 0 ? lo + n - 1 : zigzagSpan(lo, lo + n, T, zigzag).last;
  }
  /// Whether a warp's 16 rows from `row`, the first n of them in the
  /// partition, see no key of the key tile from c0 (nc keys): in natural
  /// order c0 past the 16th row (as ever, whether or not it exists); in
  /// zigzag order the tile's least position past the rows' greatest.
  PPC_HD bool warpSkips(int64_t row, int64_t n, int64_t c0, int64_t nc) const {
    if (!causal)
      return false;
    if (zigzag == 0)
      return c0 > row + 15;
    return firstPosition(c0, nc) > lastPosition(row, n < 16 ? n : 16);
  }
  /// Whether, in zigzag order, no row of the query tile from r0 (nr rows)
  /// sees a key of the key tile from c0 (nc keys): a tile not even loaded.
  /// (Natural order bounds the key tiles by keysEnd instead.)
  PPC_HD bool zigzagSkips(int64_t r0, int64_t nr, int64_t c0,
                          int64_t nc) const {
    return causal && zigzag > 0 && firstPosition(c0, nc) > lastPosition(r0, nr);
  }
  /// The dropout factor of (row i, key j) of the batch at `flat`.
  PPC_HD float factor(int64_t flat, int64_t i, int64_t j) const {
    return dropout ? mask.factor(flat + i * T + j) : 1.0f;
  }
};

ViewMap viewMap(const KernelView &view, const AttentionRanges &r) {
  ViewMap m;
  const size_t lead = r.batchLo.size();
  for (size_t d = 0; d < lead && d < size_t(kMaxRank); ++d)
    m.batchStride[d] = strideOf(r, view, static_cast<int64_t>(d));
  m.rowLo = view.lo[r.dims[lead]];
  m.ld = rowStride(r, view);
  m.base = offsetIn(r, view, r.batchLo, m.rowLo, 0);
  bool aligned = reinterpret_cast<uintptr_t>(view.elements.data) % 16 == 0 &&
                 m.base % 8 == 0 && m.ld % 8 == 0;
  for (size_t d = 0; d < lead && d < size_t(kMaxRank); ++d)
    aligned = aligned && m.batchStride[d] % 8 == 0;
  m.aligned = aligned;
  return m;
}

FlashShape flashShape(const AttentionRanges &r, const DropoutMask &mask) {
  FlashShape s;
  s.batchRank = static_cast<int32_t>(r.batchLo.size());
  for (int d = 0; d < s.batchRank; ++d) {
    s.batchLo[d] = r.batchLo[d];
    s.batchExtent[d] = r.batchHi[d] - r.batchLo[d];
    s.batchShape[d] = r.batchShape[d];
    s.batches *= s.batchExtent[d];
  }
  s.rowLo = r.rowLo;
  s.rowHi = r.rowHi;
  s.S = r.S;
  s.T = r.T;
  s.D = static_cast<int32_t>(r.D);
  s.scale = r.scale;
  s.causal = r.causal;
  s.zigzag = r.zigzag;
  s.dropout = r.dropout;
  s.mask = mask;
  return s;
}

/// The smallest compiled head-dim bound that holds D (D <= kMaxHeadDim).
int headDimBound(int64_t D) {
  return D <= 16 ? 16 : D <= 32 ? 32 : D <= 64 ? 64 : 128;
}

/// Shared memory of a kernel with `tiles` 16-bit tiles of head-dim bound
/// `bound` and `stats` float arrays of a tile's rows.
size_t sharedBytes(int tiles, int bound, int stats) {
  return size_t(tiles) * kTile * (bound + kPad) * 2 + size_t(stats) * kTile * 4;
}
constexpr int kForwardTiles = 3, kStatsTiles = 2, kPassTiles = 4;

/// Carves a block's shared memory into consecutive arrays.
struct Carve {
  char *at;
  template <typename T> PPC_HD T *take(int64_t n) {
    T *p = reinterpret_cast<T *>(at);
    at += ((n * static_cast<int64_t>(sizeof(T)) + 15) / 16) * 16;
    return p;
  }
};

/// 8 16-bit values from `src` to `dst`, both 16-byte aligned.
PPC_HD inline void copy8(const uint16_t *src, uint16_t *dst) {
#if defined(__CUDA_ARCH__)
  *reinterpret_cast<uint4 *>(dst) = *reinterpret_cast<const uint4 *>(src);
#else
  std::memcpy(dst, src, 16);
#endif
}

/// Rows [r0, r0 + n) of a 16-bit view (D columns) of the batch at `batch`
/// (its batchOffset) into `tile` (kTile rows of kBound + kPad values; zeros
/// past n rows and D columns).
template <int kBound>
PPC_HD inline void loadTile(const BlockThreads &t, const FlashShape &s,
                            const uint16_t *data, const ViewMap &m,
                            int64_t batch, int64_t r0, int64_t n,
                            uint16_t *tile) {
  constexpr int ld = kBound + kPad, chunks = kBound / 8;
  const int D = s.D;
  const uint16_t *rows = data + batch + FlashShape::rowOffset(m, r0, 0);
  for (int e = t.thread; e < kTile * chunks; e += t.threads) {
    const int r = e / chunks, c = 8 * (e % chunks);
    uint16_t *to = tile + r * ld + c;
    if (r >= n || c >= D) {
      for (int i = 0; i < 8; ++i)
        to[i] = 0;
    } else if (m.aligned) {
      copy8(rows + r * m.ld + c, to);
    } else {
      for (int i = 0; i < 8; ++i)
        to[i] = rows[r * m.ld + c + i];
    }
  }
}

/// Scores of warp rows against a tile: acc[nt] += A rows (16 from row0 of
/// tile `a`) times the rows nt*8.. of tile `b`, over the head dim.
template <int kBound, bool kBf16>
PPC_HD inline void tileScores(const BlockThreads &t, const uint16_t *a,
                              int row0, const uint16_t *b,
                              Acc16x8 (&acc)[kTileFrags]) {
  constexpr int ld = kBound + kPad;
  PPC_UNROLL
  for (int nt = 0; nt < kTileFrags; ++nt)
    zero(acc[nt]);
  PPC_UNROLL
  for (int ks = 0; ks < kBound / 16; ++ks) {
    A16x16 x;
    loadA(t, x, a, ld, row0, 16 * ks);
    PPC_UNROLL
    for (int nt = 0; nt < kTileFrags; ++nt) {
      B16x8 y;
      loadBFromRows(t, y, b, ld, 8 * nt, 16 * ks);
      mma<kBf16>(acc[nt], x, y);
    }
  }
}

/// out[dt] += P tile (16 x 64, accumulators) times the 64 rows of tile `b`
/// (its head-dim columns).
template <int kBound, bool kBf16>
PPC_HD inline void
addTileProduct(const BlockThreads &t, const Acc16x8 (&p)[kTileFrags],
               const uint16_t *b, Acc16x8 (&out)[kBound / 8]) {
  constexpr int ld = kBound + kPad;
  PPC_UNROLL
  for (int kt = 0; kt < kTileSteps; ++kt) {
    A16x16 x;
    toA<kBf16>(x, p[2 * kt], p[2 * kt + 1]);
    PPC_UNROLL
    for (int dt = 0; dt < kBound / 8; ++dt) {
      B16x8 y;
      loadBFromCols(t, y, b, ld, 16 * kt, 8 * dt);
      mma<kBf16>(out[dt], x, y);
    }
  }
}

/// fn(row, col, h, r) for every element a thread holds of the warp's
/// accumulators `acc` (16 rows from row0 of its tile; acc[dt] the columns
/// 8dt..8dt+7): held lane h's register r.
template <int kFrags, typename Fn>
PPC_HD inline void forEachHeld(const BlockThreads &t, int row0,
                               const Acc16x8 (&acc)[kFrags], Fn fn) {
  (void)acc;
  PPC_UNROLL
  for (int h = 0; h < kHeldLanes; ++h) {
    const int lane = heldLane(t, h);
    PPC_UNROLL
    for (int dt = 0; dt < kFrags; ++dt)
      for (int r = 0; r < 4; ++r)
        fn(row0 + accRow(lane, r), 8 * dt + accCol(lane, r), dt, h, r);
  }
}

PPC_HD inline float maxOf(float a, float b) { return a < b ? b : a; }
PPC_HD inline float sumOf(float a, float b) { return a + b; }

/// The online softmax of one tile of a warp's scores (rows row0.. of the
/// partition's query tile from r0, keys from c0): scores become
/// probabilities relative to the updated row maxima `m` (base-2 logits),
/// `l` the rows' sums; `alpha` how the earlier sums and results shrink.
/// Rows past nr and keys a row does not see count as -infinity.
PPC_HD inline void onlineSoftmax(const BlockThreads &t, const FlashShape &s,
                                 int64_t r0, int row0, int64_t nr, int64_t c0,
                                 Acc16x8 (&sc)[kTileFrags],
                                 float (&m)[kHeldLanes][2],
                                 float (&l)[kHeldLanes][2],
                                 float (&alpha)[kHeldLanes][2]) {
  float tileMax[kHeldLanes][2], sum[kHeldLanes][2];
  const float k2 = s.log2Scale();
  PPC_UNROLL
  for (int h = 0; h < kHeldLanes; ++h) {
    const int lane = heldLane(t, h);
    tileMax[h][0] = tileMax[h][1] = -INFINITY;
    PPC_UNROLL
    for (int nt = 0; nt < kTileFrags; ++nt)
      for (int r = 0; r < 4; ++r) {
        const int row = row0 + accRow(lane, r);
        const int64_t j = c0 + 8 * nt + accCol(lane, r);
        const float x =
            row < nr && s.sees(r0 + row, j) ? sc[nt].v[h][r] * k2 : -INFINITY;
        sc[nt].v[h][r] = x;
        tileMax[h][r / 2] = maxOf(tileMax[h][r / 2], x);
      }
  }
  quadReduce(tileMax, maxOf);
  PPC_UNROLL
  for (int h = 0; h < kHeldLanes; ++h)
    for (int slot = 0; slot < 2; ++slot) {
      const float mNew = maxOf(m[h][slot], tileMax[h][slot]);
      alpha[h][slot] =
          m[h][slot] == -INFINITY ? 0.0f : exp2f(m[h][slot] - mNew);
      m[h][slot] = mNew;
      sum[h][slot] = 0.0f;
    }
  PPC_UNROLL
  for (int h = 0; h < kHeldLanes; ++h)
    for (int nt = 0; nt < kTileFrags; ++nt)
      for (int r = 0; r < 4; ++r) {
        float &x = sc[nt].v[h][r];
        x = x == -INFINITY ? 0.0f : exp2f(x - m[h][r / 2]);
        sum[h][r / 2] += x;
      }
  quadReduce(sum, sumOf);
  PPC_UNROLL
  for (int h = 0; h < kHeldLanes; ++h)
    for (int slot = 0; slot < 2; ++slot)
      l[h][slot] = alpha[h][slot] * l[h][slot] + sum[h][slot];
}

//===----------------------------------------------------------------------===//
// Forward
//===----------------------------------------------------------------------===//

struct ForwardArgs {
  FlashShape s;
  ViewMap qm, km, vm, om;
  const uint16_t *q, *k, *v;
  Elements out;
};

template <int kBound, bool kBf16>
PPC_HD void forwardBlock(const BlockThreads &t, int64_t block, char *memory,
                         const ForwardArgs &a) {
  constexpr int ld = kBound + kPad, dFrags = kBound / 8;
  const FlashShape &s = a.s;
  const int64_t n = block / s.rowTiles();
  const int64_t r0 = s.rowLo + (block % s.rowTiles()) * kTile;
  const int64_t nr = s.rowHi - r0 < kTile ? s.rowHi - r0 : kTile;
  const int64_t kb = s.batchOffset(a.km, n), vb = s.batchOffset(a.vm, n),
                flat = s.flatBase(n);
  Carve carve{memory};
  uint16_t *Q = carve.take<uint16_t>(kTile * ld);
  uint16_t *K = carve.take<uint16_t>(kTile * ld);
  uint16_t *V = carve.take<uint16_t>(kTile * ld);
  loadTile<kBound>(t, s, a.q, a.qm, s.batchOffset(a.qm, n), r0, nr, Q);
  Acc16x8 O[kHeldWarps][dFrags];
  float m[kHeldWarps][kHeldLanes][2], l[kHeldWarps][kHeldLanes][2];
  PPC_UNROLL
  for (int hw = 0; hw < kHeldWarps; ++hw) {
    PPC_UNROLL
    for (int dt = 0; dt < dFrags; ++dt)
      zero(O[hw][dt]);
    PPC_UNROLL
    for (int h = 0; h < kHeldLanes; ++h)
      for (int slot = 0; slot < 2; ++slot) {
        m[hw][h][slot] = -INFINITY;
        l[hw][h][slot] = 0.0f;
      }
  }
  const int64_t end = s.keysEnd(r0, nr);
  for (int64_t c0 = 0; c0 < end; c0 += kTile) {
    const int64_t nc = s.T - c0 < kTile ? s.T - c0 : kTile;
    if (s.zigzagSkips(r0, nr, c0, nc)) // alike in every thread of the block
      continue;
    t.sync(); // every warp is done with the last tile's K and V
    loadTile<kBound>(t, s, a.k, a.km, kb, c0, nc, K);
    loadTile<kBound>(t, s, a.v, a.vm, vb, c0, nc, V);
    t.sync();
    PPC_UNROLL
    for (int hw = 0; hw < kHeldWarps; ++hw) {
      const int w = t.warp + hw, row0 = 16 * w;
      if (row0 >= nr || s.warpSkips(r0 + row0, nr - row0, c0, nc))
        continue; // no row of this warp sees the tile
      Acc16x8 sc[kTileFrags];
      tileScores<kBound, kBf16>(t, Q, row0, K, sc);
      float alpha[kHeldLanes][2];
      onlineSoftmax(t, s, r0, row0, nr, c0, sc, m[hw], l[hw], alpha);
      PPC_UNROLL
      for (int h = 0; h < kHeldLanes; ++h) {
        const int lane = heldLane(t, h);
        PPC_UNROLL
        for (int dt = 0; dt < dFrags; ++dt)
          for (int r = 0; r < 4; ++r)
            O[hw][dt].v[h][r] *= alpha[h][r / 2];
        if (s.dropout)
          for (int nt = 0; nt < kTileFrags; ++nt)
            for (int r = 0; r < 4; ++r)
              sc[nt].v[h][r] *= s.factor(flat, r0 + row0 + accRow(lane, r),
                                         c0 + 8 * nt + accCol(lane, r));
      }
      addTileProduct<kBound, kBf16>(t, sc, V, O[hw]);
    }
  }
  const int64_t ob = s.batchOffset(a.om, n);
  PPC_UNROLL
  for (int hw = 0; hw < kHeldWarps; ++hw)
    forEachHeld(t, 16 * (t.warp + hw), O[hw],
                [&](int row, int col, int dt, int h, int r) {
                  if (row < nr && col < s.D)
                    a.out[ob + FlashShape::rowOffset(a.om, r0 + row, col)] =
                        O[hw][dt].v[h][r] / l[hw][h][r / 2];
                });
}

//===----------------------------------------------------------------------===//
// Backward
//===----------------------------------------------------------------------===//

struct BackwardArgs {
  FlashShape s;
  ViewMap qm, km, vm, om, dom, dqm, dkm, dvm;
  const uint16_t *q, *k, *v, *dO;
  Elements o, dOut, dq, dk, dv;
  bool setQ, setK, setV;
  /// Per query row of the partition: the base-2 log-sum-exp of its scaled
  /// scores, and the dot of its result and result gradient.
  float *lse, *dots;
};

/// The row statistics of a tile of query rows.
template <int kBound, bool kBf16>
PPC_HD void statsBlock(const BlockThreads &t, int64_t block, char *memory,
                       const BackwardArgs &a) {
  constexpr int ld = kBound + kPad;
  const FlashShape &s = a.s;
  const int64_t n = block / s.rowTiles();
  const int64_t r0 = s.rowLo + (block % s.rowTiles()) * kTile;
  const int64_t nr = s.rowHi - r0 < kTile ? s.rowHi - r0 : kTile;
  const int64_t kb = s.batchOffset(a.km, n);
  Carve carve{memory};
  uint16_t *Q = carve.take<uint16_t>(kTile * ld);
  uint16_t *K = carve.take<uint16_t>(kTile * ld);
  loadTile<kBound>(t, s, a.q, a.qm, s.batchOffset(a.qm, n), r0, nr, Q);
  float m[kHeldWarps][kHeldLanes][2], l[kHeldWarps][kHeldLanes][2];
  PPC_UNROLL
  for (int hw = 0; hw < kHeldWarps; ++hw)
    for (int h = 0; h < kHeldLanes; ++h)
      for (int slot = 0; slot < 2; ++slot) {
        m[hw][h][slot] = -INFINITY;
        l[hw][h][slot] = 0.0f;
      }
  const int64_t end = s.keysEnd(r0, nr);
  for (int64_t c0 = 0; c0 < end; c0 += kTile) {
    const int64_t nc = s.T - c0 < kTile ? s.T - c0 : kTile;
    if (s.zigzagSkips(r0, nr, c0, nc))
      continue;
    t.sync();
    loadTile<kBound>(t, s, a.k, a.km, kb, c0, nc, K);
    t.sync();
    PPC_UNROLL
    for (int hw = 0; hw < kHeldWarps; ++hw) {
      const int row0 = 16 * (t.warp + hw);
      if (row0 >= nr || s.warpSkips(r0 + row0, nr - row0, c0, nc))
        continue;
      Acc16x8 sc[kTileFrags];
      tileScores<kBound, kBf16>(t, Q, row0, K, sc);
      float alpha[kHeldLanes][2];
      onlineSoftmax(t, s, r0, row0, nr, c0, sc, m[hw], l[hw], alpha);
    }
  }
  PPC_UNROLL
  for (int hw = 0; hw < kHeldWarps; ++hw) {
    const int row0 = 16 * (t.warp + hw);
    PPC_UNROLL
    for (int h = 0; h < kHeldLanes; ++h) {
      const int lane = heldLane(t, h);
      // One lane of each quad writes its two rows.
      if (lane % 4 != 0)
        continue;
      PPC_UNROLL
      for (int slot = 0; slot < 2; ++slot) {
        const int row = row0 + lane / 4 + 8 * slot;
        if (row < nr)
          a.lse[n * s.rows() + (r0 + row - s.rowLo)] =
              m[hw][h][slot] + log2f(l[hw][h][slot]);
      }
    }
  }
  const int64_t ob = s.batchOffset(a.om, n), dob = s.batchOffset(a.dom, n);
  for (int64_t r = t.thread; r < nr; r += t.threads) {
    float dot = 0.0f;
    for (int64_t c = 0; c < s.D; ++c)
      dot +=
          static_cast<float>(a.o[ob + FlashShape::rowOffset(a.om, r0 + r, c)]) *
          static_cast<float>(
              a.dOut[dob + FlashShape::rowOffset(a.dom, r0 + r, c)]);
    a.dots[n * s.rows() + (r0 + r - s.rowLo)] = dot;
  }
}

/// The probabilities (with dropout) and dS = P (dP' factor - dot) of a tile
/// of scores: `sc` and `dp` hold the unscaled scores and dP' = dO V^T;
/// (tile row, tile column) -> (query row i, key j) by `pair`, whose
/// statistic index `stat` reads lse and dots from shared memory. P' is
/// left in `sc`, dS in `dp`.
template <typename Pair>
PPC_HD inline void scoreGradients(const BlockThreads &t, const FlashShape &s,
                                  int64_t flat, const float *lse,
                                  const float *dots, Acc16x8 (&sc)[kTileFrags],
                                  Acc16x8 (&dp)[kTileFrags], Pair pair) {
  const float k2 = s.log2Scale();
  PPC_UNROLL
  for (int h = 0; h < kHeldLanes; ++h) {
    const int lane = heldLane(t, h);
    PPC_UNROLL
    for (int nt = 0; nt < kTileFrags; ++nt)
      for (int r = 0; r < 4; ++r) {
        int64_t i, j;
        int stat;
        const bool valid =
            pair(accRow(lane, r), 8 * nt + accCol(lane, r), i, j, stat) &&
            s.sees(i, j);
        float p = 0.0f, dS = 0.0f;
        if (valid) {
          p = exp2f(sc[nt].v[h][r] * k2 - lse[stat]);
          const float f = s.factor(flat, i, j);
          dS = p * (dp[nt].v[h][r] * f - dots[stat]);
          p *= f;
        }
        sc[nt].v[h][r] = p;
        dp[nt].v[h][r] = dS;
      }
  }
}

/// dK and dV of a tile of keys (warp w: keys 16w..), over the query tiles
/// that see them.
template <int kBound, bool kBf16>
PPC_HD void keyPassBlock(const BlockThreads &t, int64_t block, char *memory,
                         const BackwardArgs &a) {
  constexpr int ld = kBound + kPad, dFrags = kBound / 8;
  const FlashShape &s = a.s;
  const int64_t n = block / s.keyTiles();
  const int64_t c0 = (block % s.keyTiles()) * kTile;
  const int64_t nc = s.T - c0 < kTile ? s.T - c0 : kTile;
  const int64_t qb = s.batchOffset(a.qm, n), dob = s.batchOffset(a.dom, n),
                flat = s.flatBase(n);
  Carve carve{memory};
  uint16_t *K = carve.take<uint16_t>(kTile * ld);
  uint16_t *V = carve.take<uint16_t>(kTile * ld);
  uint16_t *Q = carve.take<uint16_t>(kTile * ld);
  uint16_t *G = carve.take<uint16_t>(kTile * ld); // dO
  float *Lse = carve.take<float>(kTile);
  float *Dot = carve.take<float>(kTile);
  loadTile<kBound>(t, s, a.k, a.km, s.batchOffset(a.km, n), c0, nc, K);
  loadTile<kBound>(t, s, a.v, a.vm, s.batchOffset(a.vm, n), c0, nc, V);
  Acc16x8 dK[kHeldWarps][dFrags], dV[kHeldWarps][dFrags];
  PPC_UNROLL
  for (int hw = 0; hw < kHeldWarps; ++hw)
    for (int dt = 0; dt < dFrags; ++dt) {
      zero(dK[hw][dt]);
      zero(dV[hw][dt]);
    }
  // The first query tile with a row that sees the tile's first key (in
  // zigzag order the tiles are skipped by their positions).
  int64_t tile = 0;
  if (s.causal && s.zigzag == 0 && c0 > s.rowLo)
    tile = (c0 - s.rowLo) / kTile;
  for (; tile < s.rowTiles(); ++tile) {
    const int64_t r0 = s.rowLo + tile * kTile;
    const int64_t nr = s.rowHi - r0 < kTile ? s.rowHi - r0 : kTile;
    if (s.zigzagSkips(r0, nr, c0, nc)) // alike in every thread of the block
      continue;
    t.sync();
    loadTile<kBound>(t, s, a.q, a.qm, qb, r0, nr, Q);
    loadTile<kBound>(t, s, a.dO, a.dom, dob, r0, nr, G);
    for (int64_t r = t.thread; r < kTile; r += t.threads) {
      const int64_t at = n * s.rows() + (r0 + r - s.rowLo);
      Lse[r] = r < nr ? a.lse[at] : 0.0f;
      Dot[r] = r < nr ? a.dots[at] : 0.0f;
    }
    t.sync();
    PPC_UNROLL
    for (int hw = 0; hw < kHeldWarps; ++hw) {
      const int key0 = 16 * (t.warp + hw);
      if (key0 >= nc ||
          (s.causal &&
           s.firstPosition(c0 + key0, nc - key0 < 16 ? nc - key0 : 16) >
               s.lastPosition(r0, nr)))
        continue; // no key of this warp is seen from the tile's rows
      // S^T and dP'^T: the warp's keys against the tile's rows.
      Acc16x8 sc[kTileFrags], dp[kTileFrags];
      tileScores<kBound, kBf16>(t, K, key0, Q, sc);
      tileScores<kBound, kBf16>(t, V, key0, G, dp);
      scoreGradients(t, s, flat, Lse, Dot, sc, dp,
                     [&](int row, int col, int64_t &i, int64_t &j, int &stat) {
                       i = r0 + col;
                       j = c0 + key0 + row;
                       stat = col;
                       return col < nr;
                     });
      // dV += P'^T dO and dK += dS^T Q for the warp's keys.
      addTileProduct<kBound, kBf16>(t, sc, G, dV[hw]);
      addTileProduct<kBound, kBf16>(t, dp, Q, dK[hw]);
    }
  }
  const int64_t dkb = a.dk ? s.batchOffset(a.dkm, n) : 0,
                dvb = a.dv ? s.batchOffset(a.dvm, n) : 0;
  PPC_UNROLL
  for (int hw = 0; hw < kHeldWarps; ++hw)
    forEachHeld(
        t, 16 * (t.warp + hw), dK[hw],
        [&](int key, int col, int dt, int h, int r) {
          if (key >= nc || col >= s.D)
            return;
          if (a.dk)
            addInto(a.dk, dkb + FlashShape::rowOffset(a.dkm, c0 + key, col),
                    s.scale * dK[hw][dt].v[h][r], a.setK);
          if (a.dv)
            addInto(a.dv, dvb + FlashShape::rowOffset(a.dvm, c0 + key, col),
                    dV[hw][dt].v[h][r], a.setV);
        });
}

/// dQ of a tile of query rows (warp w: rows 16w..), over the key tiles
/// they see.
template <int kBound, bool kBf16>
PPC_HD void queryPassBlock(const BlockThreads &t, int64_t block, char *memory,
                           const BackwardArgs &a) {
  constexpr int ld = kBound + kPad, dFrags = kBound / 8;
  const FlashShape &s = a.s;
  const int64_t n = block / s.rowTiles();
  const int64_t r0 = s.rowLo + (block % s.rowTiles()) * kTile;
  const int64_t nr = s.rowHi - r0 < kTile ? s.rowHi - r0 : kTile;
  const int64_t kb = s.batchOffset(a.km, n), vb = s.batchOffset(a.vm, n),
                flat = s.flatBase(n);
  Carve carve{memory};
  uint16_t *Q = carve.take<uint16_t>(kTile * ld);
  uint16_t *G = carve.take<uint16_t>(kTile * ld); // dO
  uint16_t *K = carve.take<uint16_t>(kTile * ld);
  uint16_t *V = carve.take<uint16_t>(kTile * ld);
  float *Lse = carve.take<float>(kTile);
  float *Dot = carve.take<float>(kTile);
  loadTile<kBound>(t, s, a.q, a.qm, s.batchOffset(a.qm, n), r0, nr, Q);
  loadTile<kBound>(t, s, a.dO, a.dom, s.batchOffset(a.dom, n), r0, nr, G);
  for (int64_t r = t.thread; r < kTile; r += t.threads) {
    const int64_t at = n * s.rows() + (r0 + r - s.rowLo);
    Lse[r] = r < nr ? a.lse[at] : 0.0f;
    Dot[r] = r < nr ? a.dots[at] : 0.0f;
  }
  Acc16x8 dQ[kHeldWarps][dFrags];
  PPC_UNROLL
  for (int hw = 0; hw < kHeldWarps; ++hw)
    for (int dt = 0; dt < dFrags; ++dt)
      zero(dQ[hw][dt]);
  const int64_t end = s.keysEnd(r0, nr);
  for (int64_t c0 = 0; c0 < end; c0 += kTile) {
    const int64_t nc = s.T - c0 < kTile ? s.T - c0 : kTile;
    if (s.zigzagSkips(r0, nr, c0, nc))
      continue;
    t.sync();
    loadTile<kBound>(t, s, a.k, a.km, kb, c0, nc, K);
    loadTile<kBound>(t, s, a.v, a.vm, vb, c0, nc, V);
    t.sync();
    PPC_UNROLL
    for (int hw = 0; hw < kHeldWarps; ++hw) {
      const int row0 = 16 * (t.warp + hw);
      if (row0 >= nr || s.warpSkips(r0 + row0, nr - row0, c0, nc))
        continue;
      Acc16x8 sc[kTileFrags], dp[kTileFrags];
      tileScores<kBound, kBf16>(t, Q, row0, K, sc);
      tileScores<kBound, kBf16>(t, G, row0, V, dp);
      scoreGradients(t, s, flat, Lse, Dot, sc, dp,
                     [&](int row, int col, int64_t &i, int64_t &j, int &stat) {
                       i = r0 + row0 + row;
                       j = c0 + col;
                       stat = row0 + row;
                       return row0 + row < nr;
                     });
      // dQ += dS K for the warp's rows.
      addTileProduct<kBound, kBf16>(t, dp, K, dQ[hw]);
    }
  }
  const int64_t dqb = s.batchOffset(a.dqm, n);
  PPC_UNROLL
  for (int hw = 0; hw < kHeldWarps; ++hw)
    forEachHeld(t, 16 * (t.warp + hw), dQ[hw],
                [&](int row, int col, int dt, int h, int r) {
                  if (row < nr && col < s.D)
                    addInto(a.dq,
                            dqb + FlashShape::rowOffset(a.dqm, r0 + row, col),
                            s.scale * dQ[hw][dt].v[h][r], a.setQ);
                });
}

//===----------------------------------------------------------------------===//
// Launches
//===----------------------------------------------------------------------===//

/// The kernels of one head-dim bound and 16-bit type.
template <int kBound, bool kBf16> struct FlashKernels {
  static bool forward(Stream stream, int64_t blocks, const ForwardArgs &a) {
    return launchBlocks(
        stream, blocks, kThreads, sharedBytes(kForwardTiles, kBound, 0),
        [=] PPC_HD(const BlockThreads &t, int64_t block, char *memory) {
          forwardBlock<kBound, kBf16>(t, block, memory, a);
        });
  }
  static bool stats(Stream stream, int64_t blocks, const BackwardArgs &a) {
    return launchBlocks(
        stream, blocks, kThreads, sharedBytes(kStatsTiles, kBound, 0),
        [=] PPC_HD(const BlockThreads &t, int64_t block, char *memory) {
          statsBlock<kBound, kBf16>(t, block, memory, a);
        });
  }
  static bool keyPass(Stream stream, int64_t blocks, const BackwardArgs &a) {
    return launchBlocks(
        stream, blocks, kThreads, sharedBytes(kPassTiles, kBound, 2),
        [=] PPC_HD(const BlockThreads &t, int64_t block, char *memory) {
          keyPassBlock<kBound, kBf16>(t, block, memory, a);
        });
  }
  static bool queryPass(Stream stream, int64_t blocks, const BackwardArgs &a) {
    return launchBlocks(
        stream, blocks, kThreads, sharedBytes(kPassTiles, kBound, 2),
        [=] PPC_HD(const BlockThreads &t, int64_t block, char *memory) {
          queryPassBlock<kBound, kBf16>(t, block, memory, a);
        });
  }
};

/// Calls `run.template operator()<Kernels>()` with the FlashKernels of D's
/// bound and the type.
template <typename Run> bool withKernels(int64_t D, DType type, Run run) {
  const bool bf16 = type == DType::BF16;
  switch (headDimBound(D)) {
  case 16:
    return bf16 ? run(FlashKernels<16, true>())
                : run(FlashKernels<16, false>());
  case 32:
    return bf16 ? run(FlashKernels<32, true>())
                : run(FlashKernels<32, false>());
  case 64:
    return bf16 ? run(FlashKernels<64, true>())
                : run(FlashKernels<64, false>());
  default:
    return bf16 ? run(FlashKernels<128, true>())
                : run(FlashKernels<128, false>());
  }
}

const uint16_t *bits(const KernelView &view) {
  return static_cast<const uint16_t *>(view.elements.data);
}

/// Whether this device has mma.sync on bf16 and f16 (compute 8.0 on).
bool deviceHasMma() {
#if defined(PPC_CUDA_EMULATION)
  return true;
#else
  int device = 0, major = 0;
  if (cudaGetDevice(&device) != cudaSuccess ||
      cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor,
                             device) != cudaSuccess) {
    cudaGetLastError();
    return false;
  }
  return major >= 8;
#endif
}

absl::Status refused() {
  return absl::InternalError(
      "the device refused the attention kernel's launch");
}

} // namespace

bool flashAttentionFits(const AttentionRanges &r, const KernelView &q,
                        const KernelView &k, const KernelView &v,
                        const KernelView *dResult) {
  const DType type = q.elements.type;
  if (type != DType::BF16 && type != DType::F16)
    return false;
  if (k.elements.type != type || v.elements.type != type ||
      (dResult && dResult->elements.type != type))
    return false;
  if (r.D != r.Dv || r.D % 16 != 0 || r.D > kMaxHeadDim || r.D <= 0)
    return false;
  if (r.batchLo.size() > size_t(kMaxRank))
    return false;
  static const bool mma = deviceHasMma();
  return mma &&
         sharedBytes(kPassTiles, headDimBound(r.D), 2) <= maxBlockSharedBytes();
}

absl::Status flashAttentionForward(ExecContext &ctx, const AttentionRanges &r,
                                   const DropoutMask &mask, const KernelView &q,
                                   const KernelView &k, const KernelView &v,
                                   const KernelView &result) {
  ForwardArgs a;
  a.s = flashShape(r, mask);
  if (a.s.batches == 0 || a.s.rows() <= 0)
    return absl::OkStatus();
  a.qm = viewMap(q, r);
  a.km = viewMap(k, r);
  a.vm = viewMap(v, r);
  a.om = viewMap(result, r);
  a.q = bits(q);
  a.k = bits(k);
  a.v = bits(v);
  a.out = result.elements;
  const int64_t blocks = a.s.batches * a.s.rowTiles();
  return withKernels(r.D, q.elements.type,
                     [&](auto kernels) {
                       return kernels.forward(ctx.stream, blocks, a);
                     })
             ? absl::OkStatus()
             : refused();
}

absl::Status flashAttentionBackward(
    ExecContext &ctx, const AttentionRanges &r, const DropoutMask &mask,
    const KernelView &q, const KernelView &k, const KernelView &v,
    const KernelView &result, const KernelView &dResult, const KernelView &dq,
    const KernelView &dk, const KernelView &dv) {
  BackwardArgs a;
  a.s = flashShape(r, mask);
  const FlashShape &s = a.s;
  // Gradients are written where the kernels cover their views: dK and dV
  // over every key of the partition's batches, dQ over its rows.
  const int64_t keys = s.batches * s.T * s.D, rows = s.batches * s.rows() * s.D;
  a.setQ = writesGradient(ctx, dq, dq.count() == rows);
  a.setK = writesGradient(ctx, dk, dk.count() == keys);
  a.setV = writesGradient(ctx, dv, dv.count() == keys);
  if (s.batches == 0 || s.rows() <= 0)
    return absl::OkStatus();
  a.lse = ctx.workspace->floats(s.batches * s.rows());
  a.dots = ctx.workspace->floats(s.batches * s.rows());
  if (!a.lse || !a.dots)
    return absl::ResourceExhaustedError(
        "out of device memory for the attention's row statistics");
  a.qm = viewMap(q, r);
  a.km = viewMap(k, r);
  a.vm = viewMap(v, r);
  a.om = viewMap(result, r);
  a.dom = viewMap(dResult, r);
  if (dq.present())
    a.dqm = viewMap(dq, r);
  if (dk.present())
    a.dkm = viewMap(dk, r);
  if (dv.present())
    a.dvm = viewMap(dv, r);
  a.q = bits(q);
  a.k = bits(k);
  a.v = bits(v);
  a.dO = bits(dResult);
  a.o = result.elements;
  a.dOut = dResult.elements;
  a.dq = dq.present() ? dq.elements : Elements();
  a.dk = dk.present() ? dk.elements : Elements();
  a.dv = dv.present() ? dv.elements : Elements();
  const int64_t rowBlocks = s.batches * s.rowTiles(),
                keyBlocks = s.batches * s.keyTiles();
  const bool launched = withKernels(r.D, q.elements.type, [&](auto kernels) {
    return kernels.stats(ctx.stream, rowBlocks, a) &&
           (!(a.dk || a.dv) || kernels.keyPass(ctx.stream, keyBlocks, a)) &&
           (!a.dq || kernels.queryPass(ctx.stream, rowBlocks, a));
  });
  return launched ? absl::OkStatus() : refused();
}

} // namespace ppc::runtime::cuda
