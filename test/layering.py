"""The MLIR-free libraries compile without LLVM's and MLIR's headers: no
compile command of an object of simulator/, search/ or runtime/ (where
CMake puts those libraries' objects) names one of LLVM's or MLIR's include
directories, so an MLIR include there fails to build (DESIGN.md's layering;
the top-level CMakeLists.txt adds those directories only after them).

usage: layering.py COMPILE_COMMANDS.json INCLUDE_DIR...
"""
import json
import shlex
import sys

commands = json.load(open(sys.argv[1]))
forbidden = {d.rstrip("/") for d in sys.argv[2:] if d}
checked, bad = 0, []
for entry in commands:
    words = shlex.split(entry["command"])
    output = words[words.index("-o") + 1] if "-o" in words else ""
    if not output.startswith(("simulator/", "search/", "runtime/")):
        continue
    checked += 1
    for i, word in enumerate(words):
        path = None
        if word in ("-I", "-isystem") and i + 1 < len(words):
            path = words[i + 1]
        elif word.startswith("-I"):
            path = word[2:]
        if path and path.rstrip("/") in forbidden:
            bad.append("%s: %s %s" % (output, word, path))
if checked == 0:
    sys.exit("layering: no object of simulator/, search/ or runtime/ in %s"
             % sys.argv[1])
for line in bad:
    print("layering: " + line)
if bad:
    sys.exit("layering: %d MLIR-free objects see LLVM/MLIR headers" % len(bad))
print("layering: %d objects of simulator/, search/ and runtime/ compile "
      "without LLVM's or MLIR's include directories" % checked)
