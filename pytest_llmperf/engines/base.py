"""The engine interface: what the plugin needs to know about one kind of server.

One class per engine, each in its own module of this package, named for what it is
(:class:`~pytest_llmperf.engines.sglang.SGLangEngine`, ``SimEngine``, ``LlamaCppEngine``,
``CommandEngine``, ``RemoteEngine``). A profile's ``engine = "NAME"`` finds the class whose
``name`` is NAME in module ``pytest_llmperf.engines.NAME``; ``engine = "package.module:Class"``
names any other subclass, so a new engine is one new file (see
:func:`pytest_llmperf.engines.get`). Each class owns, for its engine:

- the profile fields it requires or refuses (:meth:`Engine.check_profile`), and whether a
  router or a multi-node launch can take it (``routable``, ``multi_node``);
- the launch command and its environment (:meth:`Engine.command`, :meth:`Engine.prepare`:
  its version and the flag adaptation; :meth:`Engine.preflight`);
- its health path and readiness rule (``health_path``), its loading-progress reader
  (:meth:`Engine.loading_stage`);
- how it is stopped and what it leaves behind (:meth:`Engine.stop_signal_to_group`,
  :meth:`Engine.after_stop`, ``leaves_shm``);
- its fingerprint keys and hardware probe (:meth:`Engine.hardware`,
  :meth:`Engine.fingerprint_args`, :meth:`Engine.canonical`, ``performance_keys``,
  ``packages``, :meth:`Engine.server_version`, :meth:`Engine.binary`): what the server says of
  itself is read by the engine that knows it (SGLang's ``/server_info``, llama.cpp's
  ``/props``), and a server of no known kind by what it answers (:meth:`Engine.reading`,
  engines/answers.py);
- speculative detection (``speculative_flags``, :meth:`Engine.unfair_differences`);
- what a request must ask for and what its stream reports (:meth:`Engine.request_extras`,
  :meth:`Engine.accept_length_note`, :meth:`Engine.flushes_between_runs`); whether its stream
  counts tokens per chunk or only at the end is read from the stream itself (core/records.py).

What every engine shares (process group, teardown, pid records, the log) lives in
:mod:`pytest_llmperf.servers.lifecycle`. This module imports nothing of the layers above it
(profiles, servers, load): a profile is read through its attributes.
"""

from __future__ import annotations

import hashlib
import os
import shutil
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from pytest_llmperf.errors import ProfileError
from pytest_llmperf.host import hardware as hardware_probe

if TYPE_CHECKING:
    from pytest_llmperf.profiles import Profile

#: Endpoints a server may describe itself on, asked in this order.
INFO_PATHS = ("/server_info", "/get_server_info", "/props", "/v1/models")


@dataclass
class Prepared:
    """A profile as it will be launched (flags adapted to the installed version), what was
    changed or is doubtful about it, and the version found."""

    profile: Profile
    notes: list[str] = field(default_factory=list)
    version: str | None = None


class Engine:
    """One kind of server. Subclasses set ``name`` and override what differs."""

    #: The profile's ``engine`` value; the module that defines the class has the same name.
    name: ClassVar[str] = ""
    #: The endpoint that answers 200 once the server can serve.
    health_path: ClassVar[str] = "/health"
    #: Flags whose presence in ``args`` (or ``command``) makes the server speculative.
    speculative_flags: ClassVar[tuple[str, ...]] = ()
    #: The API greedy parity asks for token ids and top-2 log-probabilities (load/greedy.py);
    #: None: the profile's ``api`` (SGLang's native one, else OpenAI completions).
    greedy_api: ClassVar[str | None] = None
    #: The environment variable that pins speculative acceptance at an accept length (the
    #: engine channel, ``pin_acceptance``); None: the engine has no such switch.
    pins_acceptance: ClassVar[str | None] = None
    #: Flags the plugin sets itself and a profile's ``args`` may not carry.
    reserved_flags: ClassVar[tuple[str, ...]] = ()
    #: Whether the server's processes may leave /dev/shm files behind (host/shm.py).
    leaves_shm: ClassVar[bool] = True
    #: Whether SGLang's router can route to its servers (``router`` in a profile).
    routable: ClassVar[bool] = False
    #: Whether it runs one model over several nodes, one rank each (``launcher = "srun"``).
    multi_node: ClassVar[bool] = False
    #: Whether its latencies are the host's rather than the server's (a simulation's
    #: milliseconds of Python scheduling): gated only against goldens of the same host.
    latency_is_the_hosts: ClassVar[bool] = False
    #: Whether it runs on this host's GPUs: NVML is sampled through its points' runs (energy
    #: per token, held-back clocks) where nvidia-ml-py and a driver are present.
    uses_local_gpus: ClassVar[bool] = False
    #: The server's own profiler, by name (None: it has none; ``--perf-profile-on`` says so).
    profiler: ClassVar[str | None] = None

    # -- the profile ------------------------------------------------------------------------

    def check_profile(self, where: str, profile: Profile) -> None:
        """Refuse what this engine cannot take (a ProfileError naming the field and the fix)."""
        if profile.url is not None:
            return  # nothing is launched: args are the record of how the server runs
        for arg in profile.args:
            flag = arg.split("=", 1)[0]
            if flag in self.reserved_flags:
                raise ProfileError(
                    f"{where}, field 'args': {flag} is set by the plugin (a free port on `host`, "
                    f"`model` as the model argument); remove it from args"
                    f"{' and use the host field' if flag == '--host' else ''}."
                )
        if profile.command is not None:
            raise ProfileError(
                f"{where}, field 'command': only used with engine = \"command\" (this profile has "
                f"engine = {self.name!r}); remove it or change the engine."
            )

    def is_speculative(self, args: Sequence[str], command: Sequence[str] = ()) -> bool:
        return any(arg.split("=", 1)[0] in self.speculative_flags for arg in (*args, *command))

    # -- the launch -------------------------------------------------------------------------

    def prepare(self, profile: Profile) -> Prepared:
        """The profile as this engine's installed version takes it (no change by default)."""
        return Prepared(profile)

    def on_local_gpus(self, profile: Profile) -> bool:
        """Whether a launch of ``profile`` runs on this host's GPUs (the runner health
        pre-flight reads them before any server starts)."""
        return self.uses_local_gpus and profile.url is None and profile.launcher != "srun"

    def preflight(self, profile: Profile, env: Mapping[str, str]) -> list[str]:
        """Checks before the launch (e.g. the GPUs are free); notes, or a ServerStartError."""
        return []

    def command(self, profile: Profile, host: str, port: int, run_dir: Path) -> list[str]:
        """The exact command line that starts the server on ``host:port``."""
        raise NotImplementedError(f"engine {self.name!r} launches no server")

    def profiler_request(self, profile: Profile, output_dir: Path, steps: int) -> dict[str, Any]:
        """The body that starts its profiler for ``steps`` forward steps, its trace written
        into ``output_dir`` (servers/profiler.py); only called where ``profiler`` is set."""
        raise NotImplementedError(f"engine {self.name!r} has no profiler")

    def environment(self, profile: Profile) -> dict[str, str]:
        """What the server's environment adds to pytest's."""
        return {**profile.env, "PYTHONUNBUFFERED": "1"}

    def loading_stage(self, log_path: Path | None) -> str | None:
        """What a loading server is doing, from its log (None: nothing recognised)."""
        return None

    def stop_signal_to_group(self) -> bool:
        """Whether SIGTERM goes to the whole process group (else to the launcher alone)."""
        return True

    def after_stop(self, profile: Profile, pids: Sequence[int]) -> list[str]:
        """Once the processes are gone: what still holds resources (e.g. GPU memory)."""
        return []

    # -- the fingerprint --------------------------------------------------------------------

    #: Distributions whose installed versions join the soft fingerprint (the serving stack).
    packages: ClassVar[tuple[str, ...]] = ()
    #: Resolved server fields that decide speed even when the profile leaves them defaulted:
    #: hard in every fingerprint of this engine's servers.
    performance_keys: ClassVar[frozenset[str]] = frozenset()

    def hardware(self, profile: Profile) -> dict[str, Any]:
        """What the figures depend on: the GPUs the server uses (NVML), else the CPU. A remote
        server's GPUs cannot be probed from here: its key is ``remote`` (its golden holds for
        that deployment, wherever it runs)."""
        if profile.url is not None:
            return {"key": "remote"}
        return hardware_probe.probe({**profile.env}, gpus=self.on_local_gpus(profile))

    def reading(self, info: Mapping[str, Any]) -> Engine:
        """The engine whose readings the server's answers (``info``: what it said on
        :meth:`info_paths`) are read with: its own by default."""
        return self

    def fingerprint_args(
        self, info: Mapping[str, Any], profile: Profile
    ) -> tuple[dict[str, Any], dict[str, Any], frozenset[str]]:
        """The server's settings as ``(hard, soft, profile_keys)``: what decides speed, the
        rest, and the server fields the profile's own flags set. By default its command line."""
        return {"command": list(profile.command or ()), "args": list(profile.args)}, {}, frozenset()

    def canonical(self, server_args: Mapping[str, Any]) -> dict[str, Any]:
        """Server fields under the names this engine's latest release gives them (a field a
        release renamed is compared under its new name); as they are by default."""
        return dict(server_args)

    def server_version(self, info: Mapping[str, Any]) -> str | None:
        """The version the server says it is (None: it says none)."""
        return None

    def binary(self, command: Sequence[str]) -> str | None:
        """The file whose digest joins the soft fingerprint (two builds of one version may
        serve at different speeds), or None."""
        return None

    def info_paths(self) -> tuple[str, ...]:
        return INFO_PATHS

    def summary(self, info: Mapping[str, Any]) -> dict[str, Any]:
        """What a worker behind a router says of itself that decides its speed ({}: nothing)."""
        return {}

    def draft_shape(self, server_args: Mapping[str, Any]) -> tuple[int | None, int | None]:
        """A speculative server's draft steps and the batch size its CUDA graphs capture up to,
        from its resolved settings (None: not said), for the speculative analysis."""
        return None, None

    # -- requests and streams ---------------------------------------------------------------

    def request_extras(self, profile: Profile, info: Mapping[str, Any]) -> dict[str, Any]:
        """What every request must ask for so that the server reports what the metrics need."""
        return {}

    def accept_length_note(self, profile: Profile, info: Mapping[str, Any]) -> str | None:
        """Where the accept length cannot be had, say so instead of leaving the column empty."""
        return None

    def context_per_request(self, info: Mapping[str, Any]) -> int | None:
        """The most tokens (prompt and output together) one request may have on this server,
        as it says (None: not said)."""
        return None

    def running_at_once(self, info: Mapping[str, Any]) -> int | None:
        """The most requests the server runs at once, as it says (the rest wait in its queue);
        None: not said."""
        return None

    def flushes_between_runs(self, profile: Profile, windowed: bool) -> bool:
        """Whether the prefix cache is flushed (``/flush_cache``) before each run: on SGLang's
        native API, not between windowed runs (requests cut at a window's close are still being
        aborted then, and a steady state is measured with the cache in its steady state)."""
        return profile.api == "sglang" and not windowed

    # -- speculative pairs ------------------------------------------------------------------

    def unfair_differences(self, spec_args: Sequence[str], base_args: Sequence[str]) -> list[str]:
        """What a speculative profile's flags change beyond the speculative ones, one line per
        flag (``--flag: base → speculative``)."""
        from pytest_llmperf.engines.sglang_flags import unfair_differences

        return unfair_differences(spec_args, base_args)

    def server_differences(
        self, base: Mapping[str, Any], spec: Mapping[str, Any], skip: frozenset[str]
    ) -> list[str]:
        """Resolved settings that differ between a base server and its speculative
        counterpart beyond the speculative ones and ``skip``: ``field: base → speculative``."""
        return []

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name!r}>"


def executable_digest(command: Sequence[str]) -> str | None:
    """``name sha256:<16 hex>`` of the file ``command`` executes, or None if it is not a file."""
    if not command:
        return None
    path = shutil.which(command[0]) or command[0]
    if not os.path.isfile(path):
        return None
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return f"{os.path.basename(path)} sha256:{digest.hexdigest()[:16]}"
