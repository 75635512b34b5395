# -*- Python -*-
import os

import lit.formats
from lit.llvm import llvm_config
from lit.llvm.subst import ToolSubst

config.name = "PPC"
config.test_format = lit.formats.ShTest(not llvm_config.use_lit_shell)
config.suffixes = [".mlir", ".onnxtxt", ".test"]
config.excludes = ["Inputs", "CMakeLists.txt", "lit.cfg.py", "lit.site.cfg.py",
                   "unit"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = os.path.join(config.ppc_obj_root, "test")
config.substitutions.append(("%PATH%", config.environment["PATH"]))
config.substitutions.append(("%ppc_src_root", config.ppc_src_root))
config.substitutions.append(("%mlir_include", config.mlir_include_dir))
config.substitutions.append(("%examples", os.path.join(config.ppc_src_root, "examples")))

llvm_config.with_system_environment(["HOME", "INCLUDE", "LIB", "TMP", "TEMP"])
llvm_config.use_default_substitutions()

tool_dirs = [config.ppc_tools_dir, config.llvm_tools_dir]
tools = ["ppc-opt", "ppc-calibrate", "ppc-tblgen",
         ToolSubst("not", unresolved="fatal"),
         ToolSubst("split-file", unresolved="fatal")]
llvm_config.add_tool_substitutions(tools, tool_dirs)
llvm_config.with_environment("PATH", config.llvm_tools_dir, append_path=True)
llvm_config.with_environment("PATH", config.ppc_tools_dir, append_path=True)

# Upstream mlir-opt (the LLVM release's), for the shard export and plugins.
if config.upstream_mlir_opt:
    config.available_features.add("upstream-mlir-opt")
    config.substitutions.append(("%upstream-mlir-opt", config.upstream_mlir_opt))
if config.ppc_plugins_built:
    config.available_features.add("ppc-plugins")
    config.substitutions.append(("%ppc_lib", os.path.join(config.ppc_obj_root, "lib")))

# Headless Chromium draws the reports' graph.html as a browser would (its
# script lays the graph out); the tests that read what it drew need it.
import shutil
chromium = shutil.which("chromium-headless-shell") or shutil.which("chromium")
if chromium:
    config.available_features.add("chromium")
    config.substitutions.append(
        ("%chromium", chromium + " --headless --no-sandbox --disable-gpu "
         "--no-first-run --window-size=1400,1000"))
