//===- Exchange.h - how a value moves between two layouts -------*- C++ -*-===//
//
// MLIR-free. The communication plan of one edge, derived from its two
// ops' layouts: which producer instance each consumer instance reads each
// region of its operand from, and what kind of exchange those pieces make
// together (an all-gather, a reduce-scatter, an all-to-all, or plain
// point-to-point messages). The simulator prices the pieces this code
// chooses, MaterializeResharding stamps the kind on the graph's parallel
// ops, and the plan emitter moves exactly these pieces; none of them
// decides it again.
//
//===----------------------------------------------------------------------===//

#ifndef PPC_SUPPORT_EXCHANGE_H
#define PPC_SUPPORT_EXCHANGE_H

#include "ppc/Support/Layout.h"

#include <algorithm>
#include <cstdint>
#include <functional>
#include <optional>
#include <string_view>
#include <utility>
#include <vector>

namespace ppc::geometry {

/// The shape of an exchange. One list: the IR's `exchange` attribute, the
/// report and the simulator's counts all spell a kind by exchangeKindName.
enum class ExchangeKind {
  Local,         ///< every piece is on its reader's device already
  PointToPoint,  ///< messages that form no collective
  AllGather,     ///< each member sends its piece whole to every other one
  ReduceScatter, ///< each member sums one region from every other one
  AllToAll,      ///< each member sends a distinct piece to every other one
  AllReduce,     ///< partial sums summed on every member (a ppc.reduce)
  Ring, ///< blocks passed to the next member while each computes (a ring op)
};
inline constexpr ExchangeKind kExchangeKinds[] = {
    ExchangeKind::Local,     ExchangeKind::PointToPoint,
    ExchangeKind::AllGather, ExchangeKind::ReduceScatter,
    ExchangeKind::AllToAll,  ExchangeKind::AllReduce,
    ExchangeKind::Ring};

/// "local", "point_to_point", "all_gather", "reduce_scatter", "all_to_all",
/// "all_reduce", "ring".
std::string_view exchangeKindName(ExchangeKind kind);
std::optional<ExchangeKind> parseExchangeKind(std::string_view name);

/// Numbers `boxes` by equality: the group of each, numbered in order of
/// first occurrence (instances of one group hold copies of one region).
std::vector<int32_t> groupByBox(const std::vector<Box> &boxes,
                                int32_t &numGroups);

/// Elements `a` and `b` share.
int64_t overlapVolume(const Box &a, const Box &b);

/// Chooses the producer instances a consumer instance reads from: of each
/// group of instances holding one region (`group`, per instance, as
/// groupByBox numbers them) that overlaps what it needs, one instance, the
/// one on the reader's device if any, else the one `bandwidth(from, to)`
/// says is fastest, ties to the lowest. The simulator prices these pieces
/// and the lowering moves them.
class SourceChooser {
public:
  /// One chosen instance and the elements it gives.
  struct Source {
    int32_t instance = 0;
    int64_t volume = 0;
  };

  SourceChooser(const std::vector<Box> &held,
                const std::vector<int64_t> &devices,
                const std::vector<int32_t> &group, int32_t numGroups)
      : held(held), devices(devices), group(group), index(held),
        chosen(numGroups, -1), volumes(held.size(), 0) {}

  /// The instances a reader on `device` of `needed` reads from, in group
  /// order; valid until the next call.
  template <typename BandwidthFn>
  const std::vector<Source> &choose(const Box &needed, int64_t device,
                                    BandwidthFn bandwidth) {
    index.candidates(needed, candidates);
    for (int32_t g : touched)
      chosen[g] = -1;
    touched.clear();
    for (size_t candidate : candidates) {
      int32_t p = static_cast<int32_t>(candidate);
      volumes[p] = overlapVolume(needed, held[p]);
      if (volumes[p] == 0)
        continue;
      int32_t &best = chosen[group[p]];
      if (best < 0)
        touched.push_back(group[p]);
      if (best < 0 || devices[p] == device) {
        best = p;
        continue;
      }
      if (devices[best] == device)
        continue;
      if (bandwidth(devices[p], device) > bandwidth(devices[best], device))
        best = p;
    }
    std::sort(touched.begin(), touched.end());
    sources.clear();
    for (int32_t g : touched)
      sources.push_back({chosen[g], volumes[chosen[g]]});
    return sources;
  }

private:
  const std::vector<Box> &held;
  const std::vector<int64_t> &devices;
  const std::vector<int32_t> &group;
  OverlapIndex index;
  std::vector<int32_t> chosen; ///< per group, during one call
  std::vector<int32_t> touched;
  std::vector<size_t> candidates;
  std::vector<int64_t> volumes; ///< per instance, set for candidates
  std::vector<Source> sources;
};

/// One piece an exchange moves between devices.
struct ExchangeMove {
  int64_t from = 0;   ///< sending device
  int64_t to = 0;     ///< receiving device
  Box box;            ///< the region, in the tensor's coordinates
  bool whole = false; ///< `box` is all of the sender's piece
};

/// The moves that bring readers `wanted` (a piece per consumer instance)
/// their regions of a value held as `produced` (a piece per producer
/// instance), from the sources SourceChooser picks: the exchange as the
/// simulator prices it, before later readers share earlier readers' copies.
std::vector<ExchangeMove>
forwardMoves(const std::vector<Piece> &produced,
             const std::vector<Piece> &wanted,
             const std::function<double(int64_t, int64_t)> &bandwidth);

/// A set of devices that exchange among themselves only.
struct ExchangeGroup {
  ExchangeKind kind = ExchangeKind::PointToPoint;
  std::vector<int64_t> devices; ///< ascending
};

/// What kind of exchange `moves` make; with `summed` the receivers add
/// what they receive into their piece (gradients). Moves within one device
/// are no communication and are ignored. The other moves join their
/// devices into groups (connected components); a group of k >= 2 devices
/// in which every ordered pair of devices moves exactly one piece, all of
/// one size, is a collective: an all-gather when each device sends its
/// whole piece to every other; summed, a reduce-scatter when each device
/// receives one box from every other; else an all-to-all. Any other group is
/// point-to-point. The exchange is of its groups' kind if they agree, else
/// point-to-point; with no remote move, local.
struct ExchangeShape {
  ExchangeKind kind = ExchangeKind::Local;
  std::vector<ExchangeGroup> groups; ///< by their lowest device
};
ExchangeShape classifyExchange(const std::vector<ExchangeMove> &moves,
                               bool summed);

} // namespace ppc::geometry

#endif // PPC_SUPPORT_EXCHANGE_H
