//===- ReportModel.cpp - formats and the readable summary -----------------===//

#include "ReportModel.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>

namespace ppc::report {

const char *stringifyStrategyClass(StrategyClass c) {
  switch (c) {
  case StrategyClass::SingleDevice:
    return "single device";
  case StrategyClass::Replicated:
    return "replicated";
  case StrategyClass::DataParallel:
    return "data parallel";
  case StrategyClass::Tensor:
    return "tensor (parameter/reduction)";
  case StrategyClass::Spatial:
    return "spatial (attribute)";
  case StrategyClass::Mixed:
    return "mixed";
  }
  return "unknown";
}

const char *colorOf(StrategyClass c) {
  // Light fills so black labels stay readable; distinct hues per class.
  switch (c) {
  case StrategyClass::SingleDevice:
    return "#d9d9d9";
  case StrategyClass::Replicated:
    return "#fff7bc";
  case StrategyClass::DataParallel:
    return "#9ecae1";
  case StrategyClass::Tensor:
    return "#fdae6b";
  case StrategyClass::Spatial:
    return "#a1d99b";
  case StrategyClass::Mixed:
    return "#bcbddc";
  }
  return "#ffffff";
}

StrategyClass classify(const sim::Op &op, const OpConfig &config) {
  bool sample = false, tensor = false, spatial = false;
  for (size_t d = 0; d < config.degrees.size() && d < op.space.dims.size();
       ++d) {
    if (config.degrees[d] <= 1)
      continue;
    switch (op.space.dims[d].kind) {
    case IterKind::Sample:
      sample = true;
      break;
    case IterKind::Attribute:
      spatial = true;
      break;
    case IterKind::Parameter:
    case IterKind::Reduction:
      tensor = true;
      break;
    }
  }
  int groups = sample + tensor + spatial;
  if (groups == 0)
    return config.replicas > 1 ? StrategyClass::Replicated
                               : StrategyClass::SingleDevice;
  if (groups > 1)
    return StrategyClass::Mixed;
  if (sample)
    return StrategyClass::DataParallel;
  return tensor ? StrategyClass::Tensor : StrategyClass::Spatial;
}

std::string compactDevices(std::vector<int64_t> devices) {
  std::sort(devices.begin(), devices.end());
  devices.erase(std::unique(devices.begin(), devices.end()), devices.end());
  if (devices.empty())
    return "-";
  // A long constant stride (a strided machine view) reads best elided.
  if (devices.size() > 4) {
    int64_t stride = devices[1] - devices[0];
    bool progression = stride > 1;
    for (size_t i = 2; progression && i < devices.size(); ++i)
      progression = devices[i] - devices[i - 1] == stride;
    if (progression)
      return std::to_string(devices[0]) + "," + std::to_string(devices[1]) +
             ",...," + std::to_string(devices.back());
  }
  std::string out;
  for (size_t i = 0; i < devices.size();) {
    size_t j = i;
    while (j + 1 < devices.size() && devices[j + 1] == devices[j] + 1)
      ++j;
    if (!out.empty())
      out += ",";
    if (j - i >= 2) {
      out += std::to_string(devices[i]) + "-" + std::to_string(devices[j]);
    } else {
      for (size_t k = i; k <= j; ++k)
        out += (k > i ? "," : "") + std::to_string(devices[k]);
    }
    i = j + 1;
  }
  return out;
}

std::string formatDegrees(const sim::Op &op, const OpConfig &config) {
  std::string out;
  for (size_t d = 0; d < config.degrees.size() && d < op.space.dims.size();
       ++d) {
    if (config.degrees[d] <= 1)
      continue;
    if (!out.empty())
      out += " ";
    // The SOAP letter: sample, attribute, parameter, reduction (R: "O" is
    // FlexFlow's name for it, but "reduction" is what users read here).
    const char *letter = "?";
    switch (op.space.dims[d].kind) {
    case IterKind::Sample:
      letter = "S";
      break;
    case IterKind::Attribute:
      letter = "A";
      break;
    case IterKind::Parameter:
      letter = "P";
      break;
    case IterKind::Reduction:
      letter = "R";
      break;
    }
    out += letter + std::to_string(config.degrees[d]);
  }
  if (out.empty())
    out = "-";
  if (config.replicas > 1)
    out += " x" + std::to_string(config.replicas);
  if (config.recompute)
    out += " rc";
  if (config.sharding != StateSharding::None)
    out += " Z" + std::to_string(static_cast<int>(config.sharding));
  if (config.scatterDim >= 0)
    out += " rs" + std::to_string(config.scatterDim);
  if (config.ring)
    out += " ring";
  return out;
}

std::string formatShape(const std::vector<int64_t> &shape) {
  if (shape.empty())
    return "scalar";
  std::string out;
  for (size_t i = 0; i < shape.size(); ++i)
    out += (i ? "x" : "") + std::to_string(shape[i]);
  return out;
}

std::string fixed(double value, int digits) {
  if (std::isinf(value))
    return value > 0 ? "inf" : "-inf";
  if (std::isnan(value))
    return "nan";
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.*f", digits, value);
  return buf;
}

std::string formatBytes(double bytes) {
  static const char *units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  while (std::fabs(bytes) >= 1024 && u < 4) {
    bytes /= 1024;
    ++u;
  }
  return fixed(bytes, u == 0 ? 0 : 1) + " " + units[u];
}

std::string escapeDot(const std::string &s) {
  std::string out;
  for (char c : s) {
    if (c == '"' || c == '\\')
      out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out += c;
  }
  return out;
}

static bool isNameSeparator(char c) { return c == '.' || c == '/' || c == '_'; }

std::string blockName(const std::vector<OpRow> &ops, size_t begin,
                      size_t length) {
  const std::string &first = ops[begin].name;
  size_t k = first.size();
  for (size_t i = begin + 1; i < begin + length; ++i) {
    const std::string &name = ops[i].name;
    size_t j = 0;
    while (j < k && j < name.size() && first[j] == name[j])
      ++j;
    k = j;
  }
  // A prefix that ends mid-token ("conv" of "conv1" and "conv2") backs up
  // to the separator before it.
  bool endsTokens = true;
  for (size_t i = begin; i < begin + length; ++i)
    endsTokens = endsTokens &&
                 (k == ops[i].name.size() || isNameSeparator(ops[i].name[k]));
  std::string common = first.substr(0, k);
  if (!endsTokens)
    while (!common.empty() && !isNameSeparator(common.back()))
      common.pop_back();
  while (!common.empty() && isNameSeparator(common.back()))
    common.pop_back();
  if (!common.empty())
    return common;
  return "ops " + std::to_string(begin) + "-" +
         std::to_string(begin + length - 1);
}

std::vector<FoldRow>
foldRepeatedBlocks(const std::vector<search::BlockRun> &blocks,
                   const std::vector<OpRow> &ops) {
  std::vector<FoldRow> folds;
  for (const search::BlockRun &run : blocks) {
    auto laidOutAlike = [&](size_t a, size_t b) {
      for (size_t t = 0; t < run.length; ++t)
        if (ops[a + t].degrees != ops[b + t].degrees ||
            ops[a + t].devices != ops[b + t].devices)
          return false;
      return true;
    };
    for (size_t k = 0; k < run.count;) {
      size_t first = run.begin + k * run.length;
      size_t j = k + 1;
      while (j < run.count && laidOutAlike(first, run.begin + j * run.length))
        ++j;
      // One op folded into one node would only hide it.
      if ((j - k - 1) * run.length >= 2) {
        FoldRow fold;
        fold.begin = first + run.length;
        fold.end = run.begin + j * run.length;
        fold.blocks = j - k - 1;
        fold.length = run.length;
        fold.like = first;
        fold.likeName = blockName(ops, first, run.length);
        fold.firstName = blockName(ops, fold.begin, run.length);
        fold.lastName = blockName(ops, fold.end - run.length, run.length);
        folds.push_back(std::move(fold));
      }
      k = j;
    }
  }
  return folds;
}

namespace {

/// Left-aligned text columns, right-aligned numbers.
class Table {
public:
  explicit Table(std::vector<std::string> header, std::vector<bool> right)
      : right(std::move(right)) {
    rows.push_back(std::move(header));
  }
  void add(std::vector<std::string> row) { rows.push_back(std::move(row)); }
  void rule() { rules.push_back(rows.size()); }
  std::string str() const {
    std::vector<size_t> width(rows[0].size(), 0);
    for (const auto &r : rows)
      for (size_t c = 0; c < r.size(); ++c)
        width[c] = std::max(width[c], r[c].size());
    size_t total = 0;
    for (size_t w : width)
      total += w + 2;
    std::ostringstream os;
    for (size_t i = 0; i < rows.size(); ++i) {
      if (std::count(rules.begin(), rules.end(), i))
        os << std::string(total - 2, '-') << "\n";
      std::string line;
      for (size_t c = 0; c < rows[i].size(); ++c) {
        const std::string &cell = rows[i][c];
        std::string pad(width[c] - cell.size(), ' ');
        line += right[c] ? pad + cell : cell + pad;
        if (c + 1 < rows[i].size())
          line += "  ";
      }
      while (!line.empty() && line.back() == ' ')
        line.pop_back();
      os << line << "\n";
      if (i == 0)
        os << std::string(total - 2, '-') << "\n";
    }
    return os.str();
  }

private:
  std::vector<std::vector<std::string>> rows;
  std::vector<bool> right;
  std::vector<size_t> rules;
};

} // namespace

/// `text` wrapped at `width` columns, every line starting with `indent`;
/// its own line breaks (and the indentation after them) kept.
static std::string wrap(const std::string &text, const std::string &indent,
                        size_t width) {
  std::string out;
  size_t start = 0;
  while (start <= text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos)
      end = text.size();
    std::string line = text.substr(start, end - start);
    size_t lead = line.find_first_not_of(' ');
    std::string pad =
        indent + (lead == std::string::npos ? "" : line.substr(0, lead));
    std::istringstream words(line);
    std::string word, current = pad;
    for (bool first = true; words >> word; first = false) {
      if (!first && current.size() + 1 + word.size() > width) {
        out += current + "\n";
        current = pad + "  " + word;
      } else {
        current += (first ? "" : " ") + word;
      }
    }
    out += current + "\n";
    start = end + 1;
  }
  return out;
}

std::string writeSummary(const ReportModel &m) {
  const ReportInput &in = *m.input;
  const sim::SimResult &r = m.found;
  double ms = r.iterationTime * 1e3;
  std::ostringstream os;
  os << "ppc report: " << (in.modelName.empty() ? "model" : in.modelName)
     << " on "
     << (in.machineName.empty() ? in.problem.machine.name : in.machineName)
     << " (" << in.problem.machine.numDevices() << " devices)\n\n";
  auto line = [&](const std::string &key, const std::string &value) {
    os << "  " << key << std::string(20 - std::min<size_t>(key.size(), 19), ' ')
       << value << "\n";
  };
  line("batch", std::to_string(in.batchSize) + " samples");
  line("algorithm", (in.found.algorithm.empty() ? std::string("(given)")
                                                : in.found.algorithm) +
                        " (" + std::to_string(in.found.iterations) +
                        " strategies, " + fixed(in.found.seconds, 1) + " s)");
  for (const std::string &candidate : in.found.considered)
    line("considered", candidate);
  for (const std::string &cut : in.found.cutShort)
    line("cut short", cut);
  line("iteration time", fixed(ms, 3) + " ms (predicted)");
  line("throughput",
       fixed(r.iterationTime > 0 ? in.batchSize / r.iterationTime : 0, 1) +
           " samples/s");
  double flops = sim::modelFlops(in.problem.graph);
  char flopsText[32];
  std::snprintf(flopsText, sizeof flopsText, "%.3e", flops);
  line("model FLOPs", std::string(flopsText) +
                          " per iteration (forward and backward, "
                          "recomputation not counted)");
  if (r.iterationTime > 0)
    line("TFLOP/s per device",
         fixed(flops / r.iterationTime /
                   static_cast<double>(in.problem.machine.numDevices()) / 1e12,
               1) +
             " (model FLOPs / predicted time / devices)");
  if (!m.strategies.empty())
    line("MFU", fixed(100 * m.strategies.back().mfu, 1) +
                    "% (model FLOPs at peak / predicted time on every device)");
  auto speedup = [&](double baseMs) {
    return ms > 0 && baseMs > 0 ? fixed(baseMs / ms, 2) + "x" : "n/a";
  };
  line("vs data parallel", speedup(m.dataParallelMs) + " (data parallel: " +
                               fixed(m.dataParallelMs, 3) + " ms)");
  if (!m.bestBaselineName.empty() && !m.bestBaselineIsDataParallel)
    line("vs best baseline", speedup(m.bestBaselineMs) + " (" +
                                 m.bestBaselineName + ": " +
                                 fixed(m.bestBaselineMs, 3) + " ms)");
  int64_t tight = r.tightestDevice;
  line(
      "peak memory",
      formatBytes(static_cast<double>(r.peakMemory())) + " of " +
          formatBytes(static_cast<double>(m.capacity)) + " per device" +
          (r.devices.empty() ? "" : " (device " + std::to_string(tight) + ")") +
          (r.outOfMemory ? "  OUT OF MEMORY" : ""));
  if (!r.devices.empty()) {
    const sim::MemoryUse &use = r.devices[tight].memory;
    auto size = [](int64_t bytes) {
      return formatBytes(static_cast<double>(bytes));
    };
    line("  of which", "weights " + size(use.weights) + ", gradients " +
                           size(use.gradients) + ", optimizer state " +
                           size(use.optimizerState) + ", activations " +
                           size(use.activations) + ", workspace " +
                           size(use.workspace));
  }
  // How many ops fall in each class: the one-line answer to "what did it do".
  std::string classes;
  for (int c = 0; c < kNumStrategyClasses; ++c) {
    auto cls = static_cast<StrategyClass>(c);
    int64_t n = std::count_if(m.ops.begin(), m.ops.end(),
                              [&](const OpRow &o) { return o.cls == cls; });
    if (n)
      classes += (classes.empty() ? "" : ", ") + std::to_string(n) + " " +
                 stringifyStrategyClass(cls);
  }
  line("ops", classes.empty() ? "none" : classes);
  os << "\n";

  if (!m.why.empty()) {
    os << "why\n";
    for (const std::string &paragraph : m.why)
      os << wrap(paragraph, "  ", 78) << "\n";
  }
  if (!r.devices.empty()) {
    Table devices(
        {"device", "compute ms", "comm ms", "idle ms", "memory", "capacity"},
        {true, true, true, true, true, true});
    for (size_t d = 0; d < r.devices.size(); ++d) {
      const sim::DeviceStats &device = r.devices[d];
      devices.add(
          {std::to_string(d), fixed(device.computeTime * 1e3, 3),
           fixed(device.commTime * 1e3, 3), fixed(device.idleTime * 1e3, 3),
           formatBytes(static_cast<double>(device.memory.total())),
           formatBytes(static_cast<double>(device.capacity)) +
               (device.memory.total() > device.capacity ? " OOM" : "")});
    }
    os << "per device\n" << devices.str();
    os << "\ncompute: its kernels; comm: its transfers and collectives "
          "(overlapping compute);\nidle: the iteration time minus "
          "compute.\n\n";
  }
  if (m.pipeline) {
    const sim::Pipeline &shape = in.found.pipeline;
    line("pipeline",
         std::to_string(shape.numStages()) + " stages x " +
             std::to_string(shape.microbatches) + " micro-batches, schedule " +
             pipelineScheduleInfo(shape.schedule).name + ", bubble " +
             fixed(100 * m.pipeline->bubbleFraction, 1) + "%");
    os << "\n";
    Table stages(
        {"stage", "devices", "ops", "fwd ms", "bwd ms", "send ms", "tail ms",
         "in flight", "bubble", "peak memory"},
        {false, false, true, true, true, true, true, true, true, true});
    for (size_t s = 0; s < m.pipeline->stages.size(); ++s) {
      const sim::PipelineStageResult &stage = m.pipeline->stages[s];
      stages.add({std::to_string(s),
                  std::to_string(stage.firstDevice) + "-" +
                      std::to_string(stage.firstDevice + stage.numDevices - 1),
                  std::to_string(stage.numOps), fixed(stage.forward * 1e3, 3),
                  fixed(stage.backward * 1e3, 3), fixed(stage.send * 1e3, 3),
                  fixed(stage.tail * 1e3, 3), std::to_string(stage.inFlight),
                  fixed(100 * stage.bubble, 1) + "%",
                  formatBytes(static_cast<double>(stage.peakMemory)) +
                      (stage.peakMemory > stage.capacity ? " OOM" : "")});
    }
    os << stages.str();
    os << "\nper micro-batch: fwd, bwd (the stage alone), send (its boundary "
          "values to the\nnext stages); tail: gradient sync and update after "
          "its last backward; in flight:\nmicro-batches whose activations it "
          "keeps at once. The op table below is per\nmicro-batch.\n\n";
  }

  Table t({"op", "kind", "output", "degrees", "devices", "fwd ms", "bwd ms",
           "comm ms", "memory"},
          {false, false, false, false, false, true, true, true, true});
  double fwd = 0, bwd = 0, comm = 0;
  int64_t mem = 0;
  for (const OpRow &o : m.ops) {
    t.add({o.name, o.kind, o.shape, o.degrees, o.devices, fixed(o.fwdMs, 3),
           fixed(o.bwdMs, 3), fixed(o.commMs, 3),
           formatBytes(static_cast<double>(o.memoryBytes))});
    fwd += o.fwdMs;
    bwd += o.bwdMs;
    comm += o.commMs;
    mem += o.memoryBytes;
  }
  t.rule();
  t.add({"total (sum over ops)", "", "", "", "", fixed(fwd, 3), fixed(bwd, 3),
         fixed(comm, 3), formatBytes(static_cast<double>(mem))});
  os << t.str();
  os << "\nfwd/bwd: the slowest partition's kernels; comm: transfers into the "
        "op, partial-sum\nreductions and gradient sync; memory: per device, "
        "weights with gradients and\noptimizer state plus the result kept "
        "for backward. Communication overlaps\ncompute, so the sums need not "
        "add up to the iteration time.\n";
  return os.str();
}

} // namespace ppc::report
