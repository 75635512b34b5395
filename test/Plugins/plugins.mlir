// ppc's dialects and passes loaded into the upstream mlir-opt as plugins.
// REQUIRES: ppc-plugins, upstream-mlir-opt
// The dialect plugin: upstream mlir-opt parses and prints ppc graph IR.
// RUN: %upstream-mlir-opt --load-dialect-plugin=%ppc_lib/PPCDialectPlugin.so %s | FileCheck %s --check-prefix=PARSE
// The pass plugin: ppc's passes in an upstream pass pipeline, here ppc's
// summary, then machine, search and shard export followed by upstream's
// partition, all in one upstream mlir-opt.
// RUN: %upstream-mlir-opt --load-dialect-plugin=%ppc_lib/PPCDialectPlugin.so --load-pass-plugin=%ppc_lib/PPCPassPlugin.so --pass-pipeline='builtin.module(ppc-op-summary)' %s -o /dev/null | FileCheck %s --check-prefix=SUMMARY
// RUN: %upstream-mlir-opt --load-dialect-plugin=%ppc_lib/PPCDialectPlugin.so --load-pass-plugin=%ppc_lib/PPCPassPlugin.so --pass-pipeline='builtin.module(ppc-attach-machine{machine=cpux4},ppc-search{algorithm=megatron tp=2 threads=1 progress=off},ppc-export-shard,func.func(sharding-propagation,shard-partition))' %s 2>/dev/null | FileCheck %s --check-prefix=PARTITION
// The import pass on a TOSA function.
// RUN: %upstream-mlir-opt --load-dialect-plugin=%ppc_lib/PPCDialectPlugin.so --load-pass-plugin=%ppc_lib/PPCPassPlugin.so --pass-pipeline='builtin.module(ppc-import-upstream)' %S/../Interop/Inputs/tosa-mlp.mlir | FileCheck %s --check-prefix=IMPORT

// PARSE: func.func @forward
// PARSE: ppc.weight "fc1" : tensor<128x256xf32>
// PARSE: ppc.matmul %arg0, %{{.*}} : (tensor<64x128xf32>, tensor<128x256xf32>) -> tensor<64x256xf32>
// PARSE: ppc.relu

// SUMMARY: ppc graph @forward
// SUMMARY: weights: 2 (36864 trainable parameters)
// SUMMARY: ppc.matmul 2

// PARTITION: shard.grid @grid(shape = 2x2)
// PARTITION: func.func @forward(%{{.*}}: tensor<32x128xf32>
// PARTITION: shard.all_reduce

// IMPORT: ppc.matmul
// IMPORT-NOT: tosa.
func.func @forward(%arg0: tensor<64x128xf32>) -> tensor<64x16xf32> {
  %w1 = ppc.weight "fc1" : tensor<128x256xf32>
  %w2 = ppc.weight "fc2" : tensor<256x16xf32>
  %h = ppc.matmul %arg0, %w1 : (tensor<64x128xf32>, tensor<128x256xf32>) -> tensor<64x256xf32>
  %r = ppc.relu %h : tensor<64x256xf32>
  %y = ppc.matmul %r, %w2 : (tensor<64x256xf32>, tensor<256x16xf32>) -> tensor<64x16xf32>
  return %y : tensor<64x16xf32>
}
