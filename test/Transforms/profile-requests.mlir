// The kernels a search's configuration space asks for, one per profile key
// (search/ProfileRequests.cpp): on 2 devices a linear of 8 rows, 16 inputs
// and 4 outputs is asked whole, split by rows ([4, 16]), by outputs
// ([4, 16] weight rows, with the bias split too) and by inputs ([8, 8],
// a partial sum), each with the boxes of partition 0 in global
// coordinates; the relu and the add whole and halved either way. One
// request per distinct key: the second linear's kernels are the first's.
// RUN: ppc-opt %s --ppc-attach-machine=machine=cpux2 --ppc-search="algorithm=data-parallel profile-requests=%t.json" -o /dev/null 2>%t.err
// RUN: FileCheck %s < %t.json
// RUN: FileCheck %s --check-prefix=NOTE < %t.err
// NOTE: ppc-search: wrote 10 kernels to measure to {{.*}}.json (ppc-profile PLAN --requests {{.*}}.json)
// A file that cannot be written is an error naming it.
// RUN: not ppc-opt %s --ppc-attach-machine=machine=cpux2 --ppc-search="algorithm=data-parallel profile-requests=%t.missing/r.json" -o /dev/null 2>&1 | FileCheck %s --check-prefix=ERR
// ERR: error: ppc-search: profile-requests: cannot open '{{.*}}.missing/r.json' for writing

// CHECK: "version": 1,
// CHECK-DAG: {"op_index":0,"op":"ppc.linear","dtype":"f32","operand_shapes":{{\[}}[8,16],[4,16],[4]],"operands":[{"lo":[0,0],"hi":[8,16]},{"lo":[0,0],"hi":[4,16]},{"lo":[0],"hi":[4]}],"results":[{"lo":[0,0],"hi":[8,4]}]}
// CHECK-DAG: {"op_index":0,"op":"ppc.linear","dtype":"f32","operand_shapes":{{\[}}[4,16],[4,16],[4]],"operands":[{"lo":[0,0],"hi":[4,16]},{"lo":[0,0],"hi":[4,16]},{"lo":[0],"hi":[4]}],"results":[{"lo":[0,0],"hi":[4,4]}]}
// CHECK-DAG: {"op_index":0,"op":"ppc.linear","dtype":"f32","operand_shapes":{{\[}}[8,16],[2,16],[2]],"operands":[{"lo":[0,0],"hi":[8,16]},{"lo":[0,0],"hi":[2,16]},{"lo":[0],"hi":[2]}],"results":[{"lo":[0,0],"hi":[8,2]}]}
// CHECK-DAG: {"op_index":0,"op":"ppc.linear","dtype":"f32","operand_shapes":{{\[}}[8,8],[4,8],[4]],"operands":[{"lo":[0,0],"hi":[8,8]},{"lo":[0,0],"hi":[4,8]},{"lo":[0],"hi":[4]}],"results":[{"lo":[0,0],"hi":[8,4]}]}
// CHECK-DAG: {"op_index":1,"op":"ppc.relu","dtype":"f32","operand_shapes":{{\[}}[8,4]]
// CHECK-DAG: {"op_index":1,"op":"ppc.relu","dtype":"f32","operand_shapes":{{\[}}[4,4]]
// CHECK-DAG: {"op_index":1,"op":"ppc.relu","dtype":"f32","operand_shapes":{{\[}}[8,2]]
// CHECK-DAG: {"op_index":3,"op":"ppc.add","dtype":"f32","operand_shapes":{{\[}}[8,4],[8,4]]
// CHECK-DAG: {"op_index":3,"op":"ppc.add","dtype":"f32","operand_shapes":{{\[}}[4,4],[4,4]]
// CHECK-DAG: {"op_index":3,"op":"ppc.add","dtype":"f32","operand_shapes":{{\[}}[8,2],[8,2]]
// CHECK-NOT: "op_index":2

module {
  func.func @main(%x: tensor<8x16xf32>) -> tensor<8x4xf32> {
    %w = ppc.weight "w" : tensor<4x16xf32>
    %b = ppc.weight "b" : tensor<4xf32>
    %h = ppc.linear %x, %w, %b {transpose_weight = true} : (tensor<8x16xf32>, tensor<4x16xf32>, tensor<4xf32>) -> tensor<8x4xf32>
    %r = ppc.relu %h : tensor<8x4xf32>
    %w2 = ppc.weight "w2" : tensor<4x16xf32>
    %b2 = ppc.weight "b2" : tensor<4xf32>
    %h2 = ppc.linear %x, %w2, %b2 {transpose_weight = true} : (tensor<8x16xf32>, tensor<4x16xf32>, tensor<4xf32>) -> tensor<8x4xf32>
    %s = ppc.add %r, %h2 : (tensor<8x4xf32>, tensor<8x4xf32>) -> tensor<8x4xf32>
    return %s : tensor<8x4xf32>
  }
}
