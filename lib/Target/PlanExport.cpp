//===- PlanExport.cpp - plan dialect <-> plan file ------------------------===//
//
// The plan dialect mirrors include/ppc/Runtime/plan.proto one to one; this
// file is the mapping both ways (see docs/plan-format.md). Ids are positions:
// tensors and graph ops are numbered in IR order, buffers per program in the
// order of their plan.alloc. Export then import gives back the same message.
//
//===----------------------------------------------------------------------===//

#include "ppc/Target/PlanExport.h"

#include "ppc/Dialect/Graph/GraphDialect.h"
#include "ppc/Import/OnnxWeights.h"
#include "ppc/Runtime/PlanIO.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinDialect.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Pass/Pass.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/ADT/TypeSwitch.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"

#include <limits>

using namespace mlir;

namespace ppc {

#define GEN_PASS_DEF_EXPORTPLAN
#include "ppc/Target/Passes.h.inc"

namespace pf = ppc::planfile;

// The dialect cannot include PlanIO.h (it would need the protobuf headers),
// so it carries its own copy of the version; this keeps the two equal.
static_assert(plan::PlanOp::kSupportedVersion == runtime::kPlanVersion,
              "plan.plan's supported version must equal kPlanVersion");

// The dialect's enums use the protobuf's numbers, so they convert by value.
static_assert(static_cast<int>(plan::Role::activation) ==
                  pf::Tensor::ACTIVATION &&
              static_cast<int>(plan::Role::constant) == pf::Tensor::CONSTANT);
static_assert(static_cast<int>(plan::Init::none) ==
                  pf::Tensor::INIT_UNSPECIFIED &&
              static_cast<int>(plan::Init::data) == pf::Tensor::DATA);
static_assert(static_cast<int>(plan::Phase::forward) ==
                  pf::Instruction::FORWARD &&
              static_cast<int>(plan::Phase::update) == pf::Instruction::UPDATE);
static_assert(static_cast<int>(plan::CollectiveKind::all_reduce) ==
                  pf::Instruction::ALL_REDUCE &&
              static_cast<int>(plan::CollectiveKind::all_to_all) ==
                  pf::Instruction::ALL_TO_ALL);

#ifndef PPC_VERSION_STRING
#define PPC_VERSION_STRING "0.1.0"
#endif
static constexpr const char *kProducer = "ppc-opt " PPC_VERSION_STRING;

//===----------------------------------------------------------------------===//
// Element types
//===----------------------------------------------------------------------===//

/// The dtype string of an element type: its MLIR spelling ("f32", "bf16",
/// "i64", "ui8"), limited to the types dtypeToType reads back.
static FailureOr<std::string> typeToDtype(Type type) {
  if (!isa<Float16Type, BFloat16Type, Float32Type, Float64Type, IntegerType>(
          type))
    return failure();
  std::string text;
  llvm::raw_string_ostream os(text);
  type.print(os);
  return text;
}

static Type dtypeToType(MLIRContext *context, StringRef dtype) {
  if (dtype == "f16")
    return Float16Type::get(context);
  if (dtype == "bf16")
    return BFloat16Type::get(context);
  if (dtype == "f32")
    return Float32Type::get(context);
  if (dtype == "f64")
    return Float64Type::get(context);
  auto signedness = IntegerType::Signless;
  if (dtype.consume_front("ui"))
    signedness = IntegerType::Unsigned;
  else if (dtype.consume_front("si"))
    signedness = IntegerType::Signed;
  else if (!dtype.consume_front("i"))
    return {};
  unsigned width;
  if (dtype.getAsInteger(10, width) || width == 0 ||
      width > IntegerType::kMaxWidth)
    return {};
  return IntegerType::get(context, width, signedness);
}

//===----------------------------------------------------------------------===//
// Export
//===----------------------------------------------------------------------===//

static int64_t intValue(IntegerAttr attr) {
  Type type = attr.getType();
  if (type.isInteger(1))
    return attr.getValue().getBoolValue() ? 1 : 0;
  if (type.isUnsignedInteger())
    return static_cast<int64_t>(attr.getValue().getZExtValue());
  return attr.getValue().getSExtValue();
}

/// The keyword of a dialect enum attribute: `#ppc.approximation<tanh>` and
/// `#ppc<approximation tanh>` give "tanh". Empty for anything that is not a
/// single keyword (a struct-like attribute has no string form in the file).
static std::string enumKeyword(Attribute attr) {
  std::string text;
  llvm::raw_string_ostream os(text);
  attr.print(os);
  StringRef body = StringRef(text).drop_front(); // '#'
  size_t open = body.find('<');
  StringRef keyword;
  if (open != StringRef::npos && body.ends_with(">")) {
    StringRef head = body.take_front(open);
    keyword = body.drop_front(open + 1).drop_back().trim();
    if (!head.contains('.')) // #dialect<mnemonic value>
      keyword = keyword.split(' ').second.trim();
  } else {
    keyword = body.split('.').second; // #dialect.keyword
  }
  bool plain = !keyword.empty() && !isdigit(keyword.front()) &&
               llvm::all_of(keyword, [](char c) {
                 return isalnum(c) || c == '_' || c == '.';
               });
  return plain ? keyword.str() : "";
}

/// One op attribute as a file attribute. The mapping, by attribute kind:
/// unit -> no value; integer (bool as 0/1) -> i; float -> f; string -> s;
/// type -> s (its dtype); dense int/bool arrays, arrays of integers and int
/// elements -> ints; dense float arrays, arrays of floats and float elements
/// -> floats; a dialect enum attribute -> s, its keyword. (An I32EnumAttr,
/// like ppc's GeluApproximation, is an IntegerAttr and so becomes i.)
static LogicalResult exportAttribute(plan::GraphOp op, NamedAttribute named,
                                     pf::Attribute &out) {
  out.set_name(named.getName().str());
  Attribute attr = named.getValue();
  auto ints = [&]() { return out.mutable_ints()->mutable_values(); };
  auto floats = [&]() { return out.mutable_floats()->mutable_values(); };
  if (isa<UnitAttr>(attr))
    return success();
  if (auto i = dyn_cast<IntegerAttr>(attr)) {
    out.set_i(intValue(i));
    return success();
  }
  if (auto f = dyn_cast<FloatAttr>(attr)) {
    out.set_f(f.getValueAsDouble());
    return success();
  }
  if (auto s = dyn_cast<StringAttr>(attr)) {
    out.set_s(s.str());
    return success();
  }
  if (auto t = dyn_cast<TypeAttr>(attr)) {
    if (FailureOr<std::string> dtype = typeToDtype(t.getValue());
        succeeded(dtype)) {
      out.set_s(*dtype);
      return success();
    }
  }
  if (auto a = dyn_cast<DenseI64ArrayAttr>(attr)) {
    ints()->Add(a.asArrayRef().begin(), a.asArrayRef().end());
    return success();
  }
  if (auto a = dyn_cast<DenseI32ArrayAttr>(attr)) {
    ints(); // set the list even when empty
    for (int32_t v : a.asArrayRef())
      ints()->Add(v);
    return success();
  }
  if (auto a = dyn_cast<DenseBoolArrayAttr>(attr)) {
    ints();
    for (bool v : a.asArrayRef())
      ints()->Add(v ? 1 : 0);
    return success();
  }
  if (auto a = dyn_cast<DenseF64ArrayAttr>(attr)) {
    floats()->Add(a.asArrayRef().begin(), a.asArrayRef().end());
    return success();
  }
  if (auto a = dyn_cast<DenseF32ArrayAttr>(attr)) {
    floats();
    for (float v : a.asArrayRef())
      floats()->Add(v);
    return success();
  }
  if (auto a = dyn_cast<ArrayAttr>(attr)) {
    if (llvm::all_of(a, [](Attribute e) { return isa<IntegerAttr>(e); })) {
      ints(); // an empty array is an empty int list
      for (Attribute e : a)
        ints()->Add(intValue(cast<IntegerAttr>(e)));
      return success();
    }
    if (llvm::all_of(a, [](Attribute e) { return isa<FloatAttr>(e); })) {
      for (Attribute e : a)
        floats()->Add(cast<FloatAttr>(e).getValueAsDouble());
      return success();
    }
  }
  if (auto dense = dyn_cast<DenseIntOrFPElementsAttr>(attr)) {
    if (isa<FloatType>(dense.getElementType())) {
      for (const APFloat &v : dense.getValues<APFloat>())
        floats()->Add(FloatAttr::getValueAsDouble(v));
      return success();
    }
    for (auto v : dense.getValues<IntegerAttr>())
      ints()->Add(intValue(v));
    return success();
  }
  if (!isa<BuiltinDialect>(attr.getDialect())) {
    std::string keyword = enumKeyword(attr);
    if (!keyword.empty()) {
      out.set_s(keyword);
      return success();
    }
  }
  return op.emitError() << "op attribute '" << named.getName().getValue()
                        << "' (" << attr
                        << ") has no plan file form (integer, float, string, "
                           "int or float list, enum keyword)";
}

/// A tensor's value as row-major floats.
static LogicalResult exportData(plan::TensorOp op, ElementsAttr value,
                                pf::Tensor &out) {
  auto *data = out.mutable_data();
  data->Reserve(static_cast<int>(value.getNumElements()));
  Type elementType = value.getElementType();
  if (isa<FloatType>(elementType)) {
    if (auto values = value.tryGetValues<APFloat>()) {
      for (const APFloat &v : *values)
        data->Add(static_cast<float>(FloatAttr::getValueAsDouble(v)));
      return success();
    }
  } else if (auto intType = dyn_cast<IntegerType>(elementType)) {
    if (auto values = value.tryGetValues<APInt>()) {
      for (const APInt &v : *values)
        data->Add(static_cast<float>(
            intType.getWidth() == 1 ? (v.getBoolValue() ? 1 : 0)
            : intType.isUnsigned()  ? static_cast<double>(v.getZExtValue())
                                    : static_cast<double>(v.getSExtValue())));
      return success();
    }
  }
  return op.emitOpError() << "value " << value
                          << " cannot be read as integers or floats";
}

namespace {
/// Builds the message of one plan.plan; errors are emitted at the op that
/// the file cannot hold.
class Exporter {
public:
  explicit Exporter(plan::PlanOp plan) : plan(plan) {}

  FailureOr<pf::Plan> run() {
    pf::Plan message;
    message.set_version(static_cast<uint32_t>(plan.getVersionAttr().getInt()));
    message.set_producer(kProducer);
    int64_t numRanks = plan.getNumRanksAttr().getInt();
    pf::Machine *machine = message.mutable_machine();
    machine->set_name(plan.getMachine().str());
    machine->set_num_devices(static_cast<int32_t>(numRanks));
    machine->set_description(plan.getMachineDescription().str());
    message.set_strategy_json(plan.getStrategy().str());
    message.set_batch_size(plan.getBatchSizeAttr().getInt());
    if (FloatAttr flops = plan.getModelFlopsAttr())
      message.set_model_flops(flops.getValueAsDouble());
    if (DictionaryAttr optimizer = plan.getOptimizerAttr()) {
      message.set_training(true);
      exportOptimizer(optimizer, *message.mutable_optimizer());
    }

    // Ids first: ops name tensors and kernels name ops in any order.
    for (auto tensor : plan.getBody().getOps<plan::TensorOp>())
      tensorIds[tensor.getSymNameAttr()] = tensorIds.size();
    for (auto op : plan.getBody().getOps<plan::GraphOp>())
      opIds[op.getSymNameAttr()] = opIds.size();

    for (auto tensor : plan.getBody().getOps<plan::TensorOp>())
      if (failed(exportTensor(tensor, *message.add_tensors())))
        return failure();
    for (auto op : plan.getBody().getOps<plan::GraphOp>())
      if (failed(exportOp(op, *message.add_ops())))
        return failure();
    message.set_loss_tensor(-1);
    if (FlatSymbolRefAttr loss = plan.getLossAttr()) {
      FailureOr<int32_t> id = tensorId(plan, loss);
      if (failed(id))
        return failure();
      message.set_loss_tensor(*id);
    }
    for (auto program : plan.getBody().getOps<plan::ProgramOp>())
      if (failed(exportProgram(program, *message.add_programs())))
        return failure();
    return message;
  }

private:
  plan::PlanOp plan;
  llvm::DenseMap<StringAttr, int32_t> tensorIds, opIds;
  /// Buffer ids of the program being exported.
  llvm::DenseMap<Value, int32_t> bufferIds;

  static void exportOptimizer(DictionaryAttr dict, pf::Optimizer &out) {
    StringRef kind = dict.getAs<StringAttr>("kind").getValue();
    out.set_kind(kind == "adam"       ? pf::Optimizer::ADAM
                 : kind == "momentum" ? pf::Optimizer::MOMENTUM
                                      : pf::Optimizer::SGD);
    auto get = [&](StringRef name) {
      auto value = dict.getAs<FloatAttr>(name);
      return value ? value.getValueAsDouble() : 0.0;
    };
    out.set_learning_rate(get("lr"));
    out.set_momentum(get("momentum"));
    out.set_beta1(get("beta1"));
    out.set_beta2(get("beta2"));
    out.set_epsilon(get("epsilon"));
    out.set_weight_decay(get("weight_decay"));
  }

  FailureOr<int32_t> tensorId(Operation *at, FlatSymbolRefAttr name) {
    auto it = tensorIds.find(name.getAttr());
    if (it == tensorIds.end())
      return at->emitOpError() << name << " does not name a plan.tensor";
    return it->second;
  }

  FailureOr<int32_t> bufferId(Operation *at, Value buffer) {
    auto it = bufferIds.find(buffer);
    if (it == bufferIds.end())
      return at->emitOpError()
             << "uses a buffer that no earlier plan.alloc of this program "
                "defines";
    return it->second;
  }

  /// The file stores most numbers as int32.
  static FailureOr<int32_t> toInt32(Operation *at, StringRef what,
                                    int64_t value) {
    if (value < std::numeric_limits<int32_t>::min() ||
        value > std::numeric_limits<int32_t>::max())
      return at->emitOpError()
             << what << " " << value << " does not fit the file's int32";
    return static_cast<int32_t>(value);
  }

  static void setBox(pf::Box &box, ArrayRef<int64_t> lo, ArrayRef<int64_t> hi) {
    box.mutable_lo()->Add(lo.begin(), lo.end());
    box.mutable_hi()->Add(hi.begin(), hi.end());
  }

  LogicalResult exportTensor(plan::TensorOp op, pf::Tensor &out) {
    out.set_id(tensorIds.lookup(op.getSymNameAttr()));
    out.set_name(op.getModelName() ? op.getModelName()->str()
                                   : op.getSymName().str());
    ArrayRef<int64_t> shape = op.getShape();
    out.mutable_shape()->Add(shape.begin(), shape.end());
    FailureOr<std::string> dtype = typeToDtype(op.getElementType());
    if (failed(dtype))
      return op.emitOpError() << "element type " << op.getElementType()
                              << " has no plan file dtype (f16, bf16, f32, "
                                 "f64 or an integer type)";
    out.set_dtype(*dtype);
    out.set_role(static_cast<pf::Tensor::Role>(op.getRole()));
    out.set_init(static_cast<pf::Tensor::Init>(op.getInit()));
    out.set_init_bound(op.getInitBoundAttr().getValueAsDouble());
    if (ElementsAttr value = op.getValueAttr())
      if (failed(exportData(op, value, out)))
        return failure();
    out.set_int_max(op.getIntMaxAttr().getInt());
    out.set_is_output(op.getIsOutput());
    return success();
  }

  LogicalResult exportOp(plan::GraphOp op, pf::Op &out) {
    out.set_id(opIds.lookup(op.getSymNameAttr()));
    out.set_kind(op.getKind().str());
    out.set_name(op.getModelName() ? op.getModelName()->str()
                                   : op.getSymName().str());
    for (auto name : op.getOperandsAttr().getAsRange<FlatSymbolRefAttr>()) {
      FailureOr<int32_t> id = tensorId(op, name);
      if (failed(id))
        return failure();
      out.add_operands(*id);
    }
    for (auto name : op.getResultsAttr().getAsRange<FlatSymbolRefAttr>()) {
      FailureOr<int32_t> id = tensorId(op, name);
      if (failed(id))
        return failure();
      out.add_results(*id);
    }
    for (NamedAttribute named : op.getOpAttributes())
      if (failed(exportAttribute(op, named, *out.add_attributes())))
        return failure();
    for (bool needed : op.getNeedsGrad())
      out.add_needs_grad(needed);
    return success();
  }

  /// Appends the ids of `buffers` to `out`.
  LogicalResult addBuffers(Operation *at, ValueRange buffers,
                           google::protobuf::RepeatedField<int32_t> &out) {
    for (Value buffer : buffers) {
      FailureOr<int32_t> id = bufferId(at, buffer);
      if (failed(id))
        return failure();
      out.Add(*id);
    }
    return success();
  }

  LogicalResult exportProgram(plan::ProgramOp program, pf::Program &out) {
    out.set_rank(static_cast<int32_t>(program.getRankAttr().getInt()));
    bufferIds.clear();
    for (Operation &op : program.getBody().front())
      if (failed(exportInstruction(&op, *out.add_instructions())))
        return failure();
    return success();
  }

  // The instructions' conversions ppc-tblgen derives from PlanOps.td
  // (exportInstruction), and the three it leaves to hand: an alloc's
  // nested buffer, a backward kernel's placeholders, a collective's
  // reduction and optional result. Each returns failure() only after
  // emitting an error.
#define PPC_PLAN_EXPORT_INSTRUCTION
#include "PlanInstructions.inc"

  LogicalResult exportAlloc(plan::AllocOp alloc, pf::Instruction::Alloc &out) {
    pf::Buffer *b = out.mutable_buffer();
    int32_t id = static_cast<int32_t>(bufferIds.size());
    bufferIds[alloc.getBuffer()] = id;
    b->set_id(id);
    b->set_grad(alloc.getGrad());
    b->set_staging(alloc.getStaging());
    out.set_uninitialized(alloc.getUninitialized());
    if (Value view = alloc.getView()) {
      FailureOr<int32_t> base = bufferId(alloc, view);
      if (failed(base))
        return failure();
      out.set_view(*base);
    }
    setBox(*b->mutable_box(), alloc.getLo(), alloc.getHi());
    if (FlatSymbolRefAttr tensor = alloc.getTensorAttr()) {
      FailureOr<int32_t> t = tensorId(alloc, tensor);
      if (failed(t))
        return failure();
      b->set_tensor(*t);
    } else {
      // Scratch: its box is its own shape.
      b->set_tensor(-1);
      b->mutable_shape()->Add(alloc.getHi().begin(), alloc.getHi().end());
    }
    return success();
  }

  LogicalResult exportKernelBackward(plan::KernelBackwardOp kernel,
                                     pf::Instruction::KernelBackward &k) {
    Operation *op = kernel;
    FailureOr<int32_t> id = opId(op, kernel.getOpAttr());
    FailureOr<int32_t> stage =
        toInt32(op, "stage", kernel.getStageAttr().getInt());
    if (failed(id) || failed(stage))
      return failure();
    k.set_op(*id);
    k.set_stage(*stage);
    // Results not kept for the backward (reduce-scattered partial sums) are
    // -1, one per result.
    if (kernel.getOutputs().empty())
      for (size_t r = 0; r < kernel.getOutputGrads().size(); ++r)
        k.add_outputs(-1);
    if (failed(addBuffers(op, kernel.getInputs(), *k.mutable_inputs())) ||
        failed(addBuffers(op, kernel.getOutputs(), *k.mutable_outputs())) ||
        failed(addBuffers(op, kernel.getOutputGrads(),
                          *k.mutable_output_grads())) ||
        failed(addBuffers(op, kernel.getScratch(), *k.mutable_scratch())))
      return failure();
    // One entry per operand of the op: -1 where it needs no gradient.
    ValueRange grads = kernel.getInputGrads();
    std::optional<ArrayRef<bool>> overwrite = kernel.getOverwrite();
    size_t next = 0;
    for (bool needed : kernel.getGradMask()) {
      if (!needed) {
        k.add_input_grads(-1);
        if (overwrite)
          k.add_overwrite(false);
        continue;
      }
      if (next >= grads.size())
        return kernel.emitOpError()
               << "grad_mask has more true entries than input_grads";
      if (overwrite)
        k.add_overwrite(next < overwrite->size() && (*overwrite)[next]);
      FailureOr<int32_t> g = bufferId(op, grads[next++]);
      if (failed(g))
        return failure();
      k.add_input_grads(*g);
    }
    return success();
  }

  LogicalResult exportCollective(plan::CollectiveOp collective,
                                 pf::Instruction::Collective &c) {
    Operation *op = collective;
    c.set_kind(
        static_cast<pf::Instruction::CollectiveKind>(collective.getKind()));
    for (int64_t member : collective.getGroup()) {
      FailureOr<int32_t> m = toInt32(op, "group member", member);
      if (failed(m))
        return failure();
      c.add_group(*m);
    }
    c.set_reduction(collective.getReduction() == "max"
                        ? pf::Instruction::Collective::MAX
                        : pf::Instruction::Collective::SUM);
    FailureOr<int32_t> root =
        toInt32(op, "root", collective.getRootAttr().getInt());
    FailureOr<int32_t> axis =
        toInt32(op, "axis", collective.getAxisAttr().getInt());
    if (failed(root) || failed(axis))
      return failure();
    c.set_root(*root);
    c.set_axis(*axis);
    c.set_result(-1);
    if (Value result = collective.getResult()) {
      FailureOr<int32_t> id = bufferId(op, result);
      if (failed(id))
        return failure();
      c.set_result(*id);
    }
    FailureOr<int32_t> buffer = bufferId(op, collective.getBuffer());
    if (failed(buffer))
      return failure();
    c.set_buffer(*buffer);
    return success();
  }

  FailureOr<int32_t> opId(Operation *at, FlatSymbolRefAttr name) {
    auto it = opIds.find(name.getAttr());
    if (it == opIds.end())
      return at->emitOpError() << name << " does not name a plan.op";
    return it->second;
  }
};
} // namespace

FailureOr<pf::Plan> exportPlan(plan::PlanOp plan) {
  // The verifier guarantees what the reader checks (ranks, boxes, ids).
  if (failed(mlir::verify(plan)))
    return failure();
  FailureOr<pf::Plan> message = Exporter(plan).run();
  if (failed(message))
    return failure();
  // Belt and braces: the reader must accept what we write.
  if (absl::Status error = runtime::validatePlan(*message); !error.ok())
    return plan.emitOpError()
           << "exports to an inconsistent plan: " << ppc::messageOf(error);
  return message;
}

//===----------------------------------------------------------------------===//
// Import
//===----------------------------------------------------------------------===//

namespace {
/// Builds the plan dialect form of a message; emits an error and returns
/// failure on what the IR cannot hold (ids out of range, unknown enums).
class Importer {
public:
  Importer(const pf::Plan &message, MLIRContext *context)
      : message(message), context(context), builder(context),
        loc(NameLoc::get(StringAttr::get(context, "plan file"))) {}

  OwningOpRef<ModuleOp> run() {
    context->loadDialect<plan::PlanDialect>();
    OwningOpRef<ModuleOp> module = ModuleOp::create(loc);
    builder.setInsertionPointToEnd(module->getBody());

    int64_t numRanks = message.programs_size() != 0
                           ? message.programs_size()
                           : message.machine().num_devices();
    DictionaryAttr optimizer;
    if (message.training())
      optimizer = importOptimizer(message.optimizer());
    auto planOp = plan::PlanOp::create(
        builder, loc, builder.getI64IntegerAttr(message.version()),
        builder.getI64IntegerAttr(numRanks),
        builder.getStringAttr(message.machine().name()),
        builder.getStringAttr(message.machine().description()),
        builder.getStringAttr(message.strategy_json()),
        builder.getI64IntegerAttr(message.batch_size()), optimizer,
        FlatSymbolRefAttr(),
        message.model_flops() > 0
            ? builder.getF64FloatAttr(message.model_flops())
            : FloatAttr());
    builder.setInsertionPointToEnd(&planOp.getBody().emplaceBlock());

    // Symbol names first: tensors and ops share the plan's symbol table.
    for (const pf::Tensor &t : message.tensors())
      tensorNames.push_back(uniqueName(t.name(), "t", tensorNames.size()));
    for (const pf::Op &o : message.ops())
      opNames.push_back(uniqueName(o.name(), "op", opNames.size()));

    for (int i = 0; i < message.tensors_size(); ++i)
      if (failed(importTensor(message.tensors(i), tensorNames[i])))
        return nullptr;
    for (int i = 0; i < message.ops_size(); ++i)
      if (failed(importOp(message.ops(i), opNames[i])))
        return nullptr;
    if (message.loss_tensor() >= 0) {
      FailureOr<FlatSymbolRefAttr> loss = tensorRef(message.loss_tensor());
      if (failed(loss))
        return nullptr;
      planOp.setLossAttr(*loss);
    }
    for (const pf::Program &p : message.programs())
      if (failed(importProgram(p)))
        return nullptr;
    return module;
  }

private:
  const pf::Plan &message;
  MLIRContext *context;
  OpBuilder builder;
  Location loc;
  llvm::StringSet<> usedNames;
  SmallVector<StringAttr> tensorNames, opNames;
  /// Live buffers of the program being imported.
  llvm::DenseMap<int32_t, Value> buffers;

  InFlightDiagnostic error() { return emitError(loc); }

  /// The model name when it is a fresh symbol, else `prefix<id>` made unique.
  StringAttr uniqueName(const std::string &name, StringRef prefix, size_t id) {
    std::string candidate = name;
    if (candidate.empty() || usedNames.contains(candidate)) {
      std::string base = (prefix + Twine(id)).str();
      candidate = base;
      for (int n = 1; usedNames.contains(candidate); ++n)
        candidate = base + "_" + std::to_string(n);
    }
    usedNames.insert(candidate);
    return builder.getStringAttr(candidate);
  }

  /// model_name only where the symbol name is not the model's name.
  StringAttr modelName(StringAttr symbol, const std::string &name) {
    return symbol.getValue() == name ? StringAttr()
                                     : builder.getStringAttr(name);
  }

  DictionaryAttr importOptimizer(const pf::Optimizer &o) {
    StringRef kind = o.kind() == pf::Optimizer::ADAM       ? "adam"
                     : o.kind() == pf::Optimizer::MOMENTUM ? "momentum"
                                                           : "sgd";
    auto f = [&](double v) { return builder.getF64FloatAttr(v); };
    return builder.getDictionaryAttr({
        builder.getNamedAttr("kind", builder.getStringAttr(kind)),
        builder.getNamedAttr("lr", f(o.learning_rate())),
        builder.getNamedAttr("momentum", f(o.momentum())),
        builder.getNamedAttr("beta1", f(o.beta1())),
        builder.getNamedAttr("beta2", f(o.beta2())),
        builder.getNamedAttr("epsilon", f(o.epsilon())),
        builder.getNamedAttr("weight_decay", f(o.weight_decay())),
    });
  }

  FailureOr<FlatSymbolRefAttr> tensorRef(int64_t id) {
    if (id < 0 || id >= static_cast<int64_t>(tensorNames.size())) {
      error() << "tensor id " << id << " is out of range (the plan has "
              << tensorNames.size() << " tensors)";
      return failure();
    }
    return FlatSymbolRefAttr::get(tensorNames[id]);
  }

  FailureOr<ArrayAttr>
  tensorRefs(const google::protobuf::RepeatedField<int32_t> &ids) {
    SmallVector<Attribute> refs;
    for (int32_t id : ids) {
      FailureOr<FlatSymbolRefAttr> ref = tensorRef(id);
      if (failed(ref))
        return failure();
      refs.push_back(*ref);
    }
    return builder.getArrayAttr(refs);
  }

  LogicalResult importTensor(const pf::Tensor &t, StringAttr symbol) {
    Type elementType = dtypeToType(context, t.dtype());
    if (!elementType)
      return error() << "tensor '" << t.name() << "' has unknown dtype '"
                     << t.dtype() << "'";
    auto role = plan::symbolizeRole(static_cast<uint32_t>(t.role()));
    if (!role)
      return error() << "tensor '" << t.name() << "' has no valid role ("
                     << static_cast<int>(t.role()) << ")";
    // The weights file binding belongs to the file pair that
    // --ppc-export-plan writes (it is redone from the module's source model
    // on export): the dialect form keeps the rule it had before.
    pf::Tensor::Init fileInit =
        t.init() == pf::Tensor::WEIGHTS_FILE ? t.seed_init() : t.init();
    auto init = plan::symbolizeInit(static_cast<uint32_t>(fileInit));
    if (!init)
      return error() << "tensor '" << t.name() << "' has an unknown init ("
                     << static_cast<int>(t.init()) << ")";
    SmallVector<int64_t> shape(t.shape().begin(), t.shape().end());
    ElementsAttr value;
    if (t.data_size() > 0 || *init == plan::Init::data) {
      int64_t count = 1;
      for (int64_t size : shape)
        count *= size;
      // Values are float32 in the file whatever the dtype; a count that does
      // not match the shape is kept (the verifier reports it).
      SmallVector<int64_t> valueShape =
          count == t.data_size() ? shape : SmallVector<int64_t>{t.data_size()};
      auto type = RankedTensorType::get(valueShape, builder.getF32Type());
      value = DenseElementsAttr::get(
          type, ArrayRef<float>(t.data().data(), t.data_size()));
    }
    plan::TensorOp::create(
        builder, loc, symbol, plan::RoleAttr::get(context, *role),
        builder.getDenseI64ArrayAttr(shape), TypeAttr::get(elementType),
        plan::InitAttr::get(context, *init),
        builder.getF64FloatAttr(t.init_bound()), value,
        builder.getI64IntegerAttr(t.int_max()),
        t.is_output() ? builder.getUnitAttr() : UnitAttr(),
        modelName(symbol, t.name()));
    return success();
  }

  FailureOr<Attribute> importAttribute(const pf::Attribute &a) {
    switch (a.value_case()) {
    case pf::Attribute::kI:
      return Attribute(builder.getI64IntegerAttr(a.i()));
    case pf::Attribute::kF:
      return Attribute(builder.getF64FloatAttr(a.f()));
    case pf::Attribute::kS:
      return Attribute(builder.getStringAttr(a.s()));
    case pf::Attribute::kInts:
      return Attribute(builder.getDenseI64ArrayAttr(SmallVector<int64_t>(
          a.ints().values().begin(), a.ints().values().end())));
    case pf::Attribute::kFloats:
      return Attribute(builder.getDenseF64ArrayAttr(SmallVector<double>(
          a.floats().values().begin(), a.floats().values().end())));
    case pf::Attribute::VALUE_NOT_SET:
      return Attribute(builder.getUnitAttr());
    }
    return failure();
  }

  LogicalResult importOp(const pf::Op &o, StringAttr symbol) {
    FailureOr<ArrayAttr> operands = tensorRefs(o.operands());
    FailureOr<ArrayAttr> results = tensorRefs(o.results());
    if (failed(operands) || failed(results))
      return failure();
    NamedAttrList attributes;
    for (const pf::Attribute &a : o.attributes()) {
      FailureOr<Attribute> value = importAttribute(a);
      if (failed(value))
        return error() << "op '" << o.name() << "' attribute '" << a.name()
                       << "' has an unknown kind";
      if (attributes.get(a.name()))
        return error() << "op '" << o.name() << "' has attribute '" << a.name()
                       << "' twice";
      attributes.append(a.name(), *value);
    }
    SmallVector<bool> needsGrad(o.needs_grad().begin(), o.needs_grad().end());
    plan::GraphOp::create(
        builder, loc, symbol, builder.getStringAttr(o.kind()), *operands,
        *results, attributes.getDictionary(context),
        builder.getDenseBoolArrayAttr(needsGrad), modelName(symbol, o.name()));
    return success();
  }

  FailureOr<Value> buffer(int32_t id) {
    auto it = buffers.find(id);
    if (it == buffers.end()) {
      error() << "buffer " << id << " is used but not allocated";
      return failure();
    }
    return it->second;
  }

  FailureOr<SmallVector<Value>>
  bufferList(const google::protobuf::RepeatedField<int32_t> &ids) {
    SmallVector<Value> values;
    for (int32_t id : ids) {
      FailureOr<Value> value = buffer(id);
      if (failed(value))
        return failure();
      values.push_back(*value);
    }
    return values;
  }

  FailureOr<FlatSymbolRefAttr> opRef(int32_t id) {
    if (id < 0 || id >= static_cast<int32_t>(opNames.size())) {
      error() << "op id " << id << " is out of range (the plan has "
              << opNames.size() << " ops)";
      return failure();
    }
    return FlatSymbolRefAttr::get(opNames[id]);
  }

  DenseI64ArrayAttr ints(const google::protobuf::RepeatedField<int64_t> &v) {
    return builder.getDenseI64ArrayAttr(
        SmallVector<int64_t>(v.begin(), v.end()));
  }

  LogicalResult importProgram(const pf::Program &p) {
    OpBuilder::InsertionGuard guard(builder);
    auto program = plan::ProgramOp::create(builder, loc,
                                           builder.getI64IntegerAttr(p.rank()));
    builder.setInsertionPointToEnd(&program.getBody().emplaceBlock());
    buffers.clear();
    for (auto [i, instr] : llvm::enumerate(p.instructions()))
      if (failed(importInstruction(instr)))
        return error() << "in instruction " << i << " of rank " << p.rank();
    return success();
  }

  LogicalResult importInstruction(const pf::Instruction &instr) {
    if (failed(importInstructionOp(instr)))
      return failure();
    if (instr.has_free())
      buffers.erase(instr.free().buffer());
    return success();
  }

  // The instructions' conversions ppc-tblgen derives from PlanOps.td
  // (importInstructionOp), and the three it leaves to hand.
#define PPC_PLAN_IMPORT_INSTRUCTION
#include "PlanInstructions.inc"

  LogicalResult importAlloc(const pf::Instruction::Alloc &alloc) {
    Type bufferType = plan::BufferType::get(context);
    const pf::Buffer &b = alloc.buffer();
    if (buffers.count(b.id()))
      return error() << "buffer " << b.id() << " is allocated twice";
    FlatSymbolRefAttr tensor;
    DenseI64ArrayAttr lo = ints(b.box().lo()), hi = ints(b.box().hi());
    if (b.tensor() >= 0) {
      FailureOr<FlatSymbolRefAttr> ref = tensorRef(b.tensor());
      if (failed(ref))
        return failure();
      tensor = *ref;
    } else {
      // Scratch: shape `shape`, box [0, shape).
      hi = ints(b.shape());
      lo = builder.getDenseI64ArrayAttr(SmallVector<int64_t>(b.shape_size()));
    }
    Value view;
    if (alloc.has_view()) {
      FailureOr<Value> base = buffer(alloc.view());
      if (failed(base))
        return failure();
      view = *base;
    }
    buffers[b.id()] = plan::AllocOp::create(
        builder, loc, bufferType, tensor, lo, hi,
        b.grad() ? builder.getUnitAttr() : UnitAttr(),
        b.staging() ? builder.getUnitAttr() : UnitAttr(),
        alloc.uninitialized() ? builder.getUnitAttr() : UnitAttr(), view);
    return success();
  }

  LogicalResult importKernelBackward(const pf::Instruction::KernelBackward &k) {
    FailureOr<FlatSymbolRefAttr> op = opRef(k.op());
    auto inputs = bufferList(k.inputs());
    // Results not kept (all -1) are `outs()`; the dialect has no way to
    // keep some results and not others.
    google::protobuf::RepeatedField<int32_t> kept;
    int dropped = 0;
    for (int32_t id : k.outputs()) {
      if (id < 0)
        ++dropped;
      else
        kept.Add(id);
    }
    if (dropped > 0 && !kept.empty())
      return error() << "kernel_backward keeps some of its outputs and not "
                        "others (-1 for some entries only)";
    auto outputs = bufferList(kept);
    auto outputGrads = bufferList(k.output_grads());
    auto scratch = bufferList(k.scratch());
    if (failed(op) || failed(inputs) || failed(outputs) ||
        failed(outputGrads) || failed(scratch))
      return failure();
    // -1 entries become false mask entries without a buffer.
    if (k.overwrite_size() != 0 && k.overwrite_size() != k.input_grads_size())
      return error() << "kernel_backward has " << k.overwrite_size()
                     << " overwrite entries for " << k.input_grads_size()
                     << " input_grads";
    SmallVector<bool> mask, overwrite;
    SmallVector<Value> inputGrads;
    for (int i = 0; i < k.input_grads_size(); ++i) {
      const int32_t id = k.input_grads(i);
      mask.push_back(id >= 0);
      if (id < 0)
        continue;
      FailureOr<Value> g = buffer(id);
      if (failed(g))
        return failure();
      inputGrads.push_back(*g);
      overwrite.push_back(k.overwrite_size() != 0 && k.overwrite(i));
    }
    plan::KernelBackwardOp::create(
        builder, loc, *op, builder.getI64IntegerAttr(k.stage()),
        builder.getDenseBoolArrayAttr(mask), *inputs, *outputs, *outputGrads,
        inputGrads, *scratch,
        k.overwrite_size() != 0 ? builder.getDenseBoolArrayAttr(overwrite)
                                : DenseBoolArrayAttr());
    return success();
  }

  LogicalResult importCollective(const pf::Instruction::Collective &c) {
    using C = pf::Instruction::Collective;
    auto kind = plan::symbolizeCollectiveKind(static_cast<uint32_t>(c.kind()));
    if (!kind)
      return error() << "unknown collective kind "
                     << static_cast<int>(c.kind());
    if (c.reduction() != C::SUM && c.reduction() != C::MAX)
      return error() << "unknown reduction " << static_cast<int>(c.reduction());
    FailureOr<Value> b = buffer(c.buffer());
    if (failed(b))
      return failure();
    Value result;
    if (c.result() >= 0) {
      FailureOr<Value> r = buffer(c.result());
      if (failed(r))
        return failure();
      result = *r;
    }
    plan::CollectiveOp::create(
        builder, loc, plan::CollectiveKindAttr::get(context, *kind),
        builder.getDenseI64ArrayAttr(
            SmallVector<int64_t>(c.group().begin(), c.group().end())),
        *b, result,
        builder.getStringAttr(c.reduction() == C::MAX ? "max" : "sum"),
        builder.getI64IntegerAttr(c.root()),
        builder.getI64IntegerAttr(c.axis()));
    return success();
  }
};
} // namespace

OwningOpRef<ModuleOp> importPlan(const pf::Plan &message,
                                 MLIRContext *context) {
  return Importer(message, context).run();
}

//===----------------------------------------------------------------------===//
// Weights file
//===----------------------------------------------------------------------===//

LogicalResult writeWeightsFile(pf::Plan &message, StringRef modelPath,
                               StringRef weightsPath, Location loc) {
  auto needsValues = [](const pf::Tensor &t) {
    return (t.role() == pf::Tensor::WEIGHT || t.role() == pf::Tensor::FROZEN) &&
           t.init() != pf::Tensor::DATA && t.init() != pf::Tensor::WEIGHTS_FILE;
  };
  if (llvm::none_of(message.tensors(), needsValues))
    return success();
  std::string error;
  std::unique_ptr<OnnxWeightReader> reader =
      OnnxWeightReader::open(modelPath, error);
  if (!reader)
    return emitError(loc) << "cannot read the model's weights: " << error;
  for (const pf::Tensor &t : message.tensors())
    if (!t.stacked_from().empty())
      reader->addStack(t.name(),
                       {t.stacked_from().begin(), t.stacked_from().end()});

  std::string tmp = (weightsPath + ".tmp").str();
  std::error_code ec;
  llvm::raw_fd_ostream out(tmp, ec);
  if (ec)
    return emitError(loc) << "cannot open weights file '" << tmp
                          << "' for writing: " << ec.message();
  int64_t offset = 0;
  std::vector<float> values;
  for (pf::Tensor &t : *message.mutable_tensors()) {
    if (!needsValues(t))
      continue;
    if (auto err = reader->read(t.name(), llvm::to_vector(t.shape()), values)) {
      out.close();
      (void)llvm::sys::fs::remove(tmp);
      return emitError(loc) << "weight '" << t.name() << "': " << *err;
    }
    const auto count = static_cast<int64_t>(values.size());
    out.write(reinterpret_cast<const char *>(values.data()), count * 4);
    t.set_seed_init(t.init());
    t.set_init(pf::Tensor::WEIGHTS_FILE);
    t.set_weights_offset(offset);
    t.set_weights_count(count);
    t.set_weights_checksum(runtime::weightsChecksum(values.data(), count));
    offset += count;
  }
  out.close();
  if (out.has_error()) {
    (void)llvm::sys::fs::remove(tmp);
    return emitError(loc) << "cannot write weights file '" << tmp
                          << "': " << out.error().message();
  }
  if (std::error_code rc = llvm::sys::fs::rename(tmp, weightsPath))
    return emitError(loc) << "cannot rename '" << tmp << "' to '" << weightsPath
                          << "': " << rc.message();
  pf::WeightsFile *file = message.mutable_weights_file();
  file->set_path(llvm::sys::path::filename(weightsPath).str());
  file->set_size_bytes(offset * 4);
  return success();
}

//===----------------------------------------------------------------------===//
// ppc-export-plan
//===----------------------------------------------------------------------===//

namespace {
struct ExportPlanPass : impl::ExportPlanBase<ExportPlanPass> {
  using ExportPlanBase::ExportPlanBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    markAllAnalysesPreserved();
    if (file.empty()) {
      module.emitError("ppc-export-plan needs a file: "
                       "--ppc-export-plan=\"file=plan.pb\"");
      return signalPassFailure();
    }
    SmallVector<plan::PlanOp> plans;
    module.walk([&](plan::PlanOp plan) {
      plans.push_back(plan);
      return WalkResult::skip();
    });
    if (plans.empty()) {
      module.emitError("ppc-export-plan: the module has no plan.plan to "
                       "export (run the lowering to the plan dialect first)");
      return signalPassFailure();
    }
    if (plans.size() > 1) {
      InFlightDiagnostic diag = plans[1].emitOpError()
                                << "is a second plan.plan in the module; "
                                   "ppc-export-plan writes exactly one";
      diag.attachNote(plans[0].getLoc()) << "the first plan.plan is here";
      return signalPassFailure();
    }
    FailureOr<pf::Plan> message = exportPlan(plans[0]);
    if (failed(message))
      return signalPassFailure();
    // Weights the importer stacked from several initializers say which.
    if (auto stacked = module->getAttrOfType<DictionaryAttr>(
            graph::PPCDialect::getStackedWeightsAttrName()))
      for (pf::Tensor &t : *message->mutable_tensors())
        if (auto parts = stacked.getAs<ArrayAttr>(t.name()))
          for (Attribute part : parts)
            t.add_stacked_from(cast<StringAttr>(part).getValue().str());
    // Weights imported from ONNX without their values: the model's
    // initializers go to FILE.weights, next to the plan.
    if (auto model = module->getAttrOfType<StringAttr>(
            graph::PPCDialect::getSourceModelAttrName()))
      if (failed(writeWeightsFile(*message, model.getValue(), file + ".weights",
                                  plans[0].getLoc())))
        return signalPassFailure();
    if (absl::Status error = runtime::writePlanFile(*message, file, text);
        !error.ok()) {
      plans[0].emitError() << "ppc-export-plan: " << ppc::messageOf(error);
      return signalPassFailure();
    }
  }
};
} // namespace

} // namespace ppc
