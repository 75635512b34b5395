//===- DataMovementCases.cpp - reshape, transpose, concat, ... on cuda ----===//
//
// Oracle: the cpu backend's reference kernels (BackendAgreement.h). Every
// op of DataMovementKernels.cu, forward and backward, whole and as every
// box of a grid partition of its iteration space (boxes that do not start
// at 0, empty concat/split pieces, pads' halo-free input ranges, gather's
// split rows); every attribute variant the cpu tests use; bf16 storage; and
// the errors the cpu kernels report, which the cuda kernels must report
// word for word.
//
//===----------------------------------------------------------------------===//

#include "ErrorAgreement.h"

#include "../KernelCases.h"

#include <functional>
#include <memory>

namespace ppc::runtime::test {
namespace {

//===----------------------------------------------------------------------===//
// Reshape
//===----------------------------------------------------------------------===//

TEST(CudaDataMovement, ReshapeWhole) {
  PPC_REQUIRE_CUDA_BACKEND();
  for (const auto &[from, to] :
       std::vector<std::pair<std::vector<int64_t>, std::vector<int64_t>>>{
           {{2, 3, 4}, {6, 4}},
           {{6, 4}, {2, 3, 4}},
           {{4, 6}, {6, 4}},
           {{1, 3}, {3}},
           {{1}, {}},
           {{2, 1, 5, 3}, {10, 3}}}) {
    AgreementCase c;
    c.op = makeOp("ppc.reshape", {from}, {to});
    expectBackendsAgree(c, "reshape " + std::to_string(from.size()) + "->" +
                               std::to_string(to.size()));
  }
}

TEST(CudaDataMovement, ReshapePartitions) {
  PPC_REQUIRE_CUDA_BACKEND();
  AgreementCase c;
  // [2, 3, 4] -> [6, 4]: whole rows are runs of the flat order; a column
  // split is not.
  c.op = makeOp("ppc.reshape", {{2, 3, 4}}, {{6, 4}});
  for (const std::vector<int64_t> &parts :
       {std::vector<int64_t>{2, 1}, std::vector<int64_t>{2, 2},
        std::vector<int64_t>{3, 2}})
    agreeWholeAndGrid(c, "reshape merge", {6, 4}, parts, [](const Box &b) {
      Box input = {{b.lo[0] / 3, 0, b.lo[1]},
                   {(b.hi[0] - 1) / 3 + 1, 3, b.hi[1]}};
      return Partition{{input}, {b}};
    });
  // The input a little larger than needed (a flat run that starts earlier).
  c.partition = Partition{{Box{{0, 0, 0}, {2, 3, 4}}}, {Box{{3, 0}, {5, 4}}}};
  expectBackendsAgree(c, "reshape merge, whole input, rows 3:5");
  // [6, 4] -> [2, 3, 4]: result index i of dim 0 reads input rows [3i, 3i+3).
  c.op = makeOp("ppc.reshape", {{6, 4}}, {{2, 3, 4}});
  agreeWholeAndGrid(c, "reshape split", {2, 3, 4}, {2, 1, 2}, [](const Box &b) {
    Box input = {{3 * b.lo[0], b.lo[2]}, {3 * b.hi[0], b.hi[2]}};
    return Partition{{input}, {b}};
  });
  agreeWholeAndGrid(c, "reshape split rows", {2, 3, 4}, {2, 3, 2},
                    [](const Box &b) {
                      Box input = {{3 * b.lo[0] + b.lo[1], b.lo[2]},
                                   {3 * (b.hi[0] - 1) + b.hi[1], b.hi[2]}};
                      return Partition{{input}, {b}};
                    });
  // [4, 6] -> [6, 4] straddles rows: with the input whole, any result split.
  c.op = makeOp("ppc.reshape", {{4, 6}}, {{6, 4}});
  for (const Box &b : gridBoxes({6, 4}, {3, 2})) {
    c.partition = Partition{{wholeBox({4, 6})}, {b}};
    expectBackendsAgree(c, "reshape straddle " + boxName(b));
  }
  // Heads split: [2, 3, 8] -> [2, 3, 2, 4], the result split along the
  // heads, the input along its last dim.
  c.op = makeOp("ppc.reshape", {{2, 3, 8}}, {{2, 3, 2, 4}});
  for (const Box &b : gridBoxes({2, 3, 2, 4}, {2, 1, 2, 1})) {
    c.partition = Partition{
        {Box{{b.lo[0], 0, b.lo[2] * 4}, {b.hi[0], 3, b.hi[2] * 4}}}, {b}};
    expectBackendsAgree(c, "reshape heads " + boxName(b));
  }
}

TEST(CudaDataMovement, ReshapeBf16) {
  PPC_REQUIRE_CUDA_BACKEND();
  AgreementCase c;
  c.op = makeOp("ppc.reshape", {{2, 3, 4}}, {{6, 4}});
  c.dtype = DType::BF16;
  c.rtol = 1e-2;
  c.partition = Partition{{Box{{1, 0, 2}, {2, 3, 4}}}, {Box{{3, 2}, {6, 4}}}};
  expectBackendsAgree(c, "reshape bf16");
}

TEST(CudaDataMovement, ReshapeErrors) {
  PPC_REQUIRE_CUDA_BACKEND();
  OpDesc op = makeOp("ppc.reshape", {{2, 3}}, {{3, 2}});
  Box firstRow = {{0, 0}, {1, 3}};
  expectSameErrors(op, Partition{{firstRow}, {wholeBox({3, 2})}},
                   {randomValues(6, 33)}, "reshape missing input");
  OpDesc straddle = makeOp("ppc.reshape", {{4, 6}}, {{6, 4}});
  expectSameErrors(straddle,
                   Partition{{Box{{1, 0}, {4, 6}}}, {Box{{0, 0}, {3, 2}}}},
                   {randomValues(24, 34)}, "reshape straddle missing");
  OpDesc counts = makeOp("ppc.reshape", {{2, 3}}, {{4, 2}});
  expectSameErrors(counts, wholePartition(counts), {randomValues(6, 35)},
                   "reshape counts");
}

//===----------------------------------------------------------------------===//
// Transpose
//===----------------------------------------------------------------------===//

TEST(CudaDataMovement, Transpose) {
  PPC_REQUIRE_CUDA_BACKEND();
  struct Case {
    std::vector<int64_t> input, permutation, parts;
  };
  for (const Case &tc :
       {Case{{2, 3, 4}, {2, 0, 1}, {2, 2, 2}},
        Case{{2, 3, 2, 4}, {0, 2, 3, 1}, {2, 1, 2, 2}},
        Case{{5, 7}, {1, 0}, {2, 3}}, Case{{3, 4}, {0, 1}, {2, 2}}}) {
    size_t rank = tc.input.size();
    std::vector<int64_t> result;
    for (int64_t p : tc.permutation)
      result.push_back(tc.input[p]);
    AgreementCase c;
    c.op = makeOp("ppc.transpose", {tc.input}, {result},
                  {{"permutation", tc.permutation}});
    agreeWholeAndGrid(c, "transpose rank " + std::to_string(rank), result,
                      tc.parts, [&](const Box &b) {
                        Box in = wholeBox(tc.input);
                        for (size_t i = 0; i < rank; ++i)
                          in = withRange(in, tc.permutation[i], b.lo[i],
                                         b.hi[i]);
                        return Partition{{in}, {b}};
                      });
  }
  AgreementCase c;
  c.op = makeOp("ppc.transpose", {{2, 3, 4}}, {{4, 2, 3}},
                {{"permutation", std::vector<int64_t>{2, 0, 1}}});
  c.dtype = DType::BF16;
  c.rtol = 1e-2;
  expectBackendsAgree(c, "transpose bf16");
  // Attention's head transpose: rows of 16 values move 16 bytes at a time
  // (4 float32, 8 bf16), whole and with the rows split in two.
  const std::vector<int64_t> heads = {2, 5, 3, 16}, swapped = {2, 3, 5, 16};
  for (DType dtype : {DType::F32, DType::BF16}) {
    AgreementCase h;
    h.op = makeOp("ppc.transpose", {heads}, {swapped},
                  {{"permutation", std::vector<int64_t>{0, 2, 1, 3}}});
    h.dtype = dtype;
    h.rtol = dtype == DType::BF16 ? 1e-2 : h.rtol;
    agreeWholeAndGrid(h, std::string("head transpose ") + dtypeName(dtype),
                      swapped, {2, 3, 1, 2}, [&](const Box &b) {
                        Box in = wholeBox(heads);
                        for (size_t i = 0; i < 4; ++i)
                          in =
                              withRange(in, std::vector<int64_t>{0, 2, 1, 3}[i],
                                        b.lo[i], b.hi[i]);
                        return Partition{{in}, {b}};
                      });
  }
}

TEST(CudaDataMovement, TransposeErrors) {
  PPC_REQUIRE_CUDA_BACKEND();
  OpDesc op = makeOp("ppc.transpose", {{2, 3}}, {{3, 2}},
                     {{"permutation", std::vector<int64_t>{1, 1}}});
  expectSameErrors(op, wholePartition(op), {randomValues(6, 1)},
                   "transpose not a permutation");
  op.attributes["permutation"] = std::vector<int64_t>{1};
  expectSameErrors(op, wholePartition(op), {randomValues(6, 1)},
                   "transpose short permutation");
  op.attributes["permutation"] = std::vector<int64_t>{1, 0};
  // The input view misses what the result box reads.
  expectSameErrors(op, Partition{{Box{{0, 0}, {1, 3}}}, {wholeBox({3, 2})}},
                   {randomValues(6, 1)}, "transpose missing input");
}

//===----------------------------------------------------------------------===//
// Concat and split
//===----------------------------------------------------------------------===//

TEST(CudaDataMovement, Concat) {
  PPC_REQUIRE_CUDA_BACKEND();
  std::vector<std::vector<int64_t>> pieces = {{2, 3}, {2, 1}, {2, 2}};
  std::vector<int64_t> result = {2, 6};
  for (int64_t axisAttr : {int64_t{1}, int64_t{-1}}) {
    AgreementCase c;
    c.op = makeOp("ppc.concat", pieces, {result}, {{"axis", axisAttr}});
    // Splits along the axis give some partitions empty pieces.
    agreeWholeAndGrid(c, "concat axis " + std::to_string(axisAttr), result,
                      {2, 3}, [&](const Box &b) {
                        return Partition{pieceBoxes(b, pieces, 1), {b}};
                      });
    // Only the middle operand wants a gradient.
    c.partition.reset();
    c.needsGrad = {false, true, false};
    expectBackendsAgree(c, "concat middle grad");
  }
  // Along dim 0 of a rank-3 tensor (the default axis), split along dim 2.
  std::vector<std::vector<int64_t>> rows = {{1, 3, 4}, {3, 3, 4}};
  AgreementCase c;
  c.op = makeOp("ppc.concat", rows, {{4, 3, 4}});
  agreeWholeAndGrid(c, "concat axis 0", {4, 3, 4}, {3, 1, 2},
                    [&](const Box &b) {
                      return Partition{pieceBoxes(b, rows, 0), {b}};
                    });
  c.partition.reset();
  c.dtype = DType::BF16;
  c.rtol = 1e-2;
  expectBackendsAgree(c, "concat bf16");
}

TEST(CudaDataMovement, Split) {
  PPC_REQUIRE_CUDA_BACKEND();
  std::vector<int64_t> input = {5, 4};
  std::vector<std::vector<int64_t>> pieces = {{2, 4}, {3, 4}};
  AgreementCase c;
  c.op = makeOp("ppc.split", {input}, pieces, {{"axis", int64_t{0}}});
  // The iteration space is the input's: the results' boxes are its clipped
  // shifts, empty where a partition does not reach a piece.
  agreeWholeAndGrid(c, "split axis 0", input, {3, 2}, [&](const Box &b) {
    return Partition{{b}, pieceBoxes(b, pieces, 0)};
  });
  // Three pieces along the last dim (axis -1).
  std::vector<int64_t> input3 = {2, 3, 7};
  std::vector<std::vector<int64_t>> pieces3 = {{2, 3, 2}, {2, 3, 4}, {2, 3, 1}};
  c.op = makeOp("ppc.split", {input3}, pieces3, {{"axis", int64_t{-1}}});
  agreeWholeAndGrid(c, "split axis -1", input3, {1, 2, 3}, [&](const Box &b) {
    return Partition{{b}, pieceBoxes(b, pieces3, 2)};
  });
  c.partition.reset();
  c.dtype = DType::BF16;
  c.rtol = 1e-2;
  expectBackendsAgree(c, "split bf16");
}

TEST(CudaDataMovement, ConcatSplitErrors) {
  PPC_REQUIRE_CUDA_BACKEND();
  OpDesc concat =
      makeOp("ppc.concat", {{2, 3}, {2, 2}}, {{2, 6}}, {{"axis", int64_t{1}}});
  expectSameErrors(concat, wholePartition(concat),
                   {randomValues(6, 1), randomValues(4, 2)}, "concat sizes");
  concat.attributes["axis"] = int64_t{2};
  expectSameErrors(concat, wholePartition(concat),
                   {randomValues(6, 1), randomValues(4, 2)}, "concat axis");
  OpDesc split =
      makeOp("ppc.split", {{5, 4}}, {{2, 4}, {3, 4}}, {{"axis", int64_t{-3}}});
  expectSameErrors(split, wholePartition(split), {randomValues(20, 1)},
                   "split axis");
  split.attributes["axis"] = int64_t{0};
  // The operand view misses rows the results' boxes hold.
  expectSameErrors(
      split,
      Partition{{Box{{0, 0}, {3, 4}}}, {wholeBox({2, 4}), wholeBox({3, 4})}},
      {randomValues(20, 1)}, "split missing rows");
}

//===----------------------------------------------------------------------===//
// Slice and pad
//===----------------------------------------------------------------------===//

TEST(CudaDataMovement, Slice) {
  PPC_REQUIRE_CUDA_BACKEND();
  struct Case {
    std::vector<int64_t> input, starts, steps, result, parts;
    bool defaults;
  };
  for (const Case &sc :
       {Case{{7, 5}, {1, 0}, {2, 2}, {3, 3}, {2, 3}, false},
        Case{{4, 6, 5}, {1, 2, 0}, {1, 3, 1}, {3, 2, 5}, {2, 2, 2}, false},
        Case{{6, 4}, {0, 0}, {1, 1}, {4, 3}, {2, 2}, true}}) {
    AgreementCase c;
    std::map<std::string, AttributeValue> attributes;
    if (!sc.defaults)
      attributes = {{"starts", sc.starts}, {"steps", sc.steps}};
    c.op = makeOp("ppc.slice", {sc.input}, {sc.result}, attributes);
    size_t rank = sc.input.size();
    agreeWholeAndGrid(c, "slice rank " + std::to_string(rank), sc.result,
                      sc.parts, [&](const Box &b) {
                        Box in = wholeBox(sc.input);
                        for (size_t d = 0; d < rank; ++d) {
                          auto [lo, hi] =
                              windowRange(b.lo[d], b.hi[d], sc.steps[d],
                                          sc.starts[d], 1, sc.input[d]);
                          in = withRange(in, d, lo, hi);
                        }
                        return Partition{{in}, {b}};
                      });
  }
}

TEST(CudaDataMovement, Pad) {
  PPC_REQUIRE_CUDA_BACKEND();
  std::vector<int64_t> input = {3, 4};
  // Positive pads, then a negative low pad that crops; with and without
  // a value.
  for (const std::vector<int64_t> &pads :
       {std::vector<int64_t>{1, 0, 2, 1}, std::vector<int64_t>{-1, 1, 0, 1},
        std::vector<int64_t>{2, 2, 2, 2}})
    for (bool withValue : {true, false}) {
      std::vector<int64_t> result = {input[0] + pads[0] + pads[2],
                                     input[1] + pads[1] + pads[3]};
      std::map<std::string, AttributeValue> attributes = {{"pads", pads}};
      if (withValue)
        attributes["value"] = 0.5;
      AgreementCase c;
      c.op = makeOp("ppc.pad", {input}, {result}, attributes);
      agreeWholeAndGrid(
          c, "pad " + std::to_string(pads[0]) + (withValue ? " value" : ""),
          result, {3, 2}, [&](const Box &b) {
            Box in = wholeBox(input);
            for (size_t d = 0; d < 2; ++d) {
              auto [lo, hi] =
                  windowRange(b.lo[d], b.hi[d], 1, -pads[d], 1, input[d]);
              in = withRange(in, d, lo, std::max(lo, hi));
            }
            return Partition{{in}, {b}};
          });
    }
  AgreementCase c;
  c.op = makeOp(
      "ppc.pad", {{2, 3, 4}}, {{2, 5, 6}},
      {{"pads", std::vector<int64_t>{0, 1, 2, 0, 1, 0}}, {"value", -1.5}});
  c.dtype = DType::BF16;
  c.rtol = 1e-2;
  expectBackendsAgree(c, "pad bf16");
}

TEST(CudaDataMovement, SlicePadErrors) {
  PPC_REQUIRE_CUDA_BACKEND();
  OpDesc slice = makeOp("ppc.slice", {{7, 5}}, {{3, 3}},
                        {{"starts", std::vector<int64_t>{1, 0}},
                         {"steps", std::vector<int64_t>{2, 0}}});
  expectSameErrors(slice, wholePartition(slice), {randomValues(35, 1)},
                   "slice step 0");
  slice.attributes["steps"] = std::vector<int64_t>{2};
  expectSameErrors(slice, wholePartition(slice), {randomValues(35, 1)},
                   "slice short steps");
  slice.attributes["steps"] = std::vector<int64_t>{3, 2};
  expectSameErrors(slice, wholePartition(slice), {randomValues(35, 1)},
                   "slice reads past the input");
  OpDesc pad = makeOp("ppc.pad", {{3, 4}}, {{4, 5}},
                      {{"pads", std::vector<int64_t>{1, 1}}});
  expectSameErrors(pad, wholePartition(pad), {randomValues(12, 1)},
                   "pad short pads");
}

//===----------------------------------------------------------------------===//
// Gather
//===----------------------------------------------------------------------===//

/// KernelCases.h's gathers, then a negative axis and colliding rows.
std::vector<GatherCase> cudaGatherCases() {
  std::vector<float> many;
  for (int i = 0; i < 64; ++i) // repeats, negatives, halves that round
    many.push_back(static_cast<float>((i * 7) % 11) - (i % 5 == 0 ? 11 : 0) +
                   (i % 9 == 0 ? 0.4f : 0.0f));
  std::vector<GatherCase> cases = gatherCases();
  // axis -1: columns of a matrix.
  cases.push_back({{3, 5}, {4}, -1, {4, 0, -2, 4}, {2, 2, 2}});
  // Many repeated rows: the backward's sums collide.
  cases.push_back({{11, 6}, {8, 8}, 0, many, {2, 2, 2, 3}});
  return cases;
}

Partition gatherPartition(const GatherCase &c, const Box &b) {
  int64_t axis =
      c.axis < 0 ? c.axis + static_cast<int64_t>(c.data.size()) : c.axis;
  std::vector<int64_t> result = gatherResultShape(c);
  size_t rowsDim = result.size(), indicesRank = c.indices.size();
  Box resultBox = {std::vector<int64_t>(b.lo.begin(), b.lo.end() - 1),
                   std::vector<int64_t>(b.hi.begin(), b.hi.end() - 1)};
  Box data = wholeBox(c.data), indices = wholeBox(c.indices);
  for (int64_t d = 0; d < static_cast<int64_t>(c.data.size()); ++d) {
    size_t iterDim = d < axis ? d : d == axis ? rowsDim : d - 1 + indicesRank;
    data = withRange(data, d, b.lo[iterDim], b.hi[iterDim]);
  }
  for (size_t k = 0; k < indicesRank; ++k)
    indices = withRange(indices, k, b.lo[axis + k], b.hi[axis + k]);
  return Partition{{data, indices}, {resultBox}};
}

TEST(CudaDataMovement, Gather) {
  PPC_REQUIRE_CUDA_BACKEND();
  int n = 0;
  for (const GatherCase &gc : cudaGatherCases()) {
    AgreementCase c;
    c.op = gatherOp(gc);
    c.inputs = {{}, gc.indexValues};
    c.integerOperands = {1};
    std::vector<int64_t> iteration = gatherResultShape(gc);
    int64_t axis =
        gc.axis < 0 ? gc.axis + static_cast<int64_t>(gc.data.size()) : gc.axis;
    iteration.push_back(gc.data[axis]);
    // Rows split: partitions sharing a result box hold partial results that
    // are zero outside their rows.
    agreeWholeAndGrid(c, "gather case " + std::to_string(n++), iteration,
                      gc.parts,
                      [&](const Box &b) { return gatherPartition(gc, b); });
  }
}

TEST(CudaDataMovement, GatherVariants) {
  PPC_REQUIRE_CUDA_BACKEND();
  GatherCase gc = gatherCases()[0];
  AgreementCase c;
  c.op = gatherOp(gc);
  c.inputs = {{}, gc.indexValues};
  c.integerOperands = {1};
  // No gradient wanted for the table.
  c.needsGrad = {false, false};
  expectBackendsAgree(c, "gather no grad");
  c.needsGrad.clear();
  // Inference (no backward).
  c.backward = false;
  c.ctx.training = false;
  expectBackendsAgree(c, "gather inference");
  c.backward = true;
  c.ctx.training = true;
  // bf16 table and gradients.
  c.dtype = DType::BF16;
  c.rtol = 1e-2;
  expectBackendsAgree(c, "gather bf16");
  c.partition = gatherPartition(gc, Box{{1, 0, 0, 2}, {2, 3, 3, 5}});
  expectBackendsAgree(c, "gather bf16 rows 2:5");
  // A partition holding no rows of the table (empty rows range).
  c.dtype = DType::F32;
  c.rtol = 1e-4;
  c.partition = gatherPartition(gc, Box{{0, 0, 0, 3}, {2, 3, 3, 3}});
  expectBackendsAgree(c, "gather no rows");
}

TEST(CudaDataMovement, GatherErrors) {
  PPC_REQUIRE_CUDA_BACKEND();
  GatherCase gc = gatherCases()[0];
  std::vector<float> data = randomValues(15, 94);
  for (float bad : {5.0f, -6.0f, 4.5f, std::nanf(""), 1e30f}) {
    GatherCase b = gc;
    b.indexValues[2] = bad;
    b.indexValues[4] = 7; // the last bad one is reported
    expectSameErrors(gatherOp(b), wholePartition(gatherOp(b)),
                     {data, b.indexValues},
                     "gather bad index " + std::to_string(bad));
    // A partition of the rows still checks the indices.
    expectSameErrors(gatherOp(b),
                     gatherPartition(b, Box{{0, 0, 0, 1}, {2, 3, 3, 3}}),
                     {data, b.indexValues}, "gather bad index, rows 1:3");
  }
  OpDesc op = gatherOp(gc);
  op.attributes["axis"] = int64_t{2};
  expectSameErrors(op, wholePartition(op), {data, gc.indexValues},
                   "gather axis");
  op = gatherOp(gc);
  op.resultShapes = {{2, 3}};
  expectSameErrors(op, wholePartition(op), {data, gc.indexValues},
                   "gather result rank");
  // The indices view misses what the result box reads.
  expectSameErrors(
      gatherOp(gc),
      Partition{{wholeBox({5, 3}), Box{{0, 0}, {1, 3}}}, {wholeBox({2, 3, 3})}},
      {data, gc.indexValues}, "gather missing indices");
}

TEST(CudaDataMovement, GatherHalvesRoundAwayFromZero) {
  PPC_REQUIRE_CUDA_BACKEND();
  // Index values as llround takes them: 0.5 -> 1, -0.5 -> -1 (the last
  // row), 1.4999 -> 1, 2.5 -> 3, -3.5 -> -4.
  GatherCase gc{{6, 2},
                {6},
                0,
                {0.5f, -0.5f, 1.4999f, 2.5f, -3.5f, 0.49999997f},
                {1, 1, 1}};
  AgreementCase c;
  c.op = gatherOp(gc);
  c.inputs = {{}, gc.indexValues};
  c.integerOperands = {1};
  expectBackendsAgree(c, "gather rounding");
}

} // namespace
} // namespace ppc::runtime::test
