"""What every trainer callback does (tensorscope/integrations/): one client per fit, the
model tracked, the trainer's optimizer step as the step, and at the end the anomalies
the daemon found, said in one line for the trainer's log."""

from __future__ import annotations

import logging
from typing import Any, Dict, List, Mapping, Optional

from .._anomaly_reports import AnomalyReports
from .._client import Client


class TrainerTracking:
    """A fit's tracking. `start` opens the client (closing one left by an earlier fit),
    `step` follows the trainer's optimizer step, `finish` flushes, asks the daemon for
    the anomalies, logs them on rank 0 and closes. Never raises into the trainer: a
    failure is logged and tracking stops."""

    def __init__(self, session: str, name: str, every_n: int, gradients: bool,
                 track_options: Optional[Mapping[str, Any]], client_options: Optional[Mapping[str, Any]],
                 log: logging.Logger) -> None:
        self.session = session
        self.name = name
        self.every_n = every_n
        self.gradients = gradients
        self.track_options = dict(track_options or {})
        self.client_options = dict(client_options or {})
        self.log = log
        self.scope: Optional[Client] = None
        self.anomalies: List[Dict[str, Any]] = []

    def start(self, model: Any, rank: int) -> None:
        if self.scope is not None:
            self.finish()
        try:
            options = {"session": self.session, "rank": rank, "every_n": self.every_n, **self.client_options}
            self.scope = Client(**options)
            self.scope.track_model(self.name, model, **self.track_options)
            if self.gradients:
                self.scope.track_layer(self.name, model, **self.track_options)
        except Exception as e:  # a bad option: said, and the training goes on untracked
            self.log.warning("tensorscope: not tracking: %s", e)
            self._close()

    def step(self, global_step: int) -> None:
        scope = self.scope
        if scope is not None and global_step != scope.step:
            scope.set_step(global_step)

    def finish(self, timeout: float = 10.0) -> List[Dict[str, Any]]:
        """Flushes the last step, waits (at most `timeout` s) for the daemon to read it,
        logs the anomaly summary (rank 0) and closes; returns the anomalies."""
        scope = self.scope
        if scope is None:
            return self.anomalies
        try:
            for track in list(scope._live_tracks()):
                track.stop()  # (the last step's summaries go out)
            self.anomalies = scope.anomalies(timeout=timeout)
            if scope.rank == 0:
                line = AnomalyReports(self.anomalies).summary(self.session)
                (self.log.warning if self.anomalies else self.log.info)("%s", line)
        except Exception as e:
            self.log.warning("tensorscope: the anomalies could not be read: %s", e)
        self._close()
        return self.anomalies

    def _close(self) -> None:
        scope, self.scope = self.scope, None
        if scope is not None:
            try:
                scope.close()
            except Exception as e:
                self.log.warning("tensorscope: closing: %s", e)
