//===- RunArgsTest.cpp - ppc-run's command line ---------------------------===//
//
// The parser ppc-run runs: what it accepts, what it says of bad values, and
// a seeded sweep of random command lines built from its own options and
// hostile values (the fuzzer's, bounded for ctest): never an exception or
// a crash, an error or a parse, and every parse within bounds.
//
//===----------------------------------------------------------------------===//

#include "ppc/Runtime/RunArgs.h"
#include "StatusText.h"

#include <gtest/gtest.h>

#include <random>
#include <string>
#include <thread>
#include <vector>

using ppc::test::statusText;

using namespace ppc::runtime;

namespace {

std::string parse(std::vector<std::string> words, RunArgs &args) {
  words.insert(words.begin(), "ppc-run");
  std::vector<const char *> argv;
  for (const std::string &w : words)
    argv.push_back(w.c_str());
  return statusText(
      parseRunArgs(static_cast<int>(argv.size()), argv.data(), args));
}

std::string error(std::vector<std::string> words) {
  RunArgs args;
  return parse(std::move(words), args);
}

TEST(RunArgs, ParsesOptions) {
  RunArgs args;
  ASSERT_EQ(parse({"m.pb", "--steps", "5", "--seed=3", "--checkpoint", "c",
                   "--resume-other-run", "--export-onnx", "a.onnx=b.onnx",
                   "--allow-tf32"},
                  args),
            "");
  EXPECT_TRUE(args.options.allowTf32);
  EXPECT_EQ(args.plan, "m.pb");
  EXPECT_EQ(args.options.steps, 5);
  EXPECT_EQ(args.options.seed, 3u);
  EXPECT_EQ(args.options.checkpointDir, "c");
  EXPECT_TRUE(args.options.resumeOtherRun);
  EXPECT_EQ(args.options.exportOnnxModel, "a.onnx");
  EXPECT_EQ(args.options.exportOnnxOut, "b.onnx");
}

TEST(RunArgs, SaysWhatIsWrong) {
  EXPECT_EQ(error({}), "no plan file given (usage: ppc-run PLAN [options]; "
                       "see --help)");
  EXPECT_EQ(error({"m.pb", "--bogus"}),
            "unknown option '--bogus' (see --help)");
  EXPECT_EQ(error({"m.pb", "--steps", "x"}),
            "--steps needs an integer, not 'x'");
  EXPECT_EQ(error({"m.pb", "--steps"}), "--steps needs an integer");
  EXPECT_EQ(error({"m.pb", "--threads", "0"}),
            "--threads needs a positive integer, not '0'");
  EXPECT_EQ(error({"m.pb", "--steps", "99999999999999999999"}),
            "--steps needs an integer, not '99999999999999999999'");
  EXPECT_EQ(error({"m.pb", "--timeout", "nan"}),
            "--timeout needs a positive number of seconds or 'inf', not 'nan'");
  EXPECT_EQ(error({"m.pb", "--export-onnx", "=x"}),
            "--export-onnx needs MODEL.onnx=OUT.onnx, not '=x'");
  EXPECT_EQ(error({"a.pb", "b.pb"}),
            "unexpected argument 'b.pb' (the plan is 'a.pb')");
}

TEST(RunArgs, LowersThreadsToTheCores) {
  RunArgs args;
  ASSERT_EQ(parse({"m.pb", "--threads", "100000"}, args), "");
  int cores =
      static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  EXPECT_EQ(args.options.threads, cores);
  EXPECT_EQ(args.threadsNote, "--threads 100000: this host has " +
                                  std::to_string(cores) +
                                  (cores == 1 ? " core" : " cores") +
                                  "; using " + std::to_string(cores));
}

TEST(RunArgs, RandomCommandLinesParseOrSayWhy) {
  const std::vector<std::string> names = {"--steps",
                                          "--seed",
                                          "--input",
                                          "--data",
                                          "--no-shuffle",
                                          "--init",
                                          "--weights",
                                          "--verify",
                                          "--verify-backend",
                                          "--verify-tolerance",
                                          "--checkpoint",
                                          "--checkpoint-every",
                                          "--keep-checkpoints",
                                          "--resume",
                                          "--resume-other-run",
                                          "--allow-nonfinite",
                                          "--save-outputs",
                                          "--export-onnx",
                                          "--trace",
                                          "--timeout",
                                          "--loss-scale",
                                          "--backend",
                                          "--threads",
                                          "--overlap",
                                          "--reference-kernels",
                                          "--allow-tf32",
                                          "--profile",
                                          "--profile-device",
                                          "--batches",
                                          "--log",
                                          "--quiet",
                                          "--version",
                                          "--help",
                                          "--bogus",
                                          "-",
                                          "--",
                                          "---",
                                          "--=",
                                          "-x"};
  const std::vector<std::string> values = {"",
                                           "0",
                                           "-1",
                                           "1",
                                           "7",
                                           "1e9",
                                           "inf",
                                           "-inf",
                                           "nan",
                                           "1e400",
                                           "9223372036854775807",
                                           "9223372036854775808",
                                           "-9223372036854775808",
                                           "0x10",
                                           " 3",
                                           "3 ",
                                           "a=b",
                                           "=",
                                           "a=",
                                           "=b",
                                           "x.npy",
                                           "/dev/null",
                                           "cpu",
                                           "cuda",
                                           "dynamic",
                                           "none",
                                           "plan",
                                           "seed",
                                           "\xff\xfe",
                                           "%s%n",
                                           std::string(5000, 'a')};
  std::mt19937_64 rng(1);
  auto pick = [&](const std::vector<std::string> &from) {
    return from[std::uniform_int_distribution<size_t>(0, from.size() - 1)(rng)];
  };
  for (int trial = 0; trial < 20000; ++trial) {
    std::vector<std::string> words;
    int n = std::uniform_int_distribution<int>(0, 6)(rng);
    for (int k = 0; k < n; ++k) {
      std::string name = pick(names);
      switch (rng() % 4) {
      case 0:
        words.push_back(name);
        break;
      case 1:
        words.push_back(name + "=" + pick(values));
        break;
      default:
        words.push_back(name);
        words.push_back(pick(values));
      }
    }
    if (rng() % 2)
      words.insert(words.begin(), "m.pb");
    RunArgs args;
    std::string problem;
    ASSERT_NO_THROW(problem = parse(words, args));
    if (!problem.empty())
      continue;
    if (!args.help && !args.version)
      EXPECT_FALSE(args.plan.empty());
    EXPECT_GE(args.options.threads, 1);
    EXPECT_LE(
        args.options.threads,
        static_cast<int>(std::max(1u, std::thread::hardware_concurrency())));
    EXPECT_GT(args.options.timeout, 0);
  }
}

} // namespace
