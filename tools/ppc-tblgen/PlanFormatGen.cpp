//===- PlanFormatGen.cpp - plan.proto and its conversions from PlanOps.td -===//
//
// The plan file's instructions are defined once, as the plan dialect's
// instruction ops (Plan_InstrOp in PlanOps.td). From them this backend
// writes:
//  - -gen-plan-proto: plan.proto, the hand-written part (--proto-base) with
//    the `Instruction` message appended: one message per op, the `kind`
//    oneof numbered by each op's `protoField`, and the enums the ops use;
//  - -gen-plan-conversions: the MLIR <-> protobuf conversion of each op, as
//    two member functions lib/Target/PlanExport.cpp includes in its
//    exporter and importer;
//  - -gen-plan-buffers: the buffer ids of each derived message, which the
//    runtime's reader checks and its executor tracks.
//
// An op's message is derived from its arguments, in order, field numbers
// from 1: a buffer operand is an int32 buffer id (variadic: repeated), a
// `lo` followed by `hi` (DenseI64ArrayAttr) one `Box box`, I64Attr an int32
// (range-checked on export), F32Attr a float, UnitAttr a bool, an enum
// attribute the enum, the FlatSymbolRefAttr `op` the graph op's id. An op
// whose message does not follow these rules (an alloc's nested buffer, a
// backward kernel's -1 placeholders) gives its message text in
// `protoMessage` and its conversion by hand (export<Name> and
// import<Name> in the exporter and importer). `protoField` numbers the op in
// the `kind` oneof; `protoName` renames its message.
//
//===----------------------------------------------------------------------===//

#include "mlir/TableGen/Argument.h"
#include "mlir/TableGen/Attribute.h"
#include "mlir/TableGen/EnumInfo.h"
#include "mlir/TableGen/GenInfo.h"
#include "mlir/TableGen/Operator.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/TableGen/Error.h"
#include "llvm/TableGen/Record.h"

#include <algorithm>
#include <map>

using namespace mlir;
using namespace mlir::tblgen;
using llvm::Record;
using llvm::RecordKeeper;
using llvm::StringRef;

static llvm::cl::opt<std::string>
    protoBase("proto-base",
              llvm::cl::desc("the hand-written part of plan.proto, which "
                             "-gen-plan-proto copies before the Instruction "
                             "message"),
              llvm::cl::value_desc("file"));

namespace {

/// "kernel_backward" -> "KernelBackward".
std::string camel(StringRef snake) {
  return llvm::convertToCamelFromSnakeCase(snake, /*capitalizeFirst=*/true);
}

/// "CollectiveKind" -> "COLLECTIVE_KIND", "all_reduce" -> "ALL_REDUCE".
std::string upperSnake(StringRef name) {
  std::string out;
  for (size_t i = 0; i < name.size(); ++i) {
    char c = name[i];
    if (llvm::isUpper(c) && i > 0 && name[i - 1] != '_')
      out += '_';
    out += llvm::toUpper(c);
  }
  return out;
}

/// One field of a derived message.
struct Field {
  enum Kind { Buffer, Buffers, Box, Int32, Float, Bool, Enum, OpRef } kind;
  std::string name;   ///< the proto field's (and the argument's) name
  std::string getter; ///< the op's accessor
  std::string enumName;
  int number = 0;
};

/// An instruction op: its oneof field, message name, and fields (empty for
/// a hand-written message).
struct Instruction {
  const Record *def;
  std::string mnemonic, message, cppClass;
  int protoField;
  std::string customMessage;
  std::vector<Field> fields;
  bool custom() const { return !customMessage.empty(); }
};

bool isBufferType(const NamedTypeConstraint &operand) {
  return operand.constraint.getDefName() == "Plan_BufferType";
}

/// The fields of `op`'s derived message; a fatal error names the argument
/// the rules do not cover.
std::vector<Field> deriveFields(const Operator &op) {
  std::vector<Field> fields;
  int number = 0;
  if (op.getNumResults() != 0)
    llvm::PrintFatalError(op.getLoc(),
                          op.getOperationName() +
                              " has results: give its protoMessage and "
                              "convert it by hand");
  for (int i = 0, e = op.getNumArgs(); i < e; ++i) {
    StringRef name = op.getArgName(i);
    Field f{Field::Int32, name.str(), op.getGetterName(name), "", ++number};
    Argument arg = op.getArg(i);
    if (auto *operand = llvm::dyn_cast<NamedTypeConstraint *>(arg)) {
      if (!isBufferType(*operand) || operand->isOptional())
        llvm::PrintFatalError(op.getLoc(),
                              op.getOperationName() + ": operand '" + name +
                                  "' is not a buffer or a list of them");
      f.kind = operand->isVariadic() ? Field::Buffers : Field::Buffer;
      fields.push_back(f);
      continue;
    }
    auto *named = llvm::dyn_cast<NamedAttribute *>(arg);
    if (!named)
      llvm::PrintFatalError(op.getLoc(), op.getOperationName() +
                                             ": property '" + name +
                                             "' has no plan file field");
    Attribute attr = named->attr;
    StringRef kind = attr.getBaseAttr().getAttrDefName();
    if (name == "lo" && kind == "DenseI64ArrayAttr" && i + 1 < e &&
        op.getArgName(i + 1) == "hi") {
      f.kind = Field::Box;
      f.name = "box";
      fields.push_back(f);
      ++i;
      continue;
    }
    // A unit attribute is optional by nature: present or not.
    if (attr.isOptional() && kind != "UnitAttr")
      llvm::PrintFatalError(op.getLoc(), op.getOperationName() +
                                             ": optional attribute '" + name +
                                             "' has no derived field");
    if (attr.getBaseAttr().isEnumAttr()) {
      f.kind = Field::Enum;
      f.enumName =
          EnumInfo(attr.getBaseAttr().getDef()).getEnumClassName().str();
    } else if (kind == "I64Attr") {
      f.kind = Field::Int32;
    } else if (kind == "F32Attr") {
      f.kind = Field::Float;
    } else if (kind == "UnitAttr") {
      f.kind = Field::Bool;
    } else if (kind == "FlatSymbolRefAttr" && name == "op") {
      f.kind = Field::OpRef;
    } else {
      llvm::PrintFatalError(op.getLoc(), op.getOperationName() +
                                             ": attribute '" + name + "' (" +
                                             kind + ") has no derived field");
    }
    fields.push_back(f);
  }
  return fields;
}

std::vector<Instruction> instructions(const RecordKeeper &records) {
  std::vector<Instruction> out;
  std::map<int, std::string> numbers; // protoField -> mnemonic
  for (const Record *def : records.getAllDerivedDefinitions("Plan_InstrOp")) {
    Operator op(def);
    Instruction in;
    in.def = def;
    in.mnemonic = def->getValueAsString("opName").str();
    in.message = def->getValueAsString("protoName").str();
    if (in.message.empty())
      in.message = camel(in.mnemonic);
    in.cppClass = op.getQualCppClassName();
    in.protoField = static_cast<int>(def->getValueAsInt("protoField"));
    in.customMessage =
        def->getValueAsString("protoMessage").ltrim("\r\n").rtrim().str();
    if (in.protoField <= 0)
      llvm::PrintFatalError(def->getLoc(),
                            "'" + in.mnemonic + "' needs a protoField > 0");
    auto [taken, fresh] = numbers.try_emplace(in.protoField, in.mnemonic);
    if (!fresh)
      llvm::PrintFatalError(def->getLoc(),
                            "'" + in.mnemonic + "' has protoField " +
                                std::to_string(in.protoField) + ", as '" +
                                taken->second + "' has");
    if (!in.custom())
      in.fields = deriveFields(op);
    out.push_back(std::move(in));
  }
  std::sort(out.begin(), out.end(), [](const auto &a, const auto &b) {
    return a.protoField < b.protoField;
  });
  return out;
}

/// The enums the ops' arguments use (custom ones too: their messages may
/// name them), by class name.
std::map<std::string, const Record *> usedEnums(const RecordKeeper &records) {
  std::map<std::string, const Record *> enums;
  for (const Record *def : records.getAllDerivedDefinitions("Plan_InstrOp")) {
    Operator op(def);
    for (int i = 0, e = op.getNumArgs(); i < e; ++i)
      if (auto *named = llvm::dyn_cast<NamedAttribute *>(op.getArg(i)))
        if (named->attr.getBaseAttr().isEnumAttr()) {
          const Record &enumDef = named->attr.getBaseAttr().getDef();
          enums[EnumInfo(enumDef).getEnumClassName().str()] = &enumDef;
        }
  }
  return enums;
}

const char *protoType(const Field &f) {
  switch (f.kind) {
  case Field::Buffer:
  case Field::Int32:
  case Field::OpRef:
    return "int32";
  case Field::Buffers:
    return "repeated int32";
  case Field::Box:
    return "Box";
  case Field::Float:
    return "float";
  case Field::Bool:
    return "bool";
  case Field::Enum:
    return nullptr;
  }
  return nullptr;
}

bool emitProto(const RecordKeeper &records, llvm::raw_ostream &os) {
  if (!protoBase.empty()) {
    auto base = llvm::MemoryBuffer::getFile(protoBase);
    if (!base) {
      llvm::errs() << "ppc-tblgen: cannot read " << protoBase << ": "
                   << base.getError().message() << "\n";
      return true;
    }
    os << (*base)->getBuffer();
  }
  os << "\n// Generated by ppc-tblgen -gen-plan-proto from the plan dialect's\n"
        "// instruction ops (include/ppc/Dialect/Plan/PlanOps.td): edit "
        "them, not this.\n";
  os << "message Instruction {\n";
  for (const auto &[name, def] : usedEnums(records)) {
    EnumInfo info(def);
    os << "  enum " << name << " {\n";
    os << "    " << upperSnake(name) << "_UNSPECIFIED = 0;\n";
    for (const EnumCase &c : info.getAllCases())
      os << "    " << upperSnake(c.getSymbol()) << " = " << c.getValue()
         << ";\n";
    os << "  }\n";
  }
  std::vector<Instruction> all = instructions(records);
  for (const Instruction &in : all) {
    StringRef summary = in.def->getValueAsString("summary");
    if (!summary.empty())
      os << "  // " << summary << " (plan." << in.mnemonic << ").\n";
    if (in.custom()) {
      // Re-indented: the text's common indentation becomes two spaces.
      SmallVector<StringRef> lines;
      StringRef(in.customMessage).split(lines, '\n');
      size_t indent = StringRef::npos;
      for (StringRef line : lines)
        if (!line.trim().empty())
          indent = std::min(indent, line.size() - line.ltrim().size());
      for (StringRef line : lines)
        os << "  " << line.drop_front(std::min(indent, line.size())).rtrim()
           << "\n";
      continue;
    }
    os << "  message " << in.message << " {";
    if (in.fields.empty()) {
      os << "}\n";
      continue;
    }
    os << "\n";
    for (const Field &f : in.fields) {
      os << "    ";
      if (f.kind == Field::Enum)
        os << f.enumName;
      else
        os << protoType(f);
      os << " " << f.name << " = " << f.number << ";\n";
    }
    os << "  }\n";
  }
  os << "\n  oneof kind {\n";
  for (const Instruction &in : all)
    os << "    " << in.message << " " << in.mnemonic << " = " << in.protoField
       << ";\n";
  os << "  }\n}\n";
  return false;
}

/// The exporter's and the importer's conversion of every instruction; see
/// lib/Target/PlanExport.cpp for the helpers they call.
bool emitConversions(const RecordKeeper &records, llvm::raw_ostream &os) {
  std::vector<Instruction> all = instructions(records);
  os << "// Generated by ppc-tblgen -gen-plan-conversions from PlanOps.td.\n";
  os << "#ifdef PPC_PLAN_EXPORT_INSTRUCTION\n"
        "#undef PPC_PLAN_EXPORT_INSTRUCTION\n"
        "/// Writes instruction op `op` into `out`; failure after an error.\n"
        "::mlir::LogicalResult exportInstruction(::mlir::Operation *op,\n"
        "    ::ppc::planfile::Instruction &out) {\n";
  for (const Instruction &in : all) {
    os << "  if (auto typed = ::llvm::dyn_cast<" << in.cppClass << ">(op)) {\n";
    if (in.custom()) {
      os << "    return export" << camel(in.mnemonic) << "(typed, *out.mutable_"
         << in.mnemonic << "());\n  }\n";
      continue;
    }
    os << "    auto &m = *out.mutable_" << in.mnemonic << "();\n";
    os << "    (void)m;\n";
    for (const Field &f : in.fields) {
      std::string attr = f.getter + "Attr()";
      switch (f.kind) {
      case Field::Buffer:
        os << "    if (::mlir::FailureOr<int32_t> v = bufferId(op, typed."
           << f.getter << "()); ::mlir::succeeded(v))\n      m.set_" << f.name
           << "(*v);\n    else\n      return ::mlir::failure();\n";
        break;
      case Field::Buffers:
        os << "    if (::mlir::failed(addBuffers(op, typed." << f.getter
           << "(), *m.mutable_" << f.name
           << "())))\n      return ::mlir::failure();\n";
        break;
      case Field::Box:
        os << "    setBox(*m.mutable_box(), typed.getLo(), typed.getHi());\n";
        break;
      case Field::Int32:
        os << "    if (::mlir::FailureOr<int32_t> v = toInt32(op, \"" << f.name
           << "\", typed." << attr << ".getInt()); ::mlir::succeeded(v))\n"
           << "      m.set_" << f.name
           << "(*v);\n    else\n      return ::mlir::failure();\n";
        break;
      case Field::Float:
        os << "    m.set_" << f.name << "(typed." << f.getter
           << "().convertToFloat());\n";
        break;
      case Field::Bool:
        os << "    m.set_" << f.name << "(typed." << f.getter << "());\n";
        break;
      case Field::Enum:
        os << "    m.set_" << f.name
           << "(static_cast<::ppc::planfile::Instruction::" << f.enumName
           << ">(typed." << f.getter << "()));\n";
        break;
      case Field::OpRef:
        os << "    if (::mlir::FailureOr<int32_t> v = opId(op, typed." << attr
           << "); ::mlir::succeeded(v))\n      m.set_" << f.name
           << "(*v);\n    else\n      return ::mlir::failure();\n";
        break;
      }
    }
    os << "    return ::mlir::success();\n  }\n";
  }
  os << "  return op->emitOpError(\"is not a plan instruction\");\n}\n"
        "#endif // PPC_PLAN_EXPORT_INSTRUCTION\n\n";

  os << "#ifdef PPC_PLAN_IMPORT_INSTRUCTION\n"
        "#undef PPC_PLAN_IMPORT_INSTRUCTION\n"
        "/// Builds the op of `instr` at the builder's insertion point;\n"
        "/// failure after an error.\n"
        "::mlir::LogicalResult importInstructionOp(\n"
        "    const ::ppc::planfile::Instruction &instr) {\n"
        "  using I = ::ppc::planfile::Instruction;\n"
        "  switch (instr.kind_case()) {\n";
  for (const Instruction &in : all) {
    os << "  case I::k" << camel(in.mnemonic) << ": {\n";
    if (in.custom()) {
      os << "    return import" << camel(in.mnemonic) << "(instr."
         << in.mnemonic << "());\n  }\n";
      continue;
    }
    os << "    const I::" << in.message << " &m = instr." << in.mnemonic
       << "();\n    (void)m;\n";
    std::vector<std::string> args;
    for (const Field &f : in.fields) {
      std::string var = "arg_" + f.name;
      switch (f.kind) {
      case Field::Buffer:
        os << "    ::mlir::FailureOr<::mlir::Value> " << var << " = buffer(m."
           << f.name << "());\n    if (::mlir::failed(" << var
           << "))\n      return ::mlir::failure();\n";
        args.push_back("*" + var);
        break;
      case Field::Buffers:
        os << "    auto " << var << " = bufferList(m." << f.name
           << "());\n    if (::mlir::failed(" << var
           << "))\n      return ::mlir::failure();\n";
        args.push_back("*" + var);
        break;
      case Field::Box:
        args.push_back("ints(m.box().lo())");
        args.push_back("ints(m.box().hi())");
        break;
      case Field::Int32:
        args.push_back("builder.getI64IntegerAttr(m." + f.name + "())");
        break;
      case Field::Float:
        args.push_back("builder.getF32FloatAttr(m." + f.name + "())");
        break;
      case Field::Bool:
        args.push_back("m." + f.name +
                       "() ? builder.getUnitAttr() : ::mlir::UnitAttr()");
        break;
      case Field::Enum:
        os << "    auto " << var << " = ::ppc::plan::symbolize" << f.enumName
           << "(static_cast<uint32_t>(m." << f.name << "()));\n    if (!" << var
           << ")\n      return error() << \"unknown " << f.name
           << " \" << static_cast<int>(m." << f.name << "());\n";
        args.push_back("*" + var);
        break;
      case Field::OpRef:
        os << "    ::mlir::FailureOr<::mlir::FlatSymbolRefAttr> " << var
           << " = opRef(m." << f.name << "());\n    if (::mlir::failed(" << var
           << "))\n      return ::mlir::failure();\n";
        args.push_back("*" + var);
        break;
      }
    }
    os << "    " << in.cppClass << "::create(builder, loc";
    for (const std::string &a : args)
      os << ", " << a;
    os << ");\n    return ::mlir::success();\n  }\n";
  }
  os << "  case I::KIND_NOT_SET:\n    break;\n  }\n"
        "  return error() << \"instruction without a kind\";\n}\n"
        "#endif // PPC_PLAN_IMPORT_INSTRUCTION\n";
  return false;
}

/// For the runtime (MLIR-free): the buffer ids of each derived message.
bool emitBuffers(const RecordKeeper &records, llvm::raw_ostream &os) {
  os << "// Generated by ppc-tblgen -gen-plan-buffers from PlanOps.td.\n"
        "/// Calls fn(id) for every buffer id of `instr` (its buffer\n"
        "/// fields, in order) and returns true when its message is derived\n"
        "/// from its op; false for a hand-written message (alloc,\n"
        "/// kernel_backward, collective: the caller lists those) or none.\n"
        "template <typename Fn>\n"
        "bool forEachDerivedBuffer(const ::ppc::planfile::Instruction &instr,\n"
        "                          Fn &&fn) {\n"
        "  using I = ::ppc::planfile::Instruction;\n"
        "  switch (instr.kind_case()) {\n";
  for (const Instruction &in : instructions(records)) {
    if (in.custom())
      continue;
    os << "  case I::k" << camel(in.mnemonic) << ":\n";
    for (const Field &f : in.fields) {
      if (f.kind == Field::Buffer)
        os << "    fn(instr." << in.mnemonic << "()." << f.name << "());\n";
      else if (f.kind == Field::Buffers)
        os << "    for (int32_t id : instr." << in.mnemonic << "()." << f.name
           << "())\n      fn(id);\n";
    }
    os << "    return true;\n";
  }
  os << "  default:\n    return false;\n  }\n}\n";
  return false;
}

GenRegistration
    genBuffers("gen-plan-buffers",
               "the buffer ids of each derived instruction message, for the "
               "runtime",
               emitBuffers);
GenRegistration
    genProto("gen-plan-proto",
             "plan.proto: its hand-written part and the Instruction message",
             emitProto);
GenRegistration
    genConversions("gen-plan-conversions",
                   "the plan file's instructions converted to and from the "
                   "plan dialect's ops",
                   emitConversions);

} // namespace
