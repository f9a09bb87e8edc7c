"""The fenced code blocks of the user documentation (README.md and docs/user/*.md), for
the tests that run them (test_doc_examples.py) and the C++ examples' generator
(cpp_examples.py).

A block is run unless the line before its fence is an HTML comment starting
`<!-- not run:` with the reason (another tool's API, a fragment of output).
"""

import glob
import os
import re

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PAGES = [os.path.join(REPO, "README.md")] + sorted(glob.glob(os.path.join(REPO, "docs", "user", "*.md")))

_FENCE = re.compile(r"^(\s*)```(\S*)\s*$")
NOT_RUN = "<!-- not run:"


class Block:
    def __init__(self, page, line, lang, code, run):
        self.page, self.line, self.lang, self.code, self.run = page, line, lang, code, run

    @property
    def where(self):
        return f"{os.path.relpath(self.page, REPO)}:{self.line}"


def blocks(page):
    """Every fenced block of `page`, in order (indented blocks, in list items, included)."""
    out = []
    lines = open(page, encoding="utf-8").read().split("\n")
    i = 0
    while i < len(lines):
        m = _FENCE.match(lines[i])
        if not m or not m.group(2) and not _opens(lines, i):
            i += 1
            continue
        indent, lang = m.group(1), m.group(2)
        previous = lines[i - 1].strip() if i > 0 else ""
        start = i + 1
        i += 1
        body = []
        while i < len(lines) and lines[i].strip() != "```":
            body.append(lines[i][len(indent):] if lines[i].startswith(indent) else lines[i].lstrip())
            i += 1
        out.append(Block(page, start, lang, "\n".join(body) + "\n", not previous.startswith(NOT_RUN)))
        i += 1
    return out


def _opens(lines, i):
    """A bare ``` opens a block when an even number of fences came before it."""
    return sum(1 for line in lines[:i] if line.strip().startswith("```")) % 2 == 0


def all_blocks(lang=None):
    return [b for page in PAGES for b in blocks(page) if lang is None or b.lang == lang]
