"""A server of no known kind that someone else runs, at the profile's ``url``.

Any profile with a ``url`` attaches instead of launching (``engine = "sglang"`` with a url keeps
SGLang's health path, flag names and fingerprint fields); this engine is for a server that is
none of the built-in kinds. Nothing is launched or stopped. The plugin waits (up to
``ready_timeout_s``) until the health endpoint answers 200, takes the fingerprint from what the
server says of itself (SGLang's /server_info, llama.cpp's /props), and measures it like any
other. It is speculative when ``args`` (the server's flags, for the record) or
``speculative = true`` say so; its hardware key is ``remote`` (see Engine.hardware).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

from pytest_llmperf.engines.answers import ReadByAnswers
from pytest_llmperf.errors import ProfileError

if TYPE_CHECKING:
    from pytest_llmperf.profiles import Profile


class RemoteEngine(ReadByAnswers):
    name: ClassVar[str] = "remote"
    speculative_flags: ClassVar[tuple[str, ...]] = (
        "--speculative-algorithm",
        "-md",
        "--model-draft",
    )
    leaves_shm: ClassVar[bool] = False

    def check_profile(self, where: str, profile: Profile) -> None:
        if profile.url is None:
            raise ProfileError(
                f"{where}, field 'url': missing; engine = \"remote\" attaches to the server at "
                'url, e.g. url = "http://10.0.0.5:30000".'
            )
