"""NVML as a GPU runner has it (``nvidia-ml-py``, the ``gpu`` extra, imported lazily).

A GPU CI runner is rarely a whole machine: a container, a MIG slice, a Slurm cgroup. Each
refuses some of NVML: a process list or a device handle raises ``NVML_ERROR_NO_PERMISSION``,
a reading a GPU lacks raises ``NVML_ERROR_NOT_SUPPORTED``. :class:`Nvml` makes every call
through :meth:`Nvml.read`: a call that fails returns None and leaves one warning line naming
the GPU, the reading and why (a reading marked optional that the GPU does not support is
passed over in silence: ECC on a consumer card). Nothing of NVML stops a session.

:meth:`Nvml.gpus` resolves ``CUDA_VISIBLE_DEVICES`` as CUDA does: indices, ``GPU-`` UUIDs and
``MIG-`` UUIDs (each a unique prefix of one), stopping at the first entry that names no
device. A MIG slice is measured on its own handle (its memory, its processes) and read for
the rest (power, clocks, heat, the energy counter) on its parent GPU's.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

NOT_SUPPORTED = 3  # NVML_ERROR_NOT_SUPPORTED
NO_PERMISSION = 4  # NVML_ERROR_NO_PERMISSION
NOT_FOUND = 6  # NVML_ERROR_NOT_FOUND
INSTALL = "nvidia-ml-py is not installed (pip install 'pytest-llmperf[gpu]')"


@dataclass(frozen=True)
class Gpu:
    """One device a server uses: a whole GPU, or a MIG slice of one."""

    #: The physical GPU's NVML index (a MIG slice's: its parent's).
    index: int
    #: The device's own handle: its memory and processes are read on it.
    handle: Any
    #: The physical GPU's handle: power, clocks, heat and energy are read on it.
    parent: Any
    #: How messages name it: "GPU 0", or "GPU 0 MIG 1g.10gb (MIG-4f2a…)".
    label: str
    #: The MIG profile, e.g. "1g.10gb" (None: a whole GPU).
    mig: str | None = None


class Nvml:
    """pynvml, initialised, with every call wrapped (see the module's docstring)."""

    def __init__(self, nv: Any) -> None:
        self.nv = nv
        #: One line per reading NVML refused, in the order met.
        self.warnings: list[str] = []

    def read(self, where: str, what: str, call: str, *args: Any, optional: bool = False) -> Any:
        """``nv.<call>(*args)``, or None with a warning ("GPU 0: NVML would not read its
        processes: not permitted here (NVML_ERROR_NO_PERMISSION) …")."""
        function = getattr(self.nv, call, None)
        if function is None:  # older bindings
            return None
        try:
            return function(*args)
        except Exception as exc:  # pynvml.NVMLError and its subclasses, by code
            code = error_code(exc)
            if code == NOT_FOUND or (optional and code == NOT_SUPPORTED):
                return None
            self.warn(f"{where}: NVML would not read {what}: {reason(exc)}")
            return None

    def warn(self, line: str) -> None:
        if line not in self.warnings:
            self.warnings.append(line)

    def gpus(self, env: Mapping[str, str]) -> tuple[list[Gpu], list[str]]:
        """The devices ``env``'s CUDA_VISIBLE_DEVICES names (all GPUs where it is unset), and a
        line for each entry that names none here (CUDA stops at the first: so does this)."""
        whole = self._whole()
        visible = env.get("CUDA_VISIBLE_DEVICES")
        if visible is None:
            return [Gpu(i, h, h, f"GPU {i}") for i, h, _ in whole], []
        found: list[Gpu] = []
        for token in (t.strip() for t in visible.split(",")):
            if not token or token.lstrip("-").isdigit() and int(token) < 0:
                break  # "" hides every GPU; a negative index ends the list
            gpu, why = self._one(token, whole)
            if gpu is None:
                return found, [
                    f"CUDA_VISIBLE_DEVICES={visible}: {token!r} {why}; CUDA uses no device "
                    "from there on"
                ]
            found.append(gpu)
        return found, []

    def _whole(self) -> list[tuple[int, Any, str]]:
        count = self.read("NVML", "the GPU count", "nvmlDeviceGetCount") or 0
        whole = []
        for i in range(count):
            handle = self.read(f"GPU {i}", "its handle", "nvmlDeviceGetHandleByIndex", i)
            if handle is not None:
                uuid = self.read(f"GPU {i}", "its UUID", "nvmlDeviceGetUUID", handle, optional=True)
                whole.append((i, handle, text(uuid) if uuid else ""))
        return whole

    def _one(self, token: str, whole: list[tuple[int, Any, str]]) -> tuple[Gpu | None, str]:
        if token.isdigit():
            index = int(token)
            match = [(i, h) for i, h, _ in whole if i == index]
            if not match:
                return None, f"is not a GPU NVML can open here ({len(whole)} it can)"
            return Gpu(index, match[0][1], match[0][1], f"GPU {index}"), ""
        if token.startswith("GPU-"):
            gpus = [(i, h) for i, h, uuid in whole if uuid.startswith(token)]
            if len(gpus) == 1:
                return Gpu(gpus[0][0], gpus[0][1], gpus[0][1], f"GPU {gpus[0][0]}"), ""
            return None, "names no GPU here" if not gpus else "is the start of several GPUs' UUIDs"
        if token.startswith("MIG-"):
            slices = [s for i, h, _ in whole for s in self._slices(i, h) if s[2].startswith(token)]
            if len(slices) == 1:
                index, parent, uuid, handle, profile = slices[0]
                label = f"GPU {index} MIG {profile} ({uuid[:12]}…)"
                return Gpu(index, handle, parent, label, profile), ""
            return None, "names no MIG slice here" if not slices else "is ambiguous"
        return None, "is neither an index nor a GPU- or MIG- UUID"

    def _slices(self, index: int, parent: Any) -> Iterator[tuple[int, Any, str, Any, str]]:
        """The MIG slices of a GPU in MIG mode: (index, parent, UUID, handle, profile)."""
        where = f"GPU {index}"
        mode = self.read(where, "its MIG mode", "nvmlDeviceGetMigMode", parent, optional=True)
        if not mode or not mode[0]:
            return
        count = self.read(where, "its MIG slots", "nvmlDeviceGetMaxMigDeviceCount", parent) or 0
        for k in range(count):
            handle = self.read(
                where, f"MIG slot {k}", "nvmlDeviceGetMigDeviceHandleByIndex", parent, k
            )
            if handle is None:
                continue
            uuid = text(self.read(where, f"MIG slot {k}'s UUID", "nvmlDeviceGetUUID", handle) or "")
            name = text(self.read(where, f"MIG slot {k}'s name", "nvmlDeviceGetName", handle) or "")
            yield index, parent, uuid, handle, name.rsplit("MIG ", 1)[-1] if "MIG " in name else "?"


@contextlib.contextmanager
def session() -> Iterator[tuple[Nvml | None, str | None]]:
    """``(Nvml, None)`` initialised for the block, or ``(None, why not)``."""
    try:
        import pynvml
    except ImportError:
        yield None, INSTALL
        return
    try:
        pynvml.nvmlInit()
    except Exception as exc:  # pynvml.NVMLError: no driver, no device, not permitted
        yield None, f"no NVIDIA driver answered NVML ({exc})"
        return
    try:
        yield Nvml(pynvml), None
    finally:
        with contextlib.suppress(Exception):  # pynvml.NVMLError: already shut down
            pynvml.nvmlShutdown()


def error_code(exc: BaseException) -> int | None:
    code = getattr(exc, "value", None)
    return code if isinstance(code, int) else None


def reason(exc: BaseException) -> str:
    code = error_code(exc)
    if code == NO_PERMISSION:
        return (
            "not permitted here (NVML_ERROR_NO_PERMISSION: a container, a MIG slice or a "
            "Slurm cgroup restricts it)"
        )
    if code == NOT_SUPPORTED:
        return "not supported on this GPU (NVML_ERROR_NOT_SUPPORTED)"
    return f"{exc} ({type(exc).__name__})"


def text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)
