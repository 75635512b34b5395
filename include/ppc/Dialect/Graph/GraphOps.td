//===- GraphOps.td - ppc graph dialect ops -----------------*- tablegen -*-===//

#ifndef PPC_DIALECT_GRAPH_GRAPHOPS_TD
#define PPC_DIALECT_GRAPH_GRAPHOPS_TD

include "ppc/Dialect/Graph/GraphBase.td"
include "ppc/Dialect/Graph/GraphAttrs.td"
include "ppc/Dialect/Graph/ParallelizableOpInterface.td"
include "mlir/IR/BuiltinAttributeInterfaces.td"
include "mlir/Interfaces/SideEffectInterfaces.td"
include "mlir/Interfaces/InferTypeOpInterface.td"
include "mlir/IR/OpBase.td"

//===----------------------------------------------------------------------===//
// Base classes and type constraints
//===----------------------------------------------------------------------===//

def PPC_Tensor : RankedTensorOf<[AnyFloat, AnySignlessInteger, I1]>;
def PPC_FloatTensor : RankedTensorOf<[AnyFloat]>;
def PPC_IndexTensor : RankedTensorOf<[AnySignlessInteger]>;
def PPC_ScalarFloatTensor : 0DTensorOf<[AnyFloat]>;

class PPC_Op<string mnemonic, list<Trait> traits = []>
    : Op<PPC_Dialect, mnemonic, traits>;

// An op the search can split: it describes its iteration space.
// `facts` names the interface's optional methods it defines.
class PPC_ComputeOp<string mnemonic, list<Trait> traits = [],
                    list<string> facts = []>
    : PPC_Op<mnemonic, !listconcat(traits,
          [DeclareOpInterfaceMethods<ParallelizableOpInterface, facts>])>;

//===----------------------------------------------------------------------===//
// Values that are not computed: weights and constants
//===----------------------------------------------------------------------===//

def PPC_WeightOp : PPC_Op<"weight", [Pure]> {
  let summary = "A model parameter (trainable unless `frozen`)";
  let description = [{
    A weight of the model, named as in the source model (the ONNX initializer
    name). Weights are distinct from activations: the search replicates or
    splits them and synchronizes their gradients. `frozen` marks state that is
    not trained by the optimizer (batch-norm running statistics). The initial
    value is optional: large models keep it in the source file, found by name.

    ```mlir
    %w = ppc.weight "fc1.weight" : tensor<256x784xf32>
    %m = ppc.weight "bn1.running_mean" frozen : tensor<64xf32>
    ```
  }];
  let arguments = (ins StrAttr:$name, UnitAttr:$frozen,
                       OptionalAttr<ElementsAttr>:$value);
  let results = (outs PPC_Tensor:$result);
  let assemblyFormat = "$name (`frozen` $frozen^)? attr-dict `:` type($result)";
  let hasVerifier = 1;
}

def PPC_ConstantOp : PPC_Op<"constant", [ConstantLike, Pure,
    AllTypesMatch<["value", "result"]>]> {
  let summary = "A constant tensor that is not trained";
  let arguments = (ins ElementsAttr:$value);
  let results = (outs PPC_Tensor:$result);
  let assemblyFormat = "attr-dict $value";
  let hasFolder = 1;
}

//===----------------------------------------------------------------------===//
// Contractions
//===----------------------------------------------------------------------===//

def PPC_MatMulOp : PPC_ComputeOp<"matmul", [Pure]> {
  let summary = "Batched matrix product with optional transposes";
  let description = [{
    `result[..., m, n] = sum_k lhs[..., m, k] * rhs[..., k, n]` (with the last
    two dims of an operand swapped when its transpose flag is set). Leading
    batch dims broadcast as in numpy; a rank-1 operand is not accepted (the
    importer reshapes it).
  }];
  let arguments = (ins PPC_FloatTensor:$lhs, PPC_FloatTensor:$rhs,
                       DefaultValuedAttr<BoolAttr, "false">:$transpose_lhs,
                       DefaultValuedAttr<BoolAttr, "false">:$transpose_rhs);
  let results = (outs PPC_FloatTensor:$result);
  let assemblyFormat =
      "$lhs `,` $rhs attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def PPC_LinearOp : PPC_ComputeOp<"linear", [Pure], ["getOperandInit"]> {
  let summary = "Fully connected layer: input x weight (+ bias)";
  let description = [{
    `result[..., n] = sum_k input[..., k] * weight[k, n] + bias[n]`; with
    `transpose_weight` the weight is laid out `[n, k]` (PyTorch's Linear and
    ONNX Gemm with transB).
  }];
  let arguments = (ins PPC_FloatTensor:$input, PPC_FloatTensor:$weight,
                       Optional<PPC_FloatTensor>:$bias,
                       DefaultValuedAttr<BoolAttr, "false">:$transpose_weight);
  let results = (outs PPC_FloatTensor:$result);
  let assemblyFormat = "$input `,` $weight (`,` $bias^)? attr-dict `:` "
                       "functional-type(operands, results)";
  let hasVerifier = 1;
}

def PPC_AttentionOp : PPC_ComputeOp<"attention"> {
  let summary = "Fused scaled dot-product attention";
  let description = [{
    `result[..., i, :] = sum_j p[..., i, j] * value[..., j, :]` with
    `p = dropout(softmax_j(scale * query[..., i, :] . key[..., j, :]))`:
    the attention core of a transformer as one kernel, as FlashAttention
    runs it (the score matrix never leaves the chip; the backward
    recomputes it). With `causal`, key positions after the query position
    are masked out (top-left aligned, as PyTorch's `is_causal`). With
    `zigzag = N` (causal, as many keys as queries, a multiple of 2N) the
    positions are stored in zigzag order, as Megatron-Core balances causal
    context parallelism: 2N chunks, stored chunk 2j holding chunk j and
    stored chunk 2j + 1 chunk 2N - 1 - j; the mask compares the natural
    positions (ppc-zigzag-sequence stores a model's sequence so). Dropout
    draws the mask ppc.dropout with the same `ratio` and `seed` would draw
    for the `[..., S, T]` probabilities, so the op equals its unfused chain
    `matmul(transpose_rhs)`, `mul` by `scale`, `softmax`, `dropout`,
    `matmul` exactly.

    Shapes: query `[B..., S, D]`, key `[B..., T, D]`, value
    `[B..., T, Dv]`, result `[B..., S, Dv]`; the leading dims (batch,
    heads) are the same on all four. With `layout = "bshd"` the four are
    rank 4 with the heads after the positions, as a linear layer's output
    reshaped per head is: query `[B, S, H, D]`, key `[B, T, H, D]`, value
    `[B, T, H, Dv]`, result `[B, S, H, Dv]` (FlashAttention's layout; the
    kernels read rows H * D apart, so no head transposes are copied). The
    op is the default layout's op on the operands transposed by `[0, 2, 1,
    3]`, its result transposed back, dropout included.

    ```mlir
    %o = ppc.attention %q, %k, %v {scale = 0.125 : f64, causal = true}
        : (tensor<2x8x128x64xf32>, tensor<2x8x128x64xf32>,
           tensor<2x8x128x64xf32>) -> tensor<2x8x128x64xf32>
    ```
  }];
  let arguments = (ins PPC_FloatTensor:$query, PPC_FloatTensor:$key,
                       PPC_FloatTensor:$value,
                       DefaultValuedAttr<F64Attr, "1.0">:$scale,
                       DefaultValuedAttr<BoolAttr, "false">:$causal,
                       DefaultValuedAttr<F64Attr, "0.0">:$ratio,
                       DefaultValuedAttr<I64Attr, "0">:$seed,
                       DefaultValuedAttr<StrAttr, "\"bhsd\"">:$layout,
                       DefaultValuedAttr<I64Attr, "0">:$zigzag);
  let results = (outs PPC_FloatTensor:$result);
  let extraClassDeclaration = [{
    /// layout = "bshd": the heads after the positions.
    bool headsAfterPositions() { return getLayout() == "bshd"; }
    /// The dim of each operand and of the result that holds, in order, the
    /// default layout's dims [B..., S or T, D or Dv].
    ::llvm::SmallVector<int64_t> logicalDims();
  }];
  let assemblyFormat =
      "$query `,` $key `,` $value attr-dict `:` "
      "functional-type(operands, results)";
  let hasVerifier = 1;
}

def PPC_Conv2DOp : PPC_ComputeOp<"conv2d", [Pure]> {
  let summary = "2-D convolution, NCHW, with stride, padding, dilation, groups";
  let description = [{
    Input `[N, C, H, W]`, weight `[F, C / groups, KH, KW]`, optional bias
    `[F]`, result `[N, F, OH, OW]`. `pads` is `[top, left, bottom, right]`.
  }];
  let arguments = (ins PPC_FloatTensor:$input, PPC_FloatTensor:$weight,
                       Optional<PPC_FloatTensor>:$bias,
                       DefaultValuedAttr<DenseI64ArrayAttr, "{1, 1}">:$strides,
                       DefaultValuedAttr<DenseI64ArrayAttr, "{0, 0, 0, 0}">:$pads,
                       DefaultValuedAttr<DenseI64ArrayAttr, "{1, 1}">:$dilations,
                       DefaultValuedAttr<I64Attr, "1">:$groups);
  let results = (outs PPC_FloatTensor:$result);
  let assemblyFormat = "$input `,` $weight (`,` $bias^)? attr-dict `:` "
                       "functional-type(operands, results)";
  let hasVerifier = 1;
}

def PPC_ConvTranspose2DOp : PPC_ComputeOp<"conv_transpose2d", [Pure]> {
  let summary = "2-D transposed convolution, NCHW (ONNX ConvTranspose)";
  let description = [{
    The gradient of `ppc.conv2d` with respect to its input, as an op: each
    input element scatters `input[n, c, h, w] * weight[c, f', i, j]` onto
    result position `(h * sH - top + i * dH, w * sW - left + j * dW)` of
    output channel `f = group * F / groups + f'`, where `c` is in `group`.

    Input `[N, C, H, W]`, weight `[C, F / groups, KH, KW]` (ONNX's layout),
    optional bias `[F]`, result `[N, F, OH, OW]` with
    `OH = (H - 1) * sH - top - bottom + dH * (KH - 1) + 1 + output_padding[0]`
    (and so for OW). `pads` is `[top, left, bottom, right]`, cropped off the
    full scatter; `output_padding` adds rows and columns at the bottom and
    right (they get only the bias where no input lands on them). ONNX's
    `output_shape` and `auto_pad` are resolved into these at import.

    ```mlir
    %y = ppc.conv_transpose2d %x, %w, %b {strides = array<i64: 2, 2>,
        pads = array<i64: 1, 1, 1, 1>, output_padding = array<i64: 1, 1>}
        : (tensor<1x4x8x8xf32>, tensor<4x3x3x3xf32>, tensor<3xf32>)
        -> tensor<1x3x16x16xf32>
    ```
  }];
  let arguments = (ins PPC_FloatTensor:$input, PPC_FloatTensor:$weight,
                       Optional<PPC_FloatTensor>:$bias,
                       DefaultValuedAttr<DenseI64ArrayAttr, "{1, 1}">:$strides,
                       DefaultValuedAttr<DenseI64ArrayAttr, "{0, 0, 0, 0}">:$pads,
                       DefaultValuedAttr<DenseI64ArrayAttr, "{1, 1}">:$dilations,
                       DefaultValuedAttr<DenseI64ArrayAttr, "{0, 0}">:
                           $output_padding,
                       DefaultValuedAttr<I64Attr, "1">:$groups);
  let results = (outs PPC_FloatTensor:$result);
  let assemblyFormat = "$input `,` $weight (`,` $bias^)? attr-dict `:` "
                       "functional-type(operands, results)";
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Pooling and normalization
//===----------------------------------------------------------------------===//

class PPC_Pool2DOp<string mnemonic> : PPC_ComputeOp<mnemonic, [Pure]> {
  let arguments = (ins PPC_FloatTensor:$input,
                       DenseI64ArrayAttr:$kernel,
                       DefaultValuedAttr<DenseI64ArrayAttr, "{1, 1}">:$strides,
                       DefaultValuedAttr<DenseI64ArrayAttr, "{0, 0, 0, 0}">:$pads,
                       DefaultValuedAttr<BoolAttr, "false">:$ceil_mode,
                       DefaultValuedAttr<BoolAttr, "false">:$count_include_pad);
  let results = (outs PPC_FloatTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($result)";
  let hasVerifier = 1;
}

def PPC_MaxPool2DOp : PPC_Pool2DOp<"max_pool2d"> {
  let summary = "2-D max pooling, NCHW (`count_include_pad` is ignored)";
}
def PPC_AvgPool2DOp : PPC_Pool2DOp<"avg_pool2d"> {
  let summary = "2-D average pooling, NCHW";
}

def PPC_GlobalAvgPoolOp : PPC_ComputeOp<"global_avg_pool", [Pure]> {
  let summary = "Mean over all spatial dims: [N, C, ...] -> [N, C, 1, ...]";
  let arguments = (ins PPC_FloatTensor:$input);
  let results = (outs PPC_FloatTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($result)";
  let hasVerifier = 1;
}

def PPC_ResizeOp : PPC_ComputeOp<"resize", [Pure]> {
  let summary = "Resizes H and W of [N, C, H, W] (ONNX Resize and Upsample)";
  let description = [{
    Each result element interpolates the input plane of its sample and
    channel, separably along H and W, as ONNX Resize specifies. Along an
    axis with input length `in`, result length `out` and scale `s`
    (`scales` = [sH, sW]: the scale ONNX was given, or `out / in` when it
    was given sizes), result position `x` maps to the input coordinate
    `coordinate_transformation_mode` says:

    | mode | input coordinate |
    |---|---|
    | `half_pixel` | `(x + 0.5) / s - 0.5` |
    | `pytorch_half_pixel` | as `half_pixel`, 0 when `out` is 1 |
    | `align_corners` | `x * (in - 1) / (s * in - 1)`, 0 when `out` is 1 |
    | `asymmetric` | `x / s` |
    | `tf_half_pixel_for_nn` | `(x + 0.5) / s` |
    | `tf_crop_and_resize` | `roi` crops first: `lo * (in - 1) + x * (hi - lo) * (in - 1) / (out - 1)`; a coordinate outside `[0, in - 1]` gives `extrapolation_value` |

    `mode` then reads: `nearest` the input index `nearest_mode` rounds the
    coordinate to (`round_prefer_floor`, `round_prefer_ceil`, `floor`,
    `ceil`); `linear` the two neighbours weighted by distance; `cubic` four
    neighbours with Keys' kernel of parameter `cubic_coeff_a`, with
    `exclude_outside` the weights of neighbours outside the input set to 0
    and the rest renormalized. Neighbour indices outside the input are
    clamped to its edge. `roi` is `[loH, loW, hiH, hiW]`, in fractions of
    the input, and only given with `tf_crop_and_resize`.

    ```mlir
    %y = ppc.resize %x {scales = array<f64: 2.0, 2.0>, mode = "linear"}
        : tensor<1x3x8x8xf32> -> tensor<1x3x16x16xf32>
    ```
  }];
  let arguments = (ins PPC_FloatTensor:$input,
      DenseF64ArrayAttr:$scales,
      DefaultValuedAttr<StrAttr, "\"nearest\"">:$mode,
      DefaultValuedAttr<StrAttr, "\"half_pixel\"">:
          $coordinate_transformation_mode,
      DefaultValuedAttr<StrAttr, "\"round_prefer_floor\"">:$nearest_mode,
      DefaultValuedAttr<F64Attr, "-0.75">:$cubic_coeff_a,
      DefaultValuedAttr<BoolAttr, "false">:$exclude_outside,
      OptionalAttr<DenseF64ArrayAttr>:$roi,
      DefaultValuedAttr<F64Attr, "0.0">:$extrapolation_value);
  let results = (outs PPC_FloatTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($result)";
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    /// The keywords `mode`, `coordinate_transformation_mode` and
    /// `nearest_mode` accept, in the order the kernels number them.
    static ::llvm::ArrayRef<::llvm::StringRef> getModeKeywords();
    static ::llvm::ArrayRef<::llvm::StringRef> getCoordinateKeywords();
    static ::llvm::ArrayRef<::llvm::StringRef> getNearestKeywords();
  }];
}

def PPC_BatchNormOp
    : PPC_ComputeOp<"batch_norm", [Pure], ["getOperandInit"]> {
  let summary = "Batch normalization over dim 1 (channels)";
  let description = [{
    In training, normalizes with the batch statistics over every dim but 1 and
    updates the running `mean`/`variance` weights with `momentum` (ONNX
    convention: `running = momentum * running + (1 - momentum) * batch`).
  }];
  let arguments = (ins PPC_FloatTensor:$input, PPC_FloatTensor:$scale,
                       PPC_FloatTensor:$bias, PPC_FloatTensor:$mean,
                       PPC_FloatTensor:$variance,
                       DefaultValuedAttr<F64Attr, "1e-5">:$epsilon,
                       DefaultValuedAttr<F64Attr, "0.9">:$momentum);
  let results = (outs PPC_FloatTensor:$result);
  let assemblyFormat = "$input `,` $scale `,` $bias `,` $mean `,` $variance "
                       "attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def PPC_LayerNormOp
    : PPC_ComputeOp<"layer_norm", [Pure], ["getOperandInit"]> {
  let summary = "Layer normalization over the dims from `axis` on";
  let description = [{
    `y = (x - mean) / sqrt(var + epsilon) * scale [+ bias]` over the dims
    from `axis` on. With `rms = true` it is RMSNorm (Llama, T5): no mean is
    subtracted, `y = x / sqrt(mean(x^2) + epsilon) * scale [+ bias]`; the
    importer recognizes both as exporters write them.
  }];
  let arguments = (ins PPC_FloatTensor:$input, PPC_FloatTensor:$scale,
                       Optional<PPC_FloatTensor>:$bias,
                       DefaultValuedAttr<I64Attr, "-1">:$axis,
                       DefaultValuedAttr<F64Attr, "1e-5">:$epsilon,
                       DefaultValuedAttr<BoolAttr, "false">:$rms);
  let results = (outs PPC_FloatTensor:$result);
  let assemblyFormat = "$input `,` $scale (`,` $bias^)? attr-dict `:` "
                       "functional-type(operands, results)";
  let hasVerifier = 1;
}

class PPC_SoftmaxLikeOp<string mnemonic>
    : PPC_ComputeOp<mnemonic, [Pure, SameOperandsAndResultType]> {
  let arguments = (ins PPC_FloatTensor:$input,
                       DefaultValuedAttr<I64Attr, "-1">:$axis);
  let results = (outs PPC_FloatTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($result)";
  let hasVerifier = 1;
}
def PPC_SoftmaxOp : PPC_SoftmaxLikeOp<"softmax"> {
  let summary = "Softmax along `axis`";
}
def PPC_LogSoftmaxOp : PPC_SoftmaxLikeOp<"log_softmax"> {
  let summary = "Log of softmax along `axis`";
}

//===----------------------------------------------------------------------===//
// Elementwise
//===----------------------------------------------------------------------===//

class PPC_UnaryOp<string mnemonic, string desc, dag attrs = (ins)>
    : PPC_ComputeOp<mnemonic, [Pure, SameOperandsAndResultType]> {
  let summary = "Elementwise " # desc;
  let arguments = !con((ins PPC_FloatTensor:$input), attrs);
  let results = (outs PPC_FloatTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($result)";
}

def PPC_ReluOp : PPC_UnaryOp<"relu", "max(x, 0)">;
def PPC_LeakyReluOp : PPC_UnaryOp<"leaky_relu", "x < 0 ? alpha * x : x",
    (ins DefaultValuedAttr<F64Attr, "0.01">:$alpha)>;
def PPC_GeluOp : PPC_UnaryOp<"gelu", "Gaussian error linear unit",
    (ins DefaultValuedAttr<PPC_GeluApproximation,
         "::ppc::graph::GeluApproximation::none">:$approximation)>;
def PPC_SigmoidOp : PPC_UnaryOp<"sigmoid", "1 / (1 + exp(-x))">;
def PPC_TanhOp : PPC_UnaryOp<"tanh", "hyperbolic tangent">;
def PPC_ClipOp : PPC_UnaryOp<"clip", "min(max(x, min), max)",
    (ins OptionalAttr<F64Attr>:$min, OptionalAttr<F64Attr>:$max)>;
def PPC_SqrtOp : PPC_UnaryOp<"sqrt", "square root">;
def PPC_RsqrtOp : PPC_UnaryOp<"rsqrt", "1 / sqrt(x)">;
def PPC_ExpOp : PPC_UnaryOp<"exp", "e^x">;
def PPC_LogOp : PPC_UnaryOp<"log", "natural logarithm">;
def PPC_ErfOp : PPC_UnaryOp<"erf", "error function">;
def PPC_NegOp : PPC_UnaryOp<"neg", "-x">;
def PPC_AbsOp : PPC_UnaryOp<"abs", "|x|">;
def PPC_ReciprocalOp : PPC_UnaryOp<"reciprocal", "1 / x">;
def PPC_SiluOp : PPC_UnaryOp<"silu", "x * sigmoid(x)">;
def PPC_HardSigmoidOp : PPC_UnaryOp<"hard_sigmoid",
    "max(0, min(1, alpha * x + beta))",
    (ins DefaultValuedAttr<F64Attr, "0.2">:$alpha,
         DefaultValuedAttr<F64Attr, "0.5">:$beta)>;
def PPC_HardSwishOp : PPC_UnaryOp<"hard_swish",
    "x * max(0, min(1, x / 6 + 1 / 2))">;
def PPC_EluOp : PPC_UnaryOp<"elu", "x > 0 ? x : alpha * (exp(x) - 1)",
    (ins DefaultValuedAttr<F64Attr, "1.0">:$alpha)>;
def PPC_SeluOp : PPC_UnaryOp<"selu",
    "gamma * (x > 0 ? x : alpha * (exp(x) - 1))",
    (ins DefaultValuedAttr<F64Attr, "1.67326319217681884765625">:$alpha,
         DefaultValuedAttr<F64Attr, "1.05070102214813232421875">:$gamma)>;
def PPC_SoftplusOp : PPC_UnaryOp<"softplus", "log(1 + exp(x))">;
def PPC_MishOp : PPC_UnaryOp<"mish", "x * tanh(log(1 + exp(x)))">;

class PPC_BinaryOp<string mnemonic, string desc>
    : PPC_ComputeOp<mnemonic, [Pure]> {
  let summary = "Elementwise " # desc # " with numpy broadcasting";
  let arguments = (ins PPC_FloatTensor:$lhs, PPC_FloatTensor:$rhs);
  let results = (outs PPC_FloatTensor:$result);
  let assemblyFormat =
      "$lhs `,` $rhs attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def PPC_AddOp : PPC_BinaryOp<"add", "lhs + rhs">;
def PPC_SubOp : PPC_BinaryOp<"sub", "lhs - rhs">;
def PPC_MulOp : PPC_BinaryOp<"mul", "lhs * rhs">;
def PPC_DivOp : PPC_BinaryOp<"div", "lhs / rhs">;
def PPC_PowOp : PPC_BinaryOp<"pow", "lhs ^ rhs">;
def PPC_MaxOp : PPC_BinaryOp<"max", "max(lhs, rhs)">;
def PPC_MinOp : PPC_BinaryOp<"min", "min(lhs, rhs)">;
def PPC_PReluOp : PPC_BinaryOp<"prelu", "lhs < 0 ? rhs * lhs : lhs"> {
  let description = [{
    ONNX PRelu: `lhs` is the input, `rhs` the slope (often a trained
    per-channel weight of shape [C, 1, 1]); both get a gradient.
  }];
}

//===----------------------------------------------------------------------===//
// Comparisons, logic and selection
//===----------------------------------------------------------------------===//

def PPC_BoolTensor : RankedTensorOf<[I1]>;

class PPC_CompareOp<string mnemonic, string desc>
    : PPC_ComputeOp<mnemonic, [Pure]> {
  let summary = "Elementwise " # desc # " with numpy broadcasting, as i1";
  let description = [{
    Operands of one element type (float, integer or i1); the result is i1
    (at run time a float 0 or 1, as every value is a float there). No
    gradient passes: the result is not differentiable.
  }];
  let arguments = (ins PPC_Tensor:$lhs, PPC_Tensor:$rhs);
  let results = (outs PPC_BoolTensor:$result);
  let assemblyFormat =
      "$lhs `,` $rhs attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def PPC_EqualOp : PPC_CompareOp<"equal", "lhs == rhs">;
def PPC_LessOp : PPC_CompareOp<"less", "lhs < rhs">;
def PPC_LessEqualOp : PPC_CompareOp<"less_equal", "lhs <= rhs">;
def PPC_GreaterOp : PPC_CompareOp<"greater", "lhs > rhs">;
def PPC_GreaterEqualOp : PPC_CompareOp<"greater_equal", "lhs >= rhs">;
def PPC_AndOp : PPC_CompareOp<"and", "logical lhs and rhs (i1 operands)">;
def PPC_OrOp : PPC_CompareOp<"or", "logical lhs or rhs (i1 operands)">;

def PPC_NotOp : PPC_ComputeOp<"not", [Pure, SameOperandsAndResultType]> {
  let summary = "Elementwise logical not of an i1 tensor";
  let arguments = (ins PPC_BoolTensor:$input);
  let results = (outs PPC_BoolTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($result)";
}

def PPC_SelectOp : PPC_ComputeOp<"select", [Pure]> {
  let summary = "`condition ? lhs : rhs` elementwise, with numpy broadcasting";
  let description = [{
    ONNX Where. Each result element is copied from `lhs` where `condition`
    is true and from `rhs` elsewhere; the gradient goes to `lhs` where the
    condition holds and to `rhs` elsewhere (copied, never multiplied by the
    mask: an infinite value on the side not taken yields no NaN), none to
    the condition. `lhs`, `rhs` and the result share their element type.
  }];
  let arguments = (ins PPC_BoolTensor:$condition, PPC_Tensor:$lhs,
                       PPC_Tensor:$rhs);
  let results = (outs PPC_Tensor:$result);
  let assemblyFormat = "$condition `,` $lhs `,` $rhs attr-dict `:` "
                       "functional-type(operands, results)";
  let hasVerifier = 1;
}

def PPC_CumSumOp : PPC_ComputeOp<"cumsum", [Pure, SameOperandsAndResultType]> {
  let summary = "Cumulative sum along `axis`";
  let description = [{
    ONNX CumSum: `result[..., i, ...]` is the sum of `input[..., j, ...]`
    over j <= i (j < i when `exclusive`; j >= i, or j > i, when `reverse`).
    `axis` is in [0, rank). The gradient of the input is the cumulative sum
    of the result's gradient in the other direction.
  }];
  let arguments = (ins PPC_Tensor:$input, I64Attr:$axis,
                       DefaultValuedAttr<BoolAttr, "false">:$exclusive,
                       DefaultValuedAttr<BoolAttr, "false">:$reverse);
  let results = (outs PPC_Tensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($result)";
  let hasVerifier = 1;
}

def PPC_DropoutOp : PPC_ComputeOp<"dropout", [SameOperandsAndResultType]> {
  let summary = "Zeroes elements with probability `ratio` in training";
  let description = [{
    In training, each element is kept with probability `1 - ratio` and scaled
    by `1 / (1 - ratio)`; the mask is drawn from `seed`. Identity in inference.
  }];
  let arguments = (ins PPC_FloatTensor:$input,
                       DefaultValuedAttr<F64Attr, "0.5">:$ratio,
                       DefaultValuedAttr<I64Attr, "0">:$seed);
  let results = (outs PPC_FloatTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($result)";
  let hasVerifier = 1;
}

def PPC_CastOp : PPC_ComputeOp<"cast", [Pure, SameOperandsAndResultShape],
    ["forwardsValues", "addKernelAttributes"]> {
  let summary = "Converts the element type";
  let arguments = (ins PPC_Tensor:$input);
  let results = (outs PPC_Tensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($result)";
}

def PPC_BroadcastOp : PPC_ComputeOp<"broadcast", [Pure]> {
  let summary = "Broadcasts to the result shape with numpy rules";
  let arguments = (ins PPC_Tensor:$input);
  let results = (outs PPC_Tensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($result)";
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Reductions
//===----------------------------------------------------------------------===//

class PPC_ReduceOp<string mnemonic, string desc>
    : PPC_ComputeOp<mnemonic, [Pure]> {
  let summary = desc # " over `axes`";
  let arguments = (ins PPC_FloatTensor:$input, DenseI64ArrayAttr:$axes,
                       DefaultValuedAttr<BoolAttr, "true">:$keep_dims);
  let results = (outs PPC_FloatTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($result)";
  let hasVerifier = 1;
}
def PPC_ReduceSumOp : PPC_ReduceOp<"reduce_sum", "Sum">;
def PPC_ReduceMeanOp : PPC_ReduceOp<"reduce_mean", "Mean">;
def PPC_ReduceMaxOp : PPC_ReduceOp<"reduce_max", "Maximum">;

//===----------------------------------------------------------------------===//
// Data movement
//===----------------------------------------------------------------------===//

def PPC_ReshapeOp : PPC_ComputeOp<"reshape", [Pure], ["forwardsValues"]> {
  let summary = "Reinterprets the shape (row-major, same element count)";
  let arguments = (ins PPC_Tensor:$input);
  let results = (outs PPC_Tensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($result)";
  let hasVerifier = 1;
}

def PPC_TransposeOp
    : PPC_ComputeOp<"transpose", [Pure], ["forwardsValues"]> {
  let summary = "Permutes dims: result dim i is input dim permutation[i]";
  let arguments = (ins PPC_Tensor:$input, DenseI64ArrayAttr:$permutation);
  let results = (outs PPC_Tensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($result)";
  let hasVerifier = 1;
}

def PPC_ConcatOp : PPC_ComputeOp<"concat", [Pure], ["forwardsValues"]> {
  let summary = "Concatenates along `axis`";
  let arguments = (ins Variadic<PPC_Tensor>:$inputs, I64Attr:$axis);
  let results = (outs PPC_Tensor:$result);
  let assemblyFormat =
      "$inputs attr-dict `:` functional-type($inputs, results)";
  let hasVerifier = 1;
}

def PPC_SplitOp : PPC_ComputeOp<"split", [Pure], ["forwardsValues"]> {
  let summary = "Splits along `axis` into pieces sized by the result types";
  let arguments = (ins PPC_Tensor:$input, I64Attr:$axis);
  let results = (outs Variadic<PPC_Tensor>:$results);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($results)";
  let hasVerifier = 1;
}

def PPC_SliceOp : PPC_ComputeOp<"slice", [Pure], ["forwardsValues"]> {
  let summary = "Strided slice; the result type gives the element counts";
  let description = [{
    `result[i] = input[starts + i * steps]` along every dim (steps > 0).
  }];
  let arguments = (ins PPC_Tensor:$input, DenseI64ArrayAttr:$starts,
                       DenseI64ArrayAttr:$steps);
  let results = (outs PPC_Tensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($result)";
  let hasVerifier = 1;
}

def PPC_PadOp : PPC_ComputeOp<"pad", [Pure]> {
  let summary = "Constant padding; `pads` is [lo..., hi...] as in ONNX";
  let arguments = (ins PPC_Tensor:$input, DenseI64ArrayAttr:$pads,
                       DefaultValuedAttr<F64Attr, "0.0">:$value);
  let results = (outs PPC_Tensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($result)";
  let hasVerifier = 1;
}

def PPC_GatherOp : PPC_ComputeOp<"gather", [Pure],
                                  ["getIndexBound", "forwardsValues"]> {
  let summary = "Gathers slices of `data` along `axis` (embedding lookup)";
  let description = [{
    ONNX Gather: the result shape is `data.shape[:axis] + indices.shape +
    data.shape[axis+1:]`. An embedding is a gather on axis 0 of a weight.
  }];
  let arguments = (ins PPC_Tensor:$data, PPC_IndexTensor:$indices,
                       DefaultValuedAttr<I64Attr, "0">:$axis);
  let results = (outs PPC_Tensor:$result);
  let assemblyFormat =
      "$data `,` $indices attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Mixture of experts (GShard's dispatch and combine, one group per sample)
//===----------------------------------------------------------------------===//

class PPC_MoeOp<string mnemonic> : PPC_ComputeOp<mnemonic, [Pure]> {
  let hasVerifier = 1;
}

def PPC_MoeDispatchOp : PPC_MoeOp<"moe_dispatch"> {
  let summary = "Routes each token to its top-k experts' capacity slots";
  let description = [{
    Tokens `input [B, S, H]`, router probabilities `probs [B, S, E]`;
    result `[E, B, C, H]`: expert e's C capacity slots for the tokens of
    sample b. Each sample is one routing group (GShard): a token's experts
    are its `top_k` largest probabilities (ties to the lower expert), and
    slots fill by choice, then position (every token's first choice
    before any second choice); a token whose expert's C slots are taken
    is dropped for that choice, and unfilled slots are zero. Backward adds
    each slot's gradient to its token; the routing passes no gradient to
    `probs` (ppc.moe_combine's weights do). The expert dim is a dim of the
    iteration space like any other: split, it is expert parallelism.

    `aux_loss_coef` > 0 adds the router's load-balancing loss (Switch
    Transformer, in Megatron-Core's normalization: `coef` at a perfect
    balance) to the training objective, as Megatron-Core does, through
    the backward only: per sample, `coef * E / (k * S^2) * sum_e n_e *
    sum_s probs[s, e]`, with `n_e` the sample's choices of expert e
    before capacity drops, averaged over the batch. Its gradient
    `coef * E * n_e / (k * S^2 * B)` joins the probabilities'; the loss a
    run prints is the model's without it.

    ```mlir
    %d = ppc.moe_dispatch %x, %p {top_k = 2, aux_loss_coef = 0.01}
        : (tensor<4x64x32xf32>, tensor<4x64x8xf32>) -> tensor<8x4x20x32xf32>
    ```
  }];
  let arguments = (ins PPC_FloatTensor:$input, PPC_FloatTensor:$probs,
                       DefaultValuedAttr<I64Attr, "1">:$top_k,
                       DefaultValuedAttr<F64Attr, "0.0">:$aux_loss_coef);
  let results = (outs PPC_FloatTensor:$result);
  let assemblyFormat =
      "$input `,` $probs attr-dict `:` functional-type(operands, results)";
}

def PPC_MoeCombineOp : PPC_MoeOp<"moe_combine"> {
  let summary = "Sums each token's expert outputs, weighted by its router";
  let description = [{
    Expert outputs `input [E, B, C, H]` in the slots ppc.moe_dispatch
    with the same `probs [B, S, E]` and `top_k` filled; result
    `[B, S, H]`: `sum_j g_j * input[e_j, b, c_j, :]` over the token's
    kept choices j, with `g_j = probs[b, s, e_j]`, divided by the sum of
    its k choices' probabilities when `normalize` (Mixtral). Backward:
    the slots get `g_j` times the token's gradient, `probs` the chain
    rule of the weights (each weight's gradient is its slot's dot product
    with the token's gradient).

    ```mlir
    %y = ppc.moe_combine %e, %p {top_k = 2, normalize = true}
        : (tensor<8x4x20x32xf32>, tensor<4x64x8xf32>) -> tensor<4x64x32xf32>
    ```
  }];
  let arguments = (ins PPC_FloatTensor:$input, PPC_FloatTensor:$probs,
                       DefaultValuedAttr<I64Attr, "1">:$top_k,
                       DefaultValuedAttr<BoolAttr, "false">:$normalize);
  let results = (outs PPC_FloatTensor:$result);
  let assemblyFormat =
      "$input `,` $probs attr-dict `:` functional-type(operands, results)";
}

//===----------------------------------------------------------------------===//
// Losses
//===----------------------------------------------------------------------===//

def PPC_SoftmaxCrossEntropyOp
    : PPC_ComputeOp<"softmax_cross_entropy", [Pure],
                    ["getIndexBound", "isLoss"]> {
  let summary = "Mean softmax cross-entropy of logits [N, C] and labels [N]";
  let arguments = (ins PPC_FloatTensor:$logits, PPC_IndexTensor:$labels);
  let results = (outs PPC_ScalarFloatTensor:$loss);
  let assemblyFormat =
      "$logits `,` $labels attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def PPC_MseLossOp : PPC_ComputeOp<"mse_loss", [Pure], ["isLoss"]> {
  let summary = "Mean squared error of two tensors of the same shape";
  let arguments = (ins PPC_FloatTensor:$prediction, PPC_FloatTensor:$target);
  let results = (outs PPC_ScalarFloatTensor:$loss);
  let assemblyFormat = "$prediction `,` $target attr-dict `:` "
                       "functional-type(operands, results)";
  let hasVerifier = 1;
}


//===----------------------------------------------------------------------===//
// Parallel ops (inserted by --ppc-materialize-resharding)
//===----------------------------------------------------------------------===//

// Unity's parallel operators: explicit data movement between an op whose
// partitions produce a value and an op whose partitions read it differently.
// `from` is the producer's configuration, `to` the consumer's (absent when the
// consumer is the function's return: the whole value on device 0).
// `exchange` is the collective the movement's pieces make, as the
// communication plan (geometry::classifyExchange) names it: "all_gather",
// "all_to_all", "point_to_point", ... (geometry::exchangeKindName).
class PPC_ParallelOp<string mnemonic, string desc>
    : PPC_Op<mnemonic, [Pure, SameOperandsAndResultType]> {
  let summary = desc;
  let arguments = (ins PPC_Tensor:$input,
                       OptionalAttr<PPC_StrategyAttr>:$from,
                       OptionalAttr<PPC_StrategyAttr>:$to,
                       OptionalAttr<StrAttr>:$exchange);
  let results = (outs PPC_Tensor:$result);
  let assemblyFormat = "$input (`from` $from^)? (`to` $to^)? "
                       "(`as` $exchange^)? attr-dict `:` type($result)";
  let hasVerifier = 1;
}

def PPC_RepartitionOp : PPC_ParallelOp<"repartition",
    "Moves a value to pieces of another layout (point-to-point)">;
def PPC_CombineOp : PPC_ParallelOp<"combine",
    "Gathers pieces of a value into fewer, larger pieces">;
def PPC_ReplicateOp : PPC_ParallelOp<"replicate",
    "Copies pieces of a value to several devices">;
def PPC_PartialReduceOp : PPC_ParallelOp<"reduce",
    "Sums the partial results of a split reduction (all-reduce per group)">;

#endif // PPC_DIALECT_GRAPH_GRAPHOPS_TD
