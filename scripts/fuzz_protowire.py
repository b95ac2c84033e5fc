"""Mutation fuzzing of the sidecar's C reader (``_protowire.c``) built with AddressSanitizer and UBSan.

``make fuzz`` (or ``python scripts/fuzz_protowire.py --seconds N``) builds the extension with
``-fsanitize=address,undefined`` into a temporary directory, then runs this script again under the sanitizer
runtime, where it feeds ``check_request``, ``read_request``, ``read_span`` and ``encode_result_fields`` with
mutations of real requests (every fixture, as protobuf) for a fixed time. Any sanitizer report aborts the
process: the exit status is 0 only when none was made. Python exceptions (ValueError, TypeError) are the
expected answers to bad input and are counted, not failures.
"""

from __future__ import annotations

import argparse
import ctypes
import importlib.util
import os
import random
import subprocess
import sys
import sysconfig
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SOURCE = ROOT / "src" / "trajgrade" / "doors" / "sidecar" / "_protowire.c"
FLAGS = ["-fsanitize=address,undefined", "-fno-sanitize-recover=undefined", "-fno-omit-frame-pointer", "-g", "-O1"]


def build(out_dir: Path) -> Path:
    """The extension, sanitized, as ``out_dir/_protowire<suffix>``."""
    suffix = sysconfig.get_config_var("EXT_SUFFIX")
    target = out_dir / f"_protowire{suffix}"
    include = sysconfig.get_paths()["include"]
    cmd = ["gcc", "-shared", "-fPIC", *FLAGS, f"-I{include}", str(SOURCE), "-o", str(target)]
    subprocess.run(cmd, check=True)
    return target


def sanitizer_runtime() -> str:
    libs = []
    for name in ("libasan.so", "libubsan.so"):
        path = subprocess.run(["gcc", f"-print-file-name={name}"], capture_output=True, text=True).stdout.strip()
        if not os.path.isabs(path):
            raise SystemExit(f"fuzz: gcc has no {name}: install gcc's sanitizer runtimes (Debian: libasan8 libubsan1)")
        libs.append(path)
    return ":".join(libs)


def seeds() -> list[bytes]:
    """Every fixture as an OTLP protobuf request, and a few small hand-made shapes."""
    sys.path.insert(0, str(ROOT / "src"))
    from trajgrade.doors.sidecar.otlp import decode_body

    out = []
    for path in sorted((ROOT / "tests" / "fixtures").rglob("*.json")):
        try:
            out.append(decode_body(path.read_bytes(), "application/json", "", max_decompressed=1 << 26).body)
        except Exception:
            continue  # fixture files that are not OTLP/JSON requests (truth files)
    out += [b"", b"\x0a\x00", b"\x0a\x02\x12\x00", b"\x0a\x04\x12\x02\x12\x00"]
    return out


def mutate(rng: random.Random, body: bytes, pool: list[bytes]) -> bytes:
    data = bytearray(body)
    for _ in range(rng.randint(1, 8)):
        op = rng.randrange(7)
        at = rng.randrange(len(data) + 1)
        if op == 0 and data:  # flip bits
            data[at % len(data)] ^= 1 << rng.randrange(8)
        elif op == 1 and data:  # an interesting byte
            data[at % len(data)] = rng.choice((0x00, 0x01, 0x7F, 0x80, 0xFF, 0x0A, 0x12, 0x1A, 0x22, 0x08, 0x0F))
        elif op == 2:  # insert bytes
            data[at:at] = rng.randbytes(rng.randint(1, 8))
        elif op == 3:  # delete a range
            del data[at : at + rng.randint(1, 16)]
        elif op == 4:  # a long varint
            data[at:at] = b"\xff" * rng.randint(1, 12) + b"\x01"
        elif op == 5:  # splice in part of another input
            other = rng.choice(pool)
            if other:
                start = rng.randrange(len(other))
                data[at:at] = other[start : start + rng.randint(1, 64)]
        else:  # truncate
            del data[at:]
    return bytes(data)


def fuzz(module_path: Path, seconds: float, seed: int) -> int:
    spec = importlib.util.spec_from_file_location("_protowire", module_path)
    assert spec and spec.loader
    wire = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(wire)
    pool = seeds()
    rng = random.Random(seed)
    keys, prefixes = frozenset({"gen_ai.tool.name", "gen_ai.operation.name"}), ("gen_ai.", "llm.")
    runs = refused = 0
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        # In an allocation of exactly its size (a bytes object has a spare byte at its end): a read past the end
        # of the input lands in AddressSanitizer's red zone.
        mutated = mutate(rng, rng.choice(pool), pool)
        body = (ctypes.c_char * len(mutated)).from_buffer_copy(mutated)
        runs += 1
        for function, extra in (
            (wire.check_request, ()),
            (wire.read_request, ()),
            (wire.read_request, (keys, prefixes)),
            (wire.read_span, ({}, "scope")),
        ):
            try:
                function(body, *extra)
            except (ValueError, TypeError, OverflowError):
                refused += 1
        value = rng.choice([rng.random(), rng.randint(-(2**63), 2**63 - 1), "x" * rng.randint(0, 40), [1, [2.5]]])
        wire.encode_result_fields([{"k": value}], {"v": value}, rng.randint(0, 2**64 - 1), "e")
    print(f"fuzz: {runs} inputs in {seconds:g}s ({refused} calls refused the input), no sanitizer report")
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=float(os.environ.get("FUZZ_SECONDS", "60")))
    parser.add_argument("--seed", type=int, default=int(os.environ.get("FUZZ_SEED", "1")))
    parser.add_argument("--module", type=Path, help=argparse.SUPPRESS)  # the sanitized build (second stage)
    args = parser.parse_args()
    if args.module:
        return fuzz(args.module, args.seconds, args.seed)
    with tempfile.TemporaryDirectory() as tmp:
        module = build(Path(tmp))
        env = {
            **os.environ,
            "LD_PRELOAD": sanitizer_runtime(),
            # Python's own allocations are not leaks to report; everything else aborts at the first report.
            "ASAN_OPTIONS": "detect_leaks=0:abort_on_error=1:halt_on_error=1",
            "UBSAN_OPTIONS": "halt_on_error=1:print_stacktrace=1",
            "PYTHONMALLOC": "malloc",
        }
        cmd = [
            sys.executable,
            __file__,
            "--seconds",
            str(args.seconds),
            "--seed",
            str(args.seed),
            "--module",
            str(module),
        ]
        return subprocess.run(cmd, env=env).returncode


if __name__ == "__main__":
    raise SystemExit(main())
