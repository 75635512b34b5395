//===- NcclCommunicator.h - NCCL between the ranks' GPUs --------*- C++ -*-===//
//
// Private to runtime/cuda. The cuda backend's communicator, built on the
// host (MPI) one:
//  - every group of the plan gets two NCCL communicators, made once (the
//    unique id broadcast over MPI from the group's first member, groups in
//    list order): one for the collectives issued in program order, on the
//    backend's stream, so they need no host wait; one for the all-reduces
//    started early, on a stream of their own that waits for the point of
//    the backward they start at, so gradient reduction overlaps the rest of
//    the backward (wait() makes the compute stream wait for it);
//  - all-gathers and reduce-scatters of unequal pieces run as grouped
//    broadcasts and reduces, all-to-all as grouped sends and receives;
//  - point-to-point messages, which carry tags NCCL has not, go through
//    host memory over MPI, and so do the collectives of a group whose
//    members share a GPU (more ranks than GPUs: NCCL takes one rank per
//    GPU), slowly but correctly;
//  - everything else (the executor's own exchanges) is the host's.
// A rank whose GPU work stalls (a peer died inside a collective) ends the
// job when a host wait exceeds the timeout or NCCL reports an asynchronous
// error, with both in the message, after aborting its NCCL communicators.
//
//===----------------------------------------------------------------------===//

#ifndef PPC_RUNTIME_CUDA_NCCLCOMMUNICATOR_H
#define PPC_RUNTIME_CUDA_NCCLCOMMUNICATOR_H

#include "Device.h"

#include "ppc/Runtime/Communicator.h"

#include <functional>
#include <memory>

namespace ppc::runtime::cuda {

/// Called by the backend about once a second while a host wait on its
/// stream is not done; ends the job when the wait must not go on.
using StallCheck = std::function<void(double waitedSeconds)>;

/// The communicator of the cuda backend whose work runs on `stream`;
/// installs its stall check through `setStallCheck`.
std::unique_ptr<Communicator>
createNcclCommunicator(Communicator &host, Stream stream, double timeoutSeconds,
                       const std::function<void(StallCheck)> &setStallCheck);

} // namespace ppc::runtime::cuda

#endif // PPC_RUNTIME_CUDA_NCCLCOMMUNICATOR_H
