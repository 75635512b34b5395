//===- ppc-calibrate.cpp - measure a host as ppc-run uses it --------------===//
//
// Run under mpirun with the ranks a plan will use (one per device); writes a
// machine description (docs/machine-format.md) whose figures are what
// ppc-run's ranks achieve here, measured with ppc-run's own code:
//   - f32 GEMM rate of a rank while every rank runs GEMMs (OpenBLAS, as the
//     cpu kernels call it), fitted as t = (flops + h) / peak: the peak and
//     the half-efficiency FLOPs h of the cost model;
//   - streaming bandwidth: the runtime's optimizer update over buffers far
//     larger than caches, counted in bytes as the simulator counts them;
//   - point-to-point messages (ping-pong, one way) between two ranks of a
//     host and, with several hosts, of two hosts, each a box of a tensor
//     copied into a new message and out of a staging buffer as ppc-run
//     does: bandwidth by size, and the sender's part of it (the time its
//     rank spends packing and handing a message over);
//   - all-reduce over each host's ranks and, with several hosts, over all:
//     bus bandwidth by size; all-gather and reduce-scatter are printed
//     against half an all-reduce (what the simulator charges for them).
// Kernels are measured separately, per plan: `ppc-run --profile`.
//
//===----------------------------------------------------------------------===//

#include "ppc/Runtime/Communicator.h"
#include "ppc/Runtime/CpuBackend.h"
#include "ppc/Runtime/CpuTime.h"
#include "ppc/Runtime/KernelProfile.h"
#include "ppc/Runtime/Kernels.h"
#include "ppc/Runtime/Optimizer.h"
#include "ppc/Runtime/OutputFiles.h"
#include "ppc/Simulator/Machine.h"
#include "ppc/Simulator/Simulator.h"
#include "ppc/Support/Status.h"
#include "ppc/Version.h"

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <functional>
#include <iostream>
#include <numeric>
#include <sched.h>
#include <string>
#include <unistd.h>
#include <vector>

using namespace ppc;
using ppc::runtime::Communicator;
using ppc::runtime::threadCpuSeconds;

static const char kHelp[] =
    R"(usage: mpirun -np K ppc-calibrate -o MACHINE.json [options]
       ppc-calibrate -o MACHINE.json [options]           (one rank)

Measures this host (or these hosts) as K ppc-run ranks use it and writes a
machine description for ppc-opt (--ppc-attach-machine=machine=MACHINE.json):
per rank its f32 GEMM rate and half-efficiency size, the streaming bandwidth
of the optimizer update and memory; between ranks point-to-point messages
(the whole and the sender's part) and all-reduce by message size. Run it
with the K of the plans you will simulate; kernel times come from
`ppc-run --profile` of each plan.

options:
  -o FILE               the machine JSON to write (required)
  --name NAME           the machine's name (calibrated-K)
  --device-name NAME    the device model name, which a profile's entries
                        must name too (cpu-epyc-2core, ppc-run --profile's)
  --optimizer NAME      whose update rate becomes the memory bandwidth:
                        sgd, momentum or adam (adam); all are printed
  --max-size BYTES      largest message (268435456)
  --seconds S           time spent per measured size, at least (0.05)
  --threads N           OpenBLAS threads per rank (1, as ppc-run's default)
  --memory BYTES        memory per rank (the host's memory / its ranks)
  --cores N             cores per host the ranks share (the union of the
                        host's ranks' CPU affinity); fewer cores than ranks
                        per host makes them take turns (cores_per_node)
  --timeout SECONDS     abort when a rank waits this long (300)
  --quiet               no progress lines
  --version, --help
)";

namespace {

using Clock = std::chrono::steady_clock;

double secondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

struct Options {
  std::string out;
  std::string name;
  std::string deviceName = ppc::runtime::kCpuProfileDevice;
  std::string optimizer = "adam";
  double maxSize = 268435456;
  double seconds = 0.05;
  int threads = 1;
  double memory = 0;
  int64_t cores = 0;
  double timeout = 300;
  bool quiet = false;
  bool help = false;
  bool version = false;
  std::string threadsNote; ///< --threads was lowered to the cores
};

absl::StatusOr<double> parseNumber(const std::string &flag,
                                   const std::string &text) {
  double value = 0;
  if (absl::SimpleAtod(text, &value) && std::isfinite(value) && value > 0)
    return value;
  return absl::InvalidArgumentError(
      absl::StrCat(flag, ": expected a positive number, got '", text, "'"));
}

absl::StatusOr<Options> parseArgs(int argc, char **argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--help" || arg == "-h") {
      o.help = true;
      continue;
    }
    if (arg == "--version") {
      o.version = true;
      continue;
    }
    if (arg == "--quiet") {
      o.quiet = true;
      continue;
    }
    std::string value;
    bool inlineValue = false;
    if (size_t eq = arg.find('='); eq != std::string::npos && arg[1] == '-') {
      value = arg.substr(eq + 1);
      arg = arg.substr(0, eq);
      inlineValue = true;
    }
    static const char *const kValueFlags[] = {
        "-o",        "--name",    "--device-name", "--optimizer", "--max-size",
        "--seconds", "--threads", "--memory",      "--cores",     "--timeout"};
    if (std::none_of(std::begin(kValueFlags), std::end(kValueFlags),
                     [&](const char *flag) { return arg == flag; }))
      return absl::InvalidArgumentError("unknown option '" + arg +
                                        "' (see --help)");
    if (!inlineValue) {
      if (i + 1 >= argc)
        return absl::InvalidArgumentError(arg + ": needs a value");
      value = argv[++i];
    }
    if (arg == "-o") {
      o.out = value;
    } else if (arg == "--name") {
      o.name = value;
    } else if (arg == "--device-name") {
      o.deviceName = value;
    } else if (arg == "--optimizer") {
      if (!sim::findOptimizer(value))
        return absl::InvalidArgumentError("--optimizer: expected " +
                                          sim::optimizerNames() + ", got '" +
                                          value + "'");
      o.optimizer = value;
    } else {
      absl::StatusOr<double> number = parseNumber(arg, value);
      if (!number.ok())
        return number.status();
      if (arg == "--max-size")
        o.maxSize = std::max(4.0, *number);
      else if (arg == "--seconds")
        o.seconds = *number;
      else if (arg == "--threads")
        o.threads = ppc::runtime::kernelThreads(
            static_cast<int64_t>(std::min(*number, 1e9)), o.threadsNote);
      else if (arg == "--memory")
        o.memory = *number;
      else if (arg == "--cores")
        o.cores = static_cast<int64_t>(std::min(*number, 1e9));
      else if (arg == "--timeout")
        o.timeout = *number;
      if ((arg == "--memory" || arg == "--max-size") &&
          !(*number >= 1 && *number < 9e18))
        return absl::InvalidArgumentError(absl::StrCat(
            arg, ": expected a size from 1 byte to 9e18 bytes, got '", value,
            "'"));
    }
  }
  if (!o.help && !o.version && o.out.empty())
    return absl::InvalidArgumentError("-o MACHINE.json is required");
  return o;
}

/// Message sizes in bytes: one float times powers of 4. The simulator's
/// curves are linear in bytes between two sizes, so small messages (a
/// bias's gradient, an exchanged row) need points of their own.
std::vector<int64_t> messageSizes(double maxSize) {
  std::vector<int64_t> sizes;
  for (int64_t s = 4; s <= maxSize && s <= INT64_MAX / 4; s *= 4)
    sizes.push_back(s);
  return sizes;
}

/// Seconds per call of `run`, which every rank calls in step (a rank with
/// no part in it passes a no-op): two calls to warm up, then rank 0 picks a
/// repetition count from the second one that fills `budget` seconds; the
/// slowest rank's time per call.
absl::StatusOr<double> timeInStep(Communicator &comm, double budget,
                                  const std::function<absl::Status()> &run) {
  if (absl::Status s = run(); !s.ok())
    return s;
  Clock::time_point start = Clock::now();
  if (absl::Status s = run(); !s.ok())
    return s;
  double once = std::max(secondsSince(start), 1e-7);
  int64_t reps =
      static_cast<int64_t>(std::clamp(std::ceil(budget / once), 2.0, 100000.0));
  reps = comm.broadcastFromRoot(reps, [] { return "the repetition count"; });
  start = Clock::now();
  for (int64_t i = 0; i < reps; ++i)
    if (absl::Status s = run(); !s.ok())
      return s;
  double mine = secondsSince(start) / static_cast<double>(reps);
  return comm.maxOverRanks({mine}, [] { return "the measured times"; })[0];
}

/// Seconds per call of `run`, which each rank times by itself while all
/// run at once (sharing the host's memory as ppc-run's ranks do). With one
/// thread the time is CPU time, as `ppc-run --profile` measures kernels:
/// ranks that outnumber the cores take turns, which cores_per_node models.
double timeLocal(double budget, bool cpuTime,
                 const std::function<void()> &run) {
  run();
  int64_t reps = 0;
  Clock::time_point start = Clock::now();
  double cpu0 = threadCpuSeconds();
  do {
    run();
    ++reps;
  } while (reps < 2 || secondsSince(start) < budget);
  double total = cpuTime ? threadCpuSeconds() - cpu0 : secondsSince(start);
  return total / static_cast<double>(reps);
}

struct GemmFit {
  double peak = 0;                ///< FLOP/s
  double halfEfficiencyFlops = 0; ///< h in t = (flops + h) / peak
};

/// Square f32 GEMMs on every rank at once; t = (F + h) / peak fitted by
/// least squares on relative error (weights 1 / t^2).
GemmFit measureGemm(const Options &o, bool print) {
  std::vector<std::pair<double, double>> points; // (flops, seconds)
  for (int n : {16, 32, 64, 128, 256, 512}) {
    std::vector<float> a(n * n, 0.5f), b(n * n, 0.25f), c(n * n, 0.0f);
    double t = timeLocal(o.seconds, o.threads == 1, [&] {
      ppc::runtime::kernelGemm(n, n, n, a.data(), b.data(), c.data());
    });
    double flops = 2.0 * n * n * n;
    points.push_back({flops, t});
    if (print)
      std::printf("  sgemm %4d^3: %9.3f us  %7.2f GFLOP/s\n", n, t * 1e6,
                  flops / t / 1e9);
  }
  // Weighted least squares of t = a + b F.
  double sw = 0, sf = 0, st = 0, sff = 0, sft = 0;
  for (auto [f, t] : points) {
    double w = 1 / (t * t);
    sw += w, sf += w * f, st += w * t, sff += w * f * f, sft += w * f * t;
  }
  double slope = (sw * sft - sf * st) / (sw * sff - sf * sf);
  double intercept = (st - slope * sf) / sw;
  GemmFit fit;
  double best = 0;
  for (auto [f, t] : points)
    best = std::max(best, f / t);
  // A fit that does not look like a roofline (noise): the best rate seen
  // and the cost model's default curve.
  if (!(slope > 0) || 1 / slope < 0.5 * best || intercept < 0) {
    fit.peak = best;
    return fit;
  }
  fit.peak = 1 / slope;
  fit.halfEfficiencyFlops = intercept / slope;
  return fit;
}

/// Bytes the simulator counts per element for one f32 update
/// (CostModel::updateTime): read weight and gradient, write the weight,
/// read and write every state tensor.
double updateBytesPerElement(int stateTensors) {
  return 4.0 * (3 + 2 * stateTensors);
}

/// Bytes/s of each optimizer's update (sgd, momentum, adam) on every rank
/// at once, over buffers of 32 MiB each.
absl::StatusOr<std::vector<double>> measureUpdates(const Options &o,
                                                   bool print) {
  const int64_t n = int64_t(8) << 20;
  // The update ppc-run does: the cpu backend's, on its buffers.
  std::unique_ptr<runtime::Backend> backend = runtime::createCpuBackend();
  std::shared_ptr<runtime::DeviceBuffer> weight =
      backend->allocate(runtime::DType::F32, n);
  std::shared_ptr<runtime::DeviceBuffer> grad =
      backend->allocate(runtime::DType::F32, n);
  if (!weight || !grad)
    return absl::ResourceExhaustedError(
        "cannot allocate the optimizer benchmark's two buffers of " +
        std::to_string(n * 4 >> 20) + " MiB");
  backend->fill(*weight, 0.5);
  backend->fill(*grad, 0.01);
  std::vector<double> rates;
  for (const sim::OptimizerInfo &info : sim::kOptimizers) {
    ppc::planfile::Optimizer optimizer;
    optimizer.set_kind(info.kind == sim::Optimizer::SGD
                           ? ppc::planfile::Optimizer::SGD
                       : info.kind == sim::Optimizer::Momentum
                           ? ppc::planfile::Optimizer::MOMENTUM
                           : ppc::planfile::Optimizer::ADAM);
    optimizer.set_learning_rate(1e-6);
    optimizer.set_momentum(0.9);
    runtime::DeviceOptimizerState state;
    double t = timeLocal(4 * o.seconds, o.threads == 1, [&] {
      backend->update(optimizer, *weight, 0, *grad, n, state, 1.0);
    });
    double rate = updateBytesPerElement(info.stateTensors) * n / t;
    rates.push_back(rate);
    if (print)
      std::printf("  %-8s update: %6.2f ns per weight, %6.2f GB/s as the "
                  "simulator counts bytes\n",
                  info.name, t / n * 1e9, rate / 1e9);
  }
  return rates;
}

/// A message's time by size between two ranks: the whole of it, one way,
/// and the sender's part (rank `a`'s, as it measured it).
struct MessageCurves {
  BandwidthCurve oneWay;
  BandwidthCurve send;
};

/// One-way time by size between ranks `a` and `b` (ping-pong, each way a
/// ppc-run send and receive), and the time rank `a` spends in its sends
/// (packing a message and handing it to MPI: thread CPU time with one
/// thread, as kernels are profiled; the median of its sends); the other
/// ranks wait.
absl::StatusOr<MessageCurves> measurePingPong(Communicator &comm,
                                              const Options &o, int a, int b,
                                              const std::string &what) {
  MessageCurves curves;
  bool print = comm.rank() == 0 && !o.quiet;
  if (print)
    std::printf("point to point, %s (ranks %d and %d), one way, and the "
                "sender's part:\n",
                what.c_str(), a, b);
  const int me = comm.rank();
  const bool cpuTime = o.threads == 1;
  auto clock = [&] {
    return cpuTime
               ? threadCpuSeconds()
               : std::chrono::duration<double>(Clock::now().time_since_epoch())
                     .count();
  };
  for (int64_t bytes : messageSizes(o.maxSize)) {
    int64_t n = bytes / 4;
    // A message as ppc-run moves one: a box of a tensor (rows of up to 1024
    // of its 2048-float rows) that the sender copies into a new message
    // buffer and the receiver out of a staging buffer into its own tensor
    // (ProgramRunner::send and recv), so the curve prices both copies.
    const int64_t width = std::min<int64_t>(n, 1024);
    const std::vector<int64_t> shape = {n / width, 2 * width};
    const std::vector<int64_t> lo = {0, 0}, hi = {n / width, width};
    std::unique_ptr<runtime::Backend> host = runtime::createCpuBackend();
    std::shared_ptr<runtime::DeviceBuffer> tensor =
        host->allocate(runtime::DType::F32, 2 * n);
    std::shared_ptr<runtime::DeviceBuffer> staging =
        host->allocate(runtime::DType::F32, n);
    if (!tensor || !staging)
      return absl::ResourceExhaustedError("out of memory for the messages");
    const runtime::DeviceView whole{tensor.get(), 0, shape, {0, 0}, shape};
    auto where = [] { return std::string("a calibration message"); };
    std::vector<double> sends;
    auto exchange = [&](int from, int to) -> absl::Status {
      if (me == from) {
        const double packing = clock();
        std::shared_ptr<runtime::DeviceBuffer> message =
            host->allocate(runtime::DType::F32, n);
        if (!message)
          return absl::ResourceExhaustedError("out of memory for a message");
        host->copyBox(whole, {message.get(), 0, shape, lo, hi}, lo, hi, false);
        absl::Status sent = comm.send(std::move(message), n, to, 7);
        sends.push_back(clock() - packing);
        return sent;
      }
      if (me == to) {
        absl::Status s =
            comm.recv(staging->data(), runtime::DType::F32, n, from, 7, where);
        if (s.ok())
          host->copyBox({staging.get(), 0, shape, lo, hi}, whole, lo, hi,
                        false);
        return s;
      }
      return absl::OkStatus();
    };
    absl::StatusOr<double> roundTrip = timeInStep(comm, o.seconds, [&] {
      absl::Status s = exchange(a, b);
      if (s.ok())
        s = exchange(b, a);
      if (s.ok())
        s = comm.completeSends("a calibration message");
      return s;
    });
    if (!roundTrip.ok())
      return roundTrip.status();
    double oneWay = *roundTrip / 2;
    // The first sends warm the buffers up; the median stands for the rest.
    std::nth_element(sends.begin(), sends.begin() + sends.size() / 2,
                     sends.end());
    double send = sends.empty() ? oneWay : sends[sends.size() / 2];
    send = std::clamp(send, 1e-9, oneWay);
    curves.oneWay.points.push_back(
        {static_cast<double>(bytes), bytes / oneWay});
    curves.send.points.push_back({static_cast<double>(bytes), bytes / send});
    if (print)
      std::printf("  %10lld B: %11.2f us  %8.3f GB/s   sender %9.2f us\n",
                  static_cast<long long>(bytes), oneWay * 1e6,
                  bytes / oneWay / 1e9, send * 1e6);
  }
  return curves;
}

/// All-reduce bus bandwidth by size over `group` (each rank passes the
/// group it belongs to; groups of one rank do nothing), with all-gather and
/// reduce-scatter against half an all-reduce. Every rank takes part.
absl::StatusOr<BandwidthCurve> measureCollectives(Communicator &comm,
                                                  const Options &o,
                                                  const std::vector<int> &group,
                                                  const std::string &what) {
  BandwidthCurve curve;
  const int k = static_cast<int>(group.size());
  bool print = comm.rank() == 0 && !o.quiet;
  if (print)
    std::printf("collectives, %s (%d ranks):\n%14s %12s %10s %14s %14s\n",
                what.c_str(), k, "bytes", "all-reduce", "busbw GB/s",
                "all-gather/half", "red-scat/half");
  auto where = [] { return std::string("a calibration collective"); };
  for (int64_t bytes : messageSizes(o.maxSize)) {
    // Whole multiples of the group, so that every member gets a block.
    int64_t n = std::max<int64_t>(bytes / 4 / k, 1) * k;
    if (!curve.points.empty() && 4.0 * n <= curve.points.back().first)
      continue; // rounds to the size measured last

    std::vector<float> data(n, 1.0f), out(n, 0.0f);
    std::vector<int64_t> counts(k, n / k);
    bool member = k > 1;
    auto timed = [&](auto &&call) {
      return timeInStep(comm, o.seconds, [&]() -> absl::Status {
        return member ? call() : absl::OkStatus();
      });
    };
    absl::StatusOr<double> allReduce = timed([&] {
      return comm.allReduce(data.data(), runtime::DType::F32, n, group, false,
                            where);
    });
    if (!allReduce.ok())
      return allReduce.status();
    absl::StatusOr<double> allGather = timed([&] {
      return comm.allGather(data.data(), out.data(), runtime::DType::F32,
                            counts, group, where);
    });
    if (!allGather.ok())
      return allGather.status();
    absl::StatusOr<double> reduceScatter = timed([&] {
      return comm.reduceScatter(data.data(), out.data(), runtime::DType::F32,
                                counts, group, false, where);
    });
    if (!reduceScatter.ok())
      return reduceScatter.status();
    double size = 4.0 * n;
    double busbw = 2.0 * (k - 1) / k * size / *allReduce;
    curve.points.push_back({size, busbw});
    if (print)
      std::printf("%14.0f %9.2f us %10.3f %14.2f %14.2f\n", size,
                  *allReduce * 1e6, busbw / 1e9, *allGather / (*allReduce / 2),
                  *reduceScatter / (*allReduce / 2));
  }
  return curve;
}

/// Bytes of memory of this host.
double hostMemory() {
  return static_cast<double>(sysconf(_SC_PHYS_PAGES)) *
         static_cast<double>(sysconf(_SC_PAGESIZE));
}

/// Every rank of the job, in order: the world as a group.
std::vector<int> allRanks(const Communicator &comm) {
  std::vector<int> ranks(comm.size());
  std::iota(ranks.begin(), ranks.end(), 0);
  return ranks;
}

/// The CPUs this rank may run on, as 64-bit words of a mask.
std::vector<int64_t> affinityWords() {
  cpu_set_t set;
  CPU_ZERO(&set);
  std::vector<int64_t> words(CPU_SETSIZE / 64, 0);
  if (sched_getaffinity(0, sizeof(set), &set) != 0) {
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    for (long c = 0; c < n && c < CPU_SETSIZE; ++c)
      words[c / 64] |= int64_t(1) << (c % 64);
    return words;
  }
  for (int c = 0; c < CPU_SETSIZE; ++c)
    if (CPU_ISSET(c, &set))
      words[c / 64] |= int64_t(1) << (c % 64);
  return words;
}

/// Cores the ranks of host 0 may run on together: the union of their
/// affinity masks (every CPU when unbound, the bound cores when bound).
int64_t coresOfHost(Communicator &comm, int perHost) {
  std::vector<int> world = allRanks(comm);
  std::vector<int64_t> mine = affinityWords();
  std::vector<int64_t> all =
      comm.allGatherInts(mine, world, [] { return "the CPU masks"; });
  std::vector<int64_t> hostMask(mine.size(), 0);
  for (int r = 0; r < perHost; ++r)
    for (size_t w = 0; w < mine.size(); ++w)
      hostMask[w] |= all[r * mine.size() + w];
  int64_t cores = 0;
  for (int64_t w : hostMask)
    cores += __builtin_popcountll(static_cast<unsigned long long>(w));
  return cores;
}

/// Which host each rank runs on (ranks of a host must be contiguous, as
/// the cluster form numbers devices node by node).
absl::StatusOr<std::vector<int>> hostsOfRanks(Communicator &comm) {
  char name[256] = {0};
  gethostname(name, sizeof(name) - 1);
  int64_t hash = static_cast<int64_t>(std::hash<std::string>{}(name) >> 1);
  std::vector<int> world = allRanks(comm);
  if (absl::Status s = comm.createGroups({world}); !s.ok())
    return s;
  std::vector<int64_t> hashes =
      comm.allGatherInts({hash}, world, [] { return "the host names"; });
  std::vector<int> host(comm.size(), 0);
  for (int r = 1; r < comm.size(); ++r) {
    host[r] = host[r - 1] + (hashes[r] != hashes[r - 1]);
    for (int q = 0; q < r; ++q)
      if (hashes[q] == hashes[r] && host[q] != host[r])
        return absl::FailedPreconditionError(absl::StrFormat(
            "ranks %d and %d run on one host but rank %d between them does "
            "not: place each host's ranks contiguously (mpirun --map-by "
            "slot)",
            q, r, r - 1));
  }
  return host;
}

absl::Status run(Communicator &comm, const Options &o) {
  const bool print = comm.rank() == 0 && !o.quiet;
  const int k = comm.size();
  ppc::runtime::setKernelThreads(o.threads);
  absl::StatusOr<std::vector<int>> hostOf = hostsOfRanks(comm);
  if (!hostOf.ok())
    return hostOf.status();
  const int hosts = hostOf->back() + 1;
  if (k % hosts != 0)
    return absl::FailedPreconditionError(absl::StrFormat(
        "%d ranks on %d hosts: every host needs the same number of ranks", k,
        hosts));
  const int perHost = k / hosts;
  if (comm.rank() == 0 && !o.threadsNote.empty() && !o.quiet)
    std::printf("ppc-calibrate: %s\n", o.threadsNote.c_str());
  // What would fail at the end, checked before minutes of measuring: the
  // output, the memory the largest message needs.
  if (comm.rank() == 0)
    if (absl::Status problem = ppc::runtime::checkOutputFile(o.out);
        !problem.ok())
      return ppc::annotate(problem, "-o");
  // A message of the largest size is a tensor of twice it and a staging
  // buffer (ProgramRunner's send and recv); a collective's input and
  // output, and MPI's own copy: about 4 of it per rank at once.
  const double perRank = hostMemory() / perHost;
  constexpr double kBuffersPerMessage = 4;
  if (comm.rank() == 0 && kBuffersPerMessage * o.maxSize > perRank)
    return absl::InvalidArgumentError(absl::StrFormat(
        "--max-size %.0f: each rank holds about %.0f buffers of the largest "
        "message at once, %.3g bytes, more than its share of the host's "
        "memory (%.3g bytes, %d rank%s per host): take at most %.0f",
        o.maxSize, kBuffersPerMessage, kBuffersPerMessage * o.maxSize, perRank,
        perHost, perHost == 1 ? "" : "s", perRank / kBuffersPerMessage));
  const int64_t cores = o.cores > 0 ? o.cores : coresOfHost(comm, perHost);
  for (int r = 0; r < k; ++r)
    if ((*hostOf)[r] != r / perHost)
      return absl::FailedPreconditionError(absl::StrFormat(
          "rank %d is not on host %d: every host needs the same number of "
          "ranks",
          r, r / perHost));

  // Defaults where nothing can be measured: the cpu preset's.
  const Machine preset = *lookupPreset("cpu");
  ClusterSpec spec;
  spec.nodes = hosts;
  spec.devicesPerNode = perHost;
  spec.nicsPerNode = 1;
  // More ranks than cores: they take turns (the simulator's core pool).
  spec.coresPerNode = cores < perHost ? cores : 0;
  spec.device = preset.getSpec(0);
  spec.device.name = o.deviceName;
  spec.intra = preset.cluster->intra;
  spec.inter = spec.intra;
  spec.inter.kind = LinkKind::Ethernet;

  if (print)
    std::printf("ppc-calibrate: %d ranks on %d host%s (%lld cores each), %d "
                "thread%s per rank\n"
                "compute, every rank at once (rank 0's times):\n",
                k, hosts, hosts > 1 ? "s" : "", static_cast<long long>(cores),
                o.threads, o.threads > 1 ? "s" : "");
  GemmFit gemm = measureGemm(o, print);
  PPC_ASSIGN_OR_RETURN(std::vector<double> updates, measureUpdates(o, print));
  // Rank 0's figures describe every rank (one device spec).
  int64_t peak = comm.broadcastFromRoot(static_cast<int64_t>(gemm.peak),
                                        [] { return "the GEMM rate"; });
  // ppc-run computes in f32 only: no other rate is measured.
  spec.device.peakFlops.fill(0);
  spec.device.setPeakFlops(DType::F32, static_cast<double>(peak));
  spec.device.halfEfficiencyFlops = gemm.halfEfficiencyFlops;
  // The rates are in kOptimizers' order.
  int which = static_cast<int>(sim::findOptimizer(o.optimizer) -
                               std::begin(sim::kOptimizers));
  spec.device.memoryBandwidth = updates[which];
  spec.device.memoryBytes =
      static_cast<int64_t>(o.memory > 0 ? o.memory : hostMemory() / perHost);
  if (print)
    std::printf("  fit: %.2f GFLOP/s peak, half of it at %.3g FLOPs; "
                "memory bandwidth %.2f GB/s (%s update)\n",
                peak / 1e9, gemm.halfEfficiencyFlops,
                spec.device.memoryBandwidth / 1e9, o.optimizer.c_str());

  std::vector<std::vector<int>> groups;
  std::vector<int> world = allRanks(comm), mine;
  for (int h = 0; h < hosts; ++h) {
    std::vector<int> group(world.begin() + h * perHost,
                           world.begin() + (h + 1) * perHost);
    if ((*hostOf)[comm.rank()] == h)
      mine = group;
    groups.push_back(group);
  }
  groups.push_back(world);
  if (absl::Status s = comm.createGroups(groups); !s.ok())
    return s;

  // A link's figures: messages between ranks `a` and `b` (latency from the
  // smallest, bandwidth the best), all-reduce over `group`.
  auto measureLink = [&](LinkSpec &link, int a, int b,
                         const std::vector<int> &group, const char *between,
                         const char *over) -> absl::Status {
    absl::StatusOr<MessageCurves> p2p = measurePingPong(comm, o, a, b, between);
    if (!p2p.ok())
      return p2p.status();
    link.bySize = p2p->oneWay;
    link.sendBySize = p2p->send;
    link.latency =
        link.bySize.points.front().first / link.bySize.points.front().second;
    link.bandwidth = 0;
    for (auto [bytes, rate] : link.bySize.points)
      link.bandwidth = std::max(link.bandwidth, rate);
    absl::StatusOr<BandwidthCurve> coll =
        measureCollectives(comm, o, group, over);
    if (!coll.ok())
      return coll.status();
    link.collectiveBySize = *coll;
    return absl::OkStatus();
  };
  if (perHost > 1)
    if (absl::Status s = measureLink(spec.intra, 0, 1, mine, "within a host",
                                     "within each host");
        !s.ok())
      return s;
  // Across hosts the curve is per rail (docs/machine-format.md): one NIC
  // per host here, so the whole group's bus bandwidth.
  if (hosts > 1) {
    if (absl::Status s = measureLink(spec.inter, 0, perHost, world,
                                     "between hosts", "across hosts");
        !s.ok())
      return s;
  } else {
    spec.inter = spec.intra;
  }

  if (comm.rank() != 0)
    return absl::OkStatus();
  if (absl::Status problem = spec.validate(); !problem.ok())
    return absl::InternalError("the measured machine is invalid: " +
                               ppc::messageOf(problem));
  std::string name = o.name.empty() ? absl::StrCat("calibrated-", k) : o.name;
  std::ofstream out(o.out);
  out << writeMachineJson(Machine::fromCluster(spec, name)) << "\n";
  out.close();
  if (!out)
    return absl::UnavailableError("cannot write " + o.out);
  if (!o.quiet)
    std::printf("wrote %s (%s: %d x %d devices)\n", o.out.c_str(), name.c_str(),
                hosts, perHost);
  return absl::OkStatus();
}

} // namespace

int main(int argc, char **argv) {
  Communicator::initialize(argc, argv);
  absl::StatusOr<Options> options = parseArgs(argc, argv);
  std::unique_ptr<Communicator> comm =
      Communicator::world(options.ok() ? options->timeout : 300);
  // Every rank parsed the same command line: rank 0 speaks for all.
  if (!options.ok() || options->help || options->version) {
    if (comm->rank() == 0) {
      if (!options.ok())
        std::cerr << "ppc-calibrate: " << options.status().message() << "\n";
      else if (options->help)
        std::cout << kHelp;
      else
        std::cout << "ppc-calibrate " << ppc::kVersion << "\n";
    }
    comm.reset();
    Communicator::finalize();
    return options.ok() ? 0 : 2;
  }
  absl::Status status = run(*comm, *options);
  if (!status.ok()) {
    std::cerr << "ppc-calibrate: rank " << comm->rank() << ": "
              << status.message() << "\n";
    comm->abort(1);
  }
  comm.reset(); // its communicators are freed before MPI ends
  Communicator::finalize();
  return 0;
}
