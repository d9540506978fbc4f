"""Reading what the report tools (tools/report.py, tools/campaign_report.py) write."""

from __future__ import annotations

import struct
import zlib


def png_text_chunks(data: bytes) -> dict[str, str]:
    """The text chunks (tEXt, iTXt) of a PNG by keyword, and its size as "_size"; every chunk's CRC checked."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    chunks, offset = {}, 8
    while offset < len(data):
        length, kind = struct.unpack(">I4s", data[offset : offset + 8])
        body = data[offset + 8 : offset + 8 + length]
        assert zlib.crc32(kind + body) == struct.unpack(">I", data[offset + 8 + length : offset + 12 + length])[0]
        if kind == b"tEXt":
            key, _, value = body.partition(b"\0")
            chunks[key.decode()] = value.decode("latin-1")
        if kind == b"iTXt":  # keyword, flag, method, language, translated keyword, UTF-8 text
            key, _, rest = body.partition(b"\0")
            compressed, rest = rest[0], rest[2:]
            _, _, rest = rest.partition(b"\0")
            _, _, text = rest.partition(b"\0")
            chunks[key.decode()] = (zlib.decompress(text) if compressed else text).decode("utf-8")
        if kind == b"IHDR":
            chunks["_size"] = struct.unpack(">II", body[:8])
        offset += 12 + length
    return chunks


# --------------------------------------------------------------------------- the HTML page


def plotly_figures(page: str) -> dict[str, dict]:
    """Every ``Plotly.newPlot(id, data, layout, config)`` call of the page: {id: {"data", "layout"}}."""
    import json
    import re

    decoder = json.JSONDecoder()
    figures = {}
    for match in re.finditer(r'Plotly\.newPlot\(\s*"([^"]+)",\s*', page):
        data, end = decoder.raw_decode(page, match.end())
        end = page.index(",", end) + 1
        while page[end].isspace():
            end += 1
        layout, _ = decoder.raw_decode(page, end)
        figures[match.group(1)] = {"data": data, "layout": layout}
    return figures


class Node:
    """One element of a parsed (dumped) DOM: its tag, attributes, children and own text."""

    def __init__(self, tag: str, attrs: dict, parent: Node | None = None):
        self.tag, self.attrs, self.parent, self.parts = tag, attrs, parent, []

    @property
    def children(self) -> list[Node]:
        return [p for p in self.parts if isinstance(p, Node)]

    @property
    def text(self) -> str:
        """The element's own text (its children's left out)."""
        return "".join(p for p in self.parts if isinstance(p, str))

    def classes(self) -> set[str]:
        return set((self.attrs.get("class") or "").split())

    def iter(self):
        yield self
        for child in self.children:
            yield from child.iter()

    def find_all(self, tag: str | None = None, cls: str | None = None, **attrs) -> list[Node]:
        return [
            n
            for n in self.iter()
            if (tag is None or n.tag == tag)
            and (cls is None or cls in n.classes())
            and all(n.attrs.get(k.replace("_", "-")) == v for k, v in attrs.items())
        ]

    def all_text(self) -> str:
        """The text of the element and its descendants, in document order."""
        return "".join(p if isinstance(p, str) else p.all_text() for p in self.parts)


def parse_dom(markup: str) -> Node:
    """The document as a tree of Nodes (html.parser: void elements close themselves; script and
    style bodies are kept as text)."""
    from html.parser import HTMLParser

    void = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "track", "wbr"}
    root = Node("#document", {})

    class Builder(HTMLParser):
        current = root

        def handle_starttag(self, tag, attrs):
            node = Node(tag, dict(attrs), self.current)
            self.current.parts.append(node)
            if tag not in void:
                self.current = node

        def handle_startendtag(self, tag, attrs):
            self.current.parts.append(Node(tag, dict(attrs), self.current))

        def handle_endtag(self, tag):
            node = self.current
            while node is not root and node.tag != tag:
                node = node.parent
            if node is not root:
                self.current = node.parent

        def handle_data(self, data):
            self.current.parts.append(data)

    Builder(convert_charrefs=True).feed(markup)
    return root
