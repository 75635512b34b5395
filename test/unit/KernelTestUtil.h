//===- KernelTestUtil.h - helpers for the cpu kernel tests ------*- C++ -*-===//
//
// Shared by the CpuKernels*Test files. A test holds every tensor whole, as a
// row-major std::vector<float>; a partition of an op is described by the boxes
// its operand and result views hold. runOp then does what a plan does:
//   - copies each partition's operand boxes out of the whole tensors;
//   - runs every stage of the forward kernel of every partition, summing the
//     scratch buffers over the partitions between stages (a kernel writes
//     zeros where it holds nothing, so summing over all partitions equals
//     summing over those that share channels); softmax_cross_entropy's
//     row statistics instead go as its StagedKernel says (the row maxima
//     max-reduced after stage 0, the sums summed after stage 1, over the
//     partitions holding the same rows);
//   - assembles each output as the SUM of the partitions' output boxes
//     (disjoint boxes are just placed; partial sums of a split reduction add
//     up);
//   - writes each partition's operand boxes back after the forward (in-place
//     updates, e.g. batch_norm's running statistics; replicas agree);
//   - with output gradients, runs every stage of the backward kernel with
//     grad views over the operand boxes (the forward's scratch first, then
//     the backward's own), and assembles each input gradient as the SUM of
//     the partitions' grad boxes (halos and replicated weights add up, as
//     the plan sends them on). The grad views start at kGradBase, which is
//     subtracted afterwards, so a kernel that overwrites instead of adding
//     fails.
//
// API (everything in namespace ppc::runtime::test):
//   Box, wholeBox(shape), withRange(box, dim, lo, hi), windowRange(...)
//   Range, splitRange(size, parts), gridBoxes(shape, parts), boxName(box)
//   numElementsOf(shape), randomValues(count, seed, lo, hi)
//   boxView(data, shape, box), viewOf(data, shape)      views over vectors
//   extractBox(whole, shape, box), addBox/writeBox(whole, shape, box, part)
//   makeOp(kind, operandShapes, resultShapes, attributes)
//   Partition, wholePartition(op)
//   OpRun runOp(op, ctx, inputs, partitions, outputGrads, needsGrad)
//   expectClose(actual, expected, atol, rtol, what)     gtest expectations
//   checkGradients(op, ctx, inputs, needsGrad, options) finite differences
//   expectPartitionsMatchWhole(op, ctx, inputs, partitions, needsGrad, tol)
//
//===----------------------------------------------------------------------===//

#ifndef PPC_TEST_UNIT_KERNELTESTUTIL_H
#define PPC_TEST_UNIT_KERNELTESTUTIL_H

#include "StatusText.h"
#include "ppc/Runtime/Kernels.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <random>
#include <string>
#include <vector>

using ppc::test::statusText;

namespace ppc::runtime::test {

/// A box [lo, hi) of a tensor.
struct Box {
  std::vector<int64_t> lo, hi;
};

inline int64_t numElementsOf(const std::vector<int64_t> &shape) {
  int64_t n = 1;
  for (int64_t size : shape)
    n *= size;
  return n;
}

inline Box wholeBox(const std::vector<int64_t> &shape) {
  return {std::vector<int64_t>(shape.size(), 0), shape};
}

/// A range [first, second) of one dim.
using Range = std::pair<int64_t, int64_t>;

/// [0, size) cut into `parts` nearly equal ranges.
inline std::vector<Range> splitRange(int64_t size, int64_t parts) {
  std::vector<Range> ranges;
  for (int64_t p = 0; p < parts; ++p)
    ranges.push_back({size * p / parts, size * (p + 1) / parts});
  return ranges;
}

/// `box` with dim `dim` narrowed to [lo, hi).
inline Box withRange(Box box, size_t dim, int64_t lo, int64_t hi) {
  box.lo[dim] = lo;
  box.hi[dim] = hi;
  return box;
}

/// The boxes of an even grid split of `shape`: dim d in parts[d] pieces, the
/// first size % parts pieces one longer (as ppc::partitionRanges).
inline std::vector<Box> gridBoxes(const std::vector<int64_t> &shape,
                                  const std::vector<int64_t> &parts) {
  std::vector<Box> boxes = {wholeBox(shape)};
  for (size_t d = 0; d < shape.size(); ++d) {
    std::vector<Box> next;
    for (const Box &box : boxes) {
      int64_t base = shape[d] / parts[d], extra = shape[d] % parts[d];
      for (int64_t p = 0; p < parts[d]; ++p) {
        int64_t lo = p * base + std::min(p, extra);
        next.push_back(withRange(box, d, lo, lo + base + (p < extra ? 1 : 0)));
      }
    }
    boxes = std::move(next);
  }
  return boxes;
}

/// "[lo:hi,lo:hi,...]", for test messages.
inline std::string boxName(const Box &b) {
  std::string s = "[";
  for (size_t d = 0; d < b.lo.size(); ++d)
    s += (d ? "," : "") + std::to_string(b.lo[d]) + ":" +
         std::to_string(b.hi[d]);
  return s + "]";
}

/// The tensor range a window access reads for iteration range [lo, hi)
/// (IterationSpace's DimAccess with divisor 1), clipped to [0, size): a conv
/// or pool input's rows for output rows [lo, hi) are
/// windowRange(lo, hi, stride, -padLo, (k - 1) * dilation + 1, H).
inline Range windowRange(int64_t lo, int64_t hi, int64_t stride, int64_t offset,
                         int64_t extent, int64_t size) {
  int64_t first = lo * stride + offset;
  int64_t last = (hi - 1) * stride + offset + extent;
  return {std::max<int64_t>(0, first), std::min(size, last)};
}

/// `count` values uniform in [lo, hi), reproducible from `seed`.
inline std::vector<float> randomValues(int64_t count, uint32_t seed,
                                       float lo = -1.0f, float hi = 1.0f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> values(count);
  for (float &v : values)
    v = dist(rng);
  return values;
}

/// A view of `data`, which holds `box` of a tensor of `shape` row-major.
inline TensorView boxView(std::vector<float> &data,
                          const std::vector<int64_t> &shape, const Box &box) {
  TensorView view;
  view.data = data.data();
  view.shape = shape;
  view.lo = box.lo;
  view.hi = box.hi;
  return view;
}

/// A view of `data`, which holds the whole tensor.
inline TensorView viewOf(std::vector<float> &data,
                         const std::vector<int64_t> &shape) {
  return boxView(data, shape, wholeBox(shape));
}

/// Calls fn(boxOffset, wholeOffset) for every element of `box`.
template <typename Fn>
void forEachBoxElement(const std::vector<int64_t> &shape, const Box &box,
                       Fn &&fn) {
  size_t rank = shape.size();
  for (size_t d = 0; d < rank; ++d)
    if (box.hi[d] <= box.lo[d])
      return;
  std::vector<int64_t> index = box.lo;
  int64_t boxOffset = 0;
  while (true) {
    int64_t wholeOffset = 0;
    for (size_t d = 0; d < rank; ++d)
      wholeOffset = wholeOffset * shape[d] + index[d];
    fn(boxOffset++, wholeOffset);
    size_t d = rank;
    while (d > 0) {
      --d;
      if (++index[d] < box.hi[d])
        break;
      index[d] = box.lo[d];
      if (d == 0)
        return;
    }
    if (rank == 0)
      return;
  }
}

/// The elements of `box` of a whole tensor, row-major over the box.
inline std::vector<float> extractBox(const std::vector<float> &whole,
                                     const std::vector<int64_t> &shape,
                                     const Box &box) {
  std::vector<float> part;
  forEachBoxElement(shape, box, [&](int64_t, int64_t wholeOffset) {
    part.push_back(whole[wholeOffset]);
  });
  return part;
}

/// Adds `part` (row-major over `box`) into the whole tensor.
inline void addBox(std::vector<float> &whole, const std::vector<int64_t> &shape,
                   const Box &box, const std::vector<float> &part) {
  forEachBoxElement(shape, box, [&](int64_t boxOffset, int64_t wholeOffset) {
    whole[wholeOffset] += part[boxOffset];
  });
}

/// Writes `part` (row-major over `box`) into the whole tensor.
inline void writeBox(std::vector<float> &whole,
                     const std::vector<int64_t> &shape, const Box &box,
                     const std::vector<float> &part) {
  forEachBoxElement(shape, box, [&](int64_t boxOffset, int64_t wholeOffset) {
    whole[wholeOffset] = part[boxOffset];
  });
}

inline OpDesc makeOp(std::string kind,
                     std::vector<std::vector<int64_t>> operandShapes,
                     std::vector<std::vector<int64_t>> resultShapes,
                     std::map<std::string, AttributeValue> attributes = {}) {
  OpDesc op;
  op.kind = std::move(kind);
  op.operandShapes = std::move(operandShapes);
  op.resultShapes = std::move(resultShapes);
  op.attributes = std::move(attributes);
  return op;
}

/// The boxes one partition's operand and result views hold.
struct Partition {
  std::vector<Box> inputs;
  std::vector<Box> outputs;
};

/// The partition that holds every tensor whole (the single-device run).
inline Partition wholePartition(const OpDesc &op) {
  Partition p;
  for (const auto &shape : op.operandShapes)
    p.inputs.push_back(wholeBox(shape));
  for (const auto &shape : op.resultShapes)
    p.outputs.push_back(wholeBox(shape));
  return p;
}

/// What runOp assembled (whole tensors), or the first kernel error.
struct OpRun {
  std::string error;
  std::vector<std::vector<float>> outputs;
  /// Empty for operands whose gradient was not wanted or without backward.
  std::vector<std::vector<float>> inputGrads;
  /// The operands after the forward (in-place updates written back).
  std::vector<std::vector<float>> inputs;
};

/// What runOp fills grad views with before the backward (see above).
constexpr float kGradBase = 1.0f;

namespace detail {
/// Sums the i-th scratch buffer over all partitions into each of them.
inline void sumScratch(std::vector<std::vector<std::vector<float>>> &scratch) {
  if (scratch.empty())
    return;
  for (size_t i = 0; i < scratch[0].size(); ++i) {
    std::vector<float> total(scratch[0][i].size(), 0.0f);
    for (const auto &partition : scratch)
      for (size_t e = 0; e < total.size(); ++e)
        total[e] += partition[i][e];
    for (auto &partition : scratch)
      partition[i] = total;
  }
}

/// The reductions between stage `stage` and the next (see the file
/// comment).
inline void syncScratch(const OpDesc &op,
                        const std::vector<Partition> &partitions,
                        std::vector<std::vector<std::vector<float>>> &scratch,
                        int32_t stage) {
  if (op.kind != "ppc.softmax_cross_entropy") {
    sumScratch(scratch);
    return;
  }
  size_t buffer = stage == 0 ? 0 : 1;
  bool max = stage == 0;
  std::vector<bool> done(partitions.size(), false);
  for (size_t p = 0; p < partitions.size(); ++p) {
    if (done[p])
      continue;
    std::vector<size_t> group;
    for (size_t q = 0; q < partitions.size(); ++q)
      if (partitions[q].inputs[0].lo[0] == partitions[p].inputs[0].lo[0] &&
          partitions[q].inputs[0].hi[0] == partitions[p].inputs[0].hi[0]) {
        group.push_back(q);
        done[q] = true;
      }
    std::vector<float> total = scratch[p][buffer];
    for (size_t q : group)
      for (size_t e = 0; q != p && e < total.size(); ++e)
        total[e] = max ? std::max(total[e], scratch[q][buffer][e])
                       : total[e] + scratch[q][buffer][e];
    for (size_t q : group)
      scratch[q][buffer] = total;
  }
}

inline std::vector<TensorView>
scratchViews(std::vector<std::vector<float>> &buffers,
             const std::vector<std::vector<int64_t>> &shapes) {
  std::vector<TensorView> views;
  for (size_t i = 0; i < buffers.size(); ++i)
    views.push_back(viewOf(buffers[i], shapes[i]));
  return views;
}
} // namespace detail

/// Runs `op` as the given partitions (see the file comment). `outputGrads`
/// (whole, one per result) runs the backward too; `needsGrad` (empty: all)
/// says which operand gradients are wanted.
inline OpRun runOp(const OpDesc &op, const KernelContext &ctx,
                   const std::vector<std::vector<float>> &inputs,
                   const std::vector<Partition> &partitions,
                   const std::vector<std::vector<float>> *outputGrads = nullptr,
                   std::vector<bool> needsGrad = {}) {
  OpRun run;
  size_t numInputs = op.operandShapes.size();
  size_t numOutputs = op.resultShapes.size();
  if (needsGrad.empty())
    needsGrad.assign(numInputs, true);
  size_t numParts = partitions.size();

  // Per partition: operand boxes, output boxes, their views, scratch.
  std::vector<std::vector<std::vector<float>>> inData(numParts),
      outData(numParts), fwdScratch(numParts), bwdScratch(numParts),
      gradIn(numParts), gradOut(numParts);
  std::vector<std::vector<TensorView>> inViews(numParts), outViews(numParts);
  std::vector<std::vector<std::vector<int64_t>>> fwdShapes(numParts),
      bwdShapes(numParts);
  for (size_t p = 0; p < numParts; ++p) {
    const Partition &part = partitions[p];
    inData[p].resize(numInputs);
    for (size_t i = 0; i < numInputs; ++i)
      inData[p][i] = extractBox(inputs[i], op.operandShapes[i], part.inputs[i]);
    for (size_t i = 0; i < numInputs; ++i)
      inViews[p].push_back(
          boxView(inData[p][i], op.operandShapes[i], part.inputs[i]));
    outData[p].resize(numOutputs);
    for (size_t o = 0; o < numOutputs; ++o) {
      Box box = part.outputs[o];
      int64_t count = 1;
      for (size_t d = 0; d < box.lo.size(); ++d)
        count *= std::max<int64_t>(0, box.hi[d] - box.lo[d]);
      // NaN-filled: a kernel that leaves an output element unwritten fails.
      outData[p][o].assign(count, std::nanf(""));
      outViews[p].push_back(
          boxView(outData[p][o], op.resultShapes[o], part.outputs[o]));
    }
    fwdShapes[p] = scratchShapes(op, inViews[p], /*backward=*/false);
    for (const auto &shape : fwdShapes[p])
      fwdScratch[p].emplace_back(numElementsOf(shape), std::nanf(""));
  }

  // Every partition runs as many stages as the first (its boxes say how
  // many: an attention key block's).
  const std::vector<TensorView> noViews;
  const std::vector<TensorView> &firstViews = numParts ? inViews[0] : noViews;
  int32_t fwdStages =
      numStages(op, firstViews, ctx.training, /*backward=*/false);
  for (int32_t stage = 0; stage < fwdStages; ++stage) {
    if (stage > 0)
      detail::syncScratch(op, partitions, fwdScratch, stage - 1);
    for (size_t p = 0; p < numParts; ++p) {
      KernelContext stageCtx = ctx;
      stageCtx.stage = stage;
      std::vector<TensorView> scratch =
          detail::scratchViews(fwdScratch[p], fwdShapes[p]);
      run.error =
          statusText(forward(op, stageCtx, inViews[p], outViews[p], scratch));
      if (!run.error.empty())
        return run;
    }
  }

  run.outputs.resize(numOutputs);
  for (size_t o = 0; o < numOutputs; ++o) {
    run.outputs[o].assign(numElementsOf(op.resultShapes[o]), 0.0f);
    for (size_t p = 0; p < numParts; ++p)
      addBox(run.outputs[o], op.resultShapes[o], partitions[p].outputs[o],
             outData[p][o]);
  }
  run.inputs = inputs;
  for (size_t p = 0; p < numParts; ++p)
    for (size_t i = 0; i < numInputs; ++i)
      writeBox(run.inputs[i], op.operandShapes[i], partitions[p].inputs[i],
               inData[p][i]);
  if (!outputGrads)
    return run;

  std::vector<std::vector<TensorView>> gradOutViews(numParts),
      gradInViews(numParts);
  for (size_t p = 0; p < numParts; ++p) {
    const Partition &part = partitions[p];
    gradOut[p].resize(numOutputs);
    for (size_t o = 0; o < numOutputs; ++o) {
      gradOut[p][o] =
          extractBox((*outputGrads)[o], op.resultShapes[o], part.outputs[o]);
      gradOutViews[p].push_back(
          boxView(gradOut[p][o], op.resultShapes[o], part.outputs[o]));
    }
    gradIn[p].resize(numInputs);
    for (size_t i = 0; i < numInputs; ++i) {
      if (needsGrad[i])
        gradIn[p][i].assign(inData[p][i].size(), kGradBase);
      TensorView view =
          boxView(gradIn[p][i], op.operandShapes[i], part.inputs[i]);
      if (!needsGrad[i])
        view.data = nullptr;
      gradInViews[p].push_back(view);
    }
    bwdShapes[p] = scratchShapes(op, inViews[p], /*backward=*/true);
    for (const auto &shape : bwdShapes[p])
      bwdScratch[p].emplace_back(numElementsOf(shape), std::nanf(""));
  }

  int32_t bwdStages =
      numStages(op, firstViews, ctx.training, /*backward=*/true);
  for (int32_t stage = 0; stage < bwdStages; ++stage) {
    if (stage > 0)
      detail::sumScratch(bwdScratch);
    for (size_t p = 0; p < numParts; ++p) {
      KernelContext stageCtx = ctx;
      stageCtx.stage = stage;
      std::vector<TensorView> scratch =
          detail::scratchViews(fwdScratch[p], fwdShapes[p]);
      std::vector<TensorView> own =
          detail::scratchViews(bwdScratch[p], bwdShapes[p]);
      scratch.insert(scratch.end(), own.begin(), own.end());
      run.error =
          statusText(backward(op, stageCtx, inViews[p], outViews[p],
                              gradOutViews[p], gradInViews[p], scratch));
      if (!run.error.empty())
        return run;
    }
  }

  run.inputGrads.resize(numInputs);
  for (size_t i = 0; i < numInputs; ++i) {
    if (!needsGrad[i])
      continue;
    run.inputGrads[i].assign(numElementsOf(op.operandShapes[i]), 0.0f);
    for (size_t p = 0; p < numParts; ++p) {
      for (float &g : gradIn[p][i])
        g -= kGradBase;
      addBox(run.inputGrads[i], op.operandShapes[i], partitions[p].inputs[i],
             gradIn[p][i]);
    }
  }
  return run;
}

/// EXPECTs |actual - expected| <= atol + rtol * |expected| element-wise;
/// reports the first few mismatches with their index.
inline void expectClose(const std::vector<float> &actual,
                        const std::vector<float> &expected, double atol,
                        double rtol, const std::string &what) {
  ASSERT_EQ(actual.size(), expected.size()) << what;
  int reported = 0;
  for (size_t i = 0; i < actual.size(); ++i) {
    double a = actual[i], e = expected[i];
    bool close = std::fabs(a - e) <= atol + rtol * std::fabs(e);
    if (!close && reported++ < 5)
      ADD_FAILURE() << what << ": element " << i << " is " << a << ", expected "
                    << e;
  }
}

struct GradCheckOptions {
  double eps = 1e-3;  ///< central difference step
  double atol = 2e-3; ///< on each gradient element
  double rtol = 2e-2;
  /// Elements checked per operand (spread evenly); the rest are skipped.
  int64_t maxChecksPerOperand = 48;
  uint32_t seed = 1234; ///< of the random output weights
};

/// Checks the backward of the whole op against central differences of
/// L = sum(output * w) (w random, accumulated in double) for every operand
/// with needsGrad (empty: all).
inline void checkGradients(const OpDesc &op, const KernelContext &ctx,
                           const std::vector<std::vector<float>> &inputs,
                           std::vector<bool> needsGrad = {},
                           GradCheckOptions options = {}) {
  if (needsGrad.empty())
    needsGrad.assign(inputs.size(), true);
  std::vector<Partition> whole = {wholePartition(op)};
  std::vector<std::vector<float>> weights;
  for (size_t o = 0; o < op.resultShapes.size(); ++o)
    weights.push_back(randomValues(numElementsOf(op.resultShapes[o]),
                                   options.seed + o, -1.0f, 1.0f));
  OpRun analytic = runOp(op, ctx, inputs, whole, &weights, needsGrad);
  ASSERT_EQ(analytic.error, "") << op.kind;

  auto loss = [&](const std::vector<std::vector<float>> &values) {
    OpRun run = runOp(op, ctx, values, whole);
    EXPECT_EQ(run.error, "") << op.kind;
    double sum = 0;
    for (size_t o = 0; o < run.outputs.size(); ++o)
      for (size_t e = 0; e < run.outputs[o].size(); ++e)
        sum += static_cast<double>(run.outputs[o][e]) * weights[o][e];
    return sum;
  };

  for (size_t i = 0; i < inputs.size(); ++i) {
    if (!needsGrad[i])
      continue;
    int64_t count = static_cast<int64_t>(inputs[i].size());
    int64_t step = std::max<int64_t>(1, count / options.maxChecksPerOperand);
    int reported = 0;
    for (int64_t e = 0; e < count; e += step) {
      std::vector<std::vector<float>> plus = inputs, minus = inputs;
      plus[i][e] = inputs[i][e] + static_cast<float>(options.eps);
      minus[i][e] = inputs[i][e] - static_cast<float>(options.eps);
      double delta = static_cast<double>(plus[i][e]) - minus[i][e];
      double numeric = (loss(plus) - loss(minus)) / delta;
      double got = analytic.inputGrads[i][e];
      if (std::fabs(got - numeric) >
              options.atol + options.rtol * std::fabs(numeric) &&
          reported++ < 5)
        ADD_FAILURE() << op.kind << ": d/d operand " << i << " element " << e
                      << " is " << got << ", finite differences give "
                      << numeric;
    }
  }
}

/// Runs the op whole and as `partitions`, forward and backward with random
/// output gradients, and EXPECTs equal outputs, operand gradients (needsGrad,
/// empty: all) and operands after the forward, to `tol` (abs and rel).
inline void
expectPartitionsMatchWhole(const OpDesc &op, const KernelContext &ctx,
                           const std::vector<std::vector<float>> &inputs,
                           const std::vector<Partition> &partitions,
                           std::vector<bool> needsGrad = {}, double tol = 1e-5,
                           uint32_t seed = 99) {
  std::vector<std::vector<float>> outputGrads;
  for (size_t o = 0; o < op.resultShapes.size(); ++o)
    outputGrads.push_back(
        randomValues(numElementsOf(op.resultShapes[o]), seed + o));
  OpRun whole =
      runOp(op, ctx, inputs, {wholePartition(op)}, &outputGrads, needsGrad);
  ASSERT_EQ(whole.error, "") << op.kind;
  OpRun parts = runOp(op, ctx, inputs, partitions, &outputGrads, needsGrad);
  ASSERT_EQ(parts.error, "") << op.kind;
  for (size_t o = 0; o < whole.outputs.size(); ++o)
    expectClose(parts.outputs[o], whole.outputs[o], tol, tol,
                op.kind + " partitioned output " + std::to_string(o));
  for (size_t i = 0; i < whole.inputGrads.size(); ++i)
    expectClose(parts.inputGrads[i], whole.inputGrads[i], tol, tol,
                op.kind + " partitioned grad of operand " + std::to_string(i));
  for (size_t i = 0; i < whole.inputs.size(); ++i)
    expectClose(parts.inputs[i], whole.inputs[i], tol, tol,
                op.kind + " partitioned operand " + std::to_string(i) +
                    " after forward");
}

} // namespace ppc::runtime::test

#endif // PPC_TEST_UNIT_KERNELTESTUTIL_H
