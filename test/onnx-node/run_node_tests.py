#!/usr/bin/env python3
"""Runs ONNX's own backend node tests (Debian: libonnx-testdata) through ppc.

For every case: import model.onnx with ppc-opt, lower it to a forward-only
plan on one device, run the plan with ppc-run on test_data_set_0's inputs,
and compare every output with the expected one. A case is
  passed       the outputs match (rtol 1e-4, atol 1e-5 on float32 values);
  failed       ppc imported and ran it but an output differs, or ppc-run
               failed for another reason than a missing kernel;
  not-imported the importer rejects the model (op, opset or dynamic shape
               ppc does not handle);
A case older than the importer's oldest opset is first converted to it
with onnx.version_converter (the conversion the importer advises).
  not-run      the case's data are not plain tensors (sequences, optionals)
               or do not have the shapes its model declares;
  no-kernel    it imports, but the cpu backend lacks a kernel it needs.
  known        a difference from this ONNX release's expected outputs that
               ppc keeps on purpose (KNOWN_DIFFERENCES says why).
A case whose model feeds an attribute-like operand (Resize's scales, Pad's
pads) from a graph input, which ppc refuses as non-constant, runs again
with those inputs made initializers holding the case's data: the model
specialized to its test inputs, as an exporter with fixed shapes writes it.
--save-plans DIR keeps each case's plan (and lowering result) in DIR;
--plans DIR runs those instead of ppc-opt, on a host without it (a GPU host
that runs gpu-check.sh's kit).
Exits 1 when a case failed, or when --check-list names a passing list that
no longer matches (docs/onnx-node-tests.md stays true to the code).
"""
import argparse
import concurrent.futures
import glob
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

import numpy as np
import onnx
from onnx import numpy_helper, version_converter

try:  # onnx >= 1.13; `mapping` is gone from later releases
    from onnx.helper import tensor_dtype_to_np_dtype
except ImportError:
    from onnx.mapping import TENSOR_TYPE_TO_NP_TYPE
    tensor_dtype_to_np_dtype = TENSOR_TYPE_TO_NP_TYPE.__getitem__


KNOWN_DIFFERENCES = {
    "test_cast_FLOAT_to_BFLOAT16":
        "ONNX 1.12's expected output truncates to bfloat16; ppc rounds to "
        "nearest even, as PyTorch and later ONNX releases do",
    "test_training_dropout":
        "a random mask: ONNX's expected output holds numpy's draw, ppc draws "
        "its own (DropoutMask.h: the op's seed, the step, the element)",
    "test_training_dropout_default":
        "a random mask: ONNX's expected output holds numpy's draw, ppc draws "
        "its own (DropoutMask.h: the op's seed, the step, the element)",
}


def load_tensors(case, prefix):
    files = sorted(glob.glob(os.path.join(case, "test_data_set_0",
                                          prefix + "_*.pb")),
                   key=lambda f: int(re.search(r"_(\d+)\.pb$", f).group(1)))
    tensors = []
    for path in files:
        tensor = onnx.TensorProto()
        with open(path, "rb") as f:
            tensor.ParseFromString(f.read())
        tensors.append(numpy_helper.to_array(tensor))
    return tensors


def as_declared(values, value_infos):
    """bfloat16 data come as the raw upper halves of float32 values."""
    out = []
    for value, info in zip(values, value_infos):
        if (info.type.tensor_type.elem_type == onnx.TensorProto.BFLOAT16
                and value.dtype == np.uint16):
            value = (value.astype(np.uint32) << 16).view(np.float32)
        out.append(value)
    return out


def declared_shape(value_info):
    dims = value_info.type.tensor_type.shape.dim
    if not value_info.type.HasField("tensor_type") or any(
            not d.HasField("dim_value") for d in dims):
        return None
    return tuple(d.dim_value for d in dims)


MIN_OPSET = 9  # the importer's oldest opset (kMinOpset)


def upgraded_model(case, model, work):
    """A case older than the importer's opsets, converted to MIN_OPSET with
    onnx.version_converter as the importer's error advises users to (Elu,
    Selu, InstanceNormalization... are opset 6 cases whose ops have not
    changed since); the case's own model where it is recent enough or the
    converter fails (the importer then says why)."""
    path = os.path.join(case, "model.onnx")
    opset = next((o.version for o in model.opset_import
                  if o.domain in ("", "ai.onnx")), MIN_OPSET)
    if opset >= MIN_OPSET:
        return path
    try:
        converted = version_converter.convert_version(model, MIN_OPSET)
    except Exception:  # the converter's errors are of many types
        return path
    out = os.path.join(work, "model.onnx")
    onnx.save(converted, out)
    return out


def attribute_like_inputs(model, input_names):
    """Graph inputs that no node reads as its first (data) operand."""
    data = {n.input[0] for n in model.graph.node if n.input}
    read = {i for n in model.graph.node for i in n.input}
    return [name for name in input_names if name in read and name not in data]


def bake_inputs(model, values, path):
    """Saves `model` with the graph inputs in `values` made initializers."""
    baked = onnx.ModelProto()
    baked.CopyFrom(model)
    kept = [i for i in baked.graph.input if i.name not in values]
    for info in baked.graph.input:
        if info.name in values:
            dtype = tensor_dtype_to_np_dtype(info.type.tensor_type.elem_type)
            baked.graph.initializer.append(numpy_helper.from_array(
                np.asarray(values[info.name], dtype=dtype), info.name))
    del baked.graph.input[:]
    baked.graph.input.extend(kept)
    onnx.save(baked, path)


def copy_plan(src, dst):
    """A plan and the weights file ppc-opt writes beside it."""
    shutil.copyfile(src, dst)
    if os.path.exists(src + ".weights"):
        shutil.copyfile(src + ".weights", dst + ".weights")


def run_case(case, ppc_opt, ppc_run, backend="cpu", save_plans=None,
             plans=None):
    """`save_plans`: a folder where each lowering's plan and result are kept;
    `plans`: such a folder, read instead of running ppc-opt (a GPU host
    without the compiler's libraries runs the cases lowered elsewhere)."""
    name = os.path.basename(case)
    model = onnx.load(os.path.join(case, "model.onnx"),
                      load_external_data=False)
    initializers = {t.name for t in model.graph.initializer}
    input_names = [i.name for i in model.graph.input
                   if i.name not in initializers]
    try:
        inputs = load_tensors(case, "input")
        expected = load_tensors(case, "output")
    except Exception as e:  # sequences and optionals are not tensors
        return name, "not-run", f"test data are not plain tensors ({e})"
    if len(inputs) != len(input_names) or not expected:
        return name, "not-run", "test data do not match the model's inputs"
    inputs = as_declared(inputs, [i for i in model.graph.input
                                  if i.name not in initializers])
    expected = as_declared(expected, model.graph.output)
    declared = [declared_shape(i) for i in model.graph.input
                if i.name not in initializers]
    for input_name, shape, value in zip(input_names, declared, inputs):
        if shape is not None and shape != np.shape(value):
            return name, "not-run", (f"input '{input_name}' is declared "
                                     f"{list(shape)} but its data is "
                                     f"{list(np.shape(value))}")
    with tempfile.TemporaryDirectory(prefix="ppc-node-") as work:
        plan = os.path.join(work, "plan.pb")

        def lower(path, tag):
            stored = os.path.join(save_plans or plans or "", f"{name}.{tag}")
            if plans:
                with open(stored + ".json") as f:
                    result = json.load(f)
                if result["returncode"] == 0:
                    copy_plan(stored + ".pb", plan)
                return subprocess.CompletedProcess([], **result, stdout="")
            proc = subprocess.run(
                [ppc_opt, path, f"--ppc-lower-to-plan=plan={plan}", "-o",
                 os.devnull], capture_output=True, text=True, timeout=120)
            if save_plans:
                with open(stored + ".json", "w") as f:
                    json.dump({"returncode": proc.returncode,
                               "stderr": proc.stderr}, f)
                if proc.returncode == 0:
                    copy_plan(plan, stored + ".pb")
            return proc
        model_path = (os.path.join(case, "model.onnx") if plans else
                      upgraded_model(case, model, work))
        proc = lower(model_path, "model")
        baked = attribute_like_inputs(model, input_names)
        if (proc.returncode != 0 and "non-constant" in proc.stderr and
                baked):
            values = dict(zip(input_names, inputs))
            path = os.path.join(work, "baked.onnx")
            if not plans:
                bake_inputs(onnx.load(model_path),
                            {n: values[n] for n in baked}, path)
            proc = lower(path, "baked")
            kept = [(n, v) for n, v in zip(input_names, inputs)
                    if n not in baked]
            input_names = [n for n, _ in kept]
            inputs = [v for _, v in kept]
        if proc.returncode != 0:
            first = (proc.stderr.strip().splitlines() or ["?"])[0]
            return name, "not-imported", first
        # Some cases feed NaN and Inf on purpose (casts): accept them.
        args = [ppc_run, plan, "--steps", "1", "--quiet", "--allow-nonfinite",
                "--backend", backend, "--save-outputs",
                os.path.join(work, "out")]
        for input_name, value in zip(input_names, inputs):
            path = os.path.join(work, f"input_{len(args)}.npy")
            np.save(path, np.asarray(value, dtype=np.float32))
            args += ["--input", f"{input_name}={path}"]
        proc = subprocess.run(args, capture_output=True, text=True,
                              timeout=120)
        if proc.returncode != 0:
            text = proc.stderr.strip() or proc.stdout.strip()
            if ("has no forward kernel" in text or
                    "backend has no kernel for it" in text):
                return name, "no-kernel", text.splitlines()[0]
            return name, "failed", (text.splitlines() or ["?"])[-1]
        for i, want in enumerate(expected):
            found = glob.glob(os.path.join(work, "out", f"output_{i}_*.npy"))
            if len(found) != 1:
                return name, "failed", f"output {i} was not written"
            path = found[0]
            got = np.load(path)
            want = np.asarray(want)
            if got.shape != want.shape:
                return name, "failed", (f"output {i} has shape {got.shape}, "
                                        f"expected {want.shape}")
            if want.dtype == np.bool_:
                want = want.astype(np.float32)
            want = want.astype(np.float64)
            if not np.allclose(got, want, rtol=1e-4, atol=1e-5,
                               equal_nan=True):
                if name in KNOWN_DIFFERENCES:
                    return name, "known", KNOWN_DIFFERENCES[name]
                with np.errstate(invalid="ignore"):
                    err = np.nanmax(np.abs(got - want))
                return name, "failed", f"output {i} differs by up to {err:g}"
    return name, "passed", ""


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ppc-opt")
    parser.add_argument("--ppc-run", required=True)
    parser.add_argument("--data",
                        default="/usr/share/libonnx-testdata/data/node")
    parser.add_argument("--filter", default="", help="regex on case names")
    parser.add_argument("--backend", default="cpu",
                        help="ppc-run's backend (cuda: on a GPU)")
    parser.add_argument("--save-plans", metavar="DIR",
                        help="keep each case's plan and lowering result here")
    parser.add_argument("--plans", metavar="DIR",
                        help="run the plans --save-plans kept, without "
                        "ppc-opt (on a host without the compiler)")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--write-list", help="write the results (markdown)")
    parser.add_argument("--check-list",
                        help="fail unless the passing cases are those listed")
    args = parser.parse_args()
    if not args.ppc_opt and not args.plans:
        parser.error("--ppc-opt is required unless --plans is given")
    if args.save_plans:
        os.makedirs(args.save_plans, exist_ok=True)

    cases = sorted(c for c in glob.glob(os.path.join(args.data, "test_*"))
                   if re.search(args.filter, os.path.basename(c)))
    if not cases:
        sys.exit(f"no ONNX node test cases under {args.data}")
    results = []
    with concurrent.futures.ThreadPoolExecutor(args.jobs) as pool:
        futures = [pool.submit(run_case, c, args.ppc_opt, args.ppc_run,
                               args.backend, args.save_plans, args.plans)
                   for c in cases]
        for case, future in zip(cases, futures):
            try:
                results.append(future.result())
            except Exception as e:  # a broken case must not stop the rest
                results.append((os.path.basename(case), "failed", str(e)))
    by_status = {}
    for name, status, detail in results:
        by_status.setdefault(status, []).append((name, detail))
    for name, detail in by_status.get("failed", []):
        print(f"FAILED {name}: {detail}")
    if args.write_list:
        write_list(args.write_list, by_status)
    ok = not by_status.get("failed")
    if args.check_list:
        text = open(args.check_list).read()
        passed = re.search(r"^## passed.*?(?=^## |\Z)", text, re.M | re.S)
        listed = set(re.findall(r"^- `(test_\w+)`",
                                passed.group(0) if passed else "", re.M))
        passing = {n for n, _ in by_status.get("passed", [])}
        if listed != passing:
            print(f"{args.check_list} is out of date: newly passing "
                  f"{sorted(passing - listed)}, no longer passing "
                  f"{sorted(listed - passing)}; rerun with --write-list")
            ok = False
    counts = ", ".join(f"{len(v)} {k}" for k, v in sorted(by_status.items()))
    print(f"ONNX node tests: {len(results)} cases: {counts}")
    sys.exit(0 if ok else 1)


def write_list(path, by_status):
    with open(path, "w") as f:
        f.write("# ONNX backend node tests run through ppc-run\n\n"
                "Generated by `test/onnx-node/run_node_tests.py "
                "--write-list`; the ctest entry `onnx-node-tests` checks "
                "that the passing cases are exactly these.\n\n"
                "A case older than opset 9 is first converted to opset 9 "
                "with onnx.version_converter. "
                "Each case is imported by ppc-opt, lowered to a forward-only "
                "plan on one device, run by ppc-run on the case's inputs, and "
                "its outputs are compared with ONNX's (rtol 1e-4, atol "
                "1e-5). A case that feeds an attribute-like operand (Resize's "
                "scales, Pad's pads) from a graph input, which ppc refuses "
                "as non-constant, runs again with those inputs made "
                "initializers holding the case's data.\n\n")
        for status in ["passed", "known", "failed", "no-kernel",
                       "not-imported", "not-run"]:
            items = sorted(by_status.get(status, []))
            f.write(f"## {status} ({len(items)})\n\n")
            for name, detail in items:
                f.write(f"- `{name}`" + (f": {detail}" if detail and
                                          status != "passed" else "") + "\n")
            f.write("\n")


if __name__ == "__main__":
    main()
