//===- DynamicProgramming.cpp - OptCNN elimination, Unity splits ----------===//
//
// The additive cost model: cost(S) = sum_op nodeCost(op, S[op]) + sum over
// op-to-op edges edgeCost(consumer, operand, S[producer], S[consumer]), i.e.
// a pairwise model on the op graph (node tables and edge tables).
//
// 1. Elimination (OptCNN): parallel edges between two ops merge by adding
//    their tables; an op with exactly two incident edges to two distinct
//    ops (one in, one out on a chain) is replaced by one edge whose table
//    is minimized over the op's configurations; an op with a single
//    incident edge (a branch end, an op fed only by inputs) folds into its
//    neighbour's node table. Each step keeps its argmins for backtracking
//    and is exact, so a series-parallel graph (or a tree of them) reduces
//    to isolated ops and is solved exactly.
// 2. What does not reduce (skip connections that break series-parallelism)
//    is a core of ops whose tables carry the eliminated ops exactly. A small
//    core is enumerated. A large one is cut, as Unity does, at bottleneck
//    ops (no core edge jumps over them in topological order), each segment
//    is solved for every pair of configurations of its two cut ops, and a DP
//    over the sequence of cut ops chains the segments; a segment too large
//    to enumerate falls back to coordinate descent (not exact).
//    Repeated structure (transformer layers, ResNet blocks) is solved once:
//    ops of one cost class (costClasses) share one node table, edges between
//    the same classes one edge table, and every elimination is memoized by
//    the content ids of the tables it reads, so the eliminations of the
//    second and later identical layers are look-ups. On machines where the
//    tables over every view would be large, they cover the views anchored
//    at device 0 (a homogeneous machine's translates of a layout cost the
//    same in the additive model), then also at most two split dims; the
//    refinement (4) reaches the rest of the space.
// 3. The strategy is simulated in full; if it overflows memory, the DP is
//    re-run with configurations that need more than a half (a quarter) of
//    a device by themselves rejected; if that still overflows, the answer
//    gets ZeRO stage 1, then 2, then 2 with recomputation of single-reader
//    ops, then 3 with it (the DP's space has neither); data parallel is the
//    fallback, and where it or a whole-network 2-D layout of the space
//    (sampleByParameter) simulates faster than the answer, refinement
//    starts from that.
// 4. Refinement under the simulator: sweeps of single-op moves (each op to
//    each of its configurations, kept when the simulated objective drops)
//    until none helps. trace.front() is the DP's answer before it.
//
//===----------------------------------------------------------------------===//

#include "DpDetail.h"
#include "OpFootprint.h"
#include "ParallelFor.h"

#include "ppc/Search/Blocks.h"

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <optional>

namespace ppc::search {

namespace {

using Clock = std::chrono::steady_clock;
constexpr double kInf = std::numeric_limits<double>::infinity();
/// Strategies of a core (or segment) enumerated exactly at most.
constexpr double kEnumerateLimit = 2e5;

/// Tables are shared between ops and edges that cost the same (repeated
/// layers) and never changed in place: an elimination makes a new table.
using Table = std::shared_ptr<const std::vector<double>>;
using Args = std::shared_ptr<const std::vector<size_t>>;

/// A pairwise cost model over ops: node tables and edge tables, each with a
/// content id (equal ids: equal tables).
struct Pairwise {
  struct Edge {
    size_t a = 0, b = 0; ///< a < b (topological order).
    Table t;             ///< (*t)[ca * |C_b| + cb].
    int64_t id = 0;
    bool alive = true;
  };
  std::vector<size_t> count;
  std::vector<Table> node;
  std::vector<int64_t> nodeId;
  std::vector<Edge> edges;
  /// Ids at and above this one are free for tables the solver makes.
  int64_t nextId = 0;

  double at(const Edge &e, size_t x, size_t cx, size_t cy) const {
    return e.a == x ? (*e.t)[cx * count[e.b] + cy]
                    : (*e.t)[cy * count[e.b] + cx];
  }
  size_t other(const Edge &e, size_t x) const { return e.a == x ? e.b : e.a; }
};

/// One elimination, undone in reverse order to recover the eliminated op.
struct Elimination {
  size_t op = 0, left = 0, right = 0;
  bool series = false; ///< else a leaf folded into `left`.
  Args arg;            ///< [cl * |C_right| + cr] or [cl].
};

/// What an elimination made, kept under the ids of what it read.
struct Made {
  Table table;
  Args arg;
  int64_t id = 0;
};

class Solver {
public:
  Solver(Pairwise model, const std::atomic<bool> *cancel)
      : m(std::move(model)), cancel(cancel) {}

  /// The configuration index of every op minimizing the additive cost.
  std::vector<size_t> solve() {
    size_t n = m.count.size();
    adj.assign(n, {});
    for (size_t e = 0; e < m.edges.size(); ++e) {
      adj[m.edges[e].a].push_back(e);
      adj[m.edges[e].b].push_back(e);
    }
    alive.assign(n, true);
    reduce();
    std::vector<size_t> core;
    for (size_t i = 0; i < n; ++i)
      if (alive[i])
        core.push_back(i);
    assignment.assign(n, 0);
    solveCore(core);
    for (auto it = eliminations.rbegin(); it != eliminations.rend(); ++it) {
      size_t cl = assignment[it->left];
      assignment[it->op] =
          it->series
              ? (*it->arg)[cl * m.count[it->right] + assignment[it->right]]
              : (*it->arg)[cl];
    }
    return assignment;
  }

  int64_t evaluated = 0;
  /// Eliminations answered from the memo (repeated structure).
  int64_t reused = 0;
  bool exact = true;

private:
  Pairwise m;
  std::map<std::array<int64_t, 6>, Made> memo;
  const std::atomic<bool> *cancel;
  std::vector<std::vector<size_t>> adj;
  std::vector<bool> alive;
  std::vector<Elimination> eliminations;
  std::vector<size_t> assignment;

  bool cancelled() const {
    return cancel && cancel->load(std::memory_order_relaxed);
  }

  /// Alive edges of `x`, parallel ones merged into one.
  std::vector<size_t> incident(size_t x) {
    std::vector<size_t> result;
    std::vector<size_t> &list = adj[x];
    list.erase(std::remove_if(list.begin(), list.end(),
                              [&](size_t e) { return !m.edges[e].alive; }),
               list.end());
    for (size_t e : list) {
      Pairwise::Edge &edge = m.edges[e];
      size_t y = m.other(edge, x);
      auto same = std::find_if(result.begin(), result.end(), [&](size_t f) {
        return m.other(m.edges[f], x) == y;
      });
      if (same == result.end()) {
        result.push_back(e);
        continue;
      }
      // Edge elimination: both edges join the same two ops (a < b both).
      Pairwise::Edge &into = m.edges[*same];
      std::array<int64_t, 6> key = {0, std::min(into.id, edge.id),
                                    std::max(into.id, edge.id), 0, 0, 0};
      Made &made = lookup(key, [&](Made &fresh) {
        std::vector<double> sum = *into.t;
        for (size_t i = 0; i < sum.size(); ++i)
          sum[i] += (*edge.t)[i];
        evaluated += static_cast<int64_t>(sum.size());
        fresh.table = std::make_shared<const std::vector<double>>(
            std::move(sum));
      });
      into.t = made.table;
      into.id = made.id;
      edge.alive = false;
    }
    list = result;
    return result;
  }

  void reduce() {
    for (bool changed = true; changed;) {
      changed = false;
      for (size_t j = 0; j < alive.size(); ++j) {
        if (!alive[j])
          continue;
        std::vector<size_t> es = incident(j);
        if (es.size() == 1)
          foldLeaf(j, es[0]);
        else if (es.size() == 2)
          eliminateSeries(j, es[0], es[1]);
        else
          continue;
        changed = true;
      }
    }
  }

  /// The memo's entry for `key`, made by `make` (which fills the table
  /// and, for eliminations, the argmins) the first time.
  template <typename MakeFn> Made &lookup(std::array<int64_t, 6> key,
                                          MakeFn make) {
    auto [it, inserted] = memo.try_emplace(key);
    if (!inserted) {
      ++reused;
      return it->second;
    }
    make(it->second);
    it->second.id = m.nextId++;
    return it->second;
  }

  /// j hangs off one edge: node_i[ci] += min_cj edge(ci, cj) + node_j[cj].
  void foldLeaf(size_t j, size_t e) {
    Pairwise::Edge &edge = m.edges[e];
    size_t i = m.other(edge, j);
    std::array<int64_t, 6> key = {1, m.nodeId[i], m.nodeId[j], edge.id,
                                  edge.a == j, 0};
    Made &made = lookup(key, [&](Made &fresh) {
      std::vector<double> node = *m.node[i];
      std::vector<size_t> arg(m.count[i], 0);
      for (size_t ci = 0; ci < m.count[i]; ++ci) {
        double best = kInf;
        for (size_t cj = 0; cj < m.count[j]; ++cj) {
          double v = m.at(edge, j, cj, ci) + (*m.node[j])[cj];
          if (v < best) {
            best = v;
            arg[ci] = cj;
          }
        }
        node[ci] += best;
      }
      evaluated += static_cast<int64_t>(m.count[i] * m.count[j]);
      fresh.table = std::make_shared<const std::vector<double>>(std::move(node));
      fresh.arg = std::make_shared<const std::vector<size_t>>(std::move(arg));
    });
    m.node[i] = made.table;
    m.nodeId[i] = made.id;
    edge.alive = false;
    alive[j] = false;
    eliminations.push_back({j, i, i, false, made.arg});
  }

  /// i - j - k: one edge i - k minimized over j.
  void eliminateSeries(size_t j, size_t e1, size_t e2) {
    size_t i = m.other(m.edges[e1], j), k = m.other(m.edges[e2], j);
    if (i > k) {
      std::swap(i, k);
      std::swap(e1, e2);
    }
    const Pairwise::Edge &left = m.edges[e1], &right = m.edges[e2];
    size_t ni = m.count[i], nj = m.count[j], nk = m.count[k];
    std::array<int64_t, 6> key = {2,       left.id,  left.a == j,
                                  m.nodeId[j], right.id, right.a == j};
    Made &made = lookup(key, [&](Made &fresh) {
      std::vector<double> merged(ni * nk, kInf);
      std::vector<size_t> arg(ni * nk, 0);
      const std::vector<double> &node = *m.node[j];
      for (size_t ci = 0; ci < ni; ++ci)
        for (size_t cj = 0; cj < nj; ++cj) {
          double base = m.at(left, j, cj, ci) + node[cj];
          if (base == kInf)
            continue;
          double *row = &merged[ci * nk];
          size_t *rowArg = &arg[ci * nk];
          for (size_t ck = 0; ck < nk; ++ck) {
            double v = base + m.at(right, j, cj, ck);
            if (v < row[ck]) {
              row[ck] = v;
              rowArg[ck] = cj;
            }
          }
        }
      evaluated += static_cast<int64_t>(ni * nj * nk);
      fresh.table =
          std::make_shared<const std::vector<double>>(std::move(merged));
      fresh.arg = std::make_shared<const std::vector<size_t>>(std::move(arg));
    });
    m.edges[e1].alive = m.edges[e2].alive = false;
    alive[j] = false;
    size_t id = m.edges.size();
    m.edges.push_back({i, k, made.table, made.id, true});
    adj[i].push_back(id);
    adj[k].push_back(id);
    eliminations.push_back({j, i, k, true, made.arg});
  }

  //===------------------------------------------------------------------===//
  // The core: enumeration, sequence splits, coordinate descent
  //===------------------------------------------------------------------===//

  /// Edges among `ops` (and to fixed ops), as lists per op.
  struct Sub {
    std::vector<size_t> ops; ///< free ops.
    /// Per free op: (edge, neighbour) pairs whose neighbour is free and
    /// earlier in `ops`, and those whose neighbour is fixed.
    std::vector<std::vector<std::pair<size_t, size_t>>> earlier, fixed;
  };

  Sub makeSub(const std::vector<size_t> &ops, const std::vector<bool> &inSub,
              const std::vector<bool> &isFixed) {
    Sub s;
    s.ops = ops;
    s.earlier.resize(ops.size());
    s.fixed.resize(ops.size());
    std::vector<size_t> rank(alive.size(), SIZE_MAX);
    for (size_t r = 0; r < ops.size(); ++r)
      rank[ops[r]] = r;
    for (size_t r = 0; r < ops.size(); ++r)
      for (size_t e : adj[ops[r]]) {
        if (!m.edges[e].alive)
          continue;
        size_t y = m.other(m.edges[e], ops[r]);
        if (isFixed[y])
          s.fixed[r].push_back({e, y});
        else if (inSub[y] && rank[y] < r)
          s.earlier[r].push_back({e, y});
      }
    return s;
  }

  /// Cost of op r of `s` at config c given the assignment of its earlier
  /// and fixed neighbours (and, with `all`, its later ones too).
  double local(const Sub &s, size_t r, size_t c) const {
    size_t x = s.ops[r];
    double v = (*m.node[x])[c];
    for (auto [e, y] : s.earlier[r])
      v += m.at(m.edges[e], x, c, assignment[y]);
    for (auto [e, y] : s.fixed[r])
      v += m.at(m.edges[e], x, c, assignment[y]);
    return v;
  }

  double enumerate(const Sub &s, size_t r, double partial, double &best,
                   std::vector<size_t> &bestAssign) {
    if (partial >= best)
      return best; // costs are non-negative: a valid cut-off.
    if (r == s.ops.size()) {
      best = partial;
      for (size_t i = 0; i < s.ops.size(); ++i)
        bestAssign[i] = assignment[s.ops[i]];
      return best;
    }
    for (size_t c = 0; c < m.count[s.ops[r]]; ++c) {
      assignment[s.ops[r]] = c;
      ++evaluated;
      enumerate(s, r + 1, partial + local(s, r, c), best, bestAssign);
    }
    return best;
  }

  /// Minimizes over the free ops of `s` (fixed ones already assigned);
  /// leaves them assigned and returns the cost, fixed-free edges included.
  double solveSub(const Sub &s) {
    double size = 1;
    for (size_t x : s.ops)
      size *= static_cast<double>(m.count[x]);
    std::vector<size_t> bestAssign(s.ops.size(), 0);
    if (size <= kEnumerateLimit && !cancelled()) {
      double best = kInf;
      enumerate(s, 0, 0, best, bestAssign);
      for (size_t i = 0; i < s.ops.size(); ++i)
        assignment[s.ops[i]] = bestAssign[i];
      if (std::isfinite(best) || s.ops.empty())
        return s.ops.empty() ? 0 : best;
    }
    exact = false;
    return coordinateDescent(s);
  }

  /// Greedy start (each op best given the ops before it), then sweeps that
  /// move one op at a time to its best configuration given all neighbours.
  double coordinateDescent(const Sub &s) {
    for (size_t r = 0; r < s.ops.size(); ++r) {
      size_t bestC = 0;
      double best = kInf;
      for (size_t c = 0; c < m.count[s.ops[r]]; ++c) {
        double v = local(s, r, c);
        ++evaluated;
        if (v < best) {
          best = v;
          bestC = c;
        }
      }
      assignment[s.ops[r]] = bestC;
    }
    std::vector<bool> inSub(alive.size(), false);
    for (size_t x : s.ops)
      inSub[x] = true;
    for (int sweep = 0; sweep < 100; ++sweep) {
      bool moved = false;
      for (size_t x : s.ops) {
        size_t bestC = assignment[x];
        double best = kInf;
        for (size_t c = 0; c < m.count[x]; ++c) {
          double v = (*m.node[x])[c];
          for (size_t e : adj[x])
            if (m.edges[e].alive) {
              size_t y = m.other(m.edges[e], x);
              if (inSub[y] || isFixedNow[y])
                v += m.at(m.edges[e], x, c, assignment[y]);
            }
          ++evaluated;
          if (v < best - 1e-15) {
            best = v;
            bestC = c;
          }
        }
        moved = moved || bestC != assignment[x];
        assignment[x] = bestC;
      }
      if (!moved)
        break;
    }
    double total = 0;
    for (size_t r = 0; r < s.ops.size(); ++r)
      total += local(s, r, assignment[s.ops[r]]);
    return total;
  }

  std::vector<bool> isFixedNow;

  void solveCore(const std::vector<size_t> &core) {
    size_t n = alive.size();
    isFixedNow.assign(n, false);
    std::vector<bool> inCore(n, false);
    for (size_t x : core)
      inCore[x] = true;
    double size = 1;
    for (size_t x : core)
      size *= static_cast<double>(m.count[x]);
    if (size <= kEnumerateLimit) {
      solveSub(makeSub(core, inCore, isFixedNow));
      return;
    }
    // Unity's sequence split: cut ops are those no core edge jumps over.
    std::vector<size_t> pos(n, 0);
    for (size_t p = 0; p < core.size(); ++p)
      pos[core[p]] = p;
    std::vector<int> cover(core.size() + 1, 0);
    for (size_t x : core)
      for (size_t e : adj[x])
        if (m.edges[e].alive && m.edges[e].a == x) {
          size_t pa = pos[m.edges[e].a], pb = pos[m.edges[e].b];
          if (pb > pa + 1) {
            ++cover[pa + 1];
            --cover[pb];
          }
        }
    std::vector<size_t> cuts;
    for (size_t p = 0, c = 0; p < core.size(); ++p) {
      c += cover[p];
      if (c == 0)
        cuts.push_back(core[p]);
    }
    if (cuts.empty()) {
      solveSub(makeSub(core, inCore, isFixedNow));
      return;
    }
    // Segment t holds the core ops between cut t-1 and cut t (exclusive).
    size_t numSeg = cuts.size() + 1;
    std::vector<std::vector<size_t>> interior(numSeg);
    for (size_t x : core) {
      if (std::find(cuts.begin(), cuts.end(), x) != cuts.end())
        continue;
      size_t t = std::upper_bound(
                     cuts.begin(), cuts.end(), x,
                     [&](size_t a, size_t b) { return pos[a] < pos[b]; }) -
                 cuts.begin();
      interior[t].push_back(x);
    }
    // For each segment and each pair of end configurations: its cost and
    // the interior's best assignment.
    auto ends = [&](size_t t) {
      return std::pair<std::optional<size_t>, std::optional<size_t>>{
          t > 0 ? std::optional<size_t>(cuts[t - 1]) : std::nullopt,
          t < cuts.size() ? std::optional<size_t>(cuts[t]) : std::nullopt};
    };
    std::vector<std::vector<double>> segCost(numSeg);
    std::vector<std::vector<std::vector<size_t>>> segAssign(numSeg);
    for (size_t t = 0; t < numSeg; ++t) {
      auto [l, r] = ends(t);
      size_t nl = l ? m.count[*l] : 1, nr = r ? m.count[*r] : 1;
      std::vector<bool> inSeg(n, false), fixed(n, false);
      for (size_t x : interior[t])
        inSeg[x] = true;
      if (l)
        fixed[*l] = true;
      if (r)
        fixed[*r] = true;
      isFixedNow = fixed;
      Sub s = makeSub(interior[t], inSeg, fixed);
      // The edge joining the two ends directly, if any.
      std::vector<size_t> direct;
      if (l && r)
        for (size_t e : adj[*l])
          if (m.edges[e].alive && m.other(m.edges[e], *l) == *r)
            direct.push_back(e);
      segCost[t].assign(nl * nr, kInf);
      segAssign[t].assign(nl * nr, {});
      for (size_t cl = 0; cl < nl; ++cl)
        for (size_t cr = 0; cr < nr; ++cr) {
          if (l)
            assignment[*l] = cl;
          if (r)
            assignment[*r] = cr;
          double v = solveSub(s);
          for (size_t e : direct)
            v += m.at(m.edges[e], *l, cl, cr);
          segCost[t][cl * nr + cr] = v;
          for (size_t x : interior[t])
            segAssign[t][cl * nr + cr].push_back(assignment[x]);
        }
    }
    isFixedNow.assign(n, false);
    // DP over the sequence of cut ops.
    std::vector<std::vector<double>> value(cuts.size());
    std::vector<std::vector<size_t>> from(cuts.size());
    for (size_t q = 0; q < cuts.size(); ++q) {
      size_t nq = m.count[cuts[q]];
      value[q].assign(nq, kInf);
      from[q].assign(nq, 0);
      for (size_t c = 0; c < nq; ++c) {
        if (q == 0) {
          value[q][c] = segCost[0][c] + (*m.node[cuts[q]])[c];
          continue;
        }
        size_t np = m.count[cuts[q - 1]];
        for (size_t cp = 0; cp < np; ++cp) {
          double v =
              value[q - 1][cp] + segCost[q][cp * nq + c] + (*m.node[cuts[q]])[c];
          ++evaluated;
          if (v < value[q][c]) {
            value[q][c] = v;
            from[q][c] = cp;
          }
        }
      }
    }
    size_t last = cuts.size() - 1, bestC = 0;
    double best = kInf;
    for (size_t c = 0; c < m.count[cuts[last]]; ++c) {
      double v = value[last][c] + segCost[numSeg - 1][c];
      if (v < best) {
        best = v;
        bestC = c;
      }
    }
    for (size_t q = cuts.size(); q-- > 0;) {
      assignment[cuts[q]] = bestC;
      if (q > 0)
        bestC = from[q][bestC];
    }
    for (size_t t = 0; t < numSeg; ++t) {
      auto [l, r] = ends(t);
      size_t nr = r ? m.count[*r] : 1;
      size_t key = (l ? assignment[*l] : 0) * nr + (r ? assignment[*r] : 0);
      for (size_t i = 0; i < interior[t].size(); ++i)
        assignment[interior[t][i]] = segAssign[t][key][i];
    }
  }
};

/// Edge-table entries (summed over distinct tables) the DP builds over the
/// search's own space at most; above it, a coarser space (tableSpace).
constexpr double kTableEntries = 1e6;

/// Which tables the additive model needs: each op's cost class
/// (costClasses) with one representative op per class, and each op-to-op
/// edge with its distinct table, one per (producer class, result, consumer
/// class, operand).
struct TableLayout {
  struct EdgeAt {
    size_t producer = 0, consumer = 0, operand = 0;
  };
  std::vector<int32_t> classOf;
  std::vector<size_t> representative; ///< per class.
  std::vector<EdgeAt> edges;          ///< every op-to-op edge.
  std::vector<int64_t> tableOf;       ///< per edge.
  std::vector<EdgeAt> tables;         ///< per table: its first edge.

  explicit TableLayout(const sim::Graph &graph)
      : classOf(costClasses(graph)) {
    for (size_t op = 0; op < graph.ops.size(); ++op) {
      size_t c = static_cast<size_t>(classOf[op]);
      if (c == representative.size())
        representative.push_back(op); // classes are numbered as they appear
    }
    std::map<std::array<int64_t, 4>, int64_t> ids;
    for (size_t op = 0; op < graph.ops.size(); ++op)
      for (size_t o = 0; o < graph.ops[op].operands.size(); ++o) {
        const sim::Source &src = graph.ops[op].operands[o];
        if (src.kind != sim::Source::Kind::Op)
          continue;
        EdgeAt edge{static_cast<size_t>(src.index), op, o};
        auto [it, inserted] = ids.try_emplace(
            {classOf[src.index], src.result, classOf[op],
             static_cast<int64_t>(o)},
            static_cast<int64_t>(tables.size()));
        if (inserted)
          tables.push_back(edge);
        edges.push_back(edge);
        tableOf.push_back(it->second);
      }
  }
  size_t numClasses() const { return representative.size(); }

  /// Entries of the distinct edge tables over `space`.
  double entries(const ConfigSpace &space) const {
    double sum = 0;
    for (const EdgeAt &t : tables)
      sum += static_cast<double>(space.configs(t.producer).size()) *
             static_cast<double>(space.configs(t.consumer).size());
    return sum;
  }
};

/// The additive model's tables, built once per cost class and pair of
/// classes, and its minimization.
struct AdditiveModel {
  Pairwise base;
  /// Per op, its cost class (costClasses); per class, the configurations
  /// the tables cover and each one's own memory over the device's limit.
  std::vector<int32_t> classOf;
  std::vector<std::vector<OpConfig>> configs;
  std::vector<std::vector<double>> ownShare;
  int64_t evaluated = 0;
  /// Eliminations answered from the memo, edge tables shared.
  int64_t reused = 0;
  bool exact = true;
  /// Set when `stop` said to give up before every table was built.
  bool abandoned = false;

  /// `stop` is polled while the tables are built (they grow with the square
  /// of the configurations per op, which is large on big machines). The
  /// tables are built on one worker per simulator in `workers` (each with
  /// its own caches); every entry lands in its own slot, so the tables do
  /// not depend on the number of workers.
  AdditiveModel(
      const Problem &problem, const ConfigSpace &space,
      const TableLayout &layout, const std::vector<sim::Simulator *> &workers,
      const std::function<bool()> &stop = [] { return false; })
      : classOf(layout.classOf) {
    const sim::Graph &graph = problem.graph;
    size_t n = graph.ops.size();
    size_t numClasses = layout.numClasses();
    const std::vector<TableLayout::EdgeAt> &edgeOf = layout.tables;
    configs.resize(numClasses);
    for (size_t c = 0; c < numClasses; ++c)
      configs[c] = space.configs(layout.representative[c]);

    int numWorkers = static_cast<int>(workers.size());
    std::atomic<bool> stopped{false};
    auto shouldStop = [&] {
      if (!stopped.load(std::memory_order_relaxed) && stop())
        stopped.store(true);
      return stopped.load(std::memory_order_relaxed);
    };
    std::vector<detail::FootprintProfiler> profilers;
    for (int w = 0; w < numWorkers; ++w)
      profilers.emplace_back(problem);
    size_t numDevices = static_cast<size_t>(problem.machine.numDevices());
    std::vector<std::vector<double>> nodeValues(numClasses);
    ownShare.assign(numClasses, {});
    detail::parallelFor(numWorkers, numClasses, [&](int w, size_t c) {
      size_t op = layout.representative[c];
      for (const OpConfig &config : configs[c]) {
        if (shouldStop())
          return;
        nodeValues[c].push_back(workers[w]->nodeCost(op, config));
        detail::OpFootprint f = profilers[w].profile(op, config);
        double share = 0;
        for (size_t d = 0; d < numDevices; ++d)
          share = std::max(share,
                           static_cast<double>(f.memory[d] + f.workspace[d]) /
                               static_cast<double>(profilers[w].limit(d)));
        ownShare[c].push_back(share);
      }
    });
    // Edge tables row by row (a row: one producer configuration).
    std::vector<std::vector<double>> edgeValues(edgeOf.size());
    std::vector<std::pair<size_t, size_t>> rows; // (table, row).
    for (size_t k = 0; k < edgeOf.size(); ++k) {
      auto [p, op, o] = edgeOf[k];
      size_t np = configs[classOf[p]].size(), nc = configs[classOf[op]].size();
      edgeValues[k].assign(np * nc, 0);
      for (size_t row = 0; row < np; ++row)
        rows.push_back({k, row});
    }
    if (!shouldStop())
      detail::parallelFor(numWorkers, rows.size(), [&](int w, size_t item) {
        auto [k, row] = rows[item];
        auto [p, op, o] = edgeOf[k];
        const std::vector<OpConfig> &consumers = configs[classOf[op]];
        const OpConfig &cp = configs[classOf[p]][row];
        double *out = &edgeValues[k][row * consumers.size()];
        for (size_t j = 0; j < consumers.size(); ++j) {
          if (shouldStop())
            return;
          out[j] = workers[w]->edgeCost(op, o, cp, consumers[j]);
        }
      });
    if (stopped) {
      abandoned = true;
      return;
    }
    std::vector<Table> nodeTables(numClasses), edgeTables(edgeOf.size());
    for (size_t c = 0; c < numClasses; ++c) {
      evaluated += static_cast<int64_t>(nodeValues[c].size());
      nodeTables[c] = std::make_shared<const std::vector<double>>(
          std::move(nodeValues[c]));
    }
    for (size_t k = 0; k < edgeOf.size(); ++k) {
      evaluated += static_cast<int64_t>(edgeValues[k].size());
      edgeTables[k] = std::make_shared<const std::vector<double>>(
          std::move(edgeValues[k]));
    }

    // Ids: classes first, then edge keys, then what the solver makes.
    base.count.resize(n);
    base.node.resize(n);
    base.nodeId.resize(n);
    for (size_t op = 0; op < n; ++op) {
      base.count[op] = configs[classOf[op]].size();
      base.node[op] = nodeTables[classOf[op]];
      base.nodeId[op] = classOf[op];
    }
    for (size_t e = 0; e < layout.edges.size(); ++e) {
      int64_t table = layout.tableOf[e];
      base.edges.push_back({layout.edges[e].producer, layout.edges[e].consumer,
                            edgeTables[table],
                            static_cast<int64_t>(numClasses) + table, true});
    }
    reused += static_cast<int64_t>(base.edges.size() - edgeOf.size());
    base.nextId = static_cast<int64_t>(numClasses + edgeOf.size());
  }

  /// The additive optimum with configurations that need more than
  /// `fraction` of a device by themselves rejected (unless that rejects all
  /// of an op's).
  sim::Strategy solve(double fraction, const std::atomic<bool> *cancel) {
    size_t n = base.count.size();
    size_t numClasses = configs.size();
    Pairwise model = base;
    std::vector<Table> masked(numClasses);
    for (size_t c = 0; c < numClasses; ++c) {
      bool any = false, over = false;
      for (double share : ownShare[c]) {
        any = any || share <= fraction;
        over = over || share > fraction;
      }
      if (!any || !over)
        continue;
      std::vector<double> table;
      for (size_t i = 0; i < ownShare[c].size(); ++i)
        table.push_back(ownShare[c][i] > fraction ? kInf : 0);
      masked[c] = std::make_shared<const std::vector<double>>(std::move(table));
    }
    for (size_t op = 0; op < n; ++op) {
      const Table &mask = masked[classOf[op]];
      if (!mask)
        continue;
      std::vector<double> table = *model.node[op];
      for (size_t i = 0; i < table.size(); ++i)
        table[i] += (*mask)[i];
      model.node[op] = std::make_shared<const std::vector<double>>(
          std::move(table));
      // Masked tables of one class are equal: one id per class.
      model.nodeId[op] = base.nextId + classOf[op];
    }
    model.nextId = base.nextId + static_cast<int64_t>(numClasses);
    Solver solver(std::move(model), cancel);
    std::vector<size_t> choice = solver.solve();
    evaluated += solver.evaluated;
    reused += solver.reused;
    exact = solver.exact;
    sim::Strategy s(n);
    for (size_t op = 0; op < n; ++op)
      s[op] = configs[classOf[op]][choice[op]];
    return s;
  }
};

} // namespace

sim::Strategy detail::additiveOptimum(const Problem &problem,
                                      const ConfigSpace &space, bool *exact,
                                      int64_t *reused) {
  sim::Simulator simulator(problem.graph, problem.machine, problem.costModel,
                           problem.simOptions);
  AdditiveModel model(problem, space, TableLayout(problem.graph), {&simulator});
  sim::Strategy s = model.solve(1.0, nullptr);
  if (exact)
    *exact = model.exact;
  if (reused)
    *reused = model.reused;
  return s;
}

SearchResult dynamicProgramming(const Problem &problem,
                                const ConfigSpace &space,
                                const SearchOptions &options) {
  auto started = Clock::now();
  SearchResult result;
  result.algorithm = "dynamic programming";
  const sim::Graph &graph = problem.graph;
  size_t n = graph.ops.size();
  if (space.numOps() != n)
    return result;
  for (size_t op = 0; op < n; ++op)
    if (space.configs(op).empty())
      return result;

  sim::Simulator simulator(graph, problem.machine, problem.costModel,
                           problem.simOptions);
  // One simulator per thread: worker 0 is `simulator`.
  std::vector<std::unique_ptr<sim::Simulator>> extra;
  std::vector<sim::Simulator *> workers = {&simulator};
  for (int w = 1; w < std::clamp(options.threads, 1, kMaxSearchThreads); ++w) {
    extra.push_back(std::make_unique<sim::Simulator>(
        graph, problem.machine, problem.costModel, problem.simOptions));
    workers.push_back(extra.back().get());
  }
  auto elapsed = [&] {
    return std::chrono::duration<double>(Clock::now() - started).count();
  };
  auto stop = [&] {
    return (options.cancel && options.cancel->load()) ||
           (options.seconds > 0 && elapsed() > options.seconds);
  };
  // The tables' space: the search's own while its tables stay small, else
  // views anchored at device 0, else also at most two split dims on
  // contiguous views. Never the reduce-scattered variants: each is a
  // change of one op (its producer), which refinement under the simulator
  // tries, and the additive model would only pick among more
  // configurations it prices approximately.
  std::optional<ConfigSpace> coarse;
  const ConfigSpace *tables = &space;
  if (space.options().scatter) {
    SpaceOptions o = space.options();
    o.scatter = false;
    coarse.emplace(graph, problem.machine, o);
    tables = &*coarse;
  }
  TableLayout layout(graph);
  const char *tableSpace = "the whole space";
  for (int level = 1; level <= 2 && layout.entries(*tables) > kTableEntries;
       ++level) {
    SpaceOptions o = tables->options();
    o.anchoredViews = true;
    if (level == 2) {
      o.maxSplitDims = o.maxSplitDims > 0 ? std::min(o.maxSplitDims, 2) : 2;
      o.stridedViews = false;
      o.replicas = false;
    }
    coarse.emplace(graph, problem.machine, o);
    tables = &*coarse;
    tableSpace = level == 1 ? "views anchored at device 0"
                            : "anchored contiguous views, at most two "
                              "split dims";
  }
  AdditiveModel model(problem, *tables, layout, workers, stop);
  // Lines, not a live counter: the phases of a DP take seconds each.
  if (options.progress) {
    std::fprintf(stderr,
                 "ppc-search: dp: cost tables over %s: %zu ops in %zu cost "
                 "classes, %lld entries, %lld shared, %.2f s\n",
                 tableSpace, n, layout.numClasses(),
                 static_cast<long long>(model.evaluated),
                 static_cast<long long>(model.reused), elapsed());
  }
  if (model.abandoned) {
    // Out of budget before the DP could start: answer data parallel, and
    // say so, rather than overrun.
    result.algorithm = "dynamic programming (budget spent building cost tables; "
                       "data parallel)";
    result.strategy = sim::dataParallel(graph, problem.machine.numDevices());
    result.result = simulator.simulate(result.strategy);
    result.objective = objective(problem, result.result);
    result.iterations = model.evaluated;
    result.seconds = elapsed();
    result.trace.push_back({result.iterations, result.seconds, result.objective,
                            result.objective});
    return result;
  }
  auto solveWith = [&](double fraction) {
    sim::Strategy s = model.solve(fraction, options.cancel);
    result.iterations = model.evaluated;
    return s;
  };

  for (double fraction : {1.0, 0.5, 0.25}) {
    sim::Strategy s = solveWith(fraction);
    sim::SimResult r = simulator.simulate(s);
    double value = objective(problem, r);
    if (result.strategy.empty() || value < result.objective) {
      result.strategy = std::move(s);
      result.result = r;
      result.objective = value;
    }
    if (std::isfinite(result.objective) ||
        (options.cancel && options.cancel->load()))
      break;
  }
  // The DP's space has no ZeRO stages or recomputation (they change no
  // edge): an answer that does not fit gets them, one step of memory saved
  // for time at a time, until it fits; then data parallel does, the same
  // way.
  auto fitWithMemorySteps = [&](const sim::Strategy &base) {
    for (int step = -1; step < 4; ++step) {
      sim::Strategy s = base;
      if (step >= 0)
        shardTrainingState(graph, s,
                           step == 0  ? StateSharding::Optimizer
                           : step < 3 ? StateSharding::Gradients
                                      : StateSharding::Parameters);
      if (step >= 2)
        recomputeSingleReaders(graph, s);
      sim::SimResult r = simulator.simulate(s);
      double value = objective(problem, r);
      if (std::isfinite(value) || result.strategy.empty()) {
        result.strategy = std::move(s);
        result.result = r;
        result.objective = value;
      }
      if (std::isfinite(value))
        return;
    }
  };
  if (!std::isfinite(result.objective) && !result.strategy.empty())
    fitWithMemorySteps(sim::Strategy(result.strategy));
  if (!std::isfinite(result.objective))
    fitWithMemorySteps(sim::dataParallel(graph, problem.machine.numDevices()));
  if (options.progress)
    std::fprintf(stderr,
                 "ppc-search: dp: its own answer %.3f ms at %.2f s (%lld "
                 "tables and eliminations shared); refining under the "
                 "simulator\n",
                 result.objective * 1e3, elapsed(),
                 static_cast<long long>(model.reused));
  // First trace point: the DP's own answer, simulated.
  result.trace.push_back(
      {result.iterations, elapsed(), result.objective, result.objective});
  // Where the additive model misjudges the simulator badly (overlap, shared
  // weights read across the whole graph, a latency per collective), data
  // parallel or a whole-network 2-D layout (samples by parameters, the
  // parameter groups inside a node) can simulate faster than the DP's
  // answer: refinement then starts from the fastest. Single-op moves do not
  // get from one such layout to another: each move pays a resharding at
  // both ends of the op.
  {
    // The answer stays in the space searched: a 2-D layout some op's
    // configurations do not include is no start.
    auto inSpace = [&](const sim::Strategy &s) {
      for (size_t op = 0; op < n; ++op) {
        const std::vector<OpConfig> &configs = space.configs(op);
        if (std::find(configs.begin(), configs.end(), s[op]) == configs.end())
          return false;
      }
      return true;
    };
    const int64_t numDevices = problem.machine.numDevices();
    std::vector<sim::Strategy> starts = {sim::dataParallel(graph, numDevices)};
    for (int64_t degree = 2;
         degree <= devicesPerNode(problem.machine) && degree < numDevices;
         ++degree) {
      if (numDevices % degree != 0)
        continue;
      sim::Strategy layout = sampleByParameter(graph, problem.machine, degree);
      if (inSpace(layout))
        starts.push_back(std::move(layout));
    }
    for (sim::Strategy &s : starts) {
      sim::SimResult r = simulator.simulate(s);
      double value = objective(problem, r);
      if (value < result.objective) {
        result.strategy = std::move(s);
        result.result = r;
        result.objective = value;
      }
    }
  }

  // The additive model charges every op and transfer in sequence; the
  // simulator overlaps partitions on different devices and gradient syncs
  // with backward. Sweeps of single-op moves judged by the simulator (delta
  // simulation) close that gap from the DP's answer. The workers' simulators
  // hold the same strategy; each judges a share of an op's configurations,
  // and the choice is the one a scan in configuration order makes (the
  // first that improves on the best so far), whatever the worker count.
  if (std::isfinite(result.objective)) {
    for (sim::Simulator *worker : workers)
      worker->simulate(result.strategy);
    size_t numWorkers = workers.size();
    std::vector<double> values;
    for (int sweep = 0; sweep < 20; ++sweep) {
      bool improved = false;
      for (size_t op = 0; op < n; ++op) {
        if ((options.cancel && options.cancel->load()) ||
            (options.seconds > 0 && elapsed() > options.seconds))
          break;
        OpConfig kept = result.strategy[op];
        // Placements keep the op's ZeRO stage and recomputation (set when
        // the answer needed them to fit).
        std::vector<OpConfig> moves = space.configs(op);
        for (OpConfig &c : moves) {
          c.sharding = kept.sharding;
          c.recompute = kept.recompute;
        }
        values.assign(moves.size(), kInf);
        // Interleaved shares: neighbouring configurations cost alike.
        detail::parallelFor(
            static_cast<int>(numWorkers), numWorkers, [&](int, size_t w) {
              for (size_t i = w; i < moves.size(); i += numWorkers)
                if (!(moves[i] == kept))
                  values[i] = objective(problem, workers[w]->update(op, moves[i]));
              workers[w]->update(op, kept);
            });
        result.iterations += static_cast<int64_t>(moves.size()) - 1;
        std::optional<size_t> chosen;
        for (size_t i = 0; i < moves.size(); ++i)
          if (values[i] < result.objective * (1 - 1e-12)) {
            result.objective = values[i];
            chosen = i;
          }
        if (!chosen)
          continue;
        improved = true;
        result.strategy[op] = moves[*chosen];
        for (size_t w = 1; w < numWorkers; ++w)
          workers[w]->update(op, moves[*chosen]);
        result.result = simulator.update(op, moves[*chosen]);
      }
      if (!improved)
        break;
    }
  }
  result.seconds = elapsed();
  result.trace.push_back(
      {result.iterations, result.seconds, result.objective, result.objective});
  return result;
}

} // namespace ppc::search
