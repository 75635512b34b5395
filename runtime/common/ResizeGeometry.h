//===- ResizeGeometry.h - a ppc.resize partition ----------------*- C++ -*-===//
//
// Private to the backends (runtime/cpu, runtime/cuda), shared by their
// ppc.resize kernels: the op's attributes read and checked once, with the
// same errors on every backend, and the per-position arithmetic (PPC_HD)
// both backends' loops use. A result element (n, c, oh, ow) is
//   sum_i sum_j rows.weight[i] * cols.weight[j]
//       * input[n, c, rows.index[i], cols.index[j]]
// over the taps resizeTaps gives for oh along H and for ow along W (1 for
// nearest, 2 for linear, 4 for cubic; indices clamped to the input), or
// the extrapolation value where tf_crop_and_resize maps outside the input.
// The backward adds each result gradient into the same taps. A partition
// holds whole input planes (the op's iteration space reads H and W whole),
// any samples and channels.
//
//===----------------------------------------------------------------------===//

#ifndef PPC_RUNTIME_COMMON_RESIZEGEOMETRY_H
#define PPC_RUNTIME_COMMON_RESIZEGEOMETRY_H

#include "KernelChecks.h"

#include "ppc/Runtime/HostDevice.h"
#include "ppc/Runtime/Kernels.h"

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

namespace ppc::runtime {

enum class ResizeMode : int32_t { Nearest, Linear, Cubic };
enum class ResizeCoordinates : int32_t {
  HalfPixel,
  PytorchHalfPixel,
  AlignCorners,
  Asymmetric,
  TfHalfPixelForNn,
  TfCropAndResize
};
enum class ResizeRounding : int32_t {
  RoundPreferFloor,
  RoundPreferCeil,
  Floor,
  Ceil
};

/// One spatial axis: input and result lengths, the scale and the roi.
struct ResizeAxis {
  int64_t in, out;
  double scale;
  double roiLo, roiHi;
};

/// The taps of one result position along one axis.
struct ResizeTaps {
  int64_t index[4];
  float weight[4];
  int32_t count;
  bool outside; ///< tf_crop_and_resize left the input: extrapolate.
};

struct ResizeGeometry {
  ResizeMode mode;
  ResizeCoordinates coordinates;
  ResizeRounding rounding;
  double cubicA;
  bool excludeOutside;
  float extrapolation;
  ResizeAxis rows, cols;
};

/// The input coordinate result position `x` maps to along `axis`; sets
/// `outside` where tf_crop_and_resize leaves the input.
PPC_HD inline double resizeSource(const ResizeGeometry &g,
                                  const ResizeAxis &axis, int64_t x,
                                  bool &outside) {
  const double s = axis.scale, in = static_cast<double>(axis.in);
  const double xf = static_cast<double>(x);
  outside = false;
  switch (g.coordinates) {
  case ResizeCoordinates::HalfPixel:
    return (xf + 0.5) / s - 0.5;
  case ResizeCoordinates::PytorchHalfPixel:
    return axis.out > 1 ? (xf + 0.5) / s - 0.5 : 0.0;
  case ResizeCoordinates::AlignCorners: {
    // ONNX's reference divides by the scaled length, not the rounded one.
    const double length = s * in;
    return axis.out > 1 ? xf * (in - 1) / (length - 1) : 0.0;
  }
  case ResizeCoordinates::Asymmetric:
    return xf / s;
  case ResizeCoordinates::TfHalfPixelForNn:
    return (xf + 0.5) / s;
  case ResizeCoordinates::TfCropAndResize: {
    const double span = (axis.roiHi - axis.roiLo) * (in - 1);
    const double source =
        axis.roiLo * (in - 1) +
        (axis.out > 1 ? xf * span / static_cast<double>(axis.out - 1)
                      : 0.5 * span);
    outside = source < 0 || source > in - 1;
    return source;
  }
  }
  return 0.0;
}

PPC_HD inline int64_t clampIndex(int64_t i, int64_t size) {
  return i < 0 ? 0 : (i >= size ? size - 1 : i);
}

/// The taps of result position `x` along `axis`.
PPC_HD inline ResizeTaps resizeTaps(const ResizeGeometry &g,
                                    const ResizeAxis &axis, int64_t x) {
  ResizeTaps t{};
  const double source = resizeSource(g, axis, x, t.outside);
  const double lower = floor(source);
  const double ratio = source - lower;
  const int64_t base = static_cast<int64_t>(lower);
  if (g.mode == ResizeMode::Nearest) {
    bool up = false;
    switch (g.rounding) {
    case ResizeRounding::RoundPreferFloor:
      up = ratio > 0.5;
      break;
    case ResizeRounding::RoundPreferCeil:
      up = ratio >= 0.5;
      break;
    case ResizeRounding::Floor:
      up = false;
      break;
    case ResizeRounding::Ceil:
      up = ratio > 0;
      break;
    }
    t.count = 1;
    t.index[0] = clampIndex(base + (up ? 1 : 0), axis.in);
    t.weight[0] = 1.0f;
    return t;
  }
  if (g.mode == ResizeMode::Linear) {
    t.count = 2;
    t.index[0] = clampIndex(base, axis.in);
    t.index[1] = clampIndex(base + 1, axis.in);
    t.weight[0] = static_cast<float>(1 - ratio);
    t.weight[1] = static_cast<float>(ratio);
    return t;
  }
  // Keys' cubic convolution kernel at distances 1 + r, r, 1 - r, 2 - r.
  const double a = g.cubicA;
  const double r = ratio, q = 1 - ratio;
  double w[4] = {((a * (r + 1) - 5 * a) * (r + 1) + 8 * a) * (r + 1) - 4 * a,
                 ((a + 2) * r - (a + 3)) * r * r + 1,
                 ((a + 2) * q - (a + 3)) * q * q + 1,
                 ((a * (q + 1) - 5 * a) * (q + 1) + 8 * a) * (q + 1) - 4 * a};
  double sum = 0;
  for (int k = 0; k < 4; ++k) {
    const int64_t i = base - 1 + k;
    if (g.excludeOutside && (i < 0 || i >= axis.in))
      w[k] = 0;
    sum += w[k];
  }
  t.count = 4;
  for (int k = 0; k < 4; ++k) {
    t.index[k] = clampIndex(base - 1 + k, axis.in);
    t.weight[k] = static_cast<float>(g.excludeOutside ? w[k] / sum : w[k]);
  }
  return t;
}

/// The result element whose taps are `rows` and `cols`, from the input
/// plane `plane` (row-major, `width` columns): the extrapolation value
/// where tf_crop_and_resize left the input.
PPC_HD inline float resizeValue(const ResizeGeometry &g, const ResizeTaps &rows,
                                const ResizeTaps &cols, const float *plane,
                                int64_t width) {
  if (rows.outside || cols.outside)
    return g.extrapolation;
  float value = 0.0f;
  for (int32_t i = 0; i < rows.count; ++i) {
    const float *line = plane + rows.index[i] * width;
    float sum = 0.0f;
    for (int32_t j = 0; j < cols.count; ++j)
      sum += cols.weight[j] * line[cols.index[j]];
    value += rows.weight[i] * sum;
  }
  return value;
}

/// The backward of resizeValue: add(target, value) for each tap of the
/// input gradient plane `plane` (nothing for an extrapolated element,
/// a constant).
template <typename Add>
PPC_HD void resizeScatter(const ResizeTaps &rows, const ResizeTaps &cols,
                          float dy, float *plane, int64_t width, Add &&add) {
  if (rows.outside || cols.outside)
    return;
  for (int32_t i = 0; i < rows.count; ++i)
    for (int32_t j = 0; j < cols.count; ++j)
      add(plane + rows.index[i] * width + cols.index[j],
          rows.weight[i] * cols.weight[j] * dy);
}

/// A keyword attribute as its enum value; `error` names the attribute and
/// what it may be.
template <typename Enum>
Enum resizeKeyword(const OpDesc &op, const std::string &name,
                   const std::string &fallback,
                   const std::vector<std::string> &keywords,
                   absl::Status &error) {
  const std::string value = op.getString(name, fallback);
  for (size_t i = 0; i < keywords.size(); ++i)
    if (keywords[i] == value)
      return static_cast<Enum>(i);
  std::string list;
  for (const std::string &k : keywords)
    list += (list.empty() ? "'" : ", '") + k + "'";
  if (error.ok())
    error = absl::InvalidArgumentError(op.kind + ": unknown " + name + " '" +
                                       value + "'; expected one of " + list);
  return static_cast<Enum>(0);
}

/// Reads the op's attributes and checks the views: rank 4, whole input
/// planes, the input box holding the result's samples and channels.
template <typename View>
absl::Status checkGeometry(const OpDesc &op, const std::vector<View> &inputs,
                           const TensorView &output, ResizeGeometry &g) {
  if (inputs.size() != 1)
    return absl::InvalidArgumentError(op.kind + ": expects 1 operand");
  const TensorView &input = inputs[0];
  if (input.rank() != 4 || output.rank() != 4)
    return absl::InvalidArgumentError(op.kind +
                                      ": input and result must have rank 4");
  absl::Status error;
  g.mode = resizeKeyword<ResizeMode>(op, "mode", "nearest",
                                     {"nearest", "linear", "cubic"}, error);
  g.coordinates = resizeKeyword<ResizeCoordinates>(
      op, "coordinate_transformation_mode", "half_pixel",
      {"half_pixel", "pytorch_half_pixel", "align_corners", "asymmetric",
       "tf_half_pixel_for_nn", "tf_crop_and_resize"},
      error);
  g.rounding = resizeKeyword<ResizeRounding>(
      op, "nearest_mode", "round_prefer_floor",
      {"round_prefer_floor", "round_prefer_ceil", "floor", "ceil"}, error);
  if (!error.ok())
    return error;
  g.cubicA = op.getFloat("cubic_coeff_a", -0.75);
  g.excludeOutside = op.getInt("exclude_outside", 0) != 0;
  g.extrapolation = static_cast<float>(op.getFloat("extrapolation_value", 0));
  auto scales = op.attributes.find("scales");
  const std::vector<double> *s =
      scales == op.attributes.end()
          ? nullptr
          : std::get_if<std::vector<double>>(&scales->second);
  if (!s || s->size() != 2 || !((*s)[0] > 0) || !((*s)[1] > 0))
    return absl::InvalidArgumentError(
        op.kind + ": 'scales' must be 2 positive numbers (H, W)");
  std::vector<double> roi = {0, 0, 1, 1};
  if (g.coordinates == ResizeCoordinates::TfCropAndResize) {
    auto it = op.attributes.find("roi");
    const std::vector<double> *r =
        it == op.attributes.end()
            ? nullptr
            : std::get_if<std::vector<double>>(&it->second);
    if (!r || r->size() != 4)
      return absl::InvalidArgumentError(
          op.kind + ": tf_crop_and_resize needs a 'roi' of 4 numbers");
    roi = *r;
  }
  g.rows = {input.shape[2], output.shape[2], (*s)[0], roi[0], roi[2]};
  g.cols = {input.shape[3], output.shape[3], (*s)[1], roi[1], roi[3]};
  if (input.shape[0] != output.shape[0] || input.shape[1] != output.shape[1])
    return absl::InvalidArgumentError(
        op.kind + ": input and result differ in samples or channels");
  for (int64_t d = 0; d < 2; ++d)
    if (input.lo[d] > output.lo[d] || input.hi[d] < output.hi[d])
      return absl::InvalidArgumentError(
          op.kind + ": input box does not hold the output samples/channels");
  for (int64_t d = 2; d < 4; ++d)
    if (input.lo[d] != 0 || input.hi[d] != input.shape[d])
      return absl::InvalidArgumentError(
          op.kind + ": input box must hold whole planes (rows and cols)");
  return absl::OkStatus();
}

} // namespace ppc::runtime

#endif // PPC_RUNTIME_COMMON_RESIZEGEOMETRY_H
