"""One rank of test_sharded: a model sharded by FSDP2's fully_shard ("fsdp": each rank its
own batch; "fsdp-accumulate": two micro-batches a step, the gradients reduced at the
second) or by a tensor-parallel plan ("tp": a column-wise then a row-wise Linear, every
rank the same batch), on the CPU with Gloo, launched with RANK / WORLD_SIZE / MASTER_ADDR
/ MASTER_PORT as torchrun sets them, tracked (outputs, gradients, parameters, their
gradients, summaries every step). The first step is taken before the track, the others
tracked; each step's collectives are counted at the dispatcher. Prints JSON: the client's
stats, the rank, the collectives per step. Arguments: how session runtime_dir steps
[nan_rank nan_step] (a NaN put into that rank's batch at that step)."""

import dataclasses
import json
import sys

import torch
import torch.distributed as dist
from torch import nn
from torch.utils._python_dispatch import TorchDispatchMode

import tensorscope


def model():
    """The model of the test: two Linear layers, the second's 5 x 16 weight cut unevenly."""
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 5))


def batch(step, rank, micro=0):
    return torch.randn(4, 8, generator=torch.Generator().manual_seed(1000 * step + 100 * micro + rank))


def micro_batches(how):
    return 2 if how == "fsdp-accumulate" else 1


def shard(net, how):
    if how.startswith("fsdp"):
        from torch.distributed.fsdp import fully_shard

        for layer in net:
            if isinstance(layer, nn.Linear):
                fully_shard(layer)
        fully_shard(net)
    else:
        from torch.distributed.device_mesh import init_device_mesh
        from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module

        mesh = init_device_mesh("cpu", (dist.get_world_size(),))
        parallelize_module(net, mesh, {"0": ColwiseParallel(), "2": RowwiseParallel()})


class Collectives(TorchDispatchMode):
    """Counts the collectives dispatched (c10d's ops but the wait for one that was started)."""

    def __init__(self):
        super().__init__()
        self.count = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if "c10d" in func.namespace and "wait" not in func.__name__:
            self.count += 1
        return func(*args, **(kwargs or {}))


def main():
    how, session, runtime_dir, steps = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    nan_at = (int(sys.argv[5]), int(sys.argv[6])) if len(sys.argv) > 6 else None
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    net = model()
    shard(net, how)
    opt = torch.optim.SGD(net.parameters(), lr=0.1)
    scope = tensorscope.Client(session, runtime_dir=runtime_dir, connect_timeout_ms=10000)
    collectives = []
    for step in range(steps):
        if step == 1:
            handle = scope.track_model("net", net, kinds=("output", "gradient", "parameter", "parameter_gradient"),
                                       stats_every=1, every_n=1000)
            assert handle.ok, handle.error
        with Collectives() as counted:
            micros = micro_batches(how)
            for micro in range(micros):
                x = batch(step, rank if how != "tp" else 0, micro)
                if nan_at == (rank, step) and micro == 0:
                    x[0, 0] = float("nan")
                if micros > 1:  # (FSDP2 reduces the gradients at the last micro-batch only)
                    net.set_requires_gradient_sync(micro == micros - 1)
                net(x).pow(2).mean().backward()
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
