// RUN: ppc-opt %s --ppc-attach-machine=machine=cpux2 --ppc-simulate -verify-diagnostics -o /dev/null

// A ZeRO stage on an op that reads no weight shards nothing: said, not
// silently accepted. The linear's stage is meaningful and passes quietly.
func.func @main(%x: tensor<8x16xf32>) -> tensor<8x4xf32> {
  %w = ppc.weight "w" : tensor<16x4xf32>
  // expected-warning @+1 {{'ppc.relu#0': zero = 3 shards the state of an op's weights, and this op has none: the stage changes nothing}}
  %0 = ppc.relu %x {ppc.strategy = #ppc.strategy<degrees = [2, 1], zero = 3>} : tensor<8x16xf32>
  %1 = ppc.linear %0, %w {ppc.strategy = #ppc.strategy<degrees = [2, 1, 1], zero = 2>} : (tensor<8x16xf32>, tensor<16x4xf32>) -> tensor<8x4xf32>
  return %1 : tensor<8x4xf32>
}
