"""The docs' generated blocks (reference tables, what init writes, the code map) are what the
code says now: a page is read whole on a code host, so a stale block would show stale facts."""

from __future__ import annotations

import importlib.util
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def hooks():
    spec = importlib.util.spec_from_file_location(
        "mkdocs_hooks", REPO / "scripts" / "mkdocs_hooks.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_every_generated_block_is_current():
    stale = hooks().stale_pages(REPO / "docs")
    assert not stale, (
        f"stale generated blocks in {', '.join(str(p.relative_to(REPO)) for p in stale)}: "
        "run `python scripts/mkdocs_hooks.py` and commit the pages"
    )


def test_a_block_is_rendered_from_the_code():
    module = hooks()
    page = "<!-- generated: init_files -->\nSTALE\n<!-- end of generated: init_files -->"
    filled = module.fill(page)
    assert "STALE" not in filled and "`perf_suites/test_capacity.py`" in filled
    assert "`pytest.ini`" in filled


def test_no_page_shows_a_placeholder_a_code_host_would_print():
    """Only the site's own pages (the changelog, the version line) keep placeholders."""
    for page in (REPO / "docs").rglob("*.md"):
        text = page.read_text(encoding="utf-8")
        for marker in hooks().PLACEHOLDERS:
            text = text.replace(marker, "")
        assert "{{" not in text, f"{page.relative_to(REPO)} has a placeholder"


def test_the_site_builds_the_profile_fields_from_the_field_table():
    module = hooks()
    page = (REPO / "docs" / "reference" / "profiles.md").read_text(encoding="utf-8")
    built = module.on_page_markdown(page, None, None, None)
    assert "Read on a code host" not in built and "### Essential fields" in built
    for key in module.profiles.SETTINGS:
        assert f"| `{key}` |" in built, key
