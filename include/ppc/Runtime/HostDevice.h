//===- HostDevice.h - code that runs on the host and on a GPU ---*- C++ -*-===//
//
// PPC_HD marks a function that the cuda backend's kernels call on the device
// and the cpu backend (or the cuda backend's host emulation) calls on the
// host: one definition of the arithmetic (storage-type rounding, optimizer
// steps, dropout masks) for both, so the backends agree bit for bit where the
// arithmetic allows. Empty outside nvcc.
//
//===----------------------------------------------------------------------===//

#ifndef PPC_RUNTIME_HOSTDEVICE_H
#define PPC_RUNTIME_HOSTDEVICE_H

#if defined(__CUDACC__)
#define PPC_HD __host__ __device__
#else
#define PPC_HD
#endif

#endif // PPC_RUNTIME_HOSTDEVICE_H
