//===- DataMovementKernels.cu - reshape, transpose, concat, split, ... ----===//
//
// The cuda kernels of the cpu backend's DataMovementKernels.cpp, with its
// semantics and errors. Copies between boxes in global coordinates: each
// op's element map is the access of its iteration space (transpose
// permutes, concat and split shift along the axis, slice strides, pad
// shifts by the low padding, reshape goes through the global flat index).
// The host checks that the views hold what the partition's box reaches and
// turns every map into strided accesses, as the cpu kernels do
// (DataMovementMaps.h); one thread per point of the iteration box then
// moves one element, or 16 bytes where source and destination run
// contiguously alike (after merging the dims both walk as one). Backward adds
// the output gradient back along the same map (injective: no two threads write
// one element). gather's gathered rows are a reduction dim: a partition holding
// rows [a, b) of `data` writes only the elements whose index falls there, zero
// elsewhere, and its backward sums into those rows with atomicAddFloat (into a
// float32 block of the rows when the gradient is stored in 16 bits, rounded
// into it once, as the cpu backend's widened block). An index out of range is
// found on the device and reported once the step's work is done (DeviceChecks):
// nothing here waits for its stream. Values move as stored (native).
//===----------------------------------------------------------------------===//

#include "CudaKernels.h"

#include "DataMovementMaps.h"
#include "ppc/Runtime/Boxes.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <mutex>
#include <optional>

namespace ppc::runtime::cuda {
namespace {

using Views = std::vector<KernelView>;
using Copies = std::vector<std::optional<BoxCopy>>;

//===----------------------------------------------------------------------===//
// Strided accesses as kernels capture them
//===----------------------------------------------------------------------===//

/// A view's buffer offset as a linear function of the iteration point:
/// base + sum_d (p[d] - lo[d]) * strides[d] (a StridedAccess as POD:
/// kernels capture it).
struct Access {
  int64_t base = 0;
  int64_t strides[kMaxRank] = {};
};

/// `access` for a kernel (its rank is a view's, <= kMaxRank: checked by the
/// dispatch).
Access accessOf(const StridedAccess &access) {
  Access a;
  a.base = access.base;
  for (size_t d = 0; d < access.strides.size() && d < size_t(kMaxRank); ++d)
    a.strides[d] = access.strides[d];
  return a;
}

/// The iteration box a kernel walks, by its extents.
struct IterBox {
  int32_t rank = 0;
  int64_t extent[kMaxRank] = {};

  int64_t count() const {
    int64_t n = 1;
    for (int d = 0; d < rank; ++d)
      n *= extent[d] > 0 ? extent[d] : 0;
    return n;
  }
};

IterBox iterBox(const std::vector<int64_t> &lo,
                const std::vector<int64_t> &hi) {
  IterBox box;
  box.rank = static_cast<int32_t>(lo.size());
  for (size_t d = 0; d < lo.size() && d < size_t(kMaxRank); ++d)
    box.extent[d] = hi[d] - lo[d];
  return box;
}

/// Offsets of the iteration box's point number `i` under two accesses.
PPC_HD inline void offsetsOf(const IterBox &it, int64_t i, const Access &a,
                             const Access &b, int64_t &oa, int64_t &ob) {
  oa = a.base;
  ob = b.base;
  for (int d = it.rank - 1; d >= 0; --d) {
    const int64_t c = i % it.extent[d];
    i /= it.extent[d];
    oa += c * a.strides[d];
    ob += c * b.strides[d];
  }
}

//===----------------------------------------------------------------------===//
// Device kernels
//===----------------------------------------------------------------------===//

/// `it` with the dims that both accesses walk as one merged (dim d and the
/// next, where each access's stride of d is the next's times its extent)
/// and dims of extent 1 dropped: fewer divisions per point.
void collapse(IterBox &it, Access &a, Access &b) {
  IterBox out;
  Access oa, ob;
  oa.base = a.base;
  ob.base = b.base;
  for (int d = 0; d < it.rank; ++d) {
    if (it.extent[d] == 1 && it.rank > 1)
      continue;
    const int last = out.rank - 1;
    if (last >= 0 && oa.strides[last] == a.strides[d] * it.extent[d] &&
        ob.strides[last] == b.strides[d] * it.extent[d]) {
      out.extent[last] *= it.extent[d];
      oa.strides[last] = a.strides[d];
      ob.strides[last] = b.strides[d];
      continue;
    }
    out.extent[out.rank] = it.extent[d];
    oa.strides[out.rank] = a.strides[d];
    ob.strides[out.rank] = b.strides[d];
    ++out.rank;
  }
  if (out.rank == 0) { // every extent 1
    out.rank = 1;
    out.extent[0] = 1;
  }
  it = out;
  a = oa;
  b = ob;
}

/// 16 bytes from `src` to `dst`, both 16-byte aligned.
PPC_HD inline void copy16(const void *src, void *dst) {
#if defined(__CUDA_ARCH__)
  *static_cast<uint4 *>(dst) = *static_cast<const uint4 *>(src);
#else
  std::memcpy(dst, src, 16);
#endif
}

/// Elements of `type` a 16-byte move takes along `it`'s innermost dim
/// between the two accesses (1: element by element): both walk it
/// contiguously, every run and offset starts on 16 bytes.
int vectorWidth(const IterBox &it, DType type, const void *src, Access a,
                const void *dst, Access b) {
  const int width = 16 / bytesOf(type), last = it.rank - 1;
  if (last < 0 || a.strides[last] != 1 || b.strides[last] != 1 ||
      it.extent[last] % width != 0 || a.base % width != 0 ||
      b.base % width != 0 || reinterpret_cast<uintptr_t>(src) % 16 != 0 ||
      reinterpret_cast<uintptr_t>(dst) % 16 != 0)
    return 1;
  for (int d = 0; d < last; ++d)
    if (a.strides[d] % width != 0 || b.strides[d] % width != 0)
      return 1;
  return width;
}

/// dst (+)= src along the accesses: collapsed dims, and 16 bytes a thread
/// where a copy between buffers of one type runs contiguously in both;
/// else one thread per point of `it`.
void copyKernel(Stream stream, IterBox it, Elements src, Access a, Elements dst,
                Access b, bool accumulate) {
  collapse(it, a, b);
  const int width = accumulate || src.type != dst.type
                        ? 1
                        : vectorWidth(it, src.type, src.data, a, dst.data, b);
  if (width > 1) {
    IterBox runs = it;
    runs.extent[it.rank - 1] /= width;
    Access ra = a, rb = b;
    ra.strides[it.rank - 1] = rb.strides[it.rank - 1] = width;
    const int bytes = bytesOf(src.type);
    char *from = static_cast<char *>(src.data);
    char *to = static_cast<char *>(dst.data);
    launch(stream, runs.count(), [=] PPC_HD(int64_t i) {
      int64_t oa, ob;
      offsetsOf(runs, i, ra, rb, oa, ob);
      copy16(from + oa * bytes, to + ob * bytes);
    });
    return;
  }
  launch(stream, it.count(), [=] PPC_HD(int64_t i) {
    int64_t oa, ob;
    offsetsOf(it, i, a, b, oa, ob);
    if (accumulate)
      dst[ob] += src[oa];
    else
      dst[ob] = src[oa];
  });
}

void fillKernel(Stream stream, Elements data, int64_t n, float value) {
  launch(stream, n, [=] PPC_HD(int64_t i) { data[i] = value; });
}

/// Reshape: element r of the `to` box (+)= the element of the `from` box
/// with the same global flat index; `shift` >= 0 when both boxes are runs
/// of the flat order (element r is from's r + shift).
void reshapeKernel(Stream stream, DeviceBox from, Elements src, DeviceBox to,
                   Elements dst, int64_t shift, bool toIsResult,
                   bool set = false) {
  // to: the result (forward: dst = result) or the result grad (backward:
  // src = dy over `to`, dst = dx over `from`).
  launch(stream, to.count(), [=] PPC_HD(int64_t r) {
    int64_t i;
    if (shift >= 0) {
      i = r + shift;
    } else {
      int64_t index[kMaxRank];
      to.indexOf(r, index);
      int64_t flat = to.globalFlat(index);
      for (int d = from.rank - 1; d >= 0; --d) {
        index[d] = flat % from.shape[d];
        flat /= from.shape[d];
      }
      if (!from.contains(index))
        return; // reported by the host check
      i = from.offsetOf(index);
    }
    if (toIsResult)
      dst[r] = src[i];
    else
      addInto(dst, i, src[r], set);
  });
}

/// The gather of one partition: the result box, the indices and data
/// (with the gathered dim fixed at the first held row) accesses.
struct GatherPlan {
  IterBox it;
  Access indexAccess, dataAccess;
  int64_t rows = 0, rowLo = 0, rowHi = 0, rowStride = 0;
};

/// Forward (dy null): result = data's row or 0. Backward: dData's held
/// rows += dy. A bad index flags `bad` with the key (2^32 - 1 - its offset
/// in the indices view) << 32 | its bits: the least key is the largest
/// offset, the one the cpu kernel reports.
void gatherKernel(Stream stream, GatherPlan g, Elements indices, Elements data,
                  Elements result, Elements dy, float *dData,
                  unsigned long long *bad) {
  launch(stream, g.it.count(), [=] PPC_HD(int64_t i) {
    int64_t oi, od;
    offsetsOf(g.it, i, g.indexAccess, g.dataAccess, oi, od);
    int64_t row = -1;
    const float index = indices[oi];
    if (!gatherRow(index, g.rows, row)) {
      flagLeast(bad, (0xffffffffull - static_cast<unsigned long long>(oi))
                             << 32 |
                         floatBits(index));
      row = -1;
    }
    const bool held = row >= g.rowLo && row < g.rowHi;
    if (!dy) {
      result[i] =
          held ? static_cast<float>(data[od + (row - g.rowLo) * g.rowStride])
               : 0.0f;
      return;
    }
    if (held)
      atomicAddFloat(dData + od + (row - g.rowLo) * g.rowStride, dy[i]);
  });
}

//===----------------------------------------------------------------------===//
// Copies along maps (transpose, slice, pad, concat, split)
//===----------------------------------------------------------------------===//

/// Enqueues a checked copy from `src` to `dst`.
void runCopy(Stream stream, const BoxCopy &copy, Elements src, Elements dst,
             bool accumulate) {
  copyKernel(stream, iterBox(copy.lo, copy.hi), src, accessOf(copy.src), dst,
             accessOf(copy.dst), accumulate);
}

CudaKernel copyMapKernel(CopyMapFn mapOf) {
  CudaKernel kernel;
  kernel.native = true;
  kernel.overwrites = true;
  kernel.forward = [mapOf](const OpDesc &op, const KernelContext &,
                           ExecContext &ctx, const Views &inputs,
                           const Views &outputs,
                           const Views &) -> absl::Status {
    BoxCopy copy;
    std::optional<float> fill;
    if (absl::Status s = copyMapForward(op, mapOf, inputs, outputs, copy, fill);
        !s.ok())
      return s;
    const KernelView &result = outputs[0];
    if (fill)
      fillKernel(ctx.stream, result.elements, result.box.count(), *fill);
    runCopy(ctx.stream, copy, inputs[0].elements, result.elements,
            /*accumulate=*/false);
    return {};
  };
  kernel.backward = [mapOf](const OpDesc &op, const KernelContext &,
                            ExecContext &ctx, const Views &inputs,
                            const Views &outputs, const Views &outputGrads,
                            const Views &inputGrads,
                            const Views &) -> absl::Status {
    std::optional<BoxCopy> copy;
    if (absl::Status s = copyMapBackward(op, mapOf, inputs, outputs,
                                         outputGrads, inputGrads, copy);
        !s.ok())
      return s;
    // An overwritten gradient is written by the copy where it covers it.
    const KernelView &dx = inputGrads[0];
    const bool set = writesGradient(
        ctx, dx, copy && boxVolume(copy->lo, copy->hi) == dx.count());
    if (copy)
      runCopy(ctx.stream, *copy, outputGrads[0].elements, dx.elements,
              /*accumulate=*/!set);
    return {};
  };
  return kernel;
}

/// Copy i moves piece i's data into the whole, or the whole into piece i
/// (`toPieces`); pieces without a copy are skipped.
void runPieceCopies(Stream stream, const Copies &copies, const Views &pieces,
                    const KernelView &whole, bool toPieces, bool accumulate) {
  for (size_t i = 0; i < copies.size(); ++i)
    if (copies[i])
      runCopy(stream, *copies[i],
              toPieces ? whole.elements : pieces[i].elements,
              toPieces ? pieces[i].elements : whole.elements, accumulate);
}

/// Concat (`concat`: the pieces are the operands, the whole is the result)
/// or split (the pieces are the results, the whole is the operand).
CudaKernel pieceKernel(bool concat) {
  CudaKernel kernel;
  kernel.native = true;
  kernel.overwrites = true;
  kernel.forward = [concat](const OpDesc &op, const KernelContext &,
                            ExecContext &ctx, const Views &inputs,
                            const Views &outputs,
                            const Views &) -> absl::Status {
    Copies copies;
    if (absl::Status s =
            pieceForwardCopies(op, concat, inputs, outputs, copies);
        !s.ok())
      return s;
    runPieceCopies(ctx.stream, copies, concat ? inputs : outputs,
                   concat ? outputs[0] : inputs[0], /*toPieces=*/!concat,
                   /*accumulate=*/false);
    return {};
  };
  kernel.backward = [concat](const OpDesc &op, const KernelContext &,
                             ExecContext &ctx, const Views &inputs,
                             const Views &outputs, const Views &outputGrads,
                             const Views &inputGrads,
                             const Views &) -> absl::Status {
    Copies copies;
    if (absl::Status s = pieceBackwardCopies(op, concat, inputs, outputs,
                                             outputGrads, inputGrads, copies);
        !s.ok())
      return s;
    // Overwritten gradients are written where the copies cover them:
    // concat's operand grads by one copy each, split's operand grad by the
    // result grads' copies together (they do not overlap).
    if (concat) {
      for (size_t i = 0; i < copies.size(); ++i) {
        const bool set = writesGradient(
            ctx, inputGrads[i],
            copies[i] && boxVolume(copies[i]->lo, copies[i]->hi) ==
                             inputGrads[i].count());
        if (copies[i])
          runCopy(ctx.stream, *copies[i], outputGrads[0].elements,
                  inputGrads[i].elements, /*accumulate=*/!set);
      }
      return {};
    }
    int64_t covered = 0;
    for (const std::optional<BoxCopy> &copy : copies)
      if (copy)
        covered += boxVolume(copy->lo, copy->hi);
    const bool set =
        writesGradient(ctx, inputGrads[0], covered == inputGrads[0].count());
    runPieceCopies(ctx.stream, copies, outputGrads, inputGrads[0],
                   /*toPieces=*/false, /*accumulate=*/!set);
    return {};
  };
  return kernel;
}

//===----------------------------------------------------------------------===//
// Reshape
//===----------------------------------------------------------------------===//

/// Whether the box of `input` holds every global flat index of the box of
/// `result`: row by row of the result, each row a flat range cut where the
/// input's innermost dim wraps. Results are remembered per geometry (a plan
/// runs the same boxes every step).
bool inputHoldsResult(const TensorView &input, const TensorView &result) {
  using Key = std::vector<int64_t>;
  static std::mutex mutex;
  static std::map<Key, bool> known;
  Key key;
  for (const TensorView *v : {&input, &result}) {
    key.push_back(v->rank());
    key.insert(key.end(), v->shape.begin(), v->shape.end());
    key.insert(key.end(), v->lo.begin(), v->lo.end());
    key.insert(key.end(), v->hi.begin(), v->hi.end());
  }
  {
    std::lock_guard<std::mutex> lock(mutex);
    auto it = known.find(key);
    if (it != known.end())
      return it->second;
  }
  const int64_t inRank = input.rank(), outRank = result.rank();
  bool holds = true;
  if (inRank > 0) {
    const int64_t last = input.shape[inRank - 1];
    const int64_t lastLo = input.lo[inRank - 1], lastHi = input.hi[inRank - 1];
    std::vector<int64_t> outer(inRank - 1);
    auto rangeHeld = [&](int64_t f, int64_t end) {
      while (f < end) {
        int64_t inner = f % last, q = f / last;
        int64_t chunkEnd = std::min(end, f - inner + last);
        if (inner < lastLo || inner + (chunkEnd - f) > lastHi)
          return false;
        for (int64_t d = inRank - 2; d >= 0; --d) {
          outer[d] = q % input.shape[d];
          q /= input.shape[d];
          if (outer[d] < input.lo[d] || outer[d] >= input.hi[d])
            return false;
        }
        f = chunkEnd;
      }
      return true;
    };
    if (outRank == 0) {
      holds = rangeHeld(0, 1);
    } else {
      std::vector<int64_t> strides = rowMajorStrides(result.shape);
      const int64_t rowLength = result.extent(outRank - 1);
      std::vector<int64_t> index(result.lo.begin(), result.lo.end());
      // Odometer over the result's rows (all dims but the last).
      while (holds) {
        int64_t f = 0;
        for (int64_t d = 0; d < outRank; ++d)
          f += index[d] * strides[d];
        holds = rangeHeld(f, f + rowLength);
        int64_t d = outRank - 2;
        for (; d >= 0; --d) {
          if (++index[d] < result.hi[d])
            break;
          index[d] = result.lo[d];
        }
        if (d < 0)
          break;
      }
    }
  }
  std::lock_guard<std::mutex> lock(mutex);
  known.emplace(std::move(key), holds);
  return holds;
}

/// The reshape from the `from` box (input or its grad) to the `to` box
/// (result or its grad): the shift of the flat-run case (-1 otherwise).
absl::Status planReshape(const OpDesc &op, const TensorView &from,
                         const TensorView &to, int64_t &shift) {
  if (absl::Status s = reshapeShift(op, from, to, shift); !s.ok())
    return s;
  if (shift < 0 && !inputHoldsResult(from, to))
    return reshapeMissing(op);
  return {};
}

absl::Status reshapeForward(const OpDesc &op, const KernelContext &,
                            ExecContext &ctx, const Views &inputs,
                            const Views &outputs, const Views &) {
  if (absl::Status s = checkForwardArity(op, inputs, 1, outputs, 1); !s.ok())
    return s;
  const KernelView &input = inputs[0], &result = outputs[0];
  int64_t shift = -1;
  if (absl::Status s = planReshape(op, input, result, shift); !s.ok())
    return s;
  reshapeKernel(ctx.stream, input.box, input.elements, result.box,
                result.elements, shift, /*toIsResult=*/true);
  return {};
}

absl::Status reshapeBackward(const OpDesc &op, const KernelContext &,
                             ExecContext &ctx, const Views &inputs,
                             const Views &outputs, const Views &outputGrads,
                             const Views &inputGrads, const Views &) {
  if (absl::Status s = checkBackwardArity(op, inputs, 1, outputs, 1,
                                          outputGrads, inputGrads);
      !s.ok())
    return s;
  const KernelView &dx = inputGrads[0], &dy = outputGrads[0];
  if (!dx.present())
    return {};
  int64_t shift = -1;
  if (absl::Status s = planReshape(op, dx, dy, shift); !s.ok())
    return s;
  // Every element of dy lands on its own element of dx: equal counts
  // cover dx.
  reshapeKernel(ctx.stream, dx.box, dy.elements, dy.box, dx.elements, shift,
                /*toIsResult=*/false,
                writesGradient(ctx, dx, dx.count() == dy.count()));
  return {};
}

//===----------------------------------------------------------------------===//
// Gather
//===----------------------------------------------------------------------===//

/// As the cpu's walkGather: checks (gatherGeometry), then runs the forward
/// (dy null) or the backward over the result (or result grad) box; a bad
/// index is reported once the work is done, the last in the walk's order
/// (the largest offset in the indices view), as the cpu kernel reports it.
absl::Status runGather(const OpDesc &op, const KernelContext &kctx,
                       ExecContext &ctx, const KernelView &data,
                       const KernelView &indices, const KernelView &result,
                       Elements dy, Elements dData) {
  GatherGeometry geometry;
  if (absl::Status s = gatherGeometry(op, data, indices, result, geometry);
      !s.ok())
    return s;
  if (!geometry.holdsRows) { // every element is someone else's
    if (!dy)
      fillKernel(ctx.stream, result.elements, result.box.count(), 0.0f);
    else
      writesGradient(ctx, data, false); // no contribution: an overwrite is 0
    return {};
  }
  GatherPlan g;
  g.rows = geometry.rows;
  g.rowLo = geometry.rowLo;
  g.rowHi = geometry.rowHi;
  g.rowStride = geometry.rowStride;
  g.it = iterBox(result.lo, result.hi);
  g.indexAccess = accessOf(geometry.index);
  g.dataAccess = accessOf(geometry.data);
  if (g.it.count() == 0) {
    if (dy)
      writesGradient(ctx, data, false);
    return {};
  }
  const int64_t rows = g.rows;
  unsigned long long *bad =
      ctx.checks
          ? ctx.checks->slot(
                kctx.instruction,
                [op, rows](unsigned long long key) {
                  return gatherIndexError(
                      op, bitsFloat(static_cast<uint32_t>(key & 0xffffffffu)),
                      rows);
                })
          : nullptr;
  if (!bad)
    return absl::ResourceExhaustedError(
        op.kind + ": out of device memory for its index check");
  // The backward sums into float32: the gradient itself, or a block of it
  // rounded back once.
  float *sums = nullptr;
  const int64_t held = data.box.count();
  if (dy && dData.type != DType::F32) {
    // An overwritten gradient starts its block at 0, then is written.
    const bool set = writesGradient(ctx, data, true);
    sums = ctx.workspace ? ctx.workspace->floats(held) : nullptr;
    if (!sums)
      return absl::ResourceExhaustedError(
          op.kind + ": out of device memory for its float32 gradient");
    launch(ctx.stream, held, [=] PPC_HD(int64_t i) {
      sums[i] = set ? 0.0f : static_cast<float>(dData[i]);
    });
  } else if (dy) {
    writesGradient(ctx, data, false); // atomics add into it
    sums = static_cast<float *>(dData.data);
  }
  gatherKernel(ctx.stream, g, indices.elements, data.elements, result.elements,
               dy, sums, bad);
  if (sums && sums != dData.data)
    launch(ctx.stream, held, [=] PPC_HD(int64_t i) { dData[i] = sums[i]; });
  return {};
}

absl::Status gatherForward(const OpDesc &op, const KernelContext &kctx,
                           ExecContext &ctx, const Views &inputs,
                           const Views &outputs, const Views &) {
  if (absl::Status s = checkForwardArity(op, inputs, 2, outputs, 1); !s.ok())
    return s;
  return runGather(op, kctx, ctx, inputs[0], inputs[1], outputs[0], Elements(),
                   Elements());
}

absl::Status gatherBackward(const OpDesc &op, const KernelContext &kctx,
                            ExecContext &ctx, const Views &inputs,
                            const Views &outputs, const Views &outputGrads,
                            const Views &inputGrads, const Views &) {
  if (absl::Status s = checkBackwardArity(op, inputs, 2, outputs, 1,
                                          outputGrads, inputGrads);
      !s.ok())
    return s;
  // Indices get no gradient; data's is a scatter-add over the held rows.
  const KernelView &dData = inputGrads[0];
  if (!dData.present())
    return {};
  const KernelView &dy = outputGrads[0];
  return runGather(op, kctx, ctx, dData, inputs[1], dy, dy.elements,
                   dData.elements);
}

} // namespace

void registerDataMovementKernels(CudaKernelTable &table) {
  table["ppc.reshape"] = {reshapeForward, reshapeBackward, true, true};
  table["ppc.transpose"] = copyMapKernel(transposeMap);
  table["ppc.slice"] = copyMapKernel(sliceMap);
  table["ppc.pad"] = copyMapKernel(padMap);
  table["ppc.concat"] = pieceKernel(/*concat=*/true);
  table["ppc.split"] = pieceKernel(/*concat=*/false);
  table["ppc.gather"] = {gatherForward, gatherBackward, true, true};
}

} // namespace ppc::runtime::cuda
