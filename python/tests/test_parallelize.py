"""ppc.parallelize gives what `ppc-opt --ppc-auto-parallel` gives for the
same model and options: the same strategy file (degrees, devices, predicted
times) and plan, whether the model comes as a path, ONNX bytes, MLIR text or
a torch.nn.Module."""

import filecmp
import os
import threading
import time
import unittest

import ppc
from ppctest import TempDirTest, example, ppc_opt, read_json

# A short, deterministic search: a fixed number of proposals on one chain.
SEARCH = {"machine": "cpux2", "search": "mcmc", "budget": 300, "threads": 1}


def ppc_opt_auto_parallel(model, out_dir, batch_size=None, **options):
    """ppc-opt's report directory and plan for `model` with `options`."""
    text = " ".join(f"{key.replace('_', '-')}={value}"
                    for key, value in {**SEARCH, **options}.items())
    args = [model]
    if batch_size is not None:
        args.append(f"--batch-size={batch_size}")
    ppc_opt(*args, f"--ppc-auto-parallel={text} "
            f"report-dir={out_dir}/report plan={out_dir}/plan.pb",
            "-o", os.devnull)
    return os.path.join(out_dir, "report"), os.path.join(out_dir, "plan.pb")


def check_same_as_ppc_opt(test, result, model, batch_size=None, **options):
    """`result` is what ppc-opt writes for `model` with `options`."""
    report, plan = ppc_opt_auto_parallel(model, test.path("oracle"),
                                         batch_size, **options)
    expected = read_json(os.path.join(report, "strategy.json"))
    test.assertEqual(result.strategy, expected["ops"])
    prediction = expected["prediction"]
    test.assertEqual(result.predicted_time_s, prediction["iteration_ms"] / 1e3)
    test.assertEqual(result.memory_per_device,
                     prediction["peak_memory_bytes"])
    test.assertEqual(result.out_of_memory, prediction["out_of_memory"])
    test.assertTrue(filecmp.cmp(result.plan_path, plan, shallow=False),
                    "plans differ")
    for name in ("summary.txt", "baselines.json", "graph.html"):
        test.assertTrue(os.path.exists(os.path.join(result.report_dir, name)),
                        name)


class ParallelizeTest(TempDirTest):
    def test_onnx_examples(self):
        for name, batch in (("cnn.onnx", 16), ("mlp.onnx", 32)):
            with self.subTest(name):
                out = self.path(name)
                result = ppc.parallelize(example(name), batch_size=batch,
                                         out_dir=out, **SEARCH)
                self.assertEqual(result.report_dir,
                                 os.path.join(out, "report"))
                check_same_as_ppc_opt(self, result, example(name), batch)
                # Every op is on the machine's devices, with one degree per
                # iteration dim.
                for op in result.strategy:
                    self.assertEqual(len(op["degrees"]), len(op["dims"]))
                    self.assertTrue(set(op["devices"]) <= {0, 1}, op)

    def test_options_reach_the_search(self):
        # Megatron's layout, tensor parallel over 4 of the 8 GPUs: the
        # search options are ppc-auto-parallel's, with '_' for '-'.
        options = {"machine": "dgx-h100", "search": "megatron", "tp": 4,
                   "budget": 300, "optimizer": "adam",
                   "grad_bucket_bytes": 1 << 20}
        model = example("transformer.onnx")
        result = ppc.parallelize(model, batch_size=16, out_dir=self.path("t"),
                                 **options)
        check_same_as_ppc_opt(self, result, model, 16, **options)
        tensor_parallel = [
            op["name"] for op in result.strategy
            if any(degree == 4 and dim["kind"] != "sample"
                   for degree, dim in zip(op["degrees"], op["dims"]))]
        self.assertTrue(tensor_parallel, "no op split 4 ways by tp=4")

    def test_memory_limit_is_what_out_of_memory_is_judged_by(self):
        # Nothing fits in 100 KiB: the result says so, and the limit is the
        # capacity it reports against.
        result = ppc.parallelize(example("mlp.onnx"), batch_size=32,
                                 out_dir=self.path("limit"),
                                 memory_limit="100KiB", **SEARCH)
        self.assertTrue(result.out_of_memory)
        self.assertGreater(result.memory_per_device, 100 * 1024)
        roomy = ppc.parallelize(example("mlp.onnx"), batch_size=32,
                                out_dir=self.path("roomy"),
                                memory_limit="1GiB", **SEARCH)
        self.assertFalse(roomy.out_of_memory)

    def test_the_users_loss_is_the_one_trained(self):
        try:
            import torch
        except ImportError:
            self.skipTest("no torch")
        model = torch.nn.Sequential(torch.nn.Linear(8, 4))
        x = torch.randn(4, 8)
        kinds = {}
        for name, loss_fn in (("mse", torch.nn.MSELoss()),
                              ("ce", torch.nn.CrossEntropyLoss())):
            result = ppc.parallelize(model, x, loss_fn=loss_fn,
                                     out_dir=self.path(name), **SEARCH)
            kinds[name] = {op["kind"] for op in result.strategy}
        self.assertIn("ppc.mse_loss", kinds["mse"])
        self.assertIn("ppc.softmax_cross_entropy", kinds["ce"])
        for bad in (torch.nn.L1Loss(),
                    torch.nn.CrossEntropyLoss(label_smoothing=0.1),
                    torch.nn.MSELoss(reduction="sum")):
            with self.subTest(repr(bad)):
                with self.assertRaises(ValueError) as raised:
                    ppc.parallelize(model, x, loss_fn=bad, **SEARCH)
                self.assertIn("loss_fn", str(raised.exception))

    def test_messages_go_to_pythons_stderr(self):
        # The search's summary line reaches sys.stderr (a notebook, a
        # redirect), not only the process's file descriptor 2.
        import contextlib
        import io
        captured = io.StringIO()
        with contextlib.redirect_stderr(captured):
            ppc.parallelize(example("mlp.onnx"), batch_size=8,
                            out_dir=self.path("quiet"), **SEARCH)
        self.assertIn("ppc-search @main: MCMC", captured.getvalue())

    def test_bytes_and_mlir_text_give_the_same_strategy(self):
        model = example("mlp.onnx")
        from_path = ppc.parallelize(model, batch_size=8,
                                    out_dir=self.path("path"), **SEARCH)
        with open(model, "rb") as f:
            from_bytes = ppc.parallelize(f.read(), batch_size=8,
                                         out_dir=self.path("bytes"), **SEARCH)
        self.assertEqual(from_bytes.strategy, from_path.strategy)
        # The imported module, with its op names (locations), as MLIR text.
        mlir = self.path("mlp.mlir")
        ppc_opt(model, "--batch-size=8", "--mlir-print-debuginfo", "-o",
                mlir)
        with open(mlir) as f:
            from_text = ppc.parallelize(f.read(), out_dir=self.path("text"),
                                        **SEARCH)
        self.assertEqual(from_text.strategy, from_path.strategy)

    def test_other_threads_run_during_the_search(self):
        # The search holds no GIL: this thread keeps ticking while it runs
        # (it would not tick once if the extension kept the GIL).
        done = threading.Event()
        thread = threading.Thread(target=lambda: (ppc.parallelize(
            example("mlp.onnx"), batch_size=8, machine="cpux2",
            budget="1s", threads=1, out_dir=self.path("gil")), done.set()))
        ticks = 0
        thread.start()
        while not done.is_set() and thread.is_alive():
            ticks += 1
            time.sleep(0.01)
        thread.join()
        self.assertTrue(done.is_set(), "the search failed")
        self.assertGreater(ticks, 10)


class TorchTest(TempDirTest):
    def setUp(self):
        super().setUp()
        try:
            import torch  # noqa: F401
        except ImportError:
            self.skipTest("PyTorch is not installed (Debian: python3-torch, "
                          "which scripts/setup.sh installs)")

    def test_module_is_exported_with_a_dynamic_batch(self):
        import torch

        torch.manual_seed(0)
        model = torch.nn.Sequential(
            torch.nn.Linear(64, 256), torch.nn.ReLU(),
            torch.nn.Linear(256, 10))
        out = self.path("torch")
        # The example has 4 samples; the strategy is for 32.
        result = ppc.parallelize(model, torch.randn(4, 64), batch_size=32,
                                 out_dir=out, **SEARCH)
        kinds = [op["kind"] for op in result.strategy]
        self.assertEqual(kinds, ["ppc.linear", "ppc.relu", "ppc.linear",
                                 "ppc.softmax_cross_entropy"])
        self.assertEqual(result.strategy[0]["dims"][0],
                         {"size": 32, "kind": "sample"})
        # The exported model is kept in out_dir: ppc-opt on it agrees.
        check_same_as_ppc_opt(self, result, os.path.join(out, "model.onnx"),
                              32)

    def test_batch_defaults_to_the_example_inputs(self):
        import torch

        model = torch.nn.Linear(16, 4)
        result = ppc.parallelize(model, (torch.randn(6, 16),),
                                 out_dir=self.path("t"), **SEARCH)
        self.assertEqual(result.strategy[0]["dims"][0]["size"], 6)


if __name__ == "__main__":
    unittest.main()
