//===- PlanExportTest.cpp - plan dialect <-> plan file round trips --------===//
//
// importPlan inverts exportPlan: a parsed plan exported, imported and
// exported again gives the identical message. The plan file reader accepts
// what the writer writes (binary and text) and rejects a wrong version,
// truncated files and buffers used before they are allocated.
//
//===----------------------------------------------------------------------===//

#include "ppc/Target/PlanExport.h"
#include "StatusText.h"
#include "ppc/Runtime/PlanIO.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Parser/Parser.h"

#include <google/protobuf/text_format.h>
#include <google/protobuf/util/message_differencer.h>
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

using ppc::test::statusText;

using namespace mlir;
using namespace ppc;
namespace pf = ppc::planfile;

namespace {

// Two ranks, every instruction kind, attributes of every kind, and names
// the importer must make unique ("dup" twice, an op named like a tensor).
constexpr const char *kPlan = R"mlir(
plan.plan version 4 ranks 2 attributes {batch_size = 4 : i64, loss = @loss,
    machine = "cpux2", machine_description = "cpu:2",
    optimizer = {kind = "momentum", lr = 0.1, momentum = 0.9, weight_decay = 1.0e-4},
    strategy = "{}"} {
  plan.tensor @x input [4, 8] f32 {model_name = "dup"}
  plan.tensor @labels input [4] i64 {int_max = 3 : i64, model_name = "dup"}
  plan.tensor @w weight [8, 3] f32 {init = 3 : i32, init_bound = 0.35 : f64}
  plan.tensor @b weight [3] f16 {init = 4 : i32, value = dense<[1.0, 2.5, -3.0]> : tensor<3xf16>}
  plan.tensor @k constant [2] i32 {init = 4 : i32, value = dense<[7, -1]> : tensor<2xi32>}
  plan.tensor @stats frozen [3] f32 {init = 2 : i32}
  plan.tensor @y activation [4, 3] f32 {model_name = "fc"}
  plan.tensor @loss activation [] f32 {is_output}
  plan.op @fc "ppc.linear" [@x, @w, @b] -> [@y] needs_grad [false, true, true]
      attributes {alpha = 0.5 : f64, approximation = 1 : i32, dtype = bf16,
                  flag = true, mode = "fast", perm = array<i64: 1, 0>,
                  scales = [0.25, 4.0], sizes = [2, 3], unit, empty = []}
  plan.op @ce "ppc.cross_entropy" [@y, @labels] -> [@loss] needs_grad [true, false] attributes {}
  plan.program rank 0 {
    plan.phase forward
    %x = plan.alloc @x [0, 0] [2, 8]
    plan.load %x
    %l = plan.alloc @labels [0] [2]
    plan.load %l
    %w = plan.alloc @w [0, 0] [8, 3]
    plan.load %w
    %b = plan.alloc @b [0] [3]
    plan.load %b
    %y = plan.alloc @y [0, 0] [2, 3]
    plan.kernel @fc stage 0 ins(%x, %w, %b) outs(%y)
    %yf = plan.alloc @y [0, 0] [4, 3]
    plan.collective all_gather %y -> %yf group [0, 1] {axis = 0 : i64}
    plan.phase loss
    %loss = plan.alloc @loss [] []
    plan.kernel @ce stage 0 ins(%y, %l) outs(%loss)
    plan.collective all_reduce %loss group [0, 1]
    plan.output %loss
    plan.phase backward
    %dloss = plan.alloc @loss [] [] grad
    plan.fill %dloss, 1.0
    %dy = plan.alloc @y [0, 0] [2, 3] grad uninitialized
    plan.kernel_backward @ce stage 0 ins(%y, %l) outs(%loss) output_grads(%dloss) input_grads [true, false] (%dy) overwrite [true]
    %dw = plan.alloc @w [0, 0] [8, 3] grad
    %db = plan.alloc @b [0] [3] grad
    %s = plan.alloc [0] [16]
    plan.kernel_backward @fc stage 1 ins(%x, %w, %b) outs() output_grads(%dy) input_grads [false, true, true] (%dw, %db) overwrite [true, false] scratch(%s)
    plan.free %s
    plan.phase grad_sync
    plan.collective all_reduce %dw group [0, 1] {reduction = "max"}
    plan.recv %db [0] [3] from 1 tag 7 accumulate
    plan.send %db [0] [3] to 1 tag 8
    plan.collective broadcast %db group [1, 0] {root = 1 : i64}
    plan.phase update
    plan.update %w, %dw
    plan.update %b, %db
    %wt = plan.alloc @w [0, 0] [4, 3]
    plan.copy %w -> %wt [0, 0] [4, 3]
    plan.copy %w -> %wt [2, 0] [4, 3] accumulate
    plan.free %wt
    %yv = plan.alloc @y [2, 0] [4, 3] view %y
  }
  plan.program rank 1 {
    plan.phase forward
    %x = plan.alloc @x [2, 0] [4, 8]
    plan.load %x
    %db = plan.alloc @b [0] [3] grad
    plan.send %db [0] [3] to 0 tag 7
    plan.recv %db [0] [3] from 0 tag 8
    %t = plan.alloc [0, 0] [2, 3]
    %r = plan.alloc [0, 0] [2, 3]
    plan.collective reduce_scatter %t -> %r group [1] {axis = 1 : i64}
    plan.collective all_to_all %t -> %r group [1, 0]
  }
}
)mlir";

class PlanExportTest : public ::testing::Test {
protected:
  void SetUp() override { context.loadDialect<plan::PlanDialect>(); }

  OwningOpRef<ModuleOp> parse(const char *text) {
    return parseSourceString<ModuleOp>(text, &context);
  }

  static plan::PlanOp planOf(ModuleOp module) {
    auto plans = module.getOps<plan::PlanOp>();
    return plans.empty() ? plan::PlanOp() : *plans.begin();
  }

  /// The exported message of the parsed kPlan.
  pf::Plan exported() {
    OwningOpRef<ModuleOp> module = parse(kPlan);
    EXPECT_TRUE(module);
    FailureOr<pf::Plan> message = exportPlan(planOf(*module));
    EXPECT_TRUE(succeeded(message));
    return succeeded(message) ? *message : pf::Plan();
  }

  std::string path(const std::string &name) {
    return ::testing::TempDir() + "/PlanExportTest-" + name;
  }

  MLIRContext context;
};

std::string differences(const pf::Plan &a, const pf::Plan &b) {
  std::string report;
  google::protobuf::util::MessageDifferencer differencer;
  differencer.ReportDifferencesToString(&report);
  return differencer.Compare(a, b) ? "" : report;
}

TEST_F(PlanExportTest, ImportInvertsExport) {
  pf::Plan first = exported();
  ASSERT_EQ(first.programs_size(), 2);
  ASSERT_EQ(first.tensors_size(), 8);

  OwningOpRef<ModuleOp> imported = importPlan(first, &context);
  ASSERT_TRUE(imported);
  ASSERT_TRUE(succeeded(verify(*imported)));
  FailureOr<pf::Plan> second = exportPlan(planOf(*imported));
  ASSERT_TRUE(succeeded(second));
  EXPECT_EQ(differences(first, *second), "");

  // The imported IR prints and parses back to the same plan.
  std::string text;
  llvm::raw_string_ostream os(text);
  imported->print(os);
  OwningOpRef<ModuleOp> reparsed = parse(text.c_str());
  ASSERT_TRUE(reparsed);
  FailureOr<pf::Plan> third = exportPlan(planOf(*reparsed));
  ASSERT_TRUE(succeeded(third));
  EXPECT_EQ(differences(first, *third), "");
}

TEST_F(PlanExportTest, ExportedFields) {
  pf::Plan message = exported();
  EXPECT_EQ(message.version(), runtime::kPlanVersion);
  EXPECT_EQ(message.machine().num_devices(), 2);
  EXPECT_TRUE(message.training());
  EXPECT_EQ(message.optimizer().kind(), pf::Optimizer::MOMENTUM);
  EXPECT_DOUBLE_EQ(message.optimizer().momentum(), 0.9);
  EXPECT_EQ(message.loss_tensor(), 7);
  // f16 and i32 values are written as floats.
  EXPECT_EQ(message.tensors(3).dtype(), "f16");
  EXPECT_FLOAT_EQ(message.tensors(3).data(1), 2.5f);
  EXPECT_FLOAT_EQ(message.tensors(4).data(1), -1.0f);
  EXPECT_EQ(message.tensors(5).role(), pf::Tensor::FROZEN);
  // grad_mask [false, true, true] over three operands.
  const auto &backward = message.programs(0).instructions(26).kernel_backward();
  ASSERT_EQ(backward.input_grads_size(), 3);
  EXPECT_EQ(backward.input_grads(0), -1);
  EXPECT_EQ(backward.scratch(0), 11);
  // Attributes in name order; the empty array is an empty int list.
  const pf::Op &fc = message.ops(0);
  ASSERT_EQ(fc.attributes_size(), 10);
  EXPECT_EQ(fc.attributes(0).name(), "alpha");
  EXPECT_EQ(fc.attributes(2).s(), "bf16");
  EXPECT_EQ(fc.attributes(3).name(), "empty");
  EXPECT_TRUE(fc.attributes(3).has_ints());
  EXPECT_EQ(fc.attributes(4).i(), 1);
  EXPECT_EQ(fc.attributes(9).value_case(), pf::Attribute::VALUE_NOT_SET);
  // The view names the buffer it views (%y, the fifth allocated).
  const pf::Program &rank0 = message.programs(0);
  const auto &view = rank0.instructions(rank0.instructions_size() - 1).alloc();
  ASSERT_TRUE(view.has_view());
  EXPECT_EQ(view.view(), 4);
  EXPECT_FALSE(rank0.instructions(1).alloc().has_view());
}

TEST_F(PlanExportTest, ImportMakesUniqueSymbols) {
  OwningOpRef<ModuleOp> imported = importPlan(exported(), &context);
  ASSERT_TRUE(imported);
  SmallVector<std::string> names;
  for (auto tensor : planOf(*imported).getBody().getOps<plan::TensorOp>())
    names.push_back(tensor.getSymName().str());
  // "dup" twice: the second gets t<id>; tensor "fc" takes the name before
  // the op "fc" does.
  EXPECT_EQ(names[0], "dup");
  EXPECT_EQ(names[1], "t1");
  EXPECT_EQ(names[6], "fc");
  auto ops = planOf(*imported).getBody().getOps<plan::GraphOp>();
  EXPECT_EQ((*ops.begin()).getSymName(), "op0");
  EXPECT_EQ((*ops.begin()).getModelName(), "fc");
}

TEST_F(PlanExportTest, ImportRejectsBadIds) {
  pf::Plan message = exported();
  message.mutable_ops(0)->set_operands(0, 99);
  std::string error;
  ScopedDiagnosticHandler handler(&context, [&](Diagnostic &diag) {
    error = diag.str();
    return success();
  });
  EXPECT_FALSE(importPlan(message, &context));
  EXPECT_EQ(error, "tensor id 99 is out of range (the plan has 8 tensors)");
}

TEST_F(PlanExportTest, FilesRoundTrip) {
  pf::Plan message = exported();
  for (bool text : {false, true}) {
    std::string file = path(text ? "plan.txt" : "plan.pb");
    ASSERT_EQ(statusText(runtime::writePlanFile(message, file, text)), "");
    pf::Plan read;
    ASSERT_EQ(statusText(runtime::readPlanFile(file, read)), "");
    EXPECT_EQ(differences(message, read), "");
  }
}

TEST_F(PlanExportTest, ReaderRejectsOtherVersion) {
  pf::Plan message = exported();
  message.set_version(runtime::kPlanVersion + 1);
  std::string file = path("version.pb");
  ASSERT_EQ(statusText(runtime::writePlanFile(message, file, false)), "");
  pf::Plan read;
  std::string error = statusText(runtime::readPlanFile(file, read));
  EXPECT_NE(
      error.find("format version " + std::to_string(runtime::kPlanVersion + 1)),
      std::string::npos)
      << error;
  EXPECT_NE(
      error.find("reads version " + std::to_string(runtime::kPlanVersion)),
      std::string::npos)
      << error;
}

TEST_F(PlanExportTest, TextReaderRejectsStringsThatAreNotUtf8) {
  // Found by ppc-plan-fuzzer: the text parser took a raw 0xFF byte (or the
  // escape \377) in a string, which proto3 forbids, so the plan read from
  // text could not be read back once written in binary.
  std::string text;
  ASSERT_TRUE(google::protobuf::TextFormat::PrintToString(exported(), &text));
  size_t producer = text.find("producer: \"");
  ASSERT_NE(producer, std::string::npos);
  for (const char *bad : {"\xff", "\\377"}) {
    std::string bytes = text;
    bytes.insert(producer + 11, bad);
    pf::Plan read;
    EXPECT_EQ(statusText(runtime::parsePlan(bytes, "bad.txt", read)),
              "'bad.txt' is not a ppc plan file (a string in it is not valid "
              "UTF-8)")
        << bad;
  }
  pf::Plan read;
  EXPECT_EQ(statusText(runtime::parsePlan(text, "good.txt", read)), "");
}

TEST_F(PlanExportTest, ReaderRejectsTruncatedFile) {
  std::string file = path("truncated.pb");
  ASSERT_EQ(statusText(runtime::writePlanFile(exported(), file, false)), "");
  std::string bytes;
  {
    std::ifstream in(file, std::ios::binary);
    std::stringstream buffer;
    buffer << in.rdbuf();
    bytes = buffer.str();
  }
  ASSERT_GT(bytes.size(), 100u);
  // Cut inside the programs (mid-field) and at a few other places: either
  // the parse fails or the structure check does.
  for (size_t size : {bytes.size() - 3, bytes.size() / 2, size_t(10)}) {
    {
      std::ofstream out(file, std::ios::binary | std::ios::trunc);
      out.write(bytes.data(), static_cast<std::streamsize>(size));
    }
    pf::Plan read;
    std::string error = statusText(runtime::readPlanFile(file, read));
    EXPECT_NE(error, "") << "truncated to " << size << " bytes";
    EXPECT_NE(error.find(file), std::string::npos) << error;
  }
}

TEST_F(PlanExportTest, ReaderRejectsBufferUsedBeforeAlloc) {
  pf::Plan message = exported();
  // Instructions 1 and 2 of rank 0 are "alloc buffer 0" and "load buffer 0".
  auto *instructions = message.mutable_programs(0)->mutable_instructions();
  ASSERT_TRUE(instructions->Get(1).has_alloc());
  ASSERT_TRUE(instructions->Get(2).has_load());
  instructions->SwapElements(1, 2);
  std::string file = path("order.pb");
  ASSERT_EQ(statusText(runtime::writePlanFile(message, file, false)), "");
  pf::Plan read;
  std::string error = statusText(runtime::readPlanFile(file, read));
  EXPECT_NE(error.find("rank 0: instruction 1: uses buffer 0 before it is "
                       "allocated"),
            std::string::npos)
      << error;
}

TEST_F(PlanExportTest, ReaderRejectsViewsThatDoNotFit) {
  // The last instruction of rank 0 makes buffer 13 a view of buffer 4 (6
  // f32 elements of @y).
  auto readBack = [&](const pf::Plan &message) {
    std::string file = path("view.pb");
    EXPECT_EQ(statusText(runtime::writePlanFile(message, file, false)), "");
    pf::Plan read;
    return statusText(runtime::readPlanFile(file, read));
  };
  pf::Plan message = exported();
  auto *rank0 = message.mutable_programs(0);
  pf::Instruction::Alloc *view =
      rank0->mutable_instructions(rank0->instructions_size() - 1)
          ->mutable_alloc();
  ASSERT_TRUE(view->has_view());
  ASSERT_EQ(readBack(message), "");

  view->mutable_buffer()->mutable_box()->set_lo(0, 1); // 9 elements
  std::string error = readBack(message);
  EXPECT_NE(error.find("buffer 13 (9 f32 elements) is a view of buffer 4 (6 "
                       "f32 elements)"),
            std::string::npos)
      << error;
  view->mutable_buffer()->mutable_box()->set_lo(0, 2);
  view->mutable_buffer()->set_grad(true);
  error = readBack(message);
  EXPECT_NE(error.find("(6 f32 gradient elements) is a view of buffer 4 (6 "
                       "f32 elements)"),
            std::string::npos)
      << error;
  view->mutable_buffer()->set_grad(false);
  view->set_view(12); // freed before
  error = readBack(message);
  EXPECT_NE(error.find("is a view of buffer 12, which is not an allocated "
                       "buffer of a tensor"),
            std::string::npos)
      << error;
}

} // namespace
