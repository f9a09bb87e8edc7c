"""A Lightning fit on 2 CPU processes (strategy "ddp", Gloo) with the tensorscope callback,
for test_integrations.py: python lightning_ddp_worker.py SESSION RUNTIME_DIR ROOT. Lightning
starts rank 1 by running this script again."""

import sys

import lightning.pytorch as L
import torch
from torch import nn

from tensorscope.integrations.lightning import TensorscopeCallback

STEPS = 6


class Module(L.LightningModule):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4))

    def training_step(self, batch, batch_idx):
        x, y = batch
        return nn.functional.mse_loss(self.net(x), y)

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.01)


def main():
    session, runtime, root = sys.argv[1:4]
    torch.manual_seed(0)
    data = torch.utils.data.TensorDataset(torch.randn(4 * 2 * STEPS, 8), torch.randn(4 * 2 * STEPS, 4))
    callback = TensorscopeCallback(session, client_options={"runtime_dir": runtime, "connect_timeout_ms": 5000})
    trainer = L.Trainer(max_steps=STEPS, accelerator="cpu", devices=2, strategy="ddp", callbacks=[callback],
                        logger=False, enable_checkpointing=False, enable_progress_bar=False,
                        enable_model_summary=False, default_root_dir=root)
    trainer.fit(Module(), torch.utils.data.DataLoader(data, batch_size=4))
    print(f"rank {trainer.global_rank} done: {trainer.global_step} steps", flush=True)


if __name__ == "__main__":
    main()
