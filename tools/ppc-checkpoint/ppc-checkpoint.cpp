//===- ppc-checkpoint.cpp - checkpoints read, resharded and exported ------===//
//
// Offline work on ppc-run's checkpoint directories (ppc/Runtime/Checkpoint.h):
// what one holds, the same checkpoint for another plan (which then resumes
// as that plan's own: bit-identically, each rank reading its file only),
// and its weights as the ONNX model's initializers.
//
//===----------------------------------------------------------------------===//

#include "ppc/Runtime/Checkpoint.h"
#include "ppc/Runtime/OnnxExport.h"
#include "ppc/Runtime/OutputFiles.h"
#include "ppc/Runtime/PlanIO.h"

#include "ppc/Support/Status.h"
#include "ppc/Version.h"

#include <cstdio>
#include <iostream>
#include <map>
#include <string>
#include <vector>

using namespace ppc::runtime;

namespace {

const char kHelp[] = R"(usage: ppc-checkpoint COMMAND ...

  info DIR                    the newest checkpoint of DIR (DIR/LATEST): its
                              step, ranks, plan, run, and every weight with
                              its shape and how many pieces hold it
  convert DIR --plan P.pb -o OUT
                              the same checkpoint as plan P.pb's ranks would
                              write it, into the new checkpoint directory
                              OUT: `ppc-run P.pb --resume OUT` then resumes
                              it as its own (DIR may be of any plan and rank
                              count of the same model and optimizer)
  export DIR MODEL.onnx=OUT.onnx
                              MODEL.onnx with every weight of the checkpoint
                              written into its initializer of that name

  --version, --help
)";

struct Loaded {
  std::string stepDir;
  CheckpointMarker marker;
  std::vector<Checkpoint> ranks;
};

absl::StatusOr<Loaded> load(const std::string &dir) {
  Loaded l;
  PPC_RETURN_IF_ERROR(readLatest(dir, l.stepDir));
  PPC_RETURN_IF_ERROR(readCompleteMarker(l.stepDir, l.marker));
  PPC_ASSIGN_OR_RETURN(l.ranks, readCheckpointRanks(l.stepDir, l.marker));
  return l;
}

absl::Status info(const std::string &dir) {
  PPC_ASSIGN_OR_RETURN(Loaded l, load(dir));
  std::cout << "checkpoint " << l.stepDir << "\n"
            << "  step " << l.marker.steps << ", " << l.marker.numRanks
            << " rank" << (l.marker.numRanks == 1 ? "" : "s") << ", plan "
            << hashText(l.marker.planHash) << "\n";
  if (!l.marker.run.empty())
    std::cout << "  run " << l.marker.run << "\n";
  PPC_ASSIGN_OR_RETURN(auto tensors, wholeTensors(l.ranks));
  std::map<std::string, int> pieces;
  for (const Checkpoint &c : l.ranks)
    for (const CheckpointBuffer &b : c.buffers)
      ++pieces[b.tensorName];
  for (const auto &[name, t] : tensors)
    std::cout << "  " << name << " " << shapeString(t.shape) << ", "
              << pieces[name] << " piece" << (pieces[name] == 1 ? "" : "s")
              << "\n";
  return absl::OkStatus();
}

absl::Status convert(const std::string &dir, const std::string &planPath,
                     const std::string &out) {
  if (isInside(out, dir) || isInside(dir, out))
    return absl::InvalidArgumentError("-o '" + out + "' and the checkpoint '" +
                                      dir + "' overlap: name another folder");
  ppc::planfile::Plan plan;
  PPC_RETURN_IF_ERROR(readPlanFile(planPath, plan));
  PPC_ASSIGN_OR_RETURN(Loaded l, load(dir));
  std::vector<Checkpoint> converted;
  for (int32_t r = 0; r < plan.programs_size(); ++r) {
    absl::StatusOr<Checkpoint> c = reshardCheckpoint(l.ranks, plan, r);
    if (!c.ok())
      return ppc::annotate(c.status(), "rank " + std::to_string(r) + " of '" +
                                           planPath + "'");
    converted.push_back(std::move(*c));
  }
  // The protocol of Checkpoint.h, as ppc-run writes one.
  CheckpointLock lock;
  PPC_RETURN_IF_ERROR(lock.acquire(out));
  bool alternate = false;
  PPC_RETURN_IF_ERROR(prepareStepDirectory(out, l.marker.steps, alternate));
  const std::string step =
      out + "/" + stepDirectoryName(l.marker.steps, alternate);
  for (const Checkpoint &c : converted)
    PPC_RETURN_IF_ERROR(
        writeCheckpointFile(checkpointFileName(step, c.rank), c));
  PPC_RETURN_IF_ERROR(
      writeCompleteMarker(step, {l.marker.steps, plan.programs_size(),
                                 planHash(plan), l.marker.run}));
  PPC_RETURN_IF_ERROR(
      writeLatest(out, stepDirectoryName(l.marker.steps, alternate)));
  std::cout << "ppc-checkpoint: step " << l.marker.steps << " of "
            << l.marker.numRanks << " rank"
            << (l.marker.numRanks == 1 ? "" : "s") << " written for the "
            << plan.programs_size() << " of '" << planPath << "' to '" << out
            << "'\n";
  return absl::OkStatus();
}

absl::Status exportOnnx(const std::string &dir, const std::string &target) {
  size_t eq = target.find('=');
  if (eq == std::string::npos || eq == 0 || eq + 1 == target.size())
    return absl::InvalidArgumentError("export: expected MODEL.onnx=OUT.onnx, "
                                      "got '" +
                                      target + "'");
  const std::string model = target.substr(0, eq), out = target.substr(eq + 1);
  if (samePath(model, out))
    return absl::InvalidArgumentError("export: '" + out +
                                      "' is the model itself: name another "
                                      "file");
  if (isInside(out, dir))
    return absl::InvalidArgumentError("export: '" + out +
                                      "' is inside the checkpoint directory");
  PPC_RETURN_IF_ERROR(checkOutputFile(out, WriteMode::ViaRename));
  PPC_ASSIGN_OR_RETURN(Loaded l, load(dir));
  PPC_ASSIGN_OR_RETURN(auto tensors, wholeTensors(l.ranks));
  std::map<std::string, std::vector<float>> values;
  for (auto &[name, t] : tensors)
    values[name] = std::move(t.values);
  PPC_RETURN_IF_ERROR(exportOnnxWeights(model, out, values));
  std::cout << "ppc-checkpoint: " << values.size() << " weights of step "
            << l.marker.steps << " written into '" << out << "'\n";
  return absl::OkStatus();
}

absl::Status run(const std::vector<std::string> &args) {
  const std::string &command = args[0];
  if (command == "info" && args.size() == 2)
    return info(args[1]);
  if (command == "export" && args.size() == 3)
    return exportOnnx(args[1], args[2]);
  if (command == "convert" && args.size() >= 2) {
    std::string plan, out;
    for (size_t i = 2; i < args.size(); ++i) {
      std::string *value = args[i] == "--plan" ? &plan
                           : args[i] == "-o"   ? &out
                                               : nullptr;
      if (!value)
        return absl::InvalidArgumentError("convert: unknown argument '" +
                                          args[i] + "'");
      if (i + 1 == args.size())
        return absl::InvalidArgumentError("convert: " + args[i] +
                                          " needs a value");
      *value = args[++i];
    }
    if (plan.empty() || out.empty())
      return absl::InvalidArgumentError(
          "convert: needs --plan NEW.pb and -o OUT");
    return convert(args[1], plan, out);
  }
  if (command != "info" && command != "convert" && command != "export")
    return absl::InvalidArgumentError("unknown command '" + command +
                                      "' (info, convert, export; --help)");
  return absl::InvalidArgumentError("wrong arguments for '" + command +
                                    "' (--help)");
}

} // namespace

int main(int argc, char **argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  if (args.empty()) {
    std::cerr << kHelp;
    return 2;
  }
  if (args[0] == "--help" || args[0] == "-h") {
    std::cout << kHelp;
    return 0;
  }
  if (args[0] == "--version") {
    std::cout << "ppc-checkpoint " << PPC_VERSION_STRING << "\n";
    return 0;
  }
  if (absl::Status status = run(args); !status.ok()) {
    std::cerr << "ppc-checkpoint: " << status.message() << "\n";
    return 1;
  }
  return 0;
}
