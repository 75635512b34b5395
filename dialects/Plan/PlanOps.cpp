//===- PlanOps.cpp - ppc plan dialect ops: verifiers ----------------------===//
//
// The verifiers enforce what the plan file reader (runtime/format/PlanIO.cpp)
// and the executor rely on, so that a plan that verifies also loads and runs:
// one program per rank in order, buffer boxes inside their tensors, kernels
// bound to the right buffers, collectives over valid groups.
//
// Checks that need only the op itself and its parents are in verify();
// checks that resolve symbols (tensors, graph ops) are in verifySymbolUses,
// which MLIR runs once per plan.plan with a cached symbol table, so a plan of
// many instructions verifies in linear time.
//
//===----------------------------------------------------------------------===//

#include "ppc/Dialect/Plan/PlanOps.h"
#include "ppc/Simulator/Simulator.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/Diagnostics.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallBitVector.h"
#include "llvm/Support/raw_ostream.h"

using namespace mlir;
using namespace ppc::plan;

#define GET_OP_CLASSES
#include "ppc/Dialect/Plan/PlanOps.cpp.inc"

//===----------------------------------------------------------------------===//
// Shared helpers
//===----------------------------------------------------------------------===//

static std::string formatList(ArrayRef<int64_t> values) {
  std::string text;
  llvm::raw_string_ostream os(text);
  os << "[";
  llvm::interleaveComma(values, os);
  os << "]";
  return text;
}

/// The plan.alloc that defines `buffer`, or null (buffers only come from
/// plan.alloc in valid IR, but a generic op could produce one).
static AllocOp allocOf(Value buffer) {
  return buffer ? buffer.getDefiningOp<AllocOp>() : AllocOp();
}

static int64_t numRanksOf(Operation *op) {
  auto plan = op->getParentOfType<PlanOp>();
  return plan ? plan.getNumRanksAttr().getInt() : 0;
}

static int64_t rankOf(Operation *op) {
  auto program = op->getParentOfType<ProgramOp>();
  return program ? program.getRankAttr().getInt() : -1;
}

/// Checks that [lo, hi) is a well-formed box and, when `buffer` comes from a
/// plan.alloc, that it has the buffer's rank and lies inside the buffer's box.
static LogicalResult verifyBoxInBuffer(Operation *op, StringRef what,
                                       Value buffer, ArrayRef<int64_t> lo,
                                       ArrayRef<int64_t> hi) {
  if (lo.size() != hi.size())
    return op->emitOpError()
           << "'lo' has " << lo.size() << " entries but 'hi' has " << hi.size();
  AllocOp alloc = allocOf(buffer);
  if (!alloc)
    return success();
  ArrayRef<int64_t> bufLo = alloc.getLo(), bufHi = alloc.getHi();
  if (lo.size() != bufLo.size())
    return op->emitOpError()
           << "box has rank " << lo.size() << " but the " << what
           << " buffer holds a box of rank " << bufLo.size();
  for (size_t d = 0; d < lo.size(); ++d)
    if (lo[d] > hi[d] || lo[d] < bufLo[d] || hi[d] > bufHi[d])
      return op->emitOpError()
             << "box " << formatList(lo) << ".." << formatList(hi)
             << " is not inside the " << what << " buffer's box "
             << formatList(bufLo) << ".." << formatList(bufHi) << " (dim " << d
             << ")";
  return success();
}

static LogicalResult verifyPeer(Operation *op, int64_t peer) {
  int64_t numRanks = numRanksOf(op), rank = rankOf(op);
  if (peer < 0 || peer >= numRanks)
    return op->emitOpError()
           << "peer " << peer << " is out of range for a plan of " << numRanks
           << " ranks";
  if (peer == rank)
    return op->emitOpError() << "peer " << peer << " is this program's rank";
  return success();
}

template <typename OpTy>
static OpTy lookup(SymbolTableCollection &symbolTable, Operation *from,
                   FlatSymbolRefAttr name) {
  return symbolTable.lookupNearestSymbolFrom<OpTy>(from, name);
}

/// The tensor held by `buffer`'s plan.alloc, or null for scratch buffers,
/// buffers not from a plan.alloc and unresolved tensors (the alloc reports
/// those itself).
static TensorOp tensorOf(SymbolTableCollection &symbolTable, Value buffer) {
  AllocOp alloc = allocOf(buffer);
  if (!alloc || !alloc.getTensorAttr())
    return {};
  return lookup<TensorOp>(symbolTable, alloc, alloc.getTensorAttr());
}

//===----------------------------------------------------------------------===//
// plan.plan
//===----------------------------------------------------------------------===//

static constexpr StringLiteral kOptimizerParams[] = {
    "lr", "momentum", "beta1", "beta2", "epsilon", "weight_decay"};

static LogicalResult verifyOptimizer(PlanOp op, DictionaryAttr optimizer) {
  auto kind = optimizer.getAs<StringAttr>("kind");
  if (!kind)
    return op.emitOpError("optimizer needs a string 'kind'");
  if (!ppc::sim::findOptimizer(kind.getValue().str()))
    return op.emitOpError() << "optimizer kind '" << kind.getValue()
                            << "' is not one of " << ppc::sim::optimizerNames();
  for (NamedAttribute entry : optimizer) {
    if (entry.getName() == "kind")
      continue;
    if (!llvm::is_contained(kOptimizerParams, entry.getName().getValue()))
      return op.emitOpError()
             << "optimizer has unknown parameter '"
             << entry.getName().getValue()
             << "' (expected lr, momentum, beta1, beta2, epsilon, "
                "weight_decay)";
    if (!isa<FloatAttr>(entry.getValue()))
      return op.emitOpError()
             << "optimizer parameter '" << entry.getName().getValue()
             << "' must be a float";
  }
  return success();
}

LogicalResult PlanOp::verify() {
  int64_t version = getVersionAttr().getInt();
  if (version != static_cast<int64_t>(kSupportedVersion))
    return emitOpError() << "version " << version
                         << " is not the supported plan format version "
                         << kSupportedVersion;
  int64_t numRanks = getNumRanksAttr().getInt();
  if (numRanks < 1)
    return emitOpError() << "num_ranks must be >= 1, got " << numRanks;
  if (getBatchSizeAttr().getInt() < 0)
    return emitOpError() << "batch_size must be >= 0, got "
                         << getBatchSizeAttr().getInt();
  if (auto optimizer = getOptimizerAttr()) {
    if (failed(verifyOptimizer(*this, optimizer)))
      return failure();
    if (!getLossAttr())
      return emitOpError("a training plan (with an optimizer) needs a loss");
  }
  if (auto loss = getLossAttr())
    if (!isa_and_nonnull<TensorOp>(
            ::mlir::SymbolTable::lookupSymbolIn(*this, loss.getAttr())))
      return emitOpError() << "loss " << loss << " does not name a plan.tensor";

  // One program per rank, in rank order: the file stores programs[r] for rank
  // r, and the exporter writes them in IR order.
  int64_t index = 0;
  llvm::SmallBitVector seen(numRanks);
  for (Operation &child : getBody().front()) {
    if (isa<TensorOp, GraphOp>(child))
      continue;
    auto program = dyn_cast<ProgramOp>(child);
    if (!program)
      return emitOpError()
             << "body may only hold plan.tensor, plan.op and plan.program, "
                "found '"
             << child.getName() << "'";
    int64_t rank = program.getRankAttr().getInt();
    if (rank < 0 || rank >= numRanks)
      return program.emitOpError()
             << "rank " << rank << " is out of range for a plan of " << numRanks
             << " ranks";
    if (seen.test(rank))
      return program.emitOpError() << "is a second program for rank " << rank;
    if (rank != index)
      return program.emitOpError()
             << "for rank " << rank << " is out of order: program #" << index
             << " must be for rank " << index;
    seen.set(rank);
    ++index;
  }
  if (index != numRanks)
    return emitOpError() << "has no program for rank " << index << " (it has "
                         << numRanks << " ranks)";
  return success();
}

//===----------------------------------------------------------------------===//
// plan.tensor
//===----------------------------------------------------------------------===//

LogicalResult TensorOp::verify() {
  ArrayRef<int64_t> shape = getShape();
  int64_t numElements = 1;
  for (auto [d, size] : llvm::enumerate(shape)) {
    if (size < 0)
      return emitOpError() << "shape " << formatList(shape) << " has size "
                           << size << " in dim " << d << "; sizes must be >= 0";
    numElements *= size;
  }
  Type elementType = getElementType();
  if (!elementType.isIntOrFloat())
    return emitOpError() << "element type " << elementType
                         << " is not an integer or float type";
  if (getInit() == Init::data && !getValue())
    return emitOpError("init 'data' needs a 'value'");
  if (auto value = getValueAttr()) {
    if (!value.getElementType().isIntOrFloat())
      return emitOpError() << "value must hold integers or floats, not "
                           << value.getElementType();
    if (value.getNumElements() != numElements)
      return emitOpError() << "value has " << value.getNumElements()
                           << " elements but shape " << formatList(shape)
                           << " has " << numElements;
  }
  if (getInitBound().isNegative())
    return emitOpError("init_bound must be >= 0");
  int64_t intMax = getIntMaxAttr().getInt();
  if (intMax < 0)
    return emitOpError() << "int_max must be >= 0, got " << intMax;
  if (intMax > 0 && !isa<IntegerType>(elementType))
    return emitOpError() << "int_max is only for integer tensors, not "
                         << elementType;
  return success();
}

//===----------------------------------------------------------------------===//
// plan.op
//===----------------------------------------------------------------------===//

LogicalResult GraphOp::verify() {
  if (getKind().empty())
    return emitOpError("kind must not be empty");
  size_t numOperands = getOperandsAttr().size();
  if (getNeedsGrad().size() != numOperands)
    return emitOpError() << "needs_grad has " << getNeedsGrad().size()
                         << " entries but the op has " << numOperands
                         << " operands";
  if (getFlatView() && (numOperands != 1 || getResultsAttr().size() != 1))
    return emitOpError("a flat view has one operand and one result");
  return success();
}

LogicalResult GraphOp::verifySymbolUses(SymbolTableCollection &symbolTable) {
  for (auto [what, list] :
       {std::pair<StringRef, ArrayAttr>{"operand", getOperandsAttr()},
        {"result", getResultsAttr()}})
    for (auto [i, name] : llvm::enumerate(list.getAsRange<FlatSymbolRefAttr>()))
      if (!lookup<TensorOp>(symbolTable, *this, name))
        return emitOpError() << what << " #" << i << " " << name
                             << " does not name a plan.tensor";
  return success();
}

//===----------------------------------------------------------------------===//
// plan.program
//===----------------------------------------------------------------------===//

LogicalResult ProgramOp::verify() {
  // A freed buffer is gone: the executor (like PlanIO's validatePlan) rejects
  // any later use, including a second free.
  llvm::DenseSet<Value> freed;
  for (Operation &instr : getBody().front()) {
    if (instr.getDialect() != (*this)->getDialect() ||
        isa<PlanOp, TensorOp, GraphOp, ProgramOp>(instr))
      return emitOpError() << "may only hold plan instructions, found '"
                           << instr.getName() << "'";
    for (OpOperand &operand : instr.getOpOperands())
      if (freed.contains(operand.get()))
        return instr.emitOpError() << "operand #" << operand.getOperandNumber()
                                   << " uses a buffer after its plan.free";
    if (auto free = dyn_cast<FreeOp>(instr))
      freed.insert(free.getBuffer());
  }
  return success();
}

//===----------------------------------------------------------------------===//
// Buffers
//===----------------------------------------------------------------------===//

LogicalResult AllocOp::verify() {
  ArrayRef<int64_t> lo = getLo(), hi = getHi();
  if (lo.size() != hi.size())
    return emitOpError() << "'lo' has " << lo.size() << " entries but 'hi' has "
                         << hi.size();
  if (getStaging() && (!getTensorAttr() || getGrad()))
    return emitOpError("a staging buffer holds the values of a tensor");
  if (getView()) {
    if (!getTensorAttr())
      return emitOpError("a view holds a box of a tensor");
    if (getStaging() || getUninitialized())
      return emitOpError("a view is neither allocated nor filled: it cannot "
                         "be staging or uninitialized");
    AllocOp base = allocOf(getView());
    if (!base)
      return success();
    if (!base.getTensorAttr())
      return emitOpError("is a view of a scratch buffer");
    if (base.getGrad() != getGrad())
      return emitOpError() << "is a view holding "
                           << (getGrad() ? "a gradient" : "values")
                           << " of a buffer holding "
                           << (base.getGrad() ? "a gradient" : "values");
    auto volume = [](ArrayRef<int64_t> lo, ArrayRef<int64_t> hi) {
      int64_t n = 1;
      for (auto [l, h] : llvm::zip(lo, hi))
        n *= h - l;
      return n;
    };
    if (volume(lo, hi) != volume(base.getLo(), base.getHi()))
      return emitOpError() << "views " << volume(lo, hi)
                           << " elements of a buffer of "
                           << volume(base.getLo(), base.getHi());
  }
  if (getTensorAttr())
    return success(); // checked against the tensor in verifySymbolUses
  // Scratch: a plain array of shape `hi`.
  if (getGrad())
    return emitOpError("a scratch buffer (no tensor) cannot be a gradient");
  for (size_t d = 0; d < lo.size(); ++d) {
    if (lo[d] != 0)
      return emitOpError() << "scratch buffer must have 'lo' all zero, got "
                           << formatList(lo);
    if (hi[d] < 0)
      return emitOpError() << "scratch buffer shape " << formatList(hi)
                           << " has a negative size";
  }
  return success();
}

LogicalResult AllocOp::verifySymbolUses(SymbolTableCollection &symbolTable) {
  auto name = getTensorAttr();
  if (!name)
    return success();
  auto tensor = lookup<TensorOp>(symbolTable, *this, name);
  if (!tensor)
    return emitOpError() << name << " does not name a plan.tensor";
  ArrayRef<int64_t> lo = getLo(), hi = getHi(), shape = tensor.getShape();
  if (lo.size() != shape.size())
    return emitOpError() << "box has rank " << lo.size() << " but " << name
                         << " has rank " << shape.size();
  for (size_t d = 0; d < lo.size(); ++d)
    if (lo[d] < 0 || lo[d] > hi[d] || hi[d] > shape[d])
      return emitOpError() << "box " << formatList(lo) << ".." << formatList(hi)
                           << " is not inside " << name << " of shape "
                           << formatList(shape) << " (dim " << d << ")";
  if (!getView())
    return success();
  // Weights keep their buffers across steps: none is a view or viewed.
  auto persistentValue = [](TensorOp t, bool grad) {
    return !grad &&
           (t.getRole() == Role::weight || t.getRole() == Role::frozen);
  };
  if (persistentValue(tensor, getGrad()))
    return emitOpError() << "is a view holding " << name
                         << ", whose buffers are kept across steps";
  TensorOp base = tensorOf(symbolTable, getView());
  if (!base)
    return success();
  if (persistentValue(base, getGrad()))
    return emitOpError() << "is a view of a buffer of @" << base.getSymName()
                         << ", whose buffers are kept across steps";
  if (base.getElementType() != tensor.getElementType())
    return emitOpError() << "is a view of " << base.getElementType()
                         << " elements as " << tensor.getElementType();
  return success();
}

/// The buffer's alloc must hold a tensor's value: not scratch, not a grad.
static LogicalResult verifyHoldsValue(Operation *op, StringRef what,
                                      Value buffer) {
  AllocOp alloc = allocOf(buffer);
  if (!alloc)
    return success();
  if (!alloc.getTensorAttr())
    return op->emitOpError() << what
                             << " is a scratch buffer; it must hold a "
                                "tensor";
  if (alloc.getGrad())
    return op->emitOpError()
           << what << " holds the gradient of " << alloc.getTensorAttr()
           << "; it must hold its value";
  return success();
}

LogicalResult LoadOp::verify() {
  return verifyHoldsValue(*this, "buffer", getBuffer());
}

LogicalResult LoadOp::verifySymbolUses(SymbolTableCollection &symbolTable) {
  TensorOp tensor = tensorOf(symbolTable, getBuffer());
  if (tensor && tensor.getRole() == Role::activation)
    return emitOpError() << "buffer holds activation @" << tensor.getSymName()
                         << ", which has no source to load from";
  return success();
}

LogicalResult CopyOp::verify() {
  if (failed(verifyBoxInBuffer(*this, "source", getSrc(), getLo(), getHi())))
    return failure();
  return verifyBoxInBuffer(*this, "dest", getDst(), getLo(), getHi());
}

LogicalResult SendOp::verify() {
  if (failed(verifyBoxInBuffer(*this, "sent", getBuffer(), getLo(), getHi())))
    return failure();
  if (getTagAttr().getInt() < 0)
    return emitOpError() << "tag must be >= 0, got " << getTagAttr().getInt();
  return verifyPeer(*this, getPeerAttr().getInt());
}

LogicalResult RecvOp::verify() {
  if (failed(
          verifyBoxInBuffer(*this, "received", getBuffer(), getLo(), getHi())))
    return failure();
  if (getTagAttr().getInt() < 0)
    return emitOpError() << "tag must be >= 0, got " << getTagAttr().getInt();
  return verifyPeer(*this, getPeerAttr().getInt());
}

//===----------------------------------------------------------------------===//
// Kernels
//===----------------------------------------------------------------------===//

/// Checks that a kernel's `what` #i (a buffer) holds `tensor` (its gradient
/// if `grad`). Scratch buffers are not checked: they have no tensor.
static LogicalResult verifyBinding(Operation *op, StringRef what, size_t i,
                                   Value buffer, FlatSymbolRefAttr tensor,
                                   bool grad) {
  AllocOp alloc = allocOf(buffer);
  if (!alloc || !alloc.getTensorAttr())
    return success();
  if (alloc.getTensorAttr() != tensor)
    return op->emitOpError() << what << " #" << i << " holds "
                             << alloc.getTensorAttr() << " but the op's "
                             << (what.contains("input") ? "operand" : "result")
                             << " #" << i << " is " << tensor;
  if (alloc.getGrad() != grad)
    return op->emitOpError()
           << what << " #" << i << " must hold "
           << (grad ? "the gradient" : "the value") << " of " << tensor
           << ", not " << (grad ? "its value" : "its gradient");
  return success();
}

static LogicalResult verifyBindings(Operation *op, StringRef what,
                                    ValueRange buffers, ArrayAttr tensors,
                                    bool grad) {
  for (auto [i, pair] : llvm::enumerate(
           llvm::zip(buffers, tensors.getAsRange<FlatSymbolRefAttr>())))
    if (failed(verifyBinding(op, what, i, std::get<0>(pair), std::get<1>(pair),
                             grad)))
      return failure();
  return success();
}

static LogicalResult verifyCount(Operation *op, StringRef what, size_t actual,
                                 GraphOp graphOp, StringRef of,
                                 size_t expected) {
  if (actual != expected)
    return op->emitOpError()
           << "has " << actual << " " << what << " but @"
           << graphOp.getSymName() << " has " << expected << " " << of;
  return success();
}

LogicalResult KernelOp::verify() {
  if (getStageAttr().getInt() < 0)
    return emitOpError() << "stage must be >= 0, got "
                         << getStageAttr().getInt();
  return success();
}

LogicalResult KernelOp::verifySymbolUses(SymbolTableCollection &symbolTable) {
  auto graphOp = lookup<GraphOp>(symbolTable, *this, getOpAttr());
  if (!graphOp)
    return emitOpError() << getOpAttr() << " does not name a plan.op";
  ArrayAttr operands = graphOp.getOperandsAttr(),
            results = graphOp.getResultsAttr();
  if (failed(verifyCount(*this, "inputs", getInputs().size(), graphOp,
                         "operands", operands.size())) ||
      failed(verifyCount(*this, "outputs", getOutputs().size(), graphOp,
                         "results", results.size())))
    return failure();
  if (failed(verifyBindings(*this, "input", getInputs(), operands, false)))
    return failure();
  return verifyBindings(*this, "output", getOutputs(), results, false);
}

LogicalResult KernelBackwardOp::verify() {
  if (getStageAttr().getInt() < 0)
    return emitOpError() << "stage must be >= 0, got "
                         << getStageAttr().getInt();
  size_t numTrue = llvm::count(getGradMask(), true);
  if (getInputGrads().size() != numTrue)
    return emitOpError() << "has " << getInputGrads().size()
                         << " input_grads but grad_mask has " << numTrue
                         << " true entries";
  if (std::optional<ArrayRef<bool>> overwrite = getOverwrite();
      overwrite && overwrite->size() != getInputGrads().size())
    return emitOpError() << "has " << overwrite->size()
                         << " overwrite entries for " << getInputGrads().size()
                         << " input_grads";
  return success();
}

LogicalResult
KernelBackwardOp::verifySymbolUses(SymbolTableCollection &symbolTable) {
  auto graphOp = lookup<GraphOp>(symbolTable, *this, getOpAttr());
  if (!graphOp)
    return emitOpError() << getOpAttr() << " does not name a plan.op";
  ArrayAttr operands = graphOp.getOperandsAttr(),
            results = graphOp.getResultsAttr();
  if (failed(verifyCount(*this, "grad_mask entries", getGradMask().size(),
                         graphOp, "operands", operands.size())) ||
      failed(verifyCount(*this, "inputs", getInputs().size(), graphOp,
                         "operands", operands.size())) ||
      failed(verifyCount(*this, "output_grads", getOutputGrads().size(),
                         graphOp, "results", results.size())))
    return failure();
  // Backward kernels that do not read the forward results get none.
  if (!getOutputs().empty() &&
      failed(verifyCount(*this, "outputs", getOutputs().size(), graphOp,
                         "results", results.size())))
    return failure();
  if (failed(verifyBindings(*this, "input", getInputs(), operands, false)) ||
      failed(verifyBindings(*this, "output", getOutputs(), results, false)) ||
      failed(verifyBindings(*this, "output_grad", getOutputGrads(), results,
                            true)))
    return failure();
  // input_grads[k] is the gradient of the operand of the k-th true entry.
  auto grads = getInputGrads();
  size_t k = 0;
  for (auto [i, needed] : llvm::enumerate(getGradMask())) {
    if (!needed || k >= grads.size()) // verify() reports a count mismatch
      continue;
    if (failed(verifyBinding(*this, "input_grad", i, grads[k++],
                             cast<FlatSymbolRefAttr>(operands[i]), true)))
      return failure();
  }
  return success();
}

//===----------------------------------------------------------------------===//
// plan.collective
//===----------------------------------------------------------------------===//

LogicalResult CollectiveOp::verify() {
  ArrayRef<int64_t> group = getGroup();
  if (group.empty())
    return emitOpError("group must not be empty");
  int64_t numRanks = numRanksOf(*this), rank = rankOf(*this);
  llvm::SmallBitVector members(numRanks);
  for (int64_t member : group) {
    if (member < 0 || member >= numRanks)
      return emitOpError() << "group " << formatList(group) << " names rank "
                           << member << ", out of range for a plan of "
                           << numRanks << " ranks";
    if (members.test(member))
      return emitOpError() << "group " << formatList(group) << " names rank "
                           << member << " twice";
    members.set(member);
  }
  if (!members.test(rank))
    return emitOpError() << "group " << formatList(group)
                         << " does not contain this program's rank " << rank;
  CollectiveKind kind = getKind();
  bool inPlace =
      kind == CollectiveKind::all_reduce || kind == CollectiveKind::broadcast;
  if (inPlace && getResult())
    return emitOpError() << stringifyCollectiveKind(kind)
                         << " works in place and takes no result buffer";
  if (!inPlace && !getResult())
    return emitOpError() << stringifyCollectiveKind(kind)
                         << " needs a result buffer";
  if (getReduction() != "sum" && getReduction() != "max")
    return emitOpError() << "reduction '" << getReduction()
                         << "' is not one of sum, max";
  int64_t root = getRootAttr().getInt();
  if (root < 0 || root >= static_cast<int64_t>(group.size()))
    return emitOpError() << "root " << root << " is not an index into group "
                         << formatList(group);
  int64_t axis = getAxisAttr().getInt();
  if (axis < 0)
    return emitOpError() << "axis must be >= 0, got " << axis;
  if (AllocOp alloc = allocOf(getBuffer()))
    if (!inPlace && axis >= static_cast<int64_t>(alloc.getLo().size()))
      return emitOpError() << "axis " << axis
                           << " is out of range for a buffer of rank "
                           << alloc.getLo().size();
  return success();
}

//===----------------------------------------------------------------------===//
// plan.update, plan.output
//===----------------------------------------------------------------------===//

LogicalResult UpdateOp::verify() {
  AllocOp weight = allocOf(getWeight()), grad = allocOf(getGrad());
  if (failed(verifyHoldsValue(*this, "weight buffer", getWeight())))
    return failure();
  if (grad && (!grad.getTensorAttr() || !grad.getGrad()))
    return emitOpError(
        "grad buffer must hold a gradient (plan.alloc ... grad)");
  if (!weight || !grad)
    return success();
  if (weight.getTensorAttr() != grad.getTensorAttr())
    return emitOpError() << "weight buffer holds " << weight.getTensorAttr()
                         << " but grad buffer holds the gradient of "
                         << grad.getTensorAttr();
  // The step is elementwise over the gradient's box: the weight's, or
  // (ZeRO) a shard of its rows, which alone is updated.
  ArrayRef<int64_t> wlo = weight.getLo(), whi = weight.getHi();
  ArrayRef<int64_t> glo = grad.getLo(), ghi = grad.getHi();
  bool whole = wlo == glo && whi == ghi;
  bool rows = !wlo.empty() && wlo.size() == glo.size() && glo[0] >= wlo[0] &&
              ghi[0] <= whi[0] && glo.drop_front() == wlo.drop_front() &&
              ghi.drop_front() == whi.drop_front();
  if (!whole && !rows)
    return emitOpError() << "weight buffer box " << formatList(wlo) << ".."
                         << formatList(whi) << " differs from grad buffer box "
                         << formatList(glo) << ".." << formatList(ghi)
                         << ", which is neither it nor a shard of its rows";
  return success();
}

LogicalResult UpdateOp::verifySymbolUses(SymbolTableCollection &symbolTable) {
  TensorOp tensor = tensorOf(symbolTable, getWeight());
  if (tensor && tensor.getRole() != Role::weight)
    return emitOpError() << "updates @" << tensor.getSymName() << ", a "
                         << stringifyRole(tensor.getRole())
                         << " tensor; only weights are trained";
  return success();
}

LogicalResult OutputOp::verify() {
  return verifyHoldsValue(*this, "buffer", getBuffer());
}

LogicalResult OutputOp::verifySymbolUses(SymbolTableCollection &symbolTable) {
  TensorOp tensor = tensorOf(symbolTable, getBuffer());
  if (!tensor)
    return success();
  if (!tensor.getIsOutput())
    return emitOpError() << "buffer holds @" << tensor.getSymName()
                         << ", which is not an output (is_output)";
  AllocOp alloc = allocOf(getBuffer());
  ArrayRef<int64_t> shape = tensor.getShape();
  if (llvm::any_of(alloc.getLo(), [](int64_t v) { return v != 0; }) ||
      alloc.getHi() != shape)
    return emitOpError() << "buffer holds box " << formatList(alloc.getLo())
                         << ".." << formatList(alloc.getHi()) << " of @"
                         << tensor.getSymName() << ", not the whole tensor "
                         << formatList(shape);
  return success();
}
