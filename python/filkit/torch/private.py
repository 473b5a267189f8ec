"""make_private: DP-SGD with Opacus' names and call shape, and the FIL accountant on the side
(docs/pytorch.md, "make_private").

The returned loader samples the batches (Poisson at rate q = B/n, or exactly B uniformly at random
every step) and remembers the current one. The model carries hooks (capture.py) that record what
the user's own loop computed: the input as the model received it (after any transform in the loop)
and the gradient the loop's loss.backward() put at its output and at each trained layer. The
returned optimizer's step() privatises exactly that: the per-example gradients of the loop's loss
(from the layers' captured inputs and output gradients, per_example.py, or with accounting from the
accountant's per-example gradients of the same inputs and loss), each clipped (smooth by default,
or Opacus' hard rule), summed, plus N(0, sigma^2 C^2 I) from a seeded generator, divided by the
expected batch size B (Opacus' rule, docs/mathematics.md section 7.1), written into .grad before
the wrapped optimizer's own step. The per-example gradients are checked against the gradient the
loop's backward() left (their sum must be it), and anything the step cannot privatise as the loop
computed it is refused (checks.py). BatchMemoryManager splits a logical batch into physical ones.
Under torch.distributed each rank takes its shard's part of every batch and the clipped sums are
all-reduced (distributed.py).
"""
import warnings

import torch
import torch.nn.functional as F

from .accountant import CLIPPINGS, FilAccountant
from .arguments import choice, count, noise_scale, positive
from .capture import LoopCapture, per_example_blocks
from .checks import GRAPH_CAVEAT, RANDOM_REFUSAL, Deferred, LoopMismatch
from .distributed import Ranks, arguments_description, keep_gradients_local, unwrap
from .functional import hard_clip_factor, soft_clip_factor
from .layers import check_module
from .loss import REDUCTIONS


class PrivateLoader:
    """Batches of data_loader's dataset, sampled privately; `current` holds the last logical batch's
    (inputs, targets, example ids) and `part` the part of it the loop is working on (the whole
    batch, or with BatchMemoryManager one physical batch) with whether it is the batch's last.
    With ranks (torch.distributed), the batch is drawn over the whole dataset as on one process
    and this rank keeps the members of its shard; `largest_share` is the most members any rank
    has of the current batch."""

    def __init__(self, data_loader, poisson_sampling, generator, ranks=None):
        self.dataset, self.collate_fn = data_loader.dataset, data_loader.collate_fn
        self.batch_size = data_loader.batch_size
        self.n = len(self.dataset)
        if self.batch_size is None or not 1 <= self.batch_size <= self.n:
            raise ValueError(f"data_loader: batch_size = {self.batch_size}: must be between 1 and the dataset's "
                             f"size {self.n}")
        self.sample_rate = self.batch_size / self.n
        self.poisson_sampling, self.generator = poisson_sampling, generator
        self.current = None
        self.part = None
        self.draws = 0  # parts handed to the loop so far
        self._empty = None
        self.ranks = ranks
        self.shard = ranks.shard(self.n) if ranks else (0, self.n)
        self.largest_share = 0

    def __len__(self):
        return max(1, round(1.0 / self.sample_rate))  # steps per epoch, as Opacus

    def _indices(self):
        if self.poisson_sampling:
            ids = torch.nonzero(torch.rand(self.n, generator=self.generator) < self.sample_rate).flatten()
        else:
            ids = torch.randperm(self.n, generator=self.generator)[:self.batch_size].sort().values
        if not self.ranks:
            self.largest_share = ids.numel()
            return ids
        shares = torch.bincount(torch.bucketize(ids, self.ranks.shard_bounds(self.n), right=True),
                                minlength=self.ranks.size)
        self.largest_share = int(shares.max())
        begin, end = self.shard
        return ids[(ids >= begin) & (ids < end)]

    def _collate(self, ids):
        if ids.numel() == 0:  # an empty Poisson batch, as Opacus yields it: tensors with no rows
            if self._empty is None:
                inputs, targets = self.collate_fn([self.dataset[0]])[:2]
                self._empty = (inputs[:0], targets[:0])
            return self._empty
        return tuple(self.collate_fn([self.dataset[int(i)] for i in ids])[:2])

    def logical_batches(self):
        """An epoch of logical batches (inputs, targets, ids), each kept in `current`."""
        for _ in range(len(self)):
            ids = self._indices()
            inputs, targets = self._collate(ids)
            self.current = (inputs, targets, ids)
            yield inputs, targets, ids

    def __iter__(self):
        for inputs, targets, ids in self.logical_batches():
            self.hand_out(inputs, targets, ids, last=True)
            yield inputs, targets

    def hand_out(self, inputs, targets, ids, last):
        self.part = (inputs, targets, ids, last)
        self.draws += 1


class BatchMemoryManager:
    """Opacus' BatchMemoryManager: iterates the logical batches of make_private's loader in physical
    batches of at most max_physical_batch_size examples; the optimizer's step() after each but the
    last physical batch of a logical batch accumulates (each example clipped once), and the last
    adds the noise once and steps. The result equals one logical batch (the tests hold it to 1e-12
    in float64).

        with BatchMemoryManager(data_loader=loader, max_physical_batch_size=64, optimizer=optimizer) as batches:
            for x, y in batches:
                optimizer.zero_grad(); loss_fn(model(x), y).backward(); optimizer.step()
    """

    def __init__(self, *, data_loader, max_physical_batch_size, optimizer):
        if not isinstance(data_loader, PrivateLoader):
            raise ValueError("BatchMemoryManager: data_loader must be the loader make_private returned, got "
                             f"{type(data_loader).__name__}")
        if not isinstance(optimizer, PrivateOptimizer) or optimizer.loader is not data_loader:
            raise ValueError("BatchMemoryManager: optimizer must be the optimizer make_private returned with this "
                             "loader")
        if not isinstance(max_physical_batch_size, int) or isinstance(max_physical_batch_size, bool) or \
                max_physical_batch_size < 1:
            raise ValueError(f"max_physical_batch_size = {max_physical_batch_size!r}: must be an integer >= 1")
        self.loader, self.optimizer, self.size = data_loader, optimizer, max_physical_batch_size

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def __len__(self):
        return len(self.loader)

    def __iter__(self):
        for inputs, targets, ids in self.loader.logical_batches():
            # As many physical batches on every rank (an empty one where a rank has fewer members):
            # under DistributedDataParallel each forward is a step of all ranks together.
            starts = list(range(0, self.loader.largest_share, self.size)) or [0]
            for k, start in enumerate(starts):
                rows = slice(start, start + self.size)
                x, y = inputs[rows], targets[rows]
                self.loader.hand_out(x, y, ids[rows], last=k + 1 == len(starts))
                yield x, y


class PrivateOptimizer(torch.optim.Optimizer):
    """Wraps the user's optimizer: step() writes the noisy clipped mean of the loop's per-example
    gradients into .grad first. An Optimizer (for learning-rate schedulers) whose param_groups,
    state and defaults are the wrapped one's; Optimizer.__init__ is not called, since it would make
    groups of its own."""

    def __init__(self, optimizer, module, loader, capture, *, noise_multiplier, max_grad_norm, clipping,
                 loss_reduction, accountant, generator, ddp=None):
        self.optimizer, self.module, self.loader, self.capture = optimizer, module, loader, capture
        self.ddp = ddp  # the DistributedDataParallel around module, if any
        self.noise_multiplier, self.max_grad_norm = noise_multiplier, max_grad_norm
        self.clipping, self.loss_reduction = clipping, loss_reduction
        self.accountant, self.generator = accountant, generator
        self.noise = None  # the last step's N(0, sigma^2 C^2 I) draw, flat in named_parameters order
        self.steps = 0
        self._draws = 0  # the loader's draws at the last step()
        self._pending = None  # the clipped sum of a logical batch's physical parts so far
        self._failure = None  # under torch.distributed: this rank's refusal of a part of the step

    @property
    def param_groups(self):
        return self.optimizer.param_groups

    @property
    def state(self):
        return self.optimizer.state

    @property
    def defaults(self):
        return self.optimizer.defaults

    def add_param_group(self, group):
        self.optimizer.add_param_group(group)

    def __repr__(self):
        return f"PrivateOptimizer({self.optimizer!r})"

    def __getstate__(self):
        return self.__dict__

    def __setstate__(self, state):
        self.__dict__.update(state)

    def zero_grad(self, set_to_none=True):
        self.optimizer.zero_grad(set_to_none=set_to_none)

    def state_dict(self):
        return self.optimizer.state_dict()

    def load_state_dict(self, state):
        self.optimizer.load_state_dict(state)

    # ---- the step -----------------------------------------------------------------------------
    def _check_trained(self):
        now = {name for name, p in self.module.named_parameters() if p.requires_grad}
        then = set(self.capture.trained)
        if now != then:
            changed = [f"'{n}' (now trained)" for n in sorted(now - then)] + \
                      [f"'{n}' (now frozen)" for n in sorted(then - now)]
            raise LoopMismatch(f"step {self.steps + 1}: requires_grad changed after make_private for "
                               f"{', '.join(changed)}: call make_private again after changing what is trained")

    def _part(self):
        if self.loader.draws == self._draws:
            raise LoopMismatch(f"step {self.steps + 1}: no batch was drawn from the loader make_private returned "
                               "since the last optimizer.step(): iterate that loader (not the original DataLoader), "
                               "one step per batch (or BatchMemoryManager's physical batches)")
        if self.loader.draws > self._draws + 1:
            raise LoopMismatch(f"step {self.steps + 1}: {self.loader.draws - self._draws} batches were drawn from "
                               "the private loader since the last optimizer.step(): call step() once per batch")
        self._draws = self.loader.draws
        return self.loader.part

    def _record(self, ids):
        records, stray = self.capture.take()
        step, B = self.steps + 1, ids.numel()
        if stray:
            raise LoopMismatch(f"step {step}: trained layer(s) {', '.join(map(repr, stray))} ran outside a call of "
                               "the model make_private was given (a submodule called directly?): the model's own "
                               "forward must compute the loss's outputs")
        if not records:
            if B:
                raise LoopMismatch(f"step {step}: no backward reached the model's outputs since the last "
                                   "optimizer.step() (loss.backward() not called, or the model called under "
                                   "torch.no_grad()): there is no gradient of the loop's to privatise")
            return None
        if len(records) > 1:
            raise LoopMismatch(f"step {step}: {len(records)} forward passes of the model were reached by a backward "
                               "since the last optimizer.step(): for gradient accumulation use "
                               "filkit.torch.BatchMemoryManager (one clip per example, one noise draw per logical "
                               "batch); a loss over several forwards of one batch is not supported")
        record = records[0]
        if record.backwards > 1:
            raise LoopMismatch(f"step {step}: {record.backwards} backward passes reached the model's outputs of one "
                               "forward (backward(retain_graph=True) twice?): one backward per forward")
        if record.input.shape[0] != B:
            raise LoopMismatch(f"step {step}: the model's forward received {record.input.shape[0]} examples, the "
                               f"private loader's current batch has {B}: the model must be applied to the batch the "
                               "loader yielded (transformed example by example if need be), not to another")
        return record

    def _sums(self, record, targets, ids, scale, checks):
        """(clipped sum, unclipped sum) of the examples' gradients of their own loss terms, flat; the
        checks of finite values are added to `checks` (the accountant makes its own)."""
        step = self.steps + 1
        if self.accountant is not None:
            random, nonsmooth = self.capture.operations()
            if random:
                raise LoopMismatch(RANDOM_REFUSAL.format(step=step, detail=", ".join(sorted(random))))
            self.accountant.graph_caveats = [GRAPH_CAVEAT.format(ops=", ".join(sorted(nonsmooth)))] if nonsmooth else []
            accounted = self.accountant.account(record.input, targets, ids, outputs=record.output,
                                                output_gradient=record.output_gradient, sums=True)
            return accounted.clipped_sum, accounted.gradient_sum
        checks.finite(record.input, ids, step, "the model's inputs")
        if record.output_gradient is not None:
            checks.finite(record.output_gradient, ids, step, "the gradients at the model's outputs")
        blocks = per_example_blocks(self.capture, record)
        trained = self.capture.trained
        first = next(iter(trained.values()))
        B = ids.numel()
        squared = torch.zeros(B, dtype=first.dtype, device=first.device)
        for block in blocks.values():
            squared = squared + block.squared_norms()
        norms = scale * squared.sqrt()
        checks.finite(norms[:, None], ids, step, "the per-example gradients")
        factor = (soft_clip_factor if self.clipping == "smooth" else hard_clip_factor)(norms, self.max_grad_norm)
        weights = torch.stack([factor * scale, torch.ones_like(factor)])  # clipped, and the sum check's
        clipped, unclipped = [], []
        for name, p in trained.items():
            if name in blocks:
                both = blocks[name].weighted_sums(weights)
            else:
                both = torch.zeros(2, *p.shape, dtype=p.dtype, device=p.device)
            clipped.append(both[0].reshape(-1))
            unclipped.append(both[1].reshape(-1))
        return torch.cat(clipped), torch.cat(unclipped) * scale

    def _verify(self, record, unclipped, scale, checks):
        """The per-example gradients must sum to what the loop's backward() added to .grad."""
        step = self.steps + 1
        offset = 0
        tolerance = sum_tolerance(unclipped)
        for name, p in self.capture.trained.items():
            mine = unclipped[offset:offset + p.numel()].view_as(p) / scale
            offset += p.numel()
            before = record.baseline[name]
            if p.grad is None:
                loop = torch.zeros_like(p)
            else:
                loop = p.grad.detach() if before is None else p.grad.detach() - before
            gap = (mine - loop).norm()
            size = loop.norm() + mine.norm()
            checks.add(gap <= tolerance * size + 1e-30 * p.numel(), lambda name=name, gap=gap, size=size: LoopMismatch(
                f"step {step}: the per-example gradients of parameter '{name}' do not sum to the gradient the "
                f"loop's backward() gave it (relative gap {float(gap / (size + 1e-300)):.3g}): it is used "
                "outside what the model's forward on the batch computes (a weight used in the loss, a second "
                "forward, a random or stateful operation, or a loss not reduced as loss_reduction = "
                f"{self.loss_reduction!r} says), so the loop's gradient cannot be privatised example by example"
                + (DDP_AVERAGED if self.loader.ranks and self.ddp is None else "")))

    def step(self, closure=None):
        if closure is not None:
            raise ValueError("step: a closure is not supported by private training (the gradient comes from the "
                             "loop's own forward and backward on the private loader's batch)")
        ranks = self.loader.ranks
        try:
            last = self._accumulate()
        except Exception as error:  # noqa: BLE001 - under torch.distributed every rank must hear of it
            if ranks is None:
                raise
            self._failure = self._failure or error
            last = self.loader.part is None or self.loader.part[3]
        if not last:
            return None  # a physical batch of BatchMemoryManager: the logical step comes with the last
        trained = self.capture.trained
        first = next(iter(trained.values()))
        total = self._pending if self._pending is not None else \
            torch.zeros(sum(p.numel() for p in trained.values()), dtype=first.dtype, device=first.device)
        self._pending = None
        self.noise = None
        if ranks is None or ranks.rank == 0:  # drawn once a step, by rank 0 under torch.distributed
            self.noise = self.noise_multiplier * self.max_grad_norm * torch.randn(
                total.numel(), generator=self.generator, dtype=first.dtype, device=first.device)
        if ranks is None:
            total = total + self.noise
        else:
            failure, self._failure = self._failure, None
            total = ranks.sum_step(self.steps + 1, total, self.noise, failure)
        mean = total / self.loader.batch_size
        offset = 0
        for p in trained.values():
            p.grad = mean[offset:offset + p.numel()].view_as(p).clone()
            offset += p.numel()
        if self.accountant is not None:
            self.accountant.finish_step()
        self.steps += 1
        return self.optimizer.step()

    def _accumulate(self):
        """This rank's part of the step: the loop's part of the batch checked, its clipped sum added
        to the pending one; whether it is the logical batch's last part."""
        self._check_trained()
        if self.accountant is None:
            check_module(self.module, accounting=False)  # (the accountant checks it when there is one)
        inputs, targets, ids, last = self._part()
        trained = self.capture.trained
        first = next(iter(trained.values()))
        p_total = sum(p.numel() for p in trained.values())
        record = self._record(ids)
        if record is None and self.ddp is not None:
            raise LoopMismatch(f"step {self.steps + 1}: no forward and backward of the model on this rank's batch: "
                               "under DistributedDataParallel every rank runs them on every batch the loader gives, "
                               "also on an empty one (DDP's forward takes part in collectives of all ranks)")
        if self._pending is None:
            self._pending = torch.zeros(p_total, dtype=first.dtype, device=first.device)
        if ids.numel():
            B = ids.numel()
            scale = float(B) if self.loss_reduction == "mean" else 1.0
            checks = Deferred()
            clipped, unclipped = self._sums(record, targets.to(first.device), ids, scale, checks)
            self._verify(record, unclipped, scale, checks)
            checks.resolve()
            self._pending += clipped
        return last


DDP_AVERAGED = ("; under DistributedDataParallel give make_private the DistributedDataParallel model itself, which "
                "it keeps from averaging the ranks' raw gradients in backward()")


def sum_tolerance(values):
    """How far (relative) the per-example gradients' sum may be from the loop's .grad by rounding
    alone: the two sum in different orders, and on a GPU the loop's convolutions and matrix
    products may run in TF32 (10 bits of mantissa, PyTorch's default for cuDNN convolutions). A
    gradient that is not the loop's is off by far more (a weight decay of 1e-2 in the loss: 0.1)."""
    if values.dtype == torch.float64:
        return 1e-8
    if values.dtype != torch.float32:
        return 5e-2  # half precision
    if values.device.type == "cuda" and (torch.backends.cudnn.allow_tf32 or torch.backends.cuda.matmul.allow_tf32):
        return 1e-2
    return 1e-4


SAMPLER_NOTE = ("make_private replaces the DataLoader's {what} with {how} at rate q = B/n = {q:.6g} "
                "({steps} steps an epoch, as Opacus); that is the sampling epsilon is accounted for")


def _announce_sampler(data_loader, poisson_sampling, q, steps):
    sampler = data_loader.sampler
    what = {torch.utils.data.RandomSampler: "shuffled sampler (shuffle=True)",
            torch.utils.data.SequentialSampler: "sequential sampler"}.get(type(sampler), type(sampler).__name__)
    if data_loader.drop_last:
        what += " and drop_last=True"
    how = "Poisson sampling (each example with probability q)" if poisson_sampling else \
        "batches of exactly B examples drawn without replacement every step"
    warnings.warn(SAMPLER_NOTE.format(what=what, how=how, q=q, steps=steps), UserWarning, stacklevel=3)


def _size(data_loader):
    """The number of examples of data_loader's dataset, or None where it has none."""
    try:
        return len(data_loader.dataset)
    except (AttributeError, TypeError):
        return None


def make_private(module, optimizer, data_loader, *, noise_multiplier, max_grad_norm, clipping="smooth",
                 poisson_sampling=True, account=True, seed=0, loss_fn=F.cross_entropy, loss_reduction="mean",
                 **accountant_options):
    """(module, optimizer, loader) doing DP-SGD on the gradient of the user's own loop
    (`for x, y in loader: loss(model(t(x)), y).backward(); optimizer.step()`), with
    optimizer.accountant the FilAccountant (None with account=False). loss_reduction: how the
    loop's loss reduces over the batch ('mean' or 'sum', Opacus' loss_reduction). loss_fn: the
    loop's loss of a batch, which the accountant differentiates twice (cross-entropy unless given;
    each step checks that it is the loss the loop's backward() took, on the loader's targets);
    not used with account=False. accountant_options go to FilAccountant (trace, probes, spectral,
    private, ...). An empty Poisson batch is yielded as tensors with no rows; optimizer.step()
    then releases noise alone.

    Under torch.distributed (K > 1 processes, the same call on every rank; docs/pytorch.md,
    "Several processes"): data_loader is over the whole training set and its batch_size is the
    expected batch size of a step over all ranks; each rank trains on its shard's part of every
    batch, the clipped sums are all-reduced, and the result is the one process's. A
    DistributedDataParallel module is returned as it is, its all-reduce of the raw gradients
    replaced (each rank's .grad stays its own)."""
    ranks = Ranks.current()
    if ranks:  # first, so that a refusal below is every rank's (the ranks run the same checks)
        ranks.agree(arguments_description(
            {**dict(noise_multiplier=noise_multiplier, max_grad_norm=max_grad_norm, clipping=clipping,
                    poisson_sampling=poisson_sampling, account=account, seed=seed, loss_fn=loss_fn,
                    loss_reduction=loss_reduction),
             **{k: v for k, v in accountant_options.items() if k != "memory_budget"},  # (may differ by machine)
             "the optimizer's type": type(optimizer).__name__, "data_loader's batch_size":
                 getattr(data_loader, "batch_size", None), "the training set's size": _size(data_loader),
             "data_loader's sampler": type(getattr(data_loader, "sampler", None)).__name__,
             "a DistributedDataParallel model": unwrap(module)[1] is not None}, module))
    noise_multiplier = positive("noise_multiplier", noise_multiplier)
    max_grad_norm = positive("max_grad_norm", max_grad_norm)
    noise_scale("max_grad_norm", max_grad_norm, noise_multiplier)
    seed = count("seed", seed, 0, 2 ** 63 - 3)  # (seed + 1 and seed + 2 seed the noise and the probes)
    choice("clipping", clipping, CLIPPINGS)
    choice("loss_reduction", loss_reduction, REDUCTIONS)
    if not isinstance(module, torch.nn.Module):
        raise ValueError(f"module: expected a torch.nn.Module, got {type(module).__name__}")
    if not isinstance(optimizer, torch.optim.Optimizer):
        raise ValueError(f"optimizer: expected a torch.optim.Optimizer, got {type(optimizer).__name__}")
    if not isinstance(data_loader, torch.utils.data.DataLoader):
        raise ValueError(f"data_loader: expected a torch.utils.data.DataLoader, got {type(data_loader).__name__}")
    if isinstance(data_loader.sampler, torch.utils.data.distributed.DistributedSampler):
        raise ValueError("data_loader: its sampler is a DistributedSampler, whose batch_size is a rank's; make_private "
                         "shards the data itself: give it a DataLoader over the whole training set whose batch_size "
                         "is the expected batch size of a step over all ranks (q = batch_size / n)")
    wrapped, (module, ddp) = module, unwrap(module)
    trained = {name: p for name, p in module.named_parameters() if p.requires_grad}
    if not trained:
        raise ValueError("module: no parameter requires grad, so there is nothing to train privately")
    optimized = {id(p) for group in optimizer.param_groups for p in group["params"]}
    missing = [name for name, p in trained.items() if id(p) not in optimized]
    if missing:
        raise ValueError(f"optimizer: it must optimize every parameter of the module that requires grad; it lacks "
                         f"{', '.join(map(repr, missing[:5]))}")
    # One stream for the batches (CPU) and one for the noise (the model's device), both from `seed`.
    batches = torch.Generator()
    batches.manual_seed(seed)
    device = next(iter(trained.values())).device
    noise = torch.Generator(device=device)
    noise.manual_seed(seed + 1)
    loader = PrivateLoader(data_loader, poisson_sampling, batches, ranks)
    _announce_sampler(data_loader, poisson_sampling, loader.sample_rate, len(loader))
    accountant = None
    if account:
        accountant = FilAccountant(module, loss_fn=loss_fn, clip_norm=max_grad_norm,
                                   noise_multiplier=noise_multiplier, sample_rate=loader.sample_rate,
                                   clipping=clipping, num_examples=loader.n, seed=seed + 2,
                                   sampling="poisson" if poisson_sampling else "uniform",
                                   loss_reduction=loss_reduction, **accountant_options)
    else:
        check_module(module, accounting=False)
    capture = LoopCapture(module, trained, per_layer=not account)
    private = PrivateOptimizer(optimizer, module, loader, capture, noise_multiplier=noise_multiplier,
                               max_grad_norm=max_grad_norm, clipping=clipping, loss_reduction=loss_reduction,
                               accountant=accountant, generator=noise, ddp=ddp)
    if ddp is not None:
        keep_gradients_local(ddp)
    return wrapped, private, loader
