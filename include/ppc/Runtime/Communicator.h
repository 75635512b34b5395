//===- Communicator.h - MPI between the ranks of a plan ---------*- C++ -*-===//
//
// MLIR-free. Point-to-point messages and collectives over groups of world
// ranks, with every wait polled against a deadline: a rank that waits longer
// than the timeout prints
//   ppc-run: rank R: timed out after T s in WHAT
// and aborts the whole job (MPI_Abort), so a lost message never hangs it.
// A timeout of kUnlimitedTimeout seconds or more (inf too) waits forever.
// A world of one rank, and any group of one rank, never calls MPI, so
// single-rank plans also run in a process without MPI (tests).
//
// Collectives take a group (world ranks, in order); a member's index in the
// group is its rank in the group's communicator. Counts are elements per
// member, in group order, of the data's DType; data lives where the backend
// keeps buffers (host memory for MPI). bf16 and f16 sum and max through
// operations that widen each pair to float and round the result, so 16-bit
// gradients cross the wire in 16 bits.
//
// Communicator is the interface; world() and single() make the MPI one.
//
//===----------------------------------------------------------------------===//

#ifndef PPC_RUNTIME_COMMUNICATOR_H
#define PPC_RUNTIME_COMMUNICATOR_H

#include "ppc/Runtime/Backend.h"
#include "ppc/Support/Status.h"

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace ppc::runtime {

/// Timeouts from this many seconds (about 31 years) up, inf included, mean
/// no deadline: steady_clock counts nanoseconds in 64 bits, so a deadline
/// near 2^63 ns (292 years) would overflow into the past.
constexpr double kUnlimitedTimeout = 1e9;

/// All-reduces, reduce-scatters and all-gathers run in pieces of at most
/// this many bytes: on a 2-core host with Open MPI's shared memory, 256 MiB
/// all-reduce at 1.3 GB/s whole and 4-6 GB/s in pieces.
constexpr int64_t kCollectiveChunkBytes = int64_t(1) << 20;

/// "[0, 1, 2]": a group of world ranks, for messages.
std::string groupString(const std::vector<int> &group);

class Communicator {
public:
  /// Describes what a wait is for; called only when it times out.
  using Where = std::function<std::string()>;

  /// MPI_Init and MPI_Finalize, for a program's main.
  static void initialize(int &argc, char **&argv);
  static void finalize();
  /// MPI_COMM_WORLD; MPI must be initialized.
  static std::unique_ptr<Communicator> world(double timeoutSeconds);
  /// One rank, no MPI.
  static std::unique_ptr<Communicator> single();
  virtual ~Communicator() = default;

  int rank() const { return rank_; }
  int size() const { return size_; }

  /// Creates the communicators of `groups` (every distinct group of the plan,
  /// the same list on every rank): collective over each group's members, in
  /// list order, so ranks never wait on each other in a cycle.
  virtual absl::Status
  createGroups(const std::vector<std::vector<int>> &groups) = 0;

  /// The largest tag a message may have.
  virtual int maxTag() const = 0;

  /// Sends the first `n` elements of `message`, which it keeps until they
  /// are delivered; completes in the background.
  virtual absl::Status send(std::shared_ptr<DeviceBuffer> message, int64_t n,
                            int peer, int tag) = 0;
  /// Receives exactly `n` elements; a message of another size is an error.
  virtual absl::Status recv(void *data, DType dtype, int64_t n, int peer,
                            int tag, const Where &where) = 0;
  /// Waits for every send to be delivered. `context` names the point
  /// ("end of step 3") in a timeout message.
  virtual absl::Status completeSends(const std::string &context) = 0;

  virtual absl::Status allReduce(void *data, DType dtype, int64_t n,
                                 const std::vector<int> &group, bool max,
                                 const Where &where) = 0;
  /// Starts an all-reduce (sum, or max) of `data` in place once the
  /// backend's work before `ready` is done, and returns at once; `handle`
  /// names it for wait(). Started collectives of a group run on a duplicate
  /// of its communicator: every member starts them in the same order, which
  /// need not be their order among the blocking collectives. They advance
  /// whenever this rank calls MPI: progress() between kernels, or any wait.
  /// Every blocking collective below has a started form.
  virtual absl::Status startAllReduce(void *data, DType dtype, int64_t n,
                                      const std::vector<int> &group, bool max,
                                      Event &ready, int64_t &handle) = 0;
  /// Starts a reduce-scatter (as reduceScatter) the same way: `send` must
  /// stay unchanged and `recv` unread until wait() returns.
  virtual absl::Status startReduceScatter(const void *send, void *recv,
                                          DType dtype,
                                          const std::vector<int64_t> &counts,
                                          const std::vector<int> &group,
                                          bool max, Event &ready,
                                          int64_t &handle) = 0;
  /// Starts an all-gather (as allGather) the same way: `send` must stay
  /// unchanged and `recv` unread until wait() returns.
  virtual absl::Status startAllGather(const void *send, void *recv, DType dtype,
                                      const std::vector<int64_t> &counts,
                                      const std::vector<int> &group,
                                      Event &ready, int64_t &handle) = 0;
  /// Starts a broadcast (as broadcast) of `data` in place the same way.
  virtual absl::Status startBroadcast(void *data, DType dtype, int64_t n,
                                      const std::vector<int> &group, int root,
                                      Event &ready, int64_t &handle) = 0;
  /// Starts an all-to-all (as allToAll) the same way.
  virtual absl::Status startAllToAll(const void *send,
                                     const std::vector<int64_t> &sendCounts,
                                     void *recv,
                                     const std::vector<int64_t> &recvCounts,
                                     DType dtype, const std::vector<int> &group,
                                     Event &ready, int64_t &handle) = 0;
  virtual void progress() = 0;
  /// Waits for a started collective, against the timeout.
  virtual absl::Status wait(int64_t handle, const Where &where) = 0;

  virtual absl::Status broadcast(void *data, DType dtype, int64_t n,
                                 const std::vector<int> &group, int root,
                                 const Where &where) = 0;
  /// Member i's `send` (counts[i] elements) lands at the sum of the earlier
  /// counts in `recv`.
  virtual absl::Status allGather(const void *send, void *recv, DType dtype,
                                 const std::vector<int64_t> &counts,
                                 const std::vector<int> &group,
                                 const Where &where) = 0;
  /// `send` holds one block per member (counts[i] elements each, in order);
  /// this member's reduced block goes to `recv`.
  virtual absl::Status reduceScatter(const void *send, void *recv, DType dtype,
                                     const std::vector<int64_t> &counts,
                                     const std::vector<int> &group, bool max,
                                     const Where &where) = 0;
  /// `send` holds sendCounts[i] elements for member i, in order; `recv` gets
  /// recvCounts[i] from member i, in order.
  virtual absl::Status
  allToAll(const void *send, const std::vector<int64_t> &sendCounts, void *recv,
           const std::vector<int64_t> &recvCounts, DType dtype,
           const std::vector<int> &group, const Where &where) = 0;
  /// Every member's `mine` (the same length on all), in group order.
  virtual std::vector<int64_t> allGatherInts(const std::vector<int64_t> &mine,
                                             const std::vector<int> &group,
                                             const Where &where) = 0;

  // Over the whole world, between steps: these waits time out after twice
  // the timeout, so that a rank stuck inside a step is the one to report.
  /// Elementwise maximum over ranks, on every rank.
  virtual std::vector<double> maxOverRanks(const std::vector<double> &values,
                                           const Where &where) = 0;
  /// True on every rank if `flag` is true on any.
  virtual bool anyRank(bool flag, const Where &where) = 0;
  /// Every rank's string on rank 0 (in rank order); empty elsewhere.
  virtual std::vector<std::string> gatherToRoot(const std::string &mine,
                                                const Where &where) = 0;
  /// Every rank's string on every rank (in rank order); strings of 2 GiB
  /// and more in all are the caller's to refuse.
  virtual std::vector<std::string> allGatherStrings(const std::string &mine,
                                                    const Where &where) = 0;
  /// Rank 0's value on every rank.
  virtual int64_t broadcastFromRoot(int64_t value, const Where &where) = 0;
  virtual void barrier(const Where &where) = 0;

  /// Ends every rank of the job with `code` (just this process without MPI).
  [[noreturn]] virtual void abort(int code) = 0;

protected:
  Communicator(int rank, int size) : rank_(rank), size_(size) {}

private:
  int rank_, size_;
};

} // namespace ppc::runtime

#endif // PPC_RUNTIME_COMMUNICATOR_H
