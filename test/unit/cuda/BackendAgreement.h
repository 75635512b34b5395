//===- BackendAgreement.h - the cuda backend against the cpu backend -*- C++
//-*-//
//
// The oracle of the cuda backend's kernels: one partition of an op runs on
// the cpu backend (reference kernels) and on the cuda backend, through the
// Backend interface as the executor drives it, from the same operand
// values; every result, every staged op's scratch after each stage, every
// operand the forward updates in place and every operand gradient must
// agree. Gradients start at a nonzero base, so a kernel that overwrites
// instead of adding fails. The same cases build twice: against the host
// emulation (CudaEmulatedTest, every machine) and against the GPU
// (CudaBackendTest, skipped with a message where no GPU is visible).
//
// A case's operands are whole tensors (random in [-1, 1) unless given);
// its partition is the boxes of KernelTestUtil.h (whole by default).
//
//===----------------------------------------------------------------------===//

#ifndef PPC_TEST_UNIT_CUDA_BACKENDAGREEMENT_H
#define PPC_TEST_UNIT_CUDA_BACKENDAGREEMENT_H

#include "../KernelTestUtil.h"

#include "ppc/Runtime/Backend.h"
#include "ppc/Runtime/DType.h"

#include <gtest/gtest.h>

#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace ppc::runtime::test {

struct AgreementCase {
  OpDesc op;
  /// Whole operand values; an empty entry is random (seeded by its index).
  std::vector<std::vector<float>> inputs;
  /// The partition's boxes; whole tensors when not set.
  std::optional<Partition> partition;
  KernelContext ctx;
  bool backward = true;
  /// The stages to run, in order (a ring's sequence of a staged op); empty:
  /// 0 .. numStages - 1. With explicit backward stages the backward's
  /// scratch is compared after each of them as well.
  std::vector<int32_t> forwardStages, backwardStages;
  /// What the results (whole values, as `inputs`) and the forward's scratch
  /// buffers (each its elements) hold before the first stage, for a
  /// sequence that continues an earlier one (a ring's merge); empty:
  /// unwritten.
  std::vector<std::vector<float>> initialOutputs, initialScratch;
  /// Operands whose gradient is wanted (default: every float operand that
  /// is not in `integerOperands`).
  std::vector<bool> needsGrad;
  /// Operands holding integers (labels, indices): never given a gradient.
  std::vector<int> integerOperands;
  /// Storage type of every operand, result and gradient buffer (integer
  /// operands stay f32, as the plan stores them).
  DType dtype = DType::F32;
  /// |cuda - cpu| <= atol + rtol * |cpu|.
  double atol = 1e-5, rtol = 1e-4;
};

/// A case of `op` with the harness's defaults (given operand values).
inline AgreementCase caseOf(OpDesc op,
                            std::vector<std::vector<float>> inputs = {}) {
  AgreementCase a;
  a.op = std::move(op);
  a.inputs = std::move(inputs);
  return a;
}

/// The cuda backend to test, or a skip message (GTEST_SKIP in the test).
Backend *cudaBackendUnderTest(std::string &skipReason);

/// Runs `c` on both backends and records every disagreement as a gtest
/// failure (naming the case, the tensor and the first differing element).
void expectBackendsAgree(const AgreementCase &c, const std::string &name);

/// expectBackendsAgree for the whole op and for the partition of every box
/// of the grid `parts` of `iteration`.
inline void
agreeWholeAndGrid(AgreementCase c, const std::string &name,
                  const std::vector<int64_t> &iteration,
                  const std::vector<int64_t> &parts,
                  const std::function<Partition(const Box &)> &boxesOf) {
  c.partition.reset();
  expectBackendsAgree(c, name + " whole");
  for (const Box &b : gridBoxes(iteration, parts)) {
    c.partition = boxesOf(b);
    expectBackendsAgree(c, name + " partition " + boxName(b));
  }
}

} // namespace ppc::runtime::test

/// In a TEST body: skips the test where no cuda backend can start.
#define PPC_REQUIRE_CUDA_BACKEND()                                             \
  do {                                                                         \
    std::string skipReason;                                                    \
    if (!::ppc::runtime::test::cudaBackendUnderTest(skipReason))               \
      GTEST_SKIP() << skipReason;                                              \
  } while (0)

#endif // PPC_TEST_UNIT_CUDA_BACKENDAGREEMENT_H
