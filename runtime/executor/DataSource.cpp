//===- DataSource.cpp - values of inputs, weights and constants -----------===//

#include "ppc/Runtime/DataSource.h"

#include "ppc/Runtime/Boxes.h"
#include "ppc/Runtime/Npy.h"
#include "ppc/Runtime/PlanIO.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

namespace ppc::runtime {

using ppc::planfile::Tensor;

static uint64_t splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

uint64_t hashElement(uint64_t seed, uint64_t stream, uint64_t tensor,
                     uint64_t index) {
  uint64_t h = splitmix64(seed);
  h = splitmix64(h ^ stream);
  h = splitmix64(h ^ tensor);
  return splitmix64(h ^ index);
}

float uniformFromHash(uint64_t hash) {
  return static_cast<float>(hash >> 40) * (2.0f / 16777216.0f) - 1.0f;
}

static const char *roleName(Tensor::Role role) {
  switch (role) {
  case Tensor::INPUT:
    return "an input";
  case Tensor::WEIGHT:
    return "a weight";
  case Tensor::FROZEN:
    return "a frozen weight";
  case Tensor::CONSTANT:
    return "a constant";
  default:
    return "an activation";
  }
}

DataSource::DataSource(const ppc::planfile::Plan &plan, uint64_t seed,
                       InitMode mode, int64_t batchCycle)
    : plan(plan), seed(seed), mode(mode), batchCycle(batchCycle) {}

/// "" or how many of `values` are NaN or infinite, and the first of them.
static std::string describeNonfinite(const std::vector<float> &values,
                                     const std::vector<int64_t> &shape) {
  int64_t count = 0, first = -1;
  for (size_t i = 0; i < values.size(); ++i)
    if (!std::isfinite(values[i])) {
      ++count;
      if (first < 0)
        first = static_cast<int64_t>(i);
    }
  if (count == 0)
    return "";
  std::vector<int64_t> index(shape.size());
  for (size_t d = shape.size(), rest = first; d-- > 0;) {
    index[d] = static_cast<int64_t>(rest % shape[d]);
    rest /= shape[d];
  }
  return std::to_string(count) + " NaN or infinite value" +
         (count == 1 ? "" : "s") + " (the first, " +
         std::to_string(values[first]) + ", at " + shapeString(index) + ")";
}

absl::Status DataSource::setInputFile(const std::string &name,
                                      const std::string &path,
                                      std::string *nonfinite) {
  const Tensor *tensor = nullptr;
  std::string inputs;
  for (const Tensor &t : plan.tensors()) {
    if (t.role() == Tensor::INPUT)
      inputs += (inputs.empty() ? "" : ", ") + t.name();
    if (t.name() == name)
      tensor = &t;
  }
  if (!tensor)
    return absl::InvalidArgumentError(
        "--input " + name + ": the plan has no tensor '" + name +
        "'; its inputs are: " + (inputs.empty() ? "(none)" : inputs));
  if (data_)
    return absl::InvalidArgumentError(
        "--data and --input both give inputs; use one");
  if (tensor->role() != Tensor::INPUT)
    return absl::InvalidArgumentError(
        "--input " + name + ": '" + name + "' is " + roleName(tensor->role()) +
        ", not an input; its inputs are: " + inputs);
  NpyArray array;
  if (absl::Status err = readNpy(path, array); !err.ok())
    return annotate(err, "--input " + name);
  std::vector<int64_t> expected(tensor->shape().begin(), tensor->shape().end());
  if (array.shape != expected)
    return absl::InvalidArgumentError(
        "--input " + name + ": '" + path + "' has shape " +
        shapeString(array.shape) + " but the plan expects " +
        shapeString(expected));
  if (std::string bad = describeNonfinite(array.data, array.shape);
      !bad.empty()) {
    bad = "--input " + name + ": '" + path + "' holds " + bad;
    if (!nonfinite)
      return absl::InvalidArgumentError(bad +
                                        "; --allow-nonfinite accepts them");
    *nonfinite = bad;
  }
  inputFiles[tensor->id()] = std::move(array.data);
  return absl::OkStatus();
}

absl::Status DataSource::setDataDirectory(const std::string &dir,
                                          const Dataset::Options &options) {
  if (!inputFiles.empty())
    return absl::InvalidArgumentError(
        "--data and --input both give inputs; use one");
  std::unique_ptr<Dataset> dataset;
  if (absl::Status err = Dataset::open(plan, dir, options, dataset); !err.ok())
    return err;
  data_ = std::move(dataset);
  return absl::OkStatus();
}

/// A read-only mapping of a weights file: every rank of a host shares its
/// pages, and a rank only touches the boxes it loads.
struct DataSource::MappedFile {
  const float *values = nullptr;
  size_t bytes = 0;
  ~MappedFile() {
    if (values)
      munmap(const_cast<float *>(values), bytes);
  }
};

Tensor::Init DataSource::effectiveInit(const Tensor &tensor) const {
  Tensor::Init init = tensor.init();
  if (init == Tensor::INIT_UNSPECIFIED)
    init = tensor.data_size() > 0            ? Tensor::DATA
           : tensor.role() == Tensor::WEIGHT ? Tensor::UNIFORM
                                             : Tensor::ZEROS;
  if (mode == InitMode::Seed && tensor.role() == Tensor::WEIGHT) {
    if (init == Tensor::DATA)
      init = Tensor::UNIFORM;
    else if (init == Tensor::WEIGHTS_FILE)
      init = tensor.seed_init() == Tensor::INIT_UNSPECIFIED
                 ? Tensor::UNIFORM
                 : tensor.seed_init();
  }
  return init;
}

absl::Status DataSource::setWeightsFile(const std::string &path) {
  std::vector<const Tensor *> needed;
  for (const Tensor &t : plan.tensors())
    if ((t.role() == Tensor::WEIGHT || t.role() == Tensor::FROZEN) &&
        effectiveInit(t) == Tensor::WEIGHTS_FILE)
      needed.push_back(&t);
  if (needed.empty())
    return absl::OkStatus();
  const std::string what = "weights file '" + path + "'";
  if (path.empty())
    return absl::InvalidArgumentError(
        "the plan reads weights from a weights file but names none");
  struct stat info;
  if (stat(path.c_str(), &info) != 0)
    return absl::InvalidArgumentError(
        what + " cannot be opened: " + std::strerror(errno) +
        " (it is written next to the plan by ppc-opt; --weights FILE "
        "names another, --init=seed draws the weights instead)");
  if (!S_ISREG(info.st_mode))
    return absl::InvalidArgumentError(what + " is not a regular file");
  const int64_t expected = plan.weights_file().size_bytes();
  if (info.st_size != expected)
    return absl::InvalidArgumentError(
        what + " has " + std::to_string(info.st_size) +
        " bytes but the plan expects " + std::to_string(expected) +
        " (it belongs to another plan, or was truncated)");
  auto mapped = std::make_shared<MappedFile>();
  if (expected > 0) {
    int fd = open(path.c_str(), O_RDONLY);
    if (fd < 0)
      return absl::InvalidArgumentError(
          what + " cannot be opened: " + std::strerror(errno));
    void *map = mmap(nullptr, static_cast<size_t>(expected), PROT_READ,
                     MAP_PRIVATE, fd, 0);
    close(fd);
    if (map == MAP_FAILED)
      return absl::InvalidArgumentError(
          what + " cannot be mapped: " + std::strerror(errno));
    mapped->values = static_cast<const float *>(map);
    mapped->bytes = static_cast<size_t>(expected);
  }
  for (const Tensor *t : needed)
    if (weightsChecksum(mapped->values + t->weights_offset(),
                        t->weights_count()) != t->weights_checksum())
      return absl::InvalidArgumentError(what + " is corrupt: the values of '" +
                                        t->name() +
                                        "' do not match the plan's checksum");
  weights = std::move(mapped);
  return absl::OkStatus();
}

namespace {
enum class Rule { Zeros, Ones, Uniform, Data, WeightsFile, Input };
}

absl::Status DataSource::load(int32_t id, const std::vector<int64_t> &lo,
                              const std::vector<int64_t> &hi, int64_t step,
                              float *data) const {
  const Tensor &tensor = plan.tensors(id);
  const int64_t dataStep = batchCycle > 0 ? (step - 1) % batchCycle + 1 : step;
  const std::vector<int64_t> shape(tensor.shape().begin(),
                                   tensor.shape().end());
  const std::vector<int64_t> zero(shape.size(), 0);
  const int64_t numElements = boxVolume(zero, shape);

  Rule rule;
  double bound = tensor.init_bound();
  switch (tensor.role()) {
  case Tensor::INPUT:
    rule = Rule::Input;
    break;
  case Tensor::WEIGHT:
  case Tensor::FROZEN:
  case Tensor::CONSTANT: {
    Tensor::Init init = effectiveInit(tensor);
    rule = init == Tensor::ZEROS          ? Rule::Zeros
           : init == Tensor::ONES         ? Rule::Ones
           : init == Tensor::DATA         ? Rule::Data
           : init == Tensor::WEIGHTS_FILE ? Rule::WeightsFile
                                          : Rule::Uniform;
    if (tensor.role() == Tensor::CONSTANT && rule == Rule::Uniform)
      return absl::InvalidArgumentError("constant '" + tensor.name() +
                                        "' has no data");
    break;
  }
  default:
    return absl::InvalidArgumentError(
        "tensor '" + tensor.name() +
        "' is computed by an op and cannot be loaded");
  }
  if (rule == Rule::Uniform && bound <= 0) {
    int64_t fanIn = 1;
    for (size_t d = shape.size() > 1 ? 1 : 0; d < shape.size(); ++d)
      fanIn *= shape[d];
    bound = 1.0 / std::sqrt(static_cast<double>(std::max<int64_t>(fanIn, 1)));
  }
  if (rule == Rule::Data && tensor.data_size() != numElements)
    return absl::InvalidArgumentError(
        "tensor '" + tensor.name() + "' has " +
        std::to_string(tensor.data_size()) + " values for shape " +
        shapeString(shape) + " (" + std::to_string(numElements) + " elements)");
  if (rule == Rule::WeightsFile && !weights)
    return absl::InvalidArgumentError(
        "the values of '" + tensor.name() +
        "' are in the plan's weights file, which was not opened");
  const float *stored = rule == Rule::WeightsFile
                            ? weights->values + tensor.weights_offset()
                            : nullptr;
  if (rule == Rule::Input && data_)
    return data_->load(id, lo, hi, step, data);
  const std::vector<float> *file = nullptr;
  if (rule == Rule::Input)
    if (auto it = inputFiles.find(id); it != inputFiles.end())
      file = &it->second;

  const float fbound = static_cast<float>(bound);
  const int64_t intMax = tensor.int_max();
  // The second box is the whole tensor: its offsets are global flat indices.
  forEachRun(lo, hi, lo, hi, zero, shape,
             [&](int64_t at, int64_t index, int64_t length) {
               float *out = data + at;
               for (int64_t i = 0; i < length; ++i) {
                 uint64_t flat = static_cast<uint64_t>(index + i);
                 switch (rule) {
                 case Rule::Zeros:
                   out[i] = 0.0f;
                   break;
                 case Rule::Ones:
                   out[i] = 1.0f;
                   break;
                 case Rule::Data:
                   out[i] = tensor.data(static_cast<int>(flat));
                   break;
                 case Rule::WeightsFile:
                   out[i] = stored[flat];
                   break;
                 case Rule::Uniform:
                   out[i] =
                       fbound * uniformFromHash(hashElement(seed, 0, id, flat));
                   break;
                 case Rule::Input:
                   if (file) {
                     out[i] = (*file)[flat];
                   } else {
                     uint64_t h = hashElement(seed, dataStep, id, flat);
                     if (intMax > 0) {
                       // 53 random bits scaled: uniform over [0, int_max).
                       double u = static_cast<double>(h >> 11) * 0x1.0p-53;
                       out[i] = static_cast<float>(std::min<int64_t>(
                           static_cast<int64_t>(u * intMax), intMax - 1));
                     } else {
                       out[i] = uniformFromHash(h);
                     }
                   }
                   break;
                 }
               }
             });
  return absl::OkStatus();
}

} // namespace ppc::runtime
