//===- TopologyDialect.cpp - ppc machine description dialect -------------===//

#include "ppc/Dialect/Topology/TopologyDialect.h"
#include "ppc/Dialect/Topology/TopologyOps.h"
#include "ppc/Support/CheckedMath.h"
#include "ppc/Support/MachineView.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/DialectImplementation.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/EquivalenceClasses.h"
#include "llvm/ADT/TypeSwitch.h"

#include <array>
#include <cmath>
#include <cstdio>
#include <cstdlib>

using namespace mlir;
using namespace ppc::topo;

#include "ppc/Dialect/Topology/TopologyDialect.cpp.inc"

#define GET_ATTRDEF_CLASSES
#include "ppc/Dialect/Topology/TopologyAttrs.cpp.inc"

#define GET_OP_CLASSES
#include "ppc/Dialect/Topology/TopologyOps.cpp.inc"

namespace {

/// Prints aliases (#h100_sxm5_80gb, #nvlink, #cluster) so that a machine's
/// device and link specs are written once at the top of the file.
struct TopoOpAsmInterface : public OpAsmDialectInterface {
  using OpAsmDialectInterface::OpAsmDialectInterface;

  AliasResult getAlias(Attribute attr, raw_ostream &os) const override {
    if (auto device = dyn_cast<DeviceAttr>(attr)) {
      std::string alias;
      for (char c : device.getName())
        alias += std::isalnum(static_cast<unsigned char>(c))
                     ? static_cast<char>(std::tolower(c))
                     : '_';
      if (alias.empty() || std::isdigit(static_cast<unsigned char>(alias[0])))
        alias = "device_" + alias;
      os << alias;
      return AliasResult::OverridableAlias;
    }
    if (auto link = dyn_cast<LinkAttr>(attr)) {
      os << ppc::stringifyLinkKind(link.getKind());
      return AliasResult::OverridableAlias;
    }
    if (isa<ClusterAttr>(attr)) {
      os << "cluster";
      return AliasResult::OverridableAlias;
    }
    return AliasResult::NoAlias;
  }
};

} // namespace

void TopologyDialect::initialize() {
  addAttributes<
#define GET_ATTRDEF_LIST
#include "ppc/Dialect/Topology/TopologyAttrs.cpp.inc"
      >();
  addOperations<
#define GET_OP_LIST
#include "ppc/Dialect/Topology/TopologyOps.cpp.inc"
      >();
  addInterfaces<TopoOpAsmInterface>();
}

//===----------------------------------------------------------------------===//
// Number syntax
//===----------------------------------------------------------------------===//

/// Prints the shortest text that reads back as `value`, always with a '.' so
/// that MLIR lexes it as a float.
static void printDouble(AsmPrinter &printer, double value) {
  char buffer[40];
  for (int precision = 1; precision <= 17; ++precision) {
    std::snprintf(buffer, sizeof(buffer), "%.*g", precision, value);
    if (std::strtod(buffer, nullptr) == value)
      break;
  }
  std::string text(buffer);
  if (text.find('.') == std::string::npos) {
    size_t exponent = text.find_first_of("eE");
    text.insert(exponent == std::string::npos ? text.size() : exponent, ".0");
  }
  printer.getStream() << text;
}

/// A float or an integer (so that `bandwidth = 100` is accepted).
static ParseResult parseNumber(AsmParser &parser, double &value) {
  SMLoc loc = parser.getCurrentLocation();
  Attribute attr;
  if (parser.parseAttribute(attr))
    return failure();
  if (auto f = dyn_cast<FloatAttr>(attr))
    value = f.getValueAsDouble();
  else if (auto i = dyn_cast<IntegerAttr>(attr))
    value = static_cast<double>(i.getValue().getSExtValue());
  else
    return parser.emitError(loc, "expected a number");
  return success();
}

/// `key = <number>`.
static ParseResult parseNumberField(AsmParser &parser, StringRef key,
                                    double &value) {
  return failure(parser.parseKeyword(key) || parser.parseEqual() ||
                 parseNumber(parser, value));
}

static std::string listDTypes() {
  std::string names;
  for (int i = 0; i < ppc::kNumDTypes; ++i)
    names += std::string(i ? ", " : "") +
             ppc::stringifyDType(static_cast<ppc::DType>(i));
  return names;
}

static std::string listLinkKinds() {
  std::string names;
  for (int i = 0; i <= static_cast<int>(ppc::LinkKind::Other); ++i)
    names += std::string(i ? ", " : "") +
             ppc::stringifyLinkKind(static_cast<ppc::LinkKind>(i));
  return names;
}

//===----------------------------------------------------------------------===//
// DeviceAttr
//===----------------------------------------------------------------------===//

// #topo.device<"name", peak_flops = {f32 = 1.0e+13, ...},
//              memory_bandwidth = 1.0e+12, memory_bytes = 17179869184
//              [, launch_overhead = 5.0e-06]
//              [, half_efficiency_flops = 2.0e+05] [, compute_units = 132]
//              [, matmul_efficiency = 0.7] [, bandwidth_efficiency = 0.9]
//              [, attention_forward_efficiency = 0.5]
//              [, attention_backward_efficiency = 0.5]
//              [, attention_half_efficiency_flops = 5.5e+10]>
Attribute DeviceAttr::parse(AsmParser &parser, Type) {
  MLIRContext *ctx = parser.getContext();
  SMLoc loc = parser.getCurrentLocation();
  std::string name;
  if (parser.parseLess() || parser.parseString(&name) || parser.parseComma() ||
      parser.parseKeyword("peak_flops") || parser.parseEqual())
    return {};
  SmallVector<NamedAttribute> flops;
  auto parseFlop = [&]() -> ParseResult {
    std::string key;
    if (failed(parser.parseOptionalKeywordOrString(&key))) {
      // `i8` lexes as an integer type, not a keyword.
      Type type;
      OptionalParseResult parsedType = parser.parseOptionalType(type);
      if (!parsedType.has_value() || failed(*parsedType))
        return parser.emitError(parser.getCurrentLocation(),
                                "expected an element type name (")
               << listDTypes() << ")";
      llvm::raw_string_ostream(key) << type;
    }
    double value;
    if (parser.parseEqual() || parseNumber(parser, value))
      return failure();
    flops.emplace_back(StringAttr::get(ctx, key),
                       FloatAttr::get(Float64Type::get(ctx), value));
    return success();
  };
  if (parser.parseCommaSeparatedList(AsmParser::Delimiter::Braces, parseFlop))
    return {};
  double bandwidth, overhead = 0, halfFlops = 0, matmul = 0, streaming = 0,
                    attentionFwd = 0, attentionBwd = 0, attentionHalf = 0;
  int64_t bytes, units = 0;
  if (parser.parseComma() ||
      parseNumberField(parser, "memory_bandwidth", bandwidth) ||
      parser.parseComma() || parser.parseKeyword("memory_bytes") ||
      parser.parseEqual() || parser.parseInteger(bytes))
    return {};
  // The trailing fields are optional; each is named.
  while (succeeded(parser.parseOptionalComma())) {
    if (succeeded(parser.parseOptionalKeyword("launch_overhead"))) {
      if (parser.parseEqual() || parseNumber(parser, overhead))
        return {};
    } else if (succeeded(parser.parseOptionalKeyword("compute_units"))) {
      if (parser.parseEqual() || parser.parseInteger(units))
        return {};
    } else if (succeeded(parser.parseOptionalKeyword("matmul_efficiency"))) {
      if (parser.parseEqual() || parseNumber(parser, matmul))
        return {};
    } else if (succeeded(
                   parser.parseOptionalKeyword("bandwidth_efficiency"))) {
      if (parser.parseEqual() || parseNumber(parser, streaming))
        return {};
    } else if (succeeded(parser.parseOptionalKeyword(
                   "attention_forward_efficiency"))) {
      if (parser.parseEqual() || parseNumber(parser, attentionFwd))
        return {};
    } else if (succeeded(parser.parseOptionalKeyword(
                   "attention_backward_efficiency"))) {
      if (parser.parseEqual() || parseNumber(parser, attentionBwd))
        return {};
    } else if (succeeded(parser.parseOptionalKeyword(
                   "attention_half_efficiency_flops"))) {
      if (parser.parseEqual() || parseNumber(parser, attentionHalf))
        return {};
    } else if (parseNumberField(parser, "half_efficiency_flops", halfFlops)) {
      return {};
    }
  }
  if (parser.parseGreater())
    return {};
  return getChecked([&] { return parser.emitError(loc); }, ctx, name,
                    DictionaryAttr::get(ctx, flops), APFloat(bandwidth), bytes,
                    APFloat(overhead), APFloat(halfFlops), units,
                    APFloat(matmul), APFloat(streaming), APFloat(attentionFwd),
                    APFloat(attentionBwd), APFloat(attentionHalf));
}

void DeviceAttr::print(AsmPrinter &printer) const {
  printer << "<\"" << getName() << "\", peak_flops = {";
  llvm::interleaveComma(getPeakFlops(), printer, [&](NamedAttribute entry) {
    printer.printKeywordOrString(entry.getName().getValue());
    printer << " = ";
    printDouble(printer, cast<FloatAttr>(entry.getValue()).getValueAsDouble());
  });
  printer << "}, memory_bandwidth = ";
  printDouble(printer, getMemoryBandwidth().convertToDouble());
  printer << ", memory_bytes = " << getMemoryBytes();
  if (!getLaunchOverhead().isZero()) {
    printer << ", launch_overhead = ";
    printDouble(printer, getLaunchOverhead().convertToDouble());
  }
  if (!getHalfEfficiencyFlops().isZero()) {
    printer << ", half_efficiency_flops = ";
    printDouble(printer, getHalfEfficiencyFlops().convertToDouble());
  }
  if (getComputeUnits() != 0)
    printer << ", compute_units = " << getComputeUnits();
  if (!getMatmulEfficiency().isZero()) {
    printer << ", matmul_efficiency = ";
    printDouble(printer, getMatmulEfficiency().convertToDouble());
  }
  if (!getBandwidthEfficiency().isZero()) {
    printer << ", bandwidth_efficiency = ";
    printDouble(printer, getBandwidthEfficiency().convertToDouble());
  }
  if (!getAttentionForwardEfficiency().isZero()) {
    printer << ", attention_forward_efficiency = ";
    printDouble(printer, getAttentionForwardEfficiency().convertToDouble());
  }
  if (!getAttentionBackwardEfficiency().isZero()) {
    printer << ", attention_backward_efficiency = ";
    printDouble(printer, getAttentionBackwardEfficiency().convertToDouble());
  }
  if (!getAttentionHalfEfficiencyFlops().isZero()) {
    printer << ", attention_half_efficiency_flops = ";
    printDouble(printer, getAttentionHalfEfficiencyFlops().convertToDouble());
  }
  printer << ">";
}

LogicalResult DeviceAttr::verify(
    function_ref<InFlightDiagnostic()> emitError, StringRef name,
    DictionaryAttr peakFlops, APFloat memoryBandwidth, int64_t memoryBytes,
    APFloat launchOverhead, APFloat halfEfficiencyFlops, int64_t computeUnits,
    APFloat matmulEfficiency, APFloat bandwidthEfficiency,
    APFloat attentionForwardEfficiency, APFloat attentionBackwardEfficiency,
    APFloat attentionHalfEfficiencyFlops) {
  if (name.empty())
    return emitError() << "device name must not be empty";
  bool hasF32 = false;
  for (NamedAttribute entry : peakFlops) {
    StringRef key = entry.getName().getValue();
    if (!ppc::symbolizeDType(key.str()))
      return emitError() << "unknown element type '" << key
                         << "' in peak_flops (expected one of " << listDTypes()
                         << ")";
    auto value = dyn_cast<FloatAttr>(entry.getValue());
    if (!value)
      return emitError() << "peak_flops." << key << " must be a float";
    double flops = value.getValueAsDouble();
    if (!(std::isfinite(flops) && flops > 0))
      return emitError() << "peak_flops." << key << " must be > 0, got "
                         << flops;
    hasF32 |= key == "f32";
  }
  if (!hasF32)
    return emitError() << "peak_flops must give an f32 rate";
  double bandwidth = memoryBandwidth.convertToDouble();
  if (!(std::isfinite(bandwidth) && bandwidth > 0))
    return emitError() << "memory_bandwidth must be > 0, got " << bandwidth;
  if (memoryBytes <= 0)
    return emitError() << "memory_bytes must be > 0, got " << memoryBytes;
  double overhead = launchOverhead.convertToDouble();
  if (!(std::isfinite(overhead) && overhead >= 0))
    return emitError() << "launch_overhead must be >= 0, got " << overhead;
  for (auto [name, value] :
       {std::pair{"half_efficiency_flops",
                  halfEfficiencyFlops.convertToDouble()},
        std::pair{"attention_half_efficiency_flops",
                  attentionHalfEfficiencyFlops.convertToDouble()}})
    if (!(std::isfinite(value) && value >= 0))
      return emitError() << name << " must be >= 0, got " << value;
  if (computeUnits < 0)
    return emitError() << "compute_units must be >= 0, got " << computeUnits;
  // 0 leaves a fraction unset.
  for (auto [name, value] :
       {std::pair{"matmul_efficiency", matmulEfficiency.convertToDouble()},
        std::pair{"bandwidth_efficiency",
                  bandwidthEfficiency.convertToDouble()},
        std::pair{"attention_forward_efficiency",
                  attentionForwardEfficiency.convertToDouble()},
        std::pair{"attention_backward_efficiency",
                  attentionBackwardEfficiency.convertToDouble()}})
    if (!(value >= 0 && value <= 1))
      return emitError() << name << " must be in [0, 1], got " << value;
  return success();
}

//===----------------------------------------------------------------------===//
// LinkAttr
//===----------------------------------------------------------------------===//

/// `[[bytes, bytes/s], ...]` as the flat list bytes0, rate0, bytes1, ...
static ParseResult parseCurve(AsmParser &parser, SmallVectorImpl<double> &flat) {
  return parser.parseCommaSeparatedList(
      AsmParser::Delimiter::Square, [&]() -> ParseResult {
        double bytes, rate;
        if (parser.parseLSquare() || parseNumber(parser, bytes) ||
            parser.parseComma() || parseNumber(parser, rate) ||
            parser.parseRSquare())
          return failure();
        flat.push_back(bytes);
        flat.push_back(rate);
        return success();
      });
}

static void printCurve(AsmPrinter &printer, StringRef key,
                       DenseF64ArrayAttr flat) {
  if (!flat || flat.empty())
    return;
  printer << ", " << key << " = [";
  ArrayRef<double> values = flat.asArrayRef();
  for (size_t i = 0; i + 1 < values.size(); i += 2) {
    printer << (i ? ", [" : "[");
    printDouble(printer, values[i]);
    printer << ", ";
    printDouble(printer, values[i + 1]);
    printer << "]";
  }
  printer << "]";
}

// #topo.link<nvlink, bandwidth = 4.5e+11, latency = 1.0e-06
//            [, exchange_bus_bandwidth = 3.7e+11]
//            [, bandwidth_by_size = [[bytes, rate], ...]]
//            [, collective_bandwidth_by_size = [[bytes, rate], ...]]
//            [, send_bandwidth_by_size = [[bytes, rate], ...]]>
// The optional fields come in that order, each at most once.
Attribute LinkAttr::parse(AsmParser &parser, Type) {
  SMLoc loc = parser.getCurrentLocation();
  std::string kindName;
  if (parser.parseLess())
    return {};
  SMLoc kindLoc = parser.getCurrentLocation();
  if (parser.parseKeywordOrString(&kindName))
    return {};
  std::optional<ppc::LinkKind> kind = ppc::symbolizeLinkKind(kindName);
  if (!kind) {
    parser.emitError(kindLoc, "unknown link kind '")
        << kindName << "' (expected one of " << listLinkKinds() << ")";
    return {};
  }
  double bandwidth, latency;
  if (parser.parseComma() || parseNumberField(parser, "bandwidth", bandwidth) ||
      parser.parseComma() || parseNumberField(parser, "latency", latency))
    return {};
  double exchange = 0;
  SmallVector<double> bySize, collective, send;
  // The exchange bus bandwidth (a number), then the curves.
  const std::pair<StringRef, SmallVector<double> *> fields[] = {
      {"exchange_bus_bandwidth", nullptr},
      {"bandwidth_by_size", &bySize},
      {"collective_bandwidth_by_size", &collective},
      {"send_bandwidth_by_size", &send}};
  size_t next = 0;
  while (succeeded(parser.parseOptionalComma())) {
    SMLoc keyLoc = parser.getCurrentLocation();
    StringRef key;
    if (parser.parseKeyword(&key))
      return {};
    size_t which = next;
    while (which < std::size(fields) && fields[which].first != key)
      ++which;
    if (which == std::size(fields)) {
      InFlightDiagnostic diag = parser.emitError(keyLoc, "expected ");
      for (size_t i = next; i < std::size(fields); ++i)
        diag << (i > next ? ", " : "") << "'" << fields[i].first << "'";
      diag << " after the link's "
           << (next ? fields[next - 1].first : StringRef("latency"))
           << ", got '" << key << "'";
      return {};
    }
    if (parser.parseEqual())
      return {};
    if (!fields[which].second) {
      if (failed(parseNumber(parser, exchange)))
        return {};
    } else if (parseCurve(parser, *fields[which].second)) {
      return {};
    }
    next = which + 1;
  }
  if (parser.parseGreater())
    return {};
  MLIRContext *context = parser.getContext();
  return getChecked([&] { return parser.emitError(loc); }, context, *kind,
                    APFloat(bandwidth), APFloat(latency), APFloat(exchange),
                    DenseF64ArrayAttr::get(context, bySize),
                    DenseF64ArrayAttr::get(context, collective),
                    DenseF64ArrayAttr::get(context, send));
}

void LinkAttr::print(AsmPrinter &printer) const {
  printer << "<" << ppc::stringifyLinkKind(getKind()) << ", bandwidth = ";
  printDouble(printer, getBandwidth().convertToDouble());
  printer << ", latency = ";
  printDouble(printer, getLatency().convertToDouble());
  if (double exchange = getExchangeBusBandwidth().convertToDouble();
      exchange != 0) {
    printer << ", exchange_bus_bandwidth = ";
    printDouble(printer, exchange);
  }
  printCurve(printer, "bandwidth_by_size", getBandwidthBySize());
  printCurve(printer, "collective_bandwidth_by_size",
             getCollectiveBandwidthBySize());
  printCurve(printer, "send_bandwidth_by_size", getSendBandwidthBySize());
  printer << ">";
}

static LogicalResult verifyCurve(function_ref<InFlightDiagnostic()> emitError,
                                 StringRef key, DenseF64ArrayAttr flat) {
  if (!flat)
    return success();
  ppc::BandwidthCurve curve;
  ArrayRef<double> values = flat.asArrayRef();
  if (values.size() % 2 != 0)
    return emitError() << key << " must hold [bytes, bytes/s] pairs";
  for (size_t i = 0; i < values.size(); i += 2)
    curve.points.push_back({values[i], values[i + 1]});
  if (absl::Status problem = curve.validate(); !problem.ok())
    return emitError() << key << ": " << ppc::messageOf(problem);
  return success();
}

LogicalResult LinkAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                               ppc::LinkKind, APFloat bandwidth,
                               APFloat latency, APFloat exchangeBusBandwidth,
                               DenseF64ArrayAttr bySize,
                               DenseF64ArrayAttr collective,
                               DenseF64ArrayAttr send) {
  double bw = bandwidth.convertToDouble(), lat = latency.convertToDouble();
  if (!(std::isfinite(bw) && bw > 0))
    return emitError() << "link bandwidth must be > 0, got " << bw;
  if (!(std::isfinite(lat) && lat >= 0))
    return emitError() << "link latency must be >= 0, got " << lat;
  if (double exchange = exchangeBusBandwidth.convertToDouble();
      !(std::isfinite(exchange) && exchange >= 0))
    return emitError() << "link exchange_bus_bandwidth must be >= 0, got "
                       << exchange;
  if (failed(verifyCurve(emitError, "bandwidth_by_size", bySize)) ||
      failed(
          verifyCurve(emitError, "collective_bandwidth_by_size", collective)) ||
      failed(verifyCurve(emitError, "send_bandwidth_by_size", send)))
    return failure();
  return success();
}

//===----------------------------------------------------------------------===//
// ClusterAttr
//===----------------------------------------------------------------------===//

// #topo.cluster<nodes = 2, devices_per_node = 8[, nics_per_node = 8]
//               [, cores_per_node = 2], device = #topo.device<...>,
//               intra = #topo.link<...>, inter = #topo.link<...>>
Attribute ClusterAttr::parse(AsmParser &parser, Type) {
  SMLoc loc = parser.getCurrentLocation();
  int64_t nodes, perNode, nics = 1, cores = 0;
  DeviceAttr device;
  LinkAttr intra, inter;
  if (parser.parseLess() || parser.parseKeyword("nodes") ||
      parser.parseEqual() || parser.parseInteger(nodes) ||
      parser.parseComma() || parser.parseKeyword("devices_per_node") ||
      parser.parseEqual() || parser.parseInteger(perNode) ||
      parser.parseComma())
    return {};
  if (succeeded(parser.parseOptionalKeyword("nics_per_node")) &&
      (parser.parseEqual() || parser.parseInteger(nics) || parser.parseComma()))
    return {};
  if (succeeded(parser.parseOptionalKeyword("cores_per_node")) &&
      (parser.parseEqual() || parser.parseInteger(cores) ||
       parser.parseComma()))
    return {};
  if (parser.parseKeyword("device") || parser.parseEqual() ||
      parser.parseAttribute(device) || parser.parseComma() ||
      parser.parseKeyword("intra") || parser.parseEqual() ||
      parser.parseAttribute(intra) || parser.parseComma() ||
      parser.parseKeyword("inter") || parser.parseEqual() ||
      parser.parseAttribute(inter) || parser.parseGreater())
    return {};
  return getChecked([&] { return parser.emitError(loc); }, parser.getContext(),
                    nodes, perNode, nics, cores, device, intra, inter);
}

void ClusterAttr::print(AsmPrinter &printer) const {
  printer << "<nodes = " << getNodes()
          << ", devices_per_node = " << getDevicesPerNode();
  if (getNicsPerNode() != 1)
    printer << ", nics_per_node = " << getNicsPerNode();
  if (getCoresPerNode() != 0)
    printer << ", cores_per_node = " << getCoresPerNode();
  printer << ", device = " << getDevice() << ", intra = " << getIntra()
          << ", inter = " << getInter() << ">";
}

LogicalResult ClusterAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                                  int64_t nodes, int64_t devicesPerNode,
                                  int64_t nicsPerNode, int64_t coresPerNode,
                                  DeviceAttr device, LinkAttr intra,
                                  LinkAttr inter) {
  if (nodes < 1)
    return emitError() << "a cluster needs nodes >= 1, got " << nodes;
  if (devicesPerNode < 1)
    return emitError() << "a cluster needs devices_per_node >= 1, got "
                       << devicesPerNode;
  // The simulator and search build every device: bound the count, without
  // overflowing, before anything asks for it.
  if (std::optional<int64_t> count = ppc::checkedMul(nodes, devicesPerNode);
      !count || *count > ppc::kMaxDevices)
    return emitError() << "a cluster of " << nodes << " nodes x "
                       << devicesPerNode
                       << " devices per node is more than the "
                       << ppc::kMaxDevices << " devices ppc supports";
  if (nicsPerNode < 1 || nicsPerNode > devicesPerNode)
    return emitError() << "nics_per_node must be between 1 and "
                          "devices_per_node ("
                       << devicesPerNode << "), got " << nicsPerNode;
  if (coresPerNode < 0)
    return emitError() << "cores_per_node must be >= 0 (0: every device "
                          "computes at once), got "
                       << coresPerNode;
  if (!device || !intra || !inter)
    return emitError() << "a cluster needs a device, an intra and an inter "
                          "link";
  return success();
}

//===----------------------------------------------------------------------===//
// Ops
//===----------------------------------------------------------------------===//

void MachineOp::build(OpBuilder &builder, OperationState &state,
                      StringRef name) {
  state.addAttribute(getSymNameAttrName(state.name),
                     builder.getStringAttr(name));
  state.addRegion()->emplaceBlock();
}

int64_t MachineOp::getNumDevices() { return llvm::range_size(getDevices()); }

LogicalResult MachineOp::verifyRegions() {
  // Vertex ids: devices and switches in order of appearance.
  llvm::DenseMap<StringAttr, int64_t> vertexOf;
  SmallVector<DeviceOp> devices;
  for (Operation &op : getGraph().front()) {
    if (auto device = dyn_cast<DeviceOp>(op)) {
      vertexOf[device.getSymNameAttr()] = vertexOf.size();
      devices.push_back(device);
    } else if (auto sw = dyn_cast<SwitchOp>(op)) {
      vertexOf[sw.getSymNameAttr()] = vertexOf.size();
    } else if (!isa<LinkOp>(op)) {
      return op.emitOpError() << "cannot be in a topo.machine, which holds "
                                 "only topo.device, topo.switch and "
                                 "topo.link ops";
    }
  }
  if (devices.empty())
    return emitOpError() << "has no devices";
  if (static_cast<int64_t>(devices.size()) > ppc::kMaxDevices)
    return emitOpError() << "has " << devices.size()
                         << " devices, more than the " << ppc::kMaxDevices
                         << " ppc supports";

  llvm::EquivalenceClasses<int64_t> components;
  for (auto [name, vertex] : vertexOf)
    components.insert(vertex);
  for (LinkOp link : getGraph().getOps<LinkOp>()) {
    int64_t ends[2];
    std::array<FlatSymbolRefAttr, 2> refs = {link.getSrcAttr(),
                                             link.getDstAttr()};
    for (auto [i, ref] : llvm::enumerate(refs)) {
      auto it = vertexOf.find(ref.getAttr());
      if (it == vertexOf.end())
        return link.emitOpError()
               << (i == 0 ? "source " : "destination ") << ref
               << " is not a device or switch of machine @" << getSymName();
      ends[i] = it->second;
    }
    if (ends[0] == ends[1])
      return link.emitOpError()
             << "connects " << link.getSrcAttr() << " to itself";
    components.unionSets(ends[0], ends[1]);
  }
  // A device no transfer can reach makes every strategy that uses it
  // impossible to cost, so reject it here.
  int64_t first = vertexOf[devices.front().getSymNameAttr()];
  for (DeviceOp device : devices)
    if (!components.isEquivalent(first, vertexOf[device.getSymNameAttr()]))
      return device.emitOpError()
             << "cannot reach device @" << devices.front().getSymName()
             << ": the link graph of machine @" << getSymName()
             << " is disconnected";
  return success();
}

LogicalResult DeviceOp::verify() {
  if (getNodeAttr().getInt() < 0)
    return emitOpError() << "node must be >= 0, got " << getNodeAttr().getInt();
  return success();
}

LogicalResult SwitchOp::verify() {
  if (getKind().empty())
    return emitOpError() << "kind must not be empty";
  if (IntegerAttr node = getNodeAttr(); node && node.getInt() < 0)
    return emitOpError() << "node must be >= 0 (leave it out for a switch "
                            "between nodes), got "
                         << node.getInt();
  return success();
}

//===----------------------------------------------------------------------===//
// The module's machine
//===----------------------------------------------------------------------===//

LogicalResult ppc::topo::verifyMachineAttribute(Operation *op,
                                                Attribute value) {
  if (!isa<ModuleOp>(op))
    return op->emitError() << "'" << kMachineAttrName
                           << "' belongs on a builtin.module, not on '"
                           << op->getName() << "'";
  if (isa<ClusterAttr>(value))
    return success();
  auto ref = dyn_cast<FlatSymbolRefAttr>(value);
  if (!ref)
    return op->emitError() << "'" << kMachineAttrName
                           << "' must be a #topo.cluster attribute or a "
                              "symbol reference to a topo.machine op, got "
                           << value;
  Operation *target = SymbolTable::lookupSymbolIn(op, ref.getAttr());
  if (!target)
    return op->emitError() << "'" << kMachineAttrName << "' refers to " << ref
                           << ", which this module does not define";
  if (!isa<MachineOp>(target))
    return op->emitError() << "'" << kMachineAttrName << "' refers to " << ref
                           << ", which is a '" << target->getName()
                           << "', not a topo.machine";
  return success();
}

std::optional<int64_t> ppc::topo::lookupMachineDeviceCount(Operation *op) {
  for (Operation *holder = op; holder; holder = holder->getParentOp()) {
    Attribute value = holder->getAttr(kMachineAttrName);
    if (!value)
      continue;
    if (auto cluster = dyn_cast<ClusterAttr>(value))
      return cluster.getNumDevices();
    if (auto ref = dyn_cast<FlatSymbolRefAttr>(value);
        ref && holder->hasTrait<OpTrait::SymbolTable>())
      if (auto machine = dyn_cast_or_null<MachineOp>(
              SymbolTable::lookupSymbolIn(holder, ref.getAttr())))
        return machine.getNumDevices();
    // A malformed machine is reported by its own verifier.
    return std::nullopt;
  }
  return std::nullopt;
}
