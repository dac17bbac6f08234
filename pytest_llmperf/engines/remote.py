"""A server someone else runs, at the profile's ``url``: nothing is launched or stopped.

The plugin waits (up to ``ready_timeout_s``) until the health endpoint answers 200, takes the
fingerprint from what the server says of itself (SGLang's /server_info, llama.cpp's /props),
and measures it like any other. It is speculative when ``args`` (the server's flags, for the
record) or ``speculative = true`` say so; its GPUs cannot be probed from here, so its hardware
key is ``remote``: its golden holds for that server, wherever it is deployed.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, ClassVar

from pytest_llmperf.engines.base import Engine
from pytest_llmperf.errors import ProfileError

if TYPE_CHECKING:
    from pytest_llmperf.profiles import Profile


class RemoteEngine(Engine):
    name: ClassVar[str] = "remote"
    launched: ClassVar[bool] = False
    speculative_flags: ClassVar[tuple[str, ...]] = (
        "--speculative-algorithm", "-md", "--model-draft",
    )  # fmt: skip
    leaves_shm: ClassVar[bool] = False

    def check_fields(self, where: str, fields: Mapping[str, Any]) -> None:
        url = fields.get("url")
        if not (isinstance(url, str) and url.startswith(("http://", "https://"))):
            raise ProfileError(
                f"{where}, field 'url': got {url!r}; expected the server's base URL, e.g. "
                '"http://10.0.0.5:30000" (engine = "remote" attaches to it and launches nothing).'
            )
        if fields.get("command") is not None:
            raise ProfileError(
                f"{where}, field 'command': a remote profile launches nothing; remove it."
            )

    def hardware(self, profile: Profile) -> dict[str, Any]:
        return {"key": "remote"}
