//===- SimTestGraphs.h - hand-built simulator graphs ------------*- C++ -*-===//
//
// Builders of small sim::Graphs with the iteration spaces the graph dialect
// gives its ops, for unit tests and benchmarks that need no MLIR.
//
//===----------------------------------------------------------------------===//

#ifndef PPC_TEST_UNIT_SIMTESTGRAPHS_H
#define PPC_TEST_UNIT_SIMTESTGRAPHS_H

#include "ppc/Simulator/Graph.h"

#include <string>
#include <utility>
#include <vector>

namespace ppc::sim::testing {

inline Source fromOp(int32_t op) { return {Source::Kind::Op, op, 0}; }
inline Source input(int32_t i = 0) { return {Source::Kind::Input, i, 0}; }
inline Source weight(int32_t w) { return {Source::Kind::Weight, w, 0}; }

/// y = x W on x [n, k], W [k, m] (weight `w`): dims n (sample), m
/// (parameter), k (reduction). 2nkm FLOPs forward, twice that backward; the
/// f32 bytes of the three tensors, twice in backward.
inline Op linear(std::string name, int64_t n, int64_t k, int64_t m, Source in,
                 int32_t w) {
  Op op;
  op.name = std::move(name);
  op.kind = "ppc.linear";
  op.space.matrixProduct = true;
  op.space.dims = {{n, IterKind::Sample},
                   {m, IterKind::Parameter},
                   {k, IterKind::Reduction}};
  op.space.operands = {
      {{n, k}, {DimAccess::identity(0), DimAccess::identity(2)}},
      {{k, m}, {DimAccess::identity(2), DimAccess::identity(1)}}};
  op.space.results = {TensorAccess::identity({n, m})};
  double points = static_cast<double>(n * k * m);
  double bytes = 4.0 * static_cast<double>(n * k + k * m + n * m);
  op.cost = {2 * points, 4 * points, bytes, 2 * bytes};
  op.operands = {in, weight(w)};
  return op;
}

/// linear() with a new trainable [k, m] f32 weight "<name>.w" added to `g`.
inline Op linear(Graph &g, std::string name, int64_t n, int64_t k, int64_t m,
                 Source in) {
  int32_t w = static_cast<int32_t>(g.weights.size());
  g.weights.push_back({name + ".w", {k, m}, 4, true});
  return linear(std::move(name), n, k, m, in, w);
}

/// An elementwise op of kind `kind` over [n, f] of `inputs` (all [n, f]):
/// dims n (sample), f (parameter).
inline Op elementwise(std::string name, std::string kind, int64_t n, int64_t f,
                      std::vector<Source> inputs, OpCost cost) {
  Op op;
  op.name = std::move(name);
  op.kind = std::move(kind);
  op.space.dims = {{n, IterKind::Sample}, {f, IterKind::Parameter}};
  for (size_t i = 0; i < inputs.size(); ++i)
    op.space.operands.push_back(TensorAccess::identity({n, f}));
  op.space.results = {TensorAccess::identity({n, f})};
  op.cost = cost;
  op.operands = std::move(inputs);
  return op;
}

/// Six linear layers (784 -> 1024 x 5 -> 16), batch 64: the MLP of the
/// search's optimality acceptance check.
inline Graph mlp6() {
  Graph g;
  g.numInputs = 1;
  Source in = input();
  for (int l = 0; l < 6; ++l) {
    int64_t k = l == 0 ? 784 : 1024, m = l == 5 ? 16 : 1024;
    g.ops.push_back(linear(g, "fc" + std::to_string(l), 64, k, m, in));
    in = fromOp(static_cast<int32_t>(g.ops.size() - 1));
  }
  return g;
}

} // namespace ppc::sim::testing

#endif // PPC_TEST_UNIT_SIMTESTGRAPHS_H
