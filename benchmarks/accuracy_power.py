"""The accuracy gate's false FAIL and detection rates, by simulation (core/accuracy.py).

A task set of N items (default 200) that an unchanged server answers right at rate P (0.80).
At temperature 0 an unchanged server answers each item as it did when the golden was recorded,
except where its arithmetic is not bit-exact from one launch to the next: each night a share
FLIP of the items comes out the other way (a near-tie decided differently). A regressed server
also turns DROP of the items from right to wrong. Each night is judged by the gate, as
``llmperf.check_accuracy`` judges it:

- paired: McNemar's exact test on the golden's own items (the default: same items);
- binomial: the exact binomial test of tonight's count against the golden's rate (the fallback
  when the items differ from the golden's).

Both FAIL a significant drop (one-sided, p < 0.001) of at least the margin (3 points).

    python benchmarks/accuracy_power.py                 # 20,000 nights a cell
    python benchmarks/accuracy_power.py --items 60      # the built-in set's size
"""

from __future__ import annotations

import argparse

import numpy as np

from pytest_llmperf.core.accuracy import FAIL_ALPHA, decide


def night(rng: np.random.Generator, golden: np.ndarray, flip: float, drop: float) -> np.ndarray:
    """Tonight's outcomes: the golden's, a share ``flip`` of items flipped either way, and a
    share ``drop`` of all items turned from right to wrong."""
    out = golden.copy()
    flips = rng.random(golden.size) < flip
    out[flips] = ~out[flips]
    right = np.flatnonzero(out)
    lost = rng.choice(right, size=min(right.size, round(drop * golden.size)), replace=False)
    out[lost] = False
    return out


def rates(
    items: int, p: float, flip: float, drop: float, nights: int, seed: int, fail_alpha: float
) -> tuple[float, float]:
    """FAIL rates of the paired and the binomial gate over ``nights`` nights."""
    rng = np.random.default_rng(seed)
    fails = np.zeros(2)
    for _ in range(nights):
        golden = rng.random(items) < p
        tonight = night(rng, golden, flip, drop)
        rate = float(golden.mean())
        gate = {"reference_rate": rate, "margin": 0.03, "fail_alpha": fail_alpha}
        paired = decide(list(tonight), list(golden), **gate)
        binomial = decide(list(tonight), None, **gate)
        fails += [paired.outcome.value == "FAIL", binomial.outcome.value == "FAIL"]
    return fails[0] / nights, fails[1] / nights


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=200)
    parser.add_argument("--accuracy", type=float, default=0.80)
    parser.add_argument("--nights", type=int, default=20_000)
    parser.add_argument("--fail-alpha", type=float, default=FAIL_ALPHA, help="a FAIL's p")
    args = parser.parse_args()
    print(f"# {args.items} items at {args.accuracy:.0%}, {args.nights:,} nights a cell, FAIL at "
          f"p < {args.fail_alpha:g}; FAIL rates (paired McNemar / binomial against the golden's rate)")  # fmt: skip
    print(
        "| items flipped a night | drop 0 (false FAIL) | drop 3 points | drop 5 points | drop 10 points |"
    )
    print("|---:|---:|---:|---:|---:|")
    for k, flip in enumerate((0.0, 0.01, 0.02)):
        cells = []
        for j, drop in enumerate((0.0, 0.03, 0.05, 0.10)):
            paired, binomial = rates(
                args.items, args.accuracy, flip, drop, args.nights, 10 * k + j, args.fail_alpha
            )
            cells.append(f"{paired:.4f} / {binomial:.4f}")
        print(f"| {flip:.0%} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
