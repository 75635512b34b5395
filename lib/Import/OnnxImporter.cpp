//===- OnnxImporter.cpp - ONNX model to ppc graph dialect -----------------===//
//
// The import pipeline:
//   1. parse (binary ModelProto or ONNX's textual syntax);
//   2. check the opset, resolve external data next to the model, run ONNX's
//      checker;
//   3. bind symbolic dims (--batch-size, --input-shape) on the graph inputs;
//   4. alternate ONNX shape inference and constant folding of shape
//      subgraphs until nothing changes, then drop dead nodes;
//   5. report every unsupported node and every dynamic shape at once;
//   6. fuse exported mixture-of-experts blocks (MixtureOfExperts.cpp);
//   7. convert node by node into `func.func @main`, then recognize decomposed
//      LayerNorm/GELU.
// ONNX reports errors with C++ exceptions: they are caught here and become
// MLIR diagnostics.
//
//===----------------------------------------------------------------------===//

#include "ImporterInternal.h"

#include "ppc/Dialect/Graph/GraphOps.h"
#include "ppc/Import/OnnxWeights.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/Verifier.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/ManagedStatic.h"
#include "llvm/Support/Path.h"

#include "onnx/checker.h"
#include "onnx/defs/parser.h"
#include "onnx/shape_inference/implementation.h"

#include <climits>
#include <cmath>
#include <cstring>
#include <exception>
#include <sstream>

using namespace mlir;
using namespace ppc;
using namespace ppc::onnx_import;

//===----------------------------------------------------------------------===//
// Command-line options
//===----------------------------------------------------------------------===//

namespace {
/// One `--input-shape=NAME:DxDxD` value.
struct InputShapeSpec {
  std::string name;
  SmallVector<int64_t> dims;
};

/// Parses `NAME:DxDxD`; the name may itself contain ':' (TF-style names), so
/// the shape is what follows the last one. An empty shape is a scalar.
struct InputShapeParser : public llvm::cl::basic_parser<InputShapeSpec> {
  using basic_parser::basic_parser;
  bool parse(llvm::cl::Option &opt, StringRef, StringRef arg,
             InputShapeSpec &value) {
    auto [name, dims] = arg.rsplit(':');
    if (name.empty() || name.size() == arg.size())
      return opt.error("expected NAME:DxDx..., got '" + arg + "'");
    value.name = name.str();
    value.dims.clear();
    if (dims.empty())
      return false;
    SmallVector<StringRef> parts;
    dims.split(parts, 'x');
    for (StringRef part : parts) {
      int64_t d;
      if (part.trim().getAsInteger(10, d) || d <= 0)
        return opt.error("bad dim '" + part + "' in '" + arg +
                         "': dims are positive integers");
      value.dims.push_back(d);
    }
    return false;
  }
  StringRef getValueName() const override { return "name:DxD..."; }
};

struct ImportCLOptions {
  llvm::cl::OptionCategory category{"ONNX import options"};
  llvm::cl::opt<int64_t> batchSize{
      "batch-size",
      llvm::cl::desc("Bind dim 0 of ONNX graph inputs whose dim 0 is symbolic"),
      llvm::cl::init(0), llvm::cl::cat(category)};
  llvm::cl::list<InputShapeSpec, bool, InputShapeParser> inputShapes{
      "input-shape",
      llvm::cl::desc("Static shape of an ONNX graph input, NAME:DxDx... "
                     "(repeatable, comma separated)"),
      llvm::cl::CommaSeparated, llvm::cl::cat(category)};
  llvm::cl::opt<int64_t> embedMaxBytes{
      "embed-weights-max-bytes",
      llvm::cl::desc("Embed ONNX initializer values up to this many bytes "
                     "per weight into ppc.weight"),
      llvm::cl::init(0), llvm::cl::cat(category)};
  llvm::cl::opt<double> moeCapacityFactor{
      "moe-capacity-factor",
      llvm::cl::desc("Fused mixture-of-experts blocks route each sample "
                     "with this capacity factor, dropping choices over it "
                     "(0: no drops, as PyTorch's loop)"),
      llvm::cl::init(0.0), llvm::cl::cat(category)};
};
} // namespace

static llvm::ManagedStatic<ImportCLOptions> clOptions;

void ppc::registerOnnxImportCLOptions() { *clOptions; }

OnnxImportOptions ppc::getOnnxImportOptionsFromCL() {
  OnnxImportOptions options;
  if (!clOptions.isConstructed())
    return options;
  if (clOptions->batchSize.getNumOccurrences())
    options.batchSize = clOptions->batchSize;
  for (const InputShapeSpec &spec : clOptions->inputShapes)
    options.inputShapes[spec.name] = spec.dims;
  options.maxEmbeddedWeightBytes = clOptions->embedMaxBytes;
  options.moeCapacityFactor = clOptions->moeCapacityFactor;
  return options;
}

//===----------------------------------------------------------------------===//
// Recognizing and parsing models
//===----------------------------------------------------------------------===//

/// Skips whitespace and `#` comment lines, as ONNX's text parser does.
static StringRef skipSpaceAndComments(StringRef text) {
  while (true) {
    text = text.ltrim();
    if (!text.starts_with("#"))
      return text;
    text = text.drop_until([](char c) { return c == '\n'; });
  }
}

/// The textual syntax opens with a `<key: value, ...>` model header.
static bool looksLikeOnnxText(StringRef contents) {
  StringRef text = skipSpaceAndComments(contents);
  if (!text.consume_front("<"))
    return false;
  text = text.ltrim();
  StringRef key =
      text.take_while([](char c) { return llvm::isAlnum(c) || c == '_'; });
  return !key.empty() && text.drop_front(key.size()).ltrim().starts_with(":");
}

/// A binary model starts with field 1 (ir_version, varint): byte 0x08 and a
/// small version. Enough to tell a damaged model from any MLIR input.
static bool looksLikeOnnxBinary(StringRef contents) {
  return contents.size() >= 2 && contents[0] == 0x08 && contents[1] >= 1;
}

static bool parseBinary(StringRef contents, onnx::ModelProto &model) {
  if (contents.size() >= static_cast<size_t>(INT_MAX))
    return false;
  return model.ParseFromArray(contents.data(),
                              static_cast<int>(contents.size())) &&
         model.has_graph() && model.has_ir_version();
}

/// Parses ONNX text; returns an error message on failure.
static std::optional<std::string> parseText(StringRef contents,
                                            onnx::ModelProto &model) {
  // The parser reads a NUL-terminated string.
  std::string text = contents.str();
  try {
    onnx::OnnxParser parser(text.c_str());
    onnx::Status status = parser.Parse(model);
    if (!status.IsOK())
      return status.ErrorMessage();
    if (!parser.EndOfInput())
      return std::string("unexpected text after the model's graph");
  } catch (const std::exception &e) {
    return std::string(e.what());
  } catch (...) {
    return std::string("unknown parser error");
  }
  if (!model.has_graph())
    return std::string("the model has no graph");
  return std::nullopt;
}

std::optional<std::string>
onnx_import::parseOnnxModel(StringRef contents, onnx::ModelProto &model) {
  if (looksLikeOnnxText(contents)) {
    if (auto err = parseText(contents, model))
      return "cannot parse ONNX text: " + *err;
    return std::nullopt;
  }
  if (!parseBinary(contents, model))
    return std::string("cannot parse ONNX model: the protobuf is truncated "
                       "or corrupt, or has no graph");
  return std::nullopt;
}

bool ppc::isOnnxModel(StringRef contents) {
  if (looksLikeOnnxText(contents) || looksLikeOnnxBinary(contents))
    return true;
  onnx::ModelProto model;
  return parseBinary(contents, model);
}

//===----------------------------------------------------------------------===//
// GraphImporter: materializing values
//===----------------------------------------------------------------------===//

Location GraphImporter::getFileLoc() {
  return FileLineColLoc::get(context, path, 0, 0);
}

Location GraphImporter::getNodeLoc(const onnx::NodeProto &node,
                                   unsigned index) {
  std::string name = node.name();
  if (name.empty())
    name = node.op_type() + "#" + std::to_string(index);
  return NameLoc::get(StringAttr::get(context, name), getFileLoc());
}

RankedTensorType GraphImporter::getType(StringRef name) {
  auto it = types.find(name);
  if (it == types.end() || !it->second.shape)
    return {};
  const SmallVector<int64_t> &shape = *it->second.shape;
  if (llvm::any_of(shape, [](int64_t d) { return d < 0; }))
    return {};
  Type elementType = getElementType(it->second.dtype, context);
  if (!elementType)
    return {};
  return RankedTensorType::get(shape, elementType);
}

bool GraphImporter::isWeightInitializer(StringRef name) {
  if (folded.count(name))
    return false;
  auto it = initializers.find(name);
  if (it == initializers.end())
    return false;
  const onnx::TensorProto &t = *it->second;
  SmallVector<int64_t> shape(t.dims().begin(), t.dims().end());
  // A tensor with infinities (an attention mask the exporter wrote as a
  // buffer) is a constant, not a weight: an optimizer step would move its
  // finite entries, and the attention patterns need to see it.
  return isFloatDType(t.data_type()) && getNumElements(shape).value_or(0) > 1 &&
         !holdsNonFinite(name);
}

bool GraphImporter::holdsNonFinite(StringRef name) {
  auto cached = nonFinite.find(name);
  if (cached != nonFinite.end())
    return cached->second;
  const onnx::TensorProto &t = *initializers.lookup(name);
  SmallVector<int64_t> shape(t.dims().begin(), t.dims().end());
  int64_t n = getNumElements(shape).value_or(0);
  bool found = false;
  if (t.data_type() == onnx::TensorProto::FLOAT && t.float_data_size() == n) {
    for (float v : t.float_data())
      found |= !std::isfinite(v);
    return nonFinite[name] = found;
  }
  if (t.data_type() == onnx::TensorProto::FLOAT && t.has_raw_data() &&
      static_cast<int64_t>(t.raw_data().size()) == 4 * n) {
    // In place, by the exponent bits (all ones: inf or NaN), without
    // copying or decoding the weights.
    const char *raw = t.raw_data().data();
    uint32_t any = 0;
    for (int64_t i = 0; i < n; ++i) {
      uint32_t bits;
      std::memcpy(&bits, raw + 4 * i, 4);
      any |= (bits & 0x7f800000u) == 0x7f800000u;
    }
    return nonFinite[name] = any != 0;
  }
  std::string bytes;
  constexpr int64_t kMaxScanBytes = int64_t(64) << 20;
  if (n * getDTypeByteWidth(t.data_type()) <= kMaxScanBytes &&
      !readTensorBytes(t, bytes))
    for (int64_t i = 0; i < n && !found; ++i)
      found = !std::isfinite(decodeFloatElement(bytes, i, t.data_type()));
  return nonFinite[name] = found;
}

const ConstTensor *GraphImporter::getConst(StringRef name, bool attributeLike) {
  if (name.empty())
    return nullptr;
  auto f = folded.find(name);
  if (f != folded.end())
    return &f->second;
  if (!attributeLike && isWeightInitializer(name))
    return nullptr;
  auto d = decoded.find(name);
  if (d != decoded.end())
    return &d->second;
  auto it = initializers.find(name);
  if (it == initializers.end())
    return nullptr;
  ConstTensor tensor;
  if (decodeTensor(*it->second, tensor))
    return nullptr;
  return &decoded.try_emplace(name, std::move(tensor)).first->second;
}

void GraphImporter::positionConstBuilder() {
  // Computed at each use: an "after op" point taken while that op was last
  // in the block would later mean the end of the block.
  if (lastConstOp)
    constBuilder.setInsertionPointAfter(lastConstOp);
  else
    constBuilder.setInsertionPointToStart(body);
}

Value GraphImporter::createConstant(const ConstTensor &tensor,
                                    Type elementType) {
  ConstTensor converted = tensor;
  int32_t dtype = getDTypeFor(elementType);
  if (dtype && dtype != tensor.dtype) {
    converted = ConstTensor::zeros(dtype, tensor.shape);
    for (int64_t i = 0, e = tensor.numElements(); i < e; ++i) {
      if (converted.isFloat())
        converted.floats[i] = tensor.getDouble(i);
      else
        converted.ints[i] = tensor.getInt(i);
    }
  }
  auto type = RankedTensorType::get(converted.shape,
                                    getElementType(converted.dtype, context));
  DenseElementsAttr attr = getElementsAttr(type, encodeBytes(converted));
  if (!attr)
    return {};
  positionConstBuilder();
  auto op = graph::ConstantOp::create(constBuilder, currentLoc, attr);
  lastConstOp = op;
  return op.getResult();
}

Value GraphImporter::createScalar(double value, Type elementType) {
  ConstTensor t;
  t.dtype = getDTypeFor(elementType);
  if (!t.dtype)
    return {};
  if (t.isFloat())
    t.floats = {value};
  else
    t.ints = {static_cast<int64_t>(value)};
  return createConstant(t, elementType);
}

FailureOr<Value> GraphImporter::getValue(StringRef name, Type elementType) {
  auto it = values.find(name);
  if (it != values.end())
    return it->second;
  Location loc = NameLoc::get(StringAttr::get(context, name), getFileLoc());

  if (auto stack = stackedWeights.find(name); stack != stackedWeights.end()) {
    // A fused block's weight: its initializers stacked along a new dim 0,
    // read back part by part (ppc.stacked_weights) unless embedded.
    RankedTensorType type = getType(name);
    const onnx::TensorProto &first = *initializers[stack->second.front()];
    if (!type)
      return emitError(loc)
             << "weight '" << name << "' has an unsupported type";
    ElementsAttr value;
    int64_t bytes =
        type.getNumElements() * getDTypeByteWidth(first.data_type());
    if (bytes <= options.maxEmbeddedWeightBytes || path == "-") {
      std::string data, part;
      for (const std::string &partName : stack->second) {
        if (auto err = readTensorBytes(*initializers[partName], part))
          return emitError(loc)
                 << "cannot read weight '" << partName << "': " << *err;
        data += part;
      }
      value = getElementsAttr(type, data);
    }
    positionConstBuilder();
    auto op = graph::WeightOp::create(constBuilder, loc, type,
                                      StringAttr::get(context, name),
                                      UnitAttr(), value);
    lastConstOp = op;
    return values[name] = op.getResult();
  }

  if (isWeightInitializer(name)) {
    const onnx::TensorProto &t = *initializers[name];
    RankedTensorType type = getType(name);
    if (!type)
      return emitError(loc)
             << "weight '" << name << "' has an unsupported type";
    ElementsAttr value;
    int64_t bytes = type.getNumElements() * getDTypeByteWidth(t.data_type());
    // A model read from stdin cannot be read again: embed every value.
    if (bytes <= options.maxEmbeddedWeightBytes || path == "-") {
      std::string data;
      if (auto err = readTensorBytes(t, data))
        return emitError(loc)
               << "cannot read weight '" << name << "': " << *err;
      value = getElementsAttr(type, data);
    }
    positionConstBuilder();
    auto op = graph::WeightOp::create(
        constBuilder, loc, type, StringAttr::get(context, name),
        frozenWeights.contains(name) ? UnitAttr::get(context) : UnitAttr(),
        value);
    lastConstOp = op;
    return values[name] = op.getResult();
  }

  Value result;
  if (const ConstTensor *c = getConst(name)) {
    Type type = elementType ? elementType : getElementType(c->dtype, context);
    OpBuilder::InsertionGuard guard(builder);
    Location saved = currentLoc;
    currentLoc = loc;
    result = type ? createConstant(*c, type) : Value();
    currentLoc = saved;
  } else if (initializers.count(name)) {
    // A non-float constant too large for the evaluator: embed its bytes.
    const onnx::TensorProto &t = *initializers[name];
    std::string data;
    RankedTensorType type = getType(name);
    if (!type || readTensorBytes(t, data))
      return emitError(loc) << "cannot read initializer '" << name << "'";
    if (DenseElementsAttr attr = getElementsAttr(type, data)) {
      positionConstBuilder();
      auto op = graph::ConstantOp::create(constBuilder, loc, attr);
      lastConstOp = op;
      result = op.getResult();
    }
  } else {
    return emitError(currentLoc) << "value '" << name << "' is not defined";
  }
  if (!result)
    return emitError(loc) << "cannot materialize constant '" << name << "'";
  // Only cache the natural type: a converted copy is specific to its user.
  if (!elementType)
    values[name] = result;
  return result;
}

Value GraphImporter::getWholeWeightView(Value value) {
  // A weight lives in the layout its first reader reads it in
  // (sim::weightHolders), so a weight must be read whole: slices of it
  // (nn.MultiheadAttention's cross-attention slices in_proj_weight, the
  // gates of an unrolled LSTM slice W, R and B) share one view of it, a
  // reshape to its own shape, which costs nothing and collects the slices'
  // gradients like any activation's.
  auto weight = value.getDefiningOp<graph::WeightOp>();
  if (!weight)
    return value;
  Value &view = weightViews[value];
  if (!view) {
    OpBuilder::InsertionGuard guard(builder);
    builder.setInsertionPointAfter(weight);
    auto name = StringAttr::get(context, weight.getName() + ".view");
    view = graph::ReshapeOp::create(builder, NameLoc::get(name, getFileLoc()),
                                    value.getType(), value);
  }
  return view;
}

//===----------------------------------------------------------------------===//
// Model-level steps
//===----------------------------------------------------------------------===//

namespace {
class ModelImporter {
public:
  ModelImporter(onnx::ModelProto &model, StringRef path, MLIRContext *context,
                const OnnxImportOptions &options)
      : model(model), path(path.str()), context(context), options(options) {}

  OwningOpRef<ModuleOp> run();

private:
  Location fileLoc() { return FileLineColLoc::get(context, path, 0, 0); }
  Location valueLoc(StringRef name) {
    return NameLoc::get(StringAttr::get(context, name), fileLoc());
  }

  LogicalResult checkNamesAreUtf8();
  LogicalResult checkOpset();
  LogicalResult resolveExternalData();
  LogicalResult runChecker();
  LogicalResult checkWindowAttributes();
  LogicalResult bindInputShapes();
  void findBatchDims();
  void nameGraphOps(func::FuncOp func);
  LogicalResult checkInputSizes();
  LogicalResult inferShapes();
  LogicalResult checkBoundShapes();
  void collectTypes();
  LogicalResult foldConstants();
  bool foldOnce();
  bool refineShapes();
  void eliminateDeadNodes();
  void countUses();
  LogicalResult validate();
  std::string describeDynamicShape(StringRef name);
  OwningOpRef<ModuleOp> buildModule();

  bool isGraphInput(StringRef name) {
    return graphInputs.count(name) && !importer->initializers.count(name);
  }

  onnx::ModelProto &model;
  std::string path;
  MLIRContext *context;
  const OnnxImportOptions &options;
  int64_t opset = 0;
  std::unique_ptr<GraphImporter> importer;
  llvm::StringSet<> graphInputs;
  /// Inputs whose batch is not dim 0, by name: the dim a symbolic name says.
  llvm::StringMap<int64_t> batchDims;
};
} // namespace

/// A sequence-first export ([seq, batch, hidden]) says where its batch is
/// only by the name of a symbolic dim: take a dim named like a batch when it
/// is not dim 0 and no other dim is named so. Must run before the symbolic
/// dims are bound.
void ModelImporter::findBatchDims() {
  auto isBatchName = [](StringRef name) {
    std::string lower = name.lower();
    return lower == "n" || lower == "b" || lower == "bs" ||
           StringRef(lower).contains("batch");
  };
  for (const onnx::ValueInfoProto &input : model.graph().input()) {
    if (!input.type().has_tensor_type() ||
        !input.type().tensor_type().has_shape())
      continue;
    const auto &shape = input.type().tensor_type().shape();
    std::optional<int64_t> batch;
    int named = 0;
    for (int d = 0; d < shape.dim_size(); ++d)
      if (shape.dim(d).has_dim_param() &&
          isBatchName(shape.dim(d).dim_param())) {
        batch = d;
        ++named;
      }
    if (named == 1 && *batch != 0)
      batchDims[input.name()] = *batch;
  }
}

/// The name an op shows for an ONNX node name. PyTorch's exporter names a
/// node by its module's scope and its type, "/net/net.0/MatMul": the scope's
/// last part is the module's full dotted path, "net.0", which is what the
/// model's author knows (its parameters are "net.0.weight"...); a node of
/// the root module, "/MatMul", is "MatMul". Other names stay as they are.
static StringRef opNameOf(StringRef nodeName) {
  if (!nodeName.starts_with("/"))
    return nodeName;
  size_t last = nodeName.rfind('/');
  if (last == 0)
    return nodeName.drop_front();
  StringRef scope = nodeName.take_front(last);
  StringRef module = scope.drop_front(scope.rfind('/') + 1);
  return module.empty() ? nodeName : module;
}

/// Graph ops keep their ONNX node name as an attribute too (PyTorch's
/// scoped names as module paths, opNameOf): locations are dropped when a
/// module is printed without --mlir-print-debuginfo, and strategy files name
/// ops. Locations keep the node name, for diagnostics.
void ModelImporter::nameGraphOps(func::FuncOp func) {
  func.walk([&](Operation *op) {
    if (!isa<graph::PPCDialect>(op->getDialect()) ||
        !isa<graph::ParallelizableOpInterface>(op))
      return;
    op->getLoc()->walk([&](Location loc) {
      if (auto nameLoc = dyn_cast<NameLoc>(loc)) {
        op->setAttr(graph::PPCDialect::getNameAttrName(),
                    StringAttr::get(op->getContext(),
                                    opNameOf(nameLoc.getName().getValue())));
        return WalkResult::interrupt();
      }
      return WalkResult::advance();
    });
  });
}

/// ONNX strings are UTF-8, and names end up in JSON (strategy files,
/// reports) and MLIR: a name that is not UTF-8 is rejected here, naming
/// where it is and showing it escaped. Replacing the bad bytes instead could
/// merge two distinct names.
LogicalResult ModelImporter::checkNamesAreUtf8() {
  auto check = [&](const std::string &name,
                   const Twine &where) -> LogicalResult {
    if (llvm::json::isUTF8(name))
      return success();
    std::string escaped;
    llvm::raw_string_ostream os(escaped);
    llvm::printEscapedString(name, os);
    return emitError(fileLoc())
           << "invalid ONNX model: " << where << " is not valid UTF-8: \""
           << escaped << "\" (ONNX names are UTF-8 strings)";
  };
  const onnx::GraphProto &graph = model.graph();
  for (auto [i, input] : llvm::enumerate(graph.input()))
    if (failed(check(input.name(), "the name of graph input #" + Twine(i))))
      return failure();
  for (auto [i, output] : llvm::enumerate(graph.output()))
    if (failed(check(output.name(), "the name of graph output #" + Twine(i))))
      return failure();
  for (auto [i, info] : llvm::enumerate(graph.value_info()))
    if (failed(check(info.name(), "the name of value_info #" + Twine(i))))
      return failure();
  for (auto [i, tensor] : llvm::enumerate(graph.initializer()))
    if (failed(check(tensor.name(), "the name of initializer #" + Twine(i))))
      return failure();
  for (auto [i, node] : llvm::enumerate(graph.node())) {
    std::string where = "node #" + std::to_string(i);
    if (failed(check(node.name(), "the name of " + where)) ||
        failed(check(node.op_type(), "the op type of " + where)))
      return failure();
    for (auto [j, name] : llvm::enumerate(node.input()))
      if (failed(check(name, "input " + Twine(j) + " of " + where)))
        return failure();
    for (auto [j, name] : llvm::enumerate(node.output()))
      if (failed(check(name, "output " + Twine(j) + " of " + where)))
        return failure();
  }
  return success();
}

LogicalResult ModelImporter::checkOpset() {
  bool found = false;
  for (const auto &entry : model.opset_import()) {
    if (entry.domain().empty() || entry.domain() == "ai.onnx") {
      opset = entry.version();
      found = true;
    }
  }
  if (!found)
    return emitError(fileLoc())
           << "ONNX model imports no opset of the default domain";
  if (opset < kMinOpset || opset > kMaxOpset)
    return emitError(fileLoc())
           << "unsupported ONNX opset " << opset << ": ppc imports opsets "
           << kMinOpset << " to " << kMaxOpset
           << " (convert the model with onnx.version_converter)";
  return success();
}

/// Makes every external data location absolute (see
/// resolveExternalDataLocations). ONNX's checker then finds the files
/// whatever the current directory.
LogicalResult ModelImporter::resolveExternalData() {
  if (auto problem = resolveExternalDataLocations(model, path))
    return emitError(valueLoc(problem->first)) << problem->second;
  return success();
}

LogicalResult ModelImporter::runChecker() {
  try {
    onnx::checker::check_model(model);
  } catch (const onnx::checker::ValidationError &e) {
    return emitError(fileLoc()) << "invalid ONNX model: " << e.what();
  } catch (const std::exception &e) {
    return emitError(fileLoc()) << "invalid ONNX model: " << e.what();
  }
  return success();
}

/// ONNX's shape inference divides by strides and dilations without checking
/// them (a zero stride is a SIGFPE inside libonnx, found by fuzzing): reject
/// non-positive window attributes before running it.
LogicalResult ModelImporter::checkWindowAttributes() {
  for (auto [index, node] : llvm::enumerate(model.graph().node())) {
    for (StringRef name : {"strides", "dilations", "kernel_shape"}) {
      const onnx::AttributeProto *attr = findAttr(node, name);
      if (!attr || llvm::all_of(attr->ints(), [](int64_t v) { return v > 0; }))
        continue;
      return emitError(fileLoc())
             << "invalid ONNX model: node '" << node.name() << "' ("
             << node.op_type() << ") has a non-positive '" << name << "'";
    }
  }
  return success();
}

LogicalResult ModelImporter::bindInputShapes() {
  if (options.batchSize && *options.batchSize <= 0)
    return emitError(fileLoc())
           << "--batch-size must be positive, got " << *options.batchSize;
  onnx::GraphProto &graph = *model.mutable_graph();
  llvm::StringSet<> initializerNames;
  for (const auto &t : graph.initializer())
    initializerNames.insert(t.name());

  // Exports with a fixed batch (no input has a symbolic dim 0) get it
  // rebound too: the batch is the first input's dim 0, and every input with
  // that dim 0 takes --batch-size. Shape inference and folding then follow;
  // shapes baked for the old batch are caught by checkBoundShapes.
  int64_t staticBatch = 0; // 0: none (dims are positive)
  if (options.batchSize) {
    bool anySymbolic = false;
    for (const onnx::ValueInfoProto &input : graph.input()) {
      if (initializerNames.contains(input.name()) ||
          options.inputShapes.count(input.name()) ||
          !input.type().has_tensor_type() ||
          !input.type().tensor_type().has_shape() ||
          input.type().tensor_type().shape().dim_size() == 0)
        continue;
      const auto &dim0 = input.type().tensor_type().shape().dim(0);
      if (!dim0.has_dim_value())
        anySymbolic = true;
      else if (staticBatch == 0)
        staticBatch = dim0.dim_value();
    }
    if (anySymbolic)
      staticBatch = 0;
  }

  bool changed = false;
  llvm::StringSet<> seen;
  for (onnx::ValueInfoProto &input : *graph.mutable_input()) {
    if (initializerNames.contains(input.name()) ||
        !input.type().has_tensor_type())
      continue;
    auto *tensorType = input.mutable_type()->mutable_tensor_type();
    auto it = options.inputShapes.find(input.name());
    if (it != options.inputShapes.end()) {
      seen.insert(input.name());
      const SmallVector<int64_t> &dims = it->second;
      if (tensorType->has_shape() &&
          tensorType->shape().dim_size() != static_cast<int>(dims.size()))
        return emitError(valueLoc(input.name()))
               << "--input-shape for '" << input.name() << "' has rank "
               << dims.size() << ", but the input has rank "
               << tensorType->shape().dim_size();
      auto *shape = tensorType->mutable_shape();
      shape->clear_dim();
      for (int64_t d : dims)
        shape->add_dim()->set_dim_value(d);
      changed = true;
      continue;
    }
    if (!options.batchSize || !tensorType->has_shape() ||
        tensorType->shape().dim_size() == 0)
      continue;
    // The batch is dim 0 unless a symbolic name says otherwise.
    auto *batch = tensorType->mutable_shape()->mutable_dim(
        static_cast<int>(batchDims.lookup(input.name())));
    if (batch->has_dim_value() &&
        (staticBatch == 0 || batch->dim_value() != staticBatch ||
         batch->dim_value() == *options.batchSize))
      continue;
    batch->set_dim_value(*options.batchSize);
    changed = true;
  }
  for (const auto &entry : options.inputShapes) {
    if (seen.contains(entry.getKey()))
      continue;
    std::string names;
    for (const auto &input : graph.input())
      if (!initializerNames.contains(input.name()))
        names += (names.empty() ? "'" : ", '") + input.name() + "'";
    return emitError(fileLoc())
           << "--input-shape names '" << entry.getKey()
           << "', which is not a graph input (inputs: " << names << ")";
  }
  if (failed(checkInputSizes()))
    return failure();
  // Shapes recorded for the old symbolic dims would contradict the bound
  // ones: let shape inference recompute them.
  if (changed) {
    graph.clear_value_info();
    for (auto &output : *graph.mutable_output())
      if (output.type().has_tensor_type())
        output.mutable_type()->mutable_tensor_type()->clear_shape();
  }
  return success();
}

/// Kernels and the simulator divide by dims and multiply them into element
/// counts: a graph input whose static dims are zero or negative, or whose
/// element count overflows int64, is an error here rather than a SIGFPE or
/// a wrong size later.
LogicalResult ModelImporter::checkInputSizes() {
  const onnx::GraphProto &graph = model.graph();
  llvm::StringSet<> initializerNames;
  for (const auto &t : graph.initializer())
    initializerNames.insert(t.name());
  for (const onnx::ValueInfoProto &input : graph.input()) {
    if (initializerNames.contains(input.name()) ||
        !input.type().has_tensor_type() ||
        !input.type().tensor_type().has_shape())
      continue;
    SmallVector<int64_t> dims;
    for (auto [index, dim] :
         llvm::enumerate(input.type().tensor_type().shape().dim())) {
      if (!dim.has_dim_value())
        continue;
      if (dim.dim_value() <= 0)
        return emitError(valueLoc(input.name()))
               << "graph input '" << input.name() << "' has dim " << index
               << " of size " << dim.dim_value()
               << "; ppc needs positive sizes (empty tensors are not "
                  "supported)";
      dims.push_back(dim.dim_value());
    }
    if (!getNumElements(dims))
      return emitError(valueLoc(input.name()))
             << "graph input '" << input.name()
             << "' has more elements than fit in 64 bits";
  }
  return success();
}

LogicalResult ModelImporter::inferShapes() {
  try {
    onnx::ShapeInferenceOptions opts(/*check_type=*/false, /*strict_mode=*/0,
                                     /*data_prop=*/true);
    onnx::shape_inference::InferShapes(
        model, onnx::OpSchemaRegistry::Instance(), opts);
  } catch (const std::exception &e) {
    return emitError(fileLoc()) << "ONNX shape inference failed: " << e.what();
  }
  return success();
}

/// Shapes baked into a model for one input size (a Reshape to a constant
/// [N, 3072] computed for 32x32 images) contradict other bound sizes. ONNX's
/// inference then leaves the Reshape's result unknown, and the import would
/// fail later on a symptom (shape arithmetic left on int64 tensors, an
/// element count mismatch): name the node and the cause instead.
LogicalResult ModelImporter::checkBoundShapes() {
  GraphImporter &imp = *importer;
  auto str = [](ArrayRef<int64_t> dims) {
    std::string s = "[";
    for (auto [i, d] : llvm::enumerate(dims))
      s += (i ? ", " : "") + std::to_string(d);
    return s + "]";
  };
  for (auto [index, node] : llvm::enumerate(model.graph().node())) {
    if (node.op_type() != "Reshape" || node.input_size() < 2)
      continue;
    RankedTensorType in = imp.getType(node.input(0));
    const ConstTensor *target = imp.getConst(node.input(1));
    if (!in || !target || target->isFloat())
      continue;
    bool allowZero = getAttrInt(node, "allowzero", 0) != 0;
    SmallVector<int64_t> dims;
    int64_t known = 1, inferred = -1;
    for (int64_t i = 0, e = target->numElements(); i < e; ++i) {
      int64_t d = target->getInt(i);
      if (d == 0 && !allowZero && i < in.getRank())
        d = in.getDimSize(i);
      dims.push_back(d);
      if (d == -1)
        inferred = i;
      else
        known *= d;
    }
    int64_t count = in.getNumElements();
    bool fits =
        inferred >= 0 ? known > 0 && count % known == 0 : known == count;
    if (fits)
      continue;
    return emitError(imp.getNodeLoc(node, index))
           << "shape inference failed at node '" << node.name()
           << "' (Reshape): its input " << str(in.getShape()) << " has "
           << count << " elements, which the target shape " << str(dims)
           << " cannot hold; the target was probably computed for another "
              "input size than --batch-size/--input-shape give";
  }
  return success();
}

void ModelImporter::collectTypes() {
  auto &types = importer->types;
  types.clear();
  auto add = [&](const onnx::ValueInfoProto &info) {
    if (!info.type().has_tensor_type())
      return;
    const auto &tt = info.type().tensor_type();
    GraphImporter::ValueType &vt = types[info.name()];
    vt.dtype = tt.elem_type();
    if (!tt.has_shape()) {
      vt.shape.reset();
      return;
    }
    vt.shape.emplace();
    vt.symbols.clear();
    for (const auto &dim : tt.shape().dim()) {
      vt.shape->push_back(dim.has_dim_value() ? dim.dim_value() : -1);
      vt.symbols.push_back(dim.has_dim_param() ? dim.dim_param() : "");
    }
  };
  const onnx::GraphProto &graph = model.graph();
  for (const auto &info : graph.input())
    add(info);
  for (const auto &info : graph.value_info())
    add(info);
  for (const auto &info : graph.output())
    add(info);
  for (const auto &t : graph.initializer()) {
    GraphImporter::ValueType &vt = types[t.name()];
    vt.dtype = t.data_type();
    vt.shape.emplace(t.dims().begin(), t.dims().end());
    vt.symbols.assign(t.dims_size(), "");
  }
}

/// One pass of folding over the graph in topological order; folded nodes are
/// removed and their results become initializers. Returns true if it folded.
bool ModelImporter::foldOnce() {
  onnx::GraphProto &graph = *model.mutable_graph();
  GraphImporter &imp = *importer;
  std::vector<onnx::NodeProto> kept;
  bool changed = false;
  for (onnx::NodeProto &node : *graph.mutable_node()) {
    bool isDefault = node.domain().empty() || node.domain() == "ai.onnx";
    bool shapeOnly = node.op_type() == "Shape" || node.op_type() == "Size";
    SmallVector<FoldInput> inputs;
    bool blocked = !isDefault || !isFoldableOpType(node.op_type());
    for (const std::string &name : node.input()) {
      if (blocked)
        break;
      FoldInput in;
      in.present = !name.empty();
      if (in.present) {
        // Never fold trainable weights away into constants.
        if (!shapeOnly && imp.isWeightInitializer(name))
          blocked = true;
        in.value = imp.getConst(name);
        auto t = imp.types.find(name);
        if (t != imp.types.end())
          in.shape = t->second.shape;
      }
      inputs.push_back(in);
    }
    SmallVector<ConstTensor> results;
    if (blocked || failed(foldNode(node, opset, inputs, results))) {
      kept.push_back(std::move(node));
      continue;
    }
    for (auto [name, tensor] : llvm::zip(node.output(), results)) {
      if (name.empty())
        continue;
      encodeTensor(tensor, name, *graph.add_initializer());
      imp.folded[name] = std::move(tensor);
    }
    changed = true;
  }
  // The nodes were moved out: put the kept ones back.
  graph.clear_node();
  for (onnx::NodeProto &node : kept)
    *graph.add_node() = std::move(node);
  if (changed) {
    imp.initializers.clear();
    for (const auto &t : graph.initializer())
      imp.initializers[t.name()] = &t;
  }
  return changed;
}

LogicalResult ModelImporter::foldConstants() {
  // Each round folds what the previous shape inference made static; a chain
  // Shape -> Reshape -> Shape -> ... needs one round per link.
  for (int round = 0; round < 32; ++round) {
    if (failed(inferShapes()))
      return failure();
    collectTypes();
    bool folded = foldOnce();
    if (!refineShapes() && !folded)
      return success();
  }
  return success();
}

/// Records shapes that ONNX's inference leaves unknown but ppc can compute
/// (Slice with attributes before opset 10). Returns true if it added any.
bool ModelImporter::refineShapes() {
  GraphImporter &imp = *importer;
  onnx::GraphProto &graph = *model.mutable_graph();
  bool changed = false;
  for (const onnx::NodeProto &node : graph.node()) {
    if (node.op_type() != "Slice" || node.input_size() < 1 ||
        node.output_size() < 1 || imp.getType(node.output(0)))
      continue;
    RankedTensorType in = imp.getType(node.input(0));
    if (!in)
      continue;
    auto shape = inferSliceShape(imp, node, in.getShape());
    if (!shape)
      continue;
    onnx::ValueInfoProto *info = nullptr;
    for (auto &vi : *graph.mutable_value_info())
      if (vi.name() == node.output(0))
        info = &vi;
    if (!info) {
      info = graph.add_value_info();
      info->set_name(node.output(0));
    }
    auto *tensorType = info->mutable_type()->mutable_tensor_type();
    tensorType->set_elem_type(imp.types[node.input(0)].dtype);
    tensorType->clear_shape();
    auto *protoShape = tensorType->mutable_shape();
    for (int64_t d : *shape)
      protoShape->add_dim()->set_dim_value(d);
    changed = true;
  }
  return changed;
}

/// Drops nodes none of whose outputs is used (folding leftovers, unused
/// Dropout masks), from the back so chains go at once.
void ModelImporter::eliminateDeadNodes() {
  onnx::GraphProto &graph = *model.mutable_graph();
  llvm::StringSet<> live;
  for (const auto &output : graph.output())
    live.insert(output.name());
  std::vector<bool> keep(graph.node_size(), false);
  for (int i = graph.node_size() - 1; i >= 0; --i) {
    const onnx::NodeProto &node = graph.node(i);
    keep[i] = llvm::any_of(node.output(), [&](const std::string &name) {
      return !name.empty() && live.contains(name);
    });
    if (keep[i])
      for (const std::string &name : node.input())
        live.insert(name);
  }
  std::vector<onnx::NodeProto> kept;
  for (int i = 0; i < graph.node_size(); ++i)
    if (keep[i])
      kept.push_back(std::move(*graph.mutable_node(i)));
  graph.clear_node();
  for (onnx::NodeProto &node : kept)
    *graph.add_node() = std::move(node);
}

void ModelImporter::countUses() {
  importer->numUses.clear();
  for (const auto &node : model.graph().node())
    for (const std::string &name : node.input())
      if (!name.empty())
        ++importer->numUses[name];
  for (const auto &output : model.graph().output())
    ++importer->numUses[output.name()];
}

std::string ModelImporter::describeDynamicShape(StringRef name) {
  auto it = importer->types.find(name);
  if (it == importer->types.end() || !it->second.shape)
    return "has no inferred shape";
  const auto &vt = it->second;
  for (auto [i, d] : llvm::enumerate(*vt.shape)) {
    if (d >= 0)
      continue;
    std::string msg = "has dynamic dim " + std::to_string(i);
    if (!vt.symbols[i].empty())
      msg += " ('" + vt.symbols[i] + "')";
    return msg;
  }
  if (!getElementType(vt.dtype, context))
    return "has unsupported element type '" + getDTypeName(vt.dtype).str() +
           "'";
  return "has a non-static shape";
}

/// Reports every unsupported node and every value whose shape is not static,
/// then fails if there was any.
LogicalResult ModelImporter::validate() {
  GraphImporter &imp = *importer;
  struct Problem {
    Location loc;
    std::string message;
  };
  SmallVector<Problem> unsupported, dynamic;
  llvm::StringSet<> reported;
  auto checkStatic = [&](StringRef name, const onnx::NodeProto &node,
                         Location loc, StringRef role) {
    if (name.empty() || imp.getType(name) || reported.contains(name))
      return;
    reported.insert(name);
    dynamic.push_back(
        {loc, ("value '" + name + "' (" + role + " of node '" +
               (node.name().empty() ? node.op_type() : node.name()) + "', " +
               node.op_type() + ") " + describeDynamicShape(name))
                  .str()});
  };

  const onnx::GraphProto &graph = model.graph();
  for (const auto &input : graph.input()) {
    if (!isGraphInput(input.name()) || imp.getType(input.name()))
      continue;
    reported.insert(input.name());
    dynamic.push_back(
        {valueLoc(input.name()), "graph input '" + input.name() + "' " +
                                     describeDynamicShape(input.name())});
  }
  for (auto [index, node] : llvm::enumerate(graph.node())) {
    Location loc = imp.getNodeLoc(node, index);
    bool isDefault = node.domain().empty() || node.domain() == "ai.onnx";
    const ConverterInfo *info = lookupConverter(node);
    std::string where = "'" + node.op_type() + "' (node '" + node.name() +
                        "', domain '" + node.domain() + "', opset " +
                        std::to_string(opset) + ")";
    if (!info) {
      bool foldOnly = isDefault && isFoldableOpType(node.op_type());
      bool inputsDynamic = false;
      for (const std::string &name : node.input())
        if (!name.empty() && !imp.getType(name) && foldOnly) {
          checkStatic(name, node, loc, "input");
          inputsDynamic = true;
        }
      if (!inputsDynamic)
        unsupported.push_back(
            {loc, foldOnly ? where + ": only supported when its inputs are "
                                     "constants, which they are not here"
                           : where});
      continue;
    }
    if (auto reason = getUnsupportedReason(imp, node)) {
      unsupported.push_back({loc, where + " " + *reason});
      continue;
    }
    for (auto [i, name] : llvm::enumerate(node.input()))
      if (i < info->numDataInputs)
        checkStatic(name, node, loc, "input " + std::to_string(i));
    for (auto [i, name] : llvm::enumerate(node.output()))
      if (imp.numUses.lookup(name)) {
        checkStatic(name, node, loc, "output " + std::to_string(i));
        RankedTensorType type = imp.getType(name);
        if (type && type.getNumElements() == 0)
          unsupported.push_back(
              {loc, where + ": its output '" + name +
                        "' is empty (a zero-size dim; ppc does not support "
                        "empty tensors)"});
      }
    if (info->needsFloat && node.output_size() > 0) {
      auto it = imp.types.find(node.output(0));
      if (it != imp.types.end() && it->second.dtype &&
          !isFloatDType(it->second.dtype))
        unsupported.push_back(
            {loc, where + " on " + getDTypeName(it->second.dtype).str() +
                      " tensors (ppc supports it on floating-point tensors)"});
    }
  }

  if (!unsupported.empty()) {
    InFlightDiagnostic diag = emitError(fileLoc())
                              << unsupported.size()
                              << " unsupported ONNX node(s) in the model";
    for (const Problem &p : unsupported)
      diag.attachNote(p.loc) << "unsupported operator " << p.message;
  }
  if (!dynamic.empty()) {
    InFlightDiagnostic diag =
        emitError(fileLoc())
        << dynamic.size()
        << " value(s) have no static shape; bind the symbolic dims with "
           "--batch-size=N or --input-shape=NAME:DxDx...";
    // One symbolic dim taints every value downstream: the first few say
    // where it comes from.
    constexpr size_t kMaxNotes = 8;
    for (const Problem &p : ArrayRef(dynamic).take_front(kMaxNotes))
      diag.attachNote(p.loc) << p.message;
    if (dynamic.size() > kMaxNotes)
      diag.attachNote() << "... and " << dynamic.size() - kMaxNotes << " more";
  }
  return success(unsupported.empty() && dynamic.empty());
}

OwningOpRef<ModuleOp> ModelImporter::buildModule() {
  GraphImporter &imp = *importer;
  const onnx::GraphProto &graph = model.graph();
  OwningOpRef<ModuleOp> module = ModuleOp::create(fileLoc());
  // Weights without a value are read back from the model by name.
  if (path != "-") {
    SmallString<256> absolute(path);
    (void)llvm::sys::fs::make_absolute(absolute);
    llvm::sys::path::remove_dots(absolute, /*remove_dot_dot=*/true);
    (*module)->setAttr(graph::PPCDialect::getSourceModelAttrName(),
                       StringAttr::get(context, absolute));
  }
  OpBuilder moduleBuilder = OpBuilder::atBlockEnd(module->getBody());

  SmallVector<Type> argTypes;
  SmallVector<std::string> argNames;
  for (const auto &input : graph.input()) {
    if (!isGraphInput(input.name()))
      continue;
    argTypes.push_back(imp.getType(input.name()));
    argNames.push_back(input.name());
  }
  auto func = func::FuncOp::create(moduleBuilder, fileLoc(), "main",
                                   moduleBuilder.getFunctionType(argTypes, {}));
  Block *body = func.addEntryBlock();
  for (auto [i, name] : llvm::enumerate(argNames)) {
    func.setArgAttr(i, "ppc.name", StringAttr::get(context, name));
    auto batch = batchDims.find(name);
    if (batch != batchDims.end())
      func.setArgAttr(
          i, "ppc.batch_dim",
          IntegerAttr::get(IntegerType::get(context, 64), batch->second));
    imp.setValue(name, body->getArgument(i));
  }
  imp.body = body;
  imp.builder.setInsertionPointToEnd(body);

  for (auto [index, node] : llvm::enumerate(graph.node())) {
    imp.currentLoc = imp.getNodeLoc(node, index);
    imp.builder.setInsertionPointToEnd(body);
    const ConverterInfo *info = lookupConverter(node);
    if (!info || failed(info->convert(imp, node)))
      return nullptr;
  }

  imp.builder.setInsertionPointToEnd(body);
  SmallVector<Value> results;
  for (const auto &output : graph.output()) {
    imp.currentLoc = valueLoc(output.name());
    FailureOr<Value> v = imp.getValue(output.name());
    if (failed(v))
      return nullptr;
    results.push_back(*v);
  }
  func::ReturnOp::create(imp.builder, fileLoc(), results);
  func.setFunctionType(
      moduleBuilder.getFunctionType(argTypes, ValueRange(results).getTypes()));
  for (auto [i, output] : llvm::enumerate(graph.output()))
    func.setResultAttr(i, "ppc.name", StringAttr::get(context, output.name()));

  recognizePatterns(func);
  nameGraphOps(func);
  // The fused weights the function reads, for whoever reads them back.
  SmallVector<NamedAttribute> stacks;
  func.walk([&](graph::WeightOp weight) {
    auto it = imp.stackedWeights.find(weight.getName());
    if (it == imp.stackedWeights.end())
      return;
    SmallVector<Attribute> parts;
    for (const std::string &part : it->second)
      parts.push_back(StringAttr::get(context, part));
    stacks.emplace_back(weight.getNameAttr(), ArrayAttr::get(context, parts));
  });
  if (!stacks.empty())
    (*module)->setAttr(graph::PPCDialect::getStackedWeightsAttrName(),
                       DictionaryAttr::get(context, stacks));
  if (failed(verify(*module)))
    return nullptr;
  return module;
}

OwningOpRef<ModuleOp> ModelImporter::run() {
  if (double f = options.moeCapacityFactor; !(f >= 0) || std::isinf(f)) {
    std::ostringstream value;
    value << f;
    emitError(fileLoc()) << "--moe-capacity-factor " << value.str()
                         << " is not a finite number >= 0";
    return nullptr;
  }
  if (failed(checkNamesAreUtf8()))
    return nullptr;
  // Name unnamed nodes by their original position, before folding and dead
  // code elimination renumber them: locations then match the source model.
  for (auto [index, node] :
       llvm::enumerate(*model.mutable_graph()->mutable_node()))
    if (node.name().empty())
      node.set_name(node.op_type() + "#" + std::to_string(index));
  if (failed(checkOpset()) || failed(resolveExternalData()) ||
      failed(runChecker()) || failed(checkWindowAttributes()))
    return nullptr;
  findBatchDims();
  if (failed(bindInputShapes()))
    return nullptr;
  importer = std::make_unique<GraphImporter>(context, path, opset, options);
  for (const auto &t : model.graph().initializer())
    importer->initializers[t.name()] = &t;
  for (const auto &input : model.graph().input())
    graphInputs.insert(input.name());
  for (const auto &node : model.graph().node())
    if (node.op_type() == "BatchNormalization")
      for (int i = 3; i < std::min(node.input_size(), 5); ++i)
        importer->frozenWeights.insert(node.input(i));

  if (failed(foldConstants()))
    return nullptr;
  // Mixture-of-experts blocks become fused nodes once shapes are known;
  // what remains of them is dead, and its shapes baked for the traced
  // routing are not checked.
  if (fuseMixturesOfExperts(*model.mutable_graph(), *importer,
                            importer->stackedWeights) > 0)
    eliminateDeadNodes();
  if (failed(checkBoundShapes()))
    return nullptr;
  eliminateDeadNodes();
  countUses();
  if (failed(validate()))
    return nullptr;
  return buildModule();
}

OwningOpRef<ModuleOp> ppc::importOnnxModel(StringRef contents, StringRef path,
                                           MLIRContext *context,
                                           const OnnxImportOptions &options) {
  context->loadDialect<graph::PPCDialect, func::FuncDialect>();
  Location fileLoc = FileLineColLoc::get(context, path, 0, 0);
  onnx::ModelProto model;
  if (auto err = parseOnnxModel(contents, model)) {
    emitError(fileLoc) << *err;
    return nullptr;
  }
  try {
    return ModelImporter(model, path, context, options).run();
  } catch (const std::exception &e) {
    emitError(fileLoc) << "ONNX import failed: " << e.what();
  } catch (...) {
    emitError(fileLoc) << "ONNX import failed with an unknown error";
  }
  return nullptr;
}
