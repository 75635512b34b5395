//===- FlashAttention.cu - ppc.attention without a score matrix -----------===//
//
// See FlashAttention.h. One block of 4 warps per tile: in the forward and
// the dQ pass a tile of 64 query rows (warp w takes rows 16w..16w+15)
// looping over key tiles; in the dK/dV pass a tile of 64 keys (warp w takes
// keys 16w..16w+15) looping over query tiles. Shared memory holds the
// 16-bit tiles of the operands and each warp's float scores; the products
// of a warp's rows with a tile are warpMma calls of 16 x 16 outputs.
//
//===----------------------------------------------------------------------===//

#include "FlashAttention.h"

#include "Blocks.h"

#include "ppc/Runtime/Boxes.h"

#include <algorithm>
#include <cmath>

namespace ppc::runtime::cuda {

namespace {

constexpr int kTile = 64; ///< query rows and keys per tile
constexpr int kWarps = 4; ///< warps per block, 16 rows (keys) each
constexpr int kThreads = 32 * kWarps;
constexpr int kMaxHeadDim = 128;

/// Where a view holds element (batch n, row, col) of its tensor: base +
/// the batch index's offsets (FlashShape::batchOffset) + (row - rowLo) *
/// ld + col.
struct ViewMap {
  int64_t base = 0;
  int64_t batchStride[kMaxRank] = {};
  int64_t rowLo = 0;
  int64_t ld = 0;
};

/// A partition as the kernels read it (by value).
struct FlashShape {
  int32_t batchRank = 0;
  int64_t batchLo[kMaxRank] = {}, batchExtent[kMaxRank] = {};
  int64_t batchShape[kMaxRank] = {};
  int64_t batches = 1;
  int64_t rowLo = 0, rowHi = 0; ///< the partition's query rows
  int64_t S = 0, T = 0, D = 0;
  float scale = 1;
  bool causal = false, dropout = false;
  DropoutMask mask{0, 0, 0.0};
  DType type = DType::BF16;

  PPC_HD int64_t rows() const { return rowHi - rowLo; }
  PPC_HD int64_t rowTiles() const { return (rows() + kTile - 1) / kTile; }
  PPC_HD int64_t keyTiles() const { return (T + kTile - 1) / kTile; }

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
    return key < T && (!causal || key <= row);
  }
  /// Keys [0, end) some row of the query tile from `r0` (nr rows) sees.
  PPC_HD int64_t keysEnd(int64_t r0, int64_t nr) const {
    return causal ? (r0 + nr < T ? r0 + nr : T) : T;
  }
  /// The dropout factor of (row i, key j) of the batch at `flat`.
  PPC_HD float factor(int64_t flat, int64_t i, int64_t j) const {
    return dropout ? mask.factor(flat + i * T + j) : 1.0f;
  }
};

ViewMap viewMap(const KernelView &view, const AttentionRanges &r) {
  ViewMap m;
  const size_t lead = r.batchLo.size();
  const std::vector<int64_t> strides = view.strides();
  for (size_t d = 0; d < lead && d < size_t(kMaxRank); ++d)
    m.batchStride[d] = strides[d];
  m.rowLo = view.lo[lead];
  m.ld = view.extent(lead + 1);
  m.base = offsetIn(view, r.batchLo, m.rowLo, 0);
  return m;
}

FlashShape flashShape(const AttentionRanges &r, const DropoutMask &mask,
                      const std::vector<int64_t> &queryShape, DType type) {
  FlashShape s;
  s.batchRank = static_cast<int32_t>(r.batchLo.size());
  for (int d = 0; d < s.batchRank; ++d) {
    s.batchLo[d] = r.batchLo[d];
    s.batchExtent[d] = r.batchHi[d] - r.batchLo[d];
    s.batchShape[d] = queryShape[d];
    s.batches *= s.batchExtent[d];
  }
  s.rowLo = r.rowLo;
  s.rowHi = r.rowHi;
  s.S = r.S;
  s.T = r.T;
  s.D = r.D;
  s.scale = r.scale;
  s.causal = r.causal;
  s.dropout = r.dropout;
  s.mask = mask;
  s.type = type;
  return s;
}

/// Shared memory of each pass, for head dim D: 16-bit tiles of D columns,
/// per-warp float and 16-bit score tiles, per-row statistics.
size_t forwardShared(int64_t D) {
  return 3 * kTile * D * 2 + kWarps * 16 * kTile * (4 + 2) + kTile * D * 4 +
         3 * kTile * 4;
}
size_t keyPassShared(int64_t D) {
  return 4 * kTile * D * 2 + 2 * kTile * D * 4 +
         kWarps * 16 * kTile * (4 + 2 + 4 + 2) + 2 * kTile * 4;
}
size_t queryPassShared(int64_t D) {
  return 4 * kTile * D * 2 + kTile * D * 4 + kWarps * 16 * kTile * (4 + 4 + 2) +
         2 * kTile * 4;
}

/// Carves a block's shared memory into consecutive arrays.
struct Carve {
  char *at;
  template <typename T> PPC_HD T *take(int64_t n) {
    T *p = reinterpret_cast<T *>(at);
    at += ((n * static_cast<int64_t>(sizeof(T)) + 15) / 16) * 16;
    return p;
  }
};

/// Copies rows [r0, r0 + n) of a 16-bit view (D columns) of the batch at
/// `batch` (its batchOffset) into `tile` (kTile rows, zeros past n).
PPC_HD inline void loadTile(const BlockThreads &t, const FlashShape &s,
                            const uint16_t *data, const ViewMap &m,
                            int64_t batch, int64_t r0, int64_t n,
                            uint16_t *tile) {
  const int64_t D = s.D;
  const uint16_t *rows = data + batch + FlashShape::rowOffset(m, r0, 0);
  for (int64_t e = t.thread; e < kTile * D; e += t.threads) {
    const int64_t r = e / D, c = e % D;
    tile[e] = r < n ? rows[r * m.ld + c] : uint16_t(0);
  }
}

/// acc (16 x D float, leading dimension D) = alpha[row] * acc + A B for a
/// warp: A is 16 x 64 (16-bit, row-major or, with ATransposed, its
/// transpose), B 64 x D row-major; `temp` holds 16 x 16 floats. alpha null:
/// 1.
template <bool ATransposed>
PPC_HD void addProduct(const BlockThreads &t, DType type, const uint16_t *a,
                       int lda, const uint16_t *b, int64_t D, float *acc,
                       const float *alpha, float *temp) {
  for (int64_t dt = 0; dt < D / 16; ++dt) {
    warpMma<ATransposed, false>(t, type, a, lda, b + 16 * dt,
                                static_cast<int>(D), temp, 16, kTile / 16);
    t.syncWarp();
    for (int e = t.lane; e < 256; e += t.lanes) {
      const int r = e / 16, c = e % 16;
      float &out = acc[r * D + 16 * dt + c];
      out = (alpha ? alpha[r] * out : out) + temp[e];
    }
    t.syncWarp();
  }
}

//===----------------------------------------------------------------------===//
// Forward
//===----------------------------------------------------------------------===//

void forwardKernel(Stream stream, const FlashShape s, const ViewMap qm,
                   const uint16_t *q, const ViewMap km, const uint16_t *k,
                   const ViewMap vm, const uint16_t *v, const ViewMap om,
                   Elements out, size_t shared, bool &launched) {
  launched = launchBlocks(
      stream, s.batches * s.rowTiles(), kThreads, shared,
      [=] PPC_HD(const BlockThreads &t, int64_t block, char *memory) {
        const int64_t D = s.D, n = block / s.rowTiles();
        const int64_t r0 = s.rowLo + (block % s.rowTiles()) * kTile;
        const int64_t nr = s.rowHi - r0 < kTile ? s.rowHi - r0 : kTile;
        const int64_t qb = s.batchOffset(qm, n), kb = s.batchOffset(km, n),
                      vb = s.batchOffset(vm, n), ob = s.batchOffset(om, n),
                      flat = s.flatBase(n);
        Carve carve{memory};
        uint16_t *Q = carve.take<uint16_t>(kTile * D);
        uint16_t *K = carve.take<uint16_t>(kTile * D);
        uint16_t *V = carve.take<uint16_t>(kTile * D);
        float *S = carve.take<float>(kWarps * 16 * kTile);
        uint16_t *P = carve.take<uint16_t>(kWarps * 16 * kTile);
        float *O = carve.take<float>(kTile * D);
        float *M = carve.take<float>(kTile);
        float *L = carve.take<float>(kTile);
        float *A = carve.take<float>(kTile);
        loadTile(t, s, q, qm, qb, r0, nr, Q);
        for (int64_t e = t.thread; e < kTile * D; e += t.threads)
          O[e] = 0.0f;
        for (int64_t r = t.thread; r < kTile; r += t.threads) {
          M[r] = -INFINITY;
          L[r] = 0.0f;
        }
        const int64_t end = s.keysEnd(r0, nr);
        for (int64_t c0 = 0; c0 < end; c0 += kTile) {
          const int64_t nc = s.T - c0 < kTile ? s.T - c0 : kTile;
          t.sync(); // the last tile's K and V are read
          loadTile(t, s, k, km, kb, c0, nc, K);
          loadTile(t, s, v, vm, vb, c0, nc, V);
          t.sync();
          for (int w = t.warp; w < kWarps; w += t.warps) {
            if (16 * w >= nr)
              continue; // every row of this warp is past the tile's
            float *Sw = S + w * 16 * kTile;
            uint16_t *Pw = P + w * 16 * kTile;
            for (int ct = 0; ct < kTile / 16; ++ct)
              warpMma<false, true>(t, s.type, Q + 16 * w * D,
                                   static_cast<int>(D), K + 16 * ct * D,
                                   static_cast<int>(D), Sw + 16 * ct, kTile,
                                   static_cast<int>(D / 16));
            t.syncWarp();
            // The online softmax of the warp's rows: a lane per row.
            for (int r = t.lane; r < 16; r += t.lanes) {
              const int64_t row = 16 * w + r, i = r0 + row;
              float *line = Sw + r * kTile;
              uint16_t *pLine = Pw + r * kTile;
              if (row >= nr) {
                A[row] = 1.0f;
                for (int j = 0; j < kTile; ++j)
                  pLine[j] = 0;
                continue;
              }
              float tileMax = -INFINITY;
              for (int j = 0; j < kTile; ++j) {
                const float score =
                    s.sees(i, c0 + j) ? line[j] * s.scale : -INFINITY;
                line[j] = score;
                tileMax = tileMax < score ? score : tileMax;
              }
              const float mOld = M[row];
              const float mNew = mOld < tileMax ? tileMax : mOld;
              const float alpha = mOld == -INFINITY ? 0.0f : expf(mOld - mNew);
              float sum = 0.0f;
              for (int j = 0; j < kTile; ++j) {
                const float p =
                    line[j] == -INFINITY ? 0.0f : expf(line[j] - mNew);
                sum += p;
                pLine[j] = toHalfBits(
                    s.type, p == 0.0f ? 0.0f : p * s.factor(flat, i, c0 + j));
              }
              L[row] = alpha * L[row] + sum;
              M[row] = mNew;
              A[row] = alpha;
            }
            t.syncWarp();
            // O = alpha O + P' V, V's rows past the keys zero.
            addProduct<false>(t, s.type, Pw, kTile, V, D, O + 16 * w * D,
                              A + 16 * w, Sw);
          }
        }
        t.sync();
        for (int64_t e = t.thread; e < kTile * D; e += t.threads) {
          const int64_t r = e / D, c = e % D;
          if (r < nr)
            out[ob + FlashShape::rowOffset(om, r0 + r, c)] = O[e] / L[r];
        }
      });
}

//===----------------------------------------------------------------------===//
// Backward
//===----------------------------------------------------------------------===//

/// Per query row of the partition: the log-sum-exp of its scaled scores
/// over the keys it sees, and the dot of its result and result gradient.
void statsKernel(Stream stream, const FlashShape s, const ViewMap qm,
                 const uint16_t *q, const ViewMap km, const uint16_t *k,
                 const ViewMap om, Elements o, const ViewMap dom, Elements dO,
                 float *lse, float *dots, size_t shared, bool &launched) {
  launched = launchBlocks(
      stream, s.batches * s.rowTiles(), kThreads, shared,
      [=] PPC_HD(const BlockThreads &t, int64_t block, char *memory) {
        const int64_t D = s.D, n = block / s.rowTiles();
        const int64_t r0 = s.rowLo + (block % s.rowTiles()) * kTile;
        const int64_t nr = s.rowHi - r0 < kTile ? s.rowHi - r0 : kTile;
        const int64_t qb = s.batchOffset(qm, n), kb = s.batchOffset(km, n),
                      ob = s.batchOffset(om, n), dob = s.batchOffset(dom, n);
        Carve carve{memory};
        uint16_t *Q = carve.take<uint16_t>(kTile * D);
        uint16_t *K = carve.take<uint16_t>(kTile * D);
        float *S = carve.take<float>(kWarps * 16 * kTile);
        float *M = carve.take<float>(kTile);
        float *L = carve.take<float>(kTile);
        loadTile(t, s, q, qm, qb, r0, nr, Q);
        for (int64_t r = t.thread; r < kTile; r += t.threads) {
          M[r] = -INFINITY;
          L[r] = 0.0f;
        }
        const int64_t end = s.keysEnd(r0, nr);
        for (int64_t c0 = 0; c0 < end; c0 += kTile) {
          const int64_t nc = s.T - c0 < kTile ? s.T - c0 : kTile;
          t.sync();
          loadTile(t, s, k, km, kb, c0, nc, K);
          t.sync();
          for (int w = t.warp; w < kWarps; w += t.warps) {
            if (16 * w >= nr)
              continue;
            float *Sw = S + w * 16 * kTile;
            for (int ct = 0; ct < kTile / 16; ++ct)
              warpMma<false, true>(t, s.type, Q + 16 * w * D,
                                   static_cast<int>(D), K + 16 * ct * D,
                                   static_cast<int>(D), Sw + 16 * ct, kTile,
                                   static_cast<int>(D / 16));
            t.syncWarp();
            for (int r = t.lane; r < 16; r += t.lanes) {
              const int64_t row = 16 * w + r, i = r0 + row;
              if (row >= nr)
                continue;
              const float *line = Sw + r * kTile;
              float tileMax = -INFINITY;
              for (int j = 0; j < kTile; ++j)
                if (s.sees(i, c0 + j))
                  tileMax =
                      tileMax < line[j] * s.scale ? line[j] * s.scale : tileMax;
              const float mOld = M[row];
              const float mNew = mOld < tileMax ? tileMax : mOld;
              float sum = 0.0f;
              for (int j = 0; j < kTile; ++j)
                if (s.sees(i, c0 + j))
                  sum += expf(line[j] * s.scale - mNew);
              L[row] =
                  (mOld == -INFINITY ? 0.0f : expf(mOld - mNew)) * L[row] + sum;
              M[row] = mNew;
            }
            t.syncWarp();
          }
        }
        t.sync();
        for (int64_t r = t.thread; r < nr; r += t.threads) {
          const int64_t i = r0 + r, at = n * s.rows() + (i - s.rowLo);
          lse[at] = M[r] + logf(L[r]);
          float dot = 0.0f;
          for (int64_t c = 0; c < D; ++c)
            dot +=
                static_cast<float>(o[ob + FlashShape::rowOffset(om, i, c)]) *
                static_cast<float>(dO[dob + FlashShape::rowOffset(dom, i, c)]);
          dots[at] = dot;
        }
      });
}

/// One entry of a score tile of the backward: P (recomputed from the
/// row's log-sum-exp) and dS = P (dP' factor - dot), where `score` is the
/// unscaled score, `dpDropped` dP' = dO . V of the (row i, key j) pair.
struct ScoreGrad {
  float pDropped, dS;
};
PPC_HD inline ScoreGrad scoreGrad(const FlashShape &s, int64_t flat, int64_t i,
                                  int64_t j, float score, float dpDropped,
                                  float lse, float dot) {
  if (!s.sees(i, j))
    return {0.0f, 0.0f};
  const float p = expf(score * s.scale - lse);
  const float f = s.factor(flat, i, j);
  return {p * f, p * (dpDropped * f - dot)};
}

/// dK and dV of a tile of keys (warp w: keys 16w..), over the query tiles
/// that see them.
void keyPassKernel(Stream stream, const FlashShape s, const ViewMap qm,
                   const uint16_t *q, const ViewMap km, const uint16_t *k,
                   const ViewMap vm, const uint16_t *v, const ViewMap dom,
                   const uint16_t *dO, const float *lse, const float *dots,
                   const ViewMap dkm, Elements dk, bool setK, const ViewMap dvm,
                   Elements dv, bool setV, size_t shared, bool &launched) {
  launched = launchBlocks(
      stream, s.batches * s.keyTiles(), kThreads, shared,
      [=] PPC_HD(const BlockThreads &t, int64_t block, char *memory) {
        const int64_t D = s.D, n = block / s.keyTiles();
        const int64_t c0 = (block % s.keyTiles()) * kTile;
        const int64_t nc = s.T - c0 < kTile ? s.T - c0 : kTile;
        const int64_t qb = s.batchOffset(qm, n), kb = s.batchOffset(km, n),
                      vb = s.batchOffset(vm, n), dob = s.batchOffset(dom, n),
                      flat = s.flatBase(n);
        Carve carve{memory};
        uint16_t *K = carve.take<uint16_t>(kTile * D);
        uint16_t *V = carve.take<uint16_t>(kTile * D);
        uint16_t *Q = carve.take<uint16_t>(kTile * D);
        uint16_t *G = carve.take<uint16_t>(kTile * D); // dO
        float *dK = carve.take<float>(kTile * D);
        float *dV = carve.take<float>(kTile * D);
        float *St = carve.take<float>(kWarps * 16 * kTile);
        uint16_t *Pt = carve.take<uint16_t>(kWarps * 16 * kTile);
        float *dPt = carve.take<float>(kWarps * 16 * kTile);
        uint16_t *dSt = carve.take<uint16_t>(kWarps * 16 * kTile);
        float *Lse = carve.take<float>(kTile);
        float *Dot = carve.take<float>(kTile);
        loadTile(t, s, k, km, kb, c0, nc, K);
        loadTile(t, s, v, vm, vb, c0, nc, V);
        for (int64_t e = t.thread; e < kTile * D; e += t.threads) {
          dK[e] = 0.0f;
          dV[e] = 0.0f;
        }
        // The first query tile with a row that sees the tile's first key.
        int64_t tile = 0;
        if (s.causal && c0 > s.rowLo)
          tile = (c0 - s.rowLo) / kTile;
        for (; tile < s.rowTiles(); ++tile) {
          const int64_t r0 = s.rowLo + tile * kTile;
          const int64_t nr = s.rowHi - r0 < kTile ? s.rowHi - r0 : kTile;
          t.sync();
          loadTile(t, s, q, qm, qb, r0, nr, Q);
          loadTile(t, s, dO, dom, dob, r0, nr, G);
          for (int64_t r = t.thread; r < kTile; r += t.threads) {
            const int64_t at = n * s.rows() + (r0 + r - s.rowLo);
            Lse[r] = r < nr ? lse[at] : 0.0f;
            Dot[r] = r < nr ? dots[at] : 0.0f;
          }
          t.sync();
          for (int w = t.warp; w < kWarps; w += t.warps) {
            if (16 * w >= nc)
              continue;
            float *Sw = St + w * 16 * kTile, *dPw = dPt + w * 16 * kTile;
            uint16_t *Pw = Pt + w * 16 * kTile, *dSw = dSt + w * 16 * kTile;
            // S^T and dP'^T of the warp's keys against the tile's rows.
            for (int rt = 0; rt < kTile / 16; ++rt) {
              warpMma<false, true>(t, s.type, K + 16 * w * D,
                                   static_cast<int>(D), Q + 16 * rt * D,
                                   static_cast<int>(D), Sw + 16 * rt, kTile,
                                   static_cast<int>(D / 16));
              warpMma<false, true>(t, s.type, V + 16 * w * D,
                                   static_cast<int>(D), G + 16 * rt * D,
                                   static_cast<int>(D), dPw + 16 * rt, kTile,
                                   static_cast<int>(D / 16));
            }
            t.syncWarp();
            for (int e = t.lane; e < 16 * kTile; e += t.lanes) {
              const int kr = e / kTile, rr = e % kTile;
              const int64_t j = c0 + 16 * w + kr, i = r0 + rr;
              const ScoreGrad g = rr < nr ? scoreGrad(s, flat, i, j, Sw[e],
                                                      dPw[e], Lse[rr], Dot[rr])
                                          : ScoreGrad{0.0f, 0.0f};
              Pw[e] = toHalfBits(s.type, g.pDropped);
              dSw[e] = toHalfBits(s.type, g.dS);
            }
            t.syncWarp();
            // dV += P'^T dO and dK += dS^T Q for the warp's keys.
            addProduct<false>(t, s.type, Pw, kTile, G, D, dV + 16 * w * D,
                              nullptr, Sw);
            addProduct<false>(t, s.type, dSw, kTile, Q, D, dK + 16 * w * D,
                              nullptr, Sw);
          }
        }
        t.sync();
        const int64_t dkb = dk ? s.batchOffset(dkm, n) : 0,
                      dvb = dv ? s.batchOffset(dvm, n) : 0;
        for (int64_t e = t.thread; e < kTile * D; e += t.threads) {
          const int64_t j = e / D, c = e % D;
          if (j >= nc)
            continue;
          if (dk)
            addInto(dk, dkb + FlashShape::rowOffset(dkm, c0 + j, c),
                    s.scale * dK[e], setK);
          if (dv)
            addInto(dv, dvb + FlashShape::rowOffset(dvm, c0 + j, c), dV[e],
                    setV);
        }
      });
}

/// dQ of a tile of query rows (warp w: rows 16w..), over the key tiles
/// they see.
void queryPassKernel(Stream stream, const FlashShape s, const ViewMap qm,
                     const uint16_t *q, const ViewMap km, const uint16_t *k,
                     const ViewMap vm, const uint16_t *v, const ViewMap dom,
                     const uint16_t *dO, const float *lse, const float *dots,
                     const ViewMap dqm, Elements dq, bool setQ, size_t shared,
                     bool &launched) {
  launched = launchBlocks(
      stream, s.batches * s.rowTiles(), kThreads, shared,
      [=] PPC_HD(const BlockThreads &t, int64_t block, char *memory) {
        const int64_t D = s.D, n = block / s.rowTiles();
        const int64_t r0 = s.rowLo + (block % s.rowTiles()) * kTile;
        const int64_t nr = s.rowHi - r0 < kTile ? s.rowHi - r0 : kTile;
        const int64_t qb = s.batchOffset(qm, n), kb = s.batchOffset(km, n),
                      vb = s.batchOffset(vm, n), dob = s.batchOffset(dom, n),
                      dqb = s.batchOffset(dqm, n), flat = s.flatBase(n);
        Carve carve{memory};
        uint16_t *Q = carve.take<uint16_t>(kTile * D);
        uint16_t *G = carve.take<uint16_t>(kTile * D); // dO
        uint16_t *K = carve.take<uint16_t>(kTile * D);
        uint16_t *V = carve.take<uint16_t>(kTile * D);
        float *dQ = carve.take<float>(kTile * D);
        float *S = carve.take<float>(kWarps * 16 * kTile);
        float *dP = carve.take<float>(kWarps * 16 * kTile);
        uint16_t *dS = carve.take<uint16_t>(kWarps * 16 * kTile);
        float *Lse = carve.take<float>(kTile);
        float *Dot = carve.take<float>(kTile);
        loadTile(t, s, q, qm, qb, r0, nr, Q);
        loadTile(t, s, dO, dom, dob, r0, nr, G);
        for (int64_t e = t.thread; e < kTile * D; e += t.threads)
          dQ[e] = 0.0f;
        for (int64_t r = t.thread; r < kTile; r += t.threads) {
          const int64_t at = n * s.rows() + (r0 + r - s.rowLo);
          Lse[r] = r < nr ? lse[at] : 0.0f;
          Dot[r] = r < nr ? dots[at] : 0.0f;
        }
        const int64_t end = s.keysEnd(r0, nr);
        for (int64_t c0 = 0; c0 < end; c0 += kTile) {
          const int64_t nc = s.T - c0 < kTile ? s.T - c0 : kTile;
          t.sync();
          loadTile(t, s, k, km, kb, c0, nc, K);
          loadTile(t, s, v, vm, vb, c0, nc, V);
          t.sync();
          for (int w = t.warp; w < kWarps; w += t.warps) {
            if (16 * w >= nr)
              continue;
            float *Sw = S + w * 16 * kTile, *dPw = dP + w * 16 * kTile;
            uint16_t *dSw = dS + w * 16 * kTile;
            for (int ct = 0; ct < kTile / 16; ++ct) {
              warpMma<false, true>(t, s.type, Q + 16 * w * D,
                                   static_cast<int>(D), K + 16 * ct * D,
                                   static_cast<int>(D), Sw + 16 * ct, kTile,
                                   static_cast<int>(D / 16));
              warpMma<false, true>(t, s.type, G + 16 * w * D,
                                   static_cast<int>(D), V + 16 * ct * D,
                                   static_cast<int>(D), dPw + 16 * ct, kTile,
                                   static_cast<int>(D / 16));
            }
            t.syncWarp();
            for (int e = t.lane; e < 16 * kTile; e += t.lanes) {
              const int rr = e / kTile, kc = e % kTile;
              const int64_t row = 16 * w + rr;
              const ScoreGrad g =
                  row < nr ? scoreGrad(s, flat, r0 + row, c0 + kc, Sw[e],
                                       dPw[e], Lse[row], Dot[row])
                           : ScoreGrad{0.0f, 0.0f};
              dSw[e] = toHalfBits(s.type, g.dS);
            }
            t.syncWarp();
            // dQ += dS K for the warp's rows.
            addProduct<false>(t, s.type, dSw, kTile, K, D, dQ + 16 * w * D,
                              nullptr, Sw);
          }
        }
        t.sync();
        for (int64_t e = t.thread; e < kTile * D; e += t.threads) {
          const int64_t r = e / D, c = e % D;
          if (r < nr)
            addInto(dq, dqb + FlashShape::rowOffset(dqm, r0 + r, c),
                    s.scale * dQ[e], setQ);
        }
      });
}

const uint16_t *bits(const KernelView &view) {
  return static_cast<const uint16_t *>(view.elements.data);
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
  const size_t most =
      std::max({forwardShared(r.D), keyPassShared(r.D), queryPassShared(r.D)});
  return most <= maxBlockSharedBytes();
}

absl::Status flashAttentionForward(ExecContext &ctx, const AttentionRanges &r,
                                   const DropoutMask &mask, const KernelView &q,
                                   const KernelView &k, const KernelView &v,
                                   const KernelView &result) {
  const FlashShape s = flashShape(r, mask, q.shape, q.elements.type);
  if (s.batches == 0 || s.rows() <= 0)
    return absl::OkStatus();
  bool launched = false;
  forwardKernel(ctx.stream, s, viewMap(q, r), bits(q), viewMap(k, r), bits(k),
                viewMap(v, r), bits(v), viewMap(result, r), result.elements,
                forwardShared(r.D), launched);
  return launched ? absl::OkStatus()
                  : absl::InternalError(
                        "the device refused the attention kernel's launch");
}

absl::Status flashAttentionBackward(
    ExecContext &ctx, const AttentionRanges &r, const DropoutMask &mask,
    const KernelView &q, const KernelView &k, const KernelView &v,
    const KernelView &result, const KernelView &dResult, const KernelView &dq,
    const KernelView &dk, const KernelView &dv) {
  const FlashShape s = flashShape(r, mask, q.shape, q.elements.type);
  // Gradients are written where the kernels cover their views: dK and dV
  // over every key of the partition's batches, dQ over its rows.
  const int64_t keys = s.batches * s.T * s.D, rows = s.batches * s.rows() * s.D;
  const bool setQ = writesGradient(ctx, dq, dq.count() == rows);
  const bool setK = writesGradient(ctx, dk, dk.count() == keys);
  const bool setV = writesGradient(ctx, dv, dv.count() == keys);
  if (s.batches == 0 || s.rows() <= 0)
    return absl::OkStatus();
  float *lse = ctx.workspace->floats(s.batches * s.rows());
  float *dots = ctx.workspace->floats(s.batches * s.rows());
  if (!lse || !dots)
    return absl::ResourceExhaustedError(
        "out of device memory for the attention's row statistics");
  const ViewMap qm = viewMap(q, r), km = viewMap(k, r), vm = viewMap(v, r),
                dom = viewMap(dResult, r);
  bool launched = false;
  statsKernel(ctx.stream, s, qm, bits(q), km, bits(k), viewMap(result, r),
              result.elements, dom, dResult.elements, lse, dots,
              forwardShared(r.D), launched);
  if (launched && (dk.present() || dv.present()))
    keyPassKernel(ctx.stream, s, qm, bits(q), km, bits(k), vm, bits(v), dom,
                  bits(dResult), lse, dots,
                  dk.present() ? viewMap(dk, r) : ViewMap(), dk.elements, setK,
                  dv.present() ? viewMap(dv, r) : ViewMap(), dv.elements, setV,
                  keyPassShared(r.D), launched);
  if (launched && dq.present())
    queryPassKernel(ctx.stream, s, qm, bits(q), km, bits(k), vm, bits(v), dom,
                    bits(dResult), lse, dots, viewMap(dq, r), dq.elements, setQ,
                    queryPassShared(r.D), launched);
  return launched ? absl::OkStatus()
                  : absl::InternalError(
                        "the device refused the attention kernel's launch");
}

} // namespace ppc::runtime::cuda
