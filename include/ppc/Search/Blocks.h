//===- Blocks.h - repeated structure of a graph -----------------*- C++ -*-===//
//
// MLIR-free. Transformer layers, ResNet bottlenecks and unrolled RNN steps
// repeat: an op of one layer has a counterpart in every other layer with
// the same kind, the same iteration space and operands wired the same way
// (the same distances back to its producers, weights of the same shapes).
// Grouping ops by that signature lets the search move a whole structure at
// once: a configuration proposed for one op is tried on all its
// counterparts together (FlexFlow's single-op moves cannot reach a layout
// that only pays off when every layer changes).
//
//===----------------------------------------------------------------------===//

#ifndef PPC_SEARCH_BLOCKS_H
#define PPC_SEARCH_BLOCKS_H

#include "ppc/Simulator/Graph.h"

#include <cstdint>
#include <vector>

namespace ppc::search {

struct RepeatedOps {
  /// Classes of two or more ops with the same signature, each in
  /// topological order.
  std::vector<std::vector<size_t>> classes;
  /// Per op, its class in `classes`, or -1 when it has no counterpart.
  std::vector<int32_t> classOf;
};

/// Groups the ops of `graph` by signature: their cost class (below) and
/// per operand the distance back to a producing op (result number) or the
/// input or constant read.
RepeatedOps findRepeatedOps(const sim::Graph &graph);

/// A stretch of `count` consecutive blocks of `length` ops each, back to
/// back from op `begin`: op begin + k * length + t is the counterpart of op
/// begin + t for every block k.
struct BlockRun {
  size_t begin = 0, length = 0, count = 0;
  size_t end() const { return begin + length * count; }
};

/// The graph's layers as runs of two or more blocks, disjoint and in op
/// order. From the first op on, each run starts at the next op that has a
/// counterpart and takes the block length (a distance to one of that op's
/// next counterparts) that covers the most ops; the shortest on a tie.
std::vector<BlockRun> findRepeatedBlocks(const sim::Graph &graph);

/// Per op, a class id (dense from 0, numbered in the order the classes
/// first appear) shared by the ops that the simulator
/// costs alike under every configuration, wherever they sit in the graph:
/// the same kind, element type, FLOPs and bytes, iteration dims (size, SOAP
/// kind, splittability), operand and result accesses, whether anything reads
/// the results, and per operand the source kind, with a weight's shape,
/// bytes, trainability and whether this use holds it. The dynamic
/// programming builds one node table per class and one edge table per
/// pair of classes joined the same way.
std::vector<int32_t> costClasses(const sim::Graph &graph);

} // namespace ppc::search

#endif // PPC_SEARCH_BLOCKS_H
