//===- ElementwiseCases.cpp - the cuda elementwise kernels vs the cpu ones ===//
//
// Oracle: the cpu backend's reference kernels (BackendAgreement.h). Every op
// of ElementwiseKernels.cu, forward and backward, whole and as partitions:
// boxes that do not start at 0, operand views holding more than the output
// box reads (the broadcast path, gradients of unread elements untouched),
// numpy-broadcast operands whose gradients sum over the broadcast positions,
// every attribute variant (gelu's approximations as keyword and enum value,
// clip's bounds, every cast target, dropout's ratio, seed, step and
// inference), comparisons and logic with ties, select with each side's
// gradient, cumsum on every axis and direction, bf16 storage, and the
// errors the cpu kernels report.
//
//===----------------------------------------------------------------------===//

#include "../StatusText.h"
#include "BackendAgreement.h"

#include "../KernelCases.h"

#include "ppc/Runtime/CpuBackend.h"

#include <cmath>
#include <limits>
#include <map>
#include <memory>

using ppc::test::statusText;

namespace ppc::runtime::test {
namespace {

using Attributes = std::map<std::string, AttributeValue>;
using Shape = std::vector<int64_t>;

/// The last piece of an even grid split of `shape` (dim d in parts[d]):
/// a box that starts inside the tensor wherever parts[d] > 1.
Box lastGridBox(const Shape &shape, const Shape &parts) {
  Box box = wholeBox(shape);
  for (size_t d = 0; d < shape.size(); ++d)
    box = withRange(box, d, shape[d] - shape[d] / parts[d], shape[d]);
  return box;
}

/// A middle piece: [size/4, size - size/4) per dim split.
Box middleBox(const Shape &shape, const Shape &parts) {
  Box box = wholeBox(shape);
  for (size_t d = 0; d < shape.size(); ++d)
    if (parts[d] > 1)
      box = withRange(box, d, shape[d] / 4, shape[d] - shape[d] / 4);
  return box;
}

/// `count` values in [lo, hi) kept 0.05 away from `kinks`.
std::vector<float> valuesAvoiding(int64_t count, uint32_t seed, float lo,
                                  float hi, const std::vector<float> &kinks) {
  std::vector<float> x = randomValues(count, seed, lo, hi);
  for (float &v : x)
    for (float kink : kinks)
      if (std::fabs(v - kink) < 0.05f)
        v = kink + (v >= kink ? 0.05f : -0.05f);
  return x;
}

//===----------------------------------------------------------------------===//
// Unary ops
//===----------------------------------------------------------------------===//

struct UnaryCase {
  std::string name, kind;
  Attributes attributes;
  float lo, hi; ///< input range
  std::vector<float> kinks;
};

std::vector<UnaryCase> unaryCases() {
  return {
      {"relu", "ppc.relu", {}, -2, 2, {0}},
      {"leaky_relu", "ppc.leaky_relu", {{"alpha", 0.2}}, -2, 2, {0}},
      {"leaky_relu_default", "ppc.leaky_relu", {}, -2, 2, {0}},
      {"gelu_none",
       "ppc.gelu",
       {{"approximation", std::string("none")}},
       -5,
       5,
       {}},
      {"gelu_tanh",
       "ppc.gelu",
       {{"approximation", std::string("tanh")}},
       -5,
       5,
       {}},
      {"gelu_enum_none",
       "ppc.gelu",
       {{"approximation", int64_t{0}}},
       -5,
       5,
       {}},
      {"gelu_enum_tanh",
       "ppc.gelu",
       {{"approximation", int64_t{1}}},
       -5,
       5,
       {}},
      {"gelu_default", "ppc.gelu", {}, -5, 5, {}},
      {"sigmoid", "ppc.sigmoid", {}, -6, 6, {}},
      {"tanh", "ppc.tanh", {}, -3, 3, {}},
      {"clip", "ppc.clip", {{"min", -0.5}, {"max", 0.7}}, -1.5, 1.5, {}},
      {"clip_min_only", "ppc.clip", {{"min", 0.1}}, -1.5, 1.5, {}},
      {"clip_max_only", "ppc.clip", {{"max", -0.2}}, -1.5, 1.5, {}},
      {"clip_unbounded", "ppc.clip", {}, -1.5, 1.5, {}},
      {"sqrt", "ppc.sqrt", {}, 0.2, 3, {}},
      {"rsqrt", "ppc.rsqrt", {}, 0.2, 3, {}},
      {"exp", "ppc.exp", {}, -2, 2, {}},
      {"log", "ppc.log", {}, 0.2, 3, {}},
      {"erf", "ppc.erf", {}, -2, 2, {}},
      {"neg", "ppc.neg", {}, -2, 2, {}},
      {"abs", "ppc.abs", {}, -2, 2, {}},
      {"reciprocal", "ppc.reciprocal", {}, 0.3, 3, {}},
      {"silu", "ppc.silu", {}, -6, 6, {}},
      {"hard_sigmoid",
       "ppc.hard_sigmoid",
       {{"alpha", 0.25}, {"beta", 0.4}},
       -3,
       3,
       {-1.6f, 2.4f}},
      {"hard_sigmoid_default", "ppc.hard_sigmoid", {}, -4, 4, {-2.5f, 2.5f}},
      {"hard_swish", "ppc.hard_swish", {}, -5, 5, {-3, 3}},
      {"elu", "ppc.elu", {{"alpha", 0.5}}, -3, 3, {0}},
      {"elu_default", "ppc.elu", {}, -3, 3, {0}},
      {"selu", "ppc.selu", {{"alpha", 2.0}, {"gamma", 3.0}}, -3, 3, {0}},
      {"selu_default", "ppc.selu", {}, -3, 3, {0}},
      // Far enough out that softplus' large-|x| branches run.
      {"softplus", "ppc.softplus", {}, -30, 30, {}},
      {"mish", "ppc.mish", {}, -8, 8, {}},
      {"cast_f32", "ppc.cast", {{"to", std::string("f32")}}, -2, 2, {}},
      {"cast_f64", "ppc.cast", {{"to", std::string("f64")}}, -2, 2, {}},
      {"cast_f8", "ppc.cast", {{"to", std::string("f8E4M3FN")}}, -2, 2, {}},
      {"cast_f16", "ppc.cast", {{"to", std::string("f16")}}, -2, 2, {}},
      {"cast_bf16", "ppc.cast", {{"to", std::string("bf16")}}, -2, 2, {}},
      {"cast_i1", "ppc.cast", {{"to", std::string("i1")}}, -2, 2, {}},
      {"cast_i64", "ppc.cast", {{"to", std::string("i64")}}, -3, 3, {}},
      {"cast_si8", "ppc.cast", {{"to", std::string("si8")}}, -3, 3, {}},
      {"cast_ui32", "ppc.cast", {{"to", std::string("ui32")}}, -3, 3, {}},
      {"cast_index", "ppc.cast", {{"to", std::string("index")}}, -3, 3, {}},
  };
}

TEST(CudaElementwise, UnaryWhole) {
  PPC_REQUIRE_CUDA_BACKEND();
  for (const UnaryCase &u : unaryCases()) {
    Shape shape = {4, 6};
    AgreementCase c;
    c.op = makeOp(u.kind, {shape}, {shape}, u.attributes);
    c.inputs = {valuesAvoiding(24, 17, u.lo, u.hi, u.kinks)};
    expectBackendsAgree(c, u.name + " whole");
    // A larger tensor (many threads per block on the device).
    Shape big = {3, 50, 70};
    c.op = makeOp(u.kind, {big}, {big}, u.attributes);
    c.inputs = {valuesAvoiding(numElementsOf(big), 18, u.lo, u.hi, u.kinks)};
    expectBackendsAgree(c, u.name + " big");
  }
}

TEST(CudaElementwise, UnaryPartitions) {
  PPC_REQUIRE_CUDA_BACKEND();
  for (const UnaryCase &u : unaryCases()) {
    Shape shape = {5, 6, 4};
    AgreementCase c;
    c.op = makeOp(u.kind, {shape}, {shape}, u.attributes);
    c.inputs = {valuesAvoiding(numElementsOf(shape), 19, u.lo, u.hi, u.kinks)};
    // The views hold the partition's box, away from the origin.
    Box box = lastGridBox(shape, {2, 3, 1});
    c.partition = Partition{{box}, {box}};
    expectBackendsAgree(c, u.name + " box");
    // The operand view holds the whole tensor, the result a middle box:
    // the broadcast path; the gradient outside the box stays as it was.
    box = middleBox(shape, {2, 2, 2});
    c.partition = Partition{{wholeBox(shape)}, {box}};
    expectBackendsAgree(c, u.name + " operand holds more");
    // An operand view a little larger than the box on one side only.
    Box bigger = withRange(box, 0, 0, box.hi[0]);
    c.partition = Partition{{bigger}, {box}};
    expectBackendsAgree(c, u.name + " operand holds a halo");
    // Inference.
    c.ctx.training = false;
    c.partition = Partition{{box}, {box}};
    expectBackendsAgree(c, u.name + " inference");
  }
}

TEST(CudaElementwise, UnaryForwardOnly) {
  PPC_REQUIRE_CUDA_BACKEND();
  for (const UnaryCase &u : unaryCases()) {
    Shape shape = {7, 3};
    AgreementCase c;
    c.op = makeOp(u.kind, {shape}, {shape}, u.attributes);
    c.inputs = {valuesAvoiding(21, 20, u.lo, u.hi, u.kinks)};
    c.backward = false;
    expectBackendsAgree(c, u.name + " forward only");
    // Scalars.
    c.op = makeOp(u.kind, {{}}, {{}}, u.attributes);
    c.inputs = {{0.5f * (u.lo + u.hi) + 0.123f}};
    c.backward = true;
    expectBackendsAgree(c, u.name + " scalar");
  }
}

TEST(CudaElementwise, UnaryNoGradientWanted) {
  PPC_REQUIRE_CUDA_BACKEND();
  AgreementCase c;
  c.op = makeOp("ppc.silu", {{3, 4}}, {{3, 4}});
  c.needsGrad = {false};
  expectBackendsAgree(c, "silu, no gradient wanted");
}

TEST(CudaElementwise, UnarySpecialValues) {
  PPC_REQUIRE_CUDA_BACKEND();
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  // Kinks, signed zeros, infinities and NaN.
  std::vector<float> x = {0.0f, -0.0f, 1.0f,  -1.0f, inf,   -inf,
                          nan,  0.1f,  -0.5f, 0.7f,  30.0f, -30.0f};
  for (const UnaryCase &u : unaryCases()) {
    if (u.kind == "ppc.sqrt" || u.kind == "ppc.rsqrt" || u.kind == "ppc.log" ||
        u.kind == "ppc.reciprocal")
      continue; // device libm differs from glibc at poles; covered above
    AgreementCase c;
    c.op = makeOp(u.kind, {{12}}, {{12}}, u.attributes);
    c.inputs = {x};
    expectBackendsAgree(c, u.name + " special values");
  }
  // Gelu's tails: erfc keeps its precision far from 0.
  std::vector<float> tails;
  for (int i = 0; i < 40; ++i)
    tails.push_back(-12.0f + 0.6f * i);
  for (const char *approximation : {"none", "tanh"}) {
    AgreementCase c;
    c.op = makeOp("ppc.gelu", {{40}}, {{40}},
                  {{"approximation", std::string(approximation)}});
    c.inputs = {tails};
    c.atol = 1e-6;
    expectBackendsAgree(c, std::string("gelu tails ") + approximation);
  }
}

TEST(CudaElementwise, CastRoundsAsTheCpuKernel) {
  PPC_REQUIRE_CUDA_BACKEND();
  // Halves: overflow, the largest half, subnormals, ties; bf16 ties;
  // integers truncating toward zero; i1 of zero and nonzero.
  std::vector<float> x = {70000.0f,    -65520.0f,   65504.0f,    65519.0f,
                          1e-8f,       -3e-6f,      6.0e-5f,     1.00048828f,
                          1.00146484f, -2.7f,       -0.5f,       0.5f,
                          2.7f,        3.0f,        0.0f,        -0.0f,
                          1.00390625f, 1.01171875f, 123456.789f, -1e-30f,
                          0x1.0p-14f,  0x1.0p-24f,  0x1.8p-25f,  3.4e38f};
  for (const char *to : {"f16", "bf16", "i1", "i64", "i32", "ui8", "f32"}) {
    AgreementCase c;
    c.op = makeOp("ppc.cast", {{24}}, {{24}}, {{"to", std::string(to)}});
    c.inputs = {x};
    c.atol = 0;
    c.rtol = 0;
    expectBackendsAgree(c, std::string("cast to ") + to);
  }
}

//===----------------------------------------------------------------------===//
// Binary ops with numpy broadcasting
//===----------------------------------------------------------------------===//

/// KernelCases.h's shapes, then a scalar, and an operand of the result's
/// rank broadcast everywhere.
std::vector<BroadcastShapes> cudaBroadcastShapes() {
  std::vector<BroadcastShapes> shapes = broadcastShapes();
  shapes.push_back({{}, {4, 5}, {4, 5}, {2, 2}});
  shapes.push_back({{1, 1, 5}, {6, 4, 1}, {6, 4, 5}, {3, 2, 2}});
  return shapes;
}

std::string shapeName(const Shape &shape) {
  std::string s = "[";
  for (size_t d = 0; d < shape.size(); ++d)
    s += (d ? "," : "") + std::to_string(shape[d]);
  return s + "]";
}

AgreementCase binaryCase(const BinaryCase &b, const BroadcastShapes &s) {
  AgreementCase c;
  c.op = makeOp(b.kind, {s.lhs, s.rhs}, {s.result});
  c.inputs = {randomValues(numElementsOf(s.lhs), 3, b.lhsLo, b.lhsHi),
              randomValues(numElementsOf(s.rhs), 4, b.rhsLo, b.rhsHi)};
  return c;
}

TEST(CudaElementwise, BinaryWholeAndBroadcast) {
  PPC_REQUIRE_CUDA_BACKEND();
  for (const BinaryCase &b : binaryCases())
    for (const BroadcastShapes &s : cudaBroadcastShapes()) {
      const std::string name =
          b.kind + " " + shapeName(s.lhs) + " " + shapeName(s.rhs);
      AgreementCase c = binaryCase(b, s);
      expectBackendsAgree(c, name + " whole");
      c.needsGrad = {false, true};
      expectBackendsAgree(c, name + " rhs gradient only");
      c.needsGrad = {true, false};
      expectBackendsAgree(c, name + " lhs gradient only");
    }
}

TEST(CudaElementwise, BinaryPartitions) {
  PPC_REQUIRE_CUDA_BACKEND();
  for (const BinaryCase &b : binaryCases())
    for (const BroadcastShapes &s : cudaBroadcastShapes()) {
      const std::string name =
          b.kind + " " + shapeName(s.lhs) + " " + shapeName(s.rhs);
      AgreementCase c = binaryCase(b, s);
      // The partition's boxes, away from the origin.
      Box box = lastGridBox(s.result, s.parts);
      c.partition = Partition{
          {broadcastBox(s.lhs, box), broadcastBox(s.rhs, box)}, {box}};
      expectBackendsAgree(c, name + " box");
      // Operands held whole; the result a middle box.
      box = middleBox(s.result, s.parts);
      c.partition = Partition{{wholeBox(s.lhs), wholeBox(s.rhs)}, {box}};
      expectBackendsAgree(c, name + " operands held whole");
      // One operand held whole, the other as the box reads it.
      c.partition =
          Partition{{wholeBox(s.lhs), broadcastBox(s.rhs, box)}, {box}};
      expectBackendsAgree(c, name + " lhs held whole");
    }
}

TEST(CudaElementwise, BinarySpecialValues) {
  PPC_REQUIRE_CUDA_BACKEND();
  // Ties (max/min split the gradient), zeros and negatives (pow's guards),
  // division by zero.
  std::vector<float> l = {1.0f, 2.0f, 0.0f,  0.0f, -2.0f, 3.0f,
                          0.5f, 0.5f, -1.0f, 4.0f, 0.0f,  -0.0f};
  std::vector<float> r = {1.0f, 0.0f,  0.0f, 2.0f, 2.0f,  3.0f,
                          0.5f, -1.0f, 3.0f, 0.5f, -1.0f, 0.0f};
  for (const BinaryCase &b : binaryCases()) {
    AgreementCase c;
    c.op = makeOp(b.kind, {{12}, {12}}, {{12}});
    c.inputs = {l, r};
    expectBackendsAgree(c, b.kind + " special values");
    // The same broadcast: a [3, 12] result of the [12] operands.
    c.op = makeOp(b.kind, {{12}, {3, 12}}, {{3, 12}});
    std::vector<float> r3;
    for (int k = 0; k < 3; ++k)
      r3.insert(r3.end(), r.begin(), r.end());
    c.inputs = {l, r3};
    expectBackendsAgree(c, b.kind + " special values broadcast");
  }
}

TEST(CudaElementwise, BinaryForwardOnlyAndInference) {
  PPC_REQUIRE_CUDA_BACKEND();
  for (const BinaryCase &b : binaryCases()) {
    BroadcastShapes s = broadcastShapes()[2];
    AgreementCase c = binaryCase(b, s);
    c.backward = false;
    expectBackendsAgree(c, b.kind + " forward only");
    c.backward = true;
    c.ctx.training = false;
    expectBackendsAgree(c, b.kind + " inference");
  }
}

//===----------------------------------------------------------------------===//
// bf16 storage
//===----------------------------------------------------------------------===//

TEST(CudaElementwise, Bf16Storage) {
  PPC_REQUIRE_CUDA_BACKEND();
  for (const char *kind : {"ppc.gelu", "ppc.sigmoid", "ppc.silu", "ppc.tanh"}) {
    AgreementCase c;
    c.op = makeOp(kind, {{6, 10}}, {{6, 10}});
    c.dtype = DType::BF16;
    c.rtol = 1e-2;
    c.atol = 1e-2;
    expectBackendsAgree(c, std::string(kind) + " bf16");
    Box box = lastGridBox({6, 10}, {2, 2});
    c.partition = Partition{{box}, {box}};
    expectBackendsAgree(c, std::string(kind) + " bf16 box");
  }
  for (const char *kind : {"ppc.add", "ppc.mul", "ppc.div"}) {
    BroadcastShapes s = broadcastShapes()[4];
    AgreementCase c = binaryCase(BinaryCase{kind, {}, -1, 1, 0.5f, 2.0f}, s);
    c.dtype = DType::BF16;
    c.rtol = 1e-2;
    c.atol = 1e-2;
    expectBackendsAgree(c, std::string(kind) + " bf16 broadcast");
  }
  AgreementCase c;
  c.op = makeOp("ppc.dropout", {{8, 16}}, {{8, 16}},
                {{"ratio", 0.25}, {"seed", int64_t{5}}});
  c.dtype = DType::BF16;
  c.rtol = 1e-2;
  c.atol = 1e-2;
  expectBackendsAgree(c, "dropout bf16");
}

//===----------------------------------------------------------------------===//
// Dropout
//===----------------------------------------------------------------------===//

TEST(CudaElementwise, Dropout) {
  PPC_REQUIRE_CUDA_BACKEND();
  Shape shape = {6, 10, 7};
  for (double ratio : {0.0, 0.1, 0.4, 0.5, 0.9})
    for (int64_t seed : {0, 11})
      for (int64_t step : {0, 5}) {
        const std::string name = "dropout ratio " + std::to_string(ratio) +
                                 " seed " + std::to_string(seed) + " step " +
                                 std::to_string(step);
        AgreementCase c;
        c.op = makeOp("ppc.dropout", {shape}, {shape},
                      {{"ratio", ratio}, {"seed", seed}});
        c.ctx.step = step;
        expectBackendsAgree(c, name);
        Box box = lastGridBox(shape, {3, 2, 1});
        c.partition = Partition{{box}, {box}};
        expectBackendsAgree(c, name + " box");
        Box middle = middleBox(shape, {2, 2, 2});
        // (Forward only: the backward walks the input gradient's box,
        // which the output gradient must then hold.)
        c.partition = Partition{{wholeBox(shape)}, {middle}};
        c.backward = false;
        expectBackendsAgree(c, name + " operand held whole");
        c.backward = true;
        c.ctx.training = false;
        c.partition = Partition{{box}, {box}};
        expectBackendsAgree(c, name + " inference");
      }
  // The default ratio and seed.
  AgreementCase c;
  c.op = makeOp("ppc.dropout", {{4, 9}}, {{4, 9}});
  c.ctx.step = 3;
  expectBackendsAgree(c, "dropout defaults");
}

//===----------------------------------------------------------------------===//
// Broadcast
//===----------------------------------------------------------------------===//

TEST(CudaElementwise, Broadcast) {
  PPC_REQUIRE_CUDA_BACKEND();
  struct Case {
    Shape input, result, parts;
  };
  for (const Case &s :
       {Case{{3, 1}, {2, 3, 4}, {2, 3, 2}}, Case{{4}, {3, 4}, {3, 2}},
        Case{{1, 1}, {2, 2}, {2, 2}}, Case{{}, {3, 5}, {3, 2}},
        Case{{2, 1, 5}, {3, 2, 4, 5}, {3, 1, 2, 2}},
        Case{{3, 4}, {3, 4}, {2, 2}}}) {
    const std::string name =
        "broadcast " + shapeName(s.input) + " to " + shapeName(s.result);
    AgreementCase c;
    c.op = makeOp("ppc.broadcast", {s.input}, {s.result});
    expectBackendsAgree(c, name);
    Box box = lastGridBox(s.result, s.parts);
    c.partition = Partition{{broadcastBox(s.input, box)}, {box}};
    expectBackendsAgree(c, name + " box");
    box = middleBox(s.result, s.parts);
    c.partition = Partition{{wholeBox(s.input)}, {box}};
    expectBackendsAgree(c, name + " input held whole");
  }
}

//===----------------------------------------------------------------------===//
// Comparisons, logic, select, cumsum
//===----------------------------------------------------------------------===//

TEST(CudaElementwise, CompareAndNot) {
  PPC_REQUIRE_CUDA_BACKEND();
  for (const CompareCase &b : compareCases())
    for (const BroadcastShapes &s : cudaBroadcastShapes()) {
      const std::string name =
          b.kind + " " + shapeName(s.lhs) + " " + shapeName(s.rhs);
      AgreementCase c = caseOf(makeOp(b.kind, {s.lhs, s.rhs}, {s.result}),
                               {compareInputs(b, numElementsOf(s.lhs), 3),
                                compareInputs(b, numElementsOf(s.rhs), 4)});
      expectBackendsAgree(c, name + " whole");
      Box box = lastGridBox(s.result, s.parts);
      c.partition = Partition{
          {broadcastBox(s.lhs, box), broadcastBox(s.rhs, box)}, {box}};
      expectBackendsAgree(c, name + " box");
    }
  AgreementCase c = caseOf(makeOp("ppc.not", {{3, 4}}, {{3, 4}}),
                           {compareInputs(compareCases().back(), 12, 5)});
  expectBackendsAgree(c, "not");
}

TEST(CudaElementwise, Select) {
  PPC_REQUIRE_CUDA_BACKEND();
  for (const SelectShapes &s : selectShapes()) {
    const std::string name = "select " + shapeName(s.condition) + " " +
                             shapeName(s.lhs) + " " + shapeName(s.rhs);
    AgreementCase c =
        caseOf(makeOp("ppc.select", {s.condition, s.lhs, s.rhs}, {s.result}),
               selectInputs(s, 11));
    c.needsGrad = {false, true, true};
    expectBackendsAgree(c, name + " whole");
    Box box = lastGridBox(s.result, s.parts);
    c.partition =
        Partition{{broadcastBox(s.condition, box), broadcastBox(s.lhs, box),
                   broadcastBox(s.rhs, box)},
                  {box}};
    expectBackendsAgree(c, name + " box");
    box = middleBox(s.result, s.parts);
    c.partition = Partition{
        {wholeBox(s.condition), wholeBox(s.lhs), wholeBox(s.rhs)}, {box}};
    expectBackendsAgree(c, name + " operands held whole");
    c.needsGrad = {false, false, true};
    expectBackendsAgree(c, name + " rhs gradient only");
  }
}

TEST(CudaElementwise, CumSum) {
  PPC_REQUIRE_CUDA_BACKEND();
  const Shape shape = {2, 3, 4};
  for (const CumSumCase &k : cumsumCases()) {
    AgreementCase c =
        caseOf(makeOp("ppc.cumsum", {shape}, {shape}, k.attributes()));
    expectBackendsAgree(c, k.name());
    Shape parts = {2, 3, 2};
    parts[k.axis < 0 ? k.axis + 3 : k.axis] = 1;
    Box box = lastGridBox(shape, parts);
    c.partition = Partition{{box}, {box}};
    expectBackendsAgree(c, k.name() + " box");
  }
}

//===----------------------------------------------------------------------===//
// Errors: the cpu kernels' messages
//===----------------------------------------------------------------------===//

/// Runs op's forward (and backward, when `backward`) on both backends with
/// views over the given boxes and returns {cpu error, cuda error}.
std::pair<std::string, std::string> errorsOf(const OpDesc &op,
                                             const std::vector<Box> &inBoxes,
                                             const std::vector<Box> &outBoxes,
                                             bool backward,
                                             KernelContext ctx = {}) {
  std::string unused;
  Backend *cuda = cudaBackendUnderTest(unused);
  static std::unique_ptr<Backend> cpu =
      createCpuBackend({1, /*referenceKernels=*/true});
  std::string errors[2];
  Backend *backends[2] = {cpu.get(), cuda};
  for (int k = 0; k < 2; ++k) {
    Backend &b = *backends[k];
    std::vector<std::shared_ptr<DeviceBuffer>> owned;
    auto viewsOf = [&](const std::vector<std::vector<int64_t>> &shapes,
                       const std::vector<Box> &boxes) {
      std::vector<DeviceView> views;
      for (size_t i = 0; i < boxes.size(); ++i) {
        const Shape shape = i < shapes.size() ? shapes[i] : Shape{};
        int64_t n = 1;
        for (size_t d = 0; d < boxes[i].lo.size(); ++d)
          n *= std::max<int64_t>(0, boxes[i].hi[d] - boxes[i].lo[d]);
        owned.push_back(b.allocate(DType::F32, std::max<int64_t>(n, 1)));
        views.push_back(
            {owned.back().get(), 0, shape, boxes[i].lo, boxes[i].hi});
      }
      return views;
    };
    std::vector<DeviceView> in = viewsOf(op.operandShapes, inBoxes),
                            out = viewsOf(op.resultShapes, outBoxes);
    if (!backward) {
      errors[k] = statusText(b.forward(op, ctx, in, out, {}));
    } else {
      std::vector<DeviceView> dy = viewsOf(op.resultShapes, outBoxes),
                              dx = viewsOf(op.operandShapes, inBoxes);
      errors[k] = statusText(b.backward(op, ctx, in, out, dy, dx, {}));
    }
    b.synchronize();
  }
  return {errors[0], errors[1]};
}

void expectSameError(const OpDesc &op, const std::vector<Box> &inBoxes,
                     const std::vector<Box> &outBoxes, bool backward,
                     const std::string &name, KernelContext ctx = {}) {
  auto [cpuError, cudaError] = errorsOf(op, inBoxes, outBoxes, backward, ctx);
  EXPECT_NE(cpuError, "") << name << ": the cpu kernel accepts it";
  EXPECT_EQ(cudaError, cpuError) << name;
}

TEST(CudaElementwise, ReportsTheCpuKernelsErrors) {
  PPC_REQUIRE_CUDA_BACKEND();
  for (bool backward : {false, true}) {
    const std::string pass = backward ? " (backward)" : " (forward)";
    for (AttributeValue approximation :
         {AttributeValue(std::string("fast")), AttributeValue(int64_t{2})}) {
      OpDesc op =
          makeOp("ppc.gelu", {{3}}, {{3}}, {{"approximation", approximation}});
      expectSameError(op, {wholeBox({3})}, {wholeBox({3})}, backward,
                      "gelu approximation" + pass);
    }
    OpDesc cast = makeOp("ppc.cast", {{2}}, {{2}}, {{"to", std::string("q7")}});
    expectSameError(cast, {wholeBox({2})}, {wholeBox({2})}, backward,
                    "cast target" + pass);
    for (double ratio : {1.0, -0.1, 1.5}) {
      OpDesc dropout = makeOp("ppc.dropout", {{4}}, {{4}}, {{"ratio", ratio}});
      expectSameError(dropout, {wholeBox({4})}, {wholeBox({4})}, backward,
                      "dropout ratio " + std::to_string(ratio) + pass);
    }
    // Arity.
    OpDesc add = makeOp("ppc.add", {{3}}, {{3}});
    expectSameError(add, {wholeBox({3})}, {wholeBox({3})}, backward,
                    "add with one operand" + pass);
    OpDesc relu = makeOp("ppc.relu", {{3}, {3}}, {{3}});
    expectSameError(relu, {wholeBox({3}), wholeBox({3})}, {wholeBox({3})},
                    backward, "relu with two operands" + pass);
    // An operand view that does not hold what the output box reads.
    Shape shape = {4, 6};
    Box box = withRange(wholeBox(shape), 0, 1, 4);
    Box less = withRange(wholeBox(shape), 0, 2, 4);
    expectSameError(makeOp("ppc.exp", {shape}, {shape}), {less}, {box},
                    backward, "exp operand box" + pass);
    expectSameError(makeOp("ppc.mul", {shape, {6}}, {shape}),
                    {box, withRange(wholeBox({6}), 0, 1, 6)}, {box}, backward,
                    "mul rhs box" + pass);
    expectSameError(makeOp("ppc.mul", {shape, {6}}, {shape}),
                    {less, wholeBox({6})}, {box}, backward,
                    "mul lhs box" + pass);
    expectSameError(makeOp("ppc.broadcast", {{6}}, {shape}),
                    {withRange(wholeBox({6}), 0, 0, 5)}, {box}, backward,
                    "broadcast input box" + pass);
    // The backward walks the input gradient's box: its source is the
    // output gradient.
    expectSameError(makeOp("ppc.dropout", {shape}, {shape}),
                    {backward ? box : less}, {backward ? less : box}, backward,
                    "dropout source box" + pass);
    // An operand of a higher rank than the result.
    expectSameError(makeOp("ppc.sub", {{2, 4, 6}, shape}, {shape}),
                    {wholeBox({2, 4, 6}), wholeBox(shape)}, {wholeBox(shape)},
                    backward, "sub operand rank" + pass);
  }
}

} // namespace
} // namespace ppc::runtime::test
