//===- RuntimeTest.cpp - the executor in one process ----------------------===//
//
// .npy files, synthetic data, optimizer math, checkpoint files and whole
// one-rank plans run by runPlan without MPI. Multi-rank runs are the e2e
// tests (test/e2e).
//
//===----------------------------------------------------------------------===//

#include "StatusText.h"
#include "TestPlans.h"

#include "ppc/Runtime/Checkpoint.h"
#include "ppc/Runtime/Communicator.h"
#include "ppc/Runtime/DataSource.h"
#include "ppc/Runtime/Executor.h"
#include "ppc/Runtime/Npy.h"
#include "ppc/Runtime/Optimizer.h"
#include "ppc/Runtime/Reference.h"

#include <csignal>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <set>
#include <sstream>
#include <sys/wait.h>
#include <unistd.h>

using ppc::test::statusText;

using namespace ppc::runtime;
using namespace ppc::runtime::testing;
using Index = std::vector<int64_t>;

namespace {

/// The directories tempDir made, removed when the process that made them
/// exits (not by a forked child that exits through exit()).
struct TempDirs {
  pid_t owner = getpid();
  std::vector<std::string> dirs;
  ~TempDirs() {
    if (getpid() != owner)
      return;
    for (const std::string &dir : dirs)
      if (std::system(("rm -rf '" + dir + "'").c_str()) != 0)
        std::fprintf(stderr, "could not remove %s\n", dir.c_str());
  }
};
TempDirs tempDirs;

/// A fresh directory under the test's temporary directory, removed when
/// the test program exits.
std::string tempDir(const std::string &name) {
  std::string dir = ::testing::TempDir() + "ppc-runtime-test-" +
                    std::to_string(getpid()) + "-" + name;
  std::string cmd = "rm -rf '" + dir + "'";
  EXPECT_EQ(std::system(cmd.c_str()), 0);
  EXPECT_EQ(statusText(makeDirectories(dir)), "");
  tempDirs.dirs.push_back(dir);
  return dir;
}

std::string readFile(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

void writeFile(const std::string &path, const std::string &bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << bytes;
}

/// The step directory DIR/LATEST names ("" if none).
std::string latestDir(const std::string &dir) {
  std::string stepDir;
  return statusText(readLatest(dir, stepDir)).empty() ? stepDir : "";
}

/// runPlan on one rank without MPI; returns the exit code.
int run(const pf::Plan &plan, const RunOptions &options, std::string *out,
        std::string *err = nullptr) {
  auto comm = Communicator::single();
  std::ostringstream o, e;
  int code = runPlan(plan, options, *comm, o, e);
  if (out)
    *out = o.str();
  if (err)
    *err = e.str();
  return code;
}

//===----------------------------------------------------------------------===//
// .npy
//===----------------------------------------------------------------------===//

TEST(RuntimeNpy, WriteReadRoundTrip) {
  std::string dir = tempDir("npy");
  std::vector<float> values = {1.5f, -2.0f, 3.25f, 0.0f, 7.0f, -0.125f};
  ASSERT_EQ(statusText(writeNpy(dir + "/a.npy", {2, 3}, values.data())), "");
  NpyArray a;
  ASSERT_EQ(statusText(readNpy(dir + "/a.npy", a)), "");
  EXPECT_EQ(a.shape, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(a.data, values);
  EXPECT_EQ(a.dtype, "<f4");
  // numpy aligns the data to 64 bytes.
  EXPECT_EQ((readFile(dir + "/a.npy").size() - values.size() * 4) % 64, 0u);

  float scalar = 4.0f;
  ASSERT_EQ(statusText(writeNpy(dir + "/s.npy", {}, &scalar)), "");
  ASSERT_EQ(statusText(readNpy(dir + "/s.npy", a)), "");
  EXPECT_TRUE(a.shape.empty());
  EXPECT_EQ(a.data, std::vector<float>{4.0f});
  ASSERT_EQ(statusText(writeNpy(dir + "/v.npy", {1}, &scalar)), "");
  EXPECT_NE(readFile(dir + "/v.npy").find("'shape': (1,)"), std::string::npos);
}

std::string npyBytes(const std::string &header, const std::string &data) {
  std::string h = header;
  while ((10 + h.size() + 1) % 64)
    h += ' ';
  h += '\n';
  std::string bytes = "\x93NUMPY\x01";
  bytes += '\0';
  bytes += static_cast<char>(h.size() & 0xff);
  bytes += static_cast<char>(h.size() >> 8);
  return bytes + h + data;
}

TEST(RuntimeNpy, ReadsIntegersAsFloats) {
  std::string dir = tempDir("npy-int");
  int64_t labels[4] = {0, 3, 9, -1};
  writeFile(dir + "/l.npy",
            npyBytes("{'descr': '<i8', 'fortran_order': False, "
                     "'shape': (2, 2), }",
                     std::string(reinterpret_cast<char *>(labels), 32)));
  NpyArray a;
  ASSERT_EQ(statusText(readNpy(dir + "/l.npy", a)), "");
  EXPECT_EQ(a.shape, (std::vector<int64_t>{2, 2}));
  EXPECT_EQ(a.data, (std::vector<float>{0, 3, 9, -1}));
}

TEST(RuntimeNpy, Errors) {
  std::string dir = tempDir("npy-errors");
  NpyArray a;
  EXPECT_NE(statusText(readNpy(dir + "/missing.npy", a)).find("cannot open"),
            std::string::npos);
  writeFile(dir + "/text.npy", "hello, this is not numpy");
  EXPECT_NE(statusText(readNpy(dir + "/text.npy", a)).find("no NUMPY magic"),
            std::string::npos);
  writeFile(dir + "/f.npy", npyBytes("{'descr': '<f4', 'fortran_order': True, "
                                     "'shape': (2, 2), }",
                                     std::string(16, '\0')));
  EXPECT_NE(statusText(readNpy(dir + "/f.npy", a)).find("Fortran order"),
            std::string::npos);
  writeFile(dir + "/short.npy",
            npyBytes("{'descr': '<f4', 'fortran_order': False, "
                     "'shape': (2, 2), }",
                     std::string(12, '\0')));
  EXPECT_NE(statusText(readNpy(dir + "/short.npy", a)).find("truncated data"),
            std::string::npos);
  writeFile(dir + "/c.npy", npyBytes("{'descr': '<c8', 'fortran_order': False, "
                                     "'shape': (1,), }",
                                     std::string(8, '\0')));
  EXPECT_NE(statusText(readNpy(dir + "/c.npy", a)).find("dtype '<c8'"),
            std::string::npos);
}

//===----------------------------------------------------------------------===//
// Synthetic data and initial values
//===----------------------------------------------------------------------===//

pf::Plan dataPlan() {
  PlanBuilder b(1, false);
  b.tensor("x", {6, 5}, Tensor::INPUT);
  int labels = b.tensor("labels", {6}, Tensor::INPUT);
  b.plan.mutable_tensors(labels)->set_int_max(10);
  b.tensor("w", {5, 4}, Tensor::WEIGHT, Tensor::UNIFORM, 0.5);
  int d = b.tensor("d", {3}, Tensor::WEIGHT, Tensor::DATA);
  int f = b.tensor("f", {3}, Tensor::FROZEN, Tensor::DATA);
  for (int t : {d, f})
    for (float v : {1.0f, 2.0f, 3.0f})
      b.plan.mutable_tensors(t)->add_data(v);
  b.tensor("a", {3}, Tensor::ACTIVATION);
  b.tensor("u", {8, 2}, Tensor::WEIGHT); // no init, no data
  return b.plan;
}

std::vector<float> loadBox(const DataSource &data, int tensor, const Index &lo,
                           const Index &hi, int64_t step) {
  int64_t n = 1;
  for (size_t d = 0; d < lo.size(); ++d)
    n *= hi[d] - lo[d];
  std::vector<float> values(n);
  EXPECT_EQ(statusText(data.load(tensor, lo, hi, step, values.data())), "");
  return values;
}

TEST(RuntimeDataSource, BoxesAgreeWithTheWholeTensor) {
  pf::Plan plan = dataPlan();
  DataSource data(plan, 7, InitMode::Plan);
  for (int tensor : {0, 2}) {
    Index shape(plan.tensors(tensor).shape().begin(),
                plan.tensors(tensor).shape().end());
    std::vector<float> whole = loadBox(data, tensor, {0, 0}, shape, 3);
    // Every box of a 2x2 split sees the same values at the same indices.
    for (int64_t r0 : {int64_t(0), shape[0] / 2})
      for (int64_t c0 : {int64_t(0), shape[1] / 2}) {
        Index lo{r0, c0}, hi{r0 + shape[0] / 2, c0 + shape[1] / 2};
        std::vector<float> box = loadBox(data, tensor, lo, hi, 3);
        for (int64_t i = lo[0]; i < hi[0]; ++i)
          for (int64_t j = lo[1]; j < hi[1]; ++j)
            EXPECT_EQ(box[(i - lo[0]) * (hi[1] - lo[1]) + (j - lo[1])],
                      whole[i * shape[1] + j]);
      }
  }
}

TEST(RuntimeDataSource, InputsChangePerStepWeightsDoNot) {
  pf::Plan plan = dataPlan();
  DataSource data(plan, 7, InitMode::Plan);
  std::vector<float> x1 = loadBox(data, 0, {0, 0}, {6, 5}, 1);
  EXPECT_EQ(x1, loadBox(data, 0, {0, 0}, {6, 5}, 1));
  EXPECT_NE(x1, loadBox(data, 0, {0, 0}, {6, 5}, 2));
  EXPECT_NE(x1,
            loadBox(DataSource(plan, 8, InitMode::Plan), 0, {0, 0}, {6, 5}, 1));
  for (float v : x1) {
    EXPECT_GE(v, -1.0f);
    EXPECT_LT(v, 1.0f);
  }
  std::set<float> distinct(x1.begin(), x1.end());
  EXPECT_GT(distinct.size(), 25u);

  std::vector<float> labels = loadBox(data, 1, {0}, {6}, 1);
  for (float v : labels) {
    EXPECT_EQ(v, static_cast<float>(static_cast<int>(v)));
    EXPECT_GE(v, 0.0f);
    EXPECT_LT(v, 10.0f);
  }

  std::vector<float> w = loadBox(data, 2, {0, 0}, {5, 4}, 1);
  EXPECT_EQ(w, loadBox(data, 2, {0, 0}, {5, 4}, 9));
  for (float v : w) {
    EXPECT_GE(v, -0.5f);
    EXPECT_LT(v, 0.5f);
  }
  EXPECT_EQ(loadBox(data, 3, {1}, {3}, 1), (std::vector<float>{2, 3}));
  // No init rule and no data: uniform within 1/sqrt(fan_in = 2).
  for (float v : loadBox(data, 6, {0, 0}, {8, 2}, 1))
    EXPECT_LT(std::fabs(v), 1.0f / std::sqrt(2.0f));
  std::vector<float> a(3);
  EXPECT_NE(
      statusText(data.load(5, {0}, {3}, 1, a.data())).find("computed by an op"),
      std::string::npos);
}

TEST(RuntimeDataSource, SeedInitReplacesWeightDataNotFrozen) {
  pf::Plan plan = dataPlan();
  DataSource data(plan, 7, InitMode::Seed);
  std::vector<float> d = loadBox(data, 3, {0}, {3}, 1);
  EXPECT_NE(d, (std::vector<float>{1, 2, 3}));
  for (float v : d) // bound 1/sqrt(3) for a vector of 3
    EXPECT_LT(std::fabs(v), 1.0f / std::sqrt(3.0f));
  EXPECT_EQ(loadBox(data, 4, {0}, {3}, 1), (std::vector<float>{1, 2, 3}));
}

TEST(RuntimeDataSource, InputFiles) {
  std::string dir = tempDir("inputs");
  pf::Plan plan = dataPlan();
  DataSource data(plan, 7, InitMode::Plan);
  std::vector<float> x(30);
  for (size_t i = 0; i < x.size(); ++i)
    x[i] = static_cast<float>(i);
  ASSERT_EQ(statusText(writeNpy(dir + "/x.npy", {6, 5}, x.data())), "");
  ASSERT_EQ(statusText(writeNpy(dir + "/bad.npy", {5, 6}, x.data())), "");
  EXPECT_EQ(statusText(data.setInputFile("x", dir + "/x.npy")), "");
  EXPECT_EQ(loadBox(data, 0, {1, 2}, {2, 4}, 5), (std::vector<float>{7, 8}));
  EXPECT_EQ(statusText(data.setInputFile("nope", dir + "/x.npy")),
            "--input nope: the plan has no tensor 'nope'; its inputs are: x, "
            "labels");
  EXPECT_NE(
      statusText(data.setInputFile("w", dir + "/x.npy")).find("is a weight"),
      std::string::npos);
  EXPECT_NE(statusText(data.setInputFile("x", dir + "/bad.npy"))
                .find("has shape [5, 6] but the plan expects [6, 5]"),
            std::string::npos);
}

//===----------------------------------------------------------------------===//
// Optimizers
//===----------------------------------------------------------------------===//

TEST(RuntimeOptimizer, Sgd) {
  pf::Optimizer opt;
  opt.set_kind(pf::Optimizer::SGD);
  opt.set_learning_rate(0.1);
  opt.set_weight_decay(0.01);
  float w = 1.0f, g = 0.5f;
  OptimizerState state;
  applyOptimizer(opt, &w, &g, 1, state);
  EXPECT_FLOAT_EQ(w, 1.0f - 0.1f * (0.5f + 0.01f)); // 0.949
  EXPECT_TRUE(state.slots.empty());
}

TEST(RuntimeOptimizer, Momentum) {
  pf::Optimizer opt;
  opt.set_kind(pf::Optimizer::MOMENTUM);
  opt.set_learning_rate(0.1);
  opt.set_momentum(0.9);
  float w = 1.0f, g = 0.5f;
  OptimizerState state;
  applyOptimizer(opt, &w, &g, 1, state);
  EXPECT_FLOAT_EQ(w, 0.95f); // v = 0.5
  applyOptimizer(opt, &w, &g, 1, state);
  EXPECT_FLOAT_EQ(state.slots[0][0], 0.95f); // v = 0.9 * 0.5 + 0.5
  EXPECT_FLOAT_EQ(w, 0.855f);
}

TEST(RuntimeOptimizer, AdamWithBiasCorrection) {
  pf::Optimizer opt;
  opt.set_kind(pf::Optimizer::ADAM);
  opt.set_learning_rate(0.1); // beta1, beta2, epsilon: PyTorch's defaults
  float w = 1.0f, g = 0.5f;
  OptimizerState state;
  applyOptimizer(opt, &w, &g, 1, state);
  // m = 0.05, v = 0.00025, m^ = 0.5, v^ = 0.25: a step of lr (in float
  // arithmetic, so to a few ulps).
  EXPECT_NEAR(w, 0.9f, 1e-6);
  g = -0.25f;
  applyOptimizer(opt, &w, &g, 1, state);
  EXPECT_EQ(state.steps, 2);
  EXPECT_FLOAT_EQ(state.slots[0][0], 0.02f);       // 0.9 m + 0.1 g
  EXPECT_FLOAT_EQ(state.slots[1][0], 0.00031225f); // 0.999 v + 0.001 g^2
  // w -= 0.1 * (0.02 / 0.19) / sqrt(0.00031225 / 0.001999)
  EXPECT_NEAR(w, 0.8733663f, 1e-6);
}

//===----------------------------------------------------------------------===//
// Checkpoint files
//===----------------------------------------------------------------------===//

Checkpoint sampleCheckpoint() {
  Checkpoint c;
  c.planHash = 0x0123456789abcdefULL;
  c.rank = 1;
  c.numRanks = 2;
  c.steps = 42;
  c.optimizerSlots = 2;
  CheckpointBuffer b;
  b.buffer = 3;
  b.tensor = 5;
  b.tensorName = "w";
  b.lo = {0, 2};
  b.hi = {2, 4};
  b.stateLo = {1, 2}; // a ZeRO shard: the second row
  b.stateHi = {2, 4};
  b.values = {1, 2, 3, 4};
  b.optimizer.steps = 42;
  b.optimizer.slots = {{0.3f, 0.4f}, {1, 1}};
  c.buffers.push_back(b);
  CheckpointBuffer frozen;
  frozen.buffer = 4;
  frozen.tensor = 6;
  frozen.lo = {0};
  frozen.hi = {3};
  frozen.values = {7, 8, 9};
  c.buffers.push_back(frozen);
  return c;
}

TEST(RuntimeCheckpoint, WriteReadRoundTrip) {
  std::string dir = tempDir("ckpt");
  std::string path = checkpointFileName(dir, 1);
  ASSERT_EQ(statusText(writeCheckpointFile(path, sampleCheckpoint())), "");
  // Written under a temporary name and renamed into place.
  EXPECT_FALSE(std::ifstream(path + ".tmp").good());
  Checkpoint c;
  ASSERT_EQ(statusText(readCheckpointFile(path, c)), "");
  EXPECT_EQ(c.planHash, 0x0123456789abcdefULL);
  EXPECT_EQ(c.rank, 1);
  EXPECT_EQ(c.numRanks, 2);
  EXPECT_EQ(c.steps, 42);
  ASSERT_EQ(c.buffers.size(), 2u);
  EXPECT_EQ(c.buffers[0].hi, (std::vector<int64_t>{2, 4}));
  EXPECT_EQ(c.buffers[0].tensorName, "w");
  EXPECT_EQ(c.buffers[0].stateLo, (std::vector<int64_t>{1, 2}));
  EXPECT_EQ(c.buffers[0].stateHi, (std::vector<int64_t>{2, 4}));
  EXPECT_EQ(c.buffers[0].values, (std::vector<float>{1, 2, 3, 4}));
  EXPECT_EQ(c.buffers[0].optimizer.slots[0][1], 0.4f);
  // Without a state box, the whole box.
  EXPECT_EQ(c.buffers[1].tensorName, "");
  EXPECT_EQ(c.buffers[1].stateLo, (std::vector<int64_t>{0}));
  EXPECT_EQ(c.buffers[1].stateHi, (std::vector<int64_t>{3}));
  // Slots never used are stored as zeros.
  EXPECT_EQ(c.buffers[1].optimizer.slots[1], (std::vector<float>{0, 0, 0}));

  // A staged file does not replace the committed one until committed.
  Checkpoint later = sampleCheckpoint();
  later.steps = 43;
  ASSERT_EQ(statusText(stageCheckpointFile(path, later)), "");
  ASSERT_EQ(statusText(readCheckpointFile(path, c)), "");
  EXPECT_EQ(c.steps, 42);
  ASSERT_EQ(statusText(commitFile(path)), "");
  ASSERT_EQ(statusText(readCheckpointFile(path, c)), "");
  EXPECT_EQ(c.steps, 43);
}

TEST(RuntimeCheckpoint, CorruptFiles) {
  std::string dir = tempDir("ckpt-corrupt");
  std::string path = dir + "/c.ckpt";
  ASSERT_EQ(statusText(writeCheckpointFile(path, sampleCheckpoint())), "");
  const std::string good = readFile(path);
  Checkpoint c;

  std::string flipped = good;
  flipped[60] ^= 0x10;
  writeFile(path, flipped);
  EXPECT_NE(statusText(readCheckpointFile(path, c)).find("checksum mismatch"),
            std::string::npos);
  writeFile(path, good.substr(0, good.size() - 9));
  EXPECT_NE(statusText(readCheckpointFile(path, c)).find("is corrupt"),
            std::string::npos);
  writeFile(path, "PPCCKPX" + good.substr(7));
  EXPECT_NE(
      statusText(readCheckpointFile(path, c)).find("is not a ppc checkpoint"),
      std::string::npos);
  std::string version = good;
  version[8] = 9;
  writeFile(path, version);
  EXPECT_NE(
      statusText(readCheckpointFile(path, c)).find("has format version 9"),
      std::string::npos);
  EXPECT_NE(
      statusText(readCheckpointFile(dir + "/none.ckpt", c)).find("cannot open"),
      std::string::npos);
}

TEST(RuntimeCheckpoint, CompleteMarker) {
  std::string dir = tempDir("marker");
  CheckpointMarker m;
  EXPECT_NE(statusText(readCompleteMarker(dir, m)).find("no COMPLETE marker"),
            std::string::npos);
  ASSERT_EQ(
      statusText(writeCompleteMarker(dir, {12, 4, 0xfedcba9876543210ULL})), "");
  ASSERT_EQ(statusText(readCompleteMarker(dir, m)), "");
  EXPECT_EQ(m.steps, 12);
  EXPECT_EQ(m.numRanks, 4);
  EXPECT_EQ(m.planHash, 0xfedcba9876543210ULL);
  EXPECT_EQ(m.run, ""); // written without an identity, read as none
  ASSERT_EQ(
      statusText(writeCompleteMarker(dir, {13, 2, 1, "seed=7 data=/d x"})), "");
  ASSERT_EQ(statusText(readCompleteMarker(dir, m)), "");
  EXPECT_EQ(m.steps, 13);
  EXPECT_EQ(m.run, "seed=7 data=/d x");
}

TEST(RuntimeCheckpoint, LockKeepsASecondRunOut) {
  std::string dir = tempDir("lock") + "/ckpt";
  CheckpointLock first, second;
  ASSERT_EQ(statusText(first.acquire(dir)), ""); // creates the directory
  EXPECT_TRUE(first.held());
  // flock is per open file: a second holder in this process is refused
  // as another process would be, with the holder's pid.
  std::string refused = statusText(second.acquire(dir));
  EXPECT_NE(refused.find("checkpoint directory '" + dir +
                         "' is in use by another run (pid " +
                         std::to_string(getpid()) + " on "),
            std::string::npos)
      << refused;
  EXPECT_NE(refused.find("give each job its own directory"), std::string::npos);
  EXPECT_FALSE(second.held());
  first.release();
  EXPECT_EQ(statusText(second.acquire(dir)), "");
  // A lock ends with its holder, however it ends: a child that takes it
  // and is killed leaves it free.
  second.release();
  pid_t child = fork();
  if (child == 0) {
    CheckpointLock mine;
    while (!statusText(mine.acquire(dir))
                .empty()) // the parent's probe may hold it
      usleep(1'000);
    pause();
    _exit(0);
  }
  ASSERT_GT(child, 0);
  CheckpointLock probe;
  for (int i = 0; i < 200 && statusText(probe.acquire(dir)).empty(); ++i) {
    probe.release(); // the child has not taken it yet
    usleep(10'000);
  }
  EXPECT_NE(statusText(probe.acquire(dir)), "");
  kill(child, SIGKILL);
  waitpid(child, nullptr, 0);
  EXPECT_EQ(statusText(probe.acquire(dir)), "");
}

//===----------------------------------------------------------------------===//
// Whole plans on one rank
//===----------------------------------------------------------------------===//

TEST(RuntimeRunPlan, DataMovementOnOneRank) {
  std::string dir = tempDir("data-movement");
  RunOptions options;
  options.steps = 3;
  options.verify = true;
  options.saveOutputsDir = dir + "/out";
  options.logFile = dir + "/log.jsonl";
  options.traceFile = dir + "/trace.json";
  std::string out;
  pf::Plan plan = dataMovementPlan(1);
  ASSERT_EQ(run(plan, options, &out), 0) << out;
  EXPECT_NE(out.find("verify passed"), std::string::npos) << out;
  EXPECT_NE(out.find("step 3/3  "), std::string::npos) << out;
  EXPECT_NE(out.find("output  x"), std::string::npos) << out;
  // The output is the input of the last step, exactly.
  NpyArray saved;
  ASSERT_EQ(statusText(readNpy(dir + "/out/output_0_x.npy", saved)), "");
  DataSource data(plan, options.seed, InitMode::Plan);
  EXPECT_EQ(saved.data, loadBox(data, 0, {0, 0}, {2, 3}, 3));
  std::string log = readFile(options.logFile);
  EXPECT_EQ(std::count(log.begin(), log.end(), '\n'), 3) << log;
  EXPECT_NE(log.find("{\"step\": 2, \"time_ms\": "), std::string::npos) << log;
  std::string text = readFile(options.traceFile);
  nlohmann::json trace = nlohmann::json::parse(text); // throws if broken
  EXPECT_EQ(trace["otherData"]["step"], 3) << text;
  bool allToAll = false;
  for (const nlohmann::json &event : trace["traceEvents"])
    if (event["ph"] == "X" && event["name"] == "all_to_all x") {
      allToAll = true;
      EXPECT_EQ(event["pid"], 0);
      EXPECT_EQ(event["tid"], 1); // communication
      EXPECT_GE(event["dur"].get<double>(), 0);
      EXPECT_EQ(event["args"]["phase"], "forward");
    }
  EXPECT_TRUE(allToAll) << text;
}

TEST(RuntimeRunPlan, MlpMatchesTheReference) {
  for (bool tensorParallel : {false, true})
    for (auto kind :
         {pf::Optimizer::SGD, pf::Optimizer::MOMENTUM, pf::Optimizer::ADAM}) {
      RunOptions options;
      options.steps = 2;
      options.verify = true;
      std::string out;
      ASSERT_EQ(run(mlpPlan(1, tensorParallel, kind), options, &out), 0) << out;
      EXPECT_NE(out.find("verify passed"), std::string::npos) << out;
      for (const char *row :
           {"loss    loss", "grad    fc1.weight", "weight  fc2.bias"})
        EXPECT_NE(out.find(row), std::string::npos) << row << "\n" << out;
    }
}

TEST(RuntimeRunPlan, ProfileChargesWorkBeforeACommunicationToTheKernel) {
  // The tensor-parallel MLP on one rank: fc2's forward, then the
  // all-reduce of its partial sums. Between the two, a 64 MiB fill (the
  // executor's buffer work): it delays what the all-reduce sends, so the
  // profile charges it to fc2, not to nothing.
  pf::Plan plan = mlpPlan(1, /*tensorParallel=*/true);
  pf::Program &program = *plan.mutable_programs(0);
  int32_t nextId = 0, collective = -1;
  for (int i = 0; i < program.instructions_size(); ++i) {
    const Instruction &instr = program.instructions(i);
    if (instr.has_alloc())
      nextId = std::max(nextId, instr.alloc().buffer().id() + 1);
    if (collective < 0 && instr.has_collective())
      collective = i;
  }
  ASSERT_GE(collective, 1);
  ASSERT_TRUE(program.instructions(collective - 1).has_kernel());
  std::vector<Instruction> work(3);
  pf::Buffer *scratch = work[0].mutable_alloc()->mutable_buffer();
  scratch->set_id(nextId);
  scratch->set_tensor(-1);
  scratch->add_shape(int64_t(16) << 20);
  work[1].mutable_fill()->set_buffer(nextId);
  work[1].mutable_fill()->set_value(1.0f);
  work[2].mutable_free()->set_buffer(nextId);
  google::protobuf::RepeatedPtrField<Instruction> instructions;
  for (int i = 0; i < program.instructions_size(); ++i) {
    if (i == collective)
      for (const Instruction &w : work)
        *instructions.Add() = w;
    *instructions.Add() = program.instructions(i);
  }
  program.mutable_instructions()->Swap(&instructions);

  std::string dir = tempDir("profile-before-communication");
  RunOptions options;
  options.steps = 3;
  options.profileFile = dir + "/profile.json";
  std::string out;
  ASSERT_EQ(run(plan, options, &out), 0) << out;
  nlohmann::json profile = nlohmann::json::parse(readFile(options.profileFile));
  // fc1 [4, 8] x [8, 4] and fc2 [4, 4] x [4, 3]: kernels of a few
  // microseconds; filling 64 MiB takes milliseconds.
  double fc1 = -1, fc2 = -1;
  for (const nlohmann::json &e : profile["entries"])
    if (e["op"] == "ppc.linear" && e["phase"] == "forward")
      (e["operand_shapes"][0][1] == 8 ? fc1 : fc2) = e["seconds"];
  ASSERT_GT(fc1, 0) << profile.dump();
  ASSERT_GT(fc2, 0) << profile.dump();
  EXPECT_GT(fc2, 1e-3) << profile.dump();
  EXPECT_GT(fc2, 20 * fc1) << profile.dump();
}

int32_t tensorNamed(const pf::Plan &plan, const std::string &name) {
  for (int32_t t = 0; t < plan.tensors_size(); ++t)
    if (plan.tensors(t).name() == name)
      return t;
  ADD_FAILURE() << "no tensor " << name;
  return 0;
}

TEST(RuntimeReference, FollowsThePartitionedSideOfAKink) {
  // The MLP's relu input h: the partitioned run saw its smallest positive
  // element on the other side of 0.
  pf::Plan plan = mlpPlan(1, false);
  DataSource data(plan, 1, InitMode::Plan);
  absl::StatusOr<std::unique_ptr<Backend>> started = createBackend("cpu", {});
  ASSERT_TRUE(started.ok()) << started.status().message();
  std::unique_ptr<Backend> backend = std::move(*started);
  ReferenceStep own;
  ASSERT_EQ(statusText(runReferenceStep(plan, data, 1, *backend, 1.0, nullptr,
                                        1e-4, own)),
            "");
  const int32_t h = tensorNamed(plan, "h"), a = tensorNamed(plan, "a");
  const std::vector<float> &x = own.values[h];
  size_t i = x.size();
  for (size_t j = 0; j < x.size(); ++j)
    if (x[j] > 0 && own.grads[a][j] != 0 && (i == x.size() || x[j] < x[i]))
      i = j;
  ASSERT_LT(i, x.size());
  KinkInputs partitioned{{h, x}};
  partitioned[h][i] = -x[i];
  partitioned[h][(i + 1) % x.size()] = NAN; // no rank read it: its own side

  // Within `closeness`: the reference takes relu's derivative 0 there.
  ReferenceStep followed;
  ASSERT_EQ(statusText(runReferenceStep(plan, data, 1, *backend, 1.0,
                                        &partitioned, 1.0, followed)),
            "");
  EXPECT_EQ(followed.kinksFollowed, 1);
  EXPECT_EQ(followed.kinksApart, 0);
  EXPECT_EQ(followed.grads[h][i], 0.0f);
  EXPECT_NE(own.grads[h][i], 0.0f);
  for (size_t j = 0; j < x.size(); ++j)
    if (j != i)
      EXPECT_EQ(followed.grads[h][j], own.grads[h][j]) << j;
  const int32_t w1 = tensorNamed(plan, "fc1.weight");
  EXPECT_NE(followed.grads[w1], own.grads[w1]);
  EXPECT_EQ(followed.values[a], own.values[a]); // the forward is its own

  // Further apart than round-off: counted, not followed.
  ReferenceStep apart;
  ASSERT_EQ(statusText(runReferenceStep(plan, data, 1, *backend, 1.0,
                                        &partitioned, 1e-12, apart)),
            "");
  EXPECT_EQ(apart.kinksFollowed, 0);
  EXPECT_EQ(apart.kinksApart, 1);
  EXPECT_EQ(apart.grads[w1], own.grads[w1]);
}

TEST(RuntimeRunPlan, VerifyCatchesAWrongPlan) {
  // The gradient of fc2.weight is never computed: verify must notice.
  pf::Plan plan = mlpPlan(1, false);
  auto *instrs = plan.mutable_programs(0)->mutable_instructions();
  for (auto &instr : *instrs)
    if (instr.has_kernel_backward() && instr.kernel_backward().op() == 2)
      instr.mutable_kernel_backward()->set_input_grads(1, -1);
  RunOptions options;
  options.steps = 1;
  options.verify = true;
  std::string out;
  EXPECT_EQ(run(plan, options, &out), 1);
  EXPECT_NE(out.find("verify FAILED"), std::string::npos) << out;
  EXPECT_NE(out.find("fc2.weight"), std::string::npos) << out;
}

/// `plan` with every float32 tensor in `dtype` (what ppc-convert-dtype
/// makes of a model).
pf::Plan inDType(pf::Plan plan, const std::string &dtype) {
  for (pf::Tensor &t : *plan.mutable_tensors())
    if (t.dtype() == "f32")
      t.set_dtype(dtype);
  return plan;
}

TEST(RuntimeRunPlan, MixedPrecisionMatchesTheReferenceInItsTypes) {
  for (const char *dtype : {"bf16", "f16"})
    for (bool tensorParallel : {false, true}) {
      RunOptions options;
      options.steps = 2;
      options.verify = true;
      options.lossScale = dtype == std::string("f16") ? "256" : "";
      std::string out;
      ASSERT_EQ(
          run(inDType(mlpPlan(1, tensorParallel, pf::Optimizer::ADAM), dtype),
              options, &out),
          0)
          << out;
      EXPECT_NE(out.find("verify passed"), std::string::npos) << out;
      EXPECT_NE(out.find(dtype == std::string("f16") ? "tolerance 0.01"
                                                     : "tolerance 0.05"),
                std::string::npos)
          << out;
      EXPECT_NE(out.find("grad    fc1.weight"), std::string::npos) << out;
    }
}

TEST(RuntimeRunPlan, VerifyCatchesAWrongPlanInBf16) {
  pf::Plan plan = inDType(mlpPlan(1, false), "bf16");
  for (auto &instr : *plan.mutable_programs(0)->mutable_instructions())
    if (instr.has_kernel_backward() && instr.kernel_backward().op() == 2)
      instr.mutable_kernel_backward()->set_input_grads(1, -1);
  RunOptions options;
  options.steps = 1;
  options.verify = true;
  std::string out;
  EXPECT_EQ(run(plan, options, &out), 1);
  EXPECT_NE(out.find("verify FAILED"), std::string::npos) << out;
}

TEST(RuntimeRunPlan, OverflowingGradientsSkipTheUpdateOnBothSides) {
  // 1e6 is beyond f16: the seeded loss gradient is infinite every step.
  pf::Plan plan = inDType(mlpPlan(1, false), "f16");
  RunOptions options;
  options.steps = 3;
  options.verify = true;
  options.lossScale = "1e6";
  std::string out;
  ASSERT_EQ(run(plan, options, &out), 0) << out;
  EXPECT_NE(out.find("overflowed at loss scale 1e+06 on both sides"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("loss scale 1e+06 (static), 3 of 3 steps skipped"),
            std::string::npos)
      << out;
  // Neither side updated: the weights agree exactly.
  const size_t row = out.find("weight  fc1.weight");
  ASSERT_NE(row, std::string::npos) << out;
  EXPECT_NE(out.substr(row, out.find('\n', row) - row)
                .find("0.000e+00      0.000e+00"),
            std::string::npos)
      << out;

  // Dynamic: the scale halves at each overflow and training goes on.
  options.lossScale = "dynamic";
  options.verify = false;
  options.steps = 2;
  ASSERT_EQ(run(plan, options, &out), 0) << out;
  EXPECT_NE(out.find("(dynamic)"), std::string::npos) << out;

  options.lossScale = "lots";
  EXPECT_EQ(run(plan, options, nullptr, &out), 1);
  EXPECT_NE(out.find("--loss-scale needs 'dynamic', 'none' or a positive "
                     "number, not 'lots'"),
            std::string::npos)
      << out;
}

TEST(RuntimeRunPlan, ResumedRunsEndBitIdentical) {
  std::string dir = tempDir("resume");
  pf::Plan plan = fakeTrainingPlan(1, pf::Optimizer::ADAM);
  RunOptions straight;
  straight.steps = 4;
  straight.checkpointDir = dir + "/straight";
  RunOptions half;
  half.steps = 2;
  half.checkpointDir = dir + "/half";
  RunOptions resumed;
  resumed.steps = 2;
  resumed.resumeDir = dir + "/half";
  resumed.checkpointDir = dir + "/resumed";
  resumed.checkpointEvery = 1;
  std::string out;
  ASSERT_EQ(run(plan, straight, &out), 0) << out;
  ASSERT_EQ(run(plan, half, &out), 0) << out;
  ASSERT_EQ(run(plan, resumed, &out), 0) << out;
  EXPECT_NE(out.find("step 3/4  loss "), std::string::npos) << out;
  const std::string last = "/" + stepDirectoryName(4, false);
  EXPECT_EQ(latestDir(dir + "/straight"), dir + "/straight" + last);
  EXPECT_EQ(latestDir(dir + "/resumed"), dir + "/resumed" + last);
  EXPECT_EQ(readFile(dir + "/straight" + last + "/rank-0.ckpt"),
            readFile(dir + "/resumed" + last + "/rank-0.ckpt"));
  EXPECT_EQ(readFile(dir + "/straight" + last + "/COMPLETE"),
            readFile(dir + "/resumed" + last + "/COMPLETE"));
  Checkpoint c;
  ASSERT_EQ(statusText(readCheckpointFile(
                dir + "/resumed" + last + "/rank-0.ckpt", c)),
            "");
  EXPECT_EQ(c.steps, 4);
  ASSERT_EQ(c.buffers.size(), 2u); // w and the frozen s
  EXPECT_EQ(c.buffers[0].optimizer.steps, 4);
  EXPECT_EQ(c.buffers[1].values, (std::vector<float>{1, 1, 1}));
}

TEST(RuntimeRunPlan, ResumeErrors) {
  std::string dir = tempDir("resume-errors");
  RunOptions write;
  write.steps = 1;
  write.checkpointDir = dir + "/a";
  std::string out, err;
  ASSERT_EQ(run(fakeTrainingPlan(1, pf::Optimizer::SGD), write, &out), 0);

  RunOptions resume;
  resume.resumeDir = dir + "/a";
  EXPECT_EQ(run(fakeTrainingPlan(1, pf::Optimizer::ADAM), resume, &out, &err),
            1);
  // Another plan of another optimizer: its state does not fit.
  EXPECT_NE(err.find("written under plan"), std::string::npos) << err;
  EXPECT_NE(err.find("optimizer state (0 slots a weight) does not fit the "
                     "plan's optimizer (2)"),
            std::string::npos)
      << err;

  // A rank file from another step than COMPLETE: a run died while writing.
  RunOptions more = write;
  more.steps = 2;
  more.checkpointDir = dir + "/b";
  ASSERT_EQ(run(fakeTrainingPlan(1, pf::Optimizer::SGD), more, &out), 0);
  std::string cmd = "cp '" + latestDir(dir + "/a") + "/rank-0.ckpt' '" +
                    latestDir(dir + "/b") + "/'";
  ASSERT_EQ(std::system(cmd.c_str()), 0);
  resume.resumeDir = dir + "/b";
  EXPECT_EQ(run(fakeTrainingPlan(1, pf::Optimizer::SGD), resume, &out, &err),
            1);
  EXPECT_NE(err.find("is of step 1 but"), std::string::npos) << err;

  resume.resumeDir = dir + "/none";
  EXPECT_EQ(run(fakeTrainingPlan(1, pf::Optimizer::SGD), resume, &out, &err),
            1);
  EXPECT_EQ(err, "ppc-run: cannot resume from '" + dir +
                     "/none': no such directory\n");

  // LATEST names a step directory without COMPLETE.
  cmd = "rm '" + latestDir(dir + "/b") + "/COMPLETE'";
  ASSERT_EQ(std::system(cmd.c_str()), 0);
  resume.resumeDir = dir + "/b";
  EXPECT_EQ(run(fakeTrainingPlan(1, pf::Optimizer::SGD), resume, &out, &err),
            1);
  EXPECT_NE(err.find("no COMPLETE marker"), std::string::npos) << err;

  // A directory in the layout before step directories.
  std::string old = tempDir("resume-old-layout");
  writeFile(old + "/COMPLETE", "ppc checkpoint 1\nsteps 1\nranks 1\nplan "
                               "0123456789abcdef\n");
  writeFile(old + "/rank-0.ckpt", "PPCCKPT");
  resume.resumeDir = old;
  EXPECT_EQ(run(fakeTrainingPlan(1, pf::Optimizer::SGD), resume, &out, &err),
            1);
  EXPECT_EQ(err, "ppc-run: '" + old +
                     "' holds a checkpoint in the old layout (rank files and "
                     "COMPLETE directly in it); this ppc-run resumes only "
                     "from step directories named by LATEST (checkpoint "
                     "layout 2)\n");
  // An empty directory.
  resume.resumeDir = tempDir("resume-empty");
  EXPECT_EQ(run(fakeTrainingPlan(1, pf::Optimizer::SGD), resume, &out, &err),
            1);
  EXPECT_NE(err.find("has no finished checkpoint (no LATEST"),
            std::string::npos)
      << err;
}

std::vector<std::string> listDir(const std::string &dir) {
  std::string cmd = "ls '" + dir + "' > '" + dir + ".list'";
  EXPECT_EQ(std::system(cmd.c_str()), 0);
  std::istringstream in(readFile(dir + ".list"));
  std::vector<std::string> names;
  for (std::string name; in >> name;)
    names.push_back(name);
  return names;
}

TEST(RuntimeRunPlan, CheckpointsKeptAndRewritten) {
  std::string dir = tempDir("keep");
  pf::Plan plan = fakeTrainingPlan(1, pf::Optimizer::ADAM);
  RunOptions options;
  options.steps = 5;
  options.checkpointDir = dir + "/c";
  options.checkpointEvery = 1;
  std::string out, err;
  ASSERT_EQ(run(plan, options, &out, &err), 0) << err;
  // LOCK: the lock a run holds on the directory (kept; free once it ends).
  EXPECT_EQ(
      listDir(options.checkpointDir),
      (std::vector<std::string>{"LATEST", "LOCK", stepDirectoryName(4, false),
                                stepDirectoryName(5, false)}));
  options.keepCheckpoints = 3;
  ASSERT_EQ(run(plan, options, &out, &err), 0) << err;
  EXPECT_EQ(listDir(options.checkpointDir),
            (std::vector<std::string>{
                "LATEST", "LOCK", stepDirectoryName(3, false),
                stepDirectoryName(4, false), stepDirectoryName(5, false)}));
  // A new run that writes the step LATEST names writes it under the other
  // name, so LATEST keeps naming a complete one.
  options.checkpointEvery = 0;
  options.keepCheckpoints = 1;
  ASSERT_EQ(run(plan, options, &out, &err), 0) << err;
  EXPECT_EQ(
      listDir(options.checkpointDir),
      (std::vector<std::string>{"LATEST", "LOCK", stepDirectoryName(5, true)}));
  ASSERT_EQ(run(plan, options, &out, &err), 0) << err;
  EXPECT_EQ(listDir(options.checkpointDir),
            (std::vector<std::string>{"LATEST", "LOCK",
                                      stepDirectoryName(5, false)}));
  RunOptions resume;
  resume.steps = 1;
  resume.resumeDir = options.checkpointDir;
  EXPECT_EQ(run(plan, resume, &out, &err), 0) << err;
  EXPECT_NE(out.find("step 6/6"), std::string::npos) << out;
  // Steps after LATEST's belong to a run this one replaced.
  options.steps = 3;
  options.keepCheckpoints = 2;
  ASSERT_EQ(run(plan, options, &out, &err), 0) << err;
  EXPECT_EQ(listDir(options.checkpointDir),
            (std::vector<std::string>{"LATEST", "LOCK",
                                      stepDirectoryName(3, false)}));
  options.keepCheckpoints = 0;
  EXPECT_EQ(run(plan, options, &out, &err), 1);
  EXPECT_EQ(err, "ppc-run: --keep-checkpoints must be at least 1\n");
}

/// Runs `options` with the k-th checkpoint filesystem step failing: as an
/// error in this process, or as a kill in a child process. Returns the exit
/// status and the filesystem steps counted.
int runWithFault(const pf::Plan &plan, const RunOptions &options, int64_t k,
                 bool kill, std::string &err, int64_t &steps) {
  std::string out;
  if (!kill) {
    checkpointFaults() = {k, false, 0};
    int code = run(plan, options, &out, &err);
    steps = checkpointFaults().count;
    checkpointFaults() = {};
    return code;
  }
  pid_t child = fork();
  if (child == 0) {
    checkpointFaults() = {k, true, 0};
    _exit(run(plan, options, &out, &err));
  }
  int status = 0;
  waitpid(child, &status, 0);
  steps = k;
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

// A checkpoint of another plan resumes from the overlap of its pieces with
// this plan's buffers: here its rank file is edited as another plan would
// have written it, and what it lacks or holds too much of is named.
TEST(RuntimeRunPlan, ReshardedResumeErrors) {
  std::string dir = tempDir("reshard-errors");
  RunOptions write;
  write.steps = 1;
  write.checkpointDir = dir + "/a";
  std::string out, err;
  const pf::Plan plan = fakeTrainingPlan(1, pf::Optimizer::ADAM);
  ASSERT_EQ(run(plan, write, &out), 0);
  const std::string step = latestDir(dir + "/a");
  Checkpoint saved;
  ASSERT_EQ(statusText(readCheckpointFile(step + "/rank-0.ckpt", saved)), "");
  ASSERT_FALSE(saved.buffers.empty());
  ASSERT_EQ(saved.buffers[0].tensorName,
            plan.tensors(saved.buffers[0].tensor).name());

  // Rewrites the checkpoint as written under another plan (another hash).
  auto rewrite = [&](const Checkpoint &c) {
    Checkpoint other = c;
    other.planHash = c.planHash ^ 1;
    ASSERT_EQ(statusText(writeCheckpointFile(step + "/rank-0.ckpt", other)),
              "");
    CheckpointMarker marker;
    ASSERT_EQ(statusText(readCompleteMarker(step, marker)), "");
    marker.planHash = other.planHash;
    ASSERT_EQ(statusText(writeCompleteMarker(step, marker)), "");
  };
  RunOptions resume;
  resume.resumeDir = dir + "/a";
  resume.steps = 1;

  // Unchanged but for the hash: resumes, and says it resharded.
  rewrite(saved);
  EXPECT_EQ(run(plan, resume, &out, &err), 0) << err;
  EXPECT_NE(out.find("under another plan"), std::string::npos) << out;

  // The weight's last element missing.
  Checkpoint partial = saved;
  CheckpointBuffer &w = partial.buffers[0];
  ASSERT_GE(w.hi.size(), 1u);
  ASSERT_GT(w.hi[0] - w.lo[0], 1);
  const int64_t rowLength =
      static_cast<int64_t>(w.values.size()) / (w.hi[0] - w.lo[0]);
  w.hi[0] -= 1;
  w.values.resize(w.values.size() - rowLength);
  w.stateLo = w.lo;
  w.stateHi = w.hi;
  for (std::vector<float> &slot : w.optimizer.slots)
    slot.resize(w.values.size());
  rewrite(partial);
  EXPECT_EQ(run(plan, resume, &out, &err), 1);
  EXPECT_NE(err.find("the checkpoint holds no value for part of '" +
                     w.tensorName + "'"),
            std::string::npos)
      << err;

  // A weight this plan does not have.
  Checkpoint extra = saved;
  extra.buffers.push_back(saved.buffers[0]);
  extra.buffers.back().tensorName = "not-in-the-model";
  rewrite(extra);
  EXPECT_EQ(run(plan, resume, &out, &err), 1);
  EXPECT_NE(err.find("holds weight 'not-in-the-model', which this plan does "
                     "not have"),
            std::string::npos)
      << err;

  // A piece beyond the tensor.
  Checkpoint beyond = saved;
  beyond.buffers[0].lo[0] += 1;
  beyond.buffers[0].hi[0] += 1;
  beyond.buffers[0].stateLo = beyond.buffers[0].lo;
  beyond.buffers[0].stateHi = beyond.buffers[0].hi;
  rewrite(beyond);
  EXPECT_EQ(run(plan, resume, &out, &err), 1);
  EXPECT_NE(err.find("lies outside its shape in this plan"), std::string::npos)
      << err;

  // A file from before tensor names (format 3) resumes only under its plan.
  Checkpoint unnamed = saved;
  for (CheckpointBuffer &b : unnamed.buffers)
    b.tensorName.clear();
  rewrite(unnamed);
  EXPECT_EQ(run(plan, resume, &out, &err), 1);
  EXPECT_NE(err.find("resumes only under the plan that wrote it"),
            std::string::npos)
      << err;
}

TEST(RuntimeCheckpoint, EveryInjectedFaultLeavesTheOldOrTheNewCheckpoint) {
  const std::string dir = tempDir("faults");
  const pf::Plan plan = fakeTrainingPlan(1, pf::Optimizer::ADAM);
  std::string out, err;
  // References: the checkpoints of steps 1 to 4 of one straight run.
  RunOptions straight;
  straight.steps = 4;
  straight.checkpointDir = dir + "/straight";
  straight.checkpointEvery = 1;
  straight.keepCheckpoints = 4;
  ASSERT_EQ(run(plan, straight, &out, &err), 0) << err;
  // The start: checkpoints of steps 1 and 2.
  RunOptions start = straight;
  start.steps = 2;
  start.checkpointDir = dir + "/start";
  ASSERT_EQ(run(plan, start, &out, &err), 0) << err;
  // Resumed for steps 3 and 4, each checkpointed (step 1's is deleted).
  RunOptions resumed;
  resumed.steps = 2;
  resumed.resumeDir = resumed.checkpointDir = dir + "/work";
  resumed.checkpointEvery = 1;
  RunOptions check;
  check.steps = 1;
  check.resumeDir = resumed.checkpointDir;
  check.quiet = true;

  int64_t total = 0;
  for (bool kill : {false, true}) {
    for (int64_t k = 1;; ++k) {
      SCOPED_TRACE((kill ? "kill at filesystem step " : "error at step ") +
                   std::to_string(k));
      std::string cmd = "rm -rf '" + dir + "/work' && cp -r '" + dir +
                        "/start' '" + dir + "/work'";
      ASSERT_EQ(std::system(cmd.c_str()), 0);
      int64_t steps = 0;
      int code = runWithFault(plan, resumed, k, kill, err, steps);
      if (!kill && steps < k) {
        // Past the last filesystem step: nothing failed.
        ASSERT_EQ(code, 0) << err;
        total = steps;
        break;
      }
      if (kill && k > total)
        break;
      if (kill) {
        EXPECT_EQ(code, kCheckpointFaultExitCode);
      } else {
        EXPECT_NE(err.find("injected fault at checkpoint filesystem step " +
                           std::to_string(k)),
                  std::string::npos)
            << err;
        // Failing to remove an old checkpoint is only a warning.
        EXPECT_EQ(code == 0, err.find("ppc-run: warning: cannot remove old "
                                      "checkpoints") != std::string::npos)
            << err;
      }
      // LATEST names a complete checkpoint equal to the straight run's.
      const std::string latest = latestDir(resumed.checkpointDir);
      ASSERT_NE(latest, "");
      CheckpointMarker marker;
      ASSERT_EQ(statusText(readCompleteMarker(latest, marker)), "");
      EXPECT_GE(marker.steps, 2);
      EXPECT_LE(marker.steps, 4);
      const std::string reference =
          straight.checkpointDir + "/" + stepDirectoryName(marker.steps, false);
      EXPECT_EQ(readFile(latest + "/rank-0.ckpt"),
                readFile(reference + "/rank-0.ckpt"));
      EXPECT_EQ(readFile(latest + "/COMPLETE"),
                readFile(reference + "/COMPLETE"));
      ASSERT_EQ(run(plan, check, &out, &err), 0) << err;
    }
  }
  // Directory creation, 3 files of 4 steps each per checkpoint, and the
  // removal of step 1's directory.
  EXPECT_GE(total, 2 * 13 + 4);
}

TEST(RuntimeRunPlan, NonfiniteLossStopsTraining) {
  // A learning rate of 1e30 makes the second step's loss overflow.
  pf::Plan plan = mlpPlan(1, false);
  plan.mutable_optimizer()->set_learning_rate(1e30);
  RunOptions options;
  options.steps = 3;
  std::string out, err;
  EXPECT_EQ(run(plan, options, &out, &err), 1);
  // Infinite logits make an infinite or a NaN loss (inf - inf in the
  // log-softmax), as the kernels' order of operations has it.
  const std::string value =
      err.find(" is nan;") != std::string::npos ? "nan" : "inf";
  EXPECT_EQ(err, "ppc-run: rank 0: the loss of step 2 is " + value +
                     "; stopping (--allow-nonfinite trains on)\n");
  EXPECT_NE(out.find("step 2/3  loss " + value), std::string::npos) << out;
  EXPECT_EQ(out.find("step 3/3"), std::string::npos) << out;
  options.allowNonfinite = true;
  EXPECT_EQ(run(plan, options, &out, &err), 0) << err;
  EXPECT_NE(out.find("step 3/3  loss "), std::string::npos) << out;
}

TEST(RuntimeRunPlan, NonfiniteInputs) {
  std::string dir = tempDir("nonfinite-input");
  std::vector<float> x(4 * 8, 0.5f);
  x[1 * 8 + 2] = NAN;
  x[3 * 8 + 7] = INFINITY;
  ASSERT_EQ(statusText(writeNpy(dir + "/x.npy", {4, 8}, x.data())), "");
  RunOptions options;
  options.steps = 1;
  options.inputs = {{"x", dir + "/x.npy"}};
  std::string out, err;
  EXPECT_EQ(run(mlpPlan(1, false), options, &out, &err), 1);
  EXPECT_EQ(err, "ppc-run: --input x: '" + dir +
                     "/x.npy' holds 2 NaN or infinite values (the first, "
                     "nan, at [1, 2]); --allow-nonfinite accepts them\n");
  EXPECT_EQ(out, "");
  options.allowNonfinite = true;
  EXPECT_EQ(run(mlpPlan(1, false), options, &out, &err), 0) << err;
  EXPECT_EQ(err, "ppc-run: warning: --input x: '" + dir +
                     "/x.npy' holds 2 NaN or infinite values (the first, "
                     "nan, at [1, 2])\n");
}

TEST(RuntimeRunPlan, SizesCheckedBeforeAllocating) {
  std::string out, err;
  RunOptions options;
  options.steps = 1;
  EXPECT_EQ(run(hugeBatchPlan(1, 1000000000), options, &out, &err), 1);
  EXPECT_EQ(err.rfind("ppc-run: rank 0 needs 2920.6 GiB for its buffers (the "
                      "largest: tensor 'x' [0:1000000000, 0:784], 2920.6 "
                      "GiB) but this machine has ",
                      0),
            0u)
      << err;
  // --verify's whole tensors count too.
  options.verify = true;
  EXPECT_EQ(run(hugeBatchPlan(1, 100000000), options, &out, &err), 1);
  EXPECT_NE(err.find("and 584.1 GiB for --verify's whole tensors"),
            std::string::npos)
      << err;

  // Element counts whose bytes overflow int64, and negative dims.
  for (int64_t batch : {int64_t(1) << 62, INT64_MAX})
    EXPECT_EQ(statusText(validatePlan(hugeBatchPlan(1, batch))),
              "tensor 'x' of shape [" + std::to_string(batch) +
                  ", 784] has more than 2^61 elements: its float32 bytes do "
                  "not fit in 64 bits");
  EXPECT_EQ(statusText(validatePlan(hugeBatchPlan(1, -4))),
            "tensor 'x' has a negative dim (shape [-4, 784])");
  PlanBuilder b(1, false);
  b.scratch(0, {int64_t(1) << 40, int64_t(1) << 30});
  EXPECT_EQ(statusText(validatePlan(b.plan)),
            "rank 0: instruction 0: scratch buffer 0 of shape [1099511627776, "
            "1073741824] has more than 2^61 elements: its float32 bytes do "
            "not fit in 64 bits");
  // Boxes outside their tensor.
  pf::Plan outside = hugeBatchPlan(1, 8);
  outside.mutable_programs(0)
      ->mutable_instructions(1)
      ->mutable_alloc()
      ->mutable_buffer()
      ->mutable_box()
      ->set_hi(0, 9);
  EXPECT_EQ(statusText(validatePlan(outside)),
            "rank 0: instruction 1: box dim 0 [0, 9) "
            "is outside tensor 'x'");
}

TEST(RuntimeRunPlan, Errors) {
  std::string out, err;
  RunOptions options;
  EXPECT_EQ(run(dataMovementPlan(2), options, &out, &err), 1);
  EXPECT_EQ(err, "ppc-run: this plan was made for 2 ranks (machine test2) but "
                 "runs on 1; start it with mpirun -np 2\n");

  pf::Plan plan = mlpPlan(1, false);
  plan.mutable_ops(1)->set_kind("ppc.no_such_op");
  options.steps = 2;
  EXPECT_EQ(run(plan, options, &out, &err), 1);
  EXPECT_NE(err.find("ppc-run: rank 0: kernel error in op 'relu' (forward, "
                     "stage 0): ppc.no_such_op: the cpu backend has no "
                     "forward kernel for this op (instruction "),
            std::string::npos)
      << err;
  EXPECT_NE(err.find("of step 1, phase forward, op relu)"), std::string::npos)
      << err;

  // An all_gather whose pieces do not make up its result.
  PlanBuilder b(1, false);
  int x = b.tensor("x", {4, 2}, Tensor::INPUT);
  int piece = b.alloc(0, x, {0, 0}, {2, 2});
  int whole = b.whole(0, x);
  b.collective(0, Instruction::ALL_GATHER, {0}, piece, whole, 0);
  EXPECT_EQ(run(b.plan, options, &out, &err), 1);
  EXPECT_NE(err.find("all_gather over group [0]: the pieces end at 2 along "
                     "axis 0, not at 4"),
            std::string::npos)
      << err;

  options.verify = true;
  options.resumeDir = "somewhere";
  EXPECT_EQ(run(dataMovementPlan(1), options, &out, &err), 1);
  EXPECT_NE(err.find("cannot be combined with --resume"), std::string::npos);
}

} // namespace
