"""One model for every report onebit prints, and the one place that renders it.

A command builds a `Document`: a title, blocks (tables and paragraphs, in order), a closing
line, and the JSON data behind it. `render(document, fmt)` turns it into plain text for a
terminal, Markdown for a pull request, or JSON for a machine. A report class implements only
`document()` and inherits `to_text` / `to_markdown` / `to_json` / `render` from `Rendered`.

It lives in the engine (not the plugin) because the tools (`acceptance`, `sweep`) are part of
the engine and must not import the pytest plugin.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

FORMATS = ("text", "md", "json")


@dataclass(frozen=True)
class Column:
    """A table column: its header, and whether it holds numbers (right-aligned)."""

    name: str
    numeric: bool = False
    code: bool = False  # Markdown shows the cell as `code` (names of files, checks, functions)


@dataclass
class Table:
    columns: Sequence[Column]
    rows: list[Sequence[str]]
    title: str | None = None  # a line above the table

    def __post_init__(self) -> None:
        width = len(self.columns)
        for row in self.rows:
            if len(row) != width:
                raise ValueError(f"a row of {len(row)} cells in a table of {width} columns: "
                                 f"{list(row)}")


@dataclass
class Document:
    """What a report says, independent of how it is shown."""

    title: str
    blocks: list[Table | str] = field(default_factory=list)
    closing: str = ""
    data: dict[str, Any] = field(default_factory=dict)  # the JSON form


def cols(*names: str, numeric: Sequence[str] = (), code: Sequence[str] = ()) -> list[Column]:
    """Columns by name; those in `numeric` are right-aligned, those in `code` are code."""
    return [Column(n, n in numeric, n in code) for n in names]


def _text_table(table: Table) -> list[str]:
    header = [c.name for c in table.columns]
    rows = [header, *([str(cell) for cell in row] for row in table.rows)]
    widths = [max(len(row[i]) for row in rows) for i in range(len(header))]

    def line(row: Sequence[str]) -> str:
        cells = (cell.rjust(w) if col.numeric else cell.ljust(w)
                 for cell, w, col in zip(row, widths, table.columns, strict=True))
        return "  ".join(cells).rstrip()

    out = [table.title] if table.title else []
    out += [line(header), "  ".join("-" * w for w in widths)]
    return out + [line(row) for row in rows[1:]]


def _md_cell(text: str, column: Column) -> str:
    text = str(text).replace("|", "\\|").replace("\n", " ")
    return f"`{text}`" if column.code and text not in ("", "-") else text


def _md_table(table: Table) -> list[str]:
    out = [table.title, ""] if table.title else []
    out.append("| " + " | ".join(c.name for c in table.columns) + " |")
    out.append("|" + "|".join("---:" if c.numeric else "---" for c in table.columns) + "|")
    out += ["| " + " | ".join(_md_cell(cell, col) for cell, col in
                              zip(row, table.columns, strict=True)) + " |"
            for row in table.rows]
    return out


def render(document: Document, fmt: str) -> str:
    """`document` as `text`, `md` or `json`."""
    if fmt == "json":
        return json.dumps(document.data, indent=2)
    if fmt not in FORMATS:
        raise ValueError(f"unknown format {fmt!r}; known: {FORMATS}")
    markdown = fmt == "md"
    lines = [f"## {document.title}" if markdown else document.title]
    for block in document.blocks:
        lines.append("")
        if isinstance(block, Table):
            lines += _md_table(block) if markdown else _text_table(block)
        else:
            lines.append(block)
    if document.closing:
        lines += ["", document.closing]
    return "\n".join(lines)


class Rendered:
    """Mix-in for a report: implement `document()`, get the three renderings."""

    def document(self) -> Document:  # pragma: no cover - every report overrides it
        raise NotImplementedError

    def render(self, fmt: str) -> str:
        return render(self.document(), fmt)

    def to_text(self) -> str:
        return self.render("text")

    def to_markdown(self) -> str:
        return self.render("md")

    def to_json(self) -> str:
        return self.render("json")

    def __str__(self) -> str:
        return self.to_text()
