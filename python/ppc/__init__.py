"""ppc from Python: parallelize a model for training, simulate a strategy.

The functions here build the pass pipelines ppc-opt runs and hand them to
ppc's library (the ppc._ppc extension): ``parallelize`` is
``ppc-opt MODEL --ppc-auto-parallel="..."``, ``simulate`` is
``--ppc-import-strategy`` + ``--ppc-simulate`` + ``--ppc-export-strategy``.
Their results are read back from the files those passes write (the strategy
file of docs/strategy-format.md), so Python sees what ppc-opt would write.

The lists (``machines()``, ``search_algorithms()``, ``search_options()``)
come from ppc's own tables. Errors raise ValueError (bad input: a model that
does not load, an unknown machine or option) or RuntimeError (a pass
failed), with ppc's message. A PyTorch ``nn.Module`` is exported to ONNX
with ``torch.onnx.export`` first. See docs/user-guide.md ("Python").
"""

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional

from . import _ppc

__version__ = _ppc.version

#: The machine when none is named: one DGX H100, as in scripts/demo.sh.
DEFAULT_MACHINE = "dgx-h100"

__all__ = [
    "Result",
    "Simulation",
    "Training",
    "machines",
    "parallelize",
    "search_algorithms",
    "search_options",
    "simulate",
    "train",
]


def machines() -> Dict[str, str]:
    """The machine presets: name (or pattern, N a count) -> description."""
    return dict(_ppc.machines())


def search_algorithms() -> Dict[str, str]:
    """What ``search=`` takes: the searches, then the baselines."""
    return dict(_ppc.search_algorithms())


def search_options() -> Dict[str, str]:
    """ppc-auto-parallel's options (name -> description). ``parallelize``
    takes them as keyword arguments, '-' written '_'."""
    return dict(_ppc.auto_parallel_options())


@dataclass
class Result:
    """What ``parallelize`` found (the report's strategy.json, read back)."""

    #: One dict per op, as in the strategy file: name, kind, degrees (one per
    #: iteration dim), dims (size and SOAP kind of each), devices, start,
    #: strides, dtype, predicted_ms (forward, backward, communication).
    strategy: List[Dict[str, Any]] = field(repr=False)
    #: Simulated training iteration, in seconds (None for a pipeline).
    predicted_time_s: Optional[float]
    #: Peak memory of a device, in bytes: the most any device needs.
    memory_per_device: Optional[int]
    bytes_moved: Optional[float]
    out_of_memory: Optional[bool]
    #: The pipeline (stages, micro-batches, schedule), or None.
    pipeline: Optional[Dict[str, Any]]
    #: The report directory (docs/reports.md) and its strategy file.
    report_dir: str
    strategy_path: str
    #: The lowered plan for ppc-run.
    plan_path: str
    #: What it was found for: the machine, the batch it was imported with
    #: (None: the model's own), and the pipeline options it ran with
    #: ('-' in their names); ``simulate(model, result)`` reuses them.
    machine: str = ""
    batch_size: Optional[int] = None
    options: Dict[str, Any] = field(default_factory=dict, repr=False)
    #: The model file the plan was made from (for a torch module, its ONNX
    #: export): ``train`` writes the trained weights into a copy of it.
    model_path: str = ""


@dataclass
class Training:
    """What ``train`` did: ppc-run's steps."""

    #: The loss of every step, in order.
    losses: List[float]
    #: The model with its weights replaced by the trained values (ONNX),
    #: or None when the model was not ONNX.
    weights_path: Optional[str]
    #: ppc-run's log: one JSON object per step (step, loss, time_ms).
    log_path: str

    def weights(self) -> Dict[str, Any]:
        """The trained weights: initializer name -> float32 numpy array."""
        import numpy

        if self.weights_path is None:
            raise ValueError("no trained weights: the model was not ONNX")
        return {name: numpy.frombuffer(data, dtype=numpy.float32)
                .reshape(shape).copy()
                for name, shape, data in _ppc.read_onnx_weights(
                    self.weights_path)}

    def load_into(self, module) -> List[str]:
        """Copies the trained weights into a torch.nn.Module's parameters
        and buffers of the same names (the initializer names
        ``torch.onnx.export`` gives them), with ``load_state_dict``; returns
        the names loaded. Raises ValueError naming a parameter without a
        trained value, or one of another shape."""
        import torch

        weights = self.weights()
        state = module.state_dict()
        missing = [name for name, _ in module.named_parameters()
                   if name not in weights]
        if missing:
            raise ValueError(f"no trained value for {', '.join(missing)} "
                             f"in {self.weights_path}")
        loaded = {}
        for name, value in weights.items():
            if name not in state:
                continue
            if tuple(state[name].shape) != value.shape:
                raise ValueError(f"{name}: trained shape {value.shape}, the "
                                 f"module's {tuple(state[name].shape)}")
            loaded[name] = torch.from_numpy(value).to(state[name].dtype)
        module.load_state_dict(loaded, strict=False)
        return sorted(loaded)


@dataclass
class Simulation:
    """What ``simulate`` predicts for one training iteration."""

    predicted_time_s: Optional[float]
    memory_per_device: Optional[int]
    bytes_moved: Optional[float]
    out_of_memory: Optional[bool]
    #: Per op: the strategy file's entry with predicted_ms (forward,
    #: backward, communication).
    ops: List[Dict[str, Any]] = field(repr=False)
    #: ppc-simulate's report (per device and per op) and its file.
    report: str = field(repr=False)
    report_path: str
    #: The simulated strategy, with predictions, as a strategy file.
    strategy_path: str


def parallelize(model, example_inputs=None, machine=DEFAULT_MACHINE,
                search="mcmc", budget=None, batch_size=None, out_dir=None,
                loss_fn=None, **search_options) -> Result:
    """Searches a strategy for training ``model`` on ``machine``.

    model: a path to an ONNX or MLIR file, ONNX bytes, MLIR text, or a
        torch.nn.Module (exported with ``example_inputs``, batch dim
        dynamic).
    example_inputs: a tensor or a tuple of tensors (torch models only).
    machine: a preset (``machines()``) or a machine JSON file.
    search: a search or baseline (``search_algorithms()``).
    budget: ppc's budget string ('30s', '2m', '5000'), an int (iterations
        per chain) or a float (seconds); None: ppc's default.
    batch_size: binds an ONNX model's batch dim (default for a torch
        model: the example inputs' dim 0).
    out_dir: where the model copy, report/ and plan.pb go (default: a new
        temporary directory, kept when the call succeeds, removed when it
        fails).
    loss_fn: the loss trained with: torch.nn.CrossEntropyLoss() or
        torch.nn.MSELoss() (mean over the batch), or ppc's name for one
        ('softmax-ce', 'mse', 'none' for a model that computes its own);
        None: ppc picks by the output (cross-entropy for class logits).
    search_options: more ppc-auto-parallel options (``search_options()``),
        e.g. threads=1, seed=3, optimizer="adam", memory_limit="16GiB".
    """
    if loss_fn is not None:
        if "loss" in search_options:
            raise ValueError("give the loss as loss_fn or as loss, not both")
        search_options = dict(search_options, loss=_loss_name(loss_fn))
    with _OutDir(out_dir) as out_dir:
        return _parallelize(model, example_inputs, machine, search, budget,
                            batch_size, out_dir, search_options)


def _loss_name(loss_fn):
    """ppc's loss option for a torch loss module or a name."""
    if isinstance(loss_fn, str):
        return loss_fn
    kind = type(loss_fn).__name__
    supported = ("expected torch.nn.CrossEntropyLoss() or torch.nn.MSELoss() "
                 "with reduction='mean', or 'softmax-ce', 'mse' or 'none'")
    if kind not in ("CrossEntropyLoss", "MSELoss"):
        raise ValueError(f"loss_fn: ppc trains with softmax cross-entropy "
                         f"or mean-squared error, not {kind}; {supported}")
    if getattr(loss_fn, "reduction", "mean") != "mean":
        raise ValueError(f"loss_fn: {kind}(reduction="
                         f"{loss_fn.reduction!r}): ppc's losses are means "
                         f"over the batch; {supported}")
    if kind == "CrossEntropyLoss":
        if getattr(loss_fn, "weight", None) is not None or \
                getattr(loss_fn, "label_smoothing", 0.0) != 0.0:
            raise ValueError("loss_fn: CrossEntropyLoss with class weights "
                             "or label smoothing is not one ppc trains; " +
                             supported)
        return "softmax-ce"
    return "mse"


def _parallelize(model, example_inputs, machine, search, budget, batch_size,
                 out_dir, search_options):
    path, batch_size = _model_file(model, example_inputs, batch_size, out_dir)
    _ppc.check_machine(os.fspath(machine))
    report_dir = os.path.join(out_dir, "report")
    plan_path = os.path.join(out_dir, "plan.pb")
    options = {"machine": machine, "search": search}
    if budget is not None:
        options["budget"] = _budget(budget)
    for name, value in search_options.items():
        key = name.replace("_", "-")
        if key in ("report-dir", "plan"):
            raise ValueError(f"{name} is set by out_dir")
        options[key] = value
    options["report-dir"] = report_dir
    options["plan"] = plan_path
    _run(path, batch_size, [("ppc-auto-parallel", options)])

    strategy_path = os.path.join(report_dir, "strategy.json")
    if not os.path.exists(strategy_path):
        raise RuntimeError(
            f"{path}: the module has several functions; their reports are "
            f"in {report_dir}/<function>/")
    with open(strategy_path) as f:
        data = json.load(f)
    prediction = data.get("prediction", {})
    return Result(
        strategy=data["ops"],
        predicted_time_s=_seconds(prediction),
        memory_per_device=prediction.get("peak_memory_bytes"),
        bytes_moved=prediction.get("bytes_moved"),
        out_of_memory=prediction.get("out_of_memory"),
        pipeline=data.get("pipeline"),
        report_dir=report_dir,
        strategy_path=strategy_path,
        plan_path=plan_path,
        machine=os.fspath(machine),
        batch_size=batch_size,
        options=dict(options),
        model_path=path,
    )


def train(result, data=None, steps=10, ranks=None, backend="cpu",
          out_dir=None, ppc_run_args=(), module=None) -> Training:
    """Trains with the plan ``parallelize`` wrote: ppc-run on every rank
    under mpirun, its progress on stderr (one line updated in place on a
    terminal).

    result: a ``Result`` (its plan_path, machine and model_path are used).
    data: None (synthetic batches), a directory of .npy inputs (ppc-run
        --data: DIR/NAME.npy or DIR/NAME/ shards of records), or a dict of
        input name -> array of records ([n, ...] for an input [batch, ...]),
        written to OUT/data as .npy files.
    steps: training steps. ranks: processes (default: the machine's
        devices, which the plan needs). backend: ppc-run's --backend.
    out_dir: where the log, the data and the trained model go (default:
        the result's directory). ppc_run_args: more ppc-run options
        (``ppc-run --help``), e.g. ("--batches", "1", "--seed", "3").
    module: the torch.nn.Module the result was found for: the trained
        weights are loaded into it (``Training.load_into``).
    """
    if not isinstance(result, Result):
        raise ValueError(f"result: expected a ppc.Result from parallelize, "
                         f"got {type(result).__name__}")
    if isinstance(steps, bool) or not isinstance(steps, int) or steps < 1:
        raise ValueError(f"steps: expected an int >= 1, got {steps!r}")
    if ranks is None:
        ranks = _ppc.machine_devices(result.machine)
    out_dir = os.fspath(out_dir) if out_dir is not None else \
        os.path.dirname(os.path.abspath(result.report_dir))
    os.makedirs(out_dir, exist_ok=True)
    log_path = os.path.join(out_dir, "train-log.jsonl")
    command = [_tool("ppc-run"), result.plan_path, "--steps", str(steps),
               "--backend", backend, "--log", log_path]
    if data is not None:
        command += ["--data", _data_dir(data, out_dir)]
    weights_path = None
    if result.model_path.endswith(".onnx"):
        weights_path = os.path.join(out_dir, "trained.onnx")
        command += ["--export-onnx", f"{result.model_path}={weights_path}"]
    command += [str(arg) for arg in ppc_run_args]
    mpirun = shutil.which("mpirun")
    if mpirun:
        launcher = [mpirun, "-np", str(ranks), "--oversubscribe"]
        if hasattr(os, "geteuid") and os.geteuid() == 0:
            launcher.append("--allow-run-as-root")
        command = launcher + command
    elif ranks > 1:
        raise RuntimeError("mpirun not found: ppc-run needs Open MPI's "
                           "mpirun for several ranks (Debian: openmpi-bin)")
    _run_with_progress(command, steps)
    losses = []
    with open(log_path) as f:
        for line in f:
            if line.strip():
                losses.append(float(json.loads(line)["loss"]))
    training = Training(losses=losses, weights_path=weights_path,
                        log_path=log_path)
    if module is not None:
        training.load_into(module)
    return training


def simulate(model, strategy=None, machine=None, example_inputs=None,
             batch_size=None, optimizer=None, loss=None, dtype=None,
             out_dir=None) -> Simulation:
    """Simulates one training iteration of ``model`` with ``strategy``.

    strategy: None (data parallel), a ``Result``, a strategy file's path,
        its parsed dict, or a list of per-op dicts (``Result.strategy``).
    model, example_inputs, batch_size, machine, out_dir: as for
        ``parallelize``; optimizer, loss, dtype: as its options of those
        names (a strategy from ``parallelize`` names the loss ops it added,
        so loss and dtype must be the ones it ran with). Left out, machine,
        batch_size, optimizer, loss and dtype are a ``Result``'s (what
        ``parallelize`` ran with), else dgx-h100, the model's batch, sgd,
        auto and f32.
    """
    found = strategy if isinstance(strategy, Result) else None
    used = found.options if found else {}
    if machine is None:
        machine = found.machine if found else DEFAULT_MACHINE
    if batch_size is None and found and example_inputs is None:
        batch_size = found.batch_size
    optimizer = optimizer or used.get("optimizer", "sgd")
    loss = loss or used.get("loss", "auto")
    dtype = dtype or used.get("dtype", "f32")
    with _OutDir(out_dir) as out_dir:
        return _simulate(model, strategy, machine, example_inputs, batch_size,
                         optimizer, loss, dtype, out_dir)


def _simulate(model, strategy, machine, example_inputs, batch_size,
              optimizer, loss, dtype, out_dir):
    path, batch_size = _model_file(model, example_inputs, batch_size, out_dir)
    _ppc.check_machine(os.fspath(machine))
    passes = [("ppc-add-loss", {"loss": loss}),
              ("ppc-convert-dtype", {"dtype": dtype}),
              ("ppc-attach-machine", {"machine": machine})]
    strategy_in = _strategy_file(strategy, out_dir)
    if strategy_in:
        passes.append(("ppc-import-strategy", {"file": strategy_in}))
    report_path = os.path.join(out_dir, "simulation.txt")
    strategy_path = os.path.join(out_dir, "simulated-strategy.json")
    passes.append(("ppc-simulate",
                   {"optimizer": optimizer, "output": report_path}))
    passes.append(("ppc-export-strategy",
                   {"optimizer": optimizer, "file": strategy_path}))
    _run(path, batch_size, passes)

    with open(strategy_path) as f:
        data = json.load(f)
    with open(report_path) as f:
        report = f.read()
    prediction = data.get("prediction", {})
    return Simulation(
        predicted_time_s=_seconds(prediction),
        memory_per_device=prediction.get("peak_memory_bytes"),
        bytes_moved=prediction.get("bytes_moved"),
        out_of_memory=prediction.get("out_of_memory"),
        ops=data["ops"],
        report=report,
        strategy_path=strategy_path,
        report_path=report_path,
    )


# --- helpers ---------------------------------------------------------------


def _tool(name):
    """The path of ppc's tool `name`: $PPC_BINARY_DIR/bin, the build tree
    next to this package (build/python/ppc -> build/bin), or PATH."""
    here = os.path.dirname(os.path.abspath(__file__))
    for directory in (os.path.join(os.environ.get("PPC_BINARY_DIR", ""),
                                   "bin"),
                      os.path.join(here, "..", "..", "bin")):
        candidate = os.path.join(directory, name)
        if os.access(candidate, os.X_OK):
            return os.path.normpath(candidate)
    found = shutil.which(name)
    if not found:
        raise RuntimeError(f"{name} not found: set PPC_BINARY_DIR to ppc's "
                           f"build directory or put {name} on PATH")
    return found


def _data_dir(data, out_dir):
    """ppc-run's --data directory for `data` (a path, or name -> records)."""
    if isinstance(data, (str, os.PathLike)):
        return os.fspath(data)
    if not isinstance(data, dict):
        raise ValueError(f"data: expected a directory or a dict of input "
                         f"name -> array, got {type(data).__name__}")
    import numpy

    directory = os.path.join(out_dir, "data")
    os.makedirs(directory, exist_ok=True)
    for name, records in data.items():
        numpy.save(os.path.join(directory, f"{name}.npy"),
                   numpy.ascontiguousarray(records))
    return directory


_STEP = re.compile(r"^step (\d+)/(\d+)\s+loss (\S+)")


def _run_with_progress(command, steps):
    """Runs `command`, showing its step lines on stderr (updated in place on
    a terminal); raises RuntimeError with its last lines when it fails."""
    terminal = sys.stderr.isatty()
    tail = []
    process = subprocess.Popen(command, stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True)
    for line in process.stdout:
        tail = (tail + [line])[-20:]
        step = _STEP.match(line)
        if step and terminal:
            sys.stderr.write(f"\rstep {step.group(1)}/{steps}  loss "
                             f"{step.group(3)}")
            sys.stderr.flush()
        else:
            if terminal:
                sys.stderr.write("\n")
            sys.stderr.write(line)
    code = process.wait()
    if terminal:
        sys.stderr.write("\n")
    if code != 0:
        raise RuntimeError(f"ppc-run failed (exit {code}):\n" +
                           "".join(tail))


class _OutDir:
    """The directory a call writes to: `out_dir`, made if missing, or a new
    temporary one that is removed again if the call fails."""

    def __init__(self, out_dir):
        self.created = out_dir is None
        if self.created:
            self.path = tempfile.mkdtemp(prefix="ppc-")
        else:
            self.path = os.fspath(out_dir)
            os.makedirs(self.path, exist_ok=True)

    def __enter__(self):
        return self.path

    def __exit__(self, kind, value, traceback):
        if kind is not None and self.created:
            shutil.rmtree(self.path, ignore_errors=True)
        return False


def _seconds(prediction):
    ms = prediction.get("iteration_ms")
    return None if ms is None else ms / 1e3


def _budget(budget):
    # bool is an int: refuse it rather than read True as one iteration.
    if isinstance(budget, bool):
        raise ValueError(f"budget: expected a string, int or float, got "
                         f"{budget!r}")
    if isinstance(budget, int):
        return str(budget)
    if isinstance(budget, float):
        return f"{budget!r}s"
    return str(budget)


def _option_value(key, value):
    """A pass option's value as the pipeline parser reads it."""
    if isinstance(value, bool):
        return "true" if value else "false"
    text = os.fspath(value) if isinstance(value, os.PathLike) else str(value)
    if not any(c.isspace() or c in "{}'\"=," for c in text):
        return text
    if '"' in text:
        raise ValueError(f"{key}: a value with a double quote cannot be "
                         f"passed to ppc: {text!r}")
    return f'"{text}"'


def _run(path, batch_size, passes):
    pipeline = ",".join(
        name + "{" + _ppc.check_pass_options(
            name, " ".join(f"{key}={_option_value(key, value)}"
                           for key, value in options.items())) + "}"
        for name, options in passes)
    warnings = _ppc.run_pipeline(path, batch_size, pipeline)
    if warnings:
        sys.stderr.write(warnings)


def _torch_module(model):
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(model, torch.nn.Module)


def _model_file(model, example_inputs, batch_size, out_dir):
    """The model as a file ppc reads, and the batch size to import it with."""
    if _torch_module(model):
        return _export_torch(model, example_inputs, batch_size, out_dir)
    if example_inputs is not None:
        raise ValueError("example_inputs are for a torch.nn.Module; an ONNX "
                         "or MLIR model has its own input shapes")
    if isinstance(model, (bytes, bytearray)):
        path = os.path.join(out_dir, "model.onnx")
        with open(path, "wb") as f:
            f.write(model)
        return path, batch_size
    if isinstance(model, os.PathLike):
        return os.fspath(model), batch_size
    if isinstance(model, str):
        # MLIR text has braces or lines; a path has neither.
        if not os.path.exists(model) and ("\n" in model or "{" in model):
            path = os.path.join(out_dir, "model.mlir")
            with open(path, "w") as f:
                f.write(model)
            return path, batch_size
        return model, batch_size
    raise ValueError(
        f"model: expected a path, ONNX bytes, MLIR text or a "
        f"torch.nn.Module, got {type(model).__name__}")


def _export_torch(model, example_inputs, batch_size, out_dir):
    """Exports a torch.nn.Module to ONNX with a dynamic batch dim."""
    import torch

    if example_inputs is None:
        raise ValueError("example_inputs: a torch.nn.Module needs example "
                         "inputs to be exported to ONNX")
    if isinstance(example_inputs, torch.Tensor):
        example_inputs = (example_inputs,)
    example_inputs = tuple(example_inputs)
    if not example_inputs or not all(
            isinstance(t, torch.Tensor) and t.dim() > 0
            for t in example_inputs):
        raise ValueError("example_inputs: expected a tensor or a tuple of "
                         "tensors with a batch dim")
    input_names = [f"input{i}" for i in range(len(example_inputs))]
    with torch.no_grad():
        outputs = model(*example_inputs)
    num_outputs = len(outputs) if isinstance(outputs, (tuple, list)) else 1
    output_names = [f"output{i}" for i in range(num_outputs)]
    path = os.path.join(out_dir, "model.onnx")
    # The training graph as written: eval mode's folding (batch norm into
    # the convolution) would change the ops ppc parallelizes.
    torch.onnx.export(
        model, example_inputs, path, input_names=input_names,
        output_names=output_names,
        dynamic_axes={name: {0: "batch"}
                      for name in input_names + output_names},
        training=torch.onnx.TrainingMode.PRESERVE,
        do_constant_folding=False)
    if batch_size is None:
        batch_size = int(example_inputs[0].shape[0])
    return path, batch_size


def _strategy_file(strategy, out_dir):
    """A strategy file for ppc-import-strategy, or None for none."""
    if strategy is None:
        return None
    if isinstance(strategy, Result):
        return strategy.strategy_path
    if isinstance(strategy, (str, os.PathLike)):
        return os.fspath(strategy)
    if isinstance(strategy, list):
        strategy = {"ops": strategy}
    if not isinstance(strategy, dict):
        raise ValueError(
            f"strategy: expected None, a Result, a path, a dict or a list "
            f"of per-op dicts, got {type(strategy).__name__}")
    # What ppc reads back; informative keys (prediction, machine) it ignores.
    path = os.path.join(out_dir, "strategy-in.json")
    with open(path, "w") as f:
        json.dump(strategy, f)
    return path
