//===- ProfileRequests.h - the kernels a search would price --*- C++ -*-===//
//
// MLIR-free. FlexFlow measures every configuration its search considers;
// ppc's search prices a kernel from a measured profile where it has one
// (docs/profile-format.md). A profile request file lists the kernels the
// configuration space asks for, one per distinct profile key (op kind,
// dtype, operand slice shapes): the op's index in the function (its
// symbol op<k> in a plan of the same function) and the boxes, in global
// coordinates, of the operand and result slices of one partition with
// those shapes. `ppc-profile PLAN --requests FILE` measures them on a
// backend and writes the profile the search then reads.
//
// Format (version 1):
//   {"version": 1, "kernels": [
//     {"op_index": 3, "op": "ppc.linear", "dtype": "f32",
//      "operand_shapes": [[8, 64], [64, 16], [16]],
//      "operands": [{"lo": [0, 0], "hi": [8, 64]}, ...],
//      "results": [{"lo": [0, 0], "hi": [8, 16]}]}, ...]}
//
//===----------------------------------------------------------------------===//

#ifndef PPC_SEARCH_PROFILEREQUESTS_H
#define PPC_SEARCH_PROFILEREQUESTS_H

#include "ppc/Search/Search.h"

#include <string>

namespace ppc::search {

/// The kernels of every op's configurations in `space`, one per distinct
/// profile key (op kind, dtype, operand slice shapes), in op order: the
/// op's index in the graph and one partition's slices.
std::vector<std::pair<size_t, sim::KernelShape>>
kernelsOfSpace(const sim::Graph &graph, const ConfigSpace &space);

/// Calibrates `profile`'s price for the kernels it lacks
/// (ProfiledCostModel::calibrateMisses) on the kernels of `graph`'s whole
/// configuration space on `machine`, so that ppc-search and ppc-simulate
/// price a strategy the same. Returns how many (kernel, phase) pairs of
/// `total` the profile measures.
size_t calibrateProfileMisses(sim::ProfiledCostModel &profile,
                              const sim::Graph &graph, const Machine &machine,
                              size_t &total);

/// Writes the requests of every op's configurations in `space` to `path`;
/// "" or what went wrong. `count` is set to the number of kernels listed.
std::string writeProfileRequests(const sim::Graph &graph,
                                 const ConfigSpace &space,
                                 const std::string &path, int64_t &count);

} // namespace ppc::search

#endif // PPC_SEARCH_PROFILEREQUESTS_H
