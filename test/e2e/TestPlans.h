//===- TestPlans.h - hand-built plans for executor tests --------*- C++ -*-===//
//
// Small plans built without ppc-opt, for the runtime's unit test (one rank)
// and make-test-plans (the e2e tests under mpirun):
//  - dataMovementPlan: an input pushed through every collective, copies and
//    send/recv until rank 0 holds it whole again as the output, so --verify
//    (which compares the output with the input) checks the data movement;
//    spaced, with work before each collective for --overlap to start it
//    early;
//  - silentPeerPlan: rank 0 waits for a message rank 1 never sends;
//  - fakeTrainingPlan: kernel-free training (an input used as the weight's
//    gradient) with a frozen tensor, for optimizer and checkpoint tests;
//  - mlpPlan: a 2-layer MLP with an MSE loss, data parallel (batch split,
//    gradients all-reduced) or tensor parallel (hidden units split, partial
//    sums all-reduced), for --verify against the reference;
//  - hugeBatchPlan: what a model lowered with an absurd batch looks like to
//    the runtime (buffers beyond any memory, or beyond 64-bit byte counts).
//
//===----------------------------------------------------------------------===//

#ifndef PPC_TEST_E2E_TESTPLANS_H
#define PPC_TEST_E2E_TESTPLANS_H

#include "ppc/Runtime/PlanIO.h"
#include "ppc/Runtime/plan.pb.h"

#include <cstdint>
#include <string>
#include <vector>

namespace ppc::runtime::testing {

namespace pf = ppc::planfile;
using Shape = std::vector<int64_t>;
using pf::Instruction;
using pf::Tensor;

class PlanBuilder {
public:
  PlanBuilder(int ranks, bool training) : nextBuffer(ranks, 0) {
    plan.set_version(kPlanVersion);
    plan.set_producer("ppc test plans");
    plan.mutable_machine()->set_name("test" + std::to_string(ranks));
    plan.mutable_machine()->set_num_devices(ranks);
    plan.set_training(training);
    plan.set_loss_tensor(-1);
    for (int r = 0; r < ranks; ++r)
      plan.add_programs()->set_rank(r);
  }

  int ranks() const { return plan.programs_size(); }

  int tensor(const std::string &name, const Shape &shape, Tensor::Role role,
             Tensor::Init init = Tensor::INIT_UNSPECIFIED, double bound = 0) {
    Tensor *t = plan.add_tensors();
    t->set_id(plan.tensors_size() - 1);
    t->set_name(name);
    for (int64_t d : shape)
      t->add_shape(d);
    t->set_dtype("f32");
    t->set_role(role);
    t->set_init(init);
    t->set_init_bound(bound);
    return t->id();
  }

  int op(const std::string &kind, const std::string &name,
         const std::vector<int> &operands, const std::vector<int> &results,
         const std::vector<bool> &needsGrad) {
    pf::Op *o = plan.add_ops();
    o->set_id(plan.ops_size() - 1);
    o->set_kind(kind);
    o->set_name(name);
    for (int t : operands)
      o->add_operands(t);
    for (int t : results)
      o->add_results(t);
    for (bool g : needsGrad)
      o->add_needs_grad(g);
    return o->id();
  }

  Shape shapeOf(int tensor) const {
    return Shape(plan.tensors(tensor).shape().begin(),
                 plan.tensors(tensor).shape().end());
  }

  /// A buffer of box [lo, hi) of `tensor` (or of its gradient) on `rank`.
  int alloc(int rank, int tensor, const Shape &lo, const Shape &hi,
            bool grad = false) {
    pf::Buffer *b = add(rank)->mutable_alloc()->mutable_buffer();
    b->set_id(nextBuffer[rank]++);
    b->set_tensor(tensor);
    b->set_grad(grad);
    setBox(b->mutable_box(), lo, hi);
    return b->id();
  }
  int whole(int rank, int tensor, bool grad = false) {
    Shape shape = shapeOf(tensor);
    return alloc(rank, tensor, Shape(shape.size(), 0), shape, grad);
  }
  int scratch(int rank, const Shape &shape) {
    pf::Buffer *b = add(rank)->mutable_alloc()->mutable_buffer();
    b->set_id(nextBuffer[rank]++);
    b->set_tensor(-1);
    for (int64_t d : shape)
      b->add_shape(d);
    return b->id();
  }
  void free(int rank, int buffer) {
    add(rank)->mutable_free()->set_buffer(buffer);
  }
  void load(int rank, int buffer) {
    add(rank)->mutable_load()->set_buffer(buffer);
  }
  void fill(int rank, int buffer, float value) {
    auto *f = add(rank)->mutable_fill();
    f->set_buffer(buffer);
    f->set_value(value);
  }
  void copy(int rank, int src, int dst, const Shape &lo, const Shape &hi,
            bool accumulate = false) {
    auto *c = add(rank)->mutable_copy();
    c->set_src(src);
    c->set_dst(dst);
    setBox(c->mutable_box(), lo, hi);
    c->set_accumulate(accumulate);
  }
  void send(int rank, int buffer, const Shape &lo, const Shape &hi, int peer,
            int tag) {
    auto *s = add(rank)->mutable_send();
    s->set_buffer(buffer);
    setBox(s->mutable_box(), lo, hi);
    s->set_peer(peer);
    s->set_tag(tag);
  }
  void recv(int rank, int buffer, const Shape &lo, const Shape &hi, int peer,
            int tag, bool accumulate = false) {
    auto *r = add(rank)->mutable_recv();
    r->set_buffer(buffer);
    setBox(r->mutable_box(), lo, hi);
    r->set_peer(peer);
    r->set_tag(tag);
    r->set_accumulate(accumulate);
  }
  void kernel(int rank, int op, int stage, const std::vector<int> &inputs,
              const std::vector<int> &outputs) {
    auto *k = add(rank)->mutable_kernel();
    k->set_op(op);
    k->set_stage(stage);
    for (int b : inputs)
      k->add_inputs(b);
    for (int b : outputs)
      k->add_outputs(b);
  }
  /// `inputGrads` has one entry per operand, -1 where none is wanted.
  void kernelBackward(int rank, int op, const std::vector<int> &inputs,
                      const std::vector<int> &outputs,
                      const std::vector<int> &outputGrads,
                      const std::vector<int> &inputGrads) {
    auto *k = add(rank)->mutable_kernel_backward();
    k->set_op(op);
    for (int b : inputs)
      k->add_inputs(b);
    for (int b : outputs)
      k->add_outputs(b);
    for (int b : outputGrads)
      k->add_output_grads(b);
    for (int b : inputGrads)
      k->add_input_grads(b);
  }
  void collective(int rank, Instruction::CollectiveKind kind,
                  const std::vector<int> &group, int buffer, int result = -1,
                  int axis = 0, int root = 0,
                  Instruction::Collective::Reduction reduction = Instruction::Collective::SUM) {
    auto *c = add(rank)->mutable_collective();
    c->set_kind(kind);
    for (int m : group)
      c->add_group(m);
    c->set_buffer(buffer);
    c->set_result(result);
    c->set_axis(axis);
    c->set_root(root);
    c->set_reduction(reduction);
  }
  void update(int rank, int weight, int grad) {
    auto *u = add(rank)->mutable_update();
    u->set_weight(weight);
    u->set_grad(grad);
  }
  void output(int rank, int buffer) {
    add(rank)->mutable_output()->set_buffer(buffer);
  }
  void phase(Instruction::Phase phase) {
    for (int r = 0; r < ranks(); ++r)
      add(r)->mutable_phase()->set_phase(phase);
  }

  pf::Plan plan;

private:
  Instruction *add(int rank) {
    return plan.mutable_programs(rank)->add_instructions();
  }
  static void setBox(pf::Box *box, const Shape &lo, const Shape &hi) {
    for (int64_t v : lo)
      box->add_lo(v);
    for (int64_t v : hi)
      box->add_hi(v);
  }
  std::vector<int> nextBuffer;
};

inline std::vector<int> allRanks(int n) {
  std::vector<int> group;
  for (int r = 0; r < n; ++r)
    group.push_back(r);
  return group;
}

/// Input x [2n, 3n]: rank r starts with rows [2r, 2r+2) and the value goes
/// through all_gather (axis 0), reduce_scatter (max, axis 1), all_to_all,
/// copies into a zero buffer and all_reduce, broadcast from the last rank,
/// all_gather (axis 1) and, with 2+ ranks, two sends of one row each with
/// the same tag (one received with accumulate) to rank 0, which outputs x.
inline pf::Plan dataMovementPlan(int n, bool spaced = false) {
  PlanBuilder b(n, /*training=*/false);
  const int x = b.tensor("x", {2 * n, 3 * n}, Tensor::INPUT);
  b.plan.mutable_tensors(x)->set_is_output(true);
  const int64_t rows = 2 * n, cols = 3 * n;
  const std::vector<int> group = allRanks(n);
  b.phase(Instruction::FORWARD);
  std::vector<int> g2(n);
  for (int r = 0; r < n; ++r) {
    const int64_t r0 = 2 * r, c0 = 3 * r;
    // `spaced`: a copy between scratch buffers before every collective, work
    // that --overlap runs while the collective moves (it starts early).
    int spareA = spaced ? b.scratch(r, {1}) : -1;
    int spareB = spaced ? b.scratch(r, {1}) : -1;
    auto space = [&] {
      if (spaced)
        b.copy(r, spareA, spareB, {0}, {1});
    };
    if (spaced)
      b.fill(r, spareA, 1.0f);
    int a = b.alloc(r, x, {r0, 0}, {r0 + 2, cols});
    b.load(r, a);
    int g = b.whole(r, x);
    space();
    b.collective(r, Instruction::ALL_GATHER, group, a, g, /*axis=*/0);
    int s = b.alloc(r, x, {0, c0}, {rows, c0 + 3});
    space();
    b.collective(r, Instruction::REDUCE_SCATTER, group, g, s, /*axis=*/1, 0,
                 Instruction::Collective::MAX);
    int t = b.alloc(r, x, {r0, 0}, {r0 + 2, cols});
    space();
    b.collective(r, Instruction::ALL_TO_ALL, group, s, t, /*axis=*/0);
    int z = b.whole(r, x);
    b.copy(r, t, z, {r0, 0}, {r0 + 2, cols});
    space();
    b.collective(r, Instruction::ALL_REDUCE, group, z);
    int bc = b.whole(r, x);
    if (r == n - 1)
      b.copy(r, z, bc, {0, 0}, {rows, cols});
    else
      b.fill(r, bc, 7.0f);
    space();
    b.collective(r, Instruction::BROADCAST, group, bc, -1, 0, n - 1);
    int c = b.alloc(r, x, {0, c0}, {rows, c0 + 3});
    b.copy(r, bc, c, {0, c0}, {rows, c0 + 3});
    g2[r] = b.whole(r, x);
    space();
    b.collective(r, Instruction::ALL_GATHER, group, c, g2[r], /*axis=*/1);
  }
  int f = b.whole(0, x);
  if (n == 1) {
    b.copy(0, g2[0], f, {0, 0}, {rows, cols});
  } else {
    b.send(n - 1, g2[n - 1], {rows - 2, 0}, {rows - 1, cols}, 0, 3);
    b.send(n - 1, g2[n - 1], {rows - 1, 0}, {rows, cols}, 0, 3);
    b.fill(0, f, 0.0f);
    b.copy(0, g2[0], f, {0, 0}, {rows - 2, cols});
    b.recv(0, f, {rows - 2, 0}, {rows - 1, cols}, n - 1, 3,
           /*accumulate=*/true);
    b.recv(0, f, {rows - 1, 0}, {rows, cols}, n - 1, 3);
  }
  b.output(0, f);
  return b.plan;
}

/// Rank 0 receives (tag 5) what rank 1 never sends.
inline pf::Plan silentPeerPlan() {
  PlanBuilder b(2, false);
  const int x = b.tensor("x", {2, 3}, Tensor::INPUT);
  b.phase(Instruction::FORWARD);
  int a = b.whole(0, x);
  b.recv(0, a, {0, 0}, {2, 3}, /*peer=*/1, /*tag=*/5);
  int c = b.whole(1, x);
  b.load(1, c);
  return b.plan;
}

/// Kernel-free training on n ranks: weight w [2n, 3] (uniform) and frozen s
/// [3] (ones) replicated on every rank; rank r copies rows [2r, 2r+2) of the
/// input g into the zeroed gradient of w, the gradients are all-reduced
/// (so w's gradient is g) and every rank updates its replica. The "loss" is
/// the scalar input l, output by rank 0.
inline pf::Plan fakeTrainingPlan(int n, pf::Optimizer::Kind kind) {
  PlanBuilder b(n, true);
  const int w = b.tensor("w", {2 * n, 3}, Tensor::WEIGHT, Tensor::UNIFORM, 0.5);
  const int s = b.tensor("s", {3}, Tensor::FROZEN, Tensor::ONES);
  const int g = b.tensor("g", {2 * n, 3}, Tensor::INPUT);
  const int l = b.tensor("l", {}, Tensor::INPUT);
  b.plan.mutable_tensors(l)->set_is_output(true);
  b.plan.set_loss_tensor(l);
  b.plan.set_batch_size(2 * n);
  pf::Optimizer *opt = b.plan.mutable_optimizer();
  opt->set_kind(kind);
  opt->set_learning_rate(0.1);
  opt->set_momentum(0.9);
  opt->set_weight_decay(0.01);
  std::vector<int> wb(n), gw(n);
  b.phase(Instruction::FORWARD);
  for (int r = 0; r < n; ++r) {
    wb[r] = b.whole(r, w);
    b.load(r, wb[r]);
    int sb = b.whole(r, s);
    b.load(r, sb);
  }
  int lb = b.whole(0, l);
  b.load(0, lb);
  b.output(0, lb);
  b.phase(Instruction::BACKWARD);
  for (int r = 0; r < n; ++r) {
    int a = b.alloc(r, g, {2 * r, 0}, {2 * r + 2, 3});
    b.load(r, a);
    gw[r] = b.whole(r, w, /*grad=*/true);
    b.fill(r, gw[r], 0.0f);
    b.copy(r, a, gw[r], {2 * r, 0}, {2 * r + 2, 3});
  }
  b.phase(Instruction::GRAD_SYNC);
  for (int r = 0; r < n; ++r)
    b.collective(r, Instruction::ALL_REDUCE, allRanks(n), gw[r]);
  b.phase(Instruction::UPDATE);
  for (int r = 0; r < n; ++r)
    b.update(r, wb[r], gw[r]);
  return b.plan;
}

/// loss = mse(relu(x W1 + b1) W2 + b2, y) with x [4n, 8], W1 [8, 4n],
/// W2 [4n, 3]. Data parallel: rank r takes batch rows [4r, 4r+4), every
/// rank holds all weights, the loss partials and the weight gradients are
/// all-reduced. Tensor parallel: rank r holds W1's columns and W2's rows
/// [4r, 4r+4) (the hidden units), the second linear's partial sums are
/// all-reduced, b2 is added and its gradient taken by rank 0 only and then
/// all-reduced, and every rank computes the whole loss.
inline pf::Plan mlpPlan(int n, bool tensorParallel,
                        pf::Optimizer::Kind kind = pf::Optimizer::SGD) {
  PlanBuilder b(n, true);
  const int64_t batch = 4 * n, in = 8, hidden = 4 * n, out = 3;
  const int x = b.tensor("x", {batch, in}, Tensor::INPUT);
  const int y = b.tensor("y", {batch, out}, Tensor::INPUT);
  const int w1 = b.tensor("fc1.weight", {in, hidden}, Tensor::WEIGHT,
                          Tensor::UNIFORM, 0.35);
  const int b1 =
      b.tensor("fc1.bias", {hidden}, Tensor::WEIGHT, Tensor::UNIFORM, 0.1);
  const int w2 = b.tensor("fc2.weight", {hidden, out}, Tensor::WEIGHT,
                          Tensor::UNIFORM, 0.35);
  const int b2 =
      b.tensor("fc2.bias", {out}, Tensor::WEIGHT, Tensor::UNIFORM, 0.1);
  const int h = b.tensor("h", {batch, hidden}, Tensor::ACTIVATION);
  const int a = b.tensor("a", {batch, hidden}, Tensor::ACTIVATION);
  const int p = b.tensor("p", {batch, out}, Tensor::ACTIVATION);
  const int loss = b.tensor("loss", {}, Tensor::ACTIVATION);
  b.plan.mutable_tensors(loss)->set_is_output(true);
  b.plan.set_loss_tensor(loss);
  b.plan.set_batch_size(batch);
  pf::Optimizer *opt = b.plan.mutable_optimizer();
  opt->set_kind(kind);
  opt->set_learning_rate(0.05);
  opt->set_momentum(0.9);
  const int fc1 =
      b.op("ppc.linear", "fc1", {x, w1, b1}, {h}, {false, true, true});
  const int relu = b.op("ppc.relu", "relu", {h}, {a}, {true});
  const int fc2 =
      b.op("ppc.linear", "fc2", {a, w2, b2}, {p}, {true, true, true});
  const int mse = b.op("ppc.mse_loss", "mse", {p, y}, {loss}, {true, false});
  const std::vector<int> group = allRanks(n);

  struct Rank {
    int x, y, w1, b1, w2, b2, h, a, p, loss;
    int dLoss, dP, dA, dH, dW1, dB1, dW2, dB2;
  };
  std::vector<Rank> rk(n);
  b.phase(Instruction::FORWARD);
  for (int r = 0; r < n; ++r) {
    Rank &k = rk[r];
    // Batch rows and hidden units this rank works on.
    const int64_t r0 = tensorParallel ? 0 : 4 * r,
                  r1 = tensorParallel ? batch : 4 * r + 4;
    const int64_t h0 = tensorParallel ? 4 * r : 0,
                  h1 = tensorParallel ? 4 * r + 4 : hidden;
    k.x = b.alloc(r, x, {r0, 0}, {r1, in});
    b.load(r, k.x);
    k.y = b.alloc(r, y, {r0, 0}, {r1, out});
    b.load(r, k.y);
    k.w1 = b.alloc(r, w1, {0, h0}, {in, h1});
    b.load(r, k.w1);
    k.b1 = b.alloc(r, b1, {h0}, {h1});
    b.load(r, k.b1);
    k.w2 = b.alloc(r, w2, {h0, 0}, {h1, out});
    b.load(r, k.w2);
    k.b2 = b.whole(r, b2);
    b.load(r, k.b2);
    k.h = b.alloc(r, h, {r0, h0}, {r1, h1});
    b.kernel(r, fc1, 0, {k.x, k.w1, k.b1}, {k.h});
    k.a = b.alloc(r, a, {r0, h0}, {r1, h1});
    b.kernel(r, relu, 0, {k.h}, {k.a});
    k.p = b.alloc(r, p, {r0, 0}, {r1, out});
    b.kernel(r, fc2, 0, {k.a, k.w2, k.b2}, {k.p});
  }
  if (tensorParallel)
    for (int r = 0; r < n; ++r)
      b.collective(r, Instruction::ALL_REDUCE, group, rk[r].p);
  b.phase(Instruction::LOSS);
  for (int r = 0; r < n; ++r) {
    rk[r].loss = b.whole(r, loss);
    b.kernel(r, mse, 0, {rk[r].p, rk[r].y}, {rk[r].loss});
  }
  if (!tensorParallel)
    for (int r = 0; r < n; ++r)
      b.collective(r, Instruction::ALL_REDUCE, group, rk[r].loss);
  b.output(0, rk[0].loss);

  b.phase(Instruction::BACKWARD);
  for (int r = 0; r < n; ++r) {
    Rank &k = rk[r];
    const int64_t r0 = tensorParallel ? 0 : 4 * r,
                  r1 = tensorParallel ? batch : 4 * r + 4;
    const int64_t h0 = tensorParallel ? 4 * r : 0,
                  h1 = tensorParallel ? 4 * r + 4 : hidden;
    k.dLoss = b.whole(r, loss, true);
    b.fill(r, k.dLoss, 1.0f);
    k.dP = b.alloc(r, p, {r0, 0}, {r1, out}, true);
    b.fill(r, k.dP, 0.0f);
    b.kernelBackward(r, mse, {k.p, k.y}, {k.loss}, {k.dLoss}, {k.dP, -1});
    k.dA = b.alloc(r, a, {r0, h0}, {r1, h1}, true);
    b.fill(r, k.dA, 0.0f);
    k.dW2 = b.alloc(r, w2, {h0, 0}, {h1, out}, true);
    b.fill(r, k.dW2, 0.0f);
    k.dB2 = b.whole(r, b2, true);
    b.fill(r, k.dB2, 0.0f);
    b.kernelBackward(r, fc2, {k.a, k.w2, k.b2}, {k.p}, {k.dP},
                     {k.dA, k.dW2, k.dB2});
    k.dH = b.alloc(r, h, {r0, h0}, {r1, h1}, true);
    b.fill(r, k.dH, 0.0f);
    b.kernelBackward(r, relu, {k.h}, {k.a}, {k.dA}, {k.dH});
    k.dW1 = b.alloc(r, w1, {0, h0}, {in, h1}, true);
    b.fill(r, k.dW1, 0.0f);
    k.dB1 = b.alloc(r, b1, {h0}, {h1}, true);
    b.fill(r, k.dB1, 0.0f);
    b.kernelBackward(r, fc1, {k.x, k.w1, k.b1}, {k.h}, {k.dH},
                     {-1, k.dW1, k.dB1});
  }
  b.phase(Instruction::GRAD_SYNC);
  for (int r = 0; r < n; ++r) {
    Rank &k = rk[r];
    if (tensorParallel) {
      b.collective(r, Instruction::ALL_REDUCE, group, k.dB2);
      continue;
    }
    for (int grad : {k.dW1, k.dB1, k.dW2, k.dB2})
      b.collective(r, Instruction::ALL_REDUCE, group, grad);
  }
  b.phase(Instruction::UPDATE);
  for (int r = 0; r < n; ++r) {
    Rank &k = rk[r];
    b.update(r, k.w1, k.dW1);
    b.update(r, k.b1, k.dB1);
    b.update(r, k.w2, k.dW2);
    b.update(r, k.b2, k.dB2);
    for (int buffer : {k.x, k.y, k.h, k.a, k.p, k.loss, k.dLoss, k.dP, k.dA,
                       k.dH, k.dW1, k.dB1, k.dW2, k.dB2})
      b.free(r, buffer);
  }
  return b.plan;
}

/// Input x [batch, 784] split by rows over n ranks, each of which loads its
/// rows and a replicated weight w [784, 10].
inline pf::Plan hugeBatchPlan(int n, int64_t batch) {
  PlanBuilder b(n, false);
  const int x = b.tensor("x", {batch, 784}, Tensor::INPUT);
  const int w = b.tensor("w", {784, 10}, Tensor::WEIGHT, Tensor::ONES);
  b.plan.set_batch_size(batch);
  b.phase(Instruction::FORWARD);
  for (int r = 0; r < n; ++r) {
    int rows = b.alloc(r, x, {batch / n * r, 0}, {batch / n * (r + 1), 784});
    b.load(r, rows);
    int weight = b.whole(r, w);
    b.load(r, weight);
  }
  return b.plan;
}

} // namespace ppc::runtime::testing

#endif // PPC_TEST_E2E_TESTPLANS_H
