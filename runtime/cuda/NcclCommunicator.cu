//===- NcclCommunicator.cu - collectives between GPUs over NCCL -----------===//

#include "NcclCommunicator.h"

#include "ppc/Runtime/CpuBackend.h"

#include <nccl.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <map>
#include <set>
#include <unistd.h>

namespace ppc::runtime::cuda {

namespace {

ncclDataType_t ncclType(DType dtype) {
  switch (dtype) {
  case DType::F32:
    return ncclFloat32;
  case DType::BF16:
    return ncclBfloat16;
  case DType::F16:
    return ncclFloat16;
  case DType::I64:
    return ncclInt64;
  }
  return ncclFloat32;
}

std::string ncclError(const char *call, ncclResult_t result,
                      ncclComm_t comm = nullptr) {
  std::string text = std::string(call) + ": " + ncclGetErrorString(result);
  if (const char *last = comm ? ncclGetLastError(comm) : nullptr; last && *last)
    text += std::string(" (") + last + ")";
  return text;
}

char *at(void *data, DType dtype, int64_t offset) {
  return static_cast<char *>(data) + offset * dtypeBytes(dtype);
}
const char *at(const void *data, DType dtype, int64_t offset) {
  return static_cast<const char *>(data) + offset * dtypeBytes(dtype);
}

class NcclCommunicator final : public Communicator {
public:
  NcclCommunicator(Communicator &host, Stream stream, double timeoutSeconds)
      : Communicator(host.rank(), host.size()), host(host), stream(stream),
        timeoutSeconds(timeoutSeconds), hostBuffers(createCpuBackend()) {
    cudaStreamCreateWithFlags(&overlapStream, cudaStreamNonBlocking);
  }
  ~NcclCommunicator() override {
    cudaStreamSynchronize(overlapStream);
    for (auto &[handle, event] : started)
      cudaEventDestroy(event);
    for (auto &[group, pair] : comms) {
      ncclCommDestroy(pair.started);
      ncclCommDestroy(pair.ordered);
    }
    cudaStreamDestroy(overlapStream);
  }

  absl::Status
  createGroups(const std::vector<std::vector<int>> &groups) override {
    if (absl::Status err = host.createGroups(groups); !err.ok())
      return err;
    for (const std::vector<int> &group : groups) {
      auto me = std::find(group.begin(), group.end(), rank());
      if (group.size() < 2 || me == group.end() || comms.count(group))
        continue;
      const int index = static_cast<int>(me - group.begin());
      // NCCL takes one rank per GPU: members sharing one (more ranks than
      // GPUs on a host) exchange through host memory instead.
      std::vector<int64_t> devices =
          host.allGatherInts(deviceIdentity(), group, [&] {
            return "the GPU exchange of " + describe(group);
          });
      std::vector<std::pair<int64_t, int64_t>> seen;
      for (size_t i = 0; i + 1 < devices.size(); i += 2)
        seen.push_back({devices[i], devices[i + 1]});
      std::sort(seen.begin(), seen.end());
      if (std::adjacent_find(seen.begin(), seen.end()) != seen.end()) {
        sharedGroups.insert(group);
        continue;
      }
      ncclUniqueId id{};
      if (index == 0)
        if (ncclResult_t r = ncclGetUniqueId(&id); r != ncclSuccess)
          return absl::InternalError(ncclError("ncclGetUniqueId", r));
      static_assert(sizeof(id) % 8 == 0);
      if (absl::Status err = host.broadcast(
              &id, DType::I64, sizeof(id) / 8, group, 0,
              [&] { return "the NCCL id exchange of " + describe(group); });
          !err.ok())
        return err;
      Pair pair;
      if (ncclResult_t r = ncclCommInitRank(
              &pair.ordered, static_cast<int>(group.size()), id, index);
          r != ncclSuccess)
        return absl::InternalError(ncclError("ncclCommInitRank", r) + " for " +
                                   describe(group));
      if (ncclResult_t r =
              ncclCommSplit(pair.ordered, 0, index, &pair.started, nullptr);
          r != ncclSuccess)
        return absl::InternalError(ncclError("ncclCommSplit", r, pair.ordered) +
                                   " for " + describe(group));
      comms.emplace(group, pair);
    }
    return absl::OkStatus();
  }

  int maxTag() const override { return host.maxTag(); }

  // Messages: through host memory over MPI (NCCL has no tags).
  absl::Status send(std::shared_ptr<DeviceBuffer> message, int64_t n, int peer,
                    int tag) override {
    std::shared_ptr<DeviceBuffer> staged =
        hostBuffers->allocate(message->dtype(), n);
    if (!staged)
      return absl::InvalidArgumentError("out of host memory for a message");
    cudaStreamSynchronize(stream); // the message's copy was issued on it
    if (cudaError_t e = cudaMemcpy(staged->data(), message->data(),
                                   staged->bytes(), cudaMemcpyDeviceToHost);
        e != cudaSuccess)
      return absl::InvalidArgumentError(
          std::string("copying a message to the host: ") +
          cudaGetErrorString(e));
    return host.send(std::move(staged), n, peer, tag);
  }
  absl::Status recv(void *data, DType dtype, int64_t n, int peer, int tag,
                    const Where &where) override {
    std::shared_ptr<DeviceBuffer> staged = hostBuffers->allocate(dtype, n);
    if (!staged)
      return absl::InvalidArgumentError("out of host memory for a message");
    if (absl::Status err =
            host.recv(staged->data(), dtype, n, peer, tag, where);
        !err.ok())
      return err;
    // From pageable memory: returns once the data is staged by the driver.
    if (cudaError_t e =
            cudaMemcpyAsync(data, staged->data(), n * dtypeBytes(dtype),
                            cudaMemcpyHostToDevice, stream);
        e != cudaSuccess)
      return absl::InvalidArgumentError(
          std::string("copying a message to the GPU: ") +
          cudaGetErrorString(e));
    return absl::OkStatus();
  }
  absl::Status completeSends(const std::string &context) override {
    return host.completeSends(context);
  }

  // Each collective is issued once, by its issue function on a communicator
  // and a stream: the blocking form on the group's ordered communicator and
  // the compute stream, the started form (startOn) on the group's split
  // communicator and the overlap stream. Groups whose members share a GPU go
  // through the host communicator, which blocks.

  absl::Status allReduce(void *data, DType dtype, int64_t n,
                         const std::vector<int> &group, bool max,
                         const Where &where) override {
    if (group.size() < 2)
      return absl::OkStatus();
    if (sharedGroups.count(group))
      return viaHost({{data, n, true, true}}, dtype, [&](void *const *h) {
        return host.allReduce(h[0], dtype, n, group, max, where);
      });
    ncclComm_t comm = ordered(group);
    if (!comm)
      return noGroup(group);
    return issueAllReduce(data, dtype, n, max, comm, stream);
  }
  absl::Status startAllReduce(void *data, DType dtype, int64_t n,
                              const std::vector<int> &group, bool max, Event &,
                              int64_t &handle) override {
    return startOn(
        group, handle,
        [&] {
          return allReduce(data, dtype, n, group, max,
                           startedWhere("an all-reduce"));
        },
        [&](ncclComm_t comm, cudaStream_t on) {
          return issueAllReduce(data, dtype, n, max, comm, on);
        });
  }
  absl::Status issueAllReduce(void *data, DType dtype, int64_t n, bool max,
                              ncclComm_t comm, cudaStream_t on) {
    return check("ncclAllReduce",
                 ncclAllReduce(data, data, n, ncclType(dtype),
                               max ? ncclMax : ncclSum, comm, on),
                 comm);
  }

  void progress() override { host.progress(); }
  absl::Status wait(int64_t handle, const Where &) override {
    auto it = started.find(handle);
    if (it == started.end())
      return absl::InvalidArgumentError("no started collective " +
                                        std::to_string(handle));
    // The compute stream waits; the host does not.
    cudaStreamWaitEvent(stream, it->second, 0);
    cudaEventDestroy(it->second);
    started.erase(it);
    return absl::OkStatus();
  }

  absl::Status broadcast(void *data, DType dtype, int64_t n,
                         const std::vector<int> &group, int root,
                         const Where &where) override {
    if (group.size() < 2)
      return absl::OkStatus();
    if (sharedGroups.count(group))
      return viaHost({{data, n, true, true}}, dtype, [&](void *const *h) {
        return host.broadcast(h[0], dtype, n, group, root, where);
      });
    ncclComm_t comm = ordered(group);
    if (!comm)
      return noGroup(group);
    return issueBroadcast(data, dtype, n, root, comm, stream);
  }
  absl::Status startBroadcast(void *data, DType dtype, int64_t n,
                              const std::vector<int> &group, int root, Event &,
                              int64_t &handle) override {
    return startOn(
        group, handle,
        [&] {
          return broadcast(data, dtype, n, group, root,
                           startedWhere("a broadcast"));
        },
        [&](ncclComm_t comm, cudaStream_t on) {
          return issueBroadcast(data, dtype, n, root, comm, on);
        });
  }
  absl::Status issueBroadcast(void *data, DType dtype, int64_t n, int root,
                              ncclComm_t comm, cudaStream_t on) {
    return check("ncclBroadcast",
                 ncclBroadcast(data, data, n, ncclType(dtype), root, comm, on),
                 comm);
  }

  absl::Status allGather(const void *send, void *recv, DType dtype,
                         const std::vector<int64_t> &counts,
                         const std::vector<int> &group,
                         const Where &where) override {
    if (group.size() < 2)
      return copy(send, recv, dtype, counts.empty() ? 0 : counts[0]);
    if (sharedGroups.count(group))
      return viaHost(
          {{const_cast<void *>(send), counts[indexIn(group)], true, false},
           {recv, sum(counts), false, true}},
          dtype, [&](void *const *h) {
            return host.allGather(h[0], h[1], dtype, counts, group, where);
          });
    ncclComm_t comm = ordered(group);
    if (!comm)
      return noGroup(group);
    return issueAllGather(send, recv, dtype, counts, indexIn(group), comm,
                          stream);
  }
  absl::Status startAllGather(const void *send, void *recv, DType dtype,
                              const std::vector<int64_t> &counts,
                              const std::vector<int> &group, Event &,
                              int64_t &handle) override {
    return startOn(
        group, handle,
        [&] {
          return allGather(send, recv, dtype, counts, group,
                           startedWhere("an all-gather"));
        },
        [&](ncclComm_t comm, cudaStream_t on) {
          return issueAllGather(send, recv, dtype, counts, indexIn(group), comm,
                                on);
        });
  }
  /// NCCL's all-gather when the pieces are equal, else each member
  /// broadcasts its own (member `me` sends `send`).
  absl::Status issueAllGather(const void *send, void *recv, DType dtype,
                              const std::vector<int64_t> &counts, int me,
                              ncclComm_t comm, cudaStream_t on) {
    const ncclDataType_t type = ncclType(dtype);
    if (std::all_of(counts.begin(), counts.end(),
                    [&](int64_t c) { return c == counts[0]; }))
      return check("ncclAllGather",
                   ncclAllGather(send, recv, counts[0], type, comm, on), comm);
    ncclGroupStart();
    int64_t offset = 0;
    for (size_t i = 0; i < counts.size(); ++i) {
      char *piece = at(recv, dtype, offset);
      ncclBroadcast(static_cast<int>(i) == me ? send : piece, piece, counts[i],
                    type, static_cast<int>(i), comm, on);
      offset += counts[i];
    }
    return check("ncclGroupEnd (all-gather)", ncclGroupEnd(), comm);
  }

  absl::Status reduceScatter(const void *send, void *recv, DType dtype,
                             const std::vector<int64_t> &counts,
                             const std::vector<int> &group, bool max,
                             const Where &where) override {
    if (group.size() < 2)
      return copy(send, recv, dtype, counts.empty() ? 0 : counts[0]);
    if (sharedGroups.count(group))
      return viaHost({{const_cast<void *>(send), sum(counts), true, false},
                      {recv, counts[indexIn(group)], false, true}},
                     dtype, [&](void *const *h) {
                       return host.reduceScatter(h[0], h[1], dtype, counts,
                                                 group, max, where);
                     });
    ncclComm_t comm = ordered(group);
    if (!comm)
      return noGroup(group);
    return issueReduceScatter(send, recv, dtype, counts, max, comm, stream);
  }
  absl::Status startReduceScatter(const void *send, void *recv, DType dtype,
                                  const std::vector<int64_t> &counts,
                                  const std::vector<int> &group, bool max,
                                  Event &, int64_t &handle) override {
    return startOn(
        group, handle,
        [&] {
          return reduceScatter(send, recv, dtype, counts, group, max,
                               startedWhere("a reduce-scatter"));
        },
        [&](ncclComm_t comm, cudaStream_t on) {
          return issueReduceScatter(send, recv, dtype, counts, max, comm, on);
        });
  }
  /// NCCL's reduce-scatter when the pieces are equal, else one reduce to
  /// each member.
  absl::Status issueReduceScatter(const void *send, void *recv, DType dtype,
                                  const std::vector<int64_t> &counts, bool max,
                                  ncclComm_t comm, cudaStream_t on) {
    const ncclDataType_t type = ncclType(dtype);
    const ncclRedOp_t op = max ? ncclMax : ncclSum;
    if (std::all_of(counts.begin(), counts.end(),
                    [&](int64_t c) { return c == counts[0]; }))
      return check("ncclReduceScatter",
                   ncclReduceScatter(send, recv, counts[0], type, op, comm, on),
                   comm);
    ncclGroupStart();
    int64_t offset = 0;
    for (size_t i = 0; i < counts.size(); ++i) {
      ncclReduce(at(send, dtype, offset), recv, counts[i], type, op,
                 static_cast<int>(i), comm, on);
      offset += counts[i];
    }
    return check("ncclGroupEnd (reduce-scatter)", ncclGroupEnd(), comm);
  }

  absl::Status allToAll(const void *send,
                        const std::vector<int64_t> &sendCounts, void *recv,
                        const std::vector<int64_t> &recvCounts, DType dtype,
                        const std::vector<int> &group,
                        const Where &where) override {
    if (group.size() < 2)
      return copy(send, recv, dtype, sendCounts.empty() ? 0 : sendCounts[0]);
    if (sharedGroups.count(group))
      return viaHost({{const_cast<void *>(send), sum(sendCounts), true, false},
                      {recv, sum(recvCounts), false, true}},
                     dtype, [&](void *const *h) {
                       return host.allToAll(h[0], sendCounts, h[1], recvCounts,
                                            dtype, group, where);
                     });
    ncclComm_t comm = ordered(group);
    if (!comm)
      return noGroup(group);
    return issueAllToAll(send, sendCounts, recv, recvCounts, dtype, comm,
                         stream);
  }
  absl::Status startAllToAll(const void *send,
                             const std::vector<int64_t> &sendCounts, void *recv,
                             const std::vector<int64_t> &recvCounts,
                             DType dtype, const std::vector<int> &group,
                             Event &, int64_t &handle) override {
    return startOn(
        group, handle,
        [&] {
          return allToAll(send, sendCounts, recv, recvCounts, dtype, group,
                          startedWhere("an all-to-all"));
        },
        [&](ncclComm_t comm, cudaStream_t on) {
          return issueAllToAll(send, sendCounts, recv, recvCounts, dtype, comm,
                               on);
        });
  }
  /// Point-to-point sends and receives in one NCCL group.
  absl::Status issueAllToAll(const void *send,
                             const std::vector<int64_t> &sendCounts, void *recv,
                             const std::vector<int64_t> &recvCounts,
                             DType dtype, ncclComm_t comm, cudaStream_t on) {
    const ncclDataType_t type = ncclType(dtype);
    ncclGroupStart();
    int64_t sent = 0, received = 0;
    for (size_t i = 0; i < sendCounts.size(); ++i) {
      if (sendCounts[i] > 0)
        ncclSend(at(send, dtype, sent), sendCounts[i], type,
                 static_cast<int>(i), comm, on);
      if (recvCounts[i] > 0)
        ncclRecv(at(recv, dtype, received), recvCounts[i], type,
                 static_cast<int>(i), comm, on);
      sent += sendCounts[i];
      received += recvCounts[i];
    }
    return check("ncclGroupEnd (all-to-all)", ncclGroupEnd(), comm);
  }

  /// Starts a collective over `group` for wait(): groups of one and groups
  /// through the host run `blockingCall` at once (done when it returns, in
  /// stream order); the others are issued by `issue` on the group's split
  /// communicator and the overlap stream, after the work issued so far on
  /// the compute stream (the last write of what it reads).
  template <typename Blocking, typename Issue>
  absl::Status startOn(const std::vector<int> &group, int64_t &handle,
                       Blocking blockingCall, Issue issue) {
    handle = nextHandle++;
    absl::Status err;
    cudaStream_t doneOn = stream;
    if (group.size() < 2 || sharedGroups.count(group)) {
      err = blockingCall();
    } else if (auto it = comms.find(group); it == comms.end()) {
      err = noGroup(group);
    } else {
      cudaEvent_t ready;
      cudaEventCreateWithFlags(&ready, cudaEventDisableTiming);
      cudaEventRecord(ready, stream);
      cudaStreamWaitEvent(overlapStream, ready, 0);
      cudaEventDestroy(ready);
      err = issue(it->second.started, overlapStream);
      doneOn = overlapStream;
    }
    if (!err.ok())
      return err;
    cudaEvent_t done;
    cudaEventCreateWithFlags(&done, cudaEventDisableTiming);
    cudaEventRecord(done, doneOn);
    started.emplace(handle, done);
    return absl::OkStatus();
  }
  static Where startedWhere(const char *what) {
    return [what] { return std::string(what) + " started early"; };
  }

  // The executor's own exchanges, on host values.
  std::vector<int64_t> allGatherInts(const std::vector<int64_t> &mine,
                                     const std::vector<int> &group,
                                     const Where &where) override {
    return host.allGatherInts(mine, group, where);
  }
  std::vector<double> maxOverRanks(const std::vector<double> &values,
                                   const Where &where) override {
    return host.maxOverRanks(values, where);
  }
  bool anyRank(bool flag, const Where &where) override {
    return host.anyRank(flag, where);
  }
  std::vector<std::string> gatherToRoot(const std::string &mine,
                                        const Where &where) override {
    return host.gatherToRoot(mine, where);
  }
  std::vector<std::string> allGatherStrings(const std::string &mine,
                                            const Where &where) override {
    return host.allGatherStrings(mine, where);
  }
  int64_t broadcastFromRoot(int64_t value, const Where &where) override {
    return host.broadcastFromRoot(value, where);
  }
  void barrier(const Where &where) override { host.barrier(where); }

  [[noreturn]] void abort(int code) override {
    for (auto &[group, pair] : comms) {
      ncclCommAbort(pair.started);
      ncclCommAbort(pair.ordered);
    }
    comms.clear();
    host.abort(code);
    std::_Exit(code); // host.abort does not return
  }

  /// The backend's stall check: an asynchronous NCCL error, or GPU work
  /// not done within the timeout, ends the job.
  void onStall(double waitedSeconds) {
    std::string why;
    for (auto &[group, pair] : comms)
      for (ncclComm_t comm : {pair.ordered, pair.started}) {
        ncclResult_t result = ncclSuccess;
        ncclCommGetAsyncError(comm, &result);
        if (result != ncclSuccess && result != ncclInProgress && why.empty())
          why = ncclError("NCCL", result, comm) + " in " + describe(group);
      }
    if (why.empty() && waitedSeconds < timeoutSeconds)
      return;
    if (why.empty())
      why = "the GPU's queued work (kernels and NCCL collectives) was not "
            "done after " +
            std::to_string(static_cast<int64_t>(waitedSeconds)) +
            " s: a peer rank stopped inside a collective?";
    std::fprintf(stderr, "ppc-run: rank %d: %s\n", rank(), why.c_str());
    std::fflush(stderr);
    abort(1);
  }

private:
  /// A device range a host exchange reads (`in`) and/or writes (`out`).
  struct HostRange {
    void *device;
    int64_t n;
    bool in, out;
  };

  /// Runs `exchange` on host copies of `ranges` (h[i] for ranges[i]): the
  /// path of groups whose members share a GPU.
  template <typename Exchange>
  absl::Status viaHost(const std::vector<HostRange> &ranges, DType dtype,
                       Exchange &&exchange) {
    std::vector<std::shared_ptr<DeviceBuffer>> copies;
    std::vector<void *> pointers;
    cudaStreamSynchronize(stream); // what the exchange reads is written
    for (const HostRange &r : ranges) {
      copies.push_back(hostBuffers->allocate(dtype, r.n));
      if (!copies.back())
        return absl::InvalidArgumentError(
            "out of host memory for a collective's staging");
      if (r.in && r.n > 0)
        if (cudaError_t e =
                cudaMemcpy(copies.back()->data(), r.device,
                           r.n * dtypeBytes(dtype), cudaMemcpyDeviceToHost);
            e != cudaSuccess)
          return absl::InvalidArgumentError(
              std::string("copying to the host: ") + cudaGetErrorString(e));
      pointers.push_back(copies.back()->data());
    }
    if (absl::Status err = exchange(pointers.data()); !err.ok())
      return err;
    for (size_t i = 0; i < ranges.size(); ++i)
      if (ranges[i].out && ranges[i].n > 0)
        if (cudaError_t e = cudaMemcpy(ranges[i].device, pointers[i],
                                       ranges[i].n * dtypeBytes(dtype),
                                       cudaMemcpyHostToDevice);
            e != cudaSuccess)
          return absl::InvalidArgumentError(
              std::string("copying to the GPU: ") + cudaGetErrorString(e));
    return absl::OkStatus();
  }

  static int64_t sum(const std::vector<int64_t> &counts) {
    int64_t total = 0;
    for (int64_t c : counts)
      total += c;
    return total;
  }

  /// This rank's GPU as (host, PCI bus) hashes.
  static std::vector<int64_t> deviceIdentity() {
    char host[256] = {};
    gethostname(host, sizeof(host) - 1);
    char bus[64] = {};
    int device = 0;
    cudaGetDevice(&device);
    cudaDeviceGetPCIBusId(bus, sizeof(bus) - 1, device);
    return {static_cast<int64_t>(std::hash<std::string>()(host)),
            static_cast<int64_t>(std::hash<std::string>()(bus))};
  }

  struct Pair {
    ncclComm_t ordered = nullptr, started = nullptr;
  };

  ncclComm_t ordered(const std::vector<int> &group) const {
    auto it = comms.find(group);
    return it == comms.end() ? nullptr : it->second.ordered;
  }
  int indexIn(const std::vector<int> &group) const {
    return static_cast<int>(std::find(group.begin(), group.end(), rank()) -
                            group.begin());
  }
  static std::string describe(const std::vector<int> &group) {
    std::string text = "group [";
    for (size_t i = 0; i < group.size(); ++i)
      text += (i ? " " : "") + std::to_string(group[i]);
    return text + "]";
  }
  absl::Status noGroup(const std::vector<int> &group) const {
    return absl::InvalidArgumentError(
        "no NCCL communicator for " + describe(group) +
        " (not in the plan's groups, or this rank is not a member)");
  }
  absl::Status check(const char *call, ncclResult_t result, ncclComm_t comm) {
    return result == ncclSuccess || result == ncclInProgress
               ? absl::OkStatus()
               : absl::InternalError(ncclError(call, result, comm));
  }
  /// A group of one: its own piece, on the stream.
  absl::Status copy(const void *send, void *recv, DType dtype, int64_t n) {
    if (send == recv || n <= 0)
      return absl::OkStatus();
    cudaError_t e = cudaMemcpyAsync(recv, send, n * dtypeBytes(dtype),
                                    cudaMemcpyDeviceToDevice, stream);
    return e == cudaSuccess ? absl::OkStatus()
                            : absl::InternalError(cudaGetErrorString(e));
  }

  Communicator &host;
  Stream stream;
  cudaStream_t overlapStream{};
  double timeoutSeconds;
  std::unique_ptr<Backend> hostBuffers; ///< host memory for messages
  std::map<std::vector<int>, Pair> comms;
  /// Groups whose members share a GPU: exchanged through host memory.
  std::set<std::vector<int>> sharedGroups;
  std::map<int64_t, cudaEvent_t> started;
  int64_t nextHandle = 0;
};

} // namespace

std::unique_ptr<Communicator>
createNcclCommunicator(Communicator &host, Stream stream, double timeoutSeconds,
                       const std::function<void(StallCheck)> &setStallCheck) {
  auto comm = std::make_unique<NcclCommunicator>(host, stream, timeoutSeconds);
  NcclCommunicator *raw = comm.get();
  setStallCheck([raw](double waited) { raw->onStall(waited); });
  return comm;
}

} // namespace ppc::runtime::cuda
