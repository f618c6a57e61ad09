#!/usr/bin/env python3
"""Sums up one libFuzzer run of a cargo-fuzz target (`make fuzz-cargo`, mk/fuzz.mk).

    core/fuzz/summary.py TARGET LOG ARTIFACT_DIR STARTED_AT

Reads the run's log (run with -print_final_stats=1) and prints one line: executions, exec/s,
coverage (edges and features), corpus size, and the findings of this run: the artifacts
(crash-, oom-, timeout-, leak-, slow-unit-) written since STARTED_AT (Unix seconds). Exits 1 when
there is a finding or the log has no final statistics (the run did not finish).
"""

import pathlib
import re
import sys


def main() -> int:
    if len(sys.argv) != 5:
        print(__doc__, file=sys.stderr)
        return 2
    target, log, artifacts, started = (
        sys.argv[1],
        pathlib.Path(sys.argv[2]),
        pathlib.Path(sys.argv[3]),
        float(sys.argv[4]),
    )
    text = log.read_text(errors="replace") if log.exists() else ""
    stats = dict(re.findall(r"^stat::(\w+):\s*(\d+)", text, re.M))
    progress = re.findall(r"^#(\d+)\s+\w+\s+cov: (\d+) ft: (\d+) corp: (\d+)/(\S+)", text, re.M)
    findings = sorted(
        str(p)
        for p in (artifacts.glob("*") if artifacts.is_dir() else [])
        if p.is_file() and p.stat().st_mtime >= started
    )
    execs = stats.get("number_of_executed_units", progress[-1][0] if progress else "?")
    rate = stats.get("average_exec_per_sec", "?")
    cov, ft, corp, corp_size = progress[-1][1:] if progress else ("?", "?", "?", "?")
    seconds = stats.get("slowest_unit_time_sec", "?")
    print(
        f"fuzz-cargo {target}: {execs} executions, {rate} exec/s, coverage {cov} edges / {ft} features, "
        f"corpus {corp} inputs ({corp_size}), slowest input {seconds} s, "
        f"findings: {len(findings) if findings else 0}"
    )
    for f in findings:
        print(f"  finding: {f}   (replay: cargo +nightly fuzz run --fuzz-dir core/fuzz {target} {f})")
    if findings:
        for line in text.splitlines():
            if "panicked at" in line or line.startswith(("==", "SUMMARY", "broken promise")):
                print(f"  {line}")
                break
    if not stats:
        print(f"  the run ended without final statistics: see {log}")
    return 1 if findings or not stats else 0


if __name__ == "__main__":
    sys.exit(main())
