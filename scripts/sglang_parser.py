"""One SGLang release's own argument parser, asked from outside.

Runs in SGLang's venv (``.sglang/bin/python``) with one release's ``sglang`` package first on
``PYTHONPATH`` (``.sglang/releases/<version>``, from its pinned wheel), so what answers is that
release's real ``ServerArgs.add_cli_args``, the code its ``launch_server`` builds its parser with:

    PYTHONPATH=.sglang/releases/0.5.14 .sglang/bin/python scripts/sglang_parser.py describe
        -> {"version", "prog", "fields": [ServerArgs field names], "options": [one per flag]}
    ... scripts/sglang_parser.py parse < [[argv], ...]
        -> [{"code": 0, "values": {dest: value}, "fields": {ServerArgs field: value}}
            or {"code": 2, "error": argparse's message}, ...]
    ... scripts/sglang_parser.py describe+parse < [[argv], ...]
        -> describe's answer plus "parses": parse's
    ... scripts/sglang_parser.py adaptive < [{"config", "initial_steps", "max_bs", "algorithm",
        "batches"}, ...] -> [{"capture_sizes": [...], "steps": {batch: steps}} or {"error"}, ...]:
        the release's own adaptive routing
    .sglang/bin/python scripts/sglang_parser.py many < {"workers": 2, "releases": [{"version",
        "path", "asked": describe+parse+adaptive's question}, ...]}
        -> {version: describe+parse+adaptive's answer, or {"error": why}}: the libraries every
        release imports (torch, transformers, sgl_kernel: most of an import's seconds) are
        imported once, then each release is imported afresh in a process forked from that one,
        with its package first on sys.path, as PYTHONPATH puts it

Nothing is launched and no model is read: ``parse`` stops where ``launch_server`` would go on to
``ServerArgs.from_cli_args`` (which needs the model and a device). Used by
tests/engines/test_sglang_releases.py and scripts/sglang_releases.py (regenerate).
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import io
import json
import os
import sys
import warnings
from typing import Any

os.environ.setdefault("SGLANG_USE_CPU_ENGINE", "1")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
warnings.filterwarnings("ignore")


def _tolerate_known_configs() -> None:
    """Older releases register configs (``qwen3_asr``, ...) that the venv's newer transformers
    already ships; registering twice raises at import. Let the second registration win, as it
    would have in the transformers that release was built against."""
    try:
        from transformers.models.auto import configuration_auto
    except ImportError:  # pragma: no cover - every release needs transformers
        return
    mapping = type(configuration_auto.CONFIG_MAPPING)
    original = mapping.register

    def register(self: Any, key: str, value: Any, exist_ok: bool = False) -> None:
        original(self, key, value, exist_ok=True)

    mapping.register = register  # type: ignore[method-assign]


def _server_args() -> Any:
    _tolerate_known_configs()
    from sglang.srt.server_args import ServerArgs

    return ServerArgs


def _parser(server_args: Any, prog: str) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=prog)
    server_args.add_cli_args(parser)
    return parser


def _prog() -> str:
    from sglang.srt import server_args as module

    source = open(module.__file__).read()
    return "sglang serve" if 'ArgumentParser(prog="sglang serve")' in source else "launch_server.py"


def _fields(server_args: Any) -> list[str]:
    if dataclasses.is_dataclass(server_args):
        return sorted(f.name for f in dataclasses.fields(server_args))
    return sorted(server_args.__struct_fields__)  # 0.5.20+: a msgspec Struct


def _jsonable(value: Any) -> Any:
    try:
        json.dumps(value)
        return value
    except TypeError:
        return repr(value)


def _choices(choices: Any) -> Any:
    if not choices:
        return None
    if isinstance(choices, (set, frozenset)):  # a set's order changes with every process
        return sorted(choices, key=str)
    return _jsonable(list(choices))


def describe() -> dict[str, Any]:
    import sglang.version

    server_args = _server_args()
    parser = _parser(server_args, _prog())
    options = []
    for action in parser._actions:
        if not action.option_strings or isinstance(action, argparse._HelpAction):
            continue
        options.append(
            {
                "flags": list(action.option_strings),
                "dest": action.dest,
                "nargs": action.nargs,
                "const": _jsonable(action.const) if action.nargs == 0 else None,
                "choices": _choices(action.choices),
                "type": getattr(action.type, "__name__", None),
                "kind": type(action).__name__,
            }
        )
    return {
        "version": sglang.version.__version__,
        "prog": _prog(),
        "fields": _fields(server_args),
        "options": options,
    }


def _field_values(server_args: Any, namespace: argparse.Namespace) -> dict[str, Any]:
    """The ServerArgs fields as the release's own ``from_cli_args`` sets them from the parsed
    flags (its dest-to-field renames included), before ``__post_init__`` resolves defaults
    against the model and the device, which needs both."""
    made = _unresolved(server_args, namespace)
    return {name: _jsonable(getattr(made, name, None)) for name in _fields(server_args)}


def _unresolved(server_args: Any, namespace: argparse.Namespace) -> Any:
    """``ServerArgs.from_cli_args`` with ``__post_init__`` skipped (it needs a model and a device)."""
    post_init = server_args.__dict__.get("__post_init__")
    server_args.__post_init__ = lambda self: None
    try:
        return server_args.from_cli_args(argparse.Namespace(**vars(namespace)))
    finally:
        if post_init is not None:
            server_args.__post_init__ = post_init


def parse(argvs: list[list[str]]) -> list[dict[str, Any]]:
    server_args = _server_args()
    parser = _parser(server_args, _prog())
    answers = []
    for argv in argvs:
        err = io.StringIO()
        try:
            with contextlib.redirect_stderr(err):
                namespace = parser.parse_args(argv)
            answers.append(
                {
                    "code": 0,
                    "values": {k: _jsonable(v) for k, v in vars(namespace).items()},
                    "fields": _field_values(server_args, namespace),
                }
            )
        except SystemExit as exc:
            answers.append({"code": exc.code, "error": err.getvalue().strip().splitlines()[-1]})
    return answers


def _capture_sizes(made: Any, max_bs: int) -> list[int]:
    """The release's speculative CUDA-graph capture sizes, wherever that release computes them."""
    try:
        from sglang.srt.arg_groups import cuda_graph_hook  # 0.5.19+

        return list(cuda_graph_hook.generate_decode_cuda_graph_batch_sizes(made, max_bs))
    except ImportError:
        pass
    if hasattr(made, "_generate_decode_cuda_graph_batch_sizes"):  # 0.5.14-0.5.16
        return list(made._generate_decode_cuda_graph_batch_sizes(max_bs))
    made.cuda_graph_max_bs = max_bs  # 0.5.13 and earlier
    return list(made._generate_cuda_graph_batch_sizes())


def adaptive(question: dict[str, Any]) -> dict[str, Any]:
    """The release's own answer to: with this ``--speculative-adaptive-config`` file, a CUDA-graph
    max batch size and a speculative algorithm, how many steps does each batch size run?
    Its capture sizes (``generate_decode_cuda_graph_batch_sizes``) and its bucket routing
    (``AdaptiveSpeculativeParams``: pad to a captured size, then the closest bucket)."""
    import tempfile

    _tolerate_known_configs()
    from sglang.srt.speculative import adaptive_spec_params

    server_args = _server_args()
    namespace = _parser(server_args, _prog()).parse_args(
        ["--model-path", "m", "--speculative-algorithm", question["algorithm"]]
    )
    made = _unresolved(server_args, namespace)
    sizes = _capture_sizes(made, question["max_bs"])
    with tempfile.TemporaryDirectory() as tmp:  # the release reads the file by its path
        config = os.path.join(tmp, "adaptive.json")
        with open(config, "w") as f:
            json.dump(question["config"], f)
        params = adaptive_spec_params.AdaptiveSpeculativeParams(question["initial_steps"], config)
    params.set_cuda_graph_bs(sizes)
    return {
        "capture_sizes": sizes,
        "steps": {str(b): params.get_steps_for_batch(b) for b in question["batches"]},
    }


def adaptive_all(questions: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """:func:`adaptive` per question; a release that refuses one says why in its answer."""
    answers = []
    for question in questions:
        try:
            answers.append(adaptive(question))
        except (ImportError, AttributeError, ValueError) as exc:  # the release refuses
            answers.append({"error": f"{type(exc).__name__}: {exc}"})
    return answers


def everything(asked: dict[str, Any]) -> dict[str, Any]:
    """describe+parse+adaptive: one import of the release for all three."""
    return {
        **describe(),
        "parses": parse(asked["argvs"]),
        "adaptive": adaptive_all(asked["adaptive"]),
    }


#: What every release imports and none ships: imported once by ``many``, before it forks.
SHARED_LIBRARIES = ("torch", "torchvision", "transformers", "sgl_kernel")


def many(job: dict[str, Any]) -> dict[str, Any]:
    """``everything`` of each release in ``job["releases"]``, ``job["workers"]`` at a time, each
    in its own forked process (so no release's ``sglang`` modules meet another's)."""
    import importlib
    import tempfile
    import traceback

    for name in SHARED_LIBRARIES:
        with contextlib.suppress(ImportError):
            importlib.import_module(name)
    assert not any(m == "sglang" or m.startswith("sglang.") for m in sys.modules), sys.modules
    answers: dict[str, Any] = {}
    pending = list(job["releases"])
    running: dict[int, tuple[str, str]] = {}  # pid -> (version, answer file)
    with tempfile.TemporaryDirectory() as tmp:
        while pending or running:
            while pending and len(running) < max(1, int(job.get("workers", 1))):
                release = pending.pop(0)
                out = os.path.join(tmp, f"{release['version']}.json")
                pid = os.fork()
                if pid == 0:  # the release's own process
                    code = 0
                    try:
                        sys.path.insert(0, release["path"])
                        answer = everything(release["asked"])
                    except BaseException:  # reported to the parent, which goes on
                        answer, code = {"error": traceback.format_exc()[-3000:]}, 1
                    with open(out, "w") as f:
                        json.dump(answer, f)
                    os._exit(code)
                running[pid] = (release["version"], out)
            pid, status = os.wait()
            version, out = running.pop(pid)
            try:
                with open(out) as f:
                    answers[version] = json.load(f)
            except (OSError, ValueError):
                answers[version] = {"error": f"its process ended with status {status}, no answer"}
    return answers


if __name__ == "__main__":
    with contextlib.redirect_stdout(sys.stderr):  # import-time chatter stays off the answer
        if sys.argv[1:] == ["describe"]:
            answer: Any = describe()
        elif sys.argv[1:] == ["parse"]:
            answer = parse(json.load(sys.stdin))
        elif sys.argv[1:] == ["adaptive"]:
            answer = adaptive_all(json.load(sys.stdin))
        elif sys.argv[1:] == ["describe+parse"]:  # one import for both (an import takes seconds)
            answer = {**describe(), "parses": parse(json.load(sys.stdin))}
        elif sys.argv[1:] == ["describe+parse+adaptive"]:  # {"argvs": [...], "adaptive": [...]}
            answer = everything(json.load(sys.stdin))
        elif sys.argv[1:] == ["many"]:
            answer = many(json.load(sys.stdin))
        else:
            sys.exit(__doc__)
    print(json.dumps(answer))
