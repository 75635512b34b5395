//===- LibraryPeak.cu - what cuBLAS and cuDNN achieve on their own --------===//
//
// ppc-library-peak: the time and TFLOP/s of one GEMM (cuBLAS) or one
// convolution pass (cuDNN) on the first visible GPU, called directly, with
// nothing of ppc around it: the ceiling a GPU check compares the cuda
// backend's kernels inside a training step against.
//
//   ppc-library-peak gemm M N K [--dtype f32|bf16] [--transa] [--transb]
//                               [--batch B]
//   ppc-library-peak conv N C H W K R S [--stride s] [--pad p]
//                               [--dilation d] [--groups g]
//                               [--pass forward|backward-data|backward-filter]
//                               [--math default|fma]
//
// gemm: C = op(A) op(B), row-major as runtime/cuda/Library.h documents it
// (A m x k, stored k x m with --transa; B k x n, stored n x k with --transb;
// C m x n), alpha 1, beta 0, CUBLAS_COMPUTE_32F and CUBLAS_GEMM_DEFAULT,
// operands and C float32 or, with --dtype bf16, bf16 (on tensor cores; C
// rounded from the float32 accumulation, as a bf16 training step writes
// it). cublasGemmEx without --batch; with --batch (1 included: the
// backend's own call) cublasGemmStridedBatchedEx over B packed matrices. FLOPs: 2 * m * n * k * batch.
//
// conv: cuDNN's legacy API, NCHW float32, x N x C x H x W, w K x C/g x R x S,
// y N x K x P x Q (stride, pad and dilation the same on both axes; default
// 1, 0, 1, 1), CUDNN_CROSS_CORRELATION, CUDNN_DEFAULT_MATH (TF32 allowed on
// Ampere and later) or, with --math fma, CUDNN_FMA_MATH (exact float32, as
// the cuda backend runs its convolutions), alpha 1, beta 0. The pass runs
// the algorithm that
// cudnnGetConvolution{Forward,BackwardData,BackwardFilter}Algorithm_v7
// ranks first among those that succeed with at most 1 GiB of workspace.
// FLOPs, for every pass: 2 * N * K * P * Q * C/g * R * S.
//
// Operands hold random values in [-1, 1) (a hash of the index, made on the
// GPU). Warm-up calls, then timed calls on one stream between two CUDA
// events, the count grown until they take at least 0.2 s; `seconds` is the
// mean per call. Prints one line of JSON on stdout:
//
//   {"op":"gemm","m":..,"n":..,"k":..,"dtype":"f32"|"bf16","batch":..,
//    "transa":..,"transb":..,"call":"cublasGemmEx"|"cublasGemmStridedBatchedEx",
//    "device":"..","iterations":..,"seconds":..,"tflops":..}
//   {"op":"conv","n":..,"c":..,"h":..,"w":..,"k":..,"r":..,"s":..,
//    "stride":..,"pad":..,"dilation":..,"groups":..,"pass":"..","p":..,
//    "q":..,"dtype":"f32","math":"default"|"fma","algo":..,
//    "workspace_bytes":..,"device":"..","iterations":..,"seconds":..,
//    "tflops":..}
//
// Exit status: 0 on success; 2 for bad arguments (with the usage on
// stderr); 1 when no GPU is visible ("ppc-library-peak: no GPU visible
// (cudaGetDeviceCount: ...)") or a CUDA, cuBLAS or cuDNN call fails (the
// call and its error on stderr).
//
//===----------------------------------------------------------------------===//

#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <cudnn.h>

#include <cerrno>
#include <climits>
#include <cmath>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

const char *const usageText =
    "usage: ppc-library-peak gemm M N K [--dtype f32|bf16] [--transa] "
    "[--transb] [--batch B]\n"
    "       ppc-library-peak conv N C H W K R S [--stride s] [--pad p] "
    "[--dilation d] [--groups g]\n"
    "                        [--pass forward|backward-data|backward-filter]\n"
    "                        [--math default|fma]\n";

[[noreturn]] void usageError(const char *format, ...) {
  std::fprintf(stderr, "ppc-library-peak: ");
  va_list args;
  va_start(args, format);
  std::vfprintf(stderr, format, args);
  va_end(args);
  std::fprintf(stderr, "\n%s", usageText);
  std::exit(2);
}

[[noreturn]] void fail(const char *call, const char *error) {
  std::fprintf(stderr, "ppc-library-peak: %s failed: %s\n", call, error);
  std::exit(1);
}

#define CHECK_CUDA(call)                                                       \
  do {                                                                         \
    cudaError_t status_ = (call);                                              \
    if (status_ != cudaSuccess)                                                \
      fail(#call, cudaGetErrorString(status_));                                \
  } while (0)

#define CHECK_CUBLAS(call)                                                     \
  do {                                                                         \
    cublasStatus_t status_ = (call);                                           \
    if (status_ != CUBLAS_STATUS_SUCCESS)                                      \
      fail(#call, cublasGetStatusString(status_));                             \
  } while (0)

#define CHECK_CUDNN(call)                                                      \
  do {                                                                         \
    cudnnStatus_t status_ = (call);                                            \
    if (status_ != CUDNN_STATUS_SUCCESS)                                       \
      fail(#call, cudnnGetErrorString(status_));                               \
  } while (0)

/// A positive (or, with `allowZero`, non-negative) int.
int parseInt(const char *name, const char *text, bool allowZero = false) {
  errno = 0;
  char *end = nullptr;
  const long long value = std::strtoll(text, &end, 10);
  if (errno != 0 || end == text || *end != '\0' || value > INT_MAX ||
      value < (allowZero ? 0 : 1))
    usageError("%s must be a %s integer up to %d, got '%s'", name,
               allowZero ? "non-negative" : "positive", INT_MAX, text);
  return static_cast<int>(value);
}

/// Splits the options after the positional arguments: "--name value",
/// "--name=value" or, for flags, "--name".
struct Options {
  std::vector<std::pair<std::string, std::string>> values;
  std::vector<std::string> flags;
};

Options parseOptions(int argc, char **argv, int first,
                     const std::vector<std::string> &valued,
                     const std::vector<std::string> &flagNames) {
  Options options;
  for (int i = first; i < argc; ++i) {
    std::string arg = argv[i];
    std::string value;
    bool hasValue = false;
    if (size_t eq = arg.find('=');
        arg.rfind("--", 0) == 0 && eq != std::string::npos) {
      value = arg.substr(eq + 1);
      arg = arg.substr(0, eq);
      hasValue = true;
    }
    bool known = false;
    for (const std::string &name : valued)
      if (arg == name) {
        known = true;
        if (!hasValue) {
          if (i + 1 >= argc)
            usageError("%s needs a value", arg.c_str());
          value = argv[++i];
        }
        options.values.emplace_back(arg, value);
      }
    for (const std::string &name : flagNames)
      if (arg == name) {
        known = true;
        if (hasValue)
          usageError("%s takes no value", arg.c_str());
        options.flags.push_back(arg);
      }
    if (!known)
      usageError("unknown argument '%s'", argv[i]);
  }
  return options;
}

std::string jsonString(const std::string &text) {
  std::string out = "\"";
  for (char ch : text) {
    if (ch == '"' || ch == '\\') {
      out += '\\';
      out += ch;
    } else if (static_cast<unsigned char>(ch) < 0x20) {
      char escaped[8];
      std::snprintf(escaped, sizeof escaped, "\\u%04x", ch);
      out += escaped;
    } else {
      out += ch;
    }
  }
  return out + "\"";
}

/// The first GPU, or exit 1 when there is none.
std::string selectDevice() {
  int count = 0;
  const cudaError_t status = cudaGetDeviceCount(&count);
  if (status != cudaSuccess || count == 0) {
    std::fprintf(
        stderr, "ppc-library-peak: no GPU visible (cudaGetDeviceCount: %s)\n",
        status != cudaSuccess ? cudaGetErrorString(status) : "0 devices");
    std::exit(1);
  }
  CHECK_CUDA(cudaSetDevice(0));
  cudaDeviceProp properties;
  CHECK_CUDA(cudaGetDeviceProperties(&properties, 0));
  return properties.name;
}

__device__ float randomValue(uint64_t seed, int64_t index) {
  // splitmix64 of (seed, index), its top 24 bits scaled to [-1, 1).
  uint64_t z = seed * 0x9E3779B97F4A7C15ull + static_cast<uint64_t>(index);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  z ^= z >> 31;
  return static_cast<float>(z >> 40) * (2.0f / 16777216.0f) - 1.0f;
}

__global__ void fillFloat(float *data, int64_t count, uint64_t seed) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
       i < count; i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    data[i] = randomValue(seed, i);
}

__global__ void fillBf16(__nv_bfloat16 *data, int64_t count, uint64_t seed) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
       i < count; i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    data[i] = __float2bfloat16(randomValue(seed, i));
}

/// A device allocation of `count` elements of `elementBytes`, random-filled
/// (float32 or bf16) unless `fill` is false.
struct Buffer {
  void *data = nullptr;
  Buffer(int64_t count, size_t elementBytes, bool bf16, uint64_t seed,
         cudaStream_t stream, bool fill = true) {
    const size_t bytes = static_cast<size_t>(count) * elementBytes;
    CHECK_CUDA(cudaMalloc(&data, bytes > 0 ? bytes : 1));
    if (!fill || count == 0)
      return;
    const int64_t blocks64 = (count + 255) / 256;
    const int blocks = static_cast<int>(blocks64 < 65536 ? blocks64 : 65536);
    if (bf16)
      fillBf16<<<blocks, 256, 0, stream>>>(static_cast<__nv_bfloat16 *>(data),
                                           count, seed);
    else
      fillFloat<<<blocks, 256, 0, stream>>>(static_cast<float *>(data), count,
                                            seed);
    CHECK_CUDA(cudaGetLastError());
  }
  ~Buffer() { cudaFree(data); }
  Buffer(const Buffer &) = delete;
  Buffer &operator=(const Buffer &) = delete;
};

/// Exits 2 unless `elements` (a product of the arguments, in double so that
/// it cannot overflow) fits in memory that could exist.
void checkSize(const char *what, double elements) {
  if (elements > std::ldexp(1.0, 46))
    usageError("%s would hold %.3g elements: too large", what, elements);
}

struct Timing {
  long long iterations = 0;
  double seconds = 0; // mean per call
};

/// Warm-up calls, then timed batches of calls between two events, grown
/// until one batch takes at least 0.2 s.
template <typename Call> Timing timeCalls(cudaStream_t stream, Call call) {
  const double target = 0.2;
  for (int i = 0; i < 5; ++i)
    call();
  CHECK_CUDA(cudaStreamSynchronize(stream));
  cudaEvent_t start, stop;
  CHECK_CUDA(cudaEventCreate(&start));
  CHECK_CUDA(cudaEventCreate(&stop));
  Timing timing;
  long long iterations = 3;
  for (int round = 0; round < 8; ++round) {
    CHECK_CUDA(cudaEventRecord(start, stream));
    for (long long i = 0; i < iterations; ++i)
      call();
    CHECK_CUDA(cudaEventRecord(stop, stream));
    CHECK_CUDA(cudaEventSynchronize(stop));
    float milliseconds = 0;
    CHECK_CUDA(cudaEventElapsedTime(&milliseconds, start, stop));
    const double elapsed = milliseconds * 1e-3;
    timing.iterations = iterations;
    timing.seconds = elapsed / static_cast<double>(iterations);
    if (elapsed >= target)
      break;
    // Aim 25% past the target; at least double, at most 100x per round.
    double scale = elapsed > 0 ? 1.25 * target / elapsed : 100.0;
    scale = scale < 2.0 ? 2.0 : (scale > 100.0 ? 100.0 : scale);
    iterations = static_cast<long long>(std::ceil(iterations * scale));
  }
  CHECK_CUDA(cudaEventDestroy(start));
  CHECK_CUDA(cudaEventDestroy(stop));
  return timing;
}

int runGemm(int argc, char **argv) {
  if (argc < 5)
    usageError("gemm needs M N K");
  const int m = parseInt("M", argv[2]);
  const int n = parseInt("N", argv[3]);
  const int k = parseInt("K", argv[4]);
  const Options options = parseOptions(argc, argv, 5, {"--dtype", "--batch"},
                                       {"--transa", "--transb"});
  bool bf16 = false, transa = false, transb = false, batched = false;
  int batch = 1;
  for (const auto &[name, value] : options.values) {
    if (name == "--dtype") {
      if (value != "f32" && value != "bf16")
        usageError("--dtype must be f32 or bf16, got '%s'", value.c_str());
      bf16 = value == "bf16";
    } else {
      batch = parseInt("--batch", value.c_str());
      batched = true;
    }
  }
  for (const std::string &flag : options.flags)
    (flag == "--transa" ? transa : transb) = true;

  checkSize("A", double(m) * k * batch);
  checkSize("B", double(k) * n * batch);
  checkSize("C", double(m) * n * batch);

  const std::string device = selectDevice();
  cudaStream_t stream;
  CHECK_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  cublasHandle_t handle;
  CHECK_CUBLAS(cublasCreate(&handle));
  CHECK_CUBLAS(cublasSetStream(handle, stream));

  const int64_t sizeA = int64_t(m) * k, sizeB = int64_t(k) * n,
                sizeC = int64_t(m) * n;
  const size_t element = bf16 ? sizeof(__nv_bfloat16) : sizeof(float);
  Buffer a(sizeA * batch, element, bf16, 1, stream);
  Buffer b(sizeB * batch, element, bf16, 2, stream);
  Buffer c(sizeC * batch, element, bf16, 3, stream, false);

  // Row-major C = op(A) op(B) is column-major C^T = op(B)^T op(A)^T
  // (Library.cu): B first, each transposed only if stored transposed.
  const cudaDataType type = bf16 ? CUDA_R_16BF : CUDA_R_32F;
  const cublasOperation_t opA = transa ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t opB = transb ? CUBLAS_OP_T : CUBLAS_OP_N;
  const int lda = transa ? m : k, ldb = transb ? k : n, ldc = n;
  const float alpha = 1.0f, beta = 0.0f;
  auto call = [&] {
    if (batched)
      CHECK_CUBLAS(cublasGemmStridedBatchedEx(
          handle, opB, opA, n, m, k, &alpha, b.data, type, ldb, sizeB, a.data,
          type, lda, sizeA, &beta, c.data, type, ldc, sizeC, batch,
          CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
    else
      CHECK_CUBLAS(cublasGemmEx(handle, opB, opA, n, m, k, &alpha, b.data, type,
                                ldb, a.data, type, lda, &beta, c.data, type,
                                ldc, CUBLAS_COMPUTE_32F,
                                CUBLAS_GEMM_DEFAULT));
  };
  const Timing timing = timeCalls(stream, call);
  const double flops = 2.0 * m * n * double(k) * batch;

  std::printf("{\"op\":\"gemm\",\"m\":%d,\"n\":%d,\"k\":%d,\"dtype\":\"%s\","
              "\"batch\":%d,\"transa\":%s,\"transb\":%s,\"call\":\"%s\","
              "\"device\":%s,\"iterations\":%lld,\"seconds\":%.9g,"
              "\"tflops\":%.6g}\n",
              m, n, k, bf16 ? "bf16" : "f32", batch, transa ? "true" : "false",
              transb ? "true" : "false",
              batched ? "cublasGemmStridedBatchedEx" : "cublasGemmEx",
              jsonString(device).c_str(), timing.iterations, timing.seconds,
              flops / timing.seconds / 1e12);
  CHECK_CUBLAS(cublasDestroy(handle));
  CHECK_CUDA(cudaStreamDestroy(stream));
  return 0;
}

enum class Pass { Forward, BackwardData, BackwardFilter };

int runConv(int argc, char **argv) {
  if (argc < 9)
    usageError("conv needs N C H W K R S");
  const int n = parseInt("N", argv[2]), c = parseInt("C", argv[3]),
            h = parseInt("H", argv[4]), w = parseInt("W", argv[5]),
            k = parseInt("K", argv[6]), r = parseInt("R", argv[7]),
            s = parseInt("S", argv[8]);
  const Options options = parseOptions(
      argc, argv, 9,
      {"--stride", "--pad", "--dilation", "--groups", "--pass", "--math"}, {});
  int stride = 1, pad = 0, dilation = 1, groups = 1;
  bool fmaMath = false;
  Pass pass = Pass::Forward;
  std::string passName = "forward";
  for (const auto &[name, value] : options.values) {
    if (name == "--stride")
      stride = parseInt("--stride", value.c_str());
    else if (name == "--pad")
      pad = parseInt("--pad", value.c_str(), /*allowZero=*/true);
    else if (name == "--dilation")
      dilation = parseInt("--dilation", value.c_str());
    else if (name == "--groups")
      groups = parseInt("--groups", value.c_str());
    else if (name == "--math") {
      if (value != "default" && value != "fma")
        usageError("--math must be default or fma, got '%s'", value.c_str());
      fmaMath = value == "fma";
    } else if (value == "forward" || value == "backward-data" ||
             value == "backward-filter") {
      passName = value;
      pass = value == "forward"         ? Pass::Forward
             : value == "backward-data" ? Pass::BackwardData
                                        : Pass::BackwardFilter;
    } else {
      usageError("--pass must be forward, backward-data or backward-filter, "
                 "got '%s'",
                 value.c_str());
    }
  }
  if (c % groups != 0 || k % groups != 0)
    usageError("--groups %d must divide C (%d) and K (%d)", groups, c, k);
  const int64_t extentR = int64_t(r - 1) * dilation + 1,
                extentS = int64_t(s - 1) * dilation + 1;
  if (extentR > int64_t(h) + 2 * int64_t(pad) ||
      extentS > int64_t(w) + 2 * int64_t(pad))
    usageError("the %dx%d filter (dilation %d) does not fit the %dx%d input "
               "padded by %d",
               r, s, dilation, h, w, pad);
  checkSize("x", double(n) * c * h * w);
  checkSize("w", double(k) * (c / groups) * r * s);
  checkSize("y", double(n) * k *
                     double((int64_t(h) + 2 * pad - extentR) / stride + 1) *
                     double((int64_t(w) + 2 * pad - extentS) / stride + 1));

  const std::string device = selectDevice();
  cudaStream_t stream;
  CHECK_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  cudnnHandle_t handle;
  CHECK_CUDNN(cudnnCreate(&handle));
  CHECK_CUDNN(cudnnSetStream(handle, stream));

  cudnnTensorDescriptor_t xDesc, yDesc;
  cudnnFilterDescriptor_t wDesc;
  cudnnConvolutionDescriptor_t convDesc;
  CHECK_CUDNN(cudnnCreateTensorDescriptor(&xDesc));
  CHECK_CUDNN(cudnnCreateTensorDescriptor(&yDesc));
  CHECK_CUDNN(cudnnCreateFilterDescriptor(&wDesc));
  CHECK_CUDNN(cudnnCreateConvolutionDescriptor(&convDesc));
  CHECK_CUDNN(cudnnSetTensor4dDescriptor(xDesc, CUDNN_TENSOR_NCHW,
                                         CUDNN_DATA_FLOAT, n, c, h, w));
  CHECK_CUDNN(cudnnSetFilter4dDescriptor(
      wDesc, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW, k, c / groups, r, s));
  CHECK_CUDNN(cudnnSetConvolution2dDescriptor(
      convDesc, pad, pad, stride, stride, dilation, dilation,
      CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT));
  CHECK_CUDNN(cudnnSetConvolutionGroupCount(convDesc, groups));
  CHECK_CUDNN(cudnnSetConvolutionMathType(
      convDesc, fmaMath ? CUDNN_FMA_MATH : CUDNN_DEFAULT_MATH));
  int outN = 0, outK = 0, p = 0, q = 0;
  CHECK_CUDNN(cudnnGetConvolution2dForwardOutputDim(convDesc, xDesc, wDesc,
                                                    &outN, &outK, &p, &q));
  CHECK_CUDNN(cudnnSetTensor4dDescriptor(yDesc, CUDNN_TENSOR_NCHW,
                                         CUDNN_DATA_FLOAT, n, k, p, q));

  const int64_t sizeX = int64_t(n) * c * h * w,
                sizeW = int64_t(k) * (c / groups) * r * s,
                sizeY = int64_t(n) * k * p * q;
  // The pass's inputs random, its output left as allocated.
  Buffer x(sizeX, sizeof(float), false, 1, stream, pass != Pass::BackwardData);
  Buffer wt(sizeW, sizeof(float), false, 2, stream,
            pass != Pass::BackwardFilter);
  Buffer y(sizeY, sizeof(float), false, 3, stream, pass != Pass::Forward);

  // The first algorithm of the heuristic ranking that succeeds within 1 GiB.
  const size_t workspaceLimit = size_t(1) << 30;
  int algo = -1;
  size_t workspaceBytes = 0;
  {
    constexpr int maxAlgos = 16;
    int returned = 0;
    auto pick = [&](int index, cudnnStatus_t status, size_t memory) {
      if (algo < 0 && status == CUDNN_STATUS_SUCCESS &&
          memory <= workspaceLimit) {
        algo = index;
        workspaceBytes = memory;
      }
    };
    if (pass == Pass::Forward) {
      cudnnConvolutionFwdAlgoPerf_t perf[maxAlgos];
      CHECK_CUDNN(cudnnGetConvolutionForwardAlgorithm_v7(
          handle, xDesc, wDesc, convDesc, yDesc, maxAlgos, &returned, perf));
      for (int i = 0; i < returned; ++i) {
        size_t bytes = 0;
        if (perf[i].status == CUDNN_STATUS_SUCCESS &&
            cudnnGetConvolutionForwardWorkspaceSize(
                handle, xDesc, wDesc, convDesc, yDesc, perf[i].algo, &bytes) ==
                CUDNN_STATUS_SUCCESS)
          pick(perf[i].algo, perf[i].status, bytes);
      }
    } else if (pass == Pass::BackwardData) {
      cudnnConvolutionBwdDataAlgoPerf_t perf[maxAlgos];
      CHECK_CUDNN(cudnnGetConvolutionBackwardDataAlgorithm_v7(
          handle, wDesc, yDesc, convDesc, xDesc, maxAlgos, &returned, perf));
      for (int i = 0; i < returned; ++i) {
        size_t bytes = 0;
        if (perf[i].status == CUDNN_STATUS_SUCCESS &&
            cudnnGetConvolutionBackwardDataWorkspaceSize(
                handle, wDesc, yDesc, convDesc, xDesc, perf[i].algo, &bytes) ==
                CUDNN_STATUS_SUCCESS)
          pick(perf[i].algo, perf[i].status, bytes);
      }
    } else {
      cudnnConvolutionBwdFilterAlgoPerf_t perf[maxAlgos];
      CHECK_CUDNN(cudnnGetConvolutionBackwardFilterAlgorithm_v7(
          handle, xDesc, yDesc, convDesc, wDesc, maxAlgos, &returned, perf));
      for (int i = 0; i < returned; ++i) {
        size_t bytes = 0;
        if (perf[i].status == CUDNN_STATUS_SUCCESS &&
            cudnnGetConvolutionBackwardFilterWorkspaceSize(
                handle, xDesc, yDesc, convDesc, wDesc, perf[i].algo, &bytes) ==
                CUDNN_STATUS_SUCCESS)
          pick(perf[i].algo, perf[i].status, bytes);
      }
    }
    if (algo < 0) {
      std::fprintf(stderr,
                   "ppc-library-peak: no cuDNN %s algorithm of the %d ranked "
                   "succeeds within 1 GiB of workspace\n",
                   passName.c_str(), returned);
      return 1;
    }
  }
  void *workspace = nullptr;
  if (workspaceBytes > 0)
    CHECK_CUDA(cudaMalloc(&workspace, workspaceBytes));

  const float alpha = 1.0f, beta = 0.0f;
  auto call = [&] {
    switch (pass) {
    case Pass::Forward:
      CHECK_CUDNN(cudnnConvolutionForward(
          handle, &alpha, xDesc, x.data, wDesc, wt.data, convDesc,
          static_cast<cudnnConvolutionFwdAlgo_t>(algo), workspace,
          workspaceBytes, &beta, yDesc, y.data));
      break;
    case Pass::BackwardData:
      CHECK_CUDNN(cudnnConvolutionBackwardData(
          handle, &alpha, wDesc, wt.data, yDesc, y.data, convDesc,
          static_cast<cudnnConvolutionBwdDataAlgo_t>(algo), workspace,
          workspaceBytes, &beta, xDesc, x.data));
      break;
    case Pass::BackwardFilter:
      CHECK_CUDNN(cudnnConvolutionBackwardFilter(
          handle, &alpha, xDesc, x.data, yDesc, y.data, convDesc,
          static_cast<cudnnConvolutionBwdFilterAlgo_t>(algo), workspace,
          workspaceBytes, &beta, wDesc, wt.data));
      break;
    }
  };
  const Timing timing = timeCalls(stream, call);
  const double flops = 2.0 * n * double(k) * p * q * double(c / groups) * r * s;

  std::printf(
      "{\"op\":\"conv\",\"n\":%d,\"c\":%d,\"h\":%d,\"w\":%d,\"k\":%d,"
      "\"r\":%d,\"s\":%d,\"stride\":%d,\"pad\":%d,\"dilation\":%d,"
      "\"groups\":%d,\"pass\":\"%s\",\"p\":%d,\"q\":%d,\"dtype\":\"f32\","
      "\"math\":\"%s\",\"algo\":%d,\"workspace_bytes\":%zu,\"device\":%s,\"iterations\":%lld,"
      "\"seconds\":%.9g,\"tflops\":%.6g}\n",
      n, c, h, w, k, r, s, stride, pad, dilation, groups, passName.c_str(), p,
      q, fmaMath ? "fma" : "default", algo, workspaceBytes, jsonString(device).c_str(), timing.iterations,
      timing.seconds, flops / timing.seconds / 1e12);

  if (workspace)
    CHECK_CUDA(cudaFree(workspace));
  CHECK_CUDNN(cudnnDestroyConvolutionDescriptor(convDesc));
  CHECK_CUDNN(cudnnDestroyFilterDescriptor(wDesc));
  CHECK_CUDNN(cudnnDestroyTensorDescriptor(yDesc));
  CHECK_CUDNN(cudnnDestroyTensorDescriptor(xDesc));
  CHECK_CUDNN(cudnnDestroy(handle));
  CHECK_CUDA(cudaStreamDestroy(stream));
  return 0;
}

} // namespace

int main(int argc, char **argv) {
  if (argc >= 2 && (std::strcmp(argv[1], "--help") == 0 ||
                    std::strcmp(argv[1], "-h") == 0)) {
    std::fputs(usageText, stdout);
    return 0;
  }
  if (argc < 2)
    usageError("no operation (gemm or conv)");
  if (std::strcmp(argv[1], "gemm") == 0)
    return runGemm(argc, argv);
  if (std::strcmp(argv[1], "conv") == 0)
    return runConv(argc, argv);
  usageError("unknown operation '%s' (gemm or conv)", argv[1]);
}
