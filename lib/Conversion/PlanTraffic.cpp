//===- PlanTraffic.cpp - bytes a plan moves, bytes the simulator prices ---===//
//
// See PlanTraffic.h.
//
//===----------------------------------------------------------------------===//

#include "PlanTraffic.h"

#include "ppc/Simulator/Collectives.h"
#include "ppc/Simulator/CostModel.h"
#include "ppc/Simulator/Pipeline.h"
#include "ppc/Simulator/Simulator.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Support/FileUtilities.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/ToolOutputFile.h"

#include <nlohmann/json.hpp>

#include <cmath>
#include <map>
#include <tuple>

namespace ppc::conversion {

using namespace mlir;

namespace {

using Json = nlohmann::ordered_json;

/// Bytes of box [lo, hi) of `buffer`, at the element size of the tensor it
/// holds (a view's, the viewed buffer's; scratch is float32).
double boxBytes(Value buffer, ArrayRef<int64_t> lo, ArrayRef<int64_t> hi,
                SymbolTable &symbols) {
  double elements = 1;
  for (auto [l, h] : llvm::zip(lo, hi))
    elements *= static_cast<double>(h - l);
  int64_t elemBytes = 4;
  auto alloc = buffer.getDefiningOp<plan::AllocOp>();
  while (alloc && alloc.getView())
    alloc = alloc.getView().getDefiningOp<plan::AllocOp>();
  if (alloc && alloc.getTensor())
    if (auto tensor = symbols.lookup<plan::TensorOp>(*alloc.getTensor()))
      elemBytes = std::max<int64_t>(
          1, tensor.getElementType().getIntOrFloatBitWidth() / 8);
  return elements * static_cast<double>(elemBytes);
}

double wholeBytes(Value buffer, SymbolTable &symbols) {
  auto alloc = buffer.getDefiningOp<plan::AllocOp>();
  if (!alloc)
    return 0;
  return boxBytes(buffer, alloc.getLo(), alloc.getHi(), symbols);
}

void add(BytesByLinkKind &to, const BytesByLinkKind &from, double weight) {
  for (size_t k = 0; k < to.size(); ++k)
    to[k] += from[k] * weight;
}

/// The sends whose message a rank receives into a buffer that is one of
/// the plan's outputs: a pair of ranks matches its messages of one tag in
/// order.
llvm::DenseSet<Operation *> sendsToOutputs(plan::PlanOp plan) {
  // (receiver, sender, tag) -> that receiver's recvs, in program order.
  std::map<std::tuple<int64_t, int64_t, int64_t>, std::vector<plan::RecvOp>>
      recvs;
  for (auto program : plan.getBody().getOps<plan::ProgramOp>())
    for (auto recv : program.getBody().front().getOps<plan::RecvOp>())
      recvs[{static_cast<int64_t>(program.getRank()),
             static_cast<int64_t>(recv.getPeer()),
             static_cast<int64_t>(recv.getTag())}]
          .push_back(recv);
  llvm::DenseSet<Operation *> sends;
  std::map<std::tuple<int64_t, int64_t, int64_t>, size_t> matched;
  for (auto program : plan.getBody().getOps<plan::ProgramOp>())
    for (auto send : program.getBody().front().getOps<plan::SendOp>()) {
      std::tuple<int64_t, int64_t, int64_t> key{
          static_cast<int64_t>(send.getPeer()),
          static_cast<int64_t>(program.getRank()),
          static_cast<int64_t>(send.getTag())};
      size_t index = matched[key]++;
      auto it = recvs.find(key);
      if (it == recvs.end() || index >= it->second.size())
        continue;
      Value buffer = it->second[index].getBuffer();
      if (llvm::any_of(buffer.getUsers(), [](Operation *user) {
            return isa<plan::OutputOp>(user);
          }))
        sends.insert(send);
    }
  return sends;
}

} // namespace

PlanTraffic countPlanTraffic(plan::PlanOp plan, const Machine &machine) {
  PlanTraffic traffic;
  BytesByLinkKind &bytes = traffic.step;
  SymbolTable symbols(plan);
  llvm::DenseSet<Operation *> outputs = sendsToOutputs(plan);
  auto linkKind = [&](int64_t from, int64_t to) {
    return static_cast<size_t>(machine.effectiveLink(from, to).kind);
  };
  for (auto program : plan.getBody().getOps<plan::ProgramOp>()) {
    int64_t rank = static_cast<int64_t>(program.getRank());
    for (Operation &op : program.getBody().front()) {
      if (auto send = dyn_cast<plan::SendOp>(op)) {
        (outputs.contains(send)
             ? traffic.outputs
             : bytes)[linkKind(rank, static_cast<int64_t>(send.getPeer()))] +=
            boxBytes(send.getBuffer(), send.getLo(), send.getHi(), symbols);
        continue;
      }
      auto collective = dyn_cast<plan::CollectiveOp>(op);
      // Each member's program holds the collective: count it at the first.
      if (!collective || collective.getGroup().empty() ||
          collective.getGroup().front() != rank)
        continue;
      std::vector<int64_t> group(collective.getGroup().begin(),
                                 collective.getGroup().end());
      int64_t k = static_cast<int64_t>(group.size());
      // `share` of what an all-reduce of all of `buffer` moves.
      auto asAllReduce = [&](Value buffer, double share) {
        add(bytes,
            sim::allReduceBytesByLinkKind(machine, group,
                                          wholeBytes(buffer, symbols)),
            share);
      };
      using plan::CollectiveKind;
      switch (collective.getKind()) {
      case CollectiveKind::all_reduce:
        asAllReduce(collective.getBuffer(), 1);
        break;
      case CollectiveKind::reduce_scatter:
        asAllReduce(collective.getBuffer(), 0.5);
        break;
      case CollectiveKind::all_gather:
        if (collective.getResult())
          asAllReduce(collective.getResult(), 0.5);
        break;
      case CollectiveKind::broadcast: {
        // A ring from the root: every member but the last forwards it.
        double b = wholeBytes(collective.getBuffer(), symbols);
        int64_t root = static_cast<int64_t>(collective.getRoot());
        for (int64_t i = 0; i + 1 < k; ++i)
          bytes[linkKind(group[(root + i) % k], group[(root + i + 1) % k])] +=
              b;
        break;
      }
      case CollectiveKind::all_to_all: {
        // Member i sends its j-th of k pieces to member j.
        double piece = wholeBytes(collective.getBuffer(), symbols) /
                       static_cast<double>(k);
        for (int64_t i = 0; i < k; ++i)
          for (int64_t j = 0; j < k; ++j)
            if (i != j)
              bytes[linkKind(group[i], group[j])] += piece;
        break;
      }
      }
    }
  }
  return traffic;
}

BytesByLinkKind simulatedTraffic(const PartitionedFunction &parts,
                                 sim::Optimizer optimizer) {
  if (!parts.machine)
    return {};
  sim::RooflineCostModel roofline;
  sim::SimOptions options;
  options.optimizer = optimizer;
  if (parts.pipeline.enabled())
    return sim::simulatePipeline(parts.graph, *parts.machine, roofline, options,
                                 parts.strategy, parts.pipeline)
        .bytesByLinkKind;
  sim::Simulator simulator(parts.graph, *parts.machine, roofline, options);
  return simulator.simulate(parts.strategy).bytesByLinkKind;
}

LogicalResult reportTraffic(plan::PlanOp plan, const PartitionedFunction &parts,
                            sim::Optimizer optimizer, StringRef path,
                            Location loc) {
  if (!parts.machine)
    return success();
  PlanTraffic traffic = countPlanTraffic(plan, *parts.machine);
  const BytesByLinkKind &planned = traffic.step;
  // The simulator prices training steps: a forward-only plan has nothing
  // to agree with.
  bool training = static_cast<bool>(plan.getOptimizer());
  BytesByLinkKind priced{};
  if (training)
    priced = simulatedTraffic(parts, optimizer);
  // Both sum the same integers of bytes in another order, and halve some.
  auto agree = [](double a, double b) {
    return std::abs(a - b) <= 1e-9 * std::max({1.0, a, b});
  };
  Json kinds = Json::object();
  bool all = true;
  for (size_t k = 0; k < planned.size(); ++k) {
    if (planned[k] == 0 && priced[k] == 0 && traffic.outputs[k] == 0)
      continue;
    const char *name = stringifyLinkKind(static_cast<LinkKind>(k));
    Json entry = {{"plan_bytes", planned[k]}};
    if (training) {
      bool same = agree(planned[k], priced[k]);
      entry["simulated_bytes"] = priced[k];
      entry["agree"] = same;
      if (!same) {
        all = false;
        emitWarning(loc) << "the plan moves "
                         << llvm::formatv("{0:f0}", planned[k])
                         << " bytes a step over " << name
                         << " links where the simulator priced "
                         << llvm::formatv("{0:f0}", priced[k])
                         << ": its predicted time is not this plan's";
      }
    }
    entry["output_bytes"] = traffic.outputs[k];
    kinds[name] = std::move(entry);
  }
  if (path.empty())
    return success();
  Json json = {{"machine", parts.machineName}, {"link_kinds", kinds}};
  if (training)
    json["agree"] = all;
  else
    json["note"] = "a forward-only plan: the simulator prices training steps";
  if (StringRef dir = llvm::sys::path::parent_path(path); !dir.empty())
    (void)llvm::sys::fs::create_directories(dir);
  std::string error;
  std::unique_ptr<llvm::ToolOutputFile> output = openOutputFile(path, &error);
  if (!output)
    return emitError(loc) << "cannot open the traffic file '" << path
                          << "': " << error;
  output->os() << json.dump(2) << "\n";
  output->keep();
  return success();
}

} // namespace ppc::conversion
