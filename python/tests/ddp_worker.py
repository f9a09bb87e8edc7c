"""One rank of test_distributed: DistributedDataParallel on CPU (Gloo), launched with
RANK / WORLD_SIZE / MASTER_ADDR / MASTER_PORT as torchrun sets them. Prints the client's
stats as JSON. Arguments: session runtime_dir steps."""

import dataclasses
import json
import os
import sys

import torch
import torch.distributed as dist
from torch import nn

import tensorscope


def main():
    session, runtime_dir, steps = sys.argv[1], sys.argv[2], int(sys.argv[3])
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    torch.manual_seed(0)
    model = nn.parallel.DistributedDataParallel(
        nn.Sequential(nn.Conv2d(1, 4, 3), nn.ReLU(), nn.Flatten(), nn.Linear(4 * 6 * 6, 3)))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    scope = tensorscope.Client(session, runtime_dir=runtime_dir, connect_timeout_ms=10000)
    scope.track_model("net", model)
    scope.track_layer("net", model)
    g = torch.Generator().manual_seed(rank)
    for _ in range(steps):
        x, y = torch.randn(4, 1, 8, 8, generator=g), torch.randint(0, 3, (4,), generator=g)
        loss = nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad()
        scope.push("loss", loss)
        scope.next_step()
    stats = dataclasses.asdict(scope.stats())
    stats["rank"] = scope.rank
    scope.close()
    dist.destroy_process_group()
    print(json.dumps(stats))


if __name__ == "__main__":
    main()
