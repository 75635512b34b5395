module attributes {ppc.machine = #topo.cluster<nodes = 1, devices_per_node = 2,
    device = #topo.device<"cpu", peak_flops = {f32 = 100000000000},
                          memory_bandwidth = 20000000000, memory_bytes = 1073741824>,
    intra = #topo.link<shared_memory, bandwidth = 1.0e10, latency = 0>,
    inter = #topo.link<shared_memory, bandwidth = 1.0e10, latency = 0>>} {
  func.func @f(%x: tensor<4x10xf32>, %y: tensor<4xi64>) -> tensor<f32> {
    %w = ppc.weight "w" : tensor<10x10xf32>
    %0 = ppc.linear %x, %w : (tensor<4x10xf32>, tensor<10x10xf32>) -> tensor<4x10xf32>
    %1 = ppc.softmax_cross_entropy %0, %y {ppc.strategy = #ppc.strategy<degrees = [2, 1]>} : (tensor<4x10xf32>, tensor<4xi64>) -> tensor<f32>
    return %1 : tensor<f32>
  }
}
