//===- Exchange.cpp - how a value moves between two layouts ---------------===//

#include "ppc/Support/Exchange.h"

#include "absl/container/flat_hash_map.h"
#include "absl/hash/hash.h"

#include <algorithm>
#include <map>
#include <numeric>
#include <set>

namespace ppc::geometry {

std::string_view exchangeKindName(ExchangeKind kind) {
  switch (kind) {
  case ExchangeKind::Local:
    return "local";
  case ExchangeKind::PointToPoint:
    return "point_to_point";
  case ExchangeKind::AllGather:
    return "all_gather";
  case ExchangeKind::ReduceScatter:
    return "reduce_scatter";
  case ExchangeKind::AllToAll:
    return "all_to_all";
  case ExchangeKind::AllReduce:
    return "all_reduce";
  case ExchangeKind::Ring:
    return "ring";
  }
  return "point_to_point";
}

std::optional<ExchangeKind> parseExchangeKind(std::string_view name) {
  for (ExchangeKind kind : kExchangeKinds)
    if (exchangeKindName(kind) == name)
      return kind;
  return std::nullopt;
}

namespace {
/// Boxes by value, held by address (no key copied per box).
struct BoxHash {
  size_t operator()(const Box *box) const {
    size_t hash = box->size();
    for (const Range &r : *box)
      hash = absl::HashOf(hash, r.lo, r.hi);
    return hash;
  }
};
struct BoxEqual {
  bool operator()(const Box *a, const Box *b) const { return *a == *b; }
};
} // namespace

std::vector<int32_t> groupByBox(const std::vector<Box> &boxes,
                                int32_t &numGroups) {
  // Hashed: a data-parallel op on thousands of devices has as many boxes.
  absl::flat_hash_map<const Box *, int32_t, BoxHash, BoxEqual> ids;
  ids.reserve(boxes.size());
  std::vector<int32_t> group(boxes.size());
  for (size_t p = 0; p < boxes.size(); ++p)
    group[p] =
        ids.emplace(&boxes[p], static_cast<int32_t>(ids.size())).first->second;
  numGroups = static_cast<int32_t>(ids.size());
  return group;
}

int64_t overlapVolume(const Box &a, const Box &b) {
  int64_t v = 1;
  for (size_t d = 0; d < a.size() && d < b.size(); ++d) {
    int64_t lo = std::max(a[d].lo, b[d].lo);
    int64_t hi = std::min(a[d].hi, b[d].hi);
    if (hi <= lo)
      return 0;
    v *= hi - lo;
  }
  return v;
}

std::vector<ExchangeMove>
forwardMoves(const std::vector<Piece> &produced,
             const std::vector<Piece> &wanted,
             const std::function<double(int64_t, int64_t)> &bandwidth) {
  std::vector<Box> held;
  std::vector<int64_t> devices;
  for (const Piece &piece : produced) {
    held.push_back(piece.box);
    devices.push_back(piece.device);
  }
  int32_t numGroups = 0;
  std::vector<int32_t> group = groupByBox(held, numGroups);
  SourceChooser chooser(held, devices, group, numGroups);
  std::vector<ExchangeMove> moves;
  for (const Piece &reader : wanted)
    for (const SourceChooser::Source &source :
         chooser.choose(reader.box, reader.device, bandwidth)) {
      const Box &from = held[source.instance];
      Box box = *intersect(from, reader.box);
      bool whole = box == from;
      moves.push_back(
          {devices[source.instance], reader.device, std::move(box), whole});
    }
  return moves;
}

static int64_t boxVolume(const Box &box) {
  int64_t v = 1;
  for (const Range &r : box)
    v *= r.size();
  return v;
}

/// The kind of one connected group of `k` devices and its moves.
static ExchangeKind
classifyGroup(const std::vector<const ExchangeMove *> &moves, size_t k,
              bool summed) {
  std::set<std::pair<int64_t, int64_t>> pairs;
  for (const ExchangeMove *m : moves)
    pairs.insert({m->from, m->to});
  if (pairs.size() != moves.size() || moves.size() != k * (k - 1))
    return ExchangeKind::PointToPoint;
  int64_t size = boxVolume(moves.front()->box);
  for (const ExchangeMove *m : moves)
    if (boxVolume(m->box) != size)
      return ExchangeKind::PointToPoint;
  // One box per sender, or per receiver.
  auto uniform = [&](bool bySender) {
    std::map<int64_t, const Box *> first;
    for (const ExchangeMove *m : moves) {
      auto [it, inserted] = first.emplace(bySender ? m->from : m->to, &m->box);
      if (!inserted && *it->second != m->box)
        return false;
    }
    return true;
  };
  if (uniform(/*bySender=*/true) &&
      std::all_of(moves.begin(), moves.end(),
                  [](const ExchangeMove *m) { return m->whole; }))
    return ExchangeKind::AllGather;
  if (summed && uniform(/*bySender=*/false))
    return ExchangeKind::ReduceScatter;
  return ExchangeKind::AllToAll;
}

ExchangeShape classifyExchange(const std::vector<ExchangeMove> &moves,
                               bool summed) {
  ExchangeShape shape;
  std::map<int64_t, int64_t> parent;
  auto find = [&](int64_t d) {
    while (parent[d] != d)
      d = parent[d] = parent[parent[d]];
    return d;
  };
  for (const ExchangeMove &m : moves) {
    if (m.from == m.to)
      continue;
    parent.emplace(m.from, m.from);
    parent.emplace(m.to, m.to);
    int64_t a = find(m.from), b = find(m.to);
    if (a != b)
      parent[std::max(a, b)] = std::min(a, b);
  }
  if (parent.empty())
    return shape;
  std::map<int64_t, std::vector<int64_t>> members;
  for (auto &[device, up] : parent)
    members[find(device)].push_back(device);
  std::map<int64_t, std::vector<const ExchangeMove *>> movesOf;
  for (const ExchangeMove &m : moves)
    if (m.from != m.to)
      movesOf[find(m.from)].push_back(&m);
  for (auto &[root, devices] : members) {
    ExchangeGroup group;
    group.kind = classifyGroup(movesOf[root], devices.size(), summed);
    group.devices = std::move(devices);
    shape.groups.push_back(std::move(group));
  }
  shape.kind = shape.groups.front().kind;
  for (const ExchangeGroup &g : shape.groups)
    if (g.kind != shape.kind)
      shape.kind = ExchangeKind::PointToPoint;
  return shape;
}

} // namespace ppc::geometry
