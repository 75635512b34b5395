// Upstream ops ppc cannot import: an error naming the op at its location.
// RUN: ppc-opt %s --ppc-import-upstream --split-input-file -verify-diagnostics

func.func @no_counterpart(%x: tensor<8x4xf32>) -> tensor<8x4xf32> {
  // expected-error @+1 {{cannot import 'tosa.sin' into the ppc graph dialect: ppc has no such op}}
  %s = tosa.sin %x : (tensor<8x4xf32>) -> tensor<8x4xf32>
  return %s : tensor<8x4xf32>
}

// -----

// expected-error @+1 {{cannot import @dynamic: argument #0 is not a tensor of static shape}}
func.func @dynamic(%x: tensor<?x4xf32>) -> tensor<?x4xf32> {
  %e = tosa.exp %x : (tensor<?x4xf32>) -> tensor<?x4xf32>
  return %e : tensor<?x4xf32>
}

// -----

func.func @payload(%x: tensor<8x4xf32>) -> tensor<8x4xf32> {
  %e = tensor.empty() : tensor<8x4xf32>
  // expected-error @+1 {{cannot import 'linalg.generic' into the ppc graph dialect: its payload 'math.sin' has no ppc elementwise op}}
  %s = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]} ins(%x : tensor<8x4xf32>) outs(%e : tensor<8x4xf32>) {
  ^bb0(%in: f32, %out: f32):
    %r = math.sin %in : f32
    linalg.yield %r : f32
  } -> tensor<8x4xf32>
  return %s : tensor<8x4xf32>
}

// -----

func.func @user_maps(%a: tensor<4x8xf32>, %b: tensor<4x8xf32>, %c: tensor<4x4xf32>) -> tensor<4x4xf32> {
  // expected-error @+1 {{cannot import 'linalg.matmul' into the ppc graph dialect: user-defined indexing maps are not supported}}
  %m = linalg.matmul indexing_maps = [affine_map<(d0, d1, d2) -> (d0, d2)>, affine_map<(d0, d1, d2) -> (d1, d2)>, affine_map<(d0, d1, d2) -> (d0, d1)>] ins(%a, %b : tensor<4x8xf32>, tensor<4x8xf32>) outs(%c : tensor<4x4xf32>) -> tensor<4x4xf32>
  return %m : tensor<4x4xf32>
}

// -----

func.func @window(%x: tensor<8x8xf32>) -> tensor<4x4xf32> {
  %e = tensor.empty() : tensor<4x4xf32>
  // expected-error @+1 {{cannot import 'linalg.generic' into the ppc graph dialect: an operand's indexing map is not a projected permutation (only broadcasts and transposes are supported)}}
  %s = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (2 * d0, d1 * 2)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]} ins(%x : tensor<8x8xf32>) outs(%e : tensor<4x4xf32>) {
  ^bb0(%in: f32, %out: f32):
    %r = math.exp %in : f32
    linalg.yield %r : f32
  } -> tensor<4x4xf32>
  return %s : tensor<4x4xf32>
}

// -----

func.func @shift(%x: tensor<8x4xi32>) -> tensor<8x4xi32> {
  %shift = "tosa.const"() <{values = dense<3> : tensor<1xi8>}> : () -> tensor<1xi8>
  // expected-error @+1 {{cannot import 'tosa.mul' into the ppc graph dialect: only a zero shift is supported}}
  %m = tosa.mul %x, %x, %shift : (tensor<8x4xi32>, tensor<8x4xi32>, tensor<1xi8>) -> tensor<8x4xi32>
  return %m : tensor<8x4xi32>
}

// -----

func.func private @callee(tensor<8x4xf32>) -> tensor<8x4xf32>
func.func @other_dialect(%x: tensor<8x4xf32>) -> tensor<8x4xf32> {
  %e = tosa.exp %x : (tensor<8x4xf32>) -> tensor<8x4xf32>
  // expected-error @+1 {{cannot import 'func.call' into the ppc graph dialect: ppc has no such op}}
  %c = func.call @callee(%e) : (tensor<8x4xf32>) -> tensor<8x4xf32>
  return %c : tensor<8x4xf32>
}
