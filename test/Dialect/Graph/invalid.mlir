// RUN: ppc-opt %s -split-input-file -verify-diagnostics

// One case per verifier error of the ppc dialect: ops first, then the
// strategy attribute.

func.func @f0() {
  // expected-error @+1 {{'ppc.weight' op weight name must not be empty}}
  %0 = ppc.weight "" : tensor<2xf32>
  return
}

// -----

func.func @f1() {
  // expected-error @+1 {{'ppc.weight' op initial value has type 'tensor<3xf32>' but the weight has type 'tensor<2xf32>'}}
  %0 = ppc.weight "w" {value = dense<1.0> : tensor<3xf32>} : tensor<2xf32>
  return
}

// -----

func.func @attention_rank(%q: tensor<8xf32>, %k: tensor<8x4xf32>) {
  // expected-error @+1 {{'ppc.attention' op query must have rank >= 2, got rank 1}}
  %0 = ppc.attention %q, %k, %k : (tensor<8xf32>, tensor<8x4xf32>, tensor<8x4xf32>) -> tensor<8xf32>
  return
}

// -----

func.func @attention_key_rank(%q: tensor<2x8x4xf32>, %k: tensor<8x4xf32>) {
  // expected-error @+1 {{'ppc.attention' op key must have rank 3, got rank 2}}
  %0 = ppc.attention %q, %k, %q : (tensor<2x8x4xf32>, tensor<8x4xf32>, tensor<2x8x4xf32>) -> tensor<2x8x4xf32>
  return
}

// -----

func.func @attention_value_rank(%q: tensor<2x8x4xf32>, %v: tensor<8x4xf32>) {
  // expected-error @+1 {{'ppc.attention' op value must have rank 3, got rank 2}}
  %0 = ppc.attention %q, %q, %v : (tensor<2x8x4xf32>, tensor<2x8x4xf32>, tensor<8x4xf32>) -> tensor<2x8x4xf32>
  return
}

// -----

func.func @attention_types(%q: tensor<8x4xf32>, %k: tensor<8x4xf16>) {
  // expected-error @+1 {{'ppc.attention' op element types differ: operand #0 has 'f32' but operand #1 has 'f16'}}
  %0 = ppc.attention %q, %k, %q : (tensor<8x4xf32>, tensor<8x4xf16>, tensor<8x4xf32>) -> tensor<8x4xf32>
  return
}

// -----

func.func @attention_zigzag_negative(%q: tensor<8x4xf32>) {
  // expected-error @+1 {{'ppc.attention' op zigzag -1 must not be negative}}
  %0 = ppc.attention %q, %q, %q {causal = true, zigzag = -1 : i64} : (tensor<8x4xf32>, tensor<8x4xf32>, tensor<8x4xf32>) -> tensor<8x4xf32>
  return
}

// -----

func.func @attention_zigzag_not_causal(%q: tensor<8x4xf32>) {
  // expected-error @+1 {{'ppc.attention' op zigzag 2 orders a causal mask; the op is not causal}}
  %0 = ppc.attention %q, %q, %q {zigzag = 2 : i64} : (tensor<8x4xf32>, tensor<8x4xf32>, tensor<8x4xf32>) -> tensor<8x4xf32>
  return
}

// -----

func.func @attention_zigzag_chunks(%q: tensor<8x4xf32>) {
  // expected-error @+1 {{'ppc.attention' op zigzag 3 needs as many keys (8) as queries (8), a multiple of 6}}
  %0 = ppc.attention %q, %q, %q {causal = true, zigzag = 3 : i64} : (tensor<8x4xf32>, tensor<8x4xf32>, tensor<8x4xf32>) -> tensor<8x4xf32>
  return
}

// -----

func.func @attention_zigzag_keys(%q: tensor<8x4xf32>, %k: tensor<16x4xf32>) {
  // expected-error @+1 {{'ppc.attention' op zigzag 2 needs as many keys (16) as queries (8), a multiple of 4}}
  %0 = ppc.attention %q, %k, %k {causal = true, zigzag = 2 : i64} : (tensor<8x4xf32>, tensor<16x4xf32>, tensor<16x4xf32>) -> tensor<8x4xf32>
  return
}

// -----

func.func @attention_head_size(%q: tensor<2x8x4xf32>, %k: tensor<2x16x5xf32>, %v: tensor<2x16x4xf32>) {
  // expected-error @+1 {{'ppc.attention' op key has shape [2, 16, 5] but expected [2, 16, 4]: dim 2 is 5, expected 4}}
  %0 = ppc.attention %q, %k, %v : (tensor<2x8x4xf32>, tensor<2x16x5xf32>, tensor<2x16x4xf32>) -> tensor<2x8x4xf32>
  return
}

// -----

func.func @attention_layout(%q: tensor<2x8x4x4xf32>) {
  // expected-error @+1 {{'ppc.attention' op 'layout' is 'sbhd'; expected one of 'bhsd', 'bshd'}}
  %0 = ppc.attention %q, %q, %q {layout = "sbhd"} : (tensor<2x8x4x4xf32>, tensor<2x8x4x4xf32>, tensor<2x8x4x4xf32>) -> tensor<2x8x4x4xf32>
  return
}

// -----

func.func @attention_bshd_rank(%q: tensor<2x8x4xf32>) {
  // expected-error @+1 {{'ppc.attention' op query must have rank 4, got rank 3}}
  %0 = ppc.attention %q, %q, %q {layout = "bshd"} : (tensor<2x8x4xf32>, tensor<2x8x4xf32>, tensor<2x8x4xf32>) -> tensor<2x8x4xf32>
  return
}

// -----

// The heads are dim 2 of every operand: a key whose dim 2 differs from the
// query's is refused, in the shape as written.
func.func @attention_bshd_heads(%q: tensor<2x8x4x16xf32>, %k: tensor<2x12x3x16xf32>, %v: tensor<2x12x4x16xf32>) {
  // expected-error @+1 {{'ppc.attention' op key has shape [2, 12, 3, 16] but expected [2, 12, 4, 16]: dim 2 is 3, expected 4}}
  %0 = ppc.attention %q, %k, %v {layout = "bshd"} : (tensor<2x8x4x16xf32>, tensor<2x12x3x16xf32>, tensor<2x12x4x16xf32>) -> tensor<2x8x4x16xf32>
  return
}

// -----

func.func @attention_bshd_result(%q: tensor<2x8x4x16xf32>, %k: tensor<2x12x4x16xf32>) {
  // expected-error @+1 {{'ppc.attention' op result has shape [2, 4, 8, 16] but expected [2, 8, 4, 16]: dim 1 is 4, expected 8}}
  %0 = ppc.attention %q, %k, %k {layout = "bshd"} : (tensor<2x8x4x16xf32>, tensor<2x12x4x16xf32>, tensor<2x12x4x16xf32>) -> tensor<2x4x8x16xf32>
  return
}

// -----

func.func @attention_batch(%q: tensor<2x8x4xf32>, %k: tensor<3x16x4xf32>) {
  // expected-error @+1 {{'ppc.attention' op key has shape [3, 16, 4] but expected [2, 16, 4]: dim 0 is 3, expected 2}}
  %0 = ppc.attention %q, %k, %k : (tensor<2x8x4xf32>, tensor<3x16x4xf32>, tensor<3x16x4xf32>) -> tensor<2x8x4xf32>
  return
}

// -----

func.func @attention_value_length(%q: tensor<2x8x4xf32>, %k: tensor<2x16x4xf32>, %v: tensor<2x12x4xf32>) {
  // expected-error @+1 {{'ppc.attention' op value has shape [2, 12, 4] but expected [2, 16, 4]: dim 1 is 12, expected 16}}
  %0 = ppc.attention %q, %k, %v : (tensor<2x8x4xf32>, tensor<2x16x4xf32>, tensor<2x12x4xf32>) -> tensor<2x8x4xf32>
  return
}

// -----

func.func @attention_result(%q: tensor<2x8x4xf32>, %k: tensor<2x16x4xf32>, %v: tensor<2x16x6xf32>) {
  // expected-error @+1 {{'ppc.attention' op result has shape [2, 8, 4] but expected [2, 8, 6]: dim 2 is 4, expected 6}}
  %0 = ppc.attention %q, %k, %v : (tensor<2x8x4xf32>, tensor<2x16x4xf32>, tensor<2x16x6xf32>) -> tensor<2x8x4xf32>
  return
}

// -----

func.func @attention_scale(%q: tensor<8x4xf32>) {
  // expected-error @+1 {{'ppc.attention' op scale inf must be finite}}
  %0 = ppc.attention %q, %q, %q {scale = 0x7FF0000000000000 : f64} : (tensor<8x4xf32>, tensor<8x4xf32>, tensor<8x4xf32>) -> tensor<8x4xf32>
  return
}

// -----

func.func @attention_ratio(%q: tensor<8x4xf32>) {
  // expected-error @+1 {{'ppc.attention' op ratio 1 must be in [0, 1)}}
  %0 = ppc.attention %q, %q, %q {ratio = 1.0 : f64} : (tensor<8x4xf32>, tensor<8x4xf32>, tensor<8x4xf32>) -> tensor<8x4xf32>
  return
}

// -----

func.func @f2(%a: tensor<8xf32>, %b: tensor<8x4xf32>) {
  // expected-error @+1 {{'ppc.matmul' op lhs must have rank >= 2, got rank 1}}
  %0 = ppc.matmul %a, %b : (tensor<8xf32>, tensor<8x4xf32>) -> tensor<4xf32>
  return
}

// -----

func.func @f3(%a: tensor<8x64xf32>, %b: tensor<32x16xf32>) {
  // expected-error @+1 {{'ppc.matmul' op contraction dims differ: lhs has 64, rhs has 32}}
  %0 = ppc.matmul %a, %b : (tensor<8x64xf32>, tensor<32x16xf32>) -> tensor<8x16xf32>
  return
}

// -----

func.func @f4(%a: tensor<8x64xf32>, %b: tensor<16x32xf32>) {
  // expected-error @+1 {{'ppc.matmul' op contraction dims differ: lhs has 64, rhs has 32}}
  %0 = ppc.matmul %a, %b {transpose_rhs = true} : (tensor<8x64xf32>, tensor<16x32xf32>) -> tensor<8x16xf32>
  return
}

// -----

func.func @f5(%a: tensor<2x8x4xf32>, %b: tensor<3x4x5xf32>) {
  // expected-error @+1 {{'ppc.matmul' op shapes are not broadcast-compatible: lhs dim 0 is 2, rhs dim 0 is 3}}
  %0 = ppc.matmul %a, %b : (tensor<2x8x4xf32>, tensor<3x4x5xf32>) -> tensor<2x8x5xf32>
  return
}

// -----

func.func @f6(%a: tensor<2x8x4xf32>, %b: tensor<4x5xf32>) {
  // expected-error @+1 {{'ppc.matmul' op result has shape [2, 8, 6] but expected [2, 8, 5]: dim 2 is 6, expected 5}}
  %0 = ppc.matmul %a, %b : (tensor<2x8x4xf32>, tensor<4x5xf32>) -> tensor<2x8x6xf32>
  return
}

// -----

func.func @f7(%a: tensor<8x4xf32>, %b: tensor<4x5xf16>) {
  // expected-error @+1 {{'ppc.matmul' op element types differ: operand #0 has 'f32' but operand #1 has 'f16'}}
  %0 = ppc.matmul %a, %b : (tensor<8x4xf32>, tensor<4x5xf16>) -> tensor<8x5xf32>
  return
}

// -----

func.func @f8(%x: tensor<4x8xf32>, %w: tensor<8xf32>) {
  // expected-error @+1 {{'ppc.linear' op weight must have rank 2, got rank 1}}
  %0 = ppc.linear %x, %w : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
  return
}

// -----

func.func @f9(%x: tensor<4x8xf32>, %w: tensor<16x8xf32>) {
  // expected-error @+1 {{'ppc.linear' op contraction dims differ: input has 8, weight has 16 (weight is [K, N])}}
  %0 = ppc.linear %x, %w : (tensor<4x8xf32>, tensor<16x8xf32>) -> tensor<4x8xf32>
  return
}

// -----

func.func @f10(%x: tensor<4x8xf32>, %w: tensor<8x16xf32>) {
  // expected-error @+1 {{'ppc.linear' op contraction dims differ: input has 8, weight has 16 (weight is [N, K])}}
  %0 = ppc.linear %x, %w {transpose_weight = true} : (tensor<4x8xf32>, tensor<8x16xf32>) -> tensor<4x8xf32>
  return
}

// -----

func.func @f11(%x: tensor<4x8xf32>, %w: tensor<8x16xf32>, %b: tensor<8xf32>) {
  // expected-error @+1 {{'ppc.linear' op bias has shape [8] but expected [16]: dim 0 is 8, expected 16}}
  %0 = ppc.linear %x, %w, %b : (tensor<4x8xf32>, tensor<8x16xf32>, tensor<8xf32>) -> tensor<4x16xf32>
  return
}

// -----

func.func @f12(%x: tensor<4x8xf32>, %w: tensor<8x16xf32>) {
  // expected-error @+1 {{'ppc.linear' op result has rank 3 (shape [4, 2, 16]) but expected rank 2 (shape [4, 16])}}
  %0 = ppc.linear %x, %w : (tensor<4x8xf32>, tensor<8x16xf32>) -> tensor<4x2x16xf32>
  return
}

// -----

func.func @f13(%x: tensor<2x8x16xf32>, %w: tensor<4x8x3x3xf32>) {
  // expected-error @+1 {{'ppc.conv2d' op input must have rank 4, got rank 3}}
  %0 = ppc.conv2d %x, %w : (tensor<2x8x16xf32>, tensor<4x8x3x3xf32>) -> tensor<2x4x14x14xf32>
  return
}

// -----

func.func @f14(%x: tensor<2x8x16x16xf32>, %w: tensor<4x8x3x3xf32>) {
  // expected-error @+1 {{'ppc.conv2d' op 'strides' must have 2 entries, got 1}}
  %0 = ppc.conv2d %x, %w {strides = array<i64: 1>} : (tensor<2x8x16x16xf32>, tensor<4x8x3x3xf32>) -> tensor<2x4x14x14xf32>
  return
}

// -----

func.func @f15(%x: tensor<2x8x16x16xf32>, %w: tensor<4x8x3x3xf32>) {
  // expected-error @+1 {{'ppc.conv2d' op 'strides' entry 1 is 0; expected >= 1}}
  %0 = ppc.conv2d %x, %w {strides = array<i64: 1, 0>} : (tensor<2x8x16x16xf32>, tensor<4x8x3x3xf32>) -> tensor<2x4x14x14xf32>
  return
}

// -----

func.func @f16(%x: tensor<2x8x16x16xf32>, %w: tensor<4x8x3x3xf32>) {
  // expected-error @+1 {{'ppc.conv2d' op 'pads' entry 1 is -1; expected >= 0}}
  %0 = ppc.conv2d %x, %w {pads = array<i64: 0, -1, 0, 0>} : (tensor<2x8x16x16xf32>, tensor<4x8x3x3xf32>) -> tensor<2x4x14x14xf32>
  return
}

// -----

func.func @f17(%x: tensor<2x8x16x16xf32>, %w: tensor<4x8x3x3xf32>) {
  // expected-error @+1 {{'ppc.conv2d' op 'dilations' entry 0 is 0; expected >= 1}}
  %0 = ppc.conv2d %x, %w {dilations = array<i64: 0, 1>} : (tensor<2x8x16x16xf32>, tensor<4x8x3x3xf32>) -> tensor<2x4x14x14xf32>
  return
}

// -----

func.func @f18(%x: tensor<2x8x16x16xf32>, %w: tensor<4x8x3x3xf32>) {
  // expected-error @+1 {{'ppc.conv2d' op groups is 0; expected >= 1}}
  %0 = ppc.conv2d %x, %w {groups = 0 : i64} : (tensor<2x8x16x16xf32>, tensor<4x8x3x3xf32>) -> tensor<2x4x14x14xf32>
  return
}

// -----

func.func @f19(%x: tensor<2x8x16x16xf32>, %w: tensor<6x2x3x3xf32>) {
  // expected-error @+1 {{'ppc.conv2d' op input channels 8 are not divisible by groups 3}}
  %0 = ppc.conv2d %x, %w {groups = 3 : i64} : (tensor<2x8x16x16xf32>, tensor<6x2x3x3xf32>) -> tensor<2x6x14x14xf32>
  return
}

// -----

func.func @f20(%x: tensor<2x8x16x16xf32>, %w: tensor<6x2x3x3xf32>) {
  // expected-error @+1 {{'ppc.conv2d' op output channels 6 are not divisible by groups 4}}
  %0 = ppc.conv2d %x, %w {groups = 4 : i64} : (tensor<2x8x16x16xf32>, tensor<6x2x3x3xf32>) -> tensor<2x6x14x14xf32>
  return
}

// -----

func.func @f21(%x: tensor<2x8x16x16xf32>, %w: tensor<4x8x3x3xf32>) {
  // expected-error @+1 {{'ppc.conv2d' op weight dim 1 is 8 but input has 8 channels in 2 groups (expected 4)}}
  %0 = ppc.conv2d %x, %w {groups = 2 : i64} : (tensor<2x8x16x16xf32>, tensor<4x8x3x3xf32>) -> tensor<2x4x14x14xf32>
  return
}

// -----

func.func @f22(%x: tensor<2x8x16x16xf32>, %w: tensor<4x8x3x3xf32>, %b: tensor<8xf32>) {
  // expected-error @+1 {{'ppc.conv2d' op bias has shape [8] but expected [4]: dim 0 is 8, expected 4}}
  %0 = ppc.conv2d %x, %w, %b  : (tensor<2x8x16x16xf32>, tensor<4x8x3x3xf32>, tensor<8xf32>) -> tensor<2x4x14x14xf32>
  return
}

// -----

func.func @f23(%x: tensor<2x8x16x16xf32>, %w: tensor<4x8x3x3xf32>) {
  // expected-error @+1 {{'ppc.conv2d' op padded input dim 2 is 16 but the dilated kernel spans 17}}
  %0 = ppc.conv2d %x, %w {dilations = array<i64: 8, 8>} : (tensor<2x8x16x16xf32>, tensor<4x8x3x3xf32>) -> tensor<2x4x1x1xf32>
  return
}

// -----

func.func @f24(%x: tensor<2x8x16x16xf32>, %w: tensor<4x8x3x3xf32>) {
  // expected-error @+1 {{'ppc.conv2d' op result has shape [2, 4, 9, 8] but expected [2, 4, 8, 8]: dim 2 is 9, expected 8}}
  %0 = ppc.conv2d %x, %w {pads = array<i64: 1, 1, 1, 1>, strides = array<i64: 2, 2>} : (tensor<2x8x16x16xf32>, tensor<4x8x3x3xf32>) -> tensor<2x4x9x8xf32>
  return
}

// -----

func.func @f25(%x: tensor<2x8x16x16xf32>, %w: tensor<4x8x3x3xf32>) {
  // expected-error @+1 {{'ppc.conv2d' op element types differ: operand #0 has 'f32' but result #0 has 'f16'}}
  %0 = ppc.conv2d %x, %w  : (tensor<2x8x16x16xf32>, tensor<4x8x3x3xf32>) -> tensor<2x4x14x14xf16>
  return
}

// -----

func.func @convt0(%x: tensor<2x4x5xf32>, %w: tensor<4x3x3x3xf32>) {
  // expected-error @+1 {{'ppc.conv_transpose2d' op input must have rank 4, got rank 3}}
  %0 = ppc.conv_transpose2d %x, %w : (tensor<2x4x5xf32>, tensor<4x3x3x3xf32>) -> tensor<2x3x7x7xf32>
  return
}

// -----

func.func @convt1(%x: tensor<2x4x5x5xf32>, %w: tensor<4x3x3x3xf32>) {
  // expected-error @+1 {{'ppc.conv_transpose2d' op 'output_padding' must have 2 entries, got 1}}
  %0 = ppc.conv_transpose2d %x, %w {output_padding = array<i64: 1>} : (tensor<2x4x5x5xf32>, tensor<4x3x3x3xf32>) -> tensor<2x3x7x7xf32>
  return
}

// -----

func.func @convt2(%x: tensor<2x4x5x5xf32>, %w: tensor<4x3x3x3xf32>) {
  // expected-error @+1 {{'ppc.conv_transpose2d' op 'output_padding' entry 0 is -1; expected >= 0}}
  %0 = ppc.conv_transpose2d %x, %w {output_padding = array<i64: -1, 0>} : (tensor<2x4x5x5xf32>, tensor<4x3x3x3xf32>) -> tensor<2x3x6x7xf32>
  return
}

// -----

func.func @convt3(%x: tensor<2x4x5x5xf32>, %w: tensor<4x3x3x3xf32>) {
  // expected-error @+1 {{'ppc.conv_transpose2d' op 'strides' entry 0 is 0; expected >= 1}}
  %0 = ppc.conv_transpose2d %x, %w {strides = array<i64: 0, 1>} : (tensor<2x4x5x5xf32>, tensor<4x3x3x3xf32>) -> tensor<2x3x7x7xf32>
  return
}

// -----

func.func @convt4(%x: tensor<2x4x5x5xf32>, %w: tensor<4x3x3x3xf32>) {
  // expected-error @+1 {{'ppc.conv_transpose2d' op groups is 0; expected >= 1}}
  %0 = ppc.conv_transpose2d %x, %w {groups = 0 : i64} : (tensor<2x4x5x5xf32>, tensor<4x3x3x3xf32>) -> tensor<2x3x7x7xf32>
  return
}

// -----

func.func @convt5(%x: tensor<2x4x5x5xf32>, %w: tensor<4x3x3x3xf32>) {
  // expected-error @+1 {{'ppc.conv_transpose2d' op input channels 4 are not divisible by groups 3}}
  %0 = ppc.conv_transpose2d %x, %w {groups = 3 : i64} : (tensor<2x4x5x5xf32>, tensor<4x3x3x3xf32>) -> tensor<2x9x7x7xf32>
  return
}

// -----

func.func @convt6(%x: tensor<2x4x5x5xf32>, %w: tensor<2x3x3x3xf32>) {
  // expected-error @+1 {{'ppc.conv_transpose2d' op weight dim 0 is 2 but input has 4 channels (weight is [C, F / groups, KH, KW])}}
  %0 = ppc.conv_transpose2d %x, %w : (tensor<2x4x5x5xf32>, tensor<2x3x3x3xf32>) -> tensor<2x3x7x7xf32>
  return
}

// -----

func.func @convt7(%x: tensor<2x4x5x5xf32>, %w: tensor<4x3x3x3xf32>, %b: tensor<3xf32>) {
  // expected-error @+1 {{'ppc.conv_transpose2d' op bias has shape [3] but expected [6]: dim 0 is 3, expected 6}}
  %0 = ppc.conv_transpose2d %x, %w, %b {groups = 2 : i64} : (tensor<2x4x5x5xf32>, tensor<4x3x3x3xf32>, tensor<3xf32>) -> tensor<2x6x7x7xf32>
  return
}

// -----

func.func @convt8(%x: tensor<2x4x1x1xf32>, %w: tensor<4x3x3x3xf32>) {
  // expected-error @+1 {{'ppc.conv_transpose2d' op result dim 2 is 0: the pads crop the whole scatter}}
  %0 = ppc.conv_transpose2d %x, %w {pads = array<i64: 2, 0, 1, 0>} : (tensor<2x4x1x1xf32>, tensor<4x3x3x3xf32>) -> tensor<2x3x1x3xf32>
  return
}

// -----

func.func @convt9(%x: tensor<2x4x5x5xf32>, %w: tensor<4x3x3x3xf32>) {
  // expected-error @+1 {{'ppc.conv_transpose2d' op result has shape [2, 3, 7, 7] but expected [2, 3, 12, 12]: dim 2 is 7, expected 12}}
  %0 = ppc.conv_transpose2d %x, %w {strides = array<i64: 2, 2>, output_padding = array<i64: 1, 1>} : (tensor<2x4x5x5xf32>, tensor<4x3x3x3xf32>) -> tensor<2x3x7x7xf32>
  return
}

// -----

func.func @f26(%x: tensor<1x4x8x8xf32>) {
  // expected-error @+1 {{'ppc.max_pool2d' op 'kernel' must have 2 entries, got 1}}
  %0 = ppc.max_pool2d %x {kernel = array<i64: 3>} : tensor<1x4x8x8xf32> -> tensor<1x4x6x6xf32>
  return
}

// -----

func.func @f27(%x: tensor<1x4x8x8xf32>) {
  // expected-error @+1 {{'ppc.avg_pool2d' op 'kernel' entry 0 is 0; expected >= 1}}
  %0 = ppc.avg_pool2d %x {kernel = array<i64: 0, 3>} : tensor<1x4x8x8xf32> -> tensor<1x4x6x6xf32>
  return
}

// -----

func.func @f28(%x: tensor<1x4x8x8xf32>) {
  // expected-error @+1 {{'ppc.max_pool2d' op padded input dim 3 is 8 but the kernel spans 9}}
  %0 = ppc.max_pool2d %x {kernel = array<i64: 3, 9>} : tensor<1x4x8x8xf32> -> tensor<1x4x6x1xf32>
  return
}

// -----

func.func @f29(%x: tensor<1x4x8x8xf32>) {
  // expected-error @+1 {{'ppc.max_pool2d' op result has shape [1, 4, 4, 4] but expected [1, 4, 3, 3]: dim 2 is 4, expected 3}}
  %0 = ppc.max_pool2d %x {kernel = array<i64: 3, 3>, strides = array<i64: 2, 2>} : tensor<1x4x8x8xf32> -> tensor<1x4x4x4xf32>
  return
}

// -----

func.func @f30(%x: tensor<1x4x8x8xf32>) {
  // expected-error @+1 {{'ppc.avg_pool2d' op result has shape [1, 4, 3, 3] but expected [1, 4, 4, 4]: dim 2 is 3, expected 4}}
  %0 = ppc.avg_pool2d %x {kernel = array<i64: 3, 3>, strides = array<i64: 2, 2>, ceil_mode = true} : tensor<1x4x8x8xf32> -> tensor<1x4x3x3xf32>
  return
}

// -----

func.func @f31(%x: tensor<1x1x5x5xf32>) {
  // expected-error @+1 {{'ppc.max_pool2d' op result has shape [1, 1, 4, 4] but expected [1, 1, 3, 3]: dim 2 is 4, expected 3}}
  %0 = ppc.max_pool2d %x {kernel = array<i64: 2, 2>, strides = array<i64: 2, 2>, pads = array<i64: 0, 0, 1, 1>, ceil_mode = true} : tensor<1x1x5x5xf32> -> tensor<1x1x4x4xf32>
  return
}

// -----

func.func @f32(%x: tensor<2x4xf32>) {
  // expected-error @+1 {{'ppc.global_avg_pool' op input must have rank >= 3, got rank 2}}
  %0 = ppc.global_avg_pool %x : tensor<2x4xf32> -> tensor<2x4xf32>
  return
}

// -----

func.func @f33(%x: tensor<1x4x8x8xf32>) {
  // expected-error @+1 {{'ppc.global_avg_pool' op result has rank 2 (shape [1, 4]) but expected rank 4 (shape [1, 4, 1, 1])}}
  %0 = ppc.global_avg_pool %x : tensor<1x4x8x8xf32> -> tensor<1x4xf32>
  return
}

// -----

func.func @resize0(%x: tensor<4x8x8xf32>) {
  // expected-error @+1 {{'ppc.resize' op input must have rank 4, got rank 3}}
  %0 = ppc.resize %x {scales = array<f64: 2.0, 2.0>} : tensor<4x8x8xf32> -> tensor<4x16x16xf32>
  return
}

// -----

func.func @resize1(%x: tensor<1x4x8x8xf32>) {
  // expected-error @+1 {{'ppc.resize' op element types differ: operand #0 has 'f32' but result #0 has 'f16'}}
  %0 = ppc.resize %x {scales = array<f64: 2.0, 2.0>} : tensor<1x4x8x8xf32> -> tensor<1x4x16x16xf16>
  return
}

// -----

func.func @resize2(%x: tensor<1x4x8x8xf32>) {
  // expected-error @+1 {{'ppc.resize' op 'mode' is 'bilinear'; expected one of 'nearest', 'linear', 'cubic'}}
  %0 = ppc.resize %x {mode = "bilinear", scales = array<f64: 2.0, 2.0>} : tensor<1x4x8x8xf32> -> tensor<1x4x16x16xf32>
  return
}

// -----

func.func @resize3(%x: tensor<1x4x8x8xf32>) {
  // expected-error @+1 {{'ppc.resize' op 'coordinate_transformation_mode' is 'corners'; expected one of 'half_pixel', 'pytorch_half_pixel', 'align_corners', 'asymmetric', 'tf_half_pixel_for_nn', 'tf_crop_and_resize'}}
  %0 = ppc.resize %x {coordinate_transformation_mode = "corners", scales = array<f64: 2.0, 2.0>} : tensor<1x4x8x8xf32> -> tensor<1x4x16x16xf32>
  return
}

// -----

func.func @resize4(%x: tensor<1x4x8x8xf32>) {
  // expected-error @+1 {{'ppc.resize' op 'nearest_mode' is 'round'; expected one of 'round_prefer_floor', 'round_prefer_ceil', 'floor', 'ceil'}}
  %0 = ppc.resize %x {nearest_mode = "round", scales = array<f64: 2.0, 2.0>} : tensor<1x4x8x8xf32> -> tensor<1x4x16x16xf32>
  return
}

// -----

func.func @resize5(%x: tensor<1x4x8x8xf32>) {
  // expected-error @+1 {{'ppc.resize' op 'scales' must have 2 entries (H, W), got 3}}
  %0 = ppc.resize %x {scales = array<f64: 2.0, 2.0, 1.0>} : tensor<1x4x8x8xf32> -> tensor<1x4x16x16xf32>
  return
}

// -----

func.func @resize6(%x: tensor<1x4x8x8xf32>) {
  // expected-error @+1 {{'ppc.resize' op 'scales' entry 1 is 0.000000e+00; expected a finite scale > 0}}
  %0 = ppc.resize %x {scales = array<f64: 2.0, 0.0>} : tensor<1x4x8x8xf32> -> tensor<1x4x16x16xf32>
  return
}

// -----

func.func @resize7(%x: tensor<1x4x8x8xf32>) {
  // expected-error @+1 {{'ppc.resize' op 'tf_crop_and_resize' needs a 'roi'}}
  %0 = ppc.resize %x {coordinate_transformation_mode = "tf_crop_and_resize", scales = array<f64: 2.0, 2.0>} : tensor<1x4x8x8xf32> -> tensor<1x4x16x16xf32>
  return
}

// -----

func.func @resize8(%x: tensor<1x4x8x8xf32>) {
  // expected-error @+1 {{'ppc.resize' op 'roi' is only used by 'tf_crop_and_resize'}}
  %0 = ppc.resize %x {roi = array<f64: 0.0, 0.0, 1.0, 1.0>, scales = array<f64: 2.0, 2.0>} : tensor<1x4x8x8xf32> -> tensor<1x4x16x16xf32>
  return
}

// -----

func.func @resize9(%x: tensor<1x4x8x8xf32>) {
  // expected-error @+1 {{'ppc.resize' op 'roi' must have 4 entries (loH, loW, hiH, hiW), got 2}}
  %0 = ppc.resize %x {coordinate_transformation_mode = "tf_crop_and_resize", roi = array<f64: 0.0, 1.0>, scales = array<f64: 2.0, 2.0>} : tensor<1x4x8x8xf32> -> tensor<1x4x16x16xf32>
  return
}

// -----

func.func @resize10(%x: tensor<1x4x8x8xf32>) {
  // expected-error @+1 {{'ppc.resize' op result has shape [1, 4, 16, 15] but expected [1, 4, 16, 16]: dim 3 is 15, expected 16}}
  %0 = ppc.resize %x {scales = array<f64: 2.0, 2.0>} : tensor<1x4x8x8xf32> -> tensor<1x4x16x15xf32>
  return
}

// -----

func.func @resize11(%x: tensor<1x4x8x8xf32>) {
  // expected-error @+1 {{'ppc.resize' op result has shape [1, 3, 16, 16] but expected [1, 4, 16, 16]: dim 1 is 3, expected 4}}
  %0 = ppc.resize %x {scales = array<f64: 2.0, 2.0>} : tensor<1x4x8x8xf32> -> tensor<1x3x16x16xf32>
  return
}

// -----

func.func @f34(%x: tensor<4xf32>, %c: tensor<4xf32>) {
  // expected-error @+1 {{'ppc.batch_norm' op input must have rank >= 2, got rank 1}}
  %0 = ppc.batch_norm %x, %c, %c, %c, %c  : (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return
}

// -----

func.func @f35(%x: tensor<2x4x3x3xf32>, %c: tensor<3xf32>) {
  // expected-error @+1 {{'ppc.batch_norm' op scale has shape [3] but expected [4]: dim 0 is 3, expected 4}}
  %0 = ppc.batch_norm %x, %c, %c, %c, %c  : (tensor<2x4x3x3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>) -> tensor<2x4x3x3xf32>
  return
}

// -----

func.func @f36(%x: tensor<2x4x3x3xf32>, %c: tensor<4xf32>, %v: tensor<4x1xf32>) {
  // expected-error @+1 {{'ppc.batch_norm' op variance has rank 2 (shape [4, 1]) but expected rank 1 (shape [4])}}
  %0 = ppc.batch_norm %x, %c, %c, %c, %v : (tensor<2x4x3x3xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4x1xf32>) -> tensor<2x4x3x3xf32>
  return
}

// -----

func.func @f37(%x: tensor<2x4x3x3xf32>, %c: tensor<4xf32>) {
  // expected-error @+1 {{'ppc.batch_norm' op epsilon -1 must be >= 0}}
  %0 = ppc.batch_norm %x, %c, %c, %c, %c {epsilon = -1.0 : f64} : (tensor<2x4x3x3xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) -> tensor<2x4x3x3xf32>
  return
}

// -----

func.func @f38(%x: tensor<2x4x3x3xf32>, %c: tensor<4xf32>) {
  // expected-error @+1 {{'ppc.batch_norm' op momentum 1.5 must be in [0, 1]}}
  %0 = ppc.batch_norm %x, %c, %c, %c, %c {momentum = 1.5 : f64} : (tensor<2x4x3x3xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) -> tensor<2x4x3x3xf32>
  return
}

// -----

func.func @f39(%x: tensor<2x4x3x3xf32>, %c: tensor<4xf32>) {
  // expected-error @+1 {{'ppc.batch_norm' op result has shape [2, 4, 3, 4] but expected [2, 4, 3, 3]: dim 3 is 4, expected 3}}
  %0 = ppc.batch_norm %x, %c, %c, %c, %c  : (tensor<2x4x3x3xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) -> tensor<2x4x3x4xf32>
  return
}

// -----

func.func @f40(%x: tensor<2x5x16xf32>, %s: tensor<16xf32>) {
  // expected-error @+1 {{'ppc.layer_norm' op axis 3 is out of range for rank 3 (expected -3 <= axis < 3)}}
  %0 = ppc.layer_norm %x, %s {axis = 3 : i64} : (tensor<2x5x16xf32>, tensor<16xf32>) -> tensor<2x5x16xf32>
  return
}

// -----

func.func @f41(%x: tensor<2x5x16xf32>, %s: tensor<16xf32>) {
  // expected-error @+1 {{'ppc.layer_norm' op scale has rank 1 (shape [16]) but expected rank 2 (shape [5, 16])}}
  %0 = ppc.layer_norm %x, %s {axis = 1 : i64} : (tensor<2x5x16xf32>, tensor<16xf32>) -> tensor<2x5x16xf32>
  return
}

// -----

func.func @f42(%x: tensor<2x5x16xf32>, %s: tensor<16xf32>, %b: tensor<15xf32>) {
  // expected-error @+1 {{'ppc.layer_norm' op bias has shape [15] but expected [16]: dim 0 is 15, expected 16}}
  %0 = ppc.layer_norm %x, %s, %b : (tensor<2x5x16xf32>, tensor<16xf32>, tensor<15xf32>) -> tensor<2x5x16xf32>
  return
}

// -----

func.func @f43(%x: tensor<2x5x16xf32>, %s: tensor<16xf32>) {
  // expected-error @+1 {{'ppc.layer_norm' op epsilon -0.5 must be >= 0}}
  %0 = ppc.layer_norm %x, %s {epsilon = -0.5 : f64} : (tensor<2x5x16xf32>, tensor<16xf32>) -> tensor<2x5x16xf32>
  return
}

// -----

func.func @f44(%x: tensor<2x5x16xf32>, %s: tensor<16xf32>) {
  // expected-error @+1 {{'ppc.layer_norm' op result has shape [2, 6, 16] but expected [2, 5, 16]: dim 1 is 6, expected 5}}
  %0 = ppc.layer_norm %x, %s : (tensor<2x5x16xf32>, tensor<16xf32>) -> tensor<2x6x16xf32>
  return
}

// -----

func.func @f45(%x: tensor<f32>, %s: tensor<f32>) {
  // expected-error @+1 {{'ppc.layer_norm' op input must have rank >= 1, got rank 0}}
  %0 = ppc.layer_norm %x, %s : (tensor<f32>, tensor<f32>) -> tensor<f32>
  return
}

// -----

func.func @f46(%x: tensor<4x8xf32>) {
  // expected-error @+1 {{'ppc.softmax' op axis -3 is out of range for rank 2 (expected -2 <= axis < 2)}}
  %0 = ppc.softmax %x {axis = -3 : i64} : tensor<4x8xf32>
  return
}

// -----

func.func @f47(%x: tensor<4x8xf32>) {
  // expected-error @+1 {{'ppc.log_softmax' op axis 2 is out of range for rank 2 (expected -2 <= axis < 2)}}
  %0 = ppc.log_softmax %x {axis = 2 : i64} : tensor<4x8xf32>
  return
}

// -----

func.func @f48(%x: tensor<f32>) {
  // expected-error @+1 {{'ppc.softmax' op input must have rank >= 1, got rank 0}}
  %0 = ppc.softmax %x : tensor<f32>
  return
}

// -----

func.func @f49(%a: tensor<4x3xf32>, %b: tensor<4xf32>) {
  // expected-error @+1 {{'ppc.add' op shapes are not broadcast-compatible: lhs dim 1 is 3, rhs dim 0 is 4}}
  %0 = ppc.add %a, %b : (tensor<4x3xf32>, tensor<4xf32>) -> tensor<4x3xf32>
  return
}

// -----

func.func @f50(%a: tensor<4x1xf32>, %b: tensor<3xf32>) {
  // expected-error @+1 {{'ppc.mul' op result has shape [4, 1] but expected [4, 3]: dim 1 is 1, expected 3}}
  %0 = ppc.mul %a, %b : (tensor<4x1xf32>, tensor<3xf32>) -> tensor<4x1xf32>
  return
}

// -----

func.func @f51(%a: tensor<4xf32>, %b: tensor<4xf16>) {
  // expected-error @+1 {{'ppc.sub' op element types differ: operand #0 has 'f32' but operand #1 has 'f16'}}
  %0 = ppc.sub %a, %b : (tensor<4xf32>, tensor<4xf16>) -> tensor<4xf32>
  return
}

// -----

func.func @f52(%x: tensor<4xf32>) {
  // expected-error @+1 {{'ppc.dropout' op ratio 1 must be in [0, 1)}}
  %0 = ppc.dropout %x {ratio = 1.0 : f64} : tensor<4xf32>
  return
}

// -----

func.func @f53(%x: tensor<4xf32>) {
  // expected-error @+1 {{'ppc.dropout' op ratio -0.1 must be in [0, 1)}}
  %0 = ppc.dropout %x {ratio = -0.1 : f64} : tensor<4xf32>
  return
}

// -----

func.func @f54(%x: tensor<2x4xf32>) {
  // expected-error @+1 {{'ppc.broadcast' op input rank 2 exceeds result rank 1}}
  %0 = ppc.broadcast %x : tensor<2x4xf32> -> tensor<4xf32>
  return
}

// -----

func.func @f55(%x: tensor<3x4xf32>) {
  // expected-error @+1 {{'ppc.broadcast' op input dim 0 is 3 but result dim 1 is 6; a broadcast dim must be 1 or equal}}
  %0 = ppc.broadcast %x : tensor<3x4xf32> -> tensor<2x6x4xf32>
  return
}

// -----

func.func @f56(%x: tensor<4xf32>) {
  // expected-error @+1 {{'ppc.broadcast' op element types differ: operand #0 has 'f32' but result #0 has 'f16'}}
  %0 = ppc.broadcast %x : tensor<4xf32> -> tensor<2x4xf16>
  return
}

// -----

func.func @f57(%x: tensor<4x6x8xf32>) {
  // expected-error @+1 {{'ppc.reduce_sum' op expects at least one axis}}
  %0 = ppc.reduce_sum %x {axes = array<i64>} : tensor<4x6x8xf32> -> tensor<4x6x8xf32>
  return
}

// -----

func.func @f58(%x: tensor<4x6x8xf32>) {
  // expected-error @+1 {{'ppc.reduce_mean' op axis 3 is out of range for rank 3 (expected -3 <= axis < 3)}}
  %0 = ppc.reduce_mean %x {axes = array<i64: 3>} : tensor<4x6x8xf32> -> tensor<4x6x8xf32>
  return
}

// -----

func.func @f59(%x: tensor<4x6x8xf32>) {
  // expected-error @+1 {{'ppc.reduce_max' op axis -2 (dim 1) is repeated}}
  %0 = ppc.reduce_max %x {axes = array<i64: 1, -2>} : tensor<4x6x8xf32> -> tensor<4x1x8xf32>
  return
}

// -----

func.func @f60(%x: tensor<4x6x8xf32>) {
  // expected-error @+1 {{'ppc.reduce_sum' op result has rank 2 (shape [4, 8]) but expected rank 3 (shape [4, 1, 8])}}
  %0 = ppc.reduce_sum %x {axes = array<i64: 1>} : tensor<4x6x8xf32> -> tensor<4x8xf32>
  return
}

// -----

func.func @f61(%x: tensor<4x6x8xf32>) {
  // expected-error @+1 {{'ppc.reduce_sum' op result has rank 3 (shape [4, 1, 8]) but expected rank 2 (shape [4, 8])}}
  %0 = ppc.reduce_sum %x {axes = array<i64: 1>, keep_dims = false} : tensor<4x6x8xf32> -> tensor<4x1x8xf32>
  return
}

// -----

func.func @f62(%x: tensor<2x8xf32>) {
  // expected-error @+1 {{'ppc.reshape' op element count differs: input [2, 8] has 16, result [3, 5] has 15}}
  %0 = ppc.reshape %x : tensor<2x8xf32> -> tensor<3x5xf32>
  return
}

// -----

func.func @f63(%x: tensor<2x8xf32>) {
  // expected-error @+1 {{'ppc.reshape' op element types differ: operand #0 has 'f32' but result #0 has 'f16'}}
  %0 = ppc.reshape %x : tensor<2x8xf32> -> tensor<16xf16>
  return
}

// -----

func.func @f64(%x: tensor<2x3x4xf32>) {
  // expected-error @+1 {{'ppc.transpose' op permutation has 2 entries but the input has rank 3}}
  %0 = ppc.transpose %x {permutation = array<i64: 1, 0>} : tensor<2x3x4xf32> -> tensor<3x2x4xf32>
  return
}

// -----

func.func @f65(%x: tensor<2x3x4xf32>) {
  // expected-error @+1 {{'ppc.transpose' op permutation entry 2 is 3; expected 0 <= entry < 3}}
  %0 = ppc.transpose %x {permutation = array<i64: 1, 0, 3>} : tensor<2x3x4xf32> -> tensor<3x2x4xf32>
  return
}

// -----

func.func @f66(%x: tensor<2x3x4xf32>) {
  // expected-error @+1 {{'ppc.transpose' op permutation entry 2 repeats dim 1}}
  %0 = ppc.transpose %x {permutation = array<i64: 1, 0, 1>} : tensor<2x3x4xf32> -> tensor<3x2x3xf32>
  return
}

// -----

func.func @f67(%x: tensor<2x3x4xf32>) {
  // expected-error @+1 {{'ppc.transpose' op result has shape [4, 3, 2] but expected [4, 2, 3]: dim 1 is 3, expected 2}}
  %0 = ppc.transpose %x {permutation = array<i64: 2, 0, 1>} : tensor<2x3x4xf32> -> tensor<4x3x2xf32>
  return
}

// -----

func.func @f68() {
  // expected-error @+1 {{'ppc.concat' op expects at least one input}}
  %0 = ppc.concat {axis = 0 : i64} : () -> tensor<2xf32>
  return
}

// -----

func.func @f69(%a: tensor<2x3xf32>, %b: tensor<2x5xf32>) {
  // expected-error @+1 {{'ppc.concat' op axis 2 is out of range for rank 2 (expected -2 <= axis < 2)}}
  %0 = ppc.concat %a, %b {axis = 2 : i64} : (tensor<2x3xf32>, tensor<2x5xf32>) -> tensor<2x8xf32>
  return
}

// -----

func.func @f70(%a: tensor<2x3xf32>, %b: tensor<5xf32>) {
  // expected-error @+1 {{'ppc.concat' op input #1 has rank 1 but the result has rank 2}}
  %0 = ppc.concat %a, %b {axis = 1 : i64} : (tensor<2x3xf32>, tensor<5xf32>) -> tensor<2x8xf32>
  return
}

// -----

func.func @f71(%a: tensor<2x3xf32>, %b: tensor<3x5xf32>) {
  // expected-error @+1 {{'ppc.concat' op input #1 dim 0 is 3 but the result dim 0 is 2}}
  %0 = ppc.concat %a, %b {axis = 1 : i64} : (tensor<2x3xf32>, tensor<3x5xf32>) -> tensor<2x8xf32>
  return
}

// -----

func.func @f72(%a: tensor<2x3xf32>, %b: tensor<2x5xf32>) {
  // expected-error @+1 {{'ppc.concat' op sizes along axis 1 add up to 8 but the result has 9}}
  %0 = ppc.concat %a, %b {axis = -1 : i64} : (tensor<2x3xf32>, tensor<2x5xf32>) -> tensor<2x9xf32>
  return
}

// -----

func.func @f73(%x: tensor<2x8xf32>) {
  // expected-error @+1 {{'ppc.split' op sizes along axis 1 add up to 7 but the input has 8}}
  %0:2 = ppc.split %x {axis = 1 : i64} : tensor<2x8xf32> -> tensor<2x3xf32>, tensor<2x4xf32>
  return
}

// -----

func.func @f74(%x: tensor<2x8xf32>) {
  // expected-error @+1 {{'ppc.split' op result #1 dim 0 is 3 but the input dim 0 is 2}}
  %0:2 = ppc.split %x {axis = 1 : i64} : tensor<2x8xf32> -> tensor<2x3xf32>, tensor<3x5xf32>
  return
}

// -----

func.func @f75(%x: tensor<2x8xf32>) {
  // expected-error @+1 {{'ppc.split' op element types differ: operand #0 has 'f32' but result #1 has 'f16'}}
  %0:2 = ppc.split %x {axis = 1 : i64} : tensor<2x8xf32> -> tensor<2x3xf32>, tensor<2x5xf16>
  return
}

// -----

func.func @f76(%x: tensor<10x8xf32>) {
  // expected-error @+1 {{'ppc.slice' op 'starts' must have 2 entries, got 1}}
  %0 = ppc.slice %x {starts = array<i64: 0>, steps = array<i64: 1, 1>} : tensor<10x8xf32> -> tensor<10x8xf32>
  return
}

// -----

func.func @f77(%x: tensor<10x8xf32>) {
  // expected-error @+1 {{'ppc.slice' op 'starts' entry 0 is -1; expected >= 0}}
  %0 = ppc.slice %x {starts = array<i64: -1, 0>, steps = array<i64: 1, 1>} : tensor<10x8xf32> -> tensor<1x8xf32>
  return
}

// -----

func.func @f78(%x: tensor<10x8xf32>) {
  // expected-error @+1 {{'ppc.slice' op 'steps' entry 1 is 0; expected >= 1}}
  %0 = ppc.slice %x {starts = array<i64: 0, 0>, steps = array<i64: 1, 0>} : tensor<10x8xf32> -> tensor<10x8xf32>
  return
}

// -----

func.func @f79(%x: tensor<10x8xf32>) {
  // expected-error @+1 {{'ppc.slice' op result rank 1 differs from input rank 2}}
  %0 = ppc.slice %x {starts = array<i64: 0, 0>, steps = array<i64: 1, 1>} : tensor<10x8xf32> -> tensor<80xf32>
  return
}

// -----

func.func @f81(%x: tensor<10x8xf32>) {
  // expected-error @+1 {{'ppc.slice' op dim 0 reads index 10 (start 2 + (5 - 1) * step 2) but the input has 10}}
  %0 = ppc.slice %x {starts = array<i64: 2, 0>, steps = array<i64: 2, 1>} : tensor<10x8xf32> -> tensor<5x8xf32>
  return
}

// -----

func.func @f82(%x: tensor<2x3xf32>) {
  // expected-error @+1 {{'ppc.pad' op 'pads' must have 4 entries, got 2}}
  %0 = ppc.pad %x {pads = array<i64: 1, 1>} : tensor<2x3xf32> -> tensor<4x3xf32>
  return
}

// -----

func.func @f83(%x: tensor<2x3xf32>) {
  // expected-error @+1 {{'ppc.pad' op dim 1 has size 3 and pads -2, -2, which leave -1 elements}}
  %0 = ppc.pad %x {pads = array<i64: 0, -2, 0, -2>} : tensor<2x3xf32> -> tensor<2x0xf32>
  return
}

// -----

func.func @f84(%x: tensor<2x3xf32>) {
  // expected-error @+1 {{'ppc.pad' op result has shape [5, 3] but expected [5, 4]: dim 1 is 3, expected 4}}
  %0 = ppc.pad %x {pads = array<i64: 1, 0, 2, 1>} : tensor<2x3xf32> -> tensor<5x3xf32>
  return
}

// -----

func.func @f85(%d: tensor<100x16xf32>, %i: tensor<4xi64>) {
  // expected-error @+1 {{'ppc.gather' op axis 2 is out of range for rank 2 (expected -2 <= axis < 2)}}
  %0 = ppc.gather %d, %i {axis = 2 : i64} : (tensor<100x16xf32>, tensor<4xi64>) -> tensor<4x16xf32>
  return
}

// -----

func.func @f86(%d: tensor<100x16xf32>, %i: tensor<4x10xi64>) {
  // expected-error @+1 {{'ppc.gather' op result has rank 2 (shape [4, 16]) but expected rank 3 (shape [4, 10, 16])}}
  %0 = ppc.gather %d, %i : (tensor<100x16xf32>, tensor<4x10xi64>) -> tensor<4x16xf32>
  return
}

// -----

func.func @f87(%d: tensor<5x6x7xf32>, %i: tensor<3xi32>) {
  // expected-error @+1 {{'ppc.gather' op result has shape [5, 6, 7] but expected [5, 3, 7]: dim 1 is 6, expected 3}}
  %0 = ppc.gather %d, %i {axis = -2 : i64} : (tensor<5x6x7xf32>, tensor<3xi32>) -> tensor<5x6x7xf32>
  return
}

// -----

func.func @f88(%d: tensor<f32>, %i: tensor<3xi32>) {
  // expected-error @+1 {{'ppc.gather' op data must have rank >= 1, got rank 0}}
  %0 = ppc.gather %d, %i : (tensor<f32>, tensor<3xi32>) -> tensor<3xf32>
  return
}

// -----

func.func @f89(%d: tensor<10xf32>, %i: tensor<3xi32>) {
  // expected-error @+1 {{'ppc.gather' op element types differ: operand #0 has 'f32' but result #0 has 'f16'}}
  %0 = ppc.gather %d, %i : (tensor<10xf32>, tensor<3xi32>) -> tensor<3xf16>
  return
}

// -----

func.func @moe_probs_rank(%x: tensor<2x8x16xf32>, %p: tensor<16x4xf32>) {
  // expected-error @+1 {{'ppc.moe_dispatch' op probs must have rank 3, got rank 2}}
  %0 = ppc.moe_dispatch %x, %p : (tensor<2x8x16xf32>, tensor<16x4xf32>) -> tensor<4x2x4x16xf32>
  return
}

// -----

func.func @moe_tokens(%x: tensor<2x6x16xf32>, %p: tensor<2x8x4xf32>) {
  // expected-error @+1 {{'ppc.moe_dispatch' op input has shape [2, 6, 16] but expected [2, 8, 16]: dim 1 is 6, expected 8}}
  %0 = ppc.moe_dispatch %x, %p : (tensor<2x6x16xf32>, tensor<2x8x4xf32>) -> tensor<4x2x4x16xf32>
  return
}

// -----

func.func @moe_slots(%x: tensor<2x8x16xf32>, %p: tensor<2x8x4xf32>) {
  // expected-error @+1 {{'ppc.moe_dispatch' op result has shape [3, 2, 4, 16] but expected [4, 2, 4, 16]: dim 0 is 3, expected 4}}
  %0 = ppc.moe_dispatch %x, %p : (tensor<2x8x16xf32>, tensor<2x8x4xf32>) -> tensor<3x2x4x16xf32>
  return
}

// -----

func.func @moe_slots_rank(%x: tensor<2x8x16xf32>, %p: tensor<2x8x4xf32>) {
  // expected-error @+1 {{'ppc.moe_dispatch' op result must have rank 4, got rank 3}}
  %0 = ppc.moe_dispatch %x, %p : (tensor<2x8x16xf32>, tensor<2x8x4xf32>) -> tensor<4x8x16xf32>
  return
}

// -----

func.func @moe_top_k(%x: tensor<2x8x16xf32>, %p: tensor<2x8x4xf32>) {
  // expected-error @+1 {{'ppc.moe_dispatch' op top_k 5 must be in [1, 4] (the experts)}}
  %0 = ppc.moe_dispatch %x, %p {top_k = 5 : i64} : (tensor<2x8x16xf32>, tensor<2x8x4xf32>) -> tensor<4x2x4x16xf32>
  return
}

// -----

func.func @moe_aux_loss_coef(%x: tensor<2x8x16xf32>, %p: tensor<2x8x4xf32>) {
  // expected-error @+1 {{'ppc.moe_dispatch' op aux_loss_coef -1.000000e-02 must be a finite number >= 0}}
  %0 = ppc.moe_dispatch %x, %p {top_k = 2 : i64, aux_loss_coef = -0.01} : (tensor<2x8x16xf32>, tensor<2x8x4xf32>) -> tensor<4x2x4x16xf32>
  return
}

// -----

func.func @moe_aux_loss_coef_nan(%x: tensor<2x8x16xf32>, %p: tensor<2x8x4xf32>) {
  // expected-error @+1 {{'ppc.moe_dispatch' op aux_loss_coef nan must be a finite number >= 0}}
  %0 = ppc.moe_dispatch %x, %p {top_k = 2 : i64, aux_loss_coef = 0x7FF8000000000000 : f64} : (tensor<2x8x16xf32>, tensor<2x8x4xf32>) -> tensor<4x2x4x16xf32>
  return
}

// -----

func.func @moe_combine_hidden(%e: tensor<4x2x4x16xf32>, %p: tensor<2x8x4xf32>) {
  // expected-error @+1 {{'ppc.moe_combine' op input has shape [4, 2, 4, 16] but expected [4, 2, 4, 32]: dim 3 is 16, expected 32}}
  %0 = ppc.moe_combine %e, %p : (tensor<4x2x4x16xf32>, tensor<2x8x4xf32>) -> tensor<2x8x32xf32>
  return
}

// -----

func.func @moe_combine_types(%e: tensor<4x2x4x16xf32>, %p: tensor<2x8x4xf16>) {
  // expected-error @+1 {{'ppc.moe_combine' op element types differ: operand #0 has 'f32' but operand #1 has 'f16'}}
  %0 = ppc.moe_combine %e, %p : (tensor<4x2x4x16xf32>, tensor<2x8x4xf16>) -> tensor<2x8x16xf32>
  return
}

// -----

func.func @moe_combine_top_k(%e: tensor<4x2x4x16xf32>, %p: tensor<2x8x4xf32>) {
  // expected-error @+1 {{'ppc.moe_combine' op top_k 0 must be in [1, 4] (the experts)}}
  %0 = ppc.moe_combine %e, %p {top_k = 0 : i64} : (tensor<4x2x4x16xf32>, tensor<2x8x4xf32>) -> tensor<2x8x16xf32>
  return
}

// -----

func.func @f90(%l: tensor<8x10x2xf32>, %y: tensor<8xi64>) {
  // expected-error @+1 {{'ppc.softmax_cross_entropy' op logits must have rank 2, got rank 3}}
  %0 = ppc.softmax_cross_entropy %l, %y : (tensor<8x10x2xf32>, tensor<8xi64>) -> tensor<f32>
  return
}

// -----

func.func @f91(%l: tensor<8x10xf32>, %y: tensor<4xi64>) {
  // expected-error @+1 {{'ppc.softmax_cross_entropy' op labels has shape [4] but expected [8]: dim 0 is 4, expected 8}}
  %0 = ppc.softmax_cross_entropy %l, %y : (tensor<8x10xf32>, tensor<4xi64>) -> tensor<f32>
  return
}

// -----

func.func @f92(%l: tensor<8x10xf32>, %y: tensor<8xi64>) {
  // expected-error @+1 {{'ppc.softmax_cross_entropy' op element types differ: operand #0 has 'f32' but result #0 has 'f16'}}
  %0 = ppc.softmax_cross_entropy %l, %y : (tensor<8x10xf32>, tensor<8xi64>) -> tensor<f16>
  return
}

// -----

func.func @f93(%p: tensor<4x3xf32>, %t: tensor<4x2xf32>) {
  // expected-error @+1 {{'ppc.mse_loss' op target has shape [4, 2] but expected [4, 3]: dim 1 is 2, expected 3}}
  %0 = ppc.mse_loss %p, %t : (tensor<4x3xf32>, tensor<4x2xf32>) -> tensor<f32>
  return
}

// -----

func.func @f94(%p: tensor<4x3xf32>, %t: tensor<4x3xf16>) {
  // expected-error @+1 {{'ppc.mse_loss' op element types differ: operand #0 has 'f32' but operand #1 has 'f16'}}
  %0 = ppc.mse_loss %p, %t : (tensor<4x3xf32>, tensor<4x3xf16>) -> tensor<f32>
  return
}

// -----

func.func @strategy_bad_degree(%x: tensor<8x16xf32>) {
  // expected-error @+1 {{degree 1 is 0; degrees must be >= 1}}
  %0 = ppc.relu %x {ppc.strategy = #ppc.strategy<degrees = [2, 0]>} : tensor<8x16xf32>
  return
}

// -----

func.func @strategy_negative_start(%x: tensor<8x16xf32>) {
  // expected-error @+1 {{start device -1 is negative}}
  %0 = ppc.relu %x {ppc.strategy = #ppc.strategy<degrees = [2, 1], start = -1>} : tensor<8x16xf32>
  return
}

// -----

func.func @strategy_stride_count(%x: tensor<8x16xf32>) {
  // expected-error @+1 {{expected 2 strides (one per dim with degree > 1, and one for the replicas when replicas > 1), got 1}}
  %0 = ppc.relu %x {ppc.strategy = #ppc.strategy<degrees = [2, 2], strides = [1]>} : tensor<8x16xf32>
  return
}

// -----

func.func @strategy_bad_replicas(%x: tensor<8x16xf32>) {
  // expected-error @+1 {{replicas is 0; it must be >= 1}}
  %0 = ppc.relu %x {ppc.strategy = #ppc.strategy<degrees = [2, 1], replicas = 0>} : tensor<8x16xf32>
  return
}

// -----

func.func @strategy_bad_scatter(%x: tensor<8x16xf32>) {
  // expected-error @+1 {{scatter = -2 is not a result dim (-1 for all-reduced sums)}}
  %0 = ppc.relu %x {ppc.strategy = #ppc.strategy<degrees = [2, 1], scatter = -2>} : tensor<8x16xf32>
  return
}

// -----

func.func @strategy_scatter_without_partial_sums(%x: tensor<8x16xf32>) {
  // expected-error @+1 {{scatter dim 0 is set but result 0 is not a partial sum (no reduction dim it lacks is split)}}
  %0 = ppc.relu %x {ppc.strategy = #ppc.strategy<degrees = [2, 1], scatter = 0>} : tensor<8x16xf32>
  return
}

// -----

// A ring streams an attention's keys (dim 3 of [B, H, S, T, D, Dv]) around
// the groups that split its query positions (dim 2).
func.func @strategy_ring_without_ring_dim(%x: tensor<8x16xf32>) {
  // expected-error @+1 {{ring: the op has no dim whose operands stream around a ring}}
  %0 = ppc.relu %x {ppc.strategy = #ppc.strategy<degrees = [2, 1], ring>} : tensor<8x16xf32>
  return
}

// -----

func.func @strategy_ring_along_unsplit(%q: tensor<2x4x16x8xf32>, %k: tensor<2x4x16x8xf32>, %v: tensor<2x4x16x8xf32>) {
  // expected-error @+1 {{ring: iteration dim 2 (the one whose groups form the ring) is not split}}
  %0 = ppc.attention %q, %k, %v {scale = 0.125 : f64, ppc.strategy = #ppc.strategy<degrees = [2, 1, 1, 1, 1, 1], ring>} : (tensor<2x4x16x8xf32>, tensor<2x4x16x8xf32>, tensor<2x4x16x8xf32>) -> tensor<2x4x16x8xf32>
  return
}

// -----

func.func @strategy_ring_streamed_split(%q: tensor<2x4x16x8xf32>, %k: tensor<2x4x16x8xf32>, %v: tensor<2x4x16x8xf32>) {
  // expected-error @+1 {{ring: iteration dim 3 streams around the ring whole, but its degree is 2}}
  %0 = ppc.attention %q, %k, %v {scale = 0.125 : f64, ppc.strategy = #ppc.strategy<degrees = [1, 1, 2, 2, 1, 1], ring>} : (tensor<2x4x16x8xf32>, tensor<2x4x16x8xf32>, tensor<2x4x16x8xf32>) -> tensor<2x4x16x8xf32>
  return
}

// -----

func.func @strategy_ring_uneven_blocks(%q: tensor<2x4x16x8xf32>, %k: tensor<2x4x6x8xf32>, %v: tensor<2x4x6x8xf32>) {
  // expected-error @+1 {{ring: 4 members do not divide iteration dim 3 of size 6 into equal blocks}}
  %0 = ppc.attention %q, %k, %v {scale = 0.125 : f64, ppc.strategy = #ppc.strategy<degrees = [1, 1, 4, 1, 1, 1], ring>} : (tensor<2x4x16x8xf32>, tensor<2x4x6x8xf32>, tensor<2x4x6x8xf32>) -> tensor<2x4x16x8xf32>
  return
}

// -----

func.func @strategy_ring_replicated(%q: tensor<2x4x16x8xf32>, %k: tensor<2x4x16x8xf32>, %v: tensor<2x4x16x8xf32>) {
  // expected-error @+1 {{ring: an op that streams around a ring runs without replicas}}
  %0 = ppc.attention %q, %k, %v {scale = 0.125 : f64, ppc.strategy = #ppc.strategy<degrees = [1, 1, 2, 1, 1, 1], replicas = 2, ring>} : (tensor<2x4x16x8xf32>, tensor<2x4x16x8xf32>, tensor<2x4x16x8xf32>) -> tensor<2x4x16x8xf32>
  return
}

// -----

func.func @strategy_scatter_not_a_dim(%x: tensor<8x16xf32>, %w: tensor<16x4xf32>) {
  // expected-error @+1 {{scatter dim 2 is not a dim of result 0, which has 2}}
  %0 = ppc.linear %x, %w {ppc.strategy = #ppc.strategy<degrees = [1, 1, 2], scatter = 2>} : (tensor<8x16xf32>, tensor<16x4xf32>) -> tensor<8x4xf32>
  return
}

// -----

func.func @strategy_scatter_uneven(%x: tensor<6x16xf32>, %w: tensor<16x4xf32>) {
  // expected-error @+1 {{scatter dim 0 of result 0 has 3 elements per partition, which do not split evenly among the 4 partitions that sum it}}
  %0 = ppc.linear %x, %w {ppc.strategy = #ppc.strategy<degrees = [2, 1, 4], scatter = 0>} : (tensor<6x16xf32>, tensor<16x4xf32>) -> tensor<6x4xf32>
  return
}

// -----

func.func @strategy_negative_stage(%x: tensor<8x16xf32>) {
  // expected-error @+1 {{stage -1 is negative}}
  %0 = ppc.relu %x {ppc.strategy = #ppc.strategy<degrees = [2, 1], stage = -1>} : tensor<8x16xf32>
  return
}

// -----

// expected-error @+1 {{unknown schedule 'zb-h1': expected gpipe, 1f1b or interleaved-1f1b}}
func.func @pipeline_bad_schedule() attributes {ppc.pipeline = #ppc.pipeline<microbatches = 4, schedule = "zb-h1", first_devices = [0], devices = [4]>} {
  return
}

// -----

// expected-error @+1 {{microbatches is 0; it must be >= 1}}
func.func @pipeline_no_microbatches() attributes {ppc.pipeline = #ppc.pipeline<microbatches = 0, schedule = "1f1b", first_devices = [0], devices = [4]>} {
  return
}

// -----

// expected-error @+1 {{expected one first device and one device count per stage, got 2 and 1}}
func.func @pipeline_uneven_lists() attributes {ppc.pipeline = #ppc.pipeline<microbatches = 2, schedule = "gpipe", first_devices = [0, 4], devices = [4]>} {
  return
}

// -----

// expected-error @+1 {{stage 1's 2 devices from device 9223372036854775807 are not on the machine}}
func.func @pipeline_overflowing_first_device() attributes {ppc.pipeline = #ppc.pipeline<microbatches = 2, schedule = "gpipe", first_devices = [0, 9223372036854775807], devices = [4, 2]>} {
  return
}

// -----

// expected-error @+1 {{stages 0 and 1 share devices}}
func.func @pipeline_overlap() attributes {ppc.pipeline = #ppc.pipeline<microbatches = 2, schedule = "gpipe", first_devices = [0, 2], devices = [4, 4]>} {
  return
}

// -----

// expected-error @+1 {{stage 2 must run on the devices of stage 0 (interleaved-1f1b deals stages round-robin to 2 submeshes)}}
func.func @pipeline_interleaved_not_round_robin() attributes {ppc.pipeline = #ppc.pipeline<microbatches = 2, schedule = "interleaved-1f1b", first_devices = [0, 4, 4, 0], devices = [4, 4, 4, 4]>} {
  return
}

// -----

// expected-error @+1 {{interleaved-1f1b runs micro-batches in rounds of one per submesh: 3 micro-batches do not divide into 2}}
func.func @pipeline_interleaved_rounds() attributes {ppc.pipeline = #ppc.pipeline<microbatches = 3, schedule = "interleaved-1f1b", first_devices = [0, 4, 0, 4], devices = [4, 4, 4, 4]>} {
  return
}

// -----

// expected-error @+1 {{'ppc.pipeline' must be a #ppc.pipeline attribute on a function}}
module attributes {ppc.pipeline = #ppc.pipeline<microbatches = 2, schedule = "gpipe", first_devices = [0], devices = [4]>} {
}

// -----

func.func @strategy_bad_zero(%x: tensor<8x16xf32>) {
  // expected-error @+1 {{zero = 4 is not a ZeRO stage (0 to 3)}}
  %0 = ppc.relu %x {ppc.strategy = #ppc.strategy<degrees = [2, 1], zero = 4>} : tensor<8x16xf32>
  return
}

// -----

func.func @strategy_replica_stride_count(%x: tensor<8x16xf32>) {
  // The replicas need a stride of their own.
  // expected-error @+1 {{expected 2 strides (one per dim with degree > 1, and one for the replicas when replicas > 1), got 1}}
  %0 = ppc.relu %x {ppc.strategy = #ppc.strategy<degrees = [2, 1], replicas = 2, strides = [1]>} : tensor<8x16xf32>
  return
}

// -----

func.func @strategy_repeated_recompute(%x: tensor<8x16xf32>) {
  // expected-error @+1 {{expected 'start', 'strides', 'replicas', 'zero', 'scatter', 'stage', 'recompute' or 'ring' (each at most once), got 'recompute'}}
  %0 = ppc.relu %x {ppc.strategy = #ppc.strategy<degrees = [2, 1], recompute, recompute>} : tensor<8x16xf32>
  return
}

// -----

func.func @strategy_bad_stride(%x: tensor<8x16xf32>) {
  // expected-error @+1 {{stride 0 must be >= 1}}
  %0 = ppc.relu %x {ppc.strategy = #ppc.strategy<degrees = [2, 1], strides = [0]>} : tensor<8x16xf32>
  return
}

// -----

func.func @strategy_unknown_key(%x: tensor<8x16xf32>) {
  // expected-error @+1 {{expected 'start', 'strides', 'replicas', 'zero', 'scatter', 'stage', 'recompute' or 'ring' (each at most once), got 'step'}}
  %0 = ppc.relu %x {ppc.strategy = #ppc.strategy<degrees = [2, 1], step = 1>} : tensor<8x16xf32>
  return
}

// -----

func.func @strategy_repeated_key(%x: tensor<8x16xf32>) {
  // expected-error @+1 {{expected 'start', 'strides', 'replicas', 'zero', 'scatter', 'stage', 'recompute' or 'ring' (each at most once), got 'start'}}
  %0 = ppc.relu %x {ppc.strategy = #ppc.strategy<degrees = [2, 1], start = 1, start = 2>} : tensor<8x16xf32>
  return
}

// -----

func.func @strategy_replicas_overlap(%x: tensor<8x16xf32>) {
  // Partition 1 and replica 1 of partition 0 both land on device 1.
  // expected-error @+1 {{strategy maps two instances to one device; the strides overlap}}
  %0 = ppc.relu %x {ppc.strategy = #ppc.strategy<degrees = [2, 1], replicas = 2, strides = [1, 1]>} : tensor<8x16xf32>
  return
}

// -----

func.func @strategy_unsplittable(%x: tensor<8x16xf32>) {
  // expected-error @+1 {{iteration dim 1 (parameter) cannot be split, but its degree is 2}}
  %0 = ppc.softmax %x {ppc.strategy = #ppc.strategy<degrees = [1, 2]>} : tensor<8x16xf32>
  return
}

// -----

func.func @strategy_uneven(%x: tensor<6x16xf32>) {
  // expected-error @+1 {{degree 4 does not divide iteration dim 0 of size 6 into equal partitions}}
  %0 = ppc.relu %x {ppc.strategy = #ppc.strategy<degrees = [4, 1]>} : tensor<6x16xf32>
  return
}

// -----

func.func @strategy_overlap(%x: tensor<8x16xf32>) {
  // Partitions (0, 1) and (1, 0) both land on device 2.
  // expected-error @+1 {{strategy maps two instances to one device; the strides overlap}}
  %0 = ppc.relu %x {ppc.strategy = #ppc.strategy<degrees = [2, 2], strides = [2, 2]>} : tensor<8x16xf32>
  return
}

// -----

func.func @strategy_degree_count(%x: tensor<8x16xf32>, %w: tensor<16x4xf32>) {
  // expected-error @+1 {{strategy has 2 degrees but the op has 3 iteration dims}}
  %0 = ppc.linear %x, %w {ppc.strategy = #ppc.strategy<degrees = [2, 2]>} : (tensor<8x16xf32>, tensor<16x4xf32>) -> tensor<8x4xf32>
  return
}

// -----

func.func @strategy_not_parallelizable() {
  // expected-error @+1 {{'ppc.strategy' on an op that is not parallelizable}}
  %0 = ppc.weight "w" {ppc.strategy = #ppc.strategy<degrees = [2]>} : tensor<8xf32>
  return
}

// -----

func.func @strategy_not_a_strategy(%x: tensor<8x16xf32>) {
  // expected-error @+1 {{'ppc.strategy' must be a #ppc.strategy attribute}}
  %0 = ppc.relu %x {ppc.strategy = [2, 1]} : tensor<8x16xf32>
  return
}

// -----

func.func @sequence_order_not_unit(%x: tensor<8x16xf32>, %i: tensor<8xi64>) {
  // expected-error @+1 {{'ppc.sequence_order' must be a unit attribute on a ppc.gather}}
  %0 = ppc.gather %x, %i {ppc.sequence_order = 2 : i64} : (tensor<8x16xf32>, tensor<8xi64>) -> tensor<8x16xf32>
  return
}

// -----

func.func @sequence_order_not_on_gather(%x: tensor<8x16xf32>) {
  // expected-error @+1 {{'ppc.sequence_order' must be a unit attribute on a ppc.gather}}
  %0 = ppc.relu %x {ppc.sequence_order} : tensor<8x16xf32>
  return
}

// -----

func.func @unknown_ppc_attribute(%x: tensor<8x16xf32>) {
  // expected-error @+1 {{unknown ppc dialect attribute 'ppc.strategies'}}
  %0 = ppc.relu %x {ppc.strategies = #ppc.strategy<degrees = [2, 1]>} : tensor<8x16xf32>
  return
}

// -----

func.func @split_without_results(%x: tensor<2xf32>) {
  // expected-error @+1 {{'ppc.split' op expects at least one result}}
  "ppc.split"(%x) {axis = 0 : i64} : (tensor<2xf32>) -> ()
  return
}

// -----

func.func @linear_scalar_input(%x: tensor<f32>, %w: tensor<1x1xf32>) {
  // expected-error @+1 {{'ppc.linear' op input must have rank >= 1, got rank 0}}
  %0 = ppc.linear %x, %w : (tensor<f32>, tensor<1x1xf32>) -> tensor<1xf32>
  return
}

// -----

// The op is verified before its strategy (which needs its iteration space).
func.func @strategy_on_invalid_op(%a: tensor<8xf32>, %b: tensor<8x4xf32>) {
  // expected-error @+1 {{'ppc.matmul' op lhs must have rank >= 2, got rank 1}}
  %0 = ppc.matmul %a, %b {ppc.strategy = #ppc.strategy<degrees = [1, 1, 1]>} : (tensor<8xf32>, tensor<8x4xf32>) -> tensor<4xf32>
  return
}

// -----

// Degrees whose product overflows int64 (2^62 x 4 = 2^64) are an error, not
// a wrapped-around partition count (a crash before).
func.func @strategy_degree_product_overflows(%x: tensor<4611686018427387904x4xf32>) {
  // expected-error @+1 {{strategy uses devices beyond 2^63 (the product of its degrees and strides overflows); ppc supports at most 65536 devices}}
  %0 = ppc.relu %x {ppc.strategy = #ppc.strategy<degrees = [4611686018427387904, 4]>} : tensor<4611686018427387904x4xf32>
  return
}

// -----

// 2^62 x 2 = 2^63 wraps to a negative count (a length_error abort before).
func.func @strategy_degree_product_negative(%x: tensor<4611686018427387904x2xf32>) {
  // expected-error @+1 {{strategy uses devices beyond 2^63}}
  %0 = ppc.relu %x {ppc.strategy = #ppc.strategy<degrees = [4611686018427387904, 2]>} : tensor<4611686018427387904x2xf32>
  return
}

// -----

// A product that fits but needs more devices than ppc supports is rejected
// before any partition is enumerated.
func.func @strategy_too_many_partitions(%x: tensor<1099511627776x4xf32>) {
  // expected-error @+1 {{strategy uses device 1099511627775 but ppc supports at most 65536 devices}}
  %0 = ppc.relu %x {ppc.strategy = #ppc.strategy<degrees = [1099511627776, 1]>} : tensor<1099511627776x4xf32>
  return
}

// -----

// Strides times degrees overflow.
func.func @strategy_stride_overflows(%x: tensor<8x16xf32>) {
  // expected-error @+1 {{strategy uses devices beyond 2^63}}
  %0 = ppc.relu %x {ppc.strategy = #ppc.strategy<degrees = [4, 1], strides = [9223372036854775807]>} : tensor<8x16xf32>
  return
}

// -----

// Start plus the view's reach overflows.
func.func @strategy_start_overflows(%x: tensor<8x16xf32>) {
  // expected-error @+1 {{strategy uses devices beyond 2^63}}
  %0 = ppc.relu %x {ppc.strategy = #ppc.strategy<degrees = [2, 1], start = 9223372036854775807>} : tensor<8x16xf32>
  return
}

// -----

// Overlapping strides with more partitions than devices: the pigeonhole
// answers without enumerating the partitions.
func.func @strategy_overlap_many(%x: tensor<4096x4096xf32>) {
  // expected-error @+1 {{strategy maps two instances to one device; the strides overlap}}
  %0 = ppc.relu %x {ppc.strategy = #ppc.strategy<degrees = [4096, 4096], strides = [1, 1]>} : tensor<4096x4096xf32>
  return
}

// -----

func.func @f95(%x: tensor<4xf32>, %s: tensor<3x4xf32>) {
  // expected-error @+1 {{'ppc.prelu' op slope of shape [3, 4] does not broadcast to the input shape [4]}}
  %0 = ppc.prelu %x, %s : (tensor<4xf32>, tensor<3x4xf32>) -> tensor<3x4xf32>
  return
}

// -----

func.func @compare_types(%a: tensor<4xf32>, %b: tensor<4xi64>) {
  // expected-error @+1 {{'ppc.less' op element types differ: operand #0 has 'f32' but operand #1 has 'i64'}}
  %0 = ppc.less %a, %b : (tensor<4xf32>, tensor<4xi64>) -> tensor<4xi1>
  return
}

// -----

func.func @compare_shapes(%a: tensor<4x3xf32>, %b: tensor<4xf32>) {
  // expected-error @+1 {{'ppc.equal' op shapes are not broadcast-compatible: lhs dim 1 is 3, rhs dim 0 is 4}}
  %0 = ppc.equal %a, %b : (tensor<4x3xf32>, tensor<4xf32>) -> tensor<4x3xi1>
  return
}

// -----

func.func @compare_result(%a: tensor<4x1xf32>, %b: tensor<3xf32>) {
  // expected-error @+1 {{'ppc.greater' op result has shape [4, 1] but expected [4, 3]: dim 1 is 1, expected 3}}
  %0 = ppc.greater %a, %b : (tensor<4x1xf32>, tensor<3xf32>) -> tensor<4x1xi1>
  return
}

// -----

func.func @compare_result_type(%a: tensor<4xf32>, %b: tensor<4xf32>) {
  // expected-error @+1 {{'ppc.equal' op result #0 must be ranked tensor of 1-bit signless integer values}}
  %0 = ppc.equal %a, %b : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return
}

// -----

func.func @select_types(%c: tensor<4xi1>, %a: tensor<4xf32>, %b: tensor<4xf16>) {
  // expected-error @+1 {{'ppc.select' op element types differ: operand #1 has 'f32' but operand #2 has 'f16'}}
  %0 = ppc.select %c, %a, %b : (tensor<4xi1>, tensor<4xf32>, tensor<4xf16>) -> tensor<4xf32>
  return
}

// -----

func.func @select_sides(%c: tensor<4xi1>, %a: tensor<4x3xf32>, %b: tensor<4xf32>) {
  // expected-error @+1 {{'ppc.select' op shapes are not broadcast-compatible: lhs dim 1 is 3, rhs dim 0 is 4}}
  %0 = ppc.select %c, %a, %b : (tensor<4xi1>, tensor<4x3xf32>, tensor<4xf32>) -> tensor<4x3xf32>
  return
}

// -----

func.func @select_condition(%c: tensor<5xi1>, %a: tensor<4xf32>, %b: tensor<4xf32>) {
  // expected-error @+1 {{'ppc.select' op shapes are not broadcast-compatible: condition dim 0 is 5, sides dim 0 is 4}}
  %0 = ppc.select %c, %a, %b : (tensor<5xi1>, tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return
}

// -----

func.func @select_result(%c: tensor<2x1xi1>, %a: tensor<4xf32>, %b: tensor<4xf32>) {
  // expected-error @+1 {{'ppc.select' op result has rank 1 (shape [4]) but expected rank 2 (shape [2, 4])}}
  %0 = ppc.select %c, %a, %b : (tensor<2x1xi1>, tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return
}

// -----

func.func @cumsum_axis(%x: tensor<3x4xf32>) {
  // expected-error @+1 {{'ppc.cumsum' op axis 2 is out of range for rank 2 (expected -2 <= axis < 2)}}
  %0 = ppc.cumsum %x {axis = 2 : i64} : tensor<3x4xf32>
  return
}

// -----

func.func @unknown_exchange(%x: tensor<8x4xf32>) {
  // expected-error @+1 {{'ppc.repartition' op unknown exchange 'broadcast'; expected one of local, point_to_point, all_gather, reduce_scatter, all_to_all, all_reduce}}
  %0 = ppc.repartition %x as "broadcast" : tensor<8x4xf32>
  return
}

// -----

func.func @ring_exchange_between_ops(%x: tensor<8x4xf32>) {
  // expected-error @+1 {{'ppc.repartition' op exchange 'ring' is the blocks a ring op passes round (its strategy's `ring`), not a resharding between ops}}
  %0 = ppc.repartition %x as "ring" : tensor<8x4xf32>
  return
}
