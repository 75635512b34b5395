//===- CostModel.cpp - time of one kernel on one device -------------------===//
//
// The roofline default and the measured-profile override. Formulas:
//
//   kernel (RooflineCostModel), for partition p of an op in phase ph:
//     flops = OpCost.<ph>Flops * points(p) / points(op)
//       (causal attention: the points of p's box with key <= query over the
//       whole triangle's, IterationSpace::workFraction)
//     bytes = OpCost.<ph>Bytes * elements(p) / elements(op)
//       where elements() sums the elements of every operand and result
//       (slices for p, whole tensors for the op). For the usual OpCost
//       (fwdBytes = all operands + results once, bwdBytes = 2 * fwdBytes)
//       this is exactly slice elements * elemBytes forward and twice that
//       backward; halos and operands a split does not shrink (a weight under
//       a batch split) are counted in full on every partition.
//     eff   = max(minEfficiency, flops / (flops + halfFlops)), halfFlops
//             being the device's half_efficiency_flops when it has one;
//             for a contraction (an iteration dim that two operands index
//             and no result: matmuls, convolutions) on a device with
//             compute_units, instead the GEMM model of NVIDIA's Matrix
//             Multiplication Background guide, per GEMM the phase runs (the
//             result forward; backward the gradient of each contracted
//             operand read from an op or a weight, not a bias, each an
//             equal share of the flops):
//               tiles = ceil(outputs / 128^2)      cuBLAS's usual tile
//               k     = points / outputs           the reduction
//               split = max(1, min(floor(units / tiles), floor(k / 256)))
//                       split-K: few tiles share the reduction out
//               wave  = tiles*split / (ceil(tiles*split / units) * units)
//               tile  = outputs / (tiles * 128^2)  partial last tile
//               depth = k' / (k' + 64), k' = k / split: a tile's fixed
//                       prologue and epilogue against its reduction
//               eff   = matmul_efficiency * wave * tile * depth
//             for a fused attention kernel (OpCost.kernel FusedAttention)
//             on a device with the attention efficiency of the phase,
//             instead the measured rate, no curve and no GEMM model:
//               compute = flops / (peak(dtype) * A)
//                         + fill * attention_half_efficiency_flops
//                                / (peak(bf16) * A)
//               A     = attention_forward_efficiency forward,
//                       attention_backward_efficiency backward
//               fill  = min(1, ceil(outputs / 128^2) / compute_units)
//             (a call's fixed cost, its causal tail and last wave, measured
//             on bf16 calls that fill the device: a time, whatever the
//             call's type, shorter for a call of fewer tiles than units)
//     time  = max(flops / (peak(dtype) * eff) or compute,
//                 bytes / (memoryBandwidth * bandwidth_efficiency))
//             + launchOverhead
//     and 0 (no kernel, no launch) when flops and bytes are both 0 (views
//     such as reshape) or the partition is empty.
//
//   optimizer step (CostModel::updateTime), per weight element with
//   s = stateTensors (SGD 0, momentum 1, Adam 2):
//     bytes = elemBytes * (3 + 2 s)  read weight and gradient, write weight;
//                                    read and write every state tensor
//     bytes = 2 elemBytes + 8 (1 + s) for 16-bit weights (mixed precision):
//                                    read the gradient, write the 16-bit
//                                    copy; read and write the fp32 master
//                                    weight and every fp32 state tensor
//     flops = 2 + 4 s                SGD's multiply-add, ~4 per state update
//     time  = max(flops / peak, bytes / memoryBandwidth) + launchOverhead
//     (elementwise: no small-kernel efficiency curve; f64 peak for 8-byte
//     weights, f32 otherwise, as optimizers update in f32 master weights).
//
//===----------------------------------------------------------------------===//

#include "ppc/Simulator/CostModel.h"

#include "ppc/Support/JsonReader.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <set>
#include <sstream>

using json = nlohmann::json;
// Written files keep their keys in a readable order.
using ojson = nlohmann::ordered_json;

namespace ppc::sim {
namespace {

std::vector<int64_t> sizesOf(const std::vector<Range> &slice) {
  std::vector<int64_t> sizes;
  sizes.reserve(slice.size());
  for (const Range &r : slice)
    sizes.push_back(r.size());
  return sizes;
}

double elementsOf(const std::vector<int64_t> &shape) {
  double n = 1;
  for (int64_t size : shape)
    n *= static_cast<double>(size);
  return n;
}

double elementsOf(const std::vector<std::vector<int64_t>> &shapes) {
  double n = 0;
  for (const std::vector<int64_t> &shape : shapes)
    n += elementsOf(shape);
  return n;
}

double elementsOf(const std::vector<TensorAccess> &tensors) {
  double n = 0;
  for (const TensorAccess &t : tensors)
    n += elementsOf(t.shape);
  return n;
}

/// Output elements of one thread-block tile of a GPU matrix
/// multiplication: 128 x 128, the tile cuBLAS picks for most large GEMMs
/// (NVIDIA, "Matrix Multiplication Background User's Guide", section 2.3).
constexpr double kTileElements = 128.0 * 128.0;
/// The reduction length at which a tile spends as long in its fixed
/// prologue and epilogue as in its main loop.
constexpr double kHalfDepth = 64;
/// The shortest slice of the reduction that split-K gives one unit: a GEMM
/// with fewer tiles than units has its reduction cut into up to
/// units / tiles slices of at least this many products each (cuBLAS's
/// split-K and stream-K kernels), so a 256 x 256 x 16384 GEMM keeps more
/// than one SM busy. Fitted with the H100 GEMM table of docs/simulator.md.
constexpr double kSplitKSlice = 256;

/// The fraction of the matrix units' rate a GEMM writing `outputs`
/// elements, each a sum over `points / outputs` products, reaches on
/// `units` compute units: its last wave's idle units, its last tile's
/// unused part and its tiles' fixed cost against their (split) reduction.
double gemmEfficiency(double outputs, double points, int64_t units) {
  if (outputs <= 0)
    return 1;
  double tiles = std::ceil(outputs / kTileElements);
  double depth = points / outputs;
  double splits =
      std::max(1.0, std::min(std::floor(static_cast<double>(units) / tiles),
                             std::floor(depth / kSplitKSlice)));
  double work = tiles * splits;
  double waves = std::ceil(work / static_cast<double>(units));
  double wave = work / (waves * static_cast<double>(units));
  double tile = outputs / (tiles * kTileElements);
  double slice = depth / splits;
  return wave * tile * slice / (slice + kHalfDepth);
}

const char *stringifyPhase(Phase phase) {
  return phase == Phase::Forward ? "forward" : "backward";
}

} // namespace

//===----------------------------------------------------------------------===//
// Kernel shapes
//===----------------------------------------------------------------------===//

KernelShape kernelShape(const Op &op, const std::vector<int64_t> &degrees,
                        int64_t index) {
  KernelShape shape;
  shape.iter = partitionRanges(op.space, degrees, index);
  shape.operandShapes.reserve(op.space.operands.size());
  for (const TensorAccess &operand : op.space.operands)
    shape.operandShapes.push_back(sizesOf(sliceOf(operand, shape.iter)));
  shape.resultShapes.reserve(op.space.results.size());
  for (const TensorAccess &result : op.space.results)
    shape.resultShapes.push_back(sizesOf(sliceOf(result, shape.iter)));
  return shape;
}

KernelShape
kernelShape(const std::vector<Range> &iter,
            const std::vector<std::vector<std::vector<Range>>> &operandSlices,
            const std::vector<std::vector<std::vector<Range>>> &resultSlices,
            size_t instance) {
  KernelShape shape;
  shape.iter = iter;
  shape.operandShapes.reserve(operandSlices.size());
  for (const auto &slices : operandSlices)
    shape.operandShapes.push_back(sizesOf(slices[instance]));
  shape.resultShapes.reserve(resultSlices.size());
  for (const auto &slices : resultSlices)
    shape.resultShapes.push_back(sizesOf(slices[instance]));
  return shape;
}

//===----------------------------------------------------------------------===//
// Roofline
//===----------------------------------------------------------------------===//

double CostModel::updateTime(int64_t elements, int64_t elemBytes,
                             int stateTensors, const DeviceSpec &device) const {
  if (elements <= 0)
    return 0;
  double n = static_cast<double>(elements);
  double e = static_cast<double>(elemBytes);
  double bytes = elemBytes < 4 ? n * (2 * e + 8 * (1 + stateTensors))
                               : n * e * (3 + 2 * stateTensors);
  double flops = n * (2 + 4 * stateTensors);
  double peak = device.getPeakFlops(elemBytes == 8 ? DType::F64 : DType::F32);
  // No launch overhead: frameworks update all weights with a few
  // multi-tensor kernels, not one kernel per weight.
  double bandwidth = device.streamingBandwidth();
  return std::max(flops / peak, bytes / bandwidth);
}

double RooflineCostModel::kernelTime(const Op &op, const KernelShape &shape,
                                     Phase phase,
                                     const DeviceSpec &device) const {
  bool forward = phase == Phase::Forward;
  double opFlops = forward ? op.cost.fwdFlops : op.cost.bwdFlops;
  double opBytes = forward ? op.cost.fwdBytes : op.cost.bwdBytes;
  if (opFlops <= 0 && opBytes <= 0)
    return 0; // A view: nothing runs, nothing is launched.

  double points = 1;
  for (const Range &r : shape.iter)
    points *= static_cast<double>(r.size());
  if (points == 0)
    return 0; // More partitions than points: this one has nothing to do.
  // Causal attention's later query rows see more keys: the share of the
  // work follows the points of the triangle in the partition's box.
  double pointFraction =
      op.space.causal ? op.space.workFraction(shape.iter)
                      : points / static_cast<double>(op.space.numPoints());

  // Bytes follow the slices, not the points: a halo or an operand the split
  // does not shrink is read in full by every partition.
  double wholeElements =
      elementsOf(op.space.operands) + elementsOf(op.space.results);
  double byteFraction =
      wholeElements > 0
          ? (elementsOf(shape.operandShapes) + elementsOf(shape.resultShapes)) /
                wholeElements
          : pointFraction;

  double flops = opFlops * pointFraction;
  double bytes = opBytes * byteFraction;
  double computeTime = 0;
  double peak = device.getPeakFlops(op.dtype);
  // A fused attention kernel at the device's measured rate for the phase;
  // where it has none, the GEMM model or the curve below.
  double attention = 0;
  if (op.cost.kernel == KernelKind::FusedAttention)
    attention = forward ? device.attentionForwardEfficiency
                        : device.attentionBackwardEfficiency;
  uint64_t contracted =
      device.computeUnits > 0 && attention <= 0 ? contractedOperands(op) : 0;
  if (flops > 0 && attention > 0) {
    // The rate A of the call's type, plus the fixed share measured on 16-bit
    // calls that fill the device (a time, read at the 16-bit rate it was
    // measured at, whatever the call's type), in proportion to the share of
    // the device's units the call's output tiles keep busy: a few tiles have
    // a short tail.
    double tiles =
        shape.resultShapes.empty()
            ? 1.0
            : std::ceil(elementsOf(shape.resultShapes[0]) / kTileElements);
    double fill = device.computeUnits > 0
                      ? std::min(1.0, tiles / device.computeUnits)
                      : 1.0;
    computeTime = flops / (peak * attention) +
                  fill * device.attentionHalfEfficiencyFlops /
                      (device.getPeakFlops(DType::BF16) * attention);
  } else if (flops > 0 && contracted != 0) {
    // The GEMMs of the phase: its result forward; backward the gradient of
    // every contracted operand that has one (activations and weights, not
    // the data; a bias's gradient is a cheap reduction). Each writes
    // `outputs` elements and does an equal share of the FLOPs.
    auto forEachGemm = [&](auto use) {
      size_t gemms = 0;
      if (!forward)
        for (size_t i = 0; i < op.operands.size() && i < 64; ++i)
          if ((contracted >> i & 1) &&
              (op.operands[i].kind == Source::Kind::Op ||
               op.operands[i].kind == Source::Kind::Weight)) {
            use(elementsOf(shape.operandShapes[i]));
            ++gemms;
          }
      if (gemms == 0)
        for (const std::vector<int64_t> &result : shape.resultShapes) {
          use(elementsOf(result));
          ++gemms;
        }
      return gemms;
    };
    size_t gemms = forEachGemm([](double) {});
    double matmul = device.matmulEfficiency > 0 ? device.matmulEfficiency : 1.0;
    forEachGemm([&](double outputs) {
      computeTime +=
          flops / static_cast<double>(gemms) /
          (peak * matmul *
           std::max(gemmEfficiency(outputs, points, device.computeUnits),
                    minEfficiency));
    });
  } else if (flops > 0) {
    double half =
        device.halfEfficiencyFlops > 0 ? device.halfEfficiencyFlops : halfFlops;
    double efficiency = half > 0 ? flops / (flops + half) : 1.0;
    efficiency = std::max(efficiency, minEfficiency);
    computeTime = flops / (peak * efficiency);
  }
  double bandwidth = device.streamingBandwidth();
  double memoryTime = bytes > 0 ? bytes / bandwidth : 0;
  return std::max(computeTime, memoryTime) + device.launchOverhead;
}

//===----------------------------------------------------------------------===//
// Measured profiles
//===----------------------------------------------------------------------===//

double ProfiledCostModel::kernelTime(const Op &op, const KernelShape &shape,
                                     Phase phase,
                                     const DeviceSpec &device) const {
  bool forward = phase == Phase::Forward;
  // A measurement wins even for a view: an executor that copies a reshape
  // spends the time it measured.
  Key key{op.kind, shape.operandShapes, op.dtype, device.name, phase};
  if (auto it = times.find(key); it != times.end()) {
    ++hits;
    return it->second;
  }
  // Views launch no kernel: there is nothing to measure, and counting them
  // as misses would hide how much of the real work the profile covers.
  if ((forward ? op.cost.fwdFlops : op.cost.bwdFlops) <= 0 &&
      (forward ? op.cost.fwdBytes : op.cost.bwdBytes) <= 0)
    return 0;
  ++misses;
  return fallback.kernelTime(op, shape, phase, device) * missScale(op.kind);
}

double ProfiledCostModel::missScale(const std::string &kind) const {
  auto it = missScaleByKind.find(kind);
  return it != missScaleByKind.end() ? it->second : defaultMissScale;
}

size_t ProfiledCostModel::calibrateMisses(
    const Graph &graph,
    const std::vector<std::pair<size_t, KernelShape>> &kernels,
    const DeviceSpec &device) {
  auto median = [](std::vector<double> values) {
    std::sort(values.begin(), values.end());
    size_t n = values.size();
    return n % 2 ? values[n / 2] : (values[n / 2 - 1] + values[n / 2]) / 2;
  };
  std::map<std::string, std::vector<double>> ratiosByKind;
  std::vector<double> ratios;
  for (const auto &[index, shape] : kernels) {
    const Op &op = graph.ops[index];
    for (Phase phase : {Phase::Forward, Phase::Backward}) {
      auto it = times.find(
          Key{op.kind, shape.operandShapes, op.dtype, device.name, phase});
      if (it == times.end())
        continue;
      double modeled = fallback.kernelTime(op, shape, phase, device);
      if (!(modeled > 0))
        continue;
      ratiosByKind[op.kind].push_back(it->second / modeled);
      ratios.push_back(it->second / modeled);
    }
  }
  // A ratio needs a few measurements: one kernel measured far off (a
  // profile of another machine, a stalled run) must not reprice the rest.
  constexpr size_t kMinMeasured = 3;
  missScaleByKind.clear();
  defaultMissScale = ratios.size() >= kMinMeasured ? median(ratios) : 1.0;
  for (auto &[kind, values] : ratiosByKind)
    if (values.size() >= kMinMeasured)
      missScaleByKind[kind] = median(std::move(values));
  return ratios.size();
}

namespace {

using json_reader::indexed;
using json_reader::jsonError;
using json_reader::ObjectReader;

absl::StatusOr<DType> readDType(ObjectReader &r) {
  PPC_ASSIGN_OR_RETURN(std::string name, r.getNonEmptyString("dtype"));
  if (std::optional<DType> type = symbolizeDType(name))
    return *type;
  std::string known;
  for (int i = 0; i < kNumDTypes; ++i)
    known += std::string(i ? ", " : "") + stringifyDType(static_cast<DType>(i));
  return jsonError(r.at("dtype"),
                   "unknown element type '" + name + "' (use " + known + ")");
}

absl::StatusOr<Phase> readPhase(ObjectReader &r) {
  PPC_ASSIGN_OR_RETURN(std::string name, r.getNonEmptyString("phase"));
  for (Phase phase : {Phase::Forward, Phase::Backward})
    if (name == stringifyPhase(phase))
      return phase;
  return jsonError(r.at("phase"),
                   "unknown phase '" + name + "' (use forward, backward)");
}

absl::StatusOr<std::vector<std::vector<int64_t>>> readShapes(ObjectReader &r) {
  PPC_ASSIGN_OR_RETURN(const json *value, r.get("operand_shapes"));
  std::string path = r.at("operand_shapes");
  if (!value->is_array())
    return jsonError(path, "must be an array of shapes");
  std::vector<std::vector<int64_t>> shapes;
  for (size_t i = 0; i < value->size(); ++i) {
    const json &dims = (*value)[i];
    std::string where = indexed(path, i);
    if (!dims.is_array())
      return jsonError(where, "must be an array of dim sizes");
    std::vector<int64_t> shape;
    for (size_t d = 0; d < dims.size(); ++d) {
      const json &size = dims[d];
      if (!size.is_number_integer() || size.get<int64_t>() < 0)
        return jsonError(indexed(where, d), "must be an integer >= 0");
      shape.push_back(size.get<int64_t>());
    }
    shapes.push_back(std::move(shape));
  }
  return shapes;
}

absl::StatusOr<ProfiledCostModel> readProfile(const json &value) {
  PPC_ASSIGN_OR_RETURN(ObjectReader top, ObjectReader::open(value, ""));
  PPC_ASSIGN_OR_RETURN(int64_t version, top.getInt("version"));
  if (version != 1)
    return jsonError("version", "unsupported version " +
                                    std::to_string(version) + " (expected 1)");
  std::optional<std::string> defaultDevice;
  if (top.has("device")) {
    PPC_ASSIGN_OR_RETURN(defaultDevice, top.getNonEmptyString("device"));
  }
  PPC_ASSIGN_OR_RETURN(const json *entries, top.getArray("entries"));
  PPC_RETURN_IF_ERROR(top.finish());

  ProfiledCostModel model;
  // Where each key was defined, to name both sides of a duplicate.
  std::map<ProfiledCostModel::Key, size_t> firstEntry;
  for (size_t i = 0; i < entries->size(); ++i) {
    std::string path = indexed("entries", i);
    PPC_ASSIGN_OR_RETURN(ObjectReader r,
                         ObjectReader::open((*entries)[i], path));
    ProfiledCostModel::Key key;
    PPC_ASSIGN_OR_RETURN(key.kind, r.getNonEmptyString("op"));
    PPC_ASSIGN_OR_RETURN(key.dtype, readDType(r));
    if (r.has("device")) {
      PPC_ASSIGN_OR_RETURN(key.device, r.getNonEmptyString("device"));
    } else if (defaultDevice) {
      key.device = *defaultDevice;
    } else {
      return jsonError(r.at("device"), "missing (and no top-level device)");
    }
    PPC_ASSIGN_OR_RETURN(key.phase, readPhase(r));
    PPC_ASSIGN_OR_RETURN(key.operandShapes, readShapes(r));
    PPC_ASSIGN_OR_RETURN(double seconds, r.getNumber("seconds"));
    if (!(std::isfinite(seconds) && seconds > 0))
      return jsonError(r.at("seconds"), "must be > 0");
    // How many timed runs the figure averages: for people, not the model.
    PPC_ASSIGN_OR_RETURN(int64_t runs, r.getInt("runs", 1));
    if (runs < 1)
      return jsonError(r.at("runs"), "must be >= 1");
    PPC_RETURN_IF_ERROR(r.finish());
    auto [it, inserted] = firstEntry.emplace(key, i);
    if (!inserted)
      return jsonError(path, "measures the same kernel as entries[" +
                                 std::to_string(it->second) + "]");
    model.add(key, seconds);
  }
  return model;
}

} // namespace

absl::StatusOr<ProfiledCostModel>
ProfiledCostModel::parse(const std::string &text, const std::string &fileName) {
  PPC_ASSIGN_OR_RETURN(json value, json_reader::parseJson(text, fileName));
  absl::StatusOr<ProfiledCostModel> model = readProfile(value);
  if (!model.ok())
    return annotate(model.status(), fileName);
  return model;
}

absl::StatusOr<ProfiledCostModel>
ProfiledCostModel::readFile(const std::string &path) {
  PPC_ASSIGN_OR_RETURN(std::string text, json_reader::readTextFile(path));
  return parse(text, path);
}

std::string ProfiledCostModel::toJson() const {
  // One entry per line: profiles get long, and a diff of two should show
  // which kernels changed.
  std::string out = "{\n  \"version\": 1,\n  \"entries\": [";
  bool first = true;
  for (const auto &[key, seconds] : times) {
    ojson entry = ojson::object();
    entry["op"] = key.kind;
    entry["dtype"] = stringifyDType(key.dtype);
    entry["device"] = key.device;
    entry["phase"] = stringifyPhase(key.phase);
    entry["operand_shapes"] = key.operandShapes;
    entry["seconds"] = seconds;
    out += (first ? "\n    " : ",\n    ") + entry.dump();
    first = false;
  }
  out += first ? "]\n}\n" : "\n  ]\n}\n";
  return out;
}

} // namespace ppc::sim
