//===- PairwiseSolver.h - exact minimization of a pairwise model -*- C++
//-*-===//
//
// Private to search/. A cost model over ops that is a sum of node tables
// (one cost per configuration of an op) and edge tables (one cost per pair
// of configurations of two ops), and its minimization: OptCNN's node and
// edge eliminations, then the core that does not reduce enumerated, cut into
// segments at bottleneck ops as Unity does, or decided by coordinate descent
// (PairwiseSolver.cpp; the scheme is in DynamicProgramming.cpp's header).
// Independent of the simulator: the DP builds the tables from it.
//
//===----------------------------------------------------------------------===//

#ifndef PPC_SEARCH_PAIRWISESOLVER_H
#define PPC_SEARCH_PAIRWISESOLVER_H

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

namespace ppc::search::detail {

/// Tables are shared between ops and edges that cost the same (repeated
/// layers) and never changed in place: an elimination makes a new table.
using Table = std::shared_ptr<const std::vector<double>>;
using Args = std::shared_ptr<const std::vector<size_t>>;

/// A pairwise cost model over ops: node tables and edge tables, each with a
/// content id (equal ids: equal tables).
struct Pairwise {
  struct Edge {
    size_t a = 0, b = 0; ///< a < b (topological order).
    Table t;             ///< (*t)[ca * |C_b| + cb].
    int64_t id = 0;
    bool alive = true;
  };
  std::vector<size_t> count;
  std::vector<Table> node;
  std::vector<int64_t> nodeId;
  std::vector<Edge> edges;
  /// Ids at and above this one are free for tables the solver makes.
  int64_t nextId = 0;

  double at(const Edge &e, size_t x, size_t cx, size_t cy) const {
    return e.a == x ? (*e.t)[cx * count[e.b] + cy]
                    : (*e.t)[cy * count[e.b] + cx];
  }
  size_t other(const Edge &e, size_t x) const { return e.a == x ? e.b : e.a; }
};

/// The minimum of a Pairwise model.
struct PairwiseSolution {
  /// The configuration index of every op.
  std::vector<size_t> choice;
  /// Table entries evaluated.
  int64_t evaluated = 0;
  /// Eliminations answered from the memo (repeated structure).
  int64_t reused = 0;
  /// False when a segment too large to enumerate was decided by coordinate
  /// descent.
  bool exact = true;
};

/// The configuration of every op minimizing `model`'s cost; stops early
/// (not exact) once `cancel` is set.
PairwiseSolution solvePairwise(Pairwise model, const std::atomic<bool> *cancel);

} // namespace ppc::search::detail

#endif // PPC_SEARCH_PAIRWISESOLVER_H
