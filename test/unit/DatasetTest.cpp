//===- DatasetTest.cpp - --data shards and --export-onnx -----------------===//
//
// The dataset reader against records written here (which record each step
// and row gets, shuffling as a permutation per epoch, boxes as slices of the
// batch, prefetched reads equal to direct ones, every error), and the ONNX
// weight export against bit patterns of float16 and bfloat16.
//
//===----------------------------------------------------------------------===//

#include "StatusText.h"
#include "TestPlans.h"

#include "ppc/Runtime/Checkpoint.h"
#include "ppc/Runtime/DataSource.h"
#include "ppc/Runtime/Dataset.h"
#include "ppc/Runtime/Npy.h"
#include "ppc/Runtime/OnnxExport.h"

#include "onnx/onnx_pb.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <limits>
#include <set>
#include <sys/stat.h>
#include <unistd.h>

using ppc::test::statusText;

using namespace ppc::runtime;
using namespace ppc::runtime::testing;
using Index = std::vector<int64_t>;

namespace {

std::string freshDir(const std::string &name) {
  std::string dir = ::testing::TempDir() + "ppc-dataset-test-" +
                    std::to_string(getpid()) + "-" + name;
  EXPECT_EQ(std::system(("rm -rf '" + dir + "'").c_str()), 0);
  EXPECT_EQ(statusText(makeDirectories(dir)), "");
  return dir;
}

/// x [batch, 3] and labels [batch] (10 classes).
pf::Plan inputPlan(int64_t batch) {
  PlanBuilder b(1, false);
  b.tensor("x", {batch, 3}, Tensor::INPUT);
  int labels = b.tensor("labels", {batch}, Tensor::INPUT);
  b.plan.mutable_tensors(labels)->set_int_max(10);
  return b.plan;
}

/// `records` records: x row r is (100 r, 100 r + 1, 100 r + 2), label r %
/// 10; x in shards of at most `shard` records, labels in one file.
void writeRecords(const std::string &dir, int64_t records, int64_t shard) {
  ASSERT_EQ(statusText(makeDirectories(dir + "/x")), "");
  for (int64_t first = 0; first < records; first += shard) {
    const int64_t n = std::min(shard, records - first);
    std::vector<float> x;
    for (int64_t r = first; r < first + n; ++r)
      for (int c = 0; c < 3; ++c)
        x.push_back(static_cast<float>(100 * r + c));
    char name[32];
    std::snprintf(name, sizeof name, "/x/%03d.npy", int(first / shard));
    ASSERT_EQ(statusText(writeNpy(dir + name, {n, 3}, x.data())), "");
  }
  std::vector<float> labels;
  for (int64_t r = 0; r < records; ++r)
    labels.push_back(static_cast<float>(r % 10));
  ASSERT_EQ(statusText(writeNpy(dir + "/labels.npy", {records}, labels.data())),
            "");
}

std::vector<float> load(Dataset &data, int32_t tensor, const Index &lo,
                        const Index &hi, int64_t step) {
  int64_t n = 1;
  for (size_t d = 0; d < lo.size(); ++d)
    n *= hi[d] - lo[d];
  std::vector<float> out(static_cast<size_t>(n), -1.0f);
  EXPECT_EQ(statusText(data.load(tensor, lo, hi, step, out.data())), "");
  return out;
}

std::unique_ptr<Dataset> open(const pf::Plan &plan, const std::string &dir,
                              bool shuffle, bool prefetch = true) {
  Dataset::Options options;
  options.shuffle = shuffle;
  options.prefetch = prefetch;
  options.seed = 5;
  std::unique_ptr<Dataset> data;
  EXPECT_EQ(statusText(Dataset::open(plan, dir, options, data)), "");
  return data;
}

TEST(Dataset, ShuffledIndexIsAPermutation) {
  for (uint64_t n : {1, 2, 3, 5, 64, 1000, 4097})
    for (uint64_t key : {0, 1, 99}) {
      std::set<uint64_t> seen;
      for (uint64_t i = 0; i < n; ++i) {
        uint64_t j = shuffledIndex(i, n, key);
        EXPECT_LT(j, n);
        seen.insert(j);
      }
      EXPECT_EQ(seen.size(), n) << "n " << n << " key " << key;
    }
  int moved = 0, differs = 0;
  for (uint64_t i = 0; i < 1000; ++i) {
    moved += shuffledIndex(i, 1000, 1) != i;
    differs += shuffledIndex(i, 1000, 1) != shuffledIndex(i, 1000, 2);
  }
  EXPECT_GT(moved, 900);
  EXPECT_GT(differs, 900);
}

TEST(Dataset, RecordsInOrderAcrossShardsAndEpochs) {
  const std::string dir = freshDir("order");
  writeRecords(dir, 7, 3); // shards of 3, 3 and 1 records
  pf::Plan plan = inputPlan(4);
  for (bool prefetch : {false, true}) {
    std::unique_ptr<Dataset> data = open(plan, dir, false, prefetch);
    ASSERT_TRUE(data);
    EXPECT_EQ(data->numRecords(), 7);
    EXPECT_EQ(data->batchSize(), 4);
    // Step 2 holds records 4, 5, 6 and then 0 of the second epoch.
    for (int64_t step = 1; step <= 3; ++step) {
      std::vector<float> x = load(*data, 0, {0, 0}, {4, 3}, step);
      std::vector<float> labels = load(*data, 1, {0}, {4}, step);
      for (int64_t row = 0; row < 4; ++row) {
        const int64_t record = ((step - 1) * 4 + row) % 7;
        EXPECT_EQ(data->recordOf(step, row), record);
        EXPECT_EQ(x[row * 3 + 2], 100.0f * record + 2);
        EXPECT_EQ(labels[row], static_cast<float>(record % 10));
      }
    }
  }
}

TEST(Dataset, ShuffleVisitsEveryRecordOncePerEpoch) {
  const std::string dir = freshDir("shuffle");
  writeRecords(dir, 50, 16);
  pf::Plan plan = inputPlan(5);
  std::unique_ptr<Dataset> data = open(plan, dir, true);
  ASSERT_TRUE(data);
  std::vector<int64_t> epochs[3];
  for (int64_t step = 1; step <= 30; ++step) {
    std::vector<float> x = load(*data, 0, {0, 0}, {5, 3}, step);
    for (int64_t row = 0; row < 5; ++row) {
      const int64_t record = data->recordOf(step, row);
      EXPECT_EQ(x[row * 3], 100.0f * record);
      epochs[(step - 1) / 10].push_back(record);
    }
  }
  for (std::vector<int64_t> &epoch : epochs) {
    std::set<int64_t> distinct(epoch.begin(), epoch.end());
    EXPECT_EQ(distinct.size(), 50u);
  }
  EXPECT_NE(epochs[0], epochs[1]);
  // The same seed gives the same order.
  std::unique_ptr<Dataset> again = open(plan, dir, true, false);
  EXPECT_EQ(again->recordOf(17, 3), data->recordOf(17, 3));
}

TEST(Dataset, BoxesAreSlicesOfTheBatch) {
  const std::string dir = freshDir("boxes");
  writeRecords(dir, 11, 4);
  pf::Plan plan = inputPlan(6);
  std::unique_ptr<Dataset> direct = open(plan, dir, true, false);
  std::unique_ptr<Dataset> ahead = open(plan, dir, true, true);
  for (int64_t step = 1; step <= 4; ++step) {
    std::vector<float> whole = load(*direct, 0, {0, 0}, {6, 3}, step);
    // A rank holding rows 2..5, columns 1..2 (a batch and a column split).
    std::vector<float> box = load(*ahead, 0, {2, 1}, {5, 3}, step);
    for (int64_t r = 0; r < 3; ++r)
      for (int64_t c = 0; c < 2; ++c)
        EXPECT_EQ(box[r * 2 + c], whole[(r + 2) * 3 + c + 1]);
    EXPECT_EQ(load(*ahead, 1, {3}, {6}, step),
              load(*direct, 1, {3}, {6}, step));
  }
}

TEST(Dataset, DataSourceReadsInputsFromIt) {
  const std::string dir = freshDir("source");
  writeRecords(dir, 9, 9);
  pf::Plan plan = inputPlan(3);
  DataSource source(plan, 5, InitMode::Plan);
  Dataset::Options options;
  options.shuffle = false;
  ASSERT_EQ(statusText(source.setDataDirectory(dir, options)), "");
  std::vector<float> x(9);
  ASSERT_EQ(statusText(source.load(0, {0, 0}, {3, 3}, 2, x.data())), "");
  EXPECT_EQ(x[0], 300.0f); // step 2 starts at record 3
  EXPECT_EQ(statusText(source.setInputFile("x", dir + "/labels.npy")),
            "--data and --input both give inputs; use one");
}

TEST(Dataset, Errors) {
  pf::Plan plan = inputPlan(4);
  auto error = [&](const std::string &dir, bool allowNonfinite = false) {
    Dataset::Options options;
    options.allowNonfinite = allowNonfinite;
    std::unique_ptr<Dataset> data;
    return statusText(Dataset::open(plan, dir, options, data));
  };
  const std::string root = freshDir("errors");
  EXPECT_EQ(error(root + "/none"), "--data " + root + "/none: not a directory");

  std::string dir = root + "/missing";
  writeRecords(dir, 6, 6);
  std::remove((dir + "/labels.npy").c_str());
  EXPECT_EQ(error(dir), "--data " + dir + ": input 'labels': no '" + dir +
                            "/labels.npy' nor a directory '" + dir +
                            "/labels/' of .npy shards");

  // Something named labels.npy that is no file: said what it is.
  dir = root + "/fifo";
  writeRecords(dir, 6, 6);
  std::remove((dir + "/labels.npy").c_str());
  ASSERT_EQ(mkfifo((dir + "/labels.npy").c_str(), 0644), 0);
  EXPECT_NE(error(dir).find("labels.npy' is a FIFO; --data reads regular "
                            ".npy files"),
            std::string::npos)
      << error(dir);
  dir = root + "/loop";
  writeRecords(dir, 6, 6);
  std::remove((dir + "/labels.npy").c_str());
  ASSERT_EQ(symlink("labels.npy", (dir + "/labels.npy").c_str()), 0);
  EXPECT_NE(error(dir).find("labels.npy' is a symbolic link to nothing "
                            "(dangling, or a loop)"),
            std::string::npos)
      << error(dir);

  dir = root + "/both";
  writeRecords(dir, 6, 6);
  ASSERT_EQ(statusText(makeDirectories(dir + "/labels")), "");
  EXPECT_NE(error(dir).find("exist; keep one"), std::string::npos);

  dir = root + "/shape";
  writeRecords(dir, 6, 6);
  std::vector<float> wrong(12, 0.0f);
  ASSERT_EQ(statusText(writeNpy(dir + "/x/001.npy", {3, 4}, wrong.data())), "");
  EXPECT_NE(error(dir).find("x/001.npy' has shape [3, 4] but input 'x' takes "
                            "records of shape [3] (a file of shape [n, 3])"),
            std::string::npos);

  dir = root + "/count";
  writeRecords(dir, 6, 4);
  std::vector<float> five(5, 1.0f);
  ASSERT_EQ(statusText(writeNpy(dir + "/labels.npy", {5}, five.data())), "");
  EXPECT_NE(error(dir).find("input 'labels' has 5 records but 'x' has 6"),
            std::string::npos);

  dir = root + "/label";
  writeRecords(dir, 6, 6);
  std::vector<float> labels = {0, 1, 2, 10, 4, 5};
  ASSERT_EQ(statusText(writeNpy(dir + "/labels.npy", {6}, labels.data())), "");
  EXPECT_NE(error(dir).find("labels.npy' element 3 (record 3) is 10.000000, "
                            "not a class in [0, 10)"),
            std::string::npos);
  labels[3] = 1.5f;
  ASSERT_EQ(statusText(writeNpy(dir + "/labels.npy", {6}, labels.data())), "");
  EXPECT_NE(error(dir).find("not a class"), std::string::npos);

  dir = root + "/nan";
  writeRecords(dir, 6, 6);
  std::vector<float> x(18, 1.0f);
  x[7] = std::numeric_limits<float>::quiet_NaN();
  ASSERT_EQ(statusText(writeNpy(dir + "/x/000.npy", {6, 3}, x.data())), "");
  EXPECT_NE(error(dir).find("000.npy' element 7 (record 2) is nan; "
                            "--allow-nonfinite accepts"),
            std::string::npos);
  EXPECT_EQ(error(dir, true), "");

  dir = root + "/empty";
  writeRecords(dir, 6, 6);
  std::remove((dir + "/x/000.npy").c_str());
  EXPECT_NE(error(dir).find("x/' has no .npy files"), std::string::npos);

  dir = root + "/scalar";
  ASSERT_EQ(statusText(makeDirectories(dir)), "");
  PlanBuilder scalar(1, false);
  scalar.tensor("s", {}, Tensor::INPUT);
  std::unique_ptr<Dataset> data;
  EXPECT_EQ(statusText(Dataset::open(scalar.plan, dir, {}, data)),
            "--data " + dir +
                ": input 's' is a scalar; a dataset's inputs have a batch "
                "dimension");
}

TEST(Npy, ReadsFloat16Exactly) {
  // numpy's float16: 1, -2.5, 65504 (the largest half), 2^-24 (the
  // smallest subnormal).
  const std::string dir = freshDir("half");
  const uint16_t bits[] = {0x3c00, 0xc100, 0x7bff, 0x0001};
  std::string header =
      "{'descr': '<f2', 'fortran_order': False, 'shape': (4,), }";
  header.resize(118, ' ');
  header += '\n';
  std::ofstream file(dir + "/h.npy", std::ios::binary);
  file.write("\x93NUMPY\x01\x00", 8);
  const char length[2] = {static_cast<char>(header.size()), 0};
  file.write(length, 2);
  file << header;
  file.write(reinterpret_cast<const char *>(bits), sizeof bits);
  file.close();
  NpyArray array;
  ASSERT_EQ(statusText(readNpy(dir + "/h.npy", array)), "");
  ASSERT_EQ(array.data.size(), 4u);
  EXPECT_EQ(array.data[0], 1.0f);
  EXPECT_EQ(array.data[1], -2.5f);
  EXPECT_EQ(array.data[2], 65504.0f);
  EXPECT_EQ(array.data[3], std::ldexp(1.0f, -24));
}

//===----------------------------------------------------------------------===//
// --export-onnx
//===----------------------------------------------------------------------===//

uint16_t halfAt(const onnx::TensorProto &t, size_t i) {
  uint16_t v;
  std::memcpy(&v, t.raw_data().data() + 2 * i, 2);
  return v;
}

TEST(OnnxExport, ReplacesInitializersInTheirOwnType) {
  const std::string dir = freshDir("onnx");
  onnx::ModelProto model;
  model.set_ir_version(8);
  onnx::GraphProto *graph = model.mutable_graph();
  graph->set_name("g");
  auto add = [&](const std::string &name, int type, int64_t n) {
    onnx::TensorProto *t = graph->add_initializer();
    t->set_name(name);
    t->set_data_type(type);
    t->add_dims(n);
    for (int64_t i = 0; i < n; ++i)
      t->add_float_data(0.25f); // replaced below, whatever the type
  };
  add("w32", onnx::TensorProto::FLOAT, 2);
  add("w16", onnx::TensorProto::FLOAT16, 11);
  add("wbf", onnx::TensorProto::BFLOAT16, 3);
  add("w64", onnx::TensorProto::DOUBLE, 1);
  add("untouched", onnx::TensorProto::FLOAT, 1);
  const std::string in = dir + "/in.onnx", out = dir + "/out.onnx";
  {
    std::ofstream file(in, std::ios::binary);
    ASSERT_TRUE(model.SerializeToOstream(&file));
  }

  PlanBuilder b(1, true);
  b.tensor("w32", {2}, Tensor::WEIGHT);
  b.tensor("w16", {11}, Tensor::WEIGHT);
  b.tensor("wbf", {3}, Tensor::FROZEN);
  b.tensor("w64", {1}, Tensor::WEIGHT);
  EXPECT_EQ(statusText(checkOnnxWeights(in, b.plan)), "");
  PlanBuilder other(1, true);
  other.tensor("w32", {3}, Tensor::WEIGHT);
  EXPECT_EQ(statusText(checkOnnxWeights(in, other.plan)),
            "initializer 'w32' of '" + in +
                "' has shape [2] but the plan's weight [3]");
  other.tensor("nope", {1}, Tensor::WEIGHT);
  *other.plan.mutable_tensors(0)->mutable_shape() = b.plan.tensors(0).shape();
  EXPECT_NE(statusText(checkOnnxWeights(in, other.plan))
                .find("has no initializer 'nope'"),
            std::string::npos);

  // A weight the importer stacked from initializers: each one a slice of
  // its dim 0, of the slice's shape.
  PlanBuilder stacked(1, true);
  stacked.tensor("experts", {2, 1}, Tensor::WEIGHT);
  stacked.plan.mutable_tensors(0)->add_stacked_from("w64");
  stacked.plan.mutable_tensors(0)->add_stacked_from("untouched");
  EXPECT_EQ(statusText(checkOnnxWeights(in, stacked.plan)), "");
  stacked.plan.mutable_tensors(0)->set_stacked_from(1, "w32");
  EXPECT_EQ(statusText(checkOnnxWeights(in, stacked.plan)),
            "initializer 'w32' of '" + in +
                "' has shape [2] but the plan's weight 'experts' stacks "
                "parts of shape [1]");
  stacked.plan.mutable_tensors(0)->add_stacked_from("w16");
  EXPECT_EQ(statusText(checkOnnxWeights(in, stacked.plan)),
            "the plan's weight 'experts' stacks 3 initializers but has "
            "shape [2, 1]");

  const float third = 1.0f / 3.0f;
  ASSERT_EQ(statusText(exportOnnxWeights(
                in, out,
                {{"w32", {1.5f, -2.0f}},
                 {"w16",
                  {1.0f, 65504.0f, 1e5f, std::ldexp(1.0f, -24), -2.0f, third,
                   std::numeric_limits<float>::quiet_NaN(), 0.0f,
                   // Above half an ulp rounds up; ties go to even.
                   1.0f + std::ldexp(3.0f, -12), 1.0f + std::ldexp(1.0f, -11),
                   1.0f + std::ldexp(3.0f, -11)}},
                 {"wbf", {1.0f, third, -0.0f}},
                 {"w64", {0.1f}}})),
            "");
  onnx::ModelProto back;
  {
    std::ifstream file(out, std::ios::binary);
    ASSERT_TRUE(back.ParseFromIstream(&file));
  }
  const auto &inits = back.graph().initializer();
  ASSERT_EQ(inits.size(), 5);
  EXPECT_EQ(inits[0].float_data_size(), 0);
  float w32[2];
  ASSERT_EQ(inits[0].raw_data().size(), sizeof w32);
  std::memcpy(w32, inits[0].raw_data().data(), sizeof w32);
  EXPECT_EQ(w32[0], 1.5f);
  EXPECT_EQ(w32[1], -2.0f);
  const uint16_t half[] = {0x3c00, 0x7bff, 0x7c00, 0x0001, 0xc000, 0x3555,
                           0x7e00, 0x0000, 0x3c01, 0x3c00, 0x3c02};
  for (size_t i = 0; i < 11; ++i)
    EXPECT_EQ(halfAt(inits[1], i), half[i]) << i;
  const uint16_t bf[] = {0x3f80, 0x3eab, 0x8000};
  for (size_t i = 0; i < 3; ++i)
    EXPECT_EQ(halfAt(inits[2], i), bf[i]) << i;
  double w64;
  std::memcpy(&w64, inits[3].raw_data().data(), 8);
  EXPECT_EQ(w64, static_cast<double>(0.1f));
  EXPECT_EQ(inits[4].float_data(0), 0.25f);
  EXPECT_TRUE(inits[4].raw_data().empty());

  EXPECT_EQ(statusText(exportOnnxWeights(in, out, {{"nope", {1.0f}}})),
            "'" + in + "' lacks 1 of the trained weights' initializers");
  EXPECT_EQ(statusText(exportOnnxWeights(dir + "/missing.onnx", out, {})),
            "cannot open ONNX model '" + dir + "/missing.onnx'");
}

} // namespace
