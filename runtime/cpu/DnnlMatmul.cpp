//===- DnnlMatmul.cpp - bf16 GEMM through oneDNN --------------------------===//

#include "DnnlMatmul.h"

#include <oneapi/dnnl/dnnl.hpp>

#include <atomic>
#include <map>
#include <optional>
#include <string>
#include <tuple>

namespace ppc::runtime::cpu {

namespace {

using namespace dnnl;
using dt = memory::data_type;

engine &cpuEngine() {
  static engine eng(engine::kind::cpu, 0);
  return eng;
}

stream &cpuStream() {
  static stream s(cpuEngine());
  return s;
}

struct Gemm {
  memory::desc a, b, c;
  std::optional<matmul> primitive; ///< none: only oneDNN's reference
};

using Key = std::tuple<bool, bool, bool, int64_t, int64_t, int64_t, int64_t,
                       int64_t, int64_t>;

std::atomic<int64_t> calls{0};

const Gemm &gemmFor(const Key &key) {
  static thread_local std::map<Key, Gemm> cache;
  auto it = cache.find(key);
  if (it != cache.end())
    return it->second;
  auto [transA, transB, accumulate, m, n, k, lda, ldb, ldc] = key;
  Gemm g;
  // A transposed operand is the stored matrix read by columns.
  g.a = memory::desc({m, k}, dt::bf16,
                     transA ? memory::dims{1, lda} : memory::dims{lda, 1});
  g.b = memory::desc({k, n}, dt::bf16,
                     transB ? memory::dims{1, ldb} : memory::dims{ldb, 1});
  g.c = memory::desc({m, n}, dt::f32, memory::dims{ldc, 1});
  primitive_attr attr;
  if (accumulate) {
    post_ops ops;
    ops.append_sum(1.0f);
    attr.set_post_ops(ops);
  }
  try {
    matmul::primitive_desc pd(matmul::desc(g.a, g.b, g.c), attr, cpuEngine());
    if (std::string(pd.impl_info_str()).rfind("ref", 0) != 0)
      g.primitive.emplace(pd);
  } catch (const dnnl::error &) {
    // Not supported for this shape: the caller's float32 path.
  }
  return cache.emplace(key, std::move(g)).first->second;
}

} // namespace

bool dnnlGemmBf16(bool transA, bool transB, int64_t m, int64_t n, int64_t k,
                  const uint16_t *a, int64_t lda, const uint16_t *b,
                  int64_t ldb, bool accumulate, float *c, int64_t ldc) {
  const Gemm &g =
      gemmFor(Key{transA, transB, accumulate, m, n, k, lda, ldb, ldc});
  if (!g.primitive)
    return false;
  memory am(g.a, cpuEngine(), const_cast<uint16_t *>(a));
  memory bm(g.b, cpuEngine(), const_cast<uint16_t *>(b));
  memory cm(g.c, cpuEngine(), c);
  g.primitive->execute(
      cpuStream(),
      {{DNNL_ARG_SRC, am}, {DNNL_ARG_WEIGHTS, bm}, {DNNL_ARG_DST, cm}});
  cpuStream().wait();
  ++calls;
  return true;
}

int64_t dnnlGemmBf16Calls() { return calls; }

} // namespace ppc::runtime::cpu
