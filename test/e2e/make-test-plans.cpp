//===- make-test-plans.cpp - writes the e2e tests' hand-built plans -------===//
//
// make-test-plans DIR writes the plans of TestPlans.h (and a few broken
// files) into DIR for the mpirun tests in CMakeLists.txt.
//
//===----------------------------------------------------------------------===//

#include "TestPlans.h"

#include "ppc/Runtime/Checkpoint.h"
#include "ppc/Runtime/Npy.h"

#include <cstdint>
#include <cstdio>
#include <string>

using namespace ppc::runtime;
using namespace ppc::runtime::testing;

int main(int argc, char **argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: make-test-plans DIR\n");
    return 1;
  }
  const std::string dir = argv[1];
  absl::Status err = makeDirectories(dir);
  auto write = [&](const pf::Plan &plan, const std::string &name,
                   bool text = false) {
    if (err.ok())
      err = writePlanFile(plan, dir + "/" + name, text);
  };
  write(dataMovementPlan(2), "data-movement-2.plan");
  write(dataMovementPlan(2), "data-movement-2.plantxt", /*text=*/true);
  for (int n : {2, 4})
    write(dataMovementPlan(n, /*spaced=*/true),
          "data-movement-spaced-" + std::to_string(n) + ".plan");
  write(silentPeerPlan(), "silent-peer.plan");
  write(fakeTrainingPlan(2, pf::Optimizer::ADAM), "fake-training-2.plan");
  write(mlpPlan(2, false, pf::Optimizer::ADAM), "mlp-dp-2.plan");
  write(mlpPlan(2, true, pf::Optimizer::MOMENTUM), "mlp-tp-2.plan");
  write(mlpPlan(1, false), "mlp-1.plan");
  // Another plan for rank 1 than for rank 0 (mpirun's A : B form).
  write(fakeTrainingPlan(2, pf::Optimizer::SGD), "fake-training-2-sgd.plan");
  // One plan whose ranks disagree: rank 1's first gradient all-reduce (its
  // second collective, after the loss's) edited into a broadcast.
  pf::Plan mismatch = mlpPlan(2, false, pf::Optimizer::ADAM);
  int collectives = 0;
  for (pf::Instruction &instr :
       *mismatch.mutable_programs(1)->mutable_instructions())
    if (instr.has_collective() && ++collectives == 2)
      instr.mutable_collective()->set_kind(pf::Instruction::BROADCAST);
  write(mismatch, "collective-mismatch-2.plan");
  // Training that diverges (learning rate 1e30: the loss of step 2 is
  // infinite), with the loss output by rank 1 instead of rank 0: right
  // after rank 1's first collective, the loss's all-reduce.
  pf::Plan diverging = mlpPlan(2, false);
  diverging.mutable_optimizer()->set_learning_rate(1e30);
  auto *rank0 = diverging.mutable_programs(0)->mutable_instructions();
  for (int i = 0; i < rank0->size(); ++i)
    if (rank0->Get(i).has_output())
      rank0->DeleteSubrange(i--, 1);
  auto *rank1 = diverging.mutable_programs(1)->mutable_instructions();
  for (int i = 0; i < rank1->size(); ++i)
    if (rank1->Get(i).has_collective()) {
      rank1->Add()->mutable_output()->set_buffer(
          rank1->Get(i).collective().buffer());
      for (int j = rank1->size() - 1; j > i + 1; --j)
        rank1->SwapElements(j, j - 1);
      break;
    }
  write(diverging, "mlp-dp-2-diverging.plan");
  // Batches of 1e9 (1.4 TiB of input per rank), 2^62 and INT64_MAX rows.
  write(hugeBatchPlan(2, 1000000000), "huge-batch-1e9.plan");
  write(hugeBatchPlan(2, int64_t(1) << 62), "huge-batch-2e62.plan");
  write(hugeBatchPlan(2, INT64_MAX), "huge-batch-max.plan");
  pf::Plan future = dataMovementPlan(2);
  future.set_version(99);
  write(future, "version-99.plan");

  // The data movement plan's input x [4, 6], and a wrongly shaped one.
  std::vector<float> x(24), wrong(3);
  for (size_t i = 0; i < x.size(); ++i)
    x[i] = 0.25f * static_cast<float>(i) - 3.0f;
  if (err.ok())
    err = writeNpy(dir + "/x.npy", {4, 6}, x.data());
  if (err.ok())
    err = writeNpy(dir + "/x-wrong-shape.npy", {3}, wrong.data());
  if (!err.ok()) {
    std::fprintf(stderr, "make-test-plans: %s\n",
                 std::string(err.message()).c_str());
    return 1;
  }
  return 0;
}
