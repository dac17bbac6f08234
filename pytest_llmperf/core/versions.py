"""Version strings as servers report them."""

from __future__ import annotations

import re


def parse_version(text: str | None) -> tuple[int, int, int] | None:
    """'0.5.14.post2' → (0, 5, 14); 'v0.5' → (0, 5, 0); anything else → None."""
    match = re.match(r"\s*v?(\d+)\.(\d+)(?:\.(\d+))?", text or "")
    if not match:
        return None
    major, minor, patch = match.groups()
    return int(major), int(minor), int(patch or 0)
