//===- MixtureOfExperts.cpp - Fuse exported sparse MoE blocks -------------===//
//
// PyTorch's Mixtral-style sparse MoE block (a router linear and softmax,
// top-k, the k weights normalized, then a loop over the experts that picks
// each expert's tokens with torch.where and index_add_s its SwiGLU output
// times the token's routing weight) exports as a graph whose shapes depend
// on the routing (NonZero) and whose gathers and scatters are traced for
// one batch. The block is matched on the ONNX graph, after folding and
// before conversion, and replaced by one node of ppc's fused domain, which
// converts to ppc.moe_dispatch, three batched matmuls over the experts'
// weights stacked to [E, ...] and ppc.moe_combine. Dropless, as PyTorch's
// loop: each token is its own routing group of capacity 1, so every expert
// sees every token chosen for it; or, with --moe-capacity-factor, each
// sample a group whose choices over the capacity are dropped.
//
// What is matched, per TopK node (largest, last axis):
//   - the router: TopK of Softmax(MatMul(tokens, Wg)), Casts allowed
//     between (Hugging Face's softmax in float32); or a Softmax of TopK's
//     values of MatMul(tokens, Wg) (Mixtral's reference code: a softmax
//     over the top k logits, which is the full softmax normalized over k);
//   - normalize: TopK's values divided by their ReduceSum (Mixtral; a
//     Qwen-MoE block without norm_topk_prob has none);
//   - the experts: E SwiGLU MLPs MatMul(Mul(silu(MatMul(x, W1)),
//     MatMul(x, W3)), W2), silu as x * Sigmoid(x), or E two-layer MLPs
//     MatMul(act(MatMul(x, W1)), W2) with act one of ReLU, GELU (the Gelu
//     op, or exact GELU as PyTorch exports it: x * (erf(x / sqrt 2) + 1) *
//     0.5, its factors in any order) and SiLU (Switch, GShard and fairseq
//     experts), all alike; each linear layer a MatMul, or a Gemm (as
//     PyTorch exports nn.Linear with a bias on 2-D rows) with its weight
//     [in, out] or transposed and an optional bias; whose weights are
//     initializers read nowhere else, downstream of the routing (or on the
//     tokens whole; a shared expert on the tokens beside E routed ones, as
//     Qwen-MoE and DeepSeek-MoE have, is not one of them); expert e is the
//     one whose rows a Gather of the expert mask at constant index e
//     selects, or, without such gathers, the expert in node order;
//   - the output: the first node every expert's output reaches (the last
//     scatter-add or Add of the accumulation), each expert's output
//     multiplied by a routing weight on its way there, of the tokens' shape.
// A TopK that looks like a router but does not match all of it is left as
// it is, with a warning that says why: its NonZero is then reported as
// unsupported.
//
//===----------------------------------------------------------------------===//

#include "ImporterInternal.h"

#include "ppc/Dialect/Graph/GraphOps.h"

#include "llvm/ADT/BitVector.h"
#include "llvm/ADT/STLExtras.h"

#include <algorithm>
#include <cmath>
#include <set>

using namespace mlir;
using namespace ppc;
using namespace ppc::onnx_import;

namespace g = ppc::graph;

namespace {

/// One matched block.
struct MoeMatch {
  int topK = -1;
  std::string tokens, probs, logits;
  bool softmaxAfterTopK = false, normalize = false;
  int64_t k = 0, experts = 0, hidden = 0, ffn = 0;
  /// One linear layer of an expert: rows [.., in] x W (+ b) -> [.., out],
  /// W [in, out] or, transposed, [out, in].
  struct Linear {
    std::string weight, bias;
    bool transposed = false;
    /// Its input size.
    int64_t in = 0;
    /// Alike in form: stacked with each other.
    bool sameForm(const Linear &o) const {
      return transposed == o.transposed && bias.empty() == o.bias.empty();
    }
  };
  /// Per expert, in expert order: W1, W3 (SwiGLU only), W2, its W2 node
  /// and its activation (swiglu, relu, gelu, gelu_tanh, silu).
  struct Expert {
    Linear w1, w3, w2;
    std::string rows;
    int w2Node = -1;
    int64_t index = -1;
    StringRef activation;
    bool sameForm(const Expert &o) const {
      return activation == o.activation && w1.sameForm(o.w1) &&
             w3.sameForm(o.w3) && w2.sameForm(o.w2);
    }
  };
  std::vector<Expert> expertList;
  int output = -1;
};

class MoeFuser {
public:
  MoeFuser(onnx::GraphProto &graph, GraphImporter &imp)
      : graph(graph), imp(imp) {
    index();
  }

  /// Fuses every block it can; the number fused.
  int run(llvm::StringMap<std::vector<std::string>> &stacked);

private:
  onnx::GraphProto &graph;
  GraphImporter &imp;
  llvm::StringMap<int> producer;
  llvm::StringMap<SmallVector<int>> consumers;
  llvm::StringMap<int> uses;

  void index() {
    producer.clear();
    consumers.clear();
    uses.clear();
    for (auto [i, node] : llvm::enumerate(graph.node())) {
      for (const std::string &out : node.output())
        if (!out.empty())
          producer[out] = static_cast<int>(i);
      for (const std::string &in : node.input())
        if (!in.empty()) {
          consumers[in].push_back(static_cast<int>(i));
          ++uses[in];
        }
    }
    for (const auto &out : graph.output())
      ++uses[out.name()];
  }

  const onnx::NodeProto *def(StringRef value) const {
    auto it = producer.find(value);
    return it == producer.end() ? nullptr : &graph.node(it->second);
  }
  bool isOp(StringRef value, StringRef opType) const {
    const onnx::NodeProto *node = def(value);
    return node && node->op_type() == opType;
  }
  /// `value` with Casts and Identities before it looked through.
  std::string skipCasts(std::string value) const {
    while (const onnx::NodeProto *node = def(value)) {
      if ((node->op_type() != "Cast" && node->op_type() != "Identity") ||
          node->input_size() < 1)
        break;
      value = node->input(0);
    }
    return value;
  }
  std::optional<SmallVector<int64_t>> shapeOf(StringRef value) const {
    auto it = imp.types.find(value);
    if (it == imp.types.end() || !it->second.shape ||
        llvm::any_of(*it->second.shape, [](int64_t d) { return d < 0; }))
      return std::nullopt;
    return *it->second.shape;
  }
  int32_t dtypeOf(StringRef value) const {
    auto it = imp.types.find(value);
    return it == imp.types.end() ? 0 : it->second.dtype;
  }
  /// The dims of a weight initializer read only once, else empty.
  SmallVector<int64_t> soleUseWeight(StringRef value) const {
    if (!imp.isWeightInitializer(value) || uses.lookup(value) != 1)
      return {};
    const onnx::TensorProto &t = *imp.initializers.lookup(value);
    return SmallVector<int64_t>(t.dims().begin(), t.dims().end());
  }
  /// Nodes downstream of `values`.
  llvm::BitVector reach(ArrayRef<std::string> values) const {
    llvm::BitVector seen(graph.node_size());
    SmallVector<int> work;
    for (const std::string &v : values)
      for (int c : consumers.lookup(v))
        work.push_back(c);
    while (!work.empty()) {
      int n = work.pop_back_val();
      if (seen.test(n))
        continue;
      seen.set(n);
      for (const std::string &out : graph.node(n).output())
        for (int c : consumers.lookup(out))
          work.push_back(c);
    }
    return seen;
  }
  bool producedIn(StringRef value, const llvm::BitVector &nodes) const {
    auto it = producer.find(value);
    return it != producer.end() && nodes.test(it->second);
  }

  std::optional<std::string> matchRouter(int topK, MoeMatch &m);
  /// The value `value` is a constant scalar equal to `want` (to float
  /// round-off).
  bool isScalar(StringRef value, double want) const {
    const ConstTensor *c = imp.getConst(value, true);
    return c && c->numElements() == 1 &&
           std::abs(c->getDouble(0) - want) <= 1e-6 * std::abs(want);
  }
  std::optional<std::pair<StringRef, std::string>>
  matchActivation(StringRef value) const;
  std::optional<std::pair<MoeMatch::Linear, std::string>>
  matchLinear(StringRef value, int64_t in, int64_t out) const;
  std::optional<MoeMatch::Expert> matchSwiGlu(const MoeMatch &m,
                                              const onnx::NodeProto &product,
                                              int64_t ffn) const;
  void matchExperts(MoeMatch &m, const llvm::BitVector &routed);
  std::optional<std::string> orderExperts(MoeMatch &m,
                                          const llvm::BitVector &routed);
  std::optional<std::string> findOutput(MoeMatch &m);
  std::string rewrite(const MoeMatch &m, int ordinal,
                      llvm::StringMap<std::vector<std::string>> &stacked);
};

/// The TopK's router: its softmax, logits, tokens, k and normalization.
std::optional<std::string> MoeFuser::matchRouter(int topK, MoeMatch &m) {
  const onnx::NodeProto &t = graph.node(topK);
  m.topK = topK;
  if (getAttrInt(t, "largest", 1) != 1)
    return "it takes the smallest values";
  std::optional<SmallVector<int64_t>> inShape = shapeOf(t.input(0));
  if (!inShape || inShape->empty())
    return "its input has no static shape";
  int64_t rank = static_cast<int64_t>(inShape->size());
  int64_t axis = getAttrInt(t, "axis", -1);
  if (axis != -1 && axis != rank - 1)
    return "it is not over the last axis";
  const ConstTensor *k =
      t.input_size() > 1 ? imp.getConst(t.input(1), true) : nullptr;
  if (!k || k->numElements() != 1)
    return "its k is not a constant";
  m.k = k->getInt(0);
  std::string in = skipCasts(t.input(0));
  if (const onnx::NodeProto *softmax = def(in);
      softmax && softmax->op_type() == "Softmax") {
    int64_t softmaxAxis = getAttrInt(*softmax, "axis", imp.opset < 13 ? 1 : -1);
    if (softmaxAxis != -1 && softmaxAxis != rank - 1)
      return "its softmax is not over the experts";
    m.probs = in;
    m.logits = skipCasts(softmax->input(0));
  } else {
    // Mixtral's reference: the softmax of the top k logits.
    bool softmaxOfValues = false;
    for (int c : consumers.lookup(t.output(0))) {
      const onnx::NodeProto &n = graph.node(c);
      int64_t a = getAttrInt(n, "axis", imp.opset < 13 ? 1 : -1);
      softmaxOfValues |= n.op_type() == "Softmax" && (a == -1 || a == rank - 1);
    }
    if (!softmaxOfValues)
      return "it is of neither a softmax nor logits followed by one";
    m.logits = in;
    m.softmaxAfterTopK = true;
  }
  const onnx::NodeProto *router = def(m.logits);
  if (!router || router->op_type() != "MatMul")
    return "its logits are not a MatMul of the tokens and the router weight";
  SmallVector<int64_t> gate = soleUseWeight(router->input(1));
  if (gate.size() != 2)
    return "the router's weight is not a [hidden, experts] initializer";
  m.tokens = router->input(0);
  m.hidden = gate[0];
  m.experts = gate[1];
  std::optional<SmallVector<int64_t>> tokens = shapeOf(m.tokens);
  if (!tokens || tokens->empty() || tokens->back() != m.hidden)
    return "the tokens have no static shape [..., hidden]";
  if (inShape->back() != m.experts)
    return "it is not over the router's experts";
  if (m.k < 1 || m.k > m.experts)
    return "its k " + std::to_string(m.k) + " is not in [1, experts]";
  if (!m.softmaxAfterTopK && dtypeOf(m.probs) != dtypeOf(m.tokens))
    return "the router's probabilities and the tokens differ in type";
  // values / ReduceSum(values): the k weights normalized.
  m.normalize = m.softmaxAfterTopK;
  for (int c : consumers.lookup(t.output(0))) {
    const onnx::NodeProto &n = graph.node(c);
    if (n.op_type() == "ReduceSum")
      for (int d : consumers.lookup(n.output(0)))
        m.normalize |= graph.node(d).op_type() == "Div" &&
                       graph.node(d).input(0) == t.output(0) &&
                       graph.node(d).input(1) == n.output(0);
  }
  return std::nullopt;
}

/// The activation of a two-layer expert that `value` is, and its input:
/// Relu, Gelu, x * Sigmoid(x) (silu), or exact GELU as PyTorch exports it,
/// the product of x, erf(x / sqrt 2) + 1 and 0.5 in any order.
std::optional<std::pair<StringRef, std::string>>
MoeFuser::matchActivation(StringRef value) const {
  const onnx::NodeProto *node = def(value);
  if (!node || node->input_size() < 1)
    return std::nullopt;
  const std::string &op = node->op_type();
  if (op == "Relu")
    return std::make_pair(StringRef("relu"), node->input(0));
  if (op == "Gelu")
    return std::make_pair(
        StringRef(getAttrString(*node, "approximate", "none") == "tanh"
                      ? "gelu_tanh"
                      : "gelu"),
        node->input(0));
  if (op != "Mul" || node->input_size() != 2)
    return std::nullopt;
  for (int j = 0; j < 2; ++j)
    if (const onnx::NodeProto *sig = def(node->input(j));
        sig && sig->op_type() == "Sigmoid" &&
        sig->input(0) == node->input(1 - j))
      return std::make_pair(StringRef("silu"), node->input(1 - j));
  // Exact GELU: the factors of a product of two Muls.
  SmallVector<std::string, 3> factors;
  for (const std::string &in : node->input()) {
    const onnx::NodeProto *inner = def(in);
    if (inner && inner->op_type() == "Mul" && inner->input_size() == 2)
      factors.append(inner->input().begin(), inner->input().end());
    else
      factors.push_back(in);
  }
  if (factors.size() != 3)
    return std::nullopt;
  // erf(x / sqrt 2) + 1 (or erf(x * 1 / sqrt 2)), its x.
  auto erfTermOf = [&](StringRef v) -> std::optional<std::string> {
    const onnx::NodeProto *add = def(v);
    if (!add || add->op_type() != "Add" || add->input_size() != 2)
      return std::nullopt;
    for (int j = 0; j < 2; ++j) {
      const onnx::NodeProto *erf = def(add->input(j));
      if (!erf || erf->op_type() != "Erf" || !isScalar(add->input(1 - j), 1))
        continue;
      const onnx::NodeProto *scale = def(erf->input(0));
      if (scale && scale->op_type() == "Div" &&
          isScalar(scale->input(1), std::sqrt(2.0)))
        return scale->input(0);
      if (scale && scale->op_type() == "Mul")
        for (int s = 0; s < 2; ++s)
          if (isScalar(scale->input(s), 1 / std::sqrt(2.0)))
            return scale->input(1 - s);
    }
    return std::nullopt;
  };
  for (int t = 0; t < 3; ++t) {
    std::optional<std::string> x = erfTermOf(factors[t]);
    if (!x)
      continue;
    const std::string &a = factors[(t + 1) % 3], &b = factors[(t + 2) % 3];
    if ((a == *x && isScalar(b, 0.5)) || (b == *x && isScalar(a, 0.5)))
      return std::make_pair(StringRef("gelu"), *x);
  }
  return std::nullopt;
}

/// The linear layer `value` is, of [in] -> [out] (-1: any size), and its
/// input: MatMul(x, W [in, out]), or Gemm(x, W, b) with W [in, out] or
/// (transB) [out, in] and b [out] optional; weights read nowhere else.
std::optional<std::pair<MoeMatch::Linear, std::string>>
MoeFuser::matchLinear(StringRef value, int64_t in, int64_t out) const {
  const onnx::NodeProto *node = def(value);
  if (!node || node->input_size() < 2)
    return std::nullopt;
  MoeMatch::Linear linear;
  linear.weight = node->input(1);
  if (node->op_type() == "Gemm") {
    if (getAttrInt(*node, "transA", 0) != 0 ||
        getAttrFloat(*node, "alpha", 1) != 1 ||
        getAttrFloat(*node, "beta", 1) != 1)
      return std::nullopt;
    linear.transposed = getAttrInt(*node, "transB", 0) != 0;
    if (node->input_size() > 2)
      linear.bias = node->input(2);
  } else if (node->op_type() != "MatMul") {
    return std::nullopt;
  }
  SmallVector<int64_t> w = soleUseWeight(linear.weight);
  if (w.size() != 2)
    return std::nullopt;
  if (linear.transposed)
    std::swap(w[0], w[1]);
  if ((in >= 0 && w[0] != in) || (out >= 0 && w[1] != out))
    return std::nullopt;
  if (!linear.bias.empty() &&
      soleUseWeight(linear.bias) != SmallVector<int64_t>{w[1]})
    return std::nullopt;
  linear.in = w[0];
  return std::make_pair(std::move(linear), node->input(0));
}

/// A SwiGLU expert whose W2 reads `product`, its layers of `ffn` units.
std::optional<MoeMatch::Expert>
MoeFuser::matchSwiGlu(const MoeMatch &m, const onnx::NodeProto &product,
                      int64_t ffn) const {
  for (int side = 0; side < 2; ++side) {
    std::optional<std::pair<StringRef, std::string>> silu =
        matchActivation(product.input(side));
    if (!silu || silu->first != "silu")
      continue;
    auto gate = matchLinear(silu->second, m.hidden, ffn);
    auto up = matchLinear(skipCasts(product.input(1 - side)), m.hidden, ffn);
    if (!gate || !up || gate->second != up->second)
      continue;
    MoeMatch::Expert e;
    e.w1 = std::move(gate->first);
    e.w3 = std::move(up->first);
    e.rows = gate->second;
    e.activation = "swiglu";
    return e;
  }
  return std::nullopt;
}

/// Every expert downstream of the routing (or on the tokens): SwiGLU, or
/// two linear layers with an activation between.
void MoeFuser::matchExperts(MoeMatch &m, const llvm::BitVector &routed) {
  for (auto [i, node] : llvm::enumerate(graph.node())) {
    if (node.output_size() < 1 ||
        (node.op_type() != "MatMul" && node.op_type() != "Gemm"))
      continue;
    auto down = matchLinear(node.output(0), -1, m.hidden);
    if (!down)
      continue;
    int64_t ffn = down->first.in;
    std::string in = skipCasts(down->second);
    const onnx::NodeProto *product = def(in);
    if (!product)
      continue;
    std::optional<MoeMatch::Expert> expert;
    if (product->op_type() == "Mul" && product->input_size() == 2)
      expert = matchSwiGlu(m, *product, ffn);
    if (!expert)
      if (std::optional<std::pair<StringRef, std::string>> act =
              matchActivation(in))
        if (auto up = matchLinear(skipCasts(act->second), m.hidden, ffn)) {
          expert.emplace();
          expert->w1 = std::move(up->first);
          expert->rows = up->second;
          expert->activation = act->first;
        }
    if (!expert ||
        (expert->rows != m.tokens && !producedIn(expert->rows, routed)))
      continue;
    m.ffn = ffn;
    expert->w2 = std::move(down->first);
    expert->w2Node = static_cast<int>(i);
    m.expertList.push_back(std::move(*expert));
  }
  // A shared expert beside the routed ones (Qwen-MoE, DeepSeek-MoE) reads
  // the tokens whole: where the routed ones are E, it is not one of them.
  if (static_cast<int64_t>(m.expertList.size()) > m.experts) {
    auto routedOnly = m.expertList;
    llvm::erase_if(routedOnly, [&](const MoeMatch::Expert &e) {
      return e.rows == m.tokens;
    });
    if (static_cast<int64_t>(routedOnly.size()) == m.experts)
      m.expertList = std::move(routedOnly);
  }
}

/// Expert e's rows come from a Gather of the expert mask at constant index
/// e (Hugging Face's `expert_mask[e]`); without such gathers the node order.
std::optional<std::string>
MoeFuser::orderExperts(MoeMatch &m, const llvm::BitVector &routed) {
  int found = 0;
  for (MoeMatch::Expert &e : m.expertList) {
    SmallVector<std::string> work = {e.rows};
    std::set<std::string> seen;
    while (!work.empty() && e.index < 0) {
      std::string v = work.pop_back_val();
      if (!seen.insert(v).second || !producedIn(v, routed))
        continue;
      const onnx::NodeProto &n = *def(v);
      if (n.op_type() == "Gather" && n.input_size() == 2 &&
          producedIn(n.input(0), routed)) {
        const ConstTensor *c = imp.getConst(n.input(1), true);
        if (c && c->numElements() == 1 && c->shape.empty()) {
          e.index = c->getInt(0);
          break;
        }
      }
      for (const std::string &in : n.input())
        if (!in.empty())
          work.push_back(in);
    }
    found += e.index >= 0;
  }
  if (found == 0) {
    for (auto [i, e] : llvm::enumerate(m.expertList))
      e.index = static_cast<int64_t>(i);
    return std::nullopt;
  }
  std::vector<bool> taken(m.experts, false);
  for (const MoeMatch::Expert &e : m.expertList) {
    if (e.index < 0 || e.index >= m.experts || taken[e.index])
      return "its experts' mask indices are not each expert once";
    taken[e.index] = true;
  }
  llvm::sort(m.expertList,
             [](const auto &a, const auto &b) { return a.index < b.index; });
  return std::nullopt;
}

/// The first node every expert reaches, each through a Mul by a routing
/// weight.
std::optional<std::string> MoeFuser::findOutput(MoeMatch &m) {
  const onnx::NodeProto &t = graph.node(m.topK);
  llvm::BitVector weights = reach({t.output(0)});
  int64_t numExperts = m.experts;
  std::vector<llvm::BitVector> reached(graph.node_size());
  llvm::BitVector weighted(numExperts);
  int first = graph.node_size();
  for (const MoeMatch::Expert &e : m.expertList)
    first = std::min(first, e.w2Node);
  for (int i = first; i < graph.node_size(); ++i) {
    const onnx::NodeProto &n = graph.node(i);
    llvm::BitVector bits(numExperts);
    for (const std::string &in : n.input())
      if (auto it = producer.find(in);
          it != producer.end() && it->second >= first)
        bits |= reached[it->second];
    for (const MoeMatch::Expert &e : m.expertList)
      if (e.w2Node == i)
        bits.set(e.index);
    if (n.op_type() == "Mul" && n.input_size() == 2)
      for (int side = 0; side < 2; ++side) {
        auto it = producer.find(n.input(side));
        auto other = producer.find(n.input(1 - side));
        if (it != producer.end() && weights.test(it->second) &&
            other != producer.end() && other->second >= first)
          weighted |= reached[other->second];
      }
    reached[i] = bits;
    if (bits.all()) {
      m.output = i;
      break;
    }
  }
  if (m.output < 0)
    return "no node joins every expert's output";
  if (!weighted.all())
    return "an expert's output is not weighted by the routing";
  const onnx::NodeProto &out = graph.node(m.output);
  for (int j = 1; j < out.output_size(); ++j)
    if (uses.lookup(out.output(j)))
      return "the joining node has other outputs in use";
  std::optional<SmallVector<int64_t>> y = shapeOf(out.output(0)),
                                      x = shapeOf(m.tokens);
  if (y && *y != *x)
    return "the joined output's shape is not the tokens'";
  return std::nullopt;
}

/// A scope of PyTorch's node names ("/model/layers.0/moe/TopK") as a dotted
/// module path, or `moe<ordinal>`.
std::string blockName(StringRef nodeName, int ordinal) {
  if (nodeName.starts_with("/")) {
    StringRef scope = nodeName.drop_front().rsplit('/').first;
    if (!scope.empty() && scope != nodeName.drop_front()) {
      std::string dotted = scope.str();
      llvm::replace(dotted, '/', '.');
      return dotted;
    }
  }
  return "moe" + std::to_string(ordinal);
}

std::string
MoeFuser::rewrite(const MoeMatch &m, int ordinal,
                  llvm::StringMap<std::vector<std::string>> &stacked) {
  const onnx::NodeProto &t = graph.node(m.topK);
  std::string name = blockName(t.name(), ordinal);
  auto uniqueName = [&](const std::string &base) {
    std::string n = base;
    for (int i = 1;
         imp.initializers.count(n) || producer.count(n) || stacked.count(n);
         ++i)
      n = base + "_" + std::to_string(i);
    return n;
  };
  // The stacked weights: read back by the plan export part by part
  // (ppc.stacked_weights), so they are declared here without data. Two
  // linear layers have no W3 (an empty input of the fused node).
  // Biases stack alike; weights stay as each expert holds them (the fused
  // node says which are transposed).
  const MoeMatch::Expert &form = m.expertList.front();
  StringRef activation = form.activation;
  bool gated = activation == "swiglu";
  const MoeMatch::Linear MoeMatch::Expert::*layers[3] = {
      &MoeMatch::Expert::w1, &MoeMatch::Expert::w3, &MoeMatch::Expert::w2};
  // W1, W3, W2, then b1, b3, b2 (empty: none).
  std::string weights[6];
  auto stack = [&](std::string &into, const std::string &stackName, auto part) {
    std::vector<std::string> parts;
    for (const MoeMatch::Expert &e : m.expertList)
      parts.push_back(part(e));
    const onnx::TensorProto &first = *imp.initializers.lookup(parts[0]);
    into = uniqueName(stackName);
    GraphImporter::ValueType &vt = imp.types[into];
    vt.dtype = first.data_type();
    vt.shape.emplace();
    vt.shape->push_back(m.experts);
    vt.shape->append(first.dims().begin(), first.dims().end());
    vt.symbols.assign(vt.shape->size(), "");
    stacked[into] = std::move(parts);
  };
  const char *layerName[3] = {"w1", "w3", "w2"};
  for (int w = 0; w < 3; ++w) {
    if (w == 1 && !gated)
      continue;
    auto layer = layers[w];
    stack(weights[w], name + ".experts." + layerName[w],
          [&](const MoeMatch::Expert &e) { return (e.*layer).weight; });
    if (!(form.*layer).bias.empty())
      stack(weights[3 + w],
            name + ".experts.b" + std::string(layerName[w]).substr(1),
            [&](const MoeMatch::Expert &e) { return (e.*layer).bias; });
  }
  std::vector<onnx::NodeProto> added;
  std::string probs = m.probs;
  if (m.softmaxAfterTopK) {
    // The full softmax; combine normalizes it over the k chosen.
    probs = uniqueName(name + ".router.softmax");
    onnx::NodeProto softmax;
    softmax.set_op_type("Softmax");
    softmax.set_name(name + ".router.softmax");
    softmax.add_input(m.logits);
    softmax.add_output(probs);
    onnx::AttributeProto *axis = softmax.add_attribute();
    axis->set_name("axis");
    axis->set_type(onnx::AttributeProto::INT);
    axis->set_i(-1);
    imp.types[probs] = imp.types.lookup(m.logits);
    added.push_back(std::move(softmax));
  }
  onnx::NodeProto fused;
  fused.set_op_type(kFusedMoeOpType.str());
  fused.set_domain(kFusedDomain.str());
  fused.set_name(name);
  fused.add_input(m.tokens);
  fused.add_input(probs);
  for (const std::string &w : weights)
    fused.add_input(w);
  fused.add_output(graph.node(m.output).output(0));
  onnx::AttributeProto *k = fused.add_attribute();
  k->set_name("top_k");
  k->set_type(onnx::AttributeProto::INT);
  k->set_i(m.k);
  onnx::AttributeProto *normalize = fused.add_attribute();
  normalize->set_name("normalize");
  normalize->set_type(onnx::AttributeProto::INT);
  normalize->set_i(m.normalize ? 1 : 0);
  onnx::AttributeProto *act = fused.add_attribute();
  act->set_name("activation");
  act->set_type(onnx::AttributeProto::STRING);
  act->set_s(activation.str());
  onnx::AttributeProto *transposed = fused.add_attribute();
  transposed->set_name("transposed");
  transposed->set_type(onnx::AttributeProto::INTS);
  for (auto layer : layers)
    transposed->add_ints((form.*layer).transposed ? 1 : 0);
  GraphImporter::ValueType &out = imp.types[fused.output(0)];
  out = imp.types.lookup(m.tokens);
  added.push_back(std::move(fused));

  // The joining node's place takes the new nodes; the rest of the block
  // is dead and goes with the importer's dead code elimination.
  std::vector<onnx::NodeProto> nodes;
  for (int i = 0; i < graph.node_size(); ++i) {
    if (i == m.output) {
      for (onnx::NodeProto &n : added)
        nodes.push_back(std::move(n));
      continue;
    }
    nodes.push_back(std::move(*graph.mutable_node(i)));
  }
  graph.clear_node();
  for (onnx::NodeProto &n : nodes)
    *graph.add_node() = std::move(n);
  index();
  return name;
}

int MoeFuser::run(llvm::StringMap<std::vector<std::string>> &stacked) {
  int fused = 0;
  for (int i = 0; i < graph.node_size(); ++i) {
    const onnx::NodeProto &t = graph.node(i);
    if (t.op_type() != "TopK")
      continue;
    MoeMatch m;
    std::optional<std::string> problem = matchRouter(i, m);
    if (problem)
      continue; // not a router: a TopK like any other
    llvm::BitVector routed = reach({t.output(0), t.output(1)});
    matchExperts(m, routed);
    if (static_cast<int64_t>(m.expertList.size()) != m.experts)
      problem = "it has " + std::to_string(m.expertList.size()) +
                " experts (SwiGLU, or two linear layers with ReLU, GELU or "
                "SiLU between) of the router's " +
                std::to_string(m.experts);
    for (const MoeMatch::Expert &e : m.expertList)
      if (!problem && e.activation != m.expertList.front().activation)
        problem = "its experts differ in activation (" +
                  m.expertList.front().activation.str() + " and " +
                  e.activation.str() + ")";
      else if (!problem && !e.sameForm(m.expertList.front()))
        problem = "its experts' linear layers differ in form (a bias, or "
                  "a transposed weight, in some and not others)";
    if (!problem)
      problem = orderExperts(m, routed);
    if (!problem)
      problem = findOutput(m);
    if (problem) {
      emitWarning(imp.getNodeLoc(t, i))
          << "the mixture of experts routed by TopK '" << t.name()
          << "' is not fused: " << *problem;
      continue;
    }
    rewrite(m, fused++, stacked);
  }
  return fused;
}

} // namespace

int onnx_import::fuseMixturesOfExperts(
    onnx::GraphProto &graph, GraphImporter &imp,
    llvm::StringMap<std::vector<std::string>> &stacked) {
  return MoeFuser(graph, imp).run(stacked);
}

/// The routing groups [G, S] of the block's tokens: N groups of one token
/// (capacity 1: no choice dropped), or with a capacity factor the samples
/// of the [B, S, H] tokens the block flattened.
static FailureOr<std::pair<int64_t, int64_t>>
routingGroups(GraphImporter &imp, Value tokens, int64_t hidden) {
  auto type = cast<RankedTensorType>(tokens.getType());
  int64_t n = type.getNumElements() / hidden;
  if (imp.options.moeCapacityFactor == 0)
    return std::make_pair(n, int64_t{1});
  Value samples = tokens;
  if (auto flatten = tokens.getDefiningOp<g::ReshapeOp>())
    samples = flatten.getInput();
  auto shape = cast<RankedTensorType>(samples.getType()).getShape();
  if (shape.size() != 3 || shape[2] != hidden)
    return emitError(imp.currentLoc)
           << "--moe-capacity-factor routes each sample of a block's "
              "tokens [batch, sequence, hidden]; this block's tokens are "
           << type;
  return std::make_pair(shape[0], shape[1]);
}

/// Tokens [..., H] as G routing groups of S tokens, the probabilities
/// [..., E] alike; dispatch to the [E, G, C, H] slots, the experts (SwiGLU,
/// or two linear layers and an activation) as batched matmuls, combine, and
/// back.
LogicalResult onnx_import::convertFusedMoe(GraphImporter &imp,
                                           const onnx::NodeProto &node) {
  // Inputs: tokens, probabilities, W1, W3, W2, b1, b3, b2 (W3 empty
  // without a gate, a bias empty where the layers have none).
  SmallVector<Value, 8> in;
  for (int i = 0; i < 8; ++i) {
    if (i >= node.input_size() || node.input(i).empty()) {
      in.push_back(Value());
      continue;
    }
    FailureOr<Value> v = imp.getValue(node.input(i));
    if (failed(v))
      return failure();
    in.push_back(*v);
  }
  std::string activation = getAttrString(node, "activation", "swiglu");
  // Per layer W1, W3, W2: its weights [E, out, in] rather than [E, in, out].
  SmallVector<int64_t> transposed =
      getAttrInts(node, "transposed").value_or(SmallVector<int64_t>{});
  transposed.resize(3, 0);
  auto typeOf = [](Value v) { return cast<RankedTensorType>(v.getType()); };
  RankedTensorType tokens = typeOf(in[0]), w1 = typeOf(in[2]);
  int64_t e = w1.getDimSize(0), h = w1.getDimSize(transposed[0] ? 2 : 1),
          f = w1.getDimSize(transposed[0] ? 1 : 2);
  int64_t topK = getAttrInt(node, "top_k", 1);
  imp.currentLoc =
      NameLoc::get(StringAttr::get(imp.context, node.name()), imp.getFileLoc());
  FailureOr<std::pair<int64_t, int64_t>> groups = routingGroups(imp, in[0], h);
  if (failed(groups))
    return failure();
  auto [groupCount, groupSize] = *groups;
  // Capacity: a group's even share of its choices times the factor.
  int64_t capacity = 1;
  if (double factor = imp.options.moeCapacityFactor; factor > 0)
    capacity = std::max<int64_t>(
        1, static_cast<int64_t>(std::ceil(static_cast<double>(topK) *
                                          static_cast<double>(groupSize) *
                                          factor / static_cast<double>(e))));
  int64_t n = groupCount * capacity;
  Type elem = tokens.getElementType();
  auto tensor = [&](ArrayRef<int64_t> shape) {
    return RankedTensorType::get(shape, elem);
  };
  MLIRContext *ctx = imp.context;
  std::string name = node.name();
  auto at = [&](StringRef suffix) {
    imp.currentLoc = NameLoc::get(StringAttr::get(ctx, name + suffix.str()),
                                  imp.getFileLoc());
    return imp.currentLoc;
  };
  OpBuilder &b = imp.builder;
  Value x = (at(".tokens"), reshape(imp, in[0], {groupCount, groupSize, h}));
  Value p = (at(".probs"), reshape(imp, in[1], {groupCount, groupSize, e}));
  auto topKAttr = b.getNamedAttr("top_k", b.getI64IntegerAttr(topK));
  Value slots =
      g::MoeDispatchOp::create(b, at(".dispatch"),
                               TypeRange{tensor({e, groupCount, capacity, h})},
                               ValueRange{x, p}, {topKAttr})
          .getResult();
  Value rows = (at(".dispatch.rows"), reshape(imp, slots, {e, n, h}));
  // Layer `l` (0: W1, 1: W3, 2: W2) of the experts on `lhs`: a batched
  // matmul, plus its stacked bias [E, cols] as [E, 1, cols].
  auto layer = [&](int l, Value lhs, int64_t cols) {
    static const char *names[3] = {"1", "3", "2"};
    std::string w = std::string(".experts.w") + names[l];
    Value out = g::MatMulOp::create(b, at(w), tensor({e, n, cols}), lhs,
                                    in[2 + l], false, transposed[l] != 0)
                    .getResult();
    if (Value bias = in[5 + l]) {
      std::string bn = std::string(".experts.b") + names[l];
      Value column = (at(bn + ".rows"), reshape(imp, bias, {e, 1, cols}));
      out = g::AddOp::create(b, at(bn), out.getType(), out, column);
    }
    return out;
  };
  Value mid = layer(0, rows, f);
  Type midType = mid.getType();
  if (activation == "swiglu") {
    Value up = layer(1, rows, f);
    Value gate = g::SiluOp::create(b, at(".experts.silu"), midType, mid);
    mid = g::MulOp::create(b, at(".experts.mul"), midType, gate, up);
  } else if (activation == "relu") {
    mid = g::ReluOp::create(b, at(".experts.relu"), midType, ValueRange{mid});
  } else if (activation == "silu") {
    mid = g::SiluOp::create(b, at(".experts.silu"), midType, mid);
  } else {
    mid = g::GeluOp::create(b, at(".experts.gelu"), midType, mid,
                            activation == "gelu_tanh"
                                ? g::GeluApproximation::tanh
                                : g::GeluApproximation::none);
  }
  Value down = layer(2, mid, h);
  Value back =
      (at(".combine.slots"), reshape(imp, down, {e, groupCount, capacity, h}));
  auto normalize = b.getNamedAttr(
      "normalize", b.getBoolAttr(getAttrInt(node, "normalize", 0) != 0));
  Value combined =
      g::MoeCombineOp::create(b, at(".combine"),
                              TypeRange{tensor({groupCount, groupSize, h})},
                              ValueRange{back, p}, {topKAttr, normalize})
          .getResult();
  imp.setValue(node.output(0),
               (at(".output"), reshape(imp, combined, tokens.getShape())));
  return success();
}
