//===- DnnlConv.h - conv2d through oneDNN -----------------------*- C++ -*-===//
//
// Private to runtime/cpu. Convolutions of plain NCHW float32 boxes through
// oneDNN's primitives (the library PyTorch's CPU convolutions use), with the
// primitives cached by shape. The caller (ConvPoolKernels.cpp) describes the
// partition as an ordinary convolution of the rows and columns its view
// holds, with the padding that is outside the tensor; backward results are
// ADDED into the gradient buffers, as every backward kernel does.
//
//===----------------------------------------------------------------------===//

#ifndef PPC_RUNTIME_CPU_DNNLCONV_H
#define PPC_RUNTIME_CPU_DNNLCONV_H

#include "ppc/Support/Status.h"

#include <cstdint>
#include <string>

namespace ppc::runtime::cpu {

struct DnnlConv {
  int64_t batch, inChannels, inRows, inCols;
  /// Strides of the source in floats (the view's box may hold more rows,
  /// columns or samples than the convolution reads).
  int64_t srcStrides[4];
  int64_t outChannels, outRows, outCols, groups;
  int64_t kernelRows, kernelCols;
  int64_t strides[2], dilations[2], padLo[2], padHi[2];
  bool bias;
};

/// y = conv(x, w) + b into `dst` (dense [batch, outChannels, outRows,
/// outCols]); an error says what oneDNN refused.
absl::Status dnnlConvForward(const DnnlConv &conv, const float *src,
                             const float *weights, const float *bias,
                             float *dst);

/// dx += conv_data^T(dy) (dense at `diffSrc` with srcStrides), dw += ...,
/// db += sum(dy); a null pointer skips that gradient.
absl::Status dnnlConvBackward(const DnnlConv &conv, const float *src,
                              const float *weights, const float *diffDst,
                              float *diffSrc, float *diffWeights,
                              float *diffBias);

/// Convolutions (forward and backward calls) run through oneDNN so far in
/// this process: what the tests check the library path was taken with.
int64_t dnnlConvCalls();

} // namespace ppc::runtime::cpu

#endif // PPC_RUNTIME_CPU_DNNLCONV_H
