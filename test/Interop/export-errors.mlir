// What the shard export cannot express: an error naming the op.
// RUN: ppc-opt %s --ppc-export-shard --split-input-file -verify-diagnostics

func.func @softmax(%x: tensor<8x4xf32>) -> tensor<8x4xf32> {
  // expected-error @+1 {{cannot export 'ppc.softmax' to the shard dialect: it has no linalg.generic form here (elementwise ops, matmul and linear are exported)}}
  %s = ppc.softmax %x {ppc.strategy = #ppc.strategy<degrees = [2, 1]>} : tensor<8x4xf32>
  return %s : tensor<8x4xf32>
}

// -----

func.func @offset_view(%x: tensor<8x4xf32>) -> tensor<8x4xf32> {
  // expected-error @+1 {{cannot export 'ppc.relu' to the shard dialect: its machine view starts at device 2 (stage 0); a shard grid holds whole-grid layouts only}}
  %r = ppc.relu %x {ppc.strategy = #ppc.strategy<degrees = [2, 1], start = 2>} : tensor<8x4xf32>
  return %r : tensor<8x4xf32>
}

// -----

// expected-error @+1 {{cannot export to the shard dialect: the machine views do not nest into one device grid (device strides 2 and 3)}}
module {
  func.func @no_grid(%x: tensor<12x4xf32>) -> tensor<12x4xf32> {
    %r = ppc.relu %x {ppc.strategy = #ppc.strategy<degrees = [3, 1]>} : tensor<12x4xf32>
    %e = ppc.exp %r {ppc.strategy = #ppc.strategy<degrees = [2, 1]>} : tensor<12x4xf32>
    return %e : tensor<12x4xf32>
  }
}

// -----

func.func @conv(%x: tensor<1x3x8x8xf32>, %w: tensor<4x3x3x3xf32>) -> tensor<1x4x6x6xf32> {
  // expected-error @+1 {{cannot export 'ppc.conv2d' to the shard dialect}}
  %c = ppc.conv2d %x, %w : (tensor<1x3x8x8xf32>, tensor<4x3x3x3xf32>) -> tensor<1x4x6x6xf32>
  return %c : tensor<1x4x6x6xf32>
}

// -----

func.func @unit_broadcast(%x: tensor<8x16xf32>) -> tensor<8x16xf32> {
  %b = ppc.weight "b" : tensor<1x16xf32>
  // expected-error @+1 {{cannot export 'ppc.add' to the shard dialect: operand #1 broadcasts its size-1 dim 0, which upstream sharding does not accept in an indexing map (drop the unit dim instead)}}
  %y = ppc.add %x, %b {ppc.strategy = #ppc.strategy<degrees = [2, 1]>} : (tensor<8x16xf32>, tensor<1x16xf32>) -> tensor<8x16xf32>
  return %y : tensor<8x16xf32>
}
