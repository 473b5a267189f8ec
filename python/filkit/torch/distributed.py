"""filkit.torch on several processes: torch.distributed, with or without DistributedDataParallel
(docs/pytorch.md, "Several processes"). The same script started on K processes (`torchrun
--nproc_per_node K script.py`) trains and accounts what it does on one, as filkit's MPI jobs do
(docs/distributed.md):

- The training set is cut into K contiguous shards whose sizes differ by at most one (the first
  n mod K ranks take one example more, as the MPI jobs' RowShard); rank r works on shard r. Every
  rank draws the step's batch over all n examples from the run's generator (the same on every rank,
  as filkit dpsgd under MPI) and keeps its shard's members: its shard is Poisson-sampled at rate q
  and the ranks' batches are together the one process's batch, example ids global.
- Under DistributedDataParallel, its all-reduce of the raw gradients in backward() is replaced by
  DDP's no-op communication hook: .grad after the loop's backward() is what this rank's backward
  computed, checked against this rank's per-example gradients as on one process (so the raw
  gradients never leave their rank).
- optimizer.step() all-reduces the ranks' clipped sums, rank 0's carrying the noise, drawn once a
  step from the one-process generator, and a flag per rank that refused its part: then every rank
  stops with the same message before anything is released.
- FilAccountant gathers every rank's per-example traces at the end of each step, so every rank
  holds the whole run's sums: dfil(), epsilon() and write_summary() on rank 0 describe all examples.
- Settings and the model are compared once (agree): ranks started differently stop with one
  message naming the first difference.
"""
import hashlib

import numpy as np
import torch

STARTED_DIFFERENTLY = "the torch.distributed ranks were started differently: {what} is {theirs} on rank {rank} but " \
                      "{ours} on rank 0"
ABSENT = "absent"
PARAMETER_VALUES = "the SHA-256 of the model's parameter values"
HINTS = {PARAMETER_VALUES: "wrap the model in DistributedDataParallel before make_private (it copies rank 0's "
                           "parameters to every rank), or initialise it from the same seed on every rank"}


class RanksDisagree(ValueError):
    """Ranks of one torch.distributed run were given different settings, models or step counts."""


class Ranks:
    """The default process group of torch.distributed when it has more than one process."""

    def __init__(self, rank, size):
        self.rank, self.size = rank, size

    @staticmethod
    def current():
        """The default group's Ranks where torch.distributed is initialised with K > 1 processes,
        else None (one process: nothing is communicated, and nothing changes)."""
        dist = torch.distributed
        if dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1:
            return Ranks(dist.get_rank(), dist.get_world_size())
        return None

    def gather(self, value):
        """Every rank's `value` (picklable), in rank order, on every rank."""
        gathered = [None] * self.size
        torch.distributed.all_gather_object(gathered, value)
        return gathered

    def agree(self, description):
        """Every rank's description ({what: value}, values compared with ==) must equal rank 0's;
        otherwise every rank raises the same RanksDisagree, naming the first difference (the first
        rank that differs, the first entry in rank 0's order) and, from HINTS, what to do."""
        gathered = self.gather(description)
        ours = gathered[0]
        for rank, theirs in enumerate(gathered[1:], 1):
            for what in list(ours) + [w for w in theirs if w not in ours]:
                if ours.get(what, ABSENT) != theirs.get(what, ABSENT):
                    hint = HINTS.get(what)
                    raise RanksDisagree(STARTED_DIFFERENTLY.format(what=what, theirs=theirs.get(what, ABSENT),
                                                                   ours=ours.get(what, ABSENT), rank=rank)
                                        + (f": {hint}" if hint else ""))

    def shard(self, n):
        """[begin, end) of this rank's contiguous shard of n examples (RowShard::of)."""
        base, extra = divmod(n, self.size)
        begin = self.rank * base + min(self.rank, extra)
        return begin, begin + base + (1 if self.rank < extra else 0)

    def shard_bounds(self, n):
        """Every rank's shard's end, in rank order (a LongTensor)."""
        base, extra = divmod(n, self.size)
        return torch.tensor([(r + 1) * base + min(r + 1, extra) for r in range(self.size)], dtype=torch.long)

    def sum_step(self, step, total, noise, failure):
        """The ranks' clipped sums added, plus the noise (rank 0 passes it, the others None), in one
        all-reduce that also carries a flag per rank whose part of the step failed (failure: its
        exception, or None). If any rank's did, every rank raises the same LoopMismatch naming the
        first such rank and its message (from failure on the rank it happened on); nothing is
        released on any rank."""
        from .checks import LoopMismatch
        flags = torch.zeros(self.size, dtype=total.dtype, device=total.device)
        if failure is not None:
            flags[self.rank] = 1.0
        buffer = torch.cat([total if noise is None else total + noise, flags])
        torch.distributed.all_reduce(buffer)
        if bool((buffer[-self.size:] != 0).any()):
            messages = self.gather(None if failure is None else f"{type(failure).__name__}: {failure}")
            refused = [r for r, m in enumerate(messages) if m is not None]
            others = f" (rank(s) {', '.join(map(str, refused[1:]))} refused too)" if len(refused) > 1 else ""
            raise LoopMismatch(f"step {step}: rank {refused[0]} refused its part of the batch, so no rank released "
                               f"anything{others}: {messages[refused[0]]}") from failure
        return buffer[:-self.size]


def seed_of_rank(seed, rank):
    """The accountant's probes' seed on `rank`: `seed` itself on rank 0 (one process's draws), on
    every other rank a stream of its own (NumPy's SeedSequence with spawn key (rank,)), 63 bits."""
    if rank == 0:
        return seed
    return int(np.random.SeedSequence(seed, spawn_key=(rank,)).generate_state(1, np.uint64)[0] >> np.uint64(1))


def unwrap(module):
    """(the module itself, the DistributedDataParallel wrapping it or None)."""
    if isinstance(module, torch.nn.parallel.DistributedDataParallel):
        return module.module, module
    return module, None


def keep_gradients_local(ddp):
    """Replace DDP's all-reduce of the raw gradients in backward() by DDP's no-op hook, so that
    .grad holds what this rank's backward computed (make_private privatises and all-reduces it)."""
    if getattr(ddp, "_filkit_local_gradients", False):
        return  # make_private called again on the same model
    from torch.distributed.algorithms.ddp_comm_hooks.debugging_hooks import noop_hook
    try:
        ddp.register_comm_hook(None, noop_hook)
    except RuntimeError as error:
        raise ValueError("module: this DistributedDataParallel model already has a communication hook "
                         f"({error}); make_private needs to register its own (each rank's gradient stays local and "
                         "the clipped sums are all-reduced): give it a DistributedDataParallel model without one") \
            from error
    ddp._filkit_local_gradients = True


def arguments_description(arguments, model):
    """What the ranks must agree on before anything is checked (so that a check refusing on one
    rank refuses on all): each argument's repr (a callable's qualified name) and the model's
    model_description (after unwrapping DistributedDataParallel)."""
    described = {name: getattr(value, "__qualname__", type(value).__name__) if callable(value) else repr(value)
                 for name, value in arguments.items()}
    model, _ = unwrap(model)
    if not isinstance(model, torch.nn.Module):
        return {**described, "the model's type": type(model).__name__}
    return {**described, **model_description(model)}


def model_description(module):
    """What every rank's model must agree on: each module's type and mode (train or eval), each
    parameter's shape, dtype and whether it is trained, in named_parameters() order, and a hash of
    all the parameters' values."""
    description, digest = {}, hashlib.sha256()
    for name, layer in module.named_modules():
        description[f"module '{name}'"] = f"{type(layer).__name__} in {'train' if layer.training else 'eval'} mode"
    for name, p in module.named_parameters():
        description[f"parameter '{name}'"] = f"{tuple(p.shape)} {str(p.dtype).replace('torch.', '')} " + \
                                             ("trained" if p.requires_grad else "frozen")
        digest.update(p.detach().cpu().contiguous().reshape(-1).view(torch.uint8).numpy().tobytes())
    description[PARAMETER_VALUES] = digest.hexdigest()[:16]
    return description


def gather_step(accountant, parts):
    """At the end of a step: every rank's per-example sums of the step (parts: its (ids, trace,
    spectral, labels) accounted since the last step) added on every other rank, so that each holds
    the whole run's; the ranks must be at the same step with the same private coordinates."""
    empty = torch.zeros(0, dtype=torch.float64)
    mine = [torch.cat([part[k] for part in parts]) if parts else (empty.long() if k == 0 else empty)
            for k in range(4)]
    gathered = accountant.ranks.gather({"steps": accountant.steps, "parts": mine,
                                        "dims": (accountant.private_dims, accountant.private_dims_label)})
    for rank, theirs in enumerate(gathered):
        if theirs["steps"] != gathered[0]["steps"]:
            raise RanksDisagree(f"FilAccountant: rank {rank} ends its step {theirs['steps'] + 1} while rank 0 ends "
                                f"step {gathered[0]['steps'] + 1}: every rank must take every step (an empty batch: "
                                "step() on it, or empty_step())")
    dims = [(r, t["dims"]) for r, t in enumerate(gathered) if t["dims"][0] is not None]
    for rank, theirs in dims[1:]:
        if theirs != dims[0][1]:
            raise RanksDisagree(f"FilAccountant: the examples on rank {rank} have {theirs[0]} private coordinates, "
                                f"those on rank {dims[0][0]} {dims[0][1][0]}")
    if dims and accountant.private_dims is None:
        accountant.private_dims, accountant.private_dims_label = dims[0][1]
    for rank, theirs in enumerate(gathered):
        if rank != accountant.ranks.rank and theirs["parts"][0].numel():
            accountant.add_traces(*theirs["parts"])
