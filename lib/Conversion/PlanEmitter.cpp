//===- PlanEmitter.cpp - buffers, instructions, tensors -------------------===//
//
// The plan emitter's building blocks: buffers, transfers, exchanges and
// collectives on per-rank programs, and the plan's global tensors and ops.
//
//===----------------------------------------------------------------------===//

#include "PlanEmitter.h"

namespace ppc {
namespace conversion {

std::vector<std::pair<int64_t, int64_t>> boxKey(const Box &box) {
  std::vector<std::pair<int64_t, int64_t>> key;
  for (const Range &r : box)
    key.emplace_back(r.lo, r.hi);
  return key;
}

std::vector<int64_t> shapeOf(Value value) {
  auto type = cast<RankedTensorType>(value.getType());
  return {type.getShape().begin(), type.getShape().end()};
}

bool isFloat(Value value) {
  return isa<FloatType>(getElementTypeOrSelf(value.getType()));
}

std::optional<int64_t> partitionHolding(const std::vector<Box> &boxes,
                                        const std::vector<int64_t> &devices,
                                        int64_t rank, const Box &box) {
  for (size_t q = 0; q < boxes.size(); ++q)
    if (devices[q] == rank && boxes[q] == box)
      return static_cast<int64_t>(q);
  return std::nullopt;
}

std::optional<unsigned> tilingAxis(const std::vector<Box> &pieces,
                                   const Box &whole) {
  for (unsigned axis = 0; axis < whole.size(); ++axis) {
    int64_t at = whole[axis].lo;
    bool tiles = true;
    for (const Box &piece : pieces) {
      for (unsigned d = 0; d < whole.size() && tiles; ++d)
        tiles = d == axis ? piece[d].lo == at : piece[d] == whole[d];
      if (!tiles)
        break;
      at = piece[axis].hi;
    }
    if (tiles && at == whole[axis].hi)
      return axis;
  }
  return std::nullopt;
}

bool PlanEmitter::ringCrossesPiecesLinks(
    const std::vector<int64_t> &ranks) const {
  const Machine &machine = *parts.machine;
  for (int64_t a : ranks)
    for (int64_t b : ranks)
      if (a != b && (machine.getNode(a) != machine.getNode(b) ||
                     machine.effectiveLink(a, b).kind !=
                         machine.effectiveLink(ranks[0], ranks[1]).kind))
        return false;
  return true;
}

OpBuilder &PlanEmitter::at(int64_t rank) { return builders[rank]; }

DenseI64ArrayAttr PlanEmitter::loAttr(const Box &box) {
  SmallVector<int64_t> lo;
  for (const Range &r : box)
    lo.push_back(r.lo);
  return DenseI64ArrayAttr::get(context, lo);
}

DenseI64ArrayAttr PlanEmitter::hiAttr(const Box &box) {
  SmallVector<int64_t> hi;
  for (const Range &r : box)
    hi.push_back(std::max(r.lo, r.hi));
  return DenseI64ArrayAttr::get(context, hi);
}

Value PlanEmitter::alloc(int64_t rank, StringRef tensor, const Box &box,
                         bool grad, bool staging) {
  Value buffer = plan::AllocOp::create(
      at(rank), loc, plan::BufferType::get(context),
      FlatSymbolRefAttr::get(context, tensor), loAttr(box), hiAttr(box),
      grad ? UnitAttr::get(context) : UnitAttr(),
      staging ? UnitAttr::get(context) : UnitAttr(), UnitAttr(), Value());
  return buffer;
}

Value PlanEmitter::allocScratch(int64_t rank,
                                const std::vector<int64_t> &shape) {
  Box box;
  for (int64_t size : shape)
    box.push_back({0, size});
  Value buffer = plan::AllocOp::create(
      at(rank), loc, plan::BufferType::get(context), FlatSymbolRefAttr(),
      loAttr(box), hiAttr(box), UnitAttr(), UnitAttr(), UnitAttr(), Value());
  keepForStep(rank, buffer);
  return buffer;
}

void PlanEmitter::transfer(int64_t fromRank, Value from, int64_t toRank,
                           Value to, const Box &box, bool accumulate) {
  UnitAttr acc = accumulate ? UnitAttr::get(context) : UnitAttr();
  int64_t tag = -1; // a local copy
  if (fromRank != toRank) {
    // MPI guarantees tags up to 32767; reusing one is safe because messages
    // between a pair of ranks are matched in order (receipts keep the
    // order of their sends).
    tag = nextTag++ % 32768;
    plan::SendOp::create(at(fromRank), loc, from, loAttr(box), hiAttr(box),
                         builder.getI64IntegerAttr(toRank),
                         builder.getI64IntegerAttr(tag));
  }
  auto receive = [this, acc, here = loc, fromRank, from, toRank, to, box,
                  tag]() {
    if (tag < 0)
      plan::CopyOp::create(at(toRank), here, from, to, loAttr(box), hiAttr(box),
                           acc);
    else
      plan::RecvOp::create(at(toRank), here, to, loAttr(box), hiAttr(box),
                           builder.getI64IntegerAttr(fromRank),
                           builder.getI64IntegerAttr(tag), acc);
  };
  if (batchingReceipts)
    pendingReceipts.push_back(std::move(receive));
  else
    receive();
}

void PlanEmitter::batchReceipts() {
  assert(!batchingReceipts && "exchanges do not nest");
  batchingReceipts = true;
}

void PlanEmitter::flushReceipts() {
  batchingReceipts = false;
  for (std::function<void()> &emitCollective : pendingCollectives)
    emitCollective();
  pendingCollectives.clear();
  for (std::function<void()> &receive : pendingReceipts)
    receive();
  pendingReceipts.clear();
}

void PlanEmitter::allReduce(const std::vector<int64_t> &ranks,
                            const std::vector<Value> &buffers, bool max) {
  if (ranks.size() < 2)
    return;
  auto group = DenseI64ArrayAttr::get(context, ranks);
  for (auto [rank, buffer] : llvm::zip(ranks, buffers))
    plan::CollectiveOp::create(
        at(rank), loc,
        plan::CollectiveKindAttr::get(context,
                                      plan::CollectiveKind::all_reduce),
        group, buffer, Value(), builder.getStringAttr(max ? "max" : "sum"),
        builder.getI64IntegerAttr(0), builder.getI64IntegerAttr(0));
}

void PlanEmitter::phase(plan::Phase value) {
  auto attr = plan::PhaseAttr::get(context, value);
  if (phaseRanks.empty())
    for (OpBuilder &b : builders)
      plan::PhaseOp::create(b, loc, attr);
  for (int64_t rank : phaseRanks)
    plan::PhaseOp::create(at(rank), loc, attr);
}

void PlanEmitter::collective(plan::CollectiveKind kind,
                             const std::vector<int64_t> &ranks,
                             const std::vector<Value> &buffers,
                             const std::vector<Value> &results, int64_t axis) {
  auto group = DenseI64ArrayAttr::get(context, ranks);
  for (size_t j = 0; j < ranks.size(); ++j)
    plan::CollectiveOp::create(
        at(ranks[j]), loc, plan::CollectiveKindAttr::get(context, kind), group,
        buffers[j], results[j], builder.getStringAttr("sum"),
        builder.getI64IntegerAttr(0), builder.getI64IntegerAttr(axis));
}

//===----------------------------------------------------------------------===//
// Tensors and graph ops
//===----------------------------------------------------------------------===//

plan::Init PlanEmitter::weightInit(WeightOp weight, double &bound) {
  bound = 0;
  if (weight.getValue())
    return plan::Init::data;
  // What the ops reading it say (a normalization's scale and shift), else
  // every vector (biases) at zero and the rest uniform over their fan-in.
  std::vector<int64_t> shape = shapeOf(weight.getResult());
  std::optional<std::vector<int64_t>> fanInDims;
  for (OpOperand &use : weight.getResult().getUses()) {
    auto reader = dyn_cast<ParallelizableOpInterface>(use.getOwner());
    if (!reader)
      continue;
    std::optional<OperandInit> init =
        reader.getOperandInit(use.getOperandNumber());
    if (!init)
      continue;
    if (init->kind == OperandInit::Kind::Ones)
      return plan::Init::ones;
    if (init->kind == OperandInit::Kind::Zeros)
      return plan::Init::zeros;
    if (!init->fanInDims.empty())
      fanInDims = init->fanInDims;
  }
  if (shape.size() < 2)
    return plan::Init::zeros;
  int64_t fanIn = 1;
  if (fanInDims) {
    for (int64_t d : *fanInDims)
      fanIn *= shape[d];
  } else {
    for (size_t d = 1; d < shape.size(); ++d)
      fanIn *= shape[d];
  }
  bound = 1.0 / std::sqrt(static_cast<double>(std::max<int64_t>(1, fanIn)));
  return plan::Init::uniform;
}

/// Synthetic integer inputs must be valid class labels or indices: follow
/// the value through ops that forward values to an op that bounds them.
int64_t PlanEmitter::intMaxOf(Value value) {
  SmallVector<Value> work{value};
  while (!work.empty()) {
    Value v = work.pop_back_val();
    for (OpOperand &use : v.getUses()) {
      Operation *user = use.getOwner();
      auto reader = dyn_cast<ParallelizableOpInterface>(user);
      if (reader)
        if (std::optional<int64_t> bound =
                reader.getIndexBound(use.getOperandNumber()))
          return *bound;
      if (isParallelOp(user) || (reader && reader.forwardsValues()))
        for (Value result : user->getResults())
          work.push_back(result);
    }
  }
  return 2;
}

LogicalResult PlanEmitter::emitTensors() {
  OpBuilder &b = builder;
  int64_t count = 0;
  auto symbol = [&](StringRef prefix) {
    return (prefix + Twine(count++)).str();
  };
  auto create = [&](Value value, plan::Role role, StringRef name,
                    plan::Init init, double bound, ElementsAttr data,
                    int64_t intMax, StringRef prefix) {
    std::string sym = symbol(prefix);
    std::vector<int64_t> shape = shapeOf(value);
    auto op = plan::TensorOp::create(
        b, loc, StringAttr::get(context, sym),
        plan::RoleAttr::get(context, role),
        DenseI64ArrayAttr::get(context, shape),
        TypeAttr::get(getElementTypeOrSelf(value.getType())),
        plan::InitAttr::get(context, init), b.getF64FloatAttr(bound), data,
        b.getI64IntegerAttr(intMax), UnitAttr(),
        name.empty() ? StringAttr() : b.getStringAttr(name));
    (void)op;
    tensorOf[value] = sym;
    return sym;
  };

  for (BlockArgument arg : func.getArguments()) {
    std::string name = ("arg" + Twine(arg.getArgNumber())).str();
    if (auto attr =
            func.getArgAttrOfType<StringAttr>(arg.getArgNumber(), "ppc.name"))
      name = attr.getValue().str();
    bool integer = !isFloat(arg);
    create(arg, plan::Role::input, name, plan::Init::none, 0, {},
           integer ? intMaxOf(arg) : 0, "in");
  }
  for (Operation &op : func.getBody().front()) {
    if (auto weight = dyn_cast<WeightOp>(op)) {
      double bound = 0;
      plan::Init init = weightInit(weight, bound);
      std::string sym = create(
          weight.getResult(),
          weight.getFrozen() ? plan::Role::frozen : plan::Role::weight,
          weight.getName(), init, bound,
          weight.getValue() ? *weight.getValue() : ElementsAttr(), 0, "w");
      if (!weight.getFrozen())
        trainable.insert(sym);
      continue;
    }
    if (auto constant = dyn_cast<graph::ConstantOp>(op)) {
      create(constant.getResult(), plan::Role::constant, "", plan::Init::data,
             0, constant.getValue(), 0, "c");
      continue;
    }
    auto it = parts.indexOf.find(&op);
    if (it == parts.indexOf.end())
      continue;
    for (OpResult result : op.getResults())
      create(result, plan::Role::activation, parts.graph.ops[it->second].name,
             plan::Init::none, 0, {}, 0, "t");
  }
  // Returned values are the plan's outputs.
  auto ret = cast<func::ReturnOp>(func.getBody().front().getTerminator());
  for (Value value : ret.getOperands()) {
    Value stripped = stripParallelOps(value);
    auto it = tensorOf.find(stripped);
    if (it == tensorOf.end() || !parts.producerOf(stripped))
      return ret.emitError("the plan can only return results of graph ops");
    auto tensor = planOp.lookupSymbol<plan::TensorOp>(it->second);
    tensor.setIsOutput(true);
  }
  return success();
}

LogicalResult PlanEmitter::emitGraphOps() {
  for (auto [k, op] : llvm::enumerate(parts.ops)) {
    SmallVector<Attribute> operandSyms, resultSyms;
    SmallVector<bool> needsGrad;
    for (Value operand : op->getOperands()) {
      Value stripped = stripParallelOps(operand);
      auto it = tensorOf.find(stripped);
      if (it == tensorOf.end())
        return op->emitError("cannot lower an operand that is not a function "
                             "argument, weight, constant or graph op result");
      operandSyms.push_back(FlatSymbolRefAttr::get(context, it->second));
      bool grad =
          isFloat(stripped) && (parts.producerOf(stripped).has_value() ||
                                trainable.count(it->second));
      needsGrad.push_back(training && grad);
    }
    for (Value result : op->getResults())
      resultSyms.push_back(FlatSymbolRefAttr::get(context, tensorOf[result]));
    // The kernels read the inherent attributes by their ODS names.
    NamedAttrList attrs;
    for (NamedAttribute attr : op->getAttrDictionary())
      if (!attr.getName().getValue().starts_with("ppc."))
        attrs.push_back(attr);
    if (auto compute = dyn_cast<ParallelizableOpInterface>(op))
      compute.addKernelAttributes(attrs);
    std::string sym = ("op" + Twine(k)).str();
    opSymbols.push_back(sym);
    plan::GraphOp::create(
        builder, loc, StringAttr::get(context, sym),
        StringAttr::get(context, op->getName().getStringRef()),
        ArrayAttr::get(context, operandSyms),
        ArrayAttr::get(context, resultSyms), attrs.getDictionary(context),
        DenseBoolArrayAttr::get(context, needsGrad),
        StringAttr::get(context, parts.graph.ops[k].name),
        parts.graph.ops[k].space.flatView ? UnitAttr::get(context)
                                          : UnitAttr());
  }
  return success();
}

} // namespace conversion
} // namespace ppc
