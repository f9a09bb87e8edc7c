"""A small model trained for the overview's browser test: six layers whose fifth takes a
log that turns negative at a known step on one rank (NaN from there on), tracked with
summaries every step and whole tensors every step.

    python3 diverging_training.py SESSION RANK STEPS BAD_STEP   (BAD_STEP -1: healthy)
"""

import sys

import torch
from torch import nn

import tensorscope


class LogLayer(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 8)
        self.register_buffer("shift", torch.zeros(()))

    def forward(self, x):
        return torch.log(self.fc(x).abs() + 1 - self.shift)


def main():
    session, rank, steps, bad_step = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
    torch.manual_seed(rank)
    model = nn.Sequential(nn.Linear(8, 8), nn.ReLU(), nn.Linear(8, 8), nn.Linear(8, 8), LogLayer(), nn.Linear(8, 8))
    opt = torch.optim.SGD(model.parameters(), lr=1e-2)
    with tensorscope.Client(session=session, rank=rank, connect_timeout_ms=10000) as scope:
        scope.track_model("net", model, every_n=1, kinds=("output", "gradient"))
        for step in range(steps):
            if step == bad_step:
                model[4].shift.fill_(1e6)
            loss = model(torch.randn(4, 8)).pow(2).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
            scope.next_step()


if __name__ == "__main__":
    main()
