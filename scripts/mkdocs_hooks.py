"""MkDocs hooks: the reference tables are generated from the code's own tables
(``settings.OPTIONS`` and ``FLAGS``, the profile field table, the results-JSON field tables),
so the docs and the code cannot drift; the site shows the package's version, and the changelog
is the repository's CHANGELOG.md."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pytest_llmperf import __version__, profile_fields, profiles, settings
from pytest_llmperf.render import results_json

ROOT = Path(__file__).resolve().parents[1]  # the repository


def on_config(config: Any) -> Any:
    config["site_name"] = f"pytest-llmperf {__version__}"
    return config


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    for marker, render in GENERATED.items():
        markdown = markdown.replace(marker, render())
    return markdown


def options_table() -> str:
    rows = ["| option | ini key | meaning | default |", "|---|---|---|---|"]
    for flag in settings.FLAGS:
        name = f"`{flag.flag}{' ' + flag.metavar if flag.metavar else ''}`"
        rows.append(f"| {name} | {f'`{flag.ini}`' if flag.ini else ''} | {flag.help} | |")
    for option in settings.OPTIONS:
        default = f"`{option.default}`" if option.default else ""
        rows.append(
            f"| `{option.flag} {option.metavar}` | `{option.ini}` | {option.help} | {default} |"
        )
    return "\n".join(rows)


def profile_fields_table() -> str:
    """The essential fields first, then the others, each part grouped as the table groups them."""
    out = []
    for essential, title in ((True, "Essential fields"), (False, "Every other field")):
        out += [f"### {title}", ""]
        for group, heading in profile_fields.GROUPS.items():
            rows = [
                f"| `{key}` | {_shown(s.default)} | {s.help} |"
                for key, (_, s) in profiles.SETTINGS.items()
                if s.group == group and s.essential == essential
            ]
            if rows:
                out += [f"**{heading}**", "", "| field | default | meaning |", "|---|---|---|"]
                out += [*rows, ""]
    return "\n".join(out)


def _shown(default: Any) -> str:
    return "" if default in (None, "", [], {}) else f"`{_toml(default)}`"


def _toml(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return f'"{value}"'
    if isinstance(value, list):
        return "[" + ", ".join(_toml(v) for v in value) + "]"
    return str(value)


def _fields(table: dict[str, str]) -> str:
    rows = ["| field | holds |", "|---|---|"]
    rows += [f"| `{name}` | {text} |" for name, text in table.items()]
    return "\n".join(rows)


def changelog() -> str:
    text = (ROOT / "CHANGELOG.md").read_text(encoding="utf-8")
    return text.split("\n", 1)[1]  # its own title is the page's


GENERATED = {
    "{{ options_table }}": options_table,
    "{{ profile_fields_table }}": profile_fields_table,
    "{{ results_top_fields }}": lambda: _fields(results_json.TOP_FIELDS),
    "{{ results_point_fields }}": lambda: _fields(results_json.POINT_FIELDS),
    "{{ results_run_fields }}": lambda: _fields(results_json.RUN_FIELDS),
    "{{ changelog }}": changelog,
    "{{ version }}": lambda: __version__,
}
