//===- CostModel.h - time of one kernel on one device -----------*- C++ -*-===//
//
// The default is an analytical roofline per device kind: peak FLOP/s for the
// op's dtype, memory bandwidth, an efficiency curve that makes small kernels
// slower than their roofline, and a fixed launch overhead. A measured
// profile (JSON, docs/profile-format.md, written by ppc-profile on a real
// GPU) overrides it for the kernels it has measured.
//
//===----------------------------------------------------------------------===//

#ifndef PPC_SIMULATOR_COSTMODEL_H
#define PPC_SIMULATOR_COSTMODEL_H

#include "ppc/Simulator/Graph.h"
#include "ppc/Simulator/Machine.h"

#include <atomic>
#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

namespace ppc::sim {

enum class Phase : uint8_t { Forward, Backward };

/// What one partition of an op computes: its iteration ranges, and the
/// shapes of its operand and result slices.
struct KernelShape {
  std::vector<Range> iter;
  std::vector<std::vector<int64_t>> operandShapes;
  std::vector<std::vector<int64_t>> resultShapes;
};

/// The slices partition `index` of `op` reads and writes under `degrees`.
KernelShape kernelShape(const Op &op, const std::vector<int64_t> &degrees,
                        int64_t index);
/// The same from the boxes geometry::computeLayout gave instance `instance`
/// (its iteration box, and its slice of each operand and result, indexed
/// [operand][instance] and [result][instance]), without slicing again.
KernelShape
kernelShape(const std::vector<Range> &iter,
            const std::vector<std::vector<std::vector<Range>>> &operandSlices,
            const std::vector<std::vector<std::vector<Range>>> &resultSlices,
            size_t instance);

/// A statistics counter that may be bumped from several threads and is
/// copied with its owner.
class RelaxedCounter {
public:
  RelaxedCounter() = default;
  RelaxedCounter(const RelaxedCounter &other) : value(other.load()) {}
  RelaxedCounter &operator=(const RelaxedCounter &other) {
    value.store(other.load(), std::memory_order_relaxed);
    return *this;
  }
  RelaxedCounter &operator=(int64_t v) {
    value.store(v, std::memory_order_relaxed);
    return *this;
  }
  void operator++() { value.fetch_add(1, std::memory_order_relaxed); }
  int64_t load() const { return value.load(std::memory_order_relaxed); }
  operator int64_t() const { return load(); }

private:
  std::atomic<int64_t> value{0};
};

class CostModel {
public:
  virtual ~CostModel() = default;
  /// Seconds one partition's kernel of `op` takes in `phase` on `device`.
  virtual double kernelTime(const Op &op, const KernelShape &shape, Phase phase,
                            const DeviceSpec &device) const = 0;
  /// Seconds an optimizer step over `elements` weights takes on `device`
  /// (`stateTensors` optimizer states per weight: 0 SGD, 1 momentum, 2 Adam;
  /// 16-bit weights update an fp32 master copy and fp32 states, as
  /// trainingStateBytes counts them).
  virtual double updateTime(int64_t elements, int64_t elemBytes,
                            int stateTensors, const DeviceSpec &device) const;
};

/// Roofline: max(flops / (peak * efficiency), bytes / bandwidth) + launch.
/// The efficiency of a kernel doing `flops` is flops / (flops + halfFlops)
/// (half the peak at halfFlops), bounded below by minEfficiency: small
/// kernels do not fill the device.
class RooflineCostModel : public CostModel {
public:
  /// FLOPs at which a kernel reaches half of peak. 2e8 fits cuBLAS GEMMs on
  /// recent GPUs roughly (a 512^3 GEMM runs near half peak on an H100).
  double halfFlops = 2e8;
  double minEfficiency = 0.02;
  double kernelTime(const Op &op, const KernelShape &shape, Phase phase,
                    const DeviceSpec &device) const override;
};

/// A measured profile: times keyed by (op kind, operand shapes, dtype,
/// device name, phase). Kernels it lacks fall back to the roofline model.
class ProfiledCostModel : public CostModel {
public:
  struct Key {
    std::string kind;
    std::vector<std::vector<int64_t>> operandShapes;
    DType dtype;
    std::string device;
    Phase phase;
    bool operator<(const Key &o) const {
      return std::tie(kind, operandShapes, dtype, device, phase) <
             std::tie(o.kind, o.operandShapes, o.dtype, o.device, o.phase);
    }
  };

  void add(const Key &key, double seconds) { times[key] = seconds; }
  size_t size() const { return times.size(); }
  /// Parses the JSON profile format; an error is InvalidArgument
  /// "<fileName>: <json path>: <problem>".
  static absl::StatusOr<ProfiledCostModel> parse(const std::string &text,
                                                 const std::string &fileName);
  /// Reads and parses a profile file (NotFound when it cannot be opened).
  static absl::StatusOr<ProfiledCostModel> readFile(const std::string &path);
  std::string toJson() const;

  double kernelTime(const Op &op, const KernelShape &shape, Phase phase,
                    const DeviceSpec &device) const override;
  /// How many kernelTime calls found a measurement, and how many fell back.
  /// Atomic: searches call kernelTime from several threads.
  mutable RelaxedCounter hits, misses;

  /// Prices the kernels the profile lacks at the fallback's time times how
  /// far the profile's own kernels are from it, so that a search does not
  /// favour the unmeasured kernels wherever the roofline is optimistic:
  /// per op kind the median of measured / fallback time over the kernels
  /// of `graph` in `kernels` (op index and slices) that the profile holds
  /// for `device`, forward and backward; a kind with fewer than 3 of them
  /// takes the median over every kind; with fewer than 3 in all, the
  /// fallback stays as it is.
  /// Returns how many (kernel, phase) pairs had a measurement.
  size_t
  calibrateMisses(const Graph &graph,
                  const std::vector<std::pair<size_t, KernelShape>> &kernels,
                  const DeviceSpec &device);
  /// The factor the fallback's time is scaled by for a kernel of `kind`.
  double missScale(const std::string &kind) const;

  RooflineCostModel fallback;

private:
  std::map<Key, double> times;
  std::map<std::string, double> missScaleByKind;
  double defaultMissScale = 1;
};

} // namespace ppc::sim

#endif // PPC_SIMULATOR_COSTMODEL_H
