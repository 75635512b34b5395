//===- ProfileRequests.cpp - the kernels a search would price -------------===//

#include "ppc/Search/ProfileRequests.h"

#include "ppc/Simulator/CostModel.h"

#include <nlohmann/json.hpp>

#include <fstream>
#include <set>
#include <tuple>

namespace ppc::search {

namespace {

using json = nlohmann::ordered_json;

json boxesOf(const std::vector<TensorAccess> &tensors,
             const std::vector<Range> &iter) {
  json boxes = json::array();
  for (const TensorAccess &tensor : tensors) {
    json lo = json::array(), hi = json::array();
    for (const Range &r : sliceOf(tensor, iter)) {
      lo.push_back(r.lo);
      hi.push_back(r.hi);
    }
    boxes.push_back({{"lo", lo}, {"hi", hi}});
  }
  return boxes;
}

} // namespace

std::vector<std::pair<size_t, sim::KernelShape>>
kernelsOfSpace(const sim::Graph &graph, const ConfigSpace &space) {
  std::vector<std::pair<size_t, sim::KernelShape>> kernels;
  std::set<std::tuple<std::string, DType, std::vector<std::vector<int64_t>>>>
      keys;
  for (size_t k = 0; k < graph.ops.size(); ++k) {
    const sim::Op &op = graph.ops[k];
    std::set<std::vector<int64_t>> degreeVectors;
    for (const OpConfig &config : space.configs(k))
      degreeVectors.insert(config.degrees);
    for (const std::vector<int64_t> &degrees : degreeVectors) {
      int64_t partitions = 1;
      for (int64_t d : degrees)
        partitions *= d;
      // Uneven splits give a few distinct shapes; each is a kernel.
      for (int64_t index = 0; index < partitions; ++index) {
        sim::KernelShape shape = sim::kernelShape(op, degrees, index);
        if (keys.emplace(op.kind, op.dtype, shape.operandShapes).second)
          kernels.emplace_back(k, std::move(shape));
      }
    }
  }
  return kernels;
}

size_t calibrateProfileMisses(sim::ProfiledCostModel &profile,
                              const sim::Graph &graph, const Machine &machine,
                              size_t &total) {
  std::vector<std::pair<size_t, sim::KernelShape>> kernels =
      kernelsOfSpace(graph, ConfigSpace(graph, machine));
  total = 2 * kernels.size();
  return profile.calibrateMisses(graph, kernels, machine.getSpec(0));
}

std::string writeProfileRequests(const sim::Graph &graph,
                                 const ConfigSpace &space,
                                 const std::string &path, int64_t &count) {
  json kernels = json::array();
  for (const auto &[index, shape] : kernelsOfSpace(graph, space)) {
    const sim::Op &op = graph.ops[index];
    kernels.push_back({{"op_index", index},
                       {"op", op.kind},
                       {"dtype", stringifyDType(op.dtype)},
                       {"operand_shapes", shape.operandShapes},
                       {"operands", boxesOf(op.space.operands, shape.iter)},
                       {"results", boxesOf(op.space.results, shape.iter)}});
  }
  std::ofstream file(path);
  if (!file)
    return "cannot open '" + path + "' for writing";
  // One kernel per line (the library escapes every string).
  file << "{\n  \"version\": 1,\n  \"kernels\": [";
  for (size_t i = 0; i < kernels.size(); ++i)
    file << (i ? ",\n    " : "\n    ") << kernels[i].dump();
  file << "\n  ]\n}\n";
  file.close();
  if (!file)
    return "cannot write '" + path + "'";
  count = static_cast<int64_t>(kernels.size());
  return "";
}

} // namespace ppc::search
