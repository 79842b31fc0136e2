"""The smallest complete program of several processes. torchrun starts one copy per rank and tells
each its rank in environment variables (RANK, WORLD_SIZE, LOCAL_RANK, and MASTER_ADDR/MASTER_PORT,
where rank 0 waits for the others); each copy joins the process group, adds one number per rank
with an all-reduce, and leaves.

    torchrun --standalone --nproc_per_node=2 gpu_course/hello_ranks.py
"""
import os

import torch
import torch.distributed as dist


def main():
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    local = int(os.environ["LOCAL_RANK"])               # which GPU of this machine is this rank's
    if torch.cuda.device_count() >= world:              # a GPU for every rank: NCCL between them
        device = torch.device("cuda", local)
        torch.cuda.set_device(device)
        dist.init_process_group("nccl", device_id=device)
    else:                                               # otherwise CPU processes: gloo
        device = torch.device("cpu")
        dist.init_process_group("gloo")
    mine = torch.tensor([rank + 1.0], device=device)
    total = mine.clone()
    dist.all_reduce(total)                              # every rank gets the sum of all ranks' numbers
    print(f"rank {rank} of {world}: my number is {mine.item():g}; all_reduce gives {total.item():g}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
