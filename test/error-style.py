"""One error style outside MLIR (DESIGN.md, docs/architecture.md): the
MLIR-free code (simulator/, search/, runtime/, lib/Report, lib/Support, their
headers and the runtime's tools) reports failures as absl::Status. This
fails on a `throw` there (exceptions of the standard library and of
nlohmann-json are caught where they are raised: catching is allowed) and on
an error out-parameter (`std::string &error`).

usage: error-style.py SOURCE_DIR
"""
import os
import re
import sys

root = sys.argv[1]
folders = ["simulator", "search", "runtime", "lib/Report", "lib/Support",
           "include/ppc/Simulator", "include/ppc/Search",
           "include/ppc/Runtime", "include/ppc/Report", "include/ppc/Support",
           "tools/ppc-run", "tools/ppc-profile", "tools/ppc-calibrate",
           "tools/ppc-checkpoint", "tools/ppc-elastic"]
patterns = [
    (re.compile(r"\bthrow\b"), "throws"),
    (re.compile(r"std::string\s*[&*]\s*error\b"),
     "returns its error through a string out-parameter"),
]


def code_of(line):
    """The line without its // comment and string literals."""
    line = re.sub(r'"(\\.|[^"\\])*"', '""', line)
    return line.split("//", 1)[0]


checked, bad = 0, []
for folder in folders:
    for dirpath, _, files in os.walk(os.path.join(root, folder)):
        for name in sorted(files):
            if not name.endswith((".cpp", ".h", ".cu", ".cuh")):
                continue
            path = os.path.join(dirpath, name)
            checked += 1
            with open(path, encoding="utf-8", errors="replace") as f:
                for number, line in enumerate(f, 1):
                    code = code_of(line)
                    for pattern, what in patterns:
                        if pattern.search(code):
                            bad.append("%s:%d: %s: %s" % (
                                os.path.relpath(path, root), number, what,
                                line.strip()))
if checked == 0:
    sys.exit("error-style: no source files under %s" % root)
for line in bad:
    print("error-style: " + line)
if bad:
    sys.exit("error-style: %d places outside MLIR that do not return "
             "absl::Status" % len(bad))
print("error-style: %d files outside MLIR report errors as absl::Status"
      % checked)
