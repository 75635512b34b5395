//===- Communicator.cpp - MPI between the ranks of a plan -----------------===//

#include "ppc/Runtime/Communicator.h"

// The C API only: OpenMPI's C++ bindings need a library we do not link.
#define OMPI_SKIP_MPICXX 1
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <list>
#include <map>
#include <sched.h>
#include <thread>

namespace ppc::runtime {

namespace {
using Clock = std::chrono::steady_clock;

struct PendingSend {
  std::shared_ptr<DeviceBuffer> message;
  MPI_Request request = MPI_REQUEST_NULL;
  int peer = 0, tag = 0;
};

std::string mpiErrorString(int code) {
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  MPI_Error_string(code, text, &length);
  return std::string(text, length);
}

MPI_Datatype mpiType(DType dtype) {
  switch (dtype) {
  case DType::F32:
    return MPI_FLOAT;
  case DType::I64:
    return MPI_INT64_T;
  default:
    return MPI_UINT16_T;
  }
}

/// Sum or max of 16-bit floats: each pair widened, the result rounded,
/// a chunk at a time through the backends' vectorized conversions.
template <DType Type, bool Max>
void reduce16(void *in, void *inout, int *len, MPI_Datatype *) {
  constexpr int kChunk = 2048;
  float x[kChunk], y[kChunk];
  const uint16_t *a = static_cast<const uint16_t *>(in);
  uint16_t *b = static_cast<uint16_t *>(inout);
  for (int at = 0; at < *len; at += kChunk) {
    const int n = std::min(kChunk, *len - at);
    toFloat(Type, a + at, n, x);
    toFloat(Type, b + at, n, y);
    for (int i = 0; i < n; ++i)
      y[i] =
          Max ? (x[i] > y[i] || std::isnan(x[i]) ? x[i] : y[i]) : x[i] + y[i];
    fromFloat(Type, y, n, b + at);
  }
}

/// The MPI operations of 16-bit floats, made once MPI runs.
struct Float16Ops {
  MPI_Op bf16Sum, bf16Max, f16Sum, f16Max;
  Float16Ops() {
    MPI_Op_create(reduce16<DType::BF16, false>, 1, &bf16Sum);
    MPI_Op_create(reduce16<DType::BF16, true>, 1, &bf16Max);
    MPI_Op_create(reduce16<DType::F16, false>, 1, &f16Sum);
    MPI_Op_create(reduce16<DType::F16, true>, 1, &f16Max);
  }
};

MPI_Op mpiOp(DType dtype, bool max) {
  if (!isFloat16(dtype))
    return max ? MPI_MAX : MPI_SUM;
  static const Float16Ops ops;
  if (dtype == DType::BF16)
    return max ? ops.bf16Max : ops.bf16Sum;
  return max ? ops.f16Max : ops.f16Sum;
}

/// MPI counts are ints; the displacements of `counts`, or an error.
absl::Status toMpiCounts(const std::vector<int64_t> &counts,
                         std::vector<int> &out, std::vector<int> &displs) {
  out.resize(counts.size());
  displs.resize(counts.size());
  int64_t offset = 0;
  for (size_t i = 0; i < counts.size(); ++i) {
    if (counts[i] > INT_MAX || offset > INT_MAX)
      return absl::InvalidArgumentError(
          "a collective of more than 2^31 elements is not supported");
    out[i] = static_cast<int>(counts[i]);
    displs[i] = static_cast<int>(offset);
    offset += counts[i];
  }
  return absl::OkStatus();
}
} // namespace

std::string groupString(const std::vector<int> &group) {
  std::string s = "[";
  for (size_t i = 0; i < group.size(); ++i)
    s += (i ? ", " : "") + std::to_string(group[i]);
  return s + "]";
}

class MpiCommunicator final : public Communicator {
public:
  MpiCommunicator(int rank, int size, double timeout, bool mpi);
  ~MpiCommunicator() override;

  absl::Status
  createGroups(const std::vector<std::vector<int>> &groups) override;
  int maxTag() const override;
  absl::Status send(std::shared_ptr<DeviceBuffer> message, int64_t n, int peer,
                    int tag) override;
  absl::Status recv(void *data, DType dtype, int64_t n, int peer, int tag,
                    const Where &where) override;
  absl::Status completeSends(const std::string &context) override;
  absl::Status allReduce(void *data, DType dtype, int64_t n,
                         const std::vector<int> &group, bool max,
                         const Where &where) override;
  absl::Status startAllReduce(void *data, DType dtype, int64_t n,
                              const std::vector<int> &group, bool max,
                              Event &ready, int64_t &handle) override;
  absl::Status startReduceScatter(const void *send, void *recv, DType dtype,
                                  const std::vector<int64_t> &counts,
                                  const std::vector<int> &group, bool max,
                                  Event &ready, int64_t &handle) override;
  absl::Status startAllGather(const void *send, void *recv, DType dtype,
                              const std::vector<int64_t> &counts,
                              const std::vector<int> &group, Event &ready,
                              int64_t &handle) override;
  absl::Status startBroadcast(void *data, DType dtype, int64_t n,
                              const std::vector<int> &group, int root,
                              Event &ready, int64_t &handle) override;
  absl::Status startAllToAll(const void *send,
                             const std::vector<int64_t> &sendCounts, void *recv,
                             const std::vector<int64_t> &recvCounts,
                             DType dtype, const std::vector<int> &group,
                             Event &ready, int64_t &handle) override;
  void progress() override;
  absl::Status wait(int64_t handle, const Where &where) override;
  absl::Status broadcast(void *data, DType dtype, int64_t n,
                         const std::vector<int> &group, int root,
                         const Where &where) override;
  absl::Status allGather(const void *send, void *recv, DType dtype,
                         const std::vector<int64_t> &counts,
                         const std::vector<int> &group,
                         const Where &where) override;
  absl::Status reduceScatter(const void *send, void *recv, DType dtype,
                             const std::vector<int64_t> &counts,
                             const std::vector<int> &group, bool max,
                             const Where &where) override;
  absl::Status allToAll(const void *send,
                        const std::vector<int64_t> &sendCounts, void *recv,
                        const std::vector<int64_t> &recvCounts, DType dtype,
                        const std::vector<int> &group,
                        const Where &where) override;
  std::vector<int64_t> allGatherInts(const std::vector<int64_t> &mine,
                                     const std::vector<int> &group,
                                     const Where &where) override;
  std::vector<double> maxOverRanks(const std::vector<double> &values,
                                   const Where &where) override;
  bool anyRank(bool flag, const Where &where) override;
  std::vector<std::string> gatherToRoot(const std::string &mine,
                                        const Where &where) override;
  std::vector<std::string> allGatherStrings(const std::string &mine,
                                            const Where &where) override;
  int64_t broadcastFromRoot(int64_t value, const Where &where) override;
  void barrier(const Where &where) override;
  [[noreturn]] void abort(int code) override;

private:
  struct Impl;
  std::unique_ptr<Impl> impl;
};

struct MpiCommunicator::Impl {
  bool mpi = false;
  double timeout = 0;
  int rank = 0;
  std::map<std::vector<int>, MPI_Comm> comms;
  /// A duplicate of each group's communicator for started collectives,
  /// so that their order is kept apart from the blocking collectives'.
  std::map<std::vector<int>, MPI_Comm> startedComms;
  std::list<PendingSend> sends;
  /// The requests of each started collective (one per piece), by handle.
  std::map<int64_t, std::vector<MPI_Request>> started;
  /// What a started reduce-scatter sends from until it is waited for: each
  /// piece of every member's block packed together, by handle.
  std::map<int64_t, std::list<std::vector<char>>> startedPacked;
  int64_t nextHandle = 0;

  /// Ends every rank's run, this rank saying `what` went wrong `where`.
  [[noreturn]] void abortRun(const char *what, const Where &where) {
    std::fprintf(stderr, "ppc-run: rank %d: %s %s\n", rank, what,
                 where().c_str());
    std::fflush(stderr);
    std::fflush(stdout);
    MPI_Abort(MPI_COMM_WORLD, 1);
    std::abort();
  }
  [[noreturn]] void timedOut(double seconds, const Where &where) {
    char what[64];
    std::snprintf(what, sizeof what, "timed out after %g s in", seconds);
    abortRun(what, where);
  }

  /// Polls `requests` until all complete, backing off from spinning to
  /// sleeping so oversubscribed ranks leave the cores to the others.
  absl::Status wait(int n, MPI_Request *requests, MPI_Status *statuses,
                    const Where &where) {
    return waitFor(timeout, n, requests, statuses, where);
  }
  /// Waits between steps get twice the timeout: they wait for whole steps
  /// of other ranks, so the rank stuck inside a step reports first. Their
  /// callers return the exchanged value, so a failed wait (a rank that
  /// died) ends the run here, naming where, rather than hand on garbage.
  void waitBetweenSteps(MPI_Request *request, const Where &where) {
    absl::Status status = waitFor(2 * timeout, 1, request, nullptr, where);
    if (!status.ok())
      abortRun(
          ("MPI failed (" + std::string(status.message()) + ") in").c_str(),
          where);
  }
  absl::Status waitFor(double seconds, int n, MPI_Request *requests,
                       MPI_Status *statuses, const Where &where) {
    const Clock::time_point start = Clock::now();
    const bool bounded = seconds < kUnlimitedTimeout;
    const Clock::time_point deadline =
        bounded ? start + std::chrono::duration_cast<Clock::duration>(
                              std::chrono::duration<double>(seconds))
                : Clock::time_point::max();
    while (true) {
      int done = 0;
      int rc = MPI_Testall(n, requests, &done,
                           statuses ? statuses : MPI_STATUSES_IGNORE);
      if (rc != MPI_SUCCESS) {
        if (rc == MPI_ERR_IN_STATUS && statuses)
          for (int i = 0; i < n; ++i)
            if (statuses[i].MPI_ERROR != MPI_SUCCESS)
              rc = statuses[i].MPI_ERROR;
        return absl::InternalError(mpiErrorString(rc));
      }
      if (done)
        return absl::OkStatus();
      Clock::time_point now = Clock::now();
      if (bounded && now >= deadline)
        timedOut(seconds, where);
      auto waited = now - start;
      if (waited > std::chrono::milliseconds(2))
        std::this_thread::sleep_for(std::chrono::microseconds(50));
      else if (waited > std::chrono::microseconds(50))
        sched_yield();
    }
  }

  absl::Status commOf(const std::vector<int> &group, MPI_Comm &comm) {
    auto it = comms.find(group);
    if (it == comms.end())
      return absl::InvalidArgumentError("no communicator for group " +
                                        groupString(group));
    comm = it->second;
    return absl::OkStatus();
  }

  absl::Status reap() {
    for (auto it = sends.begin(); it != sends.end();) {
      int done = 0;
      int rc = MPI_Test(&it->request, &done, MPI_STATUS_IGNORE);
      if (rc != MPI_SUCCESS)
        return absl::InvalidArgumentError("send to rank " +
                                          std::to_string(it->peer) +
                                          " failed: " + mpiErrorString(rc));
      it = done ? sends.erase(it) : std::next(it);
    }
    return absl::OkStatus();
  }
};

MpiCommunicator::MpiCommunicator(int rank, int size, double timeout, bool mpi)
    : Communicator(rank, size), impl(std::make_unique<Impl>()) {
  impl->mpi = mpi;
  impl->timeout = timeout;
  impl->rank = rank;
}

MpiCommunicator::~MpiCommunicator() {
  if (!impl->mpi)
    return;
  for (auto &entry : impl->comms)
    MPI_Comm_free(&entry.second);
  for (auto &entry : impl->startedComms)
    MPI_Comm_free(&entry.second);
}

namespace {
/// Whether MPI was initialized: only under an MPI launcher. A process
/// started alone runs one rank without MPI, since Open MPI's singleton
/// start-up forks a daemon that can fail under load ("Local abort before
/// MPI_INIT completed") and costs time per run.
bool mpiInitialized = false;

bool launchedByMpi() {
  for (const char *var : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK"})
    if (std::getenv(var))
      return true;
  return false;
}
} // namespace

void Communicator::initialize(int &argc, char **&argv) {
  if (!launchedByMpi())
    return;
  MPI_Init(&argc, &argv);
  mpiInitialized = true;
}

void Communicator::finalize() {
  if (mpiInitialized)
    MPI_Finalize();
}

std::unique_ptr<Communicator> Communicator::world(double timeoutSeconds) {
  if (!mpiInitialized)
    return single();
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  // Errors come back as codes, reported with the instruction that failed.
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  return std::unique_ptr<Communicator>(
      new MpiCommunicator(rank, size, timeoutSeconds, size > 1));
}

std::unique_ptr<Communicator> Communicator::single() {
  return std::unique_ptr<Communicator>(new MpiCommunicator(0, 1, 0, false));
}

absl::Status
MpiCommunicator::createGroups(const std::vector<std::vector<int>> &groups) {
  if (!impl->mpi)
    return absl::OkStatus();
  MPI_Group world;
  MPI_Comm_group(MPI_COMM_WORLD, &world);
  absl::Status err;
  for (size_t i = 0; i < groups.size() && err.ok(); ++i) {
    const std::vector<int> &group = groups[i];
    bool member = false;
    for (int r : group)
      member |= r == rank();
    if (!member || group.size() < 2 || impl->comms.count(group))
      continue;
    MPI_Group g;
    MPI_Group_incl(world, static_cast<int>(group.size()), group.data(), &g);
    MPI_Comm comm;
    int rc =
        MPI_Comm_create_group(MPI_COMM_WORLD, g, static_cast<int>(i), &comm);
    MPI_Group_free(&g);
    if (rc != MPI_SUCCESS) {
      err = absl::InternalError("cannot create a communicator for group " +
                                groupString(group) + ": " + mpiErrorString(rc));
      break;
    }
    MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
    impl->comms[group] = comm;
    MPI_Comm started;
    rc = MPI_Comm_dup(comm, &started);
    if (rc != MPI_SUCCESS) {
      err = absl::InternalError("cannot duplicate the communicator of group " +
                                groupString(group) + ": " + mpiErrorString(rc));
      break;
    }
    MPI_Comm_set_errhandler(started, MPI_ERRORS_RETURN);
    impl->startedComms[group] = started;
  }
  MPI_Group_free(&world);
  return err;
}

int MpiCommunicator::maxTag() const {
  if (!impl->mpi)
    return INT_MAX;
  int *value = nullptr, found = 0;
  MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, &value, &found);
  return found ? *value : 32767;
}

absl::Status MpiCommunicator::send(std::shared_ptr<DeviceBuffer> message,
                                   int64_t n, int peer, int tag) {
  if (n > INT_MAX)
    return absl::InvalidArgumentError(
        "a message of more than 2^31 elements is not supported");
  if (absl::Status err = impl->reap(); !err.ok())
    return err;
  PendingSend &s = impl->sends.emplace_back();
  s.message = std::move(message);
  s.peer = peer;
  s.tag = tag;
  int rc = MPI_Isend(s.message->data(), static_cast<int>(n),
                     mpiType(s.message->dtype()), peer, tag, MPI_COMM_WORLD,
                     &s.request);
  if (rc != MPI_SUCCESS)
    return absl::InvalidArgumentError("MPI_Isend failed: " +
                                      mpiErrorString(rc));
  return absl::OkStatus();
}

absl::Status MpiCommunicator::recv(void *data, DType dtype, int64_t n, int peer,
                                   int tag, const Where &where) {
  if (n > INT_MAX)
    return absl::InvalidArgumentError(
        "a message of more than 2^31 elements is not supported");
  MPI_Request request;
  MPI_Status status;
  const MPI_Datatype type = mpiType(dtype);
  int rc = MPI_Irecv(data, static_cast<int>(n), type, peer, tag, MPI_COMM_WORLD,
                     &request);
  if (rc != MPI_SUCCESS)
    return absl::InvalidArgumentError("MPI_Irecv failed: " +
                                      mpiErrorString(rc));
  if (absl::Status err = impl->wait(1, &request, &status, where); !err.ok())
    return annotate(err, "receiving from rank " + std::to_string(peer) +
                             " (tag " + std::to_string(tag) + ", a box of " +
                             std::to_string(n) + " " + dtypeName(dtype) +
                             " elements) failed");
  int count = 0;
  MPI_Get_count(&status, type, &count);
  if (count != n)
    return absl::InvalidArgumentError(
        "the message from rank " + std::to_string(peer) + " (tag " +
        std::to_string(tag) + ") has " + std::to_string(count) + " " +
        dtypeName(dtype) + " elements but the box has " + std::to_string(n));
  return absl::OkStatus();
}

absl::Status MpiCommunicator::completeSends(const std::string &context) {
  if (impl->sends.empty())
    return absl::OkStatus();
  std::vector<MPI_Request> requests;
  for (PendingSend &s : impl->sends)
    requests.push_back(s.request);
  const PendingSend &first = impl->sends.front();
  absl::Status err = impl->wait(
      static_cast<int>(requests.size()), requests.data(), nullptr, [&] {
        return "send completion (" + context + ", " +
               std::to_string(requests.size()) +
               " outstanding, the first to rank " + std::to_string(first.peer) +
               " tag " + std::to_string(first.tag) + ")";
      });
  impl->sends.clear();
  return annotate(err, "sending failed");
}

/// The pieces of a collective whose members hold counts[i] elements of
/// `bytes` bytes (one count for an all-reduce): piece k takes elements
/// [k * step, (k + 1) * step) of every member's block (none of a block that
/// ended), so that a piece moves at most kCollectiveChunkBytes in all. Each
/// piece stays in cache while it is reduced, and a non-blocking collective
/// advances only while this rank tests it, which a short one's wait does
/// without sleeping (docs/runtime.md, "Collectives"). Calls fn(offset,
/// pieceCounts).
template <typename Fn>
static absl::Status forEachPiece(const std::vector<int64_t> &counts, int bytes,
                                 Fn &&fn) {
  const int64_t members = static_cast<int64_t>(counts.size());
  const int64_t step = std::max<int64_t>(1, kCollectiveChunkBytes / bytes /
                                                std::max<int64_t>(1, members));
  const int64_t longest = *std::max_element(counts.begin(), counts.end());
  std::vector<int> piece(counts.size());
  for (int64_t offset = 0; offset < longest; offset += step) {
    for (size_t i = 0; i < counts.size(); ++i)
      piece[i] =
          static_cast<int>(std::clamp<int64_t>(counts[i] - offset, 0, step));
    if (absl::Status err = fn(offset, piece); !err.ok())
      return err;
  }
  return absl::OkStatus();
}

// Each collective is written once, as the MPI calls of its pieces, and
// `issued` decides what becomes of each call's request: a blocking call
// waits for it at once (on the group's communicator), a started one keeps it
// under its handle (on the group's duplicate) until wait().

/// This rank's index in `group`.
static int indexIn(const std::vector<int> &group, int rank) {
  for (size_t i = 0; i < group.size(); ++i)
    if (group[i] == rank)
      return static_cast<int>(i);
  return -1;
}

template <typename Issued>
static absl::Status allReducePieces(void *data, DType dtype, int64_t n,
                                    bool max, MPI_Comm comm, Issued issued) {
  const int bytes = dtypeBytes(dtype);
  char *base = static_cast<char *>(data);
  return forEachPiece({n}, bytes, [&](int64_t offset, std::vector<int> &piece) {
    MPI_Request request;
    int rc = MPI_Iallreduce(MPI_IN_PLACE, base + offset * bytes, piece[0],
                            mpiType(dtype), mpiOp(dtype, max), comm, &request);
    if (rc != MPI_SUCCESS)
      return absl::InternalError(mpiErrorString(rc));
    return issued(request);
  });
}

/// A reduce-scatter of `counts` (member i's block of `send` after the
/// earlier blocks) into member `me`'s `recv`, in pieces: piece k of every
/// member's block packed one after another into `packed()` (the call takes
/// one contiguous buffer). The packed buffer must live until the piece's
/// request completes (the blocking call reuses one buffer; a started one
/// keeps a buffer per piece).
template <typename Packed, typename Issued>
static absl::Status
reduceScatterPieces(const void *send, void *recv, DType dtype,
                    const std::vector<int64_t> &counts, int me, bool max,
                    MPI_Comm comm, Packed packed, Issued issued) {
  const int bytes = dtypeBytes(dtype);
  std::vector<int> c, displs;
  if (absl::Status err = toMpiCounts(counts, c, displs); !err.ok())
    return err;
  const char *sendBytes = static_cast<const char *>(send);
  char *recvBytes = static_cast<char *>(recv);
  return forEachPiece(
      counts, bytes, [&](int64_t offset, std::vector<int> &piece) {
        std::vector<char> &buffer = packed();
        buffer.clear();
        for (size_t i = 0; i < piece.size(); ++i)
          if (piece[i] > 0)
            buffer.insert(buffer.end(),
                          sendBytes + (displs[i] + offset) * bytes,
                          sendBytes + (displs[i] + offset + piece[i]) * bytes);
        MPI_Request request;
        int rc = MPI_Ireduce_scatter(
            buffer.data(),
            recvBytes + std::min<int64_t>(offset, counts[me]) * bytes,
            piece.data(), mpiType(dtype), mpiOp(dtype, max), comm, &request);
        if (rc != MPI_SUCCESS)
          return absl::InternalError(mpiErrorString(rc));
        return issued(request);
      });
}

/// An all-gather of `counts` in pieces, each landing in place through
/// displacements.
template <typename Issued>
static absl::Status allGatherPieces(const void *send, void *recv, DType dtype,
                                    const std::vector<int64_t> &counts, int me,
                                    MPI_Comm comm, Issued issued) {
  const int bytes = dtypeBytes(dtype);
  std::vector<int> c, displs;
  if (absl::Status err = toMpiCounts(counts, c, displs); !err.ok())
    return err;
  std::vector<int> pieceDispls(displs.size());
  const MPI_Datatype type = mpiType(dtype);
  const char *sendBytes = static_cast<const char *>(send);
  return forEachPiece(
      counts, bytes, [&](int64_t offset, std::vector<int> &piece) {
        for (size_t i = 0; i < displs.size(); ++i)
          pieceDispls[i] = displs[i] + static_cast<int>(offset);
        MPI_Request request;
        int rc = MPI_Iallgatherv(
            sendBytes + std::min<int64_t>(offset, counts[me]) * bytes,
            piece[me], type, recv, piece.data(), pieceDispls.data(), type, comm,
            &request);
        if (rc != MPI_SUCCESS)
          return absl::InternalError(mpiErrorString(rc));
        return issued(request);
      });
}

template <typename Issued>
static absl::Status broadcastCall(void *data, DType dtype, int64_t n, int root,
                                  MPI_Comm comm, Issued issued) {
  if (n > INT_MAX)
    return absl::InvalidArgumentError(
        "a collective of more than 2^31 elements is not supported");
  MPI_Request request;
  int rc = MPI_Ibcast(data, static_cast<int>(n), mpiType(dtype), root, comm,
                      &request);
  if (rc != MPI_SUCCESS)
    return absl::InternalError(mpiErrorString(rc));
  return issued(request);
}

template <typename Issued>
static absl::Status
allToAllCall(const void *send, const std::vector<int64_t> &sendCounts,
             void *recv, const std::vector<int64_t> &recvCounts, DType dtype,
             MPI_Comm comm, Issued issued) {
  std::vector<int> sc, sd, rc, rd;
  if (absl::Status err = toMpiCounts(sendCounts, sc, sd); !err.ok())
    return err;
  if (absl::Status err = toMpiCounts(recvCounts, rc, rd); !err.ok())
    return err;
  MPI_Request request;
  const MPI_Datatype type = mpiType(dtype);
  int code = MPI_Ialltoallv(send, sc.data(), sd.data(), type, recv, rc.data(),
                            rd.data(), type, comm, &request);
  if (code != MPI_SUCCESS)
    return absl::InternalError(mpiErrorString(code));
  return issued(request);
}

/// A group of one moves nothing but its own piece: `n` elements of
/// `dtype` from `send` to `recv` (none in place).
static absl::Status localCopy(const void *send, void *recv, DType dtype,
                              int64_t n) {
  if (send != recv && n > 0)
    std::memcpy(recv, send, n * dtypeBytes(dtype));
  return absl::OkStatus();
}

/// Runs `call(comm, issued)` as a blocking collective over `group`, each
/// request waited for at once; a group of one runs `local` instead.
template <typename Impl, typename Local, typename Call>
static absl::Status blocking(Impl &impl, const std::vector<int> &group,
                             const Communicator::Where &where, Local local,
                             Call call) {
  if (group.size() < 2)
    return local();
  MPI_Comm comm = MPI_COMM_NULL;
  if (absl::Status err = impl.commOf(group, comm); !err.ok())
    return err;
  return call(comm, [&](MPI_Request request) {
    return impl.wait(1, &request, nullptr, where);
  });
}

/// Runs `call(comm, issued)` as a started collective over `group`, under a
/// new `handle`: once the backend's work before `ready` is done (MPI reads
/// host memory), on the group's duplicate communicator, its requests kept
/// for wait(). A group of one runs `local` at once.
template <typename Impl, typename Local, typename Call>
static absl::Status starting(Impl &impl, const std::vector<int> &group,
                             Event &ready, int64_t &handle, Local local,
                             Call call) {
  handle = impl.nextHandle++;
  ready.wait();
  std::vector<MPI_Request> &requests = impl.started[handle];
  if (group.size() < 2)
    return local();
  auto it = impl.startedComms.find(group);
  if (it == impl.startedComms.end())
    return absl::InvalidArgumentError("no communicator for group " +
                                      groupString(group));
  return call(it->second, [&requests](MPI_Request request) {
    requests.push_back(request);
    return absl::OkStatus();
  });
}

absl::Status MpiCommunicator::allReduce(void *data, DType dtype, int64_t n,
                                        const std::vector<int> &group, bool max,
                                        const Where &where) {
  return blocking(
      *impl, group, where, [] { return absl::OkStatus(); },
      [&](MPI_Comm comm, auto issued) {
        return allReducePieces(data, dtype, n, max, comm, issued);
      });
}

absl::Status MpiCommunicator::startAllReduce(void *data, DType dtype, int64_t n,
                                             const std::vector<int> &group,
                                             bool max, Event &ready,
                                             int64_t &handle) {
  return starting(
      *impl, group, ready, handle, [] { return absl::OkStatus(); },
      [&](MPI_Comm comm, auto issued) {
        return allReducePieces(data, dtype, n, max, comm, issued);
      });
}

absl::Status MpiCommunicator::reduceScatter(const void *send, void *recv,
                                            DType dtype,
                                            const std::vector<int64_t> &counts,
                                            const std::vector<int> &group,
                                            bool max, const Where &where) {
  std::vector<char> packed;
  return blocking(
      *impl, group, where,
      [&] { return localCopy(send, recv, dtype, counts[0]); },
      [&](MPI_Comm comm, auto issued) {
        return reduceScatterPieces(
            send, recv, dtype, counts, indexIn(group, rank()), max, comm,
            [&]() -> std::vector<char> & { return packed; }, issued);
      });
}

absl::Status
MpiCommunicator::startReduceScatter(const void *send, void *recv, DType dtype,
                                    const std::vector<int64_t> &counts,
                                    const std::vector<int> &group, bool max,
                                    Event &ready, int64_t &handle) {
  return starting(
      *impl, group, ready, handle,
      [&] { return localCopy(send, recv, dtype, counts[0]); },
      [&](MPI_Comm comm, auto issued) {
        std::list<std::vector<char>> &packed = impl->startedPacked[handle];
        return reduceScatterPieces(
            send, recv, dtype, counts, indexIn(group, rank()), max, comm,
            [&]() -> std::vector<char> & { return packed.emplace_back(); },
            issued);
      });
}

absl::Status MpiCommunicator::allGather(const void *send, void *recv,
                                        DType dtype,
                                        const std::vector<int64_t> &counts,
                                        const std::vector<int> &group,
                                        const Where &where) {
  return blocking(
      *impl, group, where,
      [&] { return localCopy(send, recv, dtype, counts[0]); },
      [&](MPI_Comm comm, auto issued) {
        return allGatherPieces(send, recv, dtype, counts,
                               indexIn(group, rank()), comm, issued);
      });
}

absl::Status MpiCommunicator::startAllGather(const void *send, void *recv,
                                             DType dtype,
                                             const std::vector<int64_t> &counts,
                                             const std::vector<int> &group,
                                             Event &ready, int64_t &handle) {
  return starting(
      *impl, group, ready, handle,
      [&] { return localCopy(send, recv, dtype, counts[0]); },
      [&](MPI_Comm comm, auto issued) {
        return allGatherPieces(send, recv, dtype, counts,
                               indexIn(group, rank()), comm, issued);
      });
}

absl::Status MpiCommunicator::broadcast(void *data, DType dtype, int64_t n,
                                        const std::vector<int> &group, int root,
                                        const Where &where) {
  return blocking(
      *impl, group, where, [] { return absl::OkStatus(); },
      [&](MPI_Comm comm, auto issued) {
        return broadcastCall(data, dtype, n, root, comm, issued);
      });
}

absl::Status MpiCommunicator::startBroadcast(void *data, DType dtype, int64_t n,
                                             const std::vector<int> &group,
                                             int root, Event &ready,
                                             int64_t &handle) {
  return starting(
      *impl, group, ready, handle, [] { return absl::OkStatus(); },
      [&](MPI_Comm comm, auto issued) {
        return broadcastCall(data, dtype, n, root, comm, issued);
      });
}

absl::Status
MpiCommunicator::allToAll(const void *send,
                          const std::vector<int64_t> &sendCounts, void *recv,
                          const std::vector<int64_t> &recvCounts, DType dtype,
                          const std::vector<int> &group, const Where &where) {
  return blocking(
      *impl, group, where,
      [&] { return localCopy(send, recv, dtype, sendCounts[0]); },
      [&](MPI_Comm comm, auto issued) {
        return allToAllCall(send, sendCounts, recv, recvCounts, dtype, comm,
                            issued);
      });
}

absl::Status MpiCommunicator::startAllToAll(
    const void *send, const std::vector<int64_t> &sendCounts, void *recv,
    const std::vector<int64_t> &recvCounts, DType dtype,
    const std::vector<int> &group, Event &ready, int64_t &handle) {
  return starting(
      *impl, group, ready, handle,
      [&] { return localCopy(send, recv, dtype, sendCounts[0]); },
      [&](MPI_Comm comm, auto issued) {
        return allToAllCall(send, sendCounts, recv, recvCounts, dtype, comm,
                            issued);
      });
}

void MpiCommunicator::progress() {
  if (!impl->mpi || impl->started.empty())
    return;
  // Testing any request runs Open MPI's progress engine for all of them.
  for (auto &[handle, requests] : impl->started)
    if (!requests.empty()) {
      int done = 0;
      MPI_Testall(static_cast<int>(requests.size()), requests.data(), &done,
                  MPI_STATUSES_IGNORE);
      return;
    }
}

absl::Status MpiCommunicator::wait(int64_t handle, const Where &where) {
  auto it = impl->started.find(handle);
  if (it == impl->started.end())
    return absl::InvalidArgumentError("no started collective " +
                                      std::to_string(handle));
  std::vector<MPI_Request> requests = std::move(it->second);
  impl->started.erase(it);
  absl::Status err;
  if (!requests.empty())
    err = impl->wait(static_cast<int>(requests.size()), requests.data(),
                     nullptr, where);
  impl->startedPacked.erase(handle);
  return err;
}

std::vector<int64_t>
MpiCommunicator::allGatherInts(const std::vector<int64_t> &mine,
                               const std::vector<int> &group,
                               const Where &where) {
  if (group.size() < 2)
    return mine;
  std::vector<int64_t> all(mine.size() * group.size());
  MPI_Comm comm = MPI_COMM_NULL;
  if (!impl->commOf(group, comm).ok())
    return {};
  MPI_Request request;
  if (MPI_Iallgather(mine.data(), static_cast<int>(mine.size()), MPI_INT64_T,
                     all.data(), static_cast<int>(mine.size()), MPI_INT64_T,
                     comm, &request) != MPI_SUCCESS ||
      !impl->wait(1, &request, nullptr, where).ok())
    return {};
  return all;
}

std::vector<double>
MpiCommunicator::maxOverRanks(const std::vector<double> &values,
                              const Where &where) {
  std::vector<double> out = values;
  if (!impl->mpi)
    return out;
  MPI_Request request;
  MPI_Iallreduce(MPI_IN_PLACE, out.data(), static_cast<int>(out.size()),
                 MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD, &request);
  impl->waitBetweenSteps(&request, where);
  return out;
}

bool MpiCommunicator::anyRank(bool flag, const Where &where) {
  if (!impl->mpi)
    return flag;
  int value = flag ? 1 : 0;
  MPI_Request request;
  MPI_Iallreduce(MPI_IN_PLACE, &value, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD,
                 &request);
  impl->waitBetweenSteps(&request, where);
  return value != 0;
}

/// Every rank's string on rank 0 (everyRank: on every rank), in rank order.
static std::vector<std::string>
gatherStrings(int rank, int size, const std::string &mine, bool everyRank,
              const std::function<void(MPI_Request *)> &wait) {
  int length = static_cast<int>(mine.size());
  std::vector<int> lengths(size), displs(size);
  MPI_Request request;
  if (everyRank)
    MPI_Iallgather(&length, 1, MPI_INT, lengths.data(), 1, MPI_INT,
                   MPI_COMM_WORLD, &request);
  else
    MPI_Igather(&length, 1, MPI_INT, lengths.data(), 1, MPI_INT, 0,
                MPI_COMM_WORLD, &request);
  wait(&request);
  int total = 0;
  for (int r = 0; r < size; ++r) {
    displs[r] = total;
    total += lengths[r];
  }
  const bool receives = everyRank || rank == 0;
  std::string all(receives ? total : 0, '\0');
  if (everyRank)
    MPI_Iallgatherv(mine.data(), length, MPI_CHAR, all.data(), lengths.data(),
                    displs.data(), MPI_CHAR, MPI_COMM_WORLD, &request);
  else
    MPI_Igatherv(mine.data(), length, MPI_CHAR, all.data(), lengths.data(),
                 displs.data(), MPI_CHAR, 0, MPI_COMM_WORLD, &request);
  wait(&request);
  std::vector<std::string> out;
  if (receives)
    for (int r = 0; r < size; ++r)
      out.push_back(all.substr(displs[r], lengths[r]));
  return out;
}

std::vector<std::string> MpiCommunicator::gatherToRoot(const std::string &mine,
                                                       const Where &where) {
  if (!impl->mpi)
    return {mine};
  return gatherStrings(rank(), size(), mine, false, [&](MPI_Request *r) {
    impl->waitBetweenSteps(r, where);
  });
}

std::vector<std::string>
MpiCommunicator::allGatherStrings(const std::string &mine, const Where &where) {
  if (!impl->mpi)
    return {mine};
  return gatherStrings(rank(), size(), mine, true, [&](MPI_Request *r) {
    impl->waitBetweenSteps(r, where);
  });
}

int64_t MpiCommunicator::broadcastFromRoot(int64_t value, const Where &where) {
  if (!impl->mpi)
    return value;
  MPI_Request request;
  MPI_Ibcast(&value, 1, MPI_INT64_T, 0, MPI_COMM_WORLD, &request);
  impl->waitBetweenSteps(&request, where);
  return value;
}

void MpiCommunicator::barrier(const Where &where) {
  if (!impl->mpi)
    return;
  MPI_Request request;
  MPI_Ibarrier(MPI_COMM_WORLD, &request);
  impl->waitBetweenSteps(&request, where);
}

void MpiCommunicator::abort(int code) {
  std::fflush(stdout);
  std::fflush(stderr);
  if (impl->mpi)
    MPI_Abort(MPI_COMM_WORLD, code);
  std::exit(code);
}

} // namespace ppc::runtime
