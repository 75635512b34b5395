//===- Dataset.cpp - training inputs from a directory of .npy shards ------===//

#include "ppc/Runtime/Dataset.h"

#include "ppc/Runtime/Boxes.h"
#include "ppc/Runtime/DataSource.h"
#include "ppc/Runtime/Npy.h"
#include "ppc/Runtime/PlanIO.h"

#include "absl/synchronization/mutex.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <deque>
#include <filesystem>
#include <map>
#include <thread>
#include <tuple>

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

namespace ppc::runtime {

namespace fs = std::filesystem;
using ppc::planfile::Tensor;

uint64_t shuffledIndex(uint64_t position, uint64_t n, uint64_t key) {
  if (n <= 1)
    return 0;
  int bits = 64 - __builtin_clzll(n - 1);
  bits += bits % 2;
  const int half = bits / 2;
  const uint64_t mask = (uint64_t(1) << half) - 1;
  uint64_t i = position % n;
  do {
    uint64_t left = i >> half, right = i & mask;
    for (uint64_t round = 0; round < 4; ++round) {
      uint64_t mixed = left ^ (hashElement(key, round, 0, right) & mask);
      left = right;
      right = mixed;
    }
    i = left << half | right;
  } while (i >= n);
  return i;
}

namespace {

/// One mapped .npy shard.
struct Shard {
  std::string path;
  NpyHeader header;
  const char *map = nullptr;
  size_t mapBytes = 0;
  int64_t records = 0;
  const char *elements() const { return map + header.dataOffset; }
};

struct Input {
  int32_t tensor = 0;
  std::string name;
  Index recordShape;
  int64_t recordElements = 1;
  std::vector<Shard> shards;
  /// firstRecord[i]: the records before shard i.
  std::vector<int64_t> firstRecord;
};

using Key = std::tuple<int32_t, Index, Index, int64_t>;

struct Prefetched {
  bool ready = false;
  std::vector<float> values;
};

} // namespace

struct Dataset::Impl {
  Options options;
  std::map<int32_t, Input> inputs;
  int64_t records = 0;
  int64_t batch = 0;

  absl::Mutex mutex;
  std::map<Key, Prefetched> prefetched ABSL_GUARDED_BY(mutex);
  std::deque<Key> queue ABSL_GUARDED_BY(mutex);
  bool stopping ABSL_GUARDED_BY(mutex) = false;
  std::thread worker;

  ~Impl() {
    {
      absl::MutexLock lock(&mutex);
      stopping = true;
    }
    if (worker.joinable())
      worker.join();
    for (auto &[tensor, input] : inputs)
      for (Shard &shard : input.shards)
        if (shard.map)
          munmap(const_cast<char *>(shard.map), shard.mapBytes);
  }

  int64_t recordOf(int64_t step, int64_t row) const {
    const int64_t position = (step - 1) * batch + row;
    const int64_t epoch = position / records, within = position % records;
    if (!options.shuffle)
      return within;
    return static_cast<int64_t>(shuffledIndex(
        static_cast<uint64_t>(within), static_cast<uint64_t>(records),
        hashElement(options.seed, static_cast<uint64_t>(epoch),
                    0x64617461 /* "data" */, 0)));
  }

  /// Reads box [lo, hi) of `input` at `step` from the mapped shards.
  void read(const Input &input, const Index &lo, const Index &hi, int64_t step,
            float *out) const {
    const Index recordLo(lo.begin() + 1, lo.end());
    const Index recordHi(hi.begin() + 1, hi.end());
    const Index zero(input.recordShape.size(), 0);
    const int64_t rowElements = boxVolume(recordLo, recordHi);
    for (int64_t row = lo[0]; row < hi[0]; ++row) {
      const int64_t record = recordOf(step, row);
      const size_t shardIndex =
          std::upper_bound(input.firstRecord.begin(), input.firstRecord.end(),
                           record) -
          input.firstRecord.begin() - 1;
      const Shard &shard = input.shards[shardIndex];
      const char *base =
          shard.elements() + (record - input.firstRecord[shardIndex]) *
                                 input.recordElements *
                                 static_cast<int64_t>(shard.header.elementSize);
      float *rowOut = out + (row - lo[0]) * rowElements;
      forEachRun(
          recordLo, recordHi, recordLo, recordHi, zero, input.recordShape,
          [&](int64_t at, int64_t from, int64_t length) {
            convertNpyElements(
                shard.header.dtype,
                base + from * static_cast<int64_t>(shard.header.elementSize),
                length, rowOut + at);
          });
    }
  }

  bool hasWork() const ABSL_SHARED_LOCKS_REQUIRED(mutex) {
    return stopping || !queue.empty();
  }

  /// The prefetch thread: reads queued boxes until the dataset closes.
  void work() {
    while (true) {
      Key key;
      {
        absl::MutexLock lock(&mutex);
        mutex.Await(absl::Condition(this, &Impl::hasWork));
        if (stopping)
          return;
        key = queue.front();
        queue.pop_front();
      }
      const auto &[tensor, lo, hi, step] = key;
      std::vector<float> values(static_cast<size_t>(boxVolume(lo, hi)));
      read(inputs.at(tensor), lo, hi, step, values.data());
      absl::MutexLock lock(&mutex);
      Prefetched &entry = prefetched[key];
      entry.values = std::move(values);
      entry.ready = true;
    }
  }
};

Dataset::Dataset(std::unique_ptr<Impl> impl) : impl(std::move(impl)) {}
Dataset::~Dataset() = default;

int64_t Dataset::numRecords() const { return impl->records; }
int64_t Dataset::batchSize() const { return impl->batch; }
int64_t Dataset::recordOf(int64_t step, int64_t row) const {
  return impl->recordOf(step, row);
}

/// Maps `shard.path` read-only.
static absl::Status mapShard(Shard &shard) {
  int fd = ::open(shard.path.c_str(), O_RDONLY);
  if (fd < 0)
    return absl::InvalidArgumentError("cannot open '" + shard.path +
                                      "': " + std::strerror(errno));
  shard.mapBytes = static_cast<size_t>(lseek(fd, 0, SEEK_END));
  void *map = mmap(nullptr, shard.mapBytes, PROT_READ, MAP_PRIVATE, fd, 0);
  ::close(fd);
  if (map == MAP_FAILED)
    return absl::InvalidArgumentError("cannot map '" + shard.path +
                                      "': " + std::strerror(errno));
  shard.map = static_cast<const char *>(map);
  return absl::OkStatus();
}

/// What is wrong with the values of `input`, if anything: a label that is not
/// an integer in [0, classes) (classes > 0), or a NaN or infinity.
static absl::Status checkValues(const Input &input, int64_t classes,
                                bool allowNonfinite) {
  std::vector<float> values;
  for (const Shard &shard : input.shards) {
    const int64_t n = shard.records * input.recordElements;
    values.resize(static_cast<size_t>(n));
    convertNpyElements(shard.header.dtype, shard.elements(), n, values.data());
    for (int64_t i = 0; i < n; ++i) {
      const float v = values[i];
      const std::string at = "'" + shard.path + "' element " +
                             std::to_string(i) + " (record " +
                             std::to_string(i / input.recordElements) + ")";
      if (classes > 0 &&
          !(v >= 0 && v < static_cast<float>(classes) && v == std::floor(v)))
        return absl::InvalidArgumentError(at + " is " + std::to_string(v) +
                                          ", not a class in [0, " +
                                          std::to_string(classes) + ")");
      if (classes == 0 && !allowNonfinite && !std::isfinite(v))
        return absl::InvalidArgumentError(
            at + " is " + std::to_string(v) +
            "; --allow-nonfinite accepts NaN and infinite values");
    }
  }
  return absl::OkStatus();
}

/// The shard files of input `name` in `dir`.
static absl::Status findShards(const std::string &dir, const std::string &name,
                               std::vector<std::string> &paths) {
  const fs::path file = fs::path(dir) / (name + ".npy");
  const fs::path folder = fs::path(dir) / name;
  std::error_code ec;
  const bool hasFile = fs::is_regular_file(file, ec);
  const bool hasFolder = fs::is_directory(folder, ec);
  if (hasFile && hasFolder)
    return absl::InvalidArgumentError("both '" + file.string() + "' and '" +
                                      folder.string() + "/' exist; keep one");
  if (hasFile) {
    paths = {file.string()};
    return absl::OkStatus();
  }
  if (!hasFolder) {
    // Something is there but neither a file nor a directory: say what.
    std::error_code linkError;
    fs::file_status status = fs::symlink_status(file, linkError);
    if (!linkError && fs::exists(status)) {
      if (fs::is_symlink(status) && !fs::exists(file, ec))
        return absl::InvalidArgumentError(
            "'" + file.string() +
            "' is a symbolic link to nothing (dangling, or a loop)");
      if (fs::is_fifo(status))
        return absl::InvalidArgumentError(
            "'" + file.string() +
            "' is a FIFO; --data reads regular .npy files");
      if (!fs::is_regular_file(fs::status(file, ec)))
        return absl::InvalidArgumentError("'" + file.string() +
                                          "' is not a regular file");
    }
    return absl::InvalidArgumentError("no '" + file.string() +
                                      "' nor a directory '" + folder.string() +
                                      "/' of .npy shards");
  }
  for (const fs::directory_entry &entry : fs::directory_iterator(folder, ec))
    if (entry.path().extension() == ".npy")
      paths.push_back(entry.path().string());
  if (ec)
    return absl::InvalidArgumentError("cannot list '" + folder.string() +
                                      "': " + ec.message());
  std::sort(paths.begin(), paths.end());
  if (paths.empty())
    return absl::InvalidArgumentError("'" + folder.string() +
                                      "/' has no .npy files");
  return absl::OkStatus();
}

absl::Status Dataset::open(const ppc::planfile::Plan &plan,
                           const std::string &dir, const Options &options,
                           std::unique_ptr<Dataset> &dataset) {
  const std::string what = "--data " + dir + ": ";
  std::error_code ec;
  if (!fs::is_directory(dir, ec))
    return absl::InvalidArgumentError(what + "not a directory");
  auto impl = std::make_unique<Impl>();
  impl->options = options;
  std::string firstName;
  for (const Tensor &tensor : plan.tensors()) {
    if (tensor.role() != Tensor::INPUT)
      continue;
    const std::string &name = tensor.name();
    const Index shape(tensor.shape().begin(), tensor.shape().end());
    if (shape.empty())
      return absl::InvalidArgumentError(
          what + "input '" + name +
          "' is a scalar; a dataset's inputs have a batch dimension");
    if (impl->batch != 0 && shape[0] != impl->batch)
      return absl::InvalidArgumentError(
          what + "input '" + name + "' has a batch of " +
          std::to_string(shape[0]) + " but '" + firstName + "' of " +
          std::to_string(impl->batch));
    impl->batch = shape[0];
    Input input;
    input.tensor = tensor.id();
    input.name = name;
    input.recordShape.assign(shape.begin() + 1, shape.end());
    input.recordElements = checkedElementCount(input.recordShape);
    std::vector<std::string> paths;
    if (absl::Status err = findShards(dir, name, paths); !err.ok())
      return annotate(err, what + "input '" + name + "'");
    for (const std::string &path : paths) {
      Shard shard;
      shard.path = path;
      if (absl::Status err = readNpyHeader(path, shard.header); !err.ok())
        return withMessage(err, what + messageOf(err));
      const Index &fileShape = shard.header.shape;
      if (fileShape.size() != shape.size() ||
          !std::equal(fileShape.begin() + 1, fileShape.end(),
                      input.recordShape.begin()))
        return absl::InvalidArgumentError(
            what + "'" + path + "' has shape " + shapeString(fileShape) +
            " but input '" + name + "' takes records of shape " +
            shapeString(input.recordShape) + " (a file of shape " +
            (input.recordShape.empty()
                 ? std::string("[n]")
                 : "[n, " + shapeString(input.recordShape).substr(1)) +
            ")");
      if (!input.shards.empty() &&
          shard.header.dtype != input.shards.front().header.dtype)
        return absl::InvalidArgumentError(what + "'" + path + "' has dtype " +
                                          shard.header.dtype + " but '" +
                                          input.shards.front().path + "' has " +
                                          input.shards.front().header.dtype);
      shard.records = fileShape[0];
      if (absl::Status err = mapShard(shard); !err.ok())
        return withMessage(err, what + messageOf(err));
      input.firstRecord.push_back(input.shards.empty()
                                      ? 0
                                      : input.firstRecord.back() +
                                            input.shards.back().records);
      input.shards.push_back(std::move(shard));
    }
    const int64_t records =
        input.firstRecord.back() + input.shards.back().records;
    if (records == 0)
      return absl::InvalidArgumentError(what + "input '" + name +
                                        "' has no records");
    if (impl->records != 0 && records != impl->records)
      return absl::InvalidArgumentError(
          what + "input '" + name + "' has " + std::to_string(records) +
          " records but '" + firstName + "' has " +
          std::to_string(impl->records) +
          "; record r of every input goes together");
    if (absl::Status err =
            checkValues(input, tensor.int_max(), options.allowNonfinite);
        !err.ok())
      return annotate(err, what + "input '" + name + "'");
    impl->records = records;
    if (firstName.empty())
      firstName = name;
    impl->inputs.emplace(input.tensor, std::move(input));
  }
  if (impl->inputs.empty())
    return absl::InvalidArgumentError(what + "the plan has no inputs to read");
  Impl *raw = impl.get();
  if (options.prefetch)
    impl->worker = std::thread([raw] { raw->work(); });
  dataset.reset(new Dataset(std::move(impl)));
  return absl::OkStatus();
}

absl::Status Dataset::load(int32_t tensor, const std::vector<int64_t> &lo,
                           const std::vector<int64_t> &hi, int64_t step,
                           float *data) {
  auto it = impl->inputs.find(tensor);
  if (it == impl->inputs.end())
    return absl::InvalidArgumentError("tensor " + std::to_string(tensor) +
                                      " is not an input of --data");
  const Input &input = it->second;
  if (lo.size() != input.recordShape.size() + 1 || step < 1)
    return absl::InvalidArgumentError(
        "input '" + input.name + "': box " + boxString(lo, hi) + " of step " +
        std::to_string(step) + " is not one of its boxes");
  if (!impl->options.prefetch) {
    impl->read(input, lo, hi, step, data);
    return absl::OkStatus();
  }
  Key key{tensor, lo, hi, step};
  bool served = false;
  {
    absl::MutexLock lock(&impl->mutex);
    // Boxes of earlier steps were prefetched for a step that went another
    // way (an error, a resume): drop them.
    for (auto e = impl->prefetched.begin(); e != impl->prefetched.end();)
      e = e->second.ready && std::get<3>(e->first) < step
              ? impl->prefetched.erase(e)
              : std::next(e);
    if (auto found = impl->prefetched.find(key);
        found != impl->prefetched.end()) {
      impl->mutex.Await(absl::Condition(&found->second.ready));
      std::copy(found->second.values.begin(), found->second.values.end(), data);
      impl->prefetched.erase(found);
      served = true;
    }
    Key next{tensor, lo, hi, step + 1};
    if (!impl->prefetched.count(next)) {
      impl->prefetched.emplace(next, Prefetched{});
      impl->queue.push_back(next);
    }
  }
  if (!served)
    impl->read(input, lo, hi, step, data);
  return absl::OkStatus();
}

} // namespace ppc::runtime
