//===- FlashAttention.h - ppc.attention without a score matrix --*- C++ -*-===//
//
// Private to runtime/cuda. ppc.attention on 16-bit operands in the way of
// FlashAttention-2: tiles of 64 query rows and 64 keys in shared memory,
// the scores of one tile on tensor cores (Blocks.h), an online softmax
// (running row maximum and sum, the output rescaled as they change), so no
// score matrix is ever stored. The backward recomputes the probabilities
// from the row log-sum-exps (a first pass), then takes dK and dV per key
// tile over the query tiles and dQ per query tile over the key tiles:
// every gradient element is summed in one block, in a fixed order
// (deterministic, no atomics). Dropout multiplies the probabilities by
// DropoutMask's factor at their global flat index, as the cpu kernel does;
// causal attention skips the key tiles past a query tile's last row (in
// zigzag order, those whose least natural position is past the rows'
// greatest). The probabilities and dS are rounded to the operands' type for
// their products, as FlashAttention rounds them.
//
//===----------------------------------------------------------------------===//

#ifndef PPC_RUNTIME_CUDA_FLASHATTENTION_H
#define PPC_RUNTIME_CUDA_FLASHATTENTION_H

#include "AttentionRanges.h"
#include "CudaKernels.h"

#include "ppc/Runtime/DropoutMask.h"

namespace ppc::runtime::cuda {

/// Whether the flash kernels take this partition: query, key and value
/// (and the result's gradient, where given) bf16 or f16 alike, D == Dv a
/// multiple of 16 up to 128, and the tiles' shared memory fits the device.
bool flashAttentionFits(const AttentionRanges &r, const KernelView &q,
                        const KernelView &k, const KernelView &v,
                        const KernelView *dResult);

/// The result of the partition `r` (written, as stored).
absl::Status flashAttentionForward(ExecContext &ctx, const AttentionRanges &r,
                                   const DropoutMask &mask, const KernelView &q,
                                   const KernelView &k, const KernelView &v,
                                   const KernelView &result);

/// The gradients of query, key and value (those present), each added into
/// or, where the view is marked overwrite, written. `result` is the
/// forward's result (its rows dotted with the result's gradient's).
absl::Status flashAttentionBackward(
    ExecContext &ctx, const AttentionRanges &r, const DropoutMask &mask,
    const KernelView &q, const KernelView &k, const KernelView &v,
    const KernelView &result, const KernelView &dResult, const KernelView &dq,
    const KernelView &dk, const KernelView &dv);

} // namespace ppc::runtime::cuda

#endif // PPC_RUNTIME_CUDA_FLASHATTENTION_H
