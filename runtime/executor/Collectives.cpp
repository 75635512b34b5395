//===- Collectives.cpp - the Collective instruction -----------------------===//
//
// Layouts, for a group of n members in group order (boxes in the buffers'
// coordinates: global for tensor buffers, [0, shape) for scratch):
//  - ALL_REDUCE, BROADCAST: in place on `buffer`; every member's buffer has
//    the same number of elements.
//  - ALL_GATHER: member i's `buffer` is piece i; every member's `result`
//    holds the same box R, which along `axis` is the concatenation of the
//    pieces in group order and equals each piece in the other dims.
//  - REDUCE_SCATTER: every member's `buffer` holds the same box B; member i's
//    `result` is piece i of B along `axis` (the pieces concatenated in group
//    order make B) and receives the sum (max) over members of that piece.
//  - ALL_TO_ALL: member i's `result` R_i receives from every member j the
//    part of j's `buffer` B_j inside R_i; the B_j must cover R_i (e.g. B_j are
//    the pieces along one dim, R_i the pieces along `axis`).
// The first run of an instruction exchanges the members' boxes, checks them
// and keeps the MPI counts (programs repeat every step). The same exchange
// carries each member's kind, reduction, root, element count and how many
// collectives over the group it ran before, so members of a plan whose
// programs disagree (one rank's all_reduce where another has a broadcast)
// stop with both sides named instead of mixing up MPI calls or gradients;
// later steps run the same instructions and pay nothing.
//
//===----------------------------------------------------------------------===//

#include "ProgramRunner.h"

#include <cstring>

namespace ppc::runtime {

using namespace ppc::planfile;

namespace {
constexpr int kMaxDims = 8;
// Exchanged per member: dims, buffer lo/hi, result lo/hi, then what the
// member runs (see kKindField).
constexpr int kBoxFields = 1 + 4 * kMaxDims;
enum : int {
  kKindField = kBoxFields,
  kReductionField,
  kRootField,
  kCountField,
  kOrdinalField,
  kInstructionField,
  kRecordSize
};

std::string groupString(const google::protobuf::RepeatedField<int32_t> &g) {
  std::string s = "[";
  for (int i = 0; i < g.size(); ++i)
    s += (i ? ", " : "") + std::to_string(g.Get(i));
  return s + "]";
}

} // namespace

const char *collectiveName(Instruction::CollectiveKind kind) {
  switch (kind) {
  case Instruction::ALL_REDUCE:
    return "all_reduce";
  case Instruction::ALL_GATHER:
    return "all_gather";
  case Instruction::REDUCE_SCATTER:
    return "reduce_scatter";
  case Instruction::BROADCAST:
    return "broadcast";
  case Instruction::ALL_TO_ALL:
    return "all_to_all";
  default:
    return "collective";
  }
}

namespace {

/// "all_reduce (sum) of 24 elements" from a member's record.
std::string describeMember(const int64_t *record) {
  auto kind = static_cast<Instruction::CollectiveKind>(record[kKindField]);
  std::string s = collectiveName(kind);
  if (kind == Instruction::ALL_REDUCE || kind == Instruction::REDUCE_SCATTER)
    s += record[kReductionField] == Instruction::Collective::MAX ? " (max)" : " (sum)";
  if (kind == Instruction::BROADCAST)
    s += " (root " + std::to_string(record[kRootField]) + ")";
  return s + " of " + std::to_string(record[kCountField]) + " elements";
}

/// Product of the box's extents in dims before `axis`: 1 when the pieces
/// along `axis` are contiguous blocks of the row-major box.
int64_t outerExtent(const Index &lo, const Index &hi, int axis) {
  int64_t n = 1;
  for (int d = 0; d < axis; ++d)
    n *= hi[d] - lo[d];
  return n;
}

/// Checks that `pieces` (in group order) tile `whole` along `axis`.
absl::Status checkTiling(const std::vector<Index> &lo,
                         const std::vector<Index> &hi, const Index &wholeLo,
                         const Index &wholeHi, int axis) {
  int64_t at = wholeLo[axis];
  for (size_t i = 0; i < lo.size(); ++i) {
    for (size_t d = 0; d < wholeLo.size(); ++d)
      if (static_cast<int>(d) != axis &&
          (lo[i][d] != wholeLo[d] || hi[i][d] != wholeHi[d]))
        return absl::InvalidArgumentError(
            "piece " + std::to_string(i) + " " + boxString(lo[i], hi[i]) +
            " differs from " + boxString(wholeLo, wholeHi) + " outside axis " +
            std::to_string(axis));
    if (lo[i][axis] != at)
      return absl::InvalidArgumentError(
          "piece " + std::to_string(i) + " " + boxString(lo[i], hi[i]) +
          " does not start where piece " + std::to_string(i) +
          " should along axis " + std::to_string(axis) + " (" +
          std::to_string(at) + ")");
    at = hi[i][axis];
  }
  if (at != wholeHi[axis])
    return absl::InvalidArgumentError(
        "the pieces end at " + std::to_string(at) + " along axis " +
        std::to_string(axis) + ", not at " + std::to_string(wholeHi[axis]));
  return absl::OkStatus();
}
} // namespace

absl::Status ProgramRunner::collectiveLayout(const Instruction::Collective &c,
                                             const Buffer &buffer,
                                             const Buffer *result,
                                             CollectiveLayout &layout) {
  const int dims = static_cast<int>(buffer.lo.size());
  if (dims > kMaxDims)
    return absl::InvalidArgumentError("collectives on buffers of more than " +
                                      std::to_string(kMaxDims) +
                                      " dims are not supported");
  std::vector<int64_t> mine(kRecordSize, 0);
  mine[0] = dims;
  for (int d = 0; d < dims; ++d) {
    mine[1 + d] = buffer.lo[d];
    mine[1 + kMaxDims + d] = buffer.hi[d];
    if (result && static_cast<int>(result->lo.size()) == dims) {
      mine[1 + 2 * kMaxDims + d] = result->lo[d];
      mine[1 + 3 * kMaxDims + d] = result->hi[d];
    }
  }
  const std::vector<int> group(c.group().begin(), c.group().end());
  mine[kKindField] = c.kind();
  mine[kReductionField] = c.kind() == Instruction::ALL_REDUCE ||
                                  c.kind() == Instruction::REDUCE_SCATTER
                              ? c.reduction()
                              : 0;
  mine[kRootField] = c.kind() == Instruction::BROADCAST ? c.root() : 0;
  mine[kCountField] = buffer.size();
  mine[kOrdinalField] = collectivesRun[group]++;
  mine[kInstructionField] = index_;
  const size_t n = group.size();
  std::vector<int64_t> all = comm.allGatherInts(mine, group, [&] {
    return std::string(collectiveName(c.kind())) + " setup (" + context() +
           ", group " + groupString(c.group()) + ")";
  });
  if (all.size() != n * kRecordSize)
    return absl::InvalidArgumentError(
        "exchanging the boxes of the members failed");
  // Every member runs the same collective: the same kind, reduction and
  // root, and for the in-place ones the same element count.
  const bool inPlace =
      c.kind() == Instruction::ALL_REDUCE || c.kind() == Instruction::BROADCAST;
  for (size_t i = 0; i < n; ++i) {
    const int64_t *r = all.data() + i * kRecordSize;
    if (r[kKindField] != mine[kKindField] ||
        r[kReductionField] != mine[kReductionField] ||
        r[kRootField] != mine[kRootField] ||
        r[kOrdinalField] != mine[kOrdinalField] ||
        (inPlace && r[kCountField] != mine[kCountField]))
      return absl::InvalidArgumentError(
          "rank " + std::to_string(group[i]) + " runs " + describeMember(r) +
          " at its instruction " + std::to_string(r[kInstructionField]) +
          (r[kOrdinalField] != mine[kOrdinalField]
               ? " (its collective " + std::to_string(r[kOrdinalField]) +
                     " over the group, here " +
                     std::to_string(mine[kOrdinalField]) + ")"
               : "") +
          " where rank " + std::to_string(comm.rank()) + " runs " +
          describeMember(mine.data()) + ": the ranks' programs disagree");
  }
  std::vector<Index> bufLo(n), bufHi(n), resLo(n), resHi(n);
  for (size_t i = 0; i < n; ++i) {
    const int64_t *r = all.data() + i * kRecordSize;
    if (r[0] != dims)
      return absl::InvalidArgumentError(
          "member " + std::to_string(i) + " has a buffer of " +
          std::to_string(r[0]) + " dims, this one of " + std::to_string(dims));
    bufLo[i].assign(r + 1, r + 1 + dims);
    bufHi[i].assign(r + 1 + kMaxDims, r + 1 + kMaxDims + dims);
    resLo[i].assign(r + 1 + 2 * kMaxDims, r + 1 + 2 * kMaxDims + dims);
    resHi[i].assign(r + 1 + 3 * kMaxDims, r + 1 + 3 * kMaxDims + dims);
  }
  const int axis = c.axis();
  const bool needsAxis = c.kind() == Instruction::ALL_GATHER ||
                         c.kind() == Instruction::REDUCE_SCATTER;
  if (needsAxis && (axis < 0 || axis >= dims))
    return absl::InvalidArgumentError("axis " + std::to_string(axis) +
                                      " of a buffer of " +
                                      std::to_string(dims) + " dims");
  if (result && static_cast<int>(result->lo.size()) != dims)
    return absl::InvalidArgumentError(
        "the result buffer has " + std::to_string(result->lo.size()) +
        " dims, the buffer " + std::to_string(dims));

  switch (c.kind()) {
  case Instruction::ALL_REDUCE:
  case Instruction::BROADCAST:
    break; // counts compared above
  case Instruction::ALL_GATHER:
    for (size_t i = 0; i < n; ++i)
      if (resLo[i] != result->lo || resHi[i] != result->hi)
        return absl::InvalidArgumentError(
            "member " + std::to_string(i) + " gathers into " +
            boxString(resLo[i], resHi[i]) + ", this one into " +
            boxString(result->lo, result->hi));
    if (absl::Status err =
            checkTiling(bufLo, bufHi, result->lo, result->hi, axis);
        !err.ok())
      return err;
    for (size_t i = 0; i < n; ++i)
      layout.counts.push_back(boxVolume(bufLo[i], bufHi[i]));
    layout.pieceLo = bufLo;
    layout.pieceHi = bufHi;
    layout.direct = outerExtent(result->lo, result->hi, axis) == 1;
    break;
  case Instruction::REDUCE_SCATTER:
    for (size_t i = 0; i < n; ++i)
      if (bufLo[i] != buffer.lo || bufHi[i] != buffer.hi)
        return absl::InvalidArgumentError(
            "member " + std::to_string(i) + " reduces " +
            boxString(bufLo[i], bufHi[i]) + ", this one " +
            boxString(buffer.lo, buffer.hi));
    if (absl::Status err =
            checkTiling(resLo, resHi, buffer.lo, buffer.hi, axis);
        !err.ok())
      return err;
    for (size_t i = 0; i < n; ++i)
      layout.counts.push_back(boxVolume(resLo[i], resHi[i]));
    layout.pieceLo = resLo;
    layout.pieceHi = resHi;
    layout.direct = outerExtent(buffer.lo, buffer.hi, axis) == 1;
    break;
  case Instruction::ALL_TO_ALL: {
    int64_t received = 0;
    layout.sendLo.resize(n);
    layout.sendHi.resize(n);
    layout.pieceLo.resize(n);
    layout.pieceHi.resize(n);
    for (size_t i = 0; i < n; ++i) {
      boxIntersect(buffer.lo, buffer.hi, resLo[i], resHi[i], layout.sendLo[i],
                   layout.sendHi[i]);
      layout.sendCounts.push_back(
          boxVolume(layout.sendLo[i], layout.sendHi[i]));
      boxIntersect(bufLo[i], bufHi[i], result->lo, result->hi,
                   layout.pieceLo[i], layout.pieceHi[i]);
      layout.counts.push_back(boxVolume(layout.pieceLo[i], layout.pieceHi[i]));
      received += layout.counts.back();
    }
    if (received != result->size())
      return absl::InvalidArgumentError(
          "the members' buffers cover " + std::to_string(received) +
          " of the " + std::to_string(result->size()) +
          " elements of the result " + boxString(result->lo, result->hi));
    break;
  }
  default:
    return absl::InvalidArgumentError("unknown collective kind " +
                                      std::to_string(c.kind()));
  }
  return absl::OkStatus();
}

namespace {

/// Copies pieces `lo[i]..hi[i]` of `whole` (in its coordinates) one after
/// another into `packed`, or back (`unpack`).
void movePieces(Backend &backend, const DeviceView &whole, DeviceBuffer &packed,
                const Index &shape, const std::vector<Index> &lo,
                const std::vector<Index> &hi,
                const std::vector<int64_t> &counts, bool unpack) {
  int64_t offset = 0;
  for (size_t i = 0; i < lo.size(); ++i) {
    DeviceView piece{&packed, offset, shape, lo[i], hi[i]};
    if (unpack)
      backend.copyBox(piece, whole, lo[i], hi[i], false);
    else
      backend.copyBox(whole, piece, lo[i], hi[i], false);
    offset += counts[i];
  }
}

} // namespace

absl::Status ProgramRunner::collective(const Instruction::Collective &c) {
  return runCollective(c, nullptr);
}

absl::Status ProgramRunner::runCollective(const Instruction::Collective &c,
                                          StartedCollective *start) {
  Buffer *buffer, *result = nullptr;
  if (absl::Status err = lookup(c.buffer(), buffer); !err.ok())
    return err;
  const bool inPlace =
      c.kind() == Instruction::ALL_REDUCE || c.kind() == Instruction::BROADCAST;
  if (!inPlace) {
    if (absl::Status err = lookup(c.result(), result); !err.ok())
      return err;
    if (result == buffer)
      return absl::InvalidArgumentError(
          std::string(collectiveName(c.kind())) +
          " needs a result buffer other than its input");
  }
  const std::vector<int> group(c.group().begin(), c.group().end());
  if (c.kind() == Instruction::BROADCAST &&
      (c.root() < 0 || c.root() >= static_cast<int>(group.size())))
    return absl::InvalidArgumentError(
        "broadcast root " + std::to_string(c.root()) + " of a group of " +
        std::to_string(group.size()));
  auto layoutIt = layouts.find(index_);
  if (layoutIt == layouts.end()) {
    CollectiveLayout layout;
    if (absl::Status err = collectiveLayout(c, *buffer, result, layout);
        !err.ok())
      return annotate(err, std::string(collectiveName(c.kind())) +
                               " over group " + groupString(c.group()));
    layoutIt = layouts.emplace(index_, std::move(layout)).first;
  }
  const CollectiveLayout &layout = layoutIt->second;
  auto where = [&] {
    return std::string(collectiveName(c.kind())) + " (" + context() +
           ", group " + groupString(c.group()) + ")";
  };
  const bool max = c.reduction() == Instruction::Collective::MAX;
  const DType dtype = buffer->dtype();
  if (result && result->dtype() != dtype)
    return absl::InvalidArgumentError(
        std::string(collectiveName(c.kind())) + " from a " + dtypeName(dtype) +
        " buffer into a " + dtypeName(result->dtype()) + " one");
  // Pieces that do not lie in place move through packed copies: the shared
  // staging buffer for a blocking collective, buffers of its own for a
  // started one (kept until it is waited for; the unpacking is the wait's).
  std::shared_ptr<DeviceBuffer> blockingOut; // an all-to-all's send side
  auto packedBuffer = [&](int64_t n, bool second) -> DeviceBuffer * {
    if (!start)
      return second ? (blockingOut = backend.allocate(dtype, n)).get()
                    : stagingBuffer(dtype, n);
    std::shared_ptr<DeviceBuffer> &owned =
        second ? start->packedOut : start->packedIn;
    owned = backend.allocate(dtype, n);
    return owned.get();
  };
  std::unique_ptr<Event> ready = start ? backend.record() : nullptr;
  int64_t *handle = start ? &start->handle : nullptr;
  switch (c.kind()) {
  case Instruction::ALL_REDUCE:
    return start ? comm.startAllReduce(buffer->data(), dtype, buffer->size(),
                                       group, max, *ready, *handle)
                 : comm.allReduce(buffer->data(), dtype, buffer->size(), group,
                                  max, where);
  case Instruction::BROADCAST:
    return start ? comm.startBroadcast(buffer->data(), dtype, buffer->size(),
                                       group, c.root(), *ready, *handle)
                 : comm.broadcast(buffer->data(), dtype, buffer->size(), group,
                                  c.root(), where);
  case Instruction::ALL_GATHER: {
    DeviceBuffer *packed =
        layout.direct ? nullptr : packedBuffer(result->size(), false);
    if (!layout.direct && !packed)
      return absl::ResourceExhaustedError(
          "out of memory for the staging buffer");
    void *recv = packed ? packed->data() : result->data();
    if (absl::Status err =
            start ? comm.startAllGather(buffer->data(), recv, dtype,
                                        layout.counts, group, *ready, *handle)
                  : comm.allGather(buffer->data(), recv, dtype, layout.counts,
                                   group, where);
        !err.ok() || start)
      return err;
    return finishCollective(c, layout, packed);
  }
  case Instruction::REDUCE_SCATTER: {
    DeviceBuffer *packed =
        layout.direct ? nullptr : packedBuffer(buffer->size(), false);
    if (!layout.direct && !packed)
      return absl::ResourceExhaustedError(
          "out of memory for the staging buffer");
    if (packed)
      movePieces(backend, buffer->view(), *packed, buffer->shape,
                 layout.pieceLo, layout.pieceHi, layout.counts, false);
    const void *send = packed ? packed->data() : buffer->data();
    return start ? comm.startReduceScatter(send, result->data(), dtype,
                                           layout.counts, group, max, *ready,
                                           *handle)
                 : comm.reduceScatter(send, result->data(), dtype,
                                      layout.counts, group, max, where);
  }
  case Instruction::ALL_TO_ALL: {
    int64_t sent = 0;
    for (int64_t count : layout.sendCounts)
      sent += count;
    DeviceBuffer *out = packedBuffer(sent, true);
    DeviceBuffer *in = packedBuffer(result->size(), false);
    if (!out || !in)
      return absl::ResourceExhaustedError(
          "out of memory for the staging buffers");
    movePieces(backend, buffer->view(), *out, buffer->shape, layout.sendLo,
               layout.sendHi, layout.sendCounts, false);
    if (absl::Status err =
            start ? comm.startAllToAll(out->data(), layout.sendCounts,
                                       in->data(), layout.counts, dtype, group,
                                       *ready, *handle)
                  : comm.allToAll(out->data(), layout.sendCounts, in->data(),
                                  layout.counts, dtype, group, where);
        !err.ok() || start)
      return err;
    return finishCollective(c, layout, in);
  }
  default:
    return absl::InvalidArgumentError("unknown collective kind " +
                                      std::to_string(c.kind()));
  }
}

absl::Status ProgramRunner::finishCollective(const Instruction::Collective &c,
                                             const CollectiveLayout &layout,
                                             DeviceBuffer *packed) {
  if (!packed)
    return absl::OkStatus();
  Buffer *buffer, *result;
  if (absl::Status err = lookup(c.buffer(), buffer); !err.ok())
    return err;
  if (absl::Status err = lookup(c.result(), result); !err.ok())
    return err;
  // The packed pieces are in the buffer's coordinates (global boxes).
  movePieces(backend, result->view(), *packed, buffer->shape, layout.pieceLo,
             layout.pieceHi, layout.counts, true);
  return absl::OkStatus();
}

absl::Status ProgramRunner::startCollective(int index, double startedAt) {
  const Instruction::Collective &c = program.instructions(index).collective();
  StartedCollective &entry = started_[index];
  entry = StartedCollective();
  entry.startedAt = startedAt;
  // The instruction runs at `index` as far as its layout and messages go.
  const int at = index_;
  index_ = index;
  absl::Status err = runCollective(c, &entry);
  index_ = at;
  if (!err.ok()) {
    started_.erase(index);
    return annotate(err, "starting " + std::string(collectiveName(c.kind())) +
                             " of instruction " + std::to_string(index));
  }
  return absl::OkStatus();
}

absl::Status ProgramRunner::waitCollective(int index) {
  const Instruction::Collective &c = program.instructions(index).collective();
  auto it = started_.find(index);
  if (it == started_.end())
    return absl::InvalidArgumentError(
        std::string(collectiveName(c.kind())) + " of instruction " +
        std::to_string(index) + " was not started");
  StartedCollective entry = std::move(it->second);
  started_.erase(it);
  if (absl::Status err =
          comm.wait(entry.handle,
                    [&]() -> std::string {
                      return std::string(collectiveName(c.kind())) + " (" +
                             context() + ", group " + groupString(c.group()) +
                             ", started early)";
                    });
      !err.ok())
    return err;
  // What the collective received packed goes to its result.
  DeviceBuffer *packed =
      c.kind() == Instruction::ALL_GATHER || c.kind() == Instruction::ALL_TO_ALL
          ? entry.packedIn.get()
          : nullptr;
  return finishCollective(c, layouts.at(index), packed);
}

} // namespace ppc::runtime
