"""The trainer callbacks (tensorscope.integrations), with the real trainers: a tiny model
trained for a few dozen batches by PyTorch Lightning and by the Hugging Face Trainer,
with gradient accumulation (2 micro-batches an optimizer step) and evaluation between
steps. Each step is one optimizer step, every one of them summarized; a NaN put into the
input of optimizer step 7 is reported first, at step 7, at the model's first module; the
trainer's log says so; the callback closes at the end of the fit (and, for Lightning,
when the fit raises); under Lightning's DDP each process sends as its rank."""

import logging
import os

import pytest
import torch
from torch import nn

import tensorscope

STEPS, ACCUMULATE, BATCH, NAN_STEP = 12, 2, 4, 7


class Net(nn.Module):
    """Linear-ReLU-Linear; the input of its training forward number `nan_call` (0-based;
    evaluation forwards do not count) is made NaN."""

    def __init__(self, nan_call=-1):
        super().__init__()
        torch.manual_seed(0)
        self.body = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4))
        self.calls = 0
        self.nan_call = nan_call

    def forward(self, x):
        if self.training and torch.is_grad_enabled():
            if self.calls == self.nan_call:
                x = x * float("nan")
            self.calls += 1
        return self.body(x)


def data(n):
    g = torch.Generator().manual_seed(1)
    return torch.randn(n, 8, generator=g), torch.randn(n, 4, generator=g)


def check_run(session_dir, anomalies):
    """Steps 0..STEPS-1, each once per stream; the first anomaly the NaN at NAN_STEP."""
    table = tensorscope.read_summaries(session_dir)
    outputs = table[table.stream == "model.net.body.0"]
    assert sorted(outputs.step) == list(range(STEPS)), sorted(outputs.step)  # one row a step: no eval, no micro-batch
    grads = table[table.stream == "model.net.body.2.grad"]
    assert sorted(grads.step) == list(range(STEPS)), sorted(grads.step)
    assert (outputs[outputs.step < NAN_STEP].nan_count == 0).all()
    assert anomalies, "the NaN is reported"
    first = anomalies[0]
    assert (first["type"], first["step"], first["stream"]) == ("non_finite", NAN_STEP, "model.net.body.0"), first
    assert tensorscope.read_anomalies(session_dir)[0]["step"] == NAN_STEP


def _lightning():
    """lightning.pytorch, or the test skips (the Python suite's first run: Debian's torch)."""
    return pytest.importorskip("lightning.pytorch")


def lightning_module(nan_call, fail_at=None):
    L = _lightning()

    class Module(L.LightningModule):
        def __init__(self):
            super().__init__()
            self.net = Net(nan_call)

        def forward(self, x):
            return self.net(x)

        def training_step(self, batch, batch_idx):
            if fail_at is not None and self.trainer.global_step == fail_at:
                raise RuntimeError("the fit fails")
            x, y = batch
            return nn.functional.mse_loss(self(x), y)

        def validation_step(self, batch, batch_idx):
            x, y = batch
            self.log("val_loss", nn.functional.mse_loss(self(x), y))

        def configure_optimizers(self):
            return torch.optim.SGD(self.parameters(), lr=0.01)

    return Module()


def lightning_fit(module, callback, tmp_path, steps=STEPS):
    L = _lightning()
    x, y = data(BATCH * ACCUMULATE * steps)
    loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(x, y), batch_size=BATCH)
    val = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(x[:8], y[:8]), batch_size=BATCH)
    trainer = L.Trainer(max_steps=steps, accumulate_grad_batches=ACCUMULATE, accelerator="cpu", devices=1,
                        callbacks=[callback], logger=L.loggers.CSVLogger(str(tmp_path / "logs")),
                        enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False,
                        val_check_interval=5 * ACCUMULATE, num_sanity_val_steps=1, default_root_dir=str(tmp_path))
    trainer.fit(module, loader, val)
    return trainer


def test_lightning_steps_are_optimizer_steps_and_the_nan_is_reported_first(daemon, tmp_path, caplog):
    _lightning()
    from tensorscope.integrations.lightning import TensorscopeCallback

    callback = TensorscopeCallback(daemon.session, every_n=5,
                                   client_options={"runtime_dir": daemon.runtime_dir, "connect_timeout_ms": 5000})
    module = lightning_module(nan_call=NAN_STEP * ACCUMULATE)
    with caplog.at_level(logging.INFO, logger="lightning.pytorch"):
        trainer = lightning_fit(module, callback, tmp_path)
    assert trainer.global_step == STEPS and module.net.calls == STEPS * ACCUMULATE
    assert callback._tracking.scope is None, "closed at the end of the fit"
    check_run(daemon.session_dir, callback.anomalies)
    said = sorted({r.getMessage() for r in caplog.records if r.getMessage().startswith("tensorscope:")})
    assert len(said) == 1 and f"first non_finite: step {NAN_STEP}, rank 0, model.net.body.0" in said[0], said
    metrics = open(os.path.join(trainer.logger.log_dir, "metrics.csv")).read()
    assert "tensorscope/anomalies" in metrics


def test_lightning_closes_when_the_fit_raises(daemon, tmp_path):
    _lightning()
    from tensorscope.integrations.lightning import TensorscopeCallback

    callback = TensorscopeCallback(daemon.session, client_options={"runtime_dir": daemon.runtime_dir})
    with pytest.raises(RuntimeError, match="the fit fails"):
        lightning_fit(lightning_module(nan_call=-1, fail_at=3), callback, tmp_path)
    assert callback._tracking.scope is None
    steps = sorted(set(tensorscope.read_summaries(daemon.session_dir).step))
    assert steps == [0, 1, 2], steps  # (step 3 raised before its forward; step 2 flushed)


def test_lightning_ddp_ranks_send_as_their_rank(daemon, tmp_path):
    """strategy="ddp" on 2 CPU processes: each sends as its trainer.global_rank, every
    step."""
    _lightning()
    import subprocess
    import sys

    worker = os.path.join(os.path.dirname(__file__), "lightning_ddp_worker.py")
    r = subprocess.run([sys.executable, worker, daemon.session, daemon.runtime_dir, str(tmp_path)], capture_output=True,
                       text=True, timeout=300, env=dict(os.environ, OMP_NUM_THREADS="1"))
    assert r.returncode == 0, r.stderr[-4000:]
    table = tensorscope.read_summaries(daemon.session_dir)
    for rank in (0, 1):
        rows = table[(table["rank"] == rank) & (table.stream == "model.net.0")]
        assert sorted(rows.step) == list(range(6)), (rank, sorted(rows.step))
    assert table.pid.nunique() == 2


def test_hugging_face_steps_are_optimizer_steps_and_the_nan_is_reported_first(daemon, tmp_path, caplog):
    transformers = pytest.importorskip("transformers")
    from tensorscope.integrations.huggingface import TensorscopeCallback

    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.net = Net(nan_call=NAN_STEP * ACCUMULATE)

        def forward(self, x, labels=None):
            out = self.net(x)
            return {"loss": nn.functional.mse_loss(out, labels), "logits": out}

    class Data(torch.utils.data.Dataset):
        def __init__(self, n):
            self.x, self.y = data(n)

        def __len__(self):
            return len(self.x)

        def __getitem__(self, i):
            return {"x": self.x[i], "labels": self.y[i]}

    callback = TensorscopeCallback(daemon.session, every_n=5,
                                   client_options={"runtime_dir": daemon.runtime_dir, "connect_timeout_ms": 5000})
    args = transformers.TrainingArguments(
        output_dir=str(tmp_path / "hf"), max_steps=STEPS, per_device_train_batch_size=BATCH,
        gradient_accumulation_steps=ACCUMULATE, learning_rate=0.01, eval_strategy="steps", eval_steps=5,
        per_device_eval_batch_size=BATCH, logging_steps=4, save_strategy="no", report_to=[], use_cpu=True,
        disable_tqdm=True, dataloader_num_workers=0)
    model = Model()
    trainer = transformers.Trainer(model=model, args=args, train_dataset=Data(BATCH * ACCUMULATE * STEPS),
                                   eval_dataset=Data(8), callbacks=[callback])
    transformers.utils.logging.enable_propagation()
    with caplog.at_level(logging.INFO, logger="transformers"):
        trainer.train()
    assert trainer.state.global_step == STEPS and model.net.calls == STEPS * ACCUMULATE
    assert callback._tracking.scope is None
    check_run(daemon.session_dir, callback.anomalies)
    said = sorted({r.getMessage() for r in caplog.records if r.getMessage().startswith("tensorscope:")})
    assert len(said) == 1 and f"first non_finite: step {NAN_STEP}, rank 0, model.net.body.0" in said[0], said
    logged = [h for h in trainer.state.log_history if "tensorscope/anomalies" in h]
    assert logged and logged[-1]["tensorscope/anomalies"] == len(callback.anomalies) > 0, logged
