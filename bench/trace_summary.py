#!/usr/bin/env python3
"""Where a rank's step goes, from a `ppc-run --trace` file (the last step).

Per rank: the step's span; the time its compute and communication events
take; the executor's time just before a communication (after a kernel or
another communication: what `ppc-run --profile` charges to the kernel
before it since 2026-11-27); and, per phase, how long the phase's first
collective took (on the rank that arrives first, mostly waiting for the
others) and the median of its collectives.

usage: bench/trace_summary.py TRACE.json
"""
import json
import statistics
import sys


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    with open(sys.argv[1]) as f:
        data = json.load(f)
    events = data["traceEvents"] if isinstance(data, dict) else data
    events = [e for e in events if e.get("ph") == "X"]
    if not events:
        sys.exit(f"{sys.argv[1]}: no events")
    for rank in sorted({e["pid"] for e in events}):
        mine = sorted((e for e in events if e["pid"] == rank),
                      key=lambda e: e["ts"])
        compute = sum(e["dur"] for e in mine if e["tid"] == 0)
        comm = [e for e in mine if e["tid"] == 1]
        before = 0.0
        end = mine[0]["ts"]
        for e in mine:
            if e["tid"] == 1:
                before += max(0.0, e["ts"] - end)
            end = max(end, e["ts"] + e["dur"])
        span = end - mine[0]["ts"]
        print(f"rank {rank}: step {span:.0f} us, compute events "
              f"{compute:.0f} us, communication {sum(e['dur'] for e in comm):.0f}"
              f" us ({len(comm)}), executor work before communication "
              f"{before:.0f} us")
        phases = {}
        for e in comm:
            if e["name"].startswith("all_reduce"):
                phases.setdefault(e.get("args", {}).get("phase", "?"),
                                  []).append(e["dur"])
        for phase, durations in phases.items():
            print(f"  {phase}: {len(durations)} all-reduces, the first "
                  f"{durations[0]:.1f} us, median "
                  f"{statistics.median(durations):.1f} us")


if __name__ == "__main__":
    main()
