"""make_private: DP-SGD with Opacus' names and call shape, and the FIL accountant on the side
(docs/pytorch.md, "make_private").

The returned loader samples the batches (Poisson at rate q = B/n, or exactly B uniformly at random
every step) and remembers the current one; the returned optimizer's step() ignores the gradient the
user's loss.backward() left and instead, from that batch: per-example gradients by vmap(grad), the
clip (smooth by default, or Opacus' hard rule), their sum plus N(0, sigma^2 C^2 I) from a seeded
generator, divided by the expected batch size B (Opacus' rule, docs/mathematics.md section 7.1),
written into .grad before the wrapped optimizer's own step. The accountant (optimizer.accountant)
steps first, at the parameters the gradient is taken at, and with its Gaussian trace the clipped sum
comes from the same per-example gradients (FilAccountant.step_and_clip).
"""
import torch
import torch.nn.functional as F

from .accountant import CLIPPINGS, FilAccountant, _choice, _positive
from .functional import ClippedGradient, split_parameters
from .layers import check_module


class PrivateLoader:
    """Batches of data_loader's dataset, sampled privately; `current` holds the last batch's
    (inputs, targets, example ids)."""

    def __init__(self, data_loader, poisson_sampling, generator):
        self.dataset, self.collate_fn = data_loader.dataset, data_loader.collate_fn
        self.batch_size = data_loader.batch_size
        self.n = len(self.dataset)
        if self.batch_size is None or not 1 <= self.batch_size <= self.n:
            raise ValueError(f"data_loader: batch_size = {self.batch_size}: must be between 1 and the dataset's "
                             f"size {self.n}")
        self.sample_rate = self.batch_size / self.n
        self.poisson_sampling, self.generator = poisson_sampling, generator
        self.current = None

    def __len__(self):
        return max(1, round(1.0 / self.sample_rate))  # steps per epoch, as Opacus

    def _indices(self):
        if self.poisson_sampling:
            return torch.nonzero(torch.rand(self.n, generator=self.generator) < self.sample_rate).flatten()
        return torch.randperm(self.n, generator=self.generator)[:self.batch_size].sort().values

    def __iter__(self):
        for _ in range(len(self)):
            ids = self._indices()
            if ids.numel() == 0:  # an empty Poisson batch: the step releases noise alone
                self.current = None
                yield None, None
                continue
            inputs, targets = self.collate_fn([self.dataset[int(i)] for i in ids])[:2]
            self.current = (inputs, targets, ids)
            yield inputs, targets


class PrivateOptimizer(torch.optim.Optimizer):
    """Wraps the user's optimizer: step() writes the noisy clipped mean gradient into .grad first.
    An Optimizer (for learning-rate schedulers) whose param_groups, state and defaults are the
    wrapped one's; Optimizer.__init__ is not called, since it would make groups of its own."""

    def __init__(self, optimizer, module, loader, *, loss_fn, noise_multiplier, max_grad_norm, clipping,
                 accountant, generator):
        self.optimizer, self.module, self.loader = optimizer, module, loader
        self.loss_fn, self.noise_multiplier, self.max_grad_norm = loss_fn, noise_multiplier, max_grad_norm
        self.clipping, self.accountant, self.generator = clipping, accountant, generator
        self.noise = None  # the last step's N(0, sigma^2 C^2 I) draw, flat in named_parameters order

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

    def clipped_sum(self, inputs, targets):
        params, constants = split_parameters(self.module)
        first = next(iter(params.values()))
        x = inputs.to(device=first.device, dtype=first.dtype)
        g = ClippedGradient(self.module, self.loss_fn, self.max_grad_norm, self.clipping, x.shape[1:])
        return g.clipped(params, constants, x.reshape(x.shape[0], -1), targets.to(first.device)).sum(0)

    def step(self, closure=None):
        if closure is not None:
            raise ValueError("step: a closure is not supported by private training (the gradient comes from the "
                             "loader's batch)")
        trained = [p for p in self.module.parameters() if p.requires_grad]
        p_total = sum(p.numel() for p in trained)
        batch = self.loader.current
        first = trained[0]
        if batch is None:
            if self.accountant is not None:
                self.accountant.empty_step()
            total = torch.zeros(p_total, dtype=first.dtype, device=first.device)
        elif self.accountant is not None:
            total = self.accountant.step_and_clip(*batch)[1]
        else:
            total = self.clipped_sum(*batch[:2])
        self.noise = self.noise_multiplier * self.max_grad_norm * torch.randn(
            p_total, generator=self.generator, dtype=first.dtype, device=first.device)
        mean = (total + self.noise) / self.loader.batch_size
        offset = 0
        for p in trained:
            p.grad = mean[offset:offset + p.numel()].view_as(p).clone()
            offset += p.numel()
        return self.optimizer.step()


def make_private(module, optimizer, data_loader, *, noise_multiplier, max_grad_norm, clipping="smooth",
                 poisson_sampling=True, account=True, seed=0, loss_fn=F.cross_entropy, **accountant_options):
    """(module, optimizer, loader) doing DP-SGD in the user's unchanged loop
    (`for x, y in loader: loss_fn(module(x), y).backward(); optimizer.step()`), with
    optimizer.accountant the FilAccountant (None with account=False). loss_fn is the loss the
    per-example gradients are taken of (cross-entropy by default); accountant_options go to
    FilAccountant (trace, probes, spectral, private, ...). An empty Poisson batch is yielded as
    (None, None): skip the forward and backward, still call optimizer.step() (it releases noise)."""
    _positive("noise_multiplier", noise_multiplier)
    _positive("max_grad_norm", max_grad_norm)
    _choice("clipping", clipping, CLIPPINGS)
    if not isinstance(optimizer, torch.optim.Optimizer):
        raise ValueError(f"optimizer: expected a torch.optim.Optimizer, got {type(optimizer).__name__}")
    if not isinstance(data_loader, torch.utils.data.DataLoader):
        raise ValueError(f"data_loader: expected a torch.utils.data.DataLoader, got {type(data_loader).__name__}")
    optimized = {id(p) for group in optimizer.param_groups for p in group["params"]}
    if any(id(p) not in optimized for p in module.parameters() if p.requires_grad):
        raise ValueError("optimizer: it must optimize every parameter of the module that requires grad")
    # One stream for the batches (CPU) and one for the noise (the model's device), both from `seed`.
    batches = torch.Generator()
    batches.manual_seed(seed)
    device = next(module.parameters()).device
    noise = torch.Generator(device=device)
    noise.manual_seed(seed + 1)
    loader = PrivateLoader(data_loader, poisson_sampling, batches)
    accountant = None
    if account:
        accountant = FilAccountant(module, loss_fn=loss_fn, clip_norm=max_grad_norm,
                                   noise_multiplier=noise_multiplier, sample_rate=loader.sample_rate,
                                   clipping=clipping, num_examples=loader.n, seed=seed + 2,
                                   sampling="poisson" if poisson_sampling else "uniform", **accountant_options)
    else:
        check_module(module)
    private = PrivateOptimizer(optimizer, module, loader, loss_fn=loss_fn, noise_multiplier=noise_multiplier,
                               max_grad_norm=max_grad_norm, clipping=clipping, accountant=accountant,
                               generator=noise)
    return module, private, loader
