"""filkit.torch: per-example Fisher information loss for a PyTorch user's own model and training
loop, on the model's device and dtype (docs/pytorch.md).

    accountant = FilAccountant(model, loss_fn=F.cross_entropy, clip_norm=1.0, noise_multiplier=1.0,
                               sample_rate=B / n)
    for x, y, ids in with_example_ids(loader):
        accountant.step(x, y, ids)      # before optimizer.step()
        ...
    accountant.dfil(); accountant.epsilon(1e-5); accountant.write_summary("fil.json", "fil.csv")

or, with Opacus' call shape, make_private(model, optimizer, loader, noise_multiplier=...,
max_grad_norm=...) returns a model, optimizer (with .accountant) and loader doing DP-SGD on the
gradient the user's own loop computes (BatchMemoryManager for gradient accumulation). Both work
under torch.distributed, with or without DistributedDataParallel (distributed.py).
"""
from .accountant import FilAccountant
from .checks import LoopMismatch
from .data import with_example_ids
from .distributed import RanksDisagree
from .functional import SOFT_CLIP_NORM_BOUND, hard_clip_factor, soft_clip_factor
from .layers import check_module
from .loss import LossError
from .private import BatchMemoryManager, make_private

__all__ = ["FilAccountant", "make_private", "BatchMemoryManager", "with_example_ids", "check_module", "LoopMismatch",
           "LossError", "RanksDisagree", "soft_clip_factor", "hard_clip_factor", "SOFT_CLIP_NORM_BOUND"]
