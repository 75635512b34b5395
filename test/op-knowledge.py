"""Op knowledge lives in the op (DESIGN.md): outside the graph dialect and
the translations to and from other formats (the ONNX importer, lib/Interop's
TOSA/linalg importer and linalg exporter, which map each op by name), no
code tests which compute op it has. No isa<>, cast<>,
dyn_cast<>, getDefiningOp<> or TypeSwitch case names a class of an op that
implements ParallelizableOpInterface (include/ppc/Dialect/Graph/
GraphOps.td's PPC_ComputeOp and the classes built on it), and no code compares
an op's kind to a compute op's name ("ppc.linear"). What a lowering, search
or simulator needs to know of an op it asks the op's interface, or reads
from its iteration space.

The resharding ops (repartition, combine, replicate, reduce) are the
lowering's own vocabulary and are not compute ops; weights and constants
are sources, not ops the search splits.

usage: op-knowledge.py SOURCE_DIR
"""
import os
import re
import sys

root = sys.argv[1]
td = open(os.path.join(root, "include/ppc/Dialect/Graph/GraphOps.td")).read()

# Classes deriving (directly or through other classes) from PPC_ComputeOp.
compute_classes = {"PPC_ComputeOp"}
changed = True
while changed:
    changed = False
    for name, parent in re.findall(r"class\s+(\w+)\s*<[^:]*?:\s*(\w+)\s*<", td):
        if parent in compute_classes and name not in compute_classes:
            compute_classes.add(name)
            changed = True
ops = {}  # C++ class -> mnemonic
for name, parent, mnemonic in re.findall(
        r'def\s+PPC_(\w+)\s*:\s*(\w+)\s*<\s*"([\w.]+)"', td):
    if parent in compute_classes:
        ops[name] = "ppc." + mnemonic
if len(ops) < 40:
    sys.exit("found only %d compute ops in GraphOps.td: is the pattern stale?"
             % len(ops))

names = "|".join(sorted(ops))
class_use = re.compile(
    r"(?:isa|isa_and_nonnull|cast|dyn_cast|dyn_cast_or_null|cast_or_null|"
    r"getDefiningOp|Case)\s*<[^>;]*\b(?:graph::)?(" + names + r")\b")
kind_use = re.compile(r'"(' + "|".join(re.escape(m) for m in ops.values())
                      + r')"')

# Where op classes may be named: the dialect that defines the ops and the
# translations that create or read them op by op.
allowed = ("dialects/", "lib/Import/", "lib/Interop/")
checked = ("lib", "search", "simulator", "runtime", "tools")
bad = []
files = 0
for top in checked:
    for dirpath, _, filenames in os.walk(os.path.join(root, top)):
        rel_dir = os.path.relpath(dirpath, root) + "/"
        if rel_dir.startswith(allowed):
            continue
        for f in filenames:
            if not f.endswith((".cpp", ".h")):
                continue
            path = os.path.join(dirpath, f)
            rel = os.path.relpath(path, root)
            files += 1
            for n, line in enumerate(open(path, encoding="utf-8"), 1):
                code = line.split("//")[0]
                m = class_use.search(code)
                if m:
                    bad.append("%s:%d: tests for %s" % (rel, n, m.group(1)))
                # The runtime's kernel tables and plan readers are keyed by
                # op name: that is where a kernel is registered, not a test.
                if top in ("runtime", "tools"):
                    continue
                m = kind_use.search(code)
                if m:
                    bad.append("%s:%d: compares with %s" % (rel, n, m.group(1)))
if bad:
    print("\n".join(bad))
    sys.exit("%d places test which compute op they have; ask the op's "
             "ParallelizableOpInterface instead" % len(bad))
print("no code outside dialects/, lib/Import/ and lib/Interop/ tests which of %d compute "
      "ops it has (%d files)" % (len(ops), files))
