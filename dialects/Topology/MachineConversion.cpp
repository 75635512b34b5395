//===- MachineConversion.cpp - topo dialect <-> ppc::Machine --------------===//

#include "ppc/Dialect/Topology/MachineConversion.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/StringMap.h"

using namespace mlir;

namespace ppc::topo {

DeviceAttr getDeviceAttr(MLIRContext *context, const ppc::DeviceSpec &spec) {
  SmallVector<NamedAttribute> flops;
  for (int i = 0; i < ppc::kNumDTypes; ++i)
    if (spec.peakFlops[i] > 0)
      flops.emplace_back(
          StringAttr::get(context,
                          ppc::stringifyDType(static_cast<ppc::DType>(i))),
          FloatAttr::get(Float64Type::get(context), spec.peakFlops[i]));
  return DeviceAttr::get(
      context, spec.name, DictionaryAttr::get(context, flops),
      APFloat(spec.memoryBandwidth), spec.memoryBytes,
      APFloat(spec.launchOverhead), APFloat(spec.halfEfficiencyFlops),
      spec.computeUnits, APFloat(spec.matmulEfficiency),
      APFloat(spec.bandwidthEfficiency),
      APFloat(spec.attentionForwardEfficiency),
      APFloat(spec.attentionBackwardEfficiency),
      APFloat(spec.attentionHalfEfficiencyFlops));
}

DenseF64ArrayAttr getCurveAttr(MLIRContext *context,
                               const ppc::BandwidthCurve &curve) {
  SmallVector<double> flat;
  for (auto [bytes, rate] : curve.points) {
    flat.push_back(bytes);
    flat.push_back(rate);
  }
  return DenseF64ArrayAttr::get(context, flat);
}

ppc::BandwidthCurve toCurve(DenseF64ArrayAttr flat) {
  ppc::BandwidthCurve curve;
  if (!flat)
    return curve;
  ArrayRef<double> values = flat.asArrayRef();
  for (size_t i = 0; i + 1 < values.size(); i += 2)
    curve.points.push_back({values[i], values[i + 1]});
  return curve;
}

LinkAttr getLinkAttr(MLIRContext *context, const ppc::LinkSpec &spec) {
  return LinkAttr::get(
      context, spec.kind, APFloat(spec.bandwidth), APFloat(spec.latency),
      APFloat(spec.exchangeBusBandwidth), getCurveAttr(context, spec.bySize),
      getCurveAttr(context, spec.collectiveBySize),
      getCurveAttr(context, spec.sendBySize));
}

ClusterAttr getClusterAttr(MLIRContext *context, const ppc::ClusterSpec &spec) {
  return ClusterAttr::get(context, spec.nodes, spec.devicesPerNode,
                          spec.nicsPerNode, spec.coresPerNode,
                          getDeviceAttr(context, spec.device),
                          getLinkAttr(context, spec.intra),
                          getLinkAttr(context, spec.inter));
}

ppc::DeviceSpec toDeviceSpec(DeviceAttr attr) {
  ppc::DeviceSpec spec;
  spec.name = attr.getName().str();
  for (NamedAttribute entry : attr.getPeakFlops())
    if (std::optional<ppc::DType> type =
            ppc::symbolizeDType(entry.getName().getValue().str()))
      spec.setPeakFlops(*type,
                        cast<FloatAttr>(entry.getValue()).getValueAsDouble());
  spec.memoryBandwidth = attr.getMemoryBandwidth().convertToDouble();
  spec.memoryBytes = attr.getMemoryBytes();
  spec.launchOverhead = attr.getLaunchOverhead().convertToDouble();
  spec.halfEfficiencyFlops = attr.getHalfEfficiencyFlops().convertToDouble();
  spec.computeUnits = attr.getComputeUnits();
  spec.matmulEfficiency = attr.getMatmulEfficiency().convertToDouble();
  spec.bandwidthEfficiency = attr.getBandwidthEfficiency().convertToDouble();
  spec.attentionForwardEfficiency =
      attr.getAttentionForwardEfficiency().convertToDouble();
  spec.attentionBackwardEfficiency =
      attr.getAttentionBackwardEfficiency().convertToDouble();
  spec.attentionHalfEfficiencyFlops =
      attr.getAttentionHalfEfficiencyFlops().convertToDouble();
  return spec;
}

ppc::LinkSpec toLinkSpec(LinkAttr attr) {
  ppc::LinkSpec spec;
  spec.kind = attr.getKind();
  spec.bandwidth = attr.getBandwidth().convertToDouble();
  spec.latency = attr.getLatency().convertToDouble();
  spec.exchangeBusBandwidth = attr.getExchangeBusBandwidth().convertToDouble();
  spec.bySize = toCurve(attr.getBandwidthBySize());
  spec.collectiveBySize = toCurve(attr.getCollectiveBandwidthBySize());
  spec.sendBySize = toCurve(attr.getSendBandwidthBySize());
  return spec;
}

ppc::ClusterSpec toClusterSpec(ClusterAttr attr) {
  ppc::ClusterSpec spec;
  spec.nodes = attr.getNodes();
  spec.devicesPerNode = attr.getDevicesPerNode();
  spec.nicsPerNode = attr.getNicsPerNode();
  spec.coresPerNode = attr.getCoresPerNode();
  spec.device = toDeviceSpec(attr.getDevice());
  spec.intra = toLinkSpec(attr.getIntra());
  spec.inter = toLinkSpec(attr.getInter());
  return spec;
}

MachineOp buildMachineOp(OpBuilder &builder, Location loc,
                         const ppc::Machine &machine, StringRef name) {
  MLIRContext *context = builder.getContext();
  auto op = MachineOp::create(builder, loc, name);
  OpBuilder::InsertionGuard guard(builder);
  builder.setInsertionPointToEnd(&op.getGraph().front());
  SmallVector<DeviceAttr> specs;
  for (const ppc::DeviceSpec &spec : machine.specs)
    specs.push_back(getDeviceAttr(context, spec));
  for (const ppc::Device &device : machine.devices)
    DeviceOp::create(builder, loc, builder.getStringAttr(device.name),
                     builder.getI64IntegerAttr(device.node),
                     specs[device.spec]);
  for (const ppc::Switch &sw : machine.switches)
    SwitchOp::create(builder, loc, builder.getStringAttr(sw.name),
                     builder.getStringAttr(sw.kind),
                     sw.node >= 0 ? builder.getI64IntegerAttr(sw.node)
                                  : IntegerAttr());
  for (const ppc::Link &link : machine.links)
    LinkOp::create(
        builder, loc,
        FlatSymbolRefAttr::get(context, machine.getVertexName(link.src)),
        FlatSymbolRefAttr::get(context, machine.getVertexName(link.dst)),
        getLinkAttr(context, link.spec));
  return op;
}

ppc::Machine toMachine(MachineOp op) {
  ppc::Machine machine;
  machine.name = op.getSymName().str();
  llvm::DenseMap<Attribute, int64_t> specOf;
  llvm::StringMap<int64_t> vertexOf;
  for (DeviceOp device : op.getDevices()) {
    auto [it, inserted] =
        specOf.try_emplace(device.getSpec(), machine.specs.size());
    if (inserted)
      machine.specs.push_back(toDeviceSpec(device.getSpec()));
    vertexOf[device.getSymName()] = machine.devices.size();
    machine.devices.push_back(
        {device.getSymName().str(), device.getNodeAttr().getInt(), it->second});
  }
  for (SwitchOp sw : op.getGraph().getOps<SwitchOp>()) {
    vertexOf[sw.getSymName()] = machine.numVertices();
    IntegerAttr node = sw.getNodeAttr();
    machine.switches.push_back(
        {sw.getSymName().str(), sw.getKind().str(), node ? node.getInt() : -1});
  }
  for (LinkOp link : op.getGraph().getOps<LinkOp>())
    machine.links.push_back({vertexOf.lookup(link.getSrc()),
                             vertexOf.lookup(link.getDst()),
                             toLinkSpec(link.getSpec())});
  return machine;
}

std::optional<ppc::Machine> lookupMachine(Operation *op) {
  for (Operation *holder = op; holder; holder = holder->getParentOp()) {
    Attribute value = holder->getAttr(kMachineAttrName);
    if (!value)
      continue;
    if (auto cluster = dyn_cast<ClusterAttr>(value))
      return ppc::Machine::fromCluster(toClusterSpec(cluster));
    if (auto ref = dyn_cast<FlatSymbolRefAttr>(value);
        ref && holder->hasTrait<OpTrait::SymbolTable>())
      if (auto machine = dyn_cast_or_null<MachineOp>(
              SymbolTable::lookupSymbolIn(holder, ref.getAttr())))
        return toMachine(machine);
    return std::nullopt;
  }
  return std::nullopt;
}

void attachMachine(ModuleOp module, const ppc::Machine &machine,
                   bool explicitGraph) {
  // The graph of a machine attached before goes with it.
  if (auto ref = module->getAttrOfType<FlatSymbolRefAttr>(kMachineAttrName))
    if (auto old = dyn_cast_or_null<MachineOp>(
            SymbolTable::lookupSymbolIn(module, ref.getAttr())))
      old.erase();
  MLIRContext *context = module.getContext();
  if (machine.cluster && !explicitGraph) {
    module->setAttr(kMachineAttrName,
                    getClusterAttr(context, *machine.cluster));
    return;
  }
  OpBuilder builder(context);
  MachineOp op =
      buildMachineOp(builder, module.getLoc(), machine,
                     machine.name.empty() ? "machine" : machine.name);
  // insert() renames the op if the module already has that symbol.
  SymbolTable(module).insert(op, module.getBody()->begin());
  module->setAttr(kMachineAttrName, FlatSymbolRefAttr::get(op));
}

} // namespace ppc::topo
