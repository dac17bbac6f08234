"""The ServerArgs field names of an SGLang release, read from its wheel without importing it.

    python scripts/sglang_server_fields.py sglang-0.5.23-*.whl > tests/data/sglang-server-fields/0.5.23.txt

Up to 0.5.19 the fields are the annotated class attributes of ``ServerArgs`` in
``sglang/srt/server_args.py``; later releases declare them in ``sglang/srt/arg_groups/fields/*.py``
(one msgspec Struct per namespace) and assemble ServerArgs from those. The stand-in SGLang in the
tests reports the field set of the version it impersonates on ``/server_info``, so a test sees
what a real upgrade changes.
"""

from __future__ import annotations

import ast
import sys
import zipfile


def class_fields(source: str, names: set[str] | None = None) -> list[str]:
    """Annotated class-level attributes of the classes in ``source`` (all, or those in ``names``)."""
    out = []
    for node in ast.parse(source).body:
        if isinstance(node, ast.ClassDef) and (names is None or node.name in names):
            for stmt in node.body:
                if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name):
                    name = stmt.target.id
                    if not name.startswith("_") and "ClassVar" not in ast.unparse(stmt.annotation):
                        out.append(name)
    return out


def server_fields(wheel: str) -> list[str]:
    with zipfile.ZipFile(wheel) as z:
        files = z.namelist()
        grouped = sorted(
            f for f in files if f.startswith("sglang/srt/arg_groups/fields/") and f.endswith(".py")
        )
        if grouped:
            fields = [name for f in grouped for name in class_fields(z.read(f).decode())]
        else:
            fields = class_fields(z.read("sglang/srt/server_args.py").decode(), {"ServerArgs"})
    return sorted(set(fields))


if __name__ == "__main__":
    print("\n".join(server_fields(sys.argv[1])))
