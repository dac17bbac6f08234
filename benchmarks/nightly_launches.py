"""The nightly on a real engine, launch by launch: does a 30 % collapse FAIL every night, and do
unchanged nights stay quiet?

Records the shipped ``llamacpp-smollm2`` profile as it says (its ``record_launches``, by default
from its launch_cv: 4 launches at 0.08, each with its runs), then N nights with nothing changed
and N nights with every
llama-server the night launches stopped 30 % of the time in 0.5 s slices (SIGSTOP and SIGCONT
from outside, as tests/helpers.py's Throttle: the binary, its flags and its fingerprint stay
those of the golden). Each night is a fresh pytest process, so a fresh launch of the server,
with the confirmation launches the verdict asks for. Prints one line a night (exit code,
seconds, each point's verdict, the confirmation launches) and the totals.

    python benchmarks/nightly_launches.py 10            # 10 unchanged nights, 10 throttled
    python benchmarks/nightly_launches.py 3 --levels 1,2
"""

from __future__ import annotations

import argparse
import collections
import json
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

SUITE = """
def test_output_throughput(llmperf, llm_concurrency):
    llmperf.check(llmperf.measure(concurrency=llm_concurrency))
"""
SHARE = 0.30


def profiles(levels: str | None) -> str:
    """The shipped profile, its files made absolute, its levels optionally fewer."""
    from pytest_llmperf.profiles_file import load_profiles

    shipped = load_profiles(REPO / "perf_suites" / "profiles.toml").profiles["llamacpp-smollm2"]
    text = (REPO / "perf_suites" / "profiles.toml").read_text()
    body = text.split("[profiles.llamacpp-smollm2]\n", 1)[1].split("\n[", 1)[0]
    body = body.replace('"../.llama/', f'"{REPO}/.llama/')
    if levels:
        body = body.replace(
            f"concurrency = {list(shipped.concurrency)}".replace("'", ""),
            f"concurrency = [{levels}]",
        )
    return "[profiles.nightly]\n" + body


def night(project: Path, k: int, *extra: str) -> tuple[int, float, list[str], int, str]:
    """One pytest run: its exit code, seconds, the points' verdicts, the confirmation launches
    it made, and, where it judged no point, why (the end of its output)."""
    out = project / f"night-{k}.json"
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:randomly", "--llm-profile", "nightly",
         "--perf-json", str(out), *extra],
        cwd=project, capture_output=True, text=True,
    )  # fmt: skip
    seconds = time.monotonic() - started
    data = json.loads(out.read_text()) if out.exists() else {}
    verdicts = [
        f"C{p['concurrency']} {p['verdict']}"
        + (f" {p['ratio'] - 1:+.1%}" if p.get("ratio") is not None else "")
        for p in data.get("points") or []
    ]
    lines = done.stdout.splitlines()
    # Why a night judged nothing (no server, a bad golden): pytest's last words.
    why = "" if verdicts else " / ".join(line.strip() for line in lines[-3:] if line.strip())
    return done.returncode, seconds, verdicts, len(data.get("confirmations") or []), why


def main() -> None:
    from tests.helpers import ThrottleEach

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("nights", type=int, nargs="?", default=10)
    parser.add_argument("--levels", help="concurrency levels, e.g. 1,2 (default: the profile's)")
    args = parser.parse_args()
    from pytest_llmperf.host.hardware import cpu_facts, cpu_model

    with tempfile.TemporaryDirectory() as scratch:
        project = Path(scratch)
        (project / "profiles.toml").write_text(textwrap.dedent(profiles(args.levels)))
        (project / "pytest.ini").write_text("[pytest]\nllmperf_profiles_file = profiles.toml\n")
        (project / "test_perf.py").write_text(SUITE)
        print(f"# llamacpp-smollm2 night by night on {cpu_model()} ({cpu_facts()['key']})")
        code, seconds, verdicts, _, why = night(project, 0, "--perf-update")
        print(f"recorded ({code}, {seconds:.0f} s): {', '.join(verdicts) or why}\n")
        print("| night | throttle | exit | seconds | points | confirmation launches |")
        print("|---:|---|---:|---:|---|---:|")
        totals: dict[str, collections.Counter[str]] = {}
        for share in (0.0, SHARE):
            counts = totals.setdefault(f"{share:.0%}", collections.Counter())
            for k in range(1, args.nights + 1):
                if share:
                    with ThrottleEach("SmolLM2-135M", share):
                        code, seconds, verdicts, confirmed, why = night(project, k)
                else:
                    code, seconds, verdicts, confirmed, why = night(project, k)
                counts.update(v.split()[1] for v in verdicts)
                ended = {0: "nights green", 1: "nights FAILed"}.get(code, "nights in error")
                counts[ended] += 1
                counts["confirmation launches"] += confirmed
                print(f"| {k} | {share:.0%} | {code} | {seconds:.0f} | "
                      f"{', '.join(verdicts) or why} | {confirmed} |", flush=True)  # fmt: skip
        for share, counts in totals.items():
            print(
                f"\nthrottled {share}: " + ", ".join(f"{n} {k}" for k, n in sorted(counts.items()))
            )


if __name__ == "__main__":
    main()
