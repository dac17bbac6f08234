"""The docs' generated parts, and the MkDocs hooks that show them.

The reference tables come from the code's own tables (``settings.OPTIONS`` and ``FLAGS``, the
profile field table, the results-JSON field tables, what ``init`` writes) and the code map from
``pytest_llmperf.LAYERS`` and each module's docstring, so the docs and the code cannot drift.
They are written into the pages between ``<!-- generated: NAME -->`` and ``<!-- end of
generated: NAME -->``, so a page reads whole where it is read as a file (a code host shows the
tables, not placeholders): ``python scripts/mkdocs_hooks.py`` rewrites every stale block, and
tests/unit/test_docs.py fails while one is stale. The profile fields' table alone is built only
on the site (``<!-- built: NAME -->``): adding a field is one entry in the code, and the file
sends its reader to that table. The site renders the blocks afresh, shows the
package's version, and takes the changelog from the repository's CHANGELOG.md.
"""

from __future__ import annotations

import ast
import re
import sys
from pathlib import Path
from typing import Any

from pytest_llmperf import LAYERS, __version__, profile_fields, profiles, scaffold, settings
from pytest_llmperf.core.figures import FIGURES
from pytest_llmperf.render import results_json

ROOT = Path(__file__).resolve().parents[1]  # the repository
PACKAGE = ROOT / "pytest_llmperf"
BLOCK = re.compile(r"(<!-- generated: (\w+) -->\n).*?(<!-- end of generated: \2 -->)", re.S)
#: A part only the site shows (the page says where a reader of the file finds it instead).
BUILT = re.compile(r"<!-- built: (\w+) -->\n.*?<!-- end of built: \1 -->", re.S)


def on_config(config: Any) -> Any:
    config["site_name"] = f"pytest-llmperf {__version__}"
    return config


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    markdown = BUILT.sub(lambda m: BUILT_PARTS[m.group(1)](), fill(markdown))
    for marker, render in PLACEHOLDERS.items():
        markdown = markdown.replace(marker, render())
    return markdown


def fill(markdown: str) -> str:
    """The page with every generated block rendered afresh."""
    return BLOCK.sub(lambda m: f"{m.group(1)}{BLOCKS[m.group(2)]()}\n{m.group(3)}", markdown)


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


def figures_table() -> str:
    """Every figure a point can be judged on (core/figures.py): a run's, then a point's own."""
    rows = [
        "| figure | unit | better | a change is said | what it is "
        "| needs (without it, the check is skipped saying so) |",
        "|---|---|---|---|---|---|",
    ]
    for f in FIGURES.values():
        where = "" if f.per_run else " (a point's own, one value a point)"
        needs = f"{f.needs[0]}: {f.needs[1]}" if f.needs else ""
        rows.append(
            f"| `{f.name}` | {f.unit} | {'lower' if f.lower_is_better else 'higher'} | "
            f"{f.better} / {f.worse} | {f.definition}{where} | {needs} |"
        )
    return "\n".join(rows)


def init_files_table() -> str:
    rows = ["| file | what it is |", "|---|---|"]
    rows += [f"| `{target}` | {what} |" for target, (_, what) in scaffold.FILES.items()]
    rows.append(f"| `pytest.ini` | {scaffold.PYTEST_INI_WHAT} |")
    return "\n".join(rows)


def code_map() -> str:
    """Each layer, lowest first, with its parts and, under a package, its modules: what each
    holds, in the first sentence of its docstring."""
    rows = ["| layer | part | what it holds |", "|---|---|---|"]
    for k, (what, parts) in enumerate(LAYERS):
        for j, name in enumerate(parts):
            layer = f"{k}: {what}" if j == 0 else ""
            package = PACKAGE / name
            if package.is_dir():
                rows.append(f"| {layer} | `{name}/` | {_first_sentence(package / '__init__.py')} |")
                for module in sorted(package.glob("*.py")):
                    if module.name != "__init__.py":
                        rows.append(f"| | `{name}/{module.name}` | {_first_sentence(module)} |")
            else:
                rows.append(
                    f"| {layer} | `{name}.py` | {_first_sentence(package.with_suffix('.py'))} |"
                )
    return "\n".join(rows)


def _first_sentence(path: Path) -> str:
    doc = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"))) or ""
    paragraph = " ".join(doc.split("\n\n", 1)[0].split())
    end = re.search(r"(?<!e\.g)(?<!i\.e)\.(\s|$)", paragraph)
    sentence = paragraph[: end.start() + 1] if end else paragraph
    return re.sub(r"``([^`]+)``", r"`\1`", sentence).replace("|", "\\|")


def changelog() -> str:
    text = (ROOT / "CHANGELOG.md").read_text(encoding="utf-8")
    return text.split("\n", 1)[1]  # its own title is the page's


#: What the pages hold between their generated markers.
BLOCKS = {
    "options_table": options_table,
    "results_top_fields": lambda: _fields(results_json.TOP_FIELDS),
    "results_point_fields": lambda: _fields(results_json.POINT_FIELDS),
    "results_run_fields": lambda: _fields(results_json.RUN_FIELDS),
    "init_files": init_files_table,
    "figures": figures_table,
    "code_map": code_map,
}
#: What only the site shows. The profile fields: a new field is one entry of its table and
#: nothing else (a reader of the file is sent to the table itself, pytest_llmperf/profiles.py).
BUILT_PARTS = {"profile_fields_table": profile_fields_table}
#: The changelog page and the version: a reader of the files has CHANGELOG.md and pyproject.toml.
PLACEHOLDERS = {"{{ changelog }}": changelog, "{{ version }}": lambda: __version__}


def stale_pages(docs: Path = ROOT / "docs") -> list[Path]:
    """The pages whose generated blocks differ from what the code says now."""
    return [
        p
        for p in sorted(docs.rglob("*.md"))
        if fill(p.read_text(encoding="utf-8")) != p.read_text(encoding="utf-8")
    ]


if __name__ == "__main__":
    for page in stale_pages():
        page.write_text(fill(page.read_text(encoding="utf-8")), encoding="utf-8")
        print(f"rewrote the generated blocks of {page.relative_to(ROOT)}")
    sys.exit(0)
