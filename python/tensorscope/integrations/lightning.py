"""tensorscope in a PyTorch Lightning fit, one line:

    from tensorscope.integrations.lightning import TensorscopeCallback
    trainer = L.Trainer(callbacks=[TensorscopeCallback(session="exp1")])

The callback tracks the LightningModule from `setup` of the fit on (its outputs and the
gradients at them: summaries every step, whole tensors every `every_n` steps), stamps
each batch with `trainer.global_step` (with `accumulate_grad_batches`, the micro-batches
of one optimizer step are one step), sends as `trainer.global_rank`, leaves validation
forwards out (they run under no_grad in eval mode), and at the end of the fit, or on an
exception, flushes, says the anomalies the daemon found in the trainer's log (the
"lightning.pytorch" logger, rank 0) and as the metric "tensorscope/anomalies" of the
trainer's logger, and closes. Built on `lightning.pytorch` or, without it,
`pytorch_lightning`."""

from __future__ import annotations

import logging
from typing import Any, Mapping, Optional

from ._trainer_tracking import TrainerTracking

try:
    from lightning.pytorch import Callback as _Callback
except ImportError:  # the older package name
    from pytorch_lightning import Callback as _Callback

_LOG = logging.getLogger("lightning.pytorch.tensorscope")  # under Lightning's own logger


class TensorscopeCallback(_Callback):
    """Tracks the fit's model with tensorscope.

    `session`: the daemon's session; `name`: the streams' prefix ("model.<path>");
    `every_n`: whole tensors every this many steps (summaries every step);
    `gradients`: also the gradient at each module's output (track_layer);
    `track_options`: more keywords of Client.track_model (include, exclude, kinds,
    cast_format, ...); `client_options`: more keywords of tensorscope.Client (autostart,
    runtime_dir, ...). The anomalies found are in `anomalies` after the fit."""

    def __init__(self, session: str = "default", *, name: str = "model", every_n: int = 100, gradients: bool = True,
                 track_options: Optional[Mapping[str, Any]] = None,
                 client_options: Optional[Mapping[str, Any]] = None) -> None:
        super().__init__()
        self._tracking = TrainerTracking(session, name, every_n, gradients, track_options, client_options, _LOG)

    @property
    def anomalies(self) -> list:
        return self._tracking.anomalies

    def setup(self, trainer: Any, pl_module: Any, stage: str) -> None:
        if stage == "fit":
            self._tracking.start(pl_module, trainer.global_rank)

    def on_train_batch_start(self, trainer: Any, pl_module: Any, batch: Any, batch_idx: int) -> None:
        self._tracking.step(trainer.global_step)

    def teardown(self, trainer: Any, pl_module: Any, stage: str) -> None:
        if stage == "fit":
            self._finish(trainer)

    def on_exception(self, trainer: Any, pl_module: Any, exception: BaseException) -> None:
        self._finish(trainer)

    def _finish(self, trainer: Any) -> None:
        if self._tracking.scope is None:
            return
        anomalies = self._tracking.finish()
        if trainer.logger is not None and trainer.is_global_zero:
            try:
                trainer.logger.log_metrics({"tensorscope/anomalies": float(len(anomalies))}, step=trainer.global_step)
            except Exception as e:
                _LOG.warning("tensorscope: the trainer's logger refused the anomaly count: %s", e)
