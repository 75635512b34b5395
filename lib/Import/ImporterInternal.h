//===- ImporterInternal.h - Shared pieces of the ONNX importer --*- C++ -*-===//
//
// Private to lib/Import: the constant-tensor type used to fold shape
// subgraphs, tensor decoding, the per-node conversion interface and the
// pattern recognizers run on the imported function.
//
//===----------------------------------------------------------------------===//

#ifndef PPC_LIB_IMPORT_IMPORTERINTERNAL_H
#define PPC_LIB_IMPORT_IMPORTERINTERNAL_H

#include "ppc/Import/OnnxImporter.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinTypes.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringSet.h"

#include "onnx/onnx_pb.h"

#include <optional>
#include <string>
#include <vector>

namespace ppc {
namespace onnx_import {

/// Opsets of the default ONNX domain that the importer accepts.
constexpr int64_t kMinOpset = 9;
constexpr int64_t kMaxOpset = 17;

/// Largest tensor (in elements) that the constant evaluator produces or
/// decodes: shape subgraphs are tiny, and this bounds memory on odd models.
constexpr int64_t kMaxFoldElements = int64_t(1) << 20;

//===----------------------------------------------------------------------===//
// Model files
//===----------------------------------------------------------------------===//

/// Parses a binary ModelProto or ONNX's textual syntax; the error message on
/// failure.
std::optional<std::string> parseOnnxModel(llvm::StringRef contents,
                                          onnx::ModelProto &model);

/// Makes the external data location of every initializer of `model` (read
/// from `modelPath`, "-" for stdin) absolute. A location must be relative
/// and, symbolic links followed, name a regular file inside the model's
/// directory: ONNX models come from untrusted places, and
/// `location: ../../etc/passwd` must not read outside it. On failure, the
/// initializer's name and the message.
std::optional<std::pair<std::string, std::string>>
resolveExternalDataLocations(onnx::ModelProto &model,
                             llvm::StringRef modelPath);

//===----------------------------------------------------------------------===//
// Constant tensors
//===----------------------------------------------------------------------===//

/// A small dense tensor known at import time. Integer and bool elements live
/// in `ints`, floating-point ones in `floats` (exactly one is populated).
struct ConstTensor {
  int32_t dtype = onnx::TensorProto::INT64;
  llvm::SmallVector<int64_t> shape;
  std::vector<int64_t> ints;
  std::vector<double> floats;

  bool isFloat() const;
  int64_t numElements() const;
  double getDouble(int64_t i) const {
    return isFloat() ? floats[i] : static_cast<double>(ints[i]);
  }
  int64_t getInt(int64_t i) const {
    return isFloat() ? static_cast<int64_t>(floats[i]) : ints[i];
  }
  /// Makes a tensor of `dtype` and `shape` with zeroed elements.
  static ConstTensor zeros(int32_t dtype, llvm::ArrayRef<int64_t> shape);
};

bool isFloatDType(int32_t dtype);
/// Bytes per element of an ONNX data type, 0 if unsupported.
int64_t getDTypeByteWidth(int32_t dtype);
llvm::StringRef getDTypeName(int32_t dtype);
/// The ONNX data type of an MLIR element type, 0 if none.
int32_t getDTypeFor(mlir::Type type);
/// The MLIR element type for an ONNX data type, null if it has none in ppc.
mlir::Type getElementType(int32_t dtype, mlir::MLIRContext *ctx);

/// Product of `shape`, or nullopt on a negative dim or overflow.
std::optional<int64_t> getNumElements(llvm::ArrayRef<int64_t> shape);

/// Reads a tensor's data as little-endian bytes in the element type's own
/// width, from whichever field holds them (raw, typed or external; external
/// locations have already been made absolute). Returns an error message.
std::optional<std::string> readTensorBytes(const onnx::TensorProto &tensor,
                                           std::string &bytes);
/// Decodes a tensor into a ConstTensor (error message on failure).
/// Element `i` of a floating-point tensor's raw bytes (FLOAT, DOUBLE,
/// FLOAT16 or BFLOAT16, as readTensorBytes returns them) as a double.
double decodeFloatElement(const std::string &bytes, int64_t i, int32_t dtype);
std::optional<std::string> decodeTensor(const onnx::TensorProto &tensor,
                                        ConstTensor &result);
/// Encodes a ConstTensor into little-endian bytes of its element type.
std::string encodeBytes(const ConstTensor &tensor);
void encodeTensor(const ConstTensor &tensor, llvm::StringRef name,
                  onnx::TensorProto &proto);
/// The elements attribute for raw little-endian bytes of `type`.
mlir::DenseElementsAttr getElementsAttr(mlir::RankedTensorType type,
                                        llvm::StringRef bytes);

//===----------------------------------------------------------------------===//
// Node attributes
//===----------------------------------------------------------------------===//

/// The double with the shortest decimal form of a float (1e-5f -> 1e-5), so
/// that f64 attributes read as the model's author wrote them.
double widenFloat(float value);

const onnx::AttributeProto *findAttr(const onnx::NodeProto &node,
                                     llvm::StringRef name);
int64_t getAttrInt(const onnx::NodeProto &node, llvm::StringRef name,
                   int64_t defaultValue);
double getAttrFloat(const onnx::NodeProto &node, llvm::StringRef name,
                    double defaultValue);
std::string getAttrString(const onnx::NodeProto &node, llvm::StringRef name,
                          llvm::StringRef defaultValue);
std::optional<llvm::SmallVector<int64_t>>
getAttrInts(const onnx::NodeProto &node, llvm::StringRef name);

//===----------------------------------------------------------------------===//
// Constant evaluator (ShapeFolding.cpp)
//===----------------------------------------------------------------------===//

/// What the evaluator knows about one input of a node: its value when it is a
/// constant, its static shape when known (enough for Shape and Size).
struct FoldInput {
  const ConstTensor *value = nullptr;
  std::optional<llvm::SmallVector<int64_t>> shape;
  bool present = false; // false for an omitted optional input
};

/// For each element of `outShape`, the flat index of the element of a tensor
/// of `inShape` that numpy broadcasting reads.
std::vector<int64_t> broadcastIndices(llvm::ArrayRef<int64_t> inShape,
                                      llvm::ArrayRef<int64_t> outShape);

/// True for op types the evaluator knows.
bool isFoldableOpType(llvm::StringRef opType);
/// Evaluates `node` on known inputs. Fails (without diagnostics) when an input
/// is unknown, an attribute is unsupported or a result would be too large.
mlir::LogicalResult foldNode(const onnx::NodeProto &node, int64_t opset,
                             llvm::ArrayRef<FoldInput> inputs,
                             llvm::SmallVectorImpl<ConstTensor> &results);

//===----------------------------------------------------------------------===//
// Node conversion (OpConversions.cpp)
//===----------------------------------------------------------------------===//

class GraphImporter;
using ConvertFn = mlir::LogicalResult (*)(GraphImporter &,
                                          const onnx::NodeProto &);

struct ConverterInfo {
  ConvertFn convert;
  /// Inputs from this index on are attribute-like (shapes, axes, pads) and
  /// must be constants; the ones before are tensors the ppc op consumes.
  unsigned numDataInputs;
  /// The ppc op only takes floating-point tensors.
  bool needsFloat;
};

/// True if input `i` of `node` is present (not omitted or empty).
bool hasInput(const onnx::NodeProto &node, int i);
/// True if output `i` exists and something reads it.
bool isOutputUsed(GraphImporter &imp, const onnx::NodeProto &node, int i);
/// The numpy broadcast of two shapes (assumed compatible).
llvm::SmallVector<int64_t> broadcastShape(llvm::ArrayRef<int64_t> a,
                                          llvm::ArrayRef<int64_t> b);
/// `value` reshaped to `shape` (itself when it already has that shape).
mlir::Value reshape(GraphImporter &imp, mlir::Value value,
                    llvm::ArrayRef<int64_t> shape);

/// The converter for an op type of the default domain, or null.
const ConverterInfo *lookupConverter(llvm::StringRef opType);
/// The converter for `node`: of the default domain, or a fused node the
/// importer made (kFusedDomain); null otherwise.
const ConverterInfo *lookupConverter(const onnx::NodeProto &node);

/// Why a node of a supported op type cannot be imported, or nullopt.
std::optional<std::string> getUnsupportedReason(GraphImporter &imp,
                                                const onnx::NodeProto &node);

/// The result shape of a Slice node on an input of `inShape`, when its
/// parameters are constants (ONNX infers none for the attribute form).
std::optional<llvm::SmallVector<int64_t>>
inferSliceShape(GraphImporter &imp, const onnx::NodeProto &node,
                llvm::ArrayRef<int64_t> inShape);

/// The import state that converters use.
class GraphImporter {
public:
  GraphImporter(mlir::MLIRContext *context, llvm::StringRef path, int64_t opset,
                const OnnxImportOptions &options)
      : context(context), builder(context), constBuilder(context),
        path(path.str()), opset(opset), options(options) {}

  mlir::MLIRContext *context;
  /// Inserts the op being converted; constBuilder inserts weights and
  /// constants at the top of the function, in order of first use.
  mlir::OpBuilder builder;
  mlir::OpBuilder constBuilder;
  std::string path;
  int64_t opset;
  const OnnxImportOptions &options;

  /// The ONNX value name of each imported value.
  llvm::StringMap<mlir::Value> values;
  /// Initializers by name, and the ones that are folding results.
  llvm::StringMap<const onnx::TensorProto *> initializers;
  llvm::StringMap<ConstTensor> folded;
  /// Cache of decoded initializers (for attribute-like inputs).
  llvm::StringMap<ConstTensor> decoded;
  /// Initializers that are batch-norm running statistics.
  llvm::StringSet<> frozenWeights;
  /// The whole-weight view that slices of a weight read (see
  /// getWholeWeightView).
  llvm::DenseMap<mlir::Value, mlir::Value> weightViews;
  /// What a slice of `value` should read: for a ppc.weight, the one view of
  /// it (a reshape to its own shape, created after the weight on first use)
  /// that every slice of it shares; any other value itself.
  mlir::Value getWholeWeightView(mlir::Value value);
  /// Inferred element type and shape per value (dim < 0: not static).
  struct ValueType {
    int32_t dtype = 0;
    std::optional<llvm::SmallVector<int64_t>> shape;
    /// The dim_param of each dim ("" when none), for error messages.
    llvm::SmallVector<std::string> symbols;
  };
  llvm::StringMap<ValueType> types;
  /// Nodes that read each value.
  llvm::StringMap<unsigned> numUses;

  /// Location of a node: its name (or op_type#index) at the model file.
  mlir::Location getNodeLoc(const onnx::NodeProto &node, unsigned index);
  mlir::Location getFileLoc();
  mlir::Location currentLoc = mlir::UnknownLoc::get(context);

  /// The static tensor type of an ONNX value, null if unknown or dynamic.
  mlir::RankedTensorType getType(llvm::StringRef name);
  /// The value for an ONNX name, materializing weights and constants.
  /// `elementType` converts a constant to another element type (integer
  /// exponents of Pow, for instance).
  mlir::FailureOr<mlir::Value> getValue(llvm::StringRef name,
                                        mlir::Type elementType = {});
  /// The value of a constant ONNX name (initializer or folded), if any.
  /// A float initializer of several elements is a weight, not a constant,
  /// unless `attributeLike` (it feeds an operand that is an attribute, such
  /// as Resize's scales).
  const ConstTensor *getConst(llvm::StringRef name, bool attributeLike = false);
  /// Points constBuilder after the last weight/constant created so far.
  void positionConstBuilder();
  mlir::Block *body = nullptr;
  mlir::Operation *lastConstOp = nullptr;
  /// Materializes a ppc.constant.
  mlir::Value createConstant(const ConstTensor &tensor, mlir::Type elementType);
  /// A scalar-like float constant (shape `[]`) of `elementType`.
  mlir::Value createScalar(double value, mlir::Type elementType);
  /// True for initializers imported as trainable or frozen ppc.weight.
  bool isWeightInitializer(llvm::StringRef name);
  /// True for a floating-point initializer (of at most 64 MiB) holding an
  /// infinity or a NaN; cached per name.
  bool holdsNonFinite(llvm::StringRef name);
  llvm::StringMap<bool> nonFinite;
  /// Weights of fused blocks: the initializers each stacks (dim 0).
  llvm::StringMap<std::vector<std::string>> stackedWeights;
  void setValue(llvm::StringRef name, mlir::Value value) {
    values[name] = value;
  }
};

//===----------------------------------------------------------------------===//
// Recurrent layers (Recurrent.cpp)
//===----------------------------------------------------------------------===//

/// ONNX LSTM, GRU and RNN, unrolled over their (static) sequence into
/// linear, slice, elementwise and concat ops.
mlir::LogicalResult convertRecurrent(GraphImporter &imp,
                                     const onnx::NodeProto &node);
/// True for LSTM, GRU and RNN.
bool isRecurrentOpType(llvm::StringRef opType);
/// Why a recurrent node cannot be imported (attribute values, run-time or
/// ragged sequence_lens), or nullopt.
std::optional<std::string>
getRecurrentUnsupportedReason(GraphImporter &imp, const onnx::NodeProto &node);

//===----------------------------------------------------------------------===//
// Mixtures of experts (MixtureOfExperts.cpp)
//===----------------------------------------------------------------------===//

/// The domain and op type of the node a fused mixture-of-experts block
/// becomes: inputs tokens [..., H], router probabilities [..., E] and the
/// stacked expert weights W1, W3 [E, H, F] (W3 empty without a gate) and
/// W2 [E, F, H], then the stacked biases b1, b3 [E, F] and b2 [E, H] (each
/// empty where the layers have none); attributes top_k, normalize,
/// activation (swiglu, relu, gelu, gelu_tanh, silu) and transposed (per
/// layer W1, W3, W2: 1 where its weights are [E, out, in]); output the
/// block's [..., H].
inline constexpr llvm::StringLiteral kFusedDomain = "ai.ppc.fused";
inline constexpr llvm::StringLiteral kFusedMoeOpType = "MixtureOfExperts";

/// Replaces each Mixtral-style sparse MoE block PyTorch exported in `graph`
/// (types known: after folding) by a fused node; its stacked weights are
/// added to `stacked` (name -> the experts' initializers) and typed in
/// `imp`. Warns at a router TopK whose block does not match. Returns how
/// many it fused; the blocks' other nodes are left dead.
int fuseMixturesOfExperts(onnx::GraphProto &graph, GraphImporter &imp,
                          llvm::StringMap<std::vector<std::string>> &stacked);

/// Converts a fused mixture-of-experts node: ppc.moe_dispatch (one token
/// per routing group, capacity 1: dropless), the experts as batched
/// matmuls, ppc.moe_combine.
mlir::LogicalResult convertFusedMoe(GraphImporter &imp,
                                    const onnx::NodeProto &node);

/// Replaces decomposed LayerNorm and GELU subgraphs of `func` by ppc.layer_norm
/// and ppc.gelu, and folds a bias add into a bias-less ppc.linear.
void recognizePatterns(mlir::func::FuncOp func);

} // namespace onnx_import
} // namespace ppc

#endif // PPC_LIB_IMPORT_IMPORTERINTERNAL_H
