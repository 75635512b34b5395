//===- EveryComputeOp.h - one instance of every ppc compute op --*- C++ -*-===//
//
// A function holding one instance of every compute op of the ppc dialect at
// a chosen batch: the feature maps %x hold `batch` samples and the matrices
// %m 4 * batch rows, so tests can check every op kind at several sizes
// (GraphInterfaceTest: valid spaces and costs; CostScalingTest: predicted
// times that grow with the work).
//
//===----------------------------------------------------------------------===//

#ifndef PPC_TEST_UNIT_EVERYCOMPUTEOP_H
#define PPC_TEST_UNIT_EVERYCOMPUTEOP_H

#include <cstdint>
#include <string>

namespace ppc::test {

/// The number of compute ops the function holds: every op registered with
/// ParallelizableOpInterface.
constexpr unsigned kNumComputeOps = 69;

/// The function's MLIR at `batch` samples (batch 2 gives %x 2x4x8x8 and %m
/// 8x16).
inline std::string everyComputeOp(int64_t batch) {
  std::string text = R"mlir(
func.func @every_op(%x: tensor<@Nx4x8x8xf32>, %w: tensor<6x4x3x3xf32>,
                    %c: tensor<4xf32>, %m: tensor<@Mx16xf32>,
                    %k: tensor<16x32xf32>, %ids: tensor<@Mxi64>,
                    %wt: tensor<4x3x2x2xf32>, %t: tensor<@Nx8x16xf32>,
                    %p: tensor<@Nx8x4xf32>) {
  %0 = ppc.matmul %m, %k : (tensor<@Mx16xf32>, tensor<16x32xf32>) -> tensor<@Mx32xf32>
  %1 = ppc.linear %m, %k : (tensor<@Mx16xf32>, tensor<16x32xf32>) -> tensor<@Mx32xf32>
  %2 = ppc.conv2d %x, %w {pads = array<i64: 1, 1, 1, 1>} : (tensor<@Nx4x8x8xf32>, tensor<6x4x3x3xf32>) -> tensor<@Nx6x8x8xf32>
  %3 = ppc.max_pool2d %x {kernel = array<i64: 2, 2>, strides = array<i64: 2, 2>} : tensor<@Nx4x8x8xf32> -> tensor<@Nx4x4x4xf32>
  %4 = ppc.avg_pool2d %x {kernel = array<i64: 2, 2>, strides = array<i64: 2, 2>} : tensor<@Nx4x8x8xf32> -> tensor<@Nx4x4x4xf32>
  %5 = ppc.global_avg_pool %x : tensor<@Nx4x8x8xf32> -> tensor<@Nx4x1x1xf32>
  %6 = ppc.batch_norm %x, %c, %c, %c, %c : (tensor<@Nx4x8x8xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) -> tensor<@Nx4x8x8xf32>
  %7 = ppc.layer_norm %m, %m {axis = 0 : i64} : (tensor<@Mx16xf32>, tensor<@Mx16xf32>) -> tensor<@Mx16xf32>
  %8 = ppc.softmax %m : tensor<@Mx16xf32>
  %9 = ppc.log_softmax %m : tensor<@Mx16xf32>
  %10 = ppc.relu %m : tensor<@Mx16xf32>
  %11 = ppc.leaky_relu %m {alpha = 0.2 : f64} : tensor<@Mx16xf32>
  %12 = ppc.gelu %m {approximation = 1 : i32} : tensor<@Mx16xf32>
  %13 = ppc.sigmoid %m : tensor<@Mx16xf32>
  %14 = ppc.tanh %m : tensor<@Mx16xf32>
  %15 = ppc.clip %m {min = 0.0 : f64, max = 6.0 : f64} : tensor<@Mx16xf32>
  %16 = ppc.sqrt %m : tensor<@Mx16xf32>
  %17 = ppc.rsqrt %m : tensor<@Mx16xf32>
  %18 = ppc.exp %m : tensor<@Mx16xf32>
  %19 = ppc.log %m : tensor<@Mx16xf32>
  %20 = ppc.erf %m : tensor<@Mx16xf32>
  %21 = ppc.neg %m : tensor<@Mx16xf32>
  %22 = ppc.abs %m : tensor<@Mx16xf32>
  %23 = ppc.reciprocal %m : tensor<@Mx16xf32>
  %24 = ppc.silu %m : tensor<@Mx16xf32>
  %25 = ppc.add %x, %x : (tensor<@Nx4x8x8xf32>, tensor<@Nx4x8x8xf32>) -> tensor<@Nx4x8x8xf32>
  %26 = ppc.sub %m, %m : (tensor<@Mx16xf32>, tensor<@Mx16xf32>) -> tensor<@Mx16xf32>
  %27 = ppc.mul %m, %m : (tensor<@Mx16xf32>, tensor<@Mx16xf32>) -> tensor<@Mx16xf32>
  %28 = ppc.div %m, %m : (tensor<@Mx16xf32>, tensor<@Mx16xf32>) -> tensor<@Mx16xf32>
  %29 = ppc.pow %m, %m : (tensor<@Mx16xf32>, tensor<@Mx16xf32>) -> tensor<@Mx16xf32>
  %30 = ppc.max %m, %m : (tensor<@Mx16xf32>, tensor<@Mx16xf32>) -> tensor<@Mx16xf32>
  %31 = ppc.min %m, %m : (tensor<@Mx16xf32>, tensor<@Mx16xf32>) -> tensor<@Mx16xf32>
  %32 = ppc.dropout %m {ratio = 0.1 : f64, seed = 7 : i64} : tensor<@Mx16xf32>
  %33 = ppc.cast %m : tensor<@Mx16xf32> -> tensor<@Mx16xbf16>
  %34 = ppc.broadcast %c : tensor<4xf32> -> tensor<@Nx3x4xf32>
  %35 = ppc.reduce_sum %m {axes = array<i64: 1>} : tensor<@Mx16xf32> -> tensor<@Mx1xf32>
  %36 = ppc.reduce_mean %m {axes = array<i64: 0>, keep_dims = false} : tensor<@Mx16xf32> -> tensor<16xf32>
  %37 = ppc.reduce_max %m {axes = array<i64: -1>} : tensor<@Mx16xf32> -> tensor<@Mx1xf32>
  %38 = ppc.reshape %m : tensor<@Mx16xf32> -> tensor<@Nx4x16xf32>
  %39 = ppc.transpose %m {permutation = array<i64: 1, 0>} : tensor<@Mx16xf32> -> tensor<16x@Mxf32>
  %40 = ppc.concat %m, %m {axis = 0 : i64} : (tensor<@Mx16xf32>, tensor<@Mx16xf32>) -> tensor<@Ox16xf32>
  %41:2 = ppc.split %m {axis = 1 : i64} : tensor<@Mx16xf32> -> tensor<@Mx4xf32>, tensor<@Mx12xf32>
  %42 = ppc.slice %m {starts = array<i64: 0, 1>, steps = array<i64: 2, 3>} : tensor<@Mx16xf32> -> tensor<@Hx5xf32>
  %43 = ppc.pad %m {pads = array<i64: 1, 0, 1, 0>, value = 1.0 : f64} : tensor<@Mx16xf32> -> tensor<@Px16xf32>
  %44 = ppc.gather %k, %ids : (tensor<16x32xf32>, tensor<@Mxi64>) -> tensor<@Mx32xf32>
  %45 = ppc.softmax_cross_entropy %m, %ids : (tensor<@Mx16xf32>, tensor<@Mxi64>) -> tensor<f32>
  %46 = ppc.mse_loss %m, %m : (tensor<@Mx16xf32>, tensor<@Mx16xf32>) -> tensor<f32>
  %47 = ppc.attention %m, %m, %m {causal = true} : (tensor<@Mx16xf32>, tensor<@Mx16xf32>, tensor<@Mx16xf32>) -> tensor<@Mx16xf32>
  %48 = ppc.hard_sigmoid %m {alpha = 0.25 : f64, beta = 0.4 : f64} : tensor<@Mx16xf32>
  %49 = ppc.hard_swish %m : tensor<@Mx16xf32>
  %50 = ppc.elu %m {alpha = 0.5 : f64} : tensor<@Mx16xf32>
  %51 = ppc.selu %m : tensor<@Mx16xf32>
  %52 = ppc.softplus %m : tensor<@Mx16xf32>
  %53 = ppc.mish %m : tensor<@Mx16xf32>
  %54 = ppc.prelu %m, %m : (tensor<@Mx16xf32>, tensor<@Mx16xf32>) -> tensor<@Mx16xf32>
  %55 = ppc.resize %x {mode = "linear", scales = array<f64: 2.0, 0.5>} : tensor<@Nx4x8x8xf32> -> tensor<@Nx4x16x4xf32>
  %56 = ppc.conv_transpose2d %x, %wt : (tensor<@Nx4x8x8xf32>, tensor<4x3x2x2xf32>) -> tensor<@Nx3x9x9xf32>
  %57 = ppc.equal %m, %m : (tensor<@Mx16xf32>, tensor<@Mx16xf32>) -> tensor<@Mx16xi1>
  %58 = ppc.less %m, %m : (tensor<@Mx16xf32>, tensor<@Mx16xf32>) -> tensor<@Mx16xi1>
  %59 = ppc.less_equal %m, %m : (tensor<@Mx16xf32>, tensor<@Mx16xf32>) -> tensor<@Mx16xi1>
  %60 = ppc.greater %m, %m : (tensor<@Mx16xf32>, tensor<@Mx16xf32>) -> tensor<@Mx16xi1>
  %61 = ppc.greater_equal %m, %m : (tensor<@Mx16xf32>, tensor<@Mx16xf32>) -> tensor<@Mx16xi1>
  %62 = ppc.and %58, %59 : (tensor<@Mx16xi1>, tensor<@Mx16xi1>) -> tensor<@Mx16xi1>
  %63 = ppc.or %60, %61 : (tensor<@Mx16xi1>, tensor<@Mx16xi1>) -> tensor<@Mx16xi1>
  %64 = ppc.not %63 : tensor<@Mx16xi1>
  %65 = ppc.select %64, %m, %m : (tensor<@Mx16xi1>, tensor<@Mx16xf32>, tensor<@Mx16xf32>) -> tensor<@Mx16xf32>
  %66 = ppc.cumsum %m {axis = 1 : i64} : tensor<@Mx16xf32>
  %67 = ppc.moe_dispatch %t, %p {top_k = 2 : i64} : (tensor<@Nx8x16xf32>, tensor<@Nx8x4xf32>) -> tensor<4x@Nx5x16xf32>
  %68 = ppc.moe_combine %67, %p {top_k = 2 : i64, normalize = true} : (tensor<4x@Nx5x16xf32>, tensor<@Nx8x4xf32>) -> tensor<@Nx8x16xf32>
  return
}
)mlir";
  // @N samples, @M = 4N rows, @O = 8N (a concat), @H = 2N (a slice with
  // step 2), @P = 4N + 2 (a pad of one row on each side).
  const std::pair<const char *, int64_t> sizes[] = {{"@N", batch},
                                                    {"@M", 4 * batch},
                                                    {"@O", 8 * batch},
                                                    {"@H", 2 * batch},
                                                    {"@P", 4 * batch + 2}};
  for (const auto &[token, size] : sizes)
    for (size_t at = text.find(token); at != std::string::npos;
         at = text.find(token, at))
      text.replace(at, 2, std::to_string(size));
  return text;
}

} // namespace ppc::test

#endif // PPC_TEST_UNIT_EVERYCOMPUTEOP_H
