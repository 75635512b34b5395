"""Bad input raises ValueError or RuntimeError with ppc's message (what
ppc-opt prints for the same input), never a crash; the module keeps working
afterwards."""

import os
import unittest

import ppc
from ppctest import TempDirTest, example, ppc_opt

MODEL = example("mlp.onnx")


def ppc_opt_error(*args):
    process = ppc_opt(*args, "-o", os.devnull, check=False)
    assert process.returncode != 0, args
    return process.stderr


class ErrorsTest(TempDirTest):
    def assertRaisesPpc(self, exception, expected, call):
        """`call` raises `exception` whose message starts with a line of
        ppc-opt's output `expected`; returns the message."""
        with self.assertRaises(exception) as raised:
            call()
        message = str(raised.exception)
        self.assertTrue(message, "empty message")
        self.assertIn(message.splitlines()[0].strip(), expected)
        return message

    def assertAutoParallelError(self, exception, options, **kwargs):
        """parallelize(MODEL, cpux2, batch 4, **kwargs) raises `exception`
        with ppc-opt's message for the same `options`; returns it."""
        return self.assertRaisesPpc(
            exception,
            ppc_opt_error(MODEL, "--batch-size=4",
                          f"--ppc-auto-parallel=machine=cpux2 {options}"),
            lambda: ppc.parallelize(MODEL, machine="cpux2", batch_size=4,
                                    **kwargs))

    def test_missing_model(self):
        missing = self.path("missing.onnx")
        message = self.assertRaisesPpc(
            ValueError, ppc_opt_error(missing),
            lambda: ppc.parallelize(missing, machine="cpux2"))
        self.assertIn("missing.onnx", message)

    def test_unknown_machine(self):
        message = self.assertRaisesPpc(
            ValueError,
            ppc_opt_error(MODEL, "--batch-size=4",
                          "--ppc-attach-machine=machine=dgx-z900"),
            lambda: ppc.parallelize(MODEL, machine="dgx-z900", batch_size=4))
        self.assertIn("dgx-z900", message)
        self.assertIn("dgx-h100xN", message)

    def test_unknown_option(self):
        message = self.assertAutoParallelError(ValueError, "bogus-knob=3",
                                               bogus_knob=3)
        self.assertIn("--ppc-auto-parallel has no option 'bogus-knob'",
                      message)
        self.assertIn("its options: budget,", message)

    def test_misspelt_option_gets_the_nearest(self):
        message = self.assertAutoParallelError(ValueError, "serach=dp",
                                               serach="dp")
        self.assertIn("did you mean 'search'?", message)

    def test_a_failed_call_leaves_no_temporary_directory(self):
        # Without out_dir a call works in a new /tmp/ppc-* directory: gone
        # again when the call fails, kept when it succeeds.
        import tempfile
        saved = tempfile.tempdir
        tempfile.tempdir = self.path("tmp")
        os.makedirs(tempfile.tempdir)
        try:
            with self.assertRaises(ValueError):
                ppc.parallelize(MODEL, machine="cpux2", batch_size=4,
                                bogus_knob=3)
            with self.assertRaises(ValueError):
                ppc.simulate(MODEL, machine="dgx-z900", batch_size=4)
            self.assertEqual(os.listdir(tempfile.tempdir), [])
            result = ppc.parallelize(MODEL, machine="cpux2", batch_size=4,
                                     budget=50, threads=1)
            self.assertEqual(os.listdir(tempfile.tempdir),
                             [os.path.basename(os.path.dirname(
                                 result.report_dir))])
        finally:
            tempfile.tempdir = saved

    def test_bad_option_value(self):
        # A value outside an option's list gets the list; others llvm::cl's
        # message.
        for option, value, expected in (
                ("optimizer", "rmsprop",
                 "'rmsprop' is not a value of optimizer; expected sgd, "
                 "momentum or adam"),
                ("threads", "many", "--threads option")):
            with self.subTest(option):
                message = self.assertAutoParallelError(
                    ValueError, f"{option}={value}", **{option: value})
                self.assertIn(expected, message)

    def test_bad_budget_fails_in_the_search(self):
        message = self.assertAutoParallelError(RuntimeError, "budget=soon",
                                               budget="soon")
        self.assertIn("bad budget 'soon'", message)

    def test_not_a_model(self):
        with self.assertRaises(ValueError) as raised:
            ppc.parallelize(b"\x08\x07garbage", machine="cpux2",
                            out_dir=self.path("bytes"))
        self.assertIn("model.onnx", str(raised.exception))
        with self.assertRaises(ValueError) as raised:
            ppc.parallelize("module { func.func @f( }", machine="cpux2",
                            out_dir=self.path("text"))
        self.assertIn("model.mlir:1:", str(raised.exception))
        with self.assertRaises(ValueError):
            ppc.parallelize(42, machine="cpux2")

    def test_strategy_for_another_model(self):
        other = ppc.simulate(example("cnn.onnx"), None, machine="cpux2",
                             batch_size=4, out_dir=self.path("cnn"))
        with self.assertRaises(RuntimeError) as raised:
            ppc.simulate(MODEL, other.strategy_path, machine="cpux2",
                         batch_size=4, out_dir=self.path("mlp"))
        self.assertIn("ppc-import-strategy", str(raised.exception))
        self.assertIn("no op named", str(raised.exception))

    def test_still_works_after_errors(self):
        for call in (lambda: ppc.parallelize(MODEL, machine="nope"),
                     lambda: ppc.parallelize(MODEL, machine="cpux2",
                                             batch_size=4, budget="x")):
            self.assertRaises((ValueError, RuntimeError), call)
        result = ppc.parallelize(MODEL, machine="cpux2", batch_size=4,
                                 budget=50, threads=1,
                                 out_dir=self.path("ok"))
        self.assertTrue(result.strategy)


if __name__ == "__main__":
    unittest.main()
