"""How many of a model's own tokens one cl100k token is, on the outputs of bench/extraction_cases.py: the
measurement behind extraction/budget.py's UNKNOWN_RATIO (the margin used where an endpoint has no tokenizer).

Each case's output at size 1.0 is cut into 8 KiB pieces, each counted by cl100k and by the served model's
tokenizer (the endpoint's own, as claimcheck asks it: llama-cpp-python's /extras/tokenize/count, llama.cpp's or
vLLM's /tokenize). Printed per output: the whole's ratio and the lowest and highest piece's.

    python bench/tokenizer_ratio.py --local-model            # serves bench/local_model.py's model for the run
    python bench/tokenizer_ratio.py BASE_URL MODEL           # any endpoint with a tokenizer
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

import anyio

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parent), str(HERE)]

from extraction_cases import CASES  # noqa: E402

from extraction import count_tokens  # noqa: E402
from extraction.endpoint import count_tokens as model_tokens  # noqa: E402
from extraction.endpoint import probe  # noqa: E402

PIECE_CHARS = 8192


async def measure(base_url: str, model: str) -> None:
    facts = await probe(base_url, model, {})
    if facts.tokenizer is None:
        raise SystemExit(f"{base_url} has no tokenizer claimcheck can ask")
    print(f"model {model} at {base_url}, tokenizer {facts.tokenizer}")
    print("| output | cases | whole | lowest piece | highest piece |\n|---|---|---:|---:|---:|")
    highest = 0.0
    with tempfile.TemporaryDirectory() as tmp:
        outputs: dict[str, list[str]] = {}
        for case in CASES:
            output, _ = case.make(Path(tmp), 1.0)
            outputs.setdefault(output, []).append(case.name)
        for output, names in outputs.items():
            pieces = [output[i : i + PIECE_CHARS] for i in range(0, len(output), PIECE_CHARS)]
            counted = await model_tokens(base_url, model, {}, facts.tokenizer, pieces)
            assert counted is not None
            ratios = [m / max(count_tokens(p), 1) for m, p in zip(counted, pieces, strict=True)]
            whole = sum(counted) / max(count_tokens(output), 1)
            highest = max(highest, *ratios)
            print(f"| {len(output)} chars | {', '.join(names)} | {whole:.3f} | {min(ratios):.3f} | {max(ratios):.3f} |")
    print(f"highest piece: {highest:.3f}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("base_url", nargs="?")
    parser.add_argument("model", nargs="?")
    parser.add_argument("--local-model", action="store_true")
    args = parser.parse_args()
    if args.local_model:
        import local_model

        with local_model.serve(context=2048) as served:
            anyio.run(measure, served.base_url, served.model)
        return 0
    if not args.base_url or not args.model:
        parser.error("give BASE_URL and MODEL, or --local-model")
    anyio.run(measure, args.base_url, args.model)
    return 0


if __name__ == "__main__":
    sys.exit(main())
