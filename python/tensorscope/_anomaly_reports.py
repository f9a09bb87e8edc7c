"""A list of anomaly reports (what Client.anomalies() and read_anomalies() return) that
says itself: in one line for a log (`summary`), and as a table in a notebook
(`_repr_html_`). Still a list of dicts: type, step, rank, pid, track, stream, kind,
message, details (and node, read from folders)."""

from __future__ import annotations

import html
from typing import Any, Dict, List

_COLUMNS = ("step", "rank", "type", "stream", "kind", "message")
MAX_ROWS = 200  # a notebook table shows the first ones and says how many more


class AnomalyReports(List[Dict[str, Any]]):
    """The anomalies of a run, first first (a list of dicts)."""

    def firsts(self) -> Dict[str, Dict[str, Any]]:
        """The first report of each type, in the order the types first came."""
        out: Dict[str, Dict[str, Any]] = {}
        for a in self:
            out.setdefault(str(a.get("type", "?")), a)
        return out

    def summary(self, session: str) -> str:
        """One line: how many, the first of each type (step, rank, stream), and the
        command that shows them."""
        if not self:
            return f"tensorscope: no anomaly (session {session})"
        named = "; ".join(f"first {kind}: step {a.get('step')}, rank {a.get('rank')}, {a.get('stream')}"
                          for kind, a in self.firsts().items())
        count = len(self)
        return (f"tensorscope: {count} anomal{'y' if count == 1 else 'ies'} ({named}); "
                f"see them with: tensorscope view --session {session}")

    def _repr_html_(self) -> str:
        if not self:
            return "<p>tensorscope: no anomaly</p>"
        columns = _COLUMNS + (("node",) if any(a.get("node") for a in self) else ())
        head = "".join(f"<th>{c}</th>" for c in columns)
        rows = "".join("<tr>" + "".join(f"<td>{html.escape(str(a.get(c, '')))}</td>" for c in columns) + "</tr>"
                       for a in self[:MAX_ROWS])
        more = f"<p>… and {len(self) - MAX_ROWS} more</p>" if len(self) > MAX_ROWS else ""
        count = len(self)
        return (f"<p>tensorscope: {count} anomal{'y' if count == 1 else 'ies'}</p>"
                f"<table><thead><tr>{head}</tr></thead><tbody>{rows}</tbody></table>{more}")
