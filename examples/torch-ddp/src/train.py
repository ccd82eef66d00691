"""DistributedDataParallel training of a small MLP on synthetic data.

Started by torchrun, which sets RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR
and MASTER_PORT: the process group is initialised from that environment.
NCCL is used when CUDA is available, gloo otherwise (a CPU-only machine,
or the sandbox's simulated GPUs). Rank 0 prints the mean loss over all
ranks after each epoch. Nothing is saved.
"""

import argparse
import os

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--epochs", type=int, default=5)
    p.add_argument("--steps", type=int, default=20, help="steps per epoch")
    p.add_argument("--batch", type=int, default=64, help="samples per rank and step")
    p.add_argument("--lr", type=float, default=0.05)
    args = p.parse_args()

    use_cuda = torch.cuda.is_available()
    dist.init_process_group("nccl" if use_cuda else "gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    if use_cuda:
        local_rank = int(os.environ["LOCAL_RANK"])
        torch.cuda.set_device(local_rank)
        device = torch.device("cuda", local_rank)
    else:
        device = torch.device("cpu")

    # The same target on every rank (seed 0), different samples on each
    # (seed 1 + rank): the ranks learn one function from disjoint data,
    # which is what DDP's gradient all-reduce is for.
    torch.manual_seed(0)
    teacher = torch.randn(16, 1)
    model = nn.Sequential(nn.Linear(16, 64), nn.ReLU(), nn.Linear(64, 1)).to(device)
    ddp = DistributedDataParallel(model, device_ids=[device.index] if use_cuda else None)
    opt = torch.optim.SGD(ddp.parameters(), lr=args.lr)
    gen = torch.Generator().manual_seed(1 + rank)

    if rank == 0:
        print("ddp: world size %d, backend %s, torch %s" % (world, dist.get_backend(), torch.__version__), flush=True)
    for epoch in range(1, args.epochs + 1):
        total = torch.zeros(1, device=device)
        for _ in range(args.steps):
            x = torch.randn(args.batch, 16, generator=gen)
            y = x @ teacher + 0.01 * torch.randn(args.batch, 1, generator=gen)
            x, y = x.to(device), y.to(device)
            opt.zero_grad()
            loss = nn.functional.mse_loss(ddp(x), y)
            loss.backward()
            opt.step()
            total += loss.detach()
        # The mean over ranks, so the printed loss is the whole group's.
        dist.all_reduce(total)
        if rank == 0:
            print("epoch %d loss %.4f" % (epoch, total.item() / (args.steps * world)), flush=True)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
