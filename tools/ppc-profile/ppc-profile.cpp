//===- ppc-profile.cpp - measure a plan's kernels for the simulator -------===//
//
// FlexFlow's measured costs: every distinct kernel of a plan (every rank's
// program) and of a search's profile requests, run alone on one backend
// with warm-up runs, timed, and written in the simulator's profile format
// for the search to read (ppc/Runtime/KernelProfile.h).
//
//===----------------------------------------------------------------------===//

#include "ppc/Runtime/Backend.h"
#include "ppc/Runtime/DataSource.h"
#include "ppc/Runtime/KernelProfile.h"
#include "ppc/Runtime/OutputFiles.h"
#include "ppc/Runtime/PlanIO.h"

#include "absl/strings/numbers.h"
#include "ppc/Support/Status.h"
#include "ppc/Version.h"

#include <nlohmann/json.hpp>

#include <fstream>
#include <variant>

#include <cstdlib>
#include <iostream>
#include <string>

using namespace ppc::runtime;

static const char kHelp[] = R"(usage: ppc-profile PLAN -o PROFILE.json [options]

Measures the forward and backward of every distinct kernel (op kind, dtype,
operand slice shapes) of PLAN, whatever rank runs it, and of the kernels a
search's configuration space asks for (--requests, written by ppc-opt's
--ppc-auto-parallel="... profile-requests=FILE"), each alone on one device,
and writes their times in the simulator's profile format. A PROFILE.json of
the same device is added to. Search again with profile=PROFILE.json.

options:
  -o FILE                the profile to write (required)
  --details FILE         also each kernel with its op's name, attributes,
                         operand slice shapes and times (JSON)
  --requests FILE        also the kernels of this profile request file
  --backend NAME         where the kernels run (cpu); the build's backends
                         are listed at the end of --help
  --device-name NAME     the device model the profile measures, as the
                         machine description names it (cpu: cpu-epyc-2core;
                         cuda: required, e.g. H100-SXM5-80GB of dgx-h100)
  --warmup N             untimed runs first (2)
  --runs N               timed runs at least (5)
  --min-seconds S        and until S seconds have passed (0.02)
  --threads N            kernel threads (cpu backend) (1)
  --reference-kernels    cpu: ppc's own kernels only
  --allow-tf32           cuda: float32 GEMMs and convolutions on TF32
                         tensor cores, as ppc-run --allow-tf32 runs them
  --inference            forward only, as in inference
  --quiet                no progress lines
  --version, --help
)";

namespace {

bool parsePositive(const std::string &text, double &value) {
  return absl::SimpleAtod(text, &value) && value > 0 && value < 1e12;
}

/// --details: one kernel per line, with what the profile's key leaves out.
absl::Status writeDetails(const std::string &path,
                          const ppc::planfile::Plan &plan,
                          const std::vector<KernelMeasurement> &measured) {
  using json = nlohmann::ordered_json;
  std::ofstream file(path);
  if (!file)
    return absl::InvalidArgumentError("cannot open '" + path + "' for writing");
  file << "{\n  \"kernels\": [";
  for (size_t i = 0; i < measured.size(); ++i) {
    const KernelMeasurement &m = measured[i];
    const OpDesc desc = describeOp(plan, plan.ops(m.op));
    json attributes = json::object();
    for (const auto &[name, value] : desc.attributes)
      std::visit([&](const auto &v) { attributes[name] = v; }, value);
    json kernel = {{"op", desc.kind},
                   {"name", plan.ops(m.op).name()},
                   {"attributes", attributes},
                   {"operand_shapes", m.operandShapes},
                   {"forward_seconds", m.forwardSeconds}};
    if (m.backwardSeconds > 0)
      kernel["backward_seconds"] = m.backwardSeconds;
    file << (i ? ",\n    " : "\n    ") << kernel.dump();
  }
  file << "\n  ]\n}\n";
  file.close();
  return file ? absl::OkStatus()
              : absl::InternalError("cannot write '" + path + "'");
}

} // namespace

namespace {

int profileMain(int argc, char **argv) {
  std::string planPath, out, requests, backendName = "cpu", device, details;
  KernelProfileOptions options;
  BackendOptions backendOptions;
  bool quiet = false;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    auto value = [&](const char *what) -> std::string {
      if (i + 1 >= argc) {
        std::cerr << "ppc-profile: " << arg << " needs " << what << "\n";
        std::exit(2);
      }
      return argv[++i];
    };
    auto count = [&](const char *what) {
      double x = 0;
      std::string text = value(what);
      if (!parsePositive(text, x) || x != static_cast<int64_t>(x)) {
        std::cerr << "ppc-profile: " << arg << ": expected " << what
                  << ", got '" << text << "'\n";
        std::exit(2);
      }
      return static_cast<int>(x);
    };
    if (arg == "--help" || arg == "-h") {
      std::cout << kHelp << "\nbackends: " << backendNames() << "\n";
      return 0;
    } else if (arg == "--version") {
      std::cout << "ppc-profile " << PPC_VERSION_STRING << "\n";
      return 0;
    } else if (arg == "-o") {
      out = value("a file");
    } else if (arg == "--details") {
      details = value("a file");
    } else if (arg == "--requests") {
      requests = value("a file");
    } else if (arg == "--backend") {
      backendName = value("a backend name");
      if (!findBackend(backendName)) {
        std::cerr << "ppc-profile: unknown backend '" << backendName
                  << "' (this build has " << backendNames() << ")\n";
        return 2;
      }
    } else if (arg == "--device-name") {
      device = value("a device model name");
    } else if (arg == "--warmup") {
      std::string text = value("a count");
      if (text == "0")
        options.warmupRuns = 0;
      else {
        --i;
        options.warmupRuns = count("a count");
      }
    } else if (arg == "--runs") {
      options.minRuns = count("a positive count");
    } else if (arg == "--min-seconds") {
      std::string text = value("seconds");
      if (!parsePositive(text, options.minSeconds)) {
        std::cerr << "ppc-profile: --min-seconds: expected a positive "
                     "number, got '"
                  << text << "'\n";
        return 2;
      }
    } else if (arg == "--threads") {
      std::string note;
      backendOptions.threads = kernelThreads(count("a positive count"), note);
      if (!note.empty())
        std::cerr << "ppc-profile: " << note << "\n";
    } else if (arg == "--reference-kernels") {
      backendOptions.referenceKernels = true;
    } else if (arg == "--allow-tf32") {
      backendOptions.allowTf32 = true;
    } else if (arg == "--inference") {
      options.training = false;
    } else if (arg == "--quiet") {
      quiet = true;
    } else if (!arg.empty() && arg[0] == '-') {
      std::cerr << "ppc-profile: unknown option '" << arg << "' (see --help)\n";
      return 2;
    } else if (planPath.empty()) {
      planPath = arg;
    } else {
      std::cerr << "ppc-profile: one plan at a time (got '" << planPath
                << "' and '" << arg << "')\n";
      return 2;
    }
  }
  if (planPath.empty() || out.empty()) {
    std::cerr << "ppc-profile: needs a PLAN and -o PROFILE.json (see "
                 "--help)\n";
    return 2;
  }
  if (backendOptions.allowTf32 && backendName != "cuda") {
    std::cerr << "ppc-profile: --allow-tf32 is for --backend cuda: the "
              << backendName << " backend computes float32 exactly\n";
    return 2;
  }
  if (device.empty()) {
    if (backendName != "cpu") {
      std::cerr << "ppc-profile: --device-name: name the device model the "
                   "profile measures, as the machine description names it "
                   "(e.g. H100-SXM5-80GB of the dgx-h100 preset)\n";
      return 2;
    }
    device = kCpuProfileDevice;
  }
  // The outputs are written after every kernel is measured: check first.
  for (const auto &[option, path] :
       {std::pair{"-o", out}, std::pair{"--details", details}})
    if (!path.empty())
      if (absl::Status err = checkOutputFile(path); !err.ok()) {
        std::cerr << "ppc-profile: " << option << ": " << err.message() << "\n";
        return 2;
      }
  if (absl::Status err = checkOutputsSpareInputs(
          {{{"-o", out}, {"--details", details}},
           {{"the plan", planPath}, {"the requests file", requests}},
           {}});
      !err.ok()) {
    std::cerr << "ppc-profile: " << err.message() << "\n";
    return 2;
  }
  ppc::planfile::Plan plan;
  if (absl::Status err = readPlanFile(planPath, plan); !err.ok()) {
    std::cerr << "ppc-profile: " << err.message() << "\n";
    return 1;
  }
  absl::StatusOr<std::unique_ptr<Backend>> started =
      createBackend(backendName, backendOptions);
  if (!started.ok()) {
    std::cerr << "ppc-profile: backend " << backendName << ": "
              << started.status().message() << "\n";
    return 1;
  }
  std::unique_ptr<Backend> backend = std::move(*started);
  // Weights drawn from the seed: their values do not change a kernel's
  // time, and no weights file is needed.
  DataSource data(plan, /*seed=*/1, InitMode::Seed, /*batches=*/0);
  if (!quiet)
    options.progress = &std::cerr;
  KernelTimings timings;
  std::vector<KernelMeasurement> measured;
  if (absl::Status err = profileKernels(plan, requests, *backend, data, options,
                                        timings, &measured);
      !err.ok()) {
    std::cerr << "ppc-profile: " << err.message() << "\n";
    return 1;
  }
  if (absl::Status err = writeKernelProfile(out, device, timings); !err.ok()) {
    std::cerr << "ppc-profile: " << err.message() << "\n";
    return 1;
  }
  if (!details.empty())
    if (absl::Status err = writeDetails(details, plan, measured); !err.ok()) {
      std::cerr << "ppc-profile: " << err.message() << "\n";
      return 1;
    }
  if (!quiet)
    std::cerr << "ppc-profile: " << timings.size() << " kernel times of "
              << device << " written to " << out << "\n";
  return 0;
}

} // namespace

int main(int argc, char **argv) {
  // An exception is a bug, never the user's: say so instead of aborting.
  try {
    return profileMain(argc, argv);
  } catch (const std::exception &e) {
    std::cerr << "ppc-profile: internal error: " << e.what() << "\n";
    return 1;
  }
}
