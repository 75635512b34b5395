//===- PairwiseSolver.cpp - elimination, enumeration, splits -------------===//
//
// The minimization of PairwiseSolver.h: eliminations (memoized by the ids of
// the tables they read, so repeated layers are solved once), then the core
// enumerated, split at bottleneck ops, or decided by coordinate descent.
//
//===----------------------------------------------------------------------===//

#include "PairwiseSolver.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <map>
#include <optional>

namespace ppc::search::detail {

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
/// Strategies of a core (or segment) enumerated exactly at most.
constexpr double kEnumerateLimit = 2e5;

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
      std::array<int64_t, 6> key = {
          0, std::min(into.id, edge.id), std::max(into.id, edge.id), 0, 0, 0};
      Made &made = lookup(key, [&](Made &fresh) {
        std::vector<double> sum = *into.t;
        for (size_t i = 0; i < sum.size(); ++i)
          sum[i] += (*edge.t)[i];
        evaluated += static_cast<int64_t>(sum.size());
        fresh.table =
            std::make_shared<const std::vector<double>>(std::move(sum));
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
  template <typename MakeFn>
  Made &lookup(std::array<int64_t, 6> key, MakeFn make) {
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
    std::array<int64_t, 6> key = {1,       m.nodeId[i], m.nodeId[j],
                                  edge.id, edge.a == j, 0};
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
      fresh.table =
          std::make_shared<const std::vector<double>>(std::move(node));
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
    std::array<int64_t, 6> key = {2,           left.id,  left.a == j,
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
          double v = value[q - 1][cp] + segCost[q][cp * nq + c] +
                     (*m.node[cuts[q]])[c];
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

} // namespace

PairwiseSolution solvePairwise(Pairwise model,
                               const std::atomic<bool> *cancel) {
  Solver solver(std::move(model), cancel);
  PairwiseSolution solution;
  solution.choice = solver.solve();
  solution.evaluated = solver.evaluated;
  solution.reused = solver.reused;
  solution.exact = solver.exact;
  return solution;
}

} // namespace ppc::search::detail
