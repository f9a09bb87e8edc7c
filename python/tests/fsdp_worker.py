"""One rank of test_sharded: a model wrapped with FSDP2's fully_shard (CPU, Gloo), launched
with RANK / WORLD_SIZE / MASTER_ADDR / MASTER_PORT as torchrun sets them, tracked
(outputs, gradients, parameters, their gradients, summaries every step). The first step
is taken before the track, the others tracked; each step's collectives are counted at
the dispatcher. Prints JSON: the client's stats, the rank, the collectives per step.
Arguments: session runtime_dir steps."""

import dataclasses
import json
import sys

import torch
import torch.distributed as dist
from torch import nn
from torch.distributed.fsdp import fully_shard
from torch.utils._python_dispatch import TorchDispatchMode

import tensorscope


def model():
    """The model of the test: two Linear layers, the second's 5 x 16 weight cut unevenly."""
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 5))


def batch(step, rank):
    return torch.randn(4, 8, generator=torch.Generator().manual_seed(1000 * step + rank))


class Collectives(TorchDispatchMode):
    """Counts the collectives dispatched (c10d's ops)."""

    def __init__(self):
        super().__init__()
        self.count = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if "c10d" in func.namespace:
            self.count += 1
        return func(*args, **(kwargs or {}))


def main():
    session, runtime_dir, steps = sys.argv[1], sys.argv[2], int(sys.argv[3])
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    net = model()
    for layer in net:
        if isinstance(layer, nn.Linear):
            fully_shard(layer)
    fully_shard(net)
    opt = torch.optim.SGD(net.parameters(), lr=0.1)
    scope = tensorscope.Client(session, runtime_dir=runtime_dir, connect_timeout_ms=10000)
    collectives = []
    for step in range(steps):
        if step == 1:
            handle = scope.track_model("net", net, kinds=("output", "gradient", "parameter", "parameter_gradient"),
                                       stats_every=1, every_n=1000)
            assert handle.ok, handle.error
        with Collectives() as counted:
            loss = net(batch(step, rank)).pow(2).mean()
            loss.backward()
            opt.step()
            opt.zero_grad()
            scope.next_step()
        collectives.append(counted.count)
    stats = dataclasses.asdict(scope.stats())
    stats["rank"] = rank
    stats["collectives"] = collectives
    scope.close()
    dist.destroy_process_group()
    print(json.dumps(stats))


if __name__ == "__main__":
    main()
