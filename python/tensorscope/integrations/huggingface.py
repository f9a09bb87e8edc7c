"""tensorscope in a Hugging Face `transformers.Trainer`, one line:

    from tensorscope.integrations.huggingface import TensorscopeCallback
    trainer = Trainer(model, args, train_dataset=..., callbacks=[TensorscopeCallback(session="exp1")])

The callback tracks the model from `on_train_begin` on (its outputs and the gradients at
them: summaries every step, whole tensors every `every_n` steps), stamps each step with
`state.global_step` (with `gradient_accumulation_steps`, the micro-batches of one
optimizer step are one step), sends as `args.process_index` (the global rank), leaves
evaluation forwards out (they run under no_grad in eval mode), and at `on_train_end`
flushes, says the anomalies the daemon found in the transformers log (rank 0) and in
`state.log_history` ({"tensorscope/anomalies": n, "step": ...}), and closes. The Trainer
tells callbacks of no exception: a training that raises leaves the client to the next
`train()` (which closes it first) or to the process's exit."""

from __future__ import annotations

from typing import Any, Mapping, Optional

from transformers import TrainerCallback
from transformers.utils import logging as _hf_logging

from ._trainer_tracking import TrainerTracking

_LOG = _hf_logging.get_logger("transformers.integrations.tensorscope")


class TensorscopeCallback(TrainerCallback):
    """Tracks the Trainer's model with tensorscope.

    `session`: the daemon's session; `name`: the streams' prefix ("model.<path>");
    `every_n`: whole tensors every this many steps (summaries every step);
    `gradients`: also the gradient at each module's output (track_layer);
    `track_options`: more keywords of Client.track_model (include, exclude, kinds,
    cast_format, ...); `client_options`: more keywords of tensorscope.Client (autostart,
    runtime_dir, ...). The anomalies found are in `anomalies` after training."""

    def __init__(self, session: str = "default", *, name: str = "model", every_n: int = 100, gradients: bool = True,
                 track_options: Optional[Mapping[str, Any]] = None,
                 client_options: Optional[Mapping[str, Any]] = None) -> None:
        self._tracking = TrainerTracking(session, name, every_n, gradients, track_options, client_options, _LOG)

    @property
    def anomalies(self) -> list:
        return self._tracking.anomalies

    def on_train_begin(self, args: Any, state: Any, control: Any, model: Any = None, **kwargs: Any) -> None:
        if model is not None:
            self._tracking.start(model, args.process_index)
            self._tracking.step(state.global_step)

    def on_step_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self._tracking.step(state.global_step)

    def on_train_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        if self._tracking.scope is None:
            return
        anomalies = self._tracking.finish()
        if state.is_world_process_zero:
            state.log_history.append({"tensorscope/anomalies": len(anomalies), "step": state.global_step})
