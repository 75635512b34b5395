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
// group is its rank in the group's communicator. Counts are per member, in
// group order; data is float32.
//
//===----------------------------------------------------------------------===//

#ifndef PPC_RUNTIME_COMMUNICATOR_H
#define PPC_RUNTIME_COMMUNICATOR_H

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
/// this many floats (1 MiB): on a 2-core host with Open MPI's shared
/// memory, 256 MiB all-reduce at 1.3 GB/s whole and 4-6 GB/s in pieces.
constexpr int64_t kCollectiveChunkFloats = int64_t(1) << 18;

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
  ~Communicator();

  int rank() const { return rank_; }
  int size() const { return size_; }

  /// Creates the communicators of `groups` (every distinct group of the plan,
  /// the same list on every rank): collective over each group's members, in
  /// list order, so ranks never wait on each other in a cycle.
  std::string createGroups(const std::vector<std::vector<int>> &groups);

  /// The largest tag a message may have.
  int maxTag() const;

  /// Sends `data`; completes in the background.
  std::string send(std::vector<float> data, int peer, int tag);
  /// Receives exactly `n` floats; a message of another size is an error.
  std::string recv(float *data, int64_t n, int peer, int tag,
                   const Where &where);
  /// Waits for every send to be delivered. `context` names the point
  /// ("end of step 3") in a timeout message.
  std::string completeSends(const std::string &context);

  std::string allReduce(float *data, int64_t n, const std::vector<int> &group,
                        bool max, const Where &where);
  /// Starts an all-reduce (sum, or max) of `data` in place and returns at
  /// once; `handle` names it for wait(). Started all-reduces of a group
  /// run on a duplicate of its communicator: every member starts them in
  /// the same order, which need not be their order among the blocking
  /// collectives. They advance whenever this rank calls MPI: progress()
  /// between kernels, or any wait.
  std::string startAllReduce(float *data, int64_t n,
                             const std::vector<int> &group, bool max,
                             int64_t &handle);
  void progress();
  /// Waits for a started all-reduce, against the timeout.
  std::string wait(int64_t handle, const Where &where);

  std::string broadcast(float *data, int64_t n, const std::vector<int> &group,
                        int root, const Where &where);
  /// Member i's `send` (counts[i] floats) lands at the sum of the earlier
  /// counts in `recv`.
  std::string allGather(const float *send, float *recv,
                        const std::vector<int64_t> &counts,
                        const std::vector<int> &group, const Where &where);
  /// `send` holds one block per member (counts[i] floats each, in order);
  /// this member's reduced block goes to `recv`.
  std::string reduceScatter(const float *send, float *recv,
                            const std::vector<int64_t> &counts,
                            const std::vector<int> &group, bool max,
                            const Where &where);
  /// `send` holds sendCounts[i] floats for member i, in order; `recv` gets
  /// recvCounts[i] from member i, in order.
  std::string allToAll(const float *send,
                       const std::vector<int64_t> &sendCounts, float *recv,
                       const std::vector<int64_t> &recvCounts,
                       const std::vector<int> &group, const Where &where);
  /// Every member's `mine` (the same length on all), in group order.
  std::vector<int64_t> allGatherInts(const std::vector<int64_t> &mine,
                                     const std::vector<int> &group,
                                     const Where &where);

  // Over the whole world, between steps: these waits time out after twice
  // the timeout, so that a rank stuck inside a step is the one to report.
  /// Elementwise maximum over ranks, on every rank.
  std::vector<double> maxOverRanks(const std::vector<double> &values,
                                   const Where &where);
  /// True on every rank if `flag` is true on any.
  bool anyRank(bool flag, const Where &where);
  /// Every rank's string on rank 0 (in rank order); empty elsewhere.
  std::vector<std::string> gatherToRoot(const std::string &mine,
                                        const Where &where);
  /// Rank 0's value on every rank.
  int64_t broadcastFromRoot(int64_t value, const Where &where);
  void barrier(const Where &where);

  /// Ends every rank of the job with `code` (just this process without MPI).
  [[noreturn]] void abort(int code);

private:
  Communicator(int rank, int size, double timeout, bool mpi);
  struct Impl;
  int rank_, size_;
  std::unique_ptr<Impl> impl;
};

} // namespace ppc::runtime

#endif // PPC_RUNTIME_COMMUNICATOR_H
