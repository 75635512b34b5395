//===- PlanIO.cpp - read and write plan files -----------------------------===//

#include "ppc/Runtime/PlanIO.h"

#include <google/protobuf/io/tokenizer.h>
#include <google/protobuf/stubs/logging.h>
#include <google/protobuf/text_format.h>

#include <cstdio>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <tuple>

namespace ppc::runtime {

using namespace ppc::planfile;

namespace {
#include "ppc/Runtime/PlanBuffers.inc"
} // namespace

absl::Status writePlanFile(const Plan &plan, const std::string &path,
                           bool text) {
  std::string bytes;
  if (text) {
    if (!google::protobuf::TextFormat::PrintToString(plan, &bytes))
      return absl::InvalidArgumentError("cannot print the plan as text");
  } else if (!plan.SerializeToString(&bytes)) {
    return absl::InvalidArgumentError("cannot serialize the plan");
  }
  std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out)
      return absl::InvalidArgumentError("cannot open '" + tmp +
                                        "' for writing");
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    out.close();
    if (!out)
      return absl::InvalidArgumentError("cannot write '" + tmp + "'");
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0)
    return absl::InvalidArgumentError("cannot rename '" + tmp + "' to '" +
                                      path + "'");
  return absl::OkStatus();
}

absl::Status readPlanFile(const std::string &path, Plan &plan) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    return absl::InvalidArgumentError("cannot open plan file '" + path + "'");
  std::stringstream buffer;
  buffer << in.rdbuf();
  return parsePlan(buffer.str(), path, plan);
}

absl::Status parsePlan(const std::string &bytes, const std::string &path,
                       Plan &plan) {
  if (bytes.empty())
    return absl::InvalidArgumentError("plan file '" + path + "' is empty");
  // Text plans start with a field name ("version: 1"); binary ones with the
  // tag byte of field 1 (0x08).
  if (bytes[0] == 0x08) {
    if (!plan.ParseFromString(bytes))
      return absl::InvalidArgumentError(
          "'" + path + "' is not a ppc plan file (protobuf parse failed)");
  } else {
    // Keep the text parser's first error for our message, not its log.
    struct FirstError : google::protobuf::io::ErrorCollector {
      std::string text;
      void AddError(int line, int column, const std::string &message) override {
        if (text.empty())
          text = std::to_string(line + 1) + ":" + std::to_string(column + 1) +
                 ": " + message;
      }
    } error;
    google::protobuf::TextFormat::Parser parser;
    parser.RecordErrorsTo(&error);
    if (!parser.ParseFromString(bytes, &plan))
      return absl::InvalidArgumentError(
          "'" + path + "' is not a ppc plan file (" + error.text + ")");
    // The text parser takes strings that are not UTF-8 ("\377", raw bytes),
    // which proto3 forbids and the binary parser rejects: such a plan would
    // not survive being written back (found by ppc-plan-fuzzer).
    google::protobuf::LogSilencer quiet;
    std::string binary;
    Plan check;
    if (!plan.SerializeToString(&binary) || !check.ParseFromString(binary))
      return absl::InvalidArgumentError(
          "'" + path +
          "' is not a ppc plan file (a string in it is not valid UTF-8)");
  }
  if (plan.version() != kPlanVersion)
    return absl::InvalidArgumentError(
        "plan file '" + path + "' has format version " +
        std::to_string(plan.version()) + " but this ppc-run reads version " +
        std::to_string(kPlanVersion) + "; regenerate it with ppc-opt");
  if (absl::Status err = validatePlan(plan); !err.ok())
    return annotate(err, "plan file '" + path + "' is inconsistent");
  return absl::OkStatus();
}

int64_t checkedElementCount(const std::vector<int64_t> &shape) {
  int64_t n = 1;
  for (int64_t d : shape)
    if (d < 0 || __builtin_mul_overflow(n, d, &n))
      return -1;
  int64_t bytes;
  return __builtin_mul_overflow(n, int64_t(sizeof(float)), &bytes) ? -1 : n;
}

std::string shapeString(const std::vector<int64_t> &shape) {
  std::string s = "[";
  for (size_t d = 0; d < shape.size(); ++d)
    s += (d ? ", " : "") + std::to_string(shape[d]);
  return s + "]";
}

bool isPersistentRole(const ppc::planfile::Tensor &t) {
  return t.role() == ppc::planfile::Tensor::WEIGHT ||
         t.role() == ppc::planfile::Tensor::FROZEN;
}

bool isPersistentBuffer(const ppc::planfile::Plan &plan,
                        const ppc::planfile::Instruction::Alloc &alloc) {
  const ppc::planfile::Buffer &b = alloc.buffer();
  return !alloc.has_view() && b.tensor() >= 0 &&
         b.tensor() < plan.tensors_size() && !b.grad() && !b.staging() &&
         isPersistentRole(plan.tensors(b.tensor()));
}

/// Why a tensor or scratch buffer of `shape` cannot exist, if it cannot.
static absl::Status checkShape(const std::vector<int64_t> &shape) {
  if (checkedElementCount(shape) >= 0)
    return absl::OkStatus();
  for (int64_t d : shape)
    if (d < 0)
      return absl::InvalidArgumentError("has a negative dim (shape " +
                                        shapeString(shape) + ")");
  return absl::InvalidArgumentError(
      "of shape " + shapeString(shape) +
      " has more than 2^61 elements: its float32 bytes do not fit in 64 "
      "bits");
}

static absl::Status checkBox(const Box &box, const Tensor &tensor) {
  if (box.lo_size() != tensor.shape_size() ||
      box.hi_size() != tensor.shape_size())
    return absl::InvalidArgumentError(
        "a box of rank " + std::to_string(box.lo_size()) + " on tensor '" +
        tensor.name() + "' of rank " + std::to_string(tensor.shape_size()));
  for (int d = 0; d < box.lo_size(); ++d)
    if (box.lo(d) < 0 || box.hi(d) > tensor.shape(d) || box.lo(d) > box.hi(d))
      return absl::InvalidArgumentError(
          "box dim " + std::to_string(d) + " [" + std::to_string(box.lo(d)) +
          ", " + std::to_string(box.hi(d)) + ") is outside tensor '" +
          tensor.name() + "'");
  return absl::OkStatus();
}

uint64_t fnv1a(const void *data, size_t n) {
  const auto *bytes = static_cast<const unsigned char *>(data);
  uint64_t hash = 0xcbf29ce484222325ULL;
  for (size_t i = 0; i < n; ++i)
    hash = (hash ^ bytes[i]) * 0x100000001b3ULL;
  return hash;
}

uint64_t weightsChecksum(const float *values, int64_t count) {
  // The bytes are little-endian: the host order on every platform ppc-run
  // builds for.
  return fnv1a(values, static_cast<size_t>(count) * sizeof(float));
}

std::string weightsFilePath(const std::string &planPath, const Plan &plan) {
  if (!plan.has_weights_file() || plan.weights_file().path().empty())
    return "";
  const std::string &file = plan.weights_file().path();
  if (file[0] == '/')
    return file;
  size_t slash = planPath.rfind('/');
  return slash == std::string::npos ? file
                                    : planPath.substr(0, slash + 1) + file;
}

absl::Status validatePlan(const Plan &plan) {
  const int numTensors = plan.tensors_size();
  const int numOps = plan.ops_size();
  const int numRanks = plan.programs_size();
  if (numRanks == 0)
    return absl::InvalidArgumentError("it has no programs");
  if (plan.machine().num_devices() != 0 &&
      plan.machine().num_devices() != numRanks)
    return absl::InvalidArgumentError(
        "it has " + std::to_string(numRanks) + " programs for a machine of " +
        std::to_string(plan.machine().num_devices()) + " devices");
  for (int t = 0; t < numTensors; ++t) {
    const Tensor &tensor = plan.tensors(t);
    if (tensor.id() != t)
      return absl::InvalidArgumentError("tensor #" + std::to_string(t) +
                                        " has id " +
                                        std::to_string(tensor.id()));
    if (absl::Status err = checkShape(
            std::vector<int64_t>(tensor.shape().begin(), tensor.shape().end()));
        !err.ok())
      return withMessage(err,
                         "tensor '" + tensor.name() + "' " + messageOf(err));
  }
  for (const Tensor &tensor : plan.tensors()) {
    if (tensor.init() != Tensor::WEIGHTS_FILE)
      continue;
    if (!plan.has_weights_file() || plan.weights_file().path().empty())
      return absl::InvalidArgumentError(
          "tensor '" + tensor.name() +
          "' is in a weights file, but the plan names none");
    int64_t count = 1;
    for (int64_t d : tensor.shape())
      count *= d;
    const int64_t fileCount = plan.weights_file().size_bytes() / 4;
    if (tensor.weights_count() != count || tensor.weights_offset() < 0 ||
        tensor.weights_offset() > fileCount - count)
      return absl::InvalidArgumentError(
          "tensor '" + tensor.name() + "' has " +
          std::to_string(tensor.weights_count()) + " values at element " +
          std::to_string(tensor.weights_offset()) + " of the weights file (" +
          std::to_string(fileCount) + " elements) for " +
          std::to_string(count) + " elements");
  }
  for (int o = 0; o < numOps; ++o) {
    const Op &op = plan.ops(o);
    if (op.id() != o)
      return absl::InvalidArgumentError("op #" + std::to_string(o) +
                                        " has id " + std::to_string(op.id()));
    for (int t : op.operands())
      if (t < 0 || t >= numTensors)
        return absl::InvalidArgumentError(
            "op '" + op.name() + "' reads tensor " + std::to_string(t) +
            " of " + std::to_string(numTensors));
    for (int t : op.results())
      if (t < 0 || t >= numTensors)
        return absl::InvalidArgumentError(
            "op '" + op.name() + "' writes tensor " + std::to_string(t) +
            " of " + std::to_string(numTensors));
  }
  if (plan.training() &&
      (plan.loss_tensor() < 0 || plan.loss_tensor() >= numTensors))
    return absl::InvalidArgumentError("a training plan without a loss tensor");
  for (int r = 0; r < numRanks; ++r) {
    const Program &program = plan.programs(r);
    std::string where = "rank " + std::to_string(r) + ": ";
    if (program.rank() != r)
      return absl::InvalidArgumentError(where + "program has rank " +
                                        std::to_string(program.rank()));
    std::set<int> buffers;
    auto known = [&](int b) { return buffers.count(b) != 0; };
    // Of each tensor buffer allocated: its element count, dtype and grad,
    // which a view of it must share.
    std::map<int, std::tuple<int64_t, std::string, bool>> viewable;
    for (int i = 0; i < program.instructions_size(); ++i) {
      const Instruction &instr = program.instructions(i);
      std::string at = where + "instruction " + std::to_string(i) + ": ";
      // Every buffer a derived message names must be allocated; the
      // hand-written ones (alloc, kernel_backward, collective) list theirs
      // below.
      std::vector<int> used;
      forEachDerivedBuffer(instr, [&](int32_t b) { used.push_back(b); });
      switch (instr.kind_case()) {
      case Instruction::kAlloc: {
        const Buffer &b = instr.alloc().buffer();
        if (!buffers.insert(b.id()).second)
          return absl::InvalidArgumentError(
              at + "buffer " + std::to_string(b.id()) + " allocated twice");
        if (b.tensor() >= numTensors)
          return absl::InvalidArgumentError(at + "buffer of unknown tensor " +
                                            std::to_string(b.tensor()));
        if (b.tensor() >= 0) {
          if (absl::Status err = checkBox(b.box(), plan.tensors(b.tensor()));
              !err.ok())
            return withMessage(err, at + messageOf(err));
          int64_t elements = 1;
          for (int d = 0; d < b.box().lo_size(); ++d)
            elements *= b.box().hi(d) - b.box().lo(d);
          std::tuple<int64_t, std::string, bool> shape = {
              elements, plan.tensors(b.tensor()).dtype(), b.grad()};
          if (instr.alloc().has_view()) {
            const int base = instr.alloc().view();
            auto it = viewable.find(base);
            if (!known(base) || it == viewable.end())
              return absl::InvalidArgumentError(
                  at + "buffer " + std::to_string(b.id()) +
                  " is a view of buffer " + std::to_string(base) +
                  ", which is not an allocated buffer of a tensor");
            if (it->second != shape)
              return absl::InvalidArgumentError(
                  at + "buffer " + std::to_string(b.id()) + " (" +
                  std::to_string(elements) + " " + std::get<1>(shape) +
                  (b.grad() ? " gradient" : "") +
                  " elements) is a view of buffer " + std::to_string(base) +
                  " (" + std::to_string(std::get<0>(it->second)) + " " +
                  std::get<1>(it->second) +
                  (std::get<2>(it->second) ? " gradient" : "") + " elements)");
          }
          viewable[b.id()] = shape;
        } else if (instr.alloc().has_view()) {
          return absl::InvalidArgumentError(
              at + "scratch buffer " + std::to_string(b.id()) + " is a view");
        } else if (absl::Status err = checkShape(std::vector<int64_t>(
                       b.shape().begin(), b.shape().end()));
                   !err.ok()) {
          return withMessage(err, at + "scratch buffer " +
                                      std::to_string(b.id()) + " " +
                                      messageOf(err));
        }
        break;
      }
      case Instruction::kSend:
      case Instruction::kRecv: {
        bool send = instr.kind_case() == Instruction::kSend;
        int peer = send ? instr.send().peer() : instr.recv().peer();
        if (peer < 0 || peer >= numRanks || peer == r)
          return absl::InvalidArgumentError(
              at + "peer " + std::to_string(peer) + " is not another rank");
        break;
      }
      case Instruction::kKernel:
      case Instruction::kKernelBackward: {
        bool fwd = instr.kind_case() == Instruction::kKernel;
        int op = fwd ? instr.kernel().op() : instr.kernel_backward().op();
        if (op < 0 || op >= numOps)
          return absl::InvalidArgumentError(at + "kernel of unknown op " +
                                            std::to_string(op));
        if (!fwd) {
          const auto &k = instr.kernel_backward();
          used.assign(k.inputs().begin(), k.inputs().end());
          used.insert(used.end(), k.output_grads().begin(),
                      k.output_grads().end());
          for (int g : k.input_grads())
            if (g >= 0)
              used.push_back(g);
        }
        break;
      }
      case Instruction::kCollective: {
        const auto &c = instr.collective();
        bool member = false;
        for (int m : c.group()) {
          if (m < 0 || m >= numRanks)
            return absl::InvalidArgumentError(
                at + "collective group names rank " + std::to_string(m));
          member |= m == r;
        }
        if (!member)
          return absl::InvalidArgumentError(
              at + "collective over a group without this rank");
        used = {c.buffer()};
        break;
      }
      default:
        break;
      }
      for (int b : used)
        if (!known(b))
          return absl::InvalidArgumentError(at + "uses buffer " +
                                            std::to_string(b) +
                                            " before it is allocated");
      if (instr.kind_case() == Instruction::kFree)
        buffers.erase(instr.free().buffer());
    }
  }
  return absl::OkStatus();
}

OpDesc describeOp(const ppc::planfile::Plan &plan,
                  const ppc::planfile::Op &op) {
  OpDesc desc;
  desc.kind = op.kind();
  for (const ppc::planfile::Attribute &a : op.attributes()) {
    switch (a.value_case()) {
    case ppc::planfile::Attribute::kI:
      desc.attributes[a.name()] = a.i();
      break;
    case ppc::planfile::Attribute::kF:
      desc.attributes[a.name()] = a.f();
      break;
    case ppc::planfile::Attribute::kS:
      desc.attributes[a.name()] = a.s();
      break;
    case ppc::planfile::Attribute::kInts:
      desc.attributes[a.name()] = std::vector<int64_t>(
          a.ints().values().begin(), a.ints().values().end());
      break;
    case ppc::planfile::Attribute::kFloats:
      desc.attributes[a.name()] = std::vector<double>(
          a.floats().values().begin(), a.floats().values().end());
      break;
    default:
      break;
    }
  }
  for (int32_t t : op.operands())
    desc.operandShapes.emplace_back(plan.tensors(t).shape().begin(),
                                    plan.tensors(t).shape().end());
  for (int32_t t : op.results())
    desc.resultShapes.emplace_back(plan.tensors(t).shape().begin(),
                                   plan.tensors(t).shape().end());
  return desc;
}

} // namespace ppc::runtime
