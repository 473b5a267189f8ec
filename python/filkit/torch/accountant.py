"""FilAccountant: per-example Fisher information loss of the DP-SGD steps of a user's own model
(docs/pytorch.md; the mathematics is docs/mathematics.md, sections 7.2-7.11).

Every step adds, for each batch member z, Tr(G^T G) / (sigma C)^2 at the current parameters
(G = d g~(z) / d z, the clipped per-example gradient's Jacobian about the private coordinates);
the subsampling factor kappa (Theorem 4) is a constant of the run, applied when the accountant is
read, so that its delta can default to filkit dpsgd's 1/(n T) with the T actually taken.

The accounting of the traces is pure PyTorch; epsilon, rdp and write_summary use filkit's compiled
module (its RDP and PLD accountants), or where it is missing its stand-in (library()).
"""
import math
import time

import numpy as np
import torch

from .functional import (SOFT_CLIP_NORM_BOUND, BatchedClippedGradients, ClippedGradient, factorable_linears,
                         split_parameters, verify_factored)
from .layers import check_module
from .loss import REDUCTIONS, ExpandedLoss, LossExpansion
from .checks import (AccountedBatch, Deferred, LoopMismatch, check_output_gradient, paused,
                     vmap_refusals, refuse_nonfinite)
from .._standalone import library
from .arguments import choice, count, noise_scale, positive
from .state import checked_state, state_error
from .distributed import Ranks, arguments_description, gather_step, seed_of_rank, unwrap

CLIPPINGS = ("smooth", "hard")
TRACES = ("gaussian", "exact")
PRIVATE = ("input", "input+label")
SUBSAMPLING = ("amplified", "one")
# Copies of an example's activations (its leaf modules' outputs) a lane holds (_chunk_sizes).
ACTIVATION_COPIES = 4
# (example, basis vector) lanes x (p + d_z) elements per chunk of the exact trace on the CPU.
EXACT_CPU_CHUNK_ELEMENTS = 2 ** 21
# How the batches are drawn (filkit dpsgd's --sampling names) and the accountant of epsilon.
SAMPLINGS = ("poisson", "uniform", "shuffle")
ACCOUNTANTS = ("rdp", "pld")


class FilAccountant:
    """Per-example FIL of DP-SGD on `model`: call step(inputs, targets, example_ids) with every
    batch, before the optimizer's step (the Jacobians are taken at the parameters the step's
    gradient is taken at).

    loss_fn(outputs, targets) is the loss of a batch, reduced over it as loss_reduction says
    ('mean', the default, or 'sum', Opacus' names): each example's term is read off it (loss.py;
    any loss autograd differentiates twice, label smoothing included; one that couples the
    examples is refused). clip_norm C, noise_multiplier sigma (noise std sigma C on the clipped sum) and
    sample_rate q (B/n) describe the training run. trace: 'gaussian' (probes Gaussian probes of
    the parameter side, unbiased) or 'exact' (min(d_z, p) products per example). spectral=True
    also estimates ||G||_2^2 by power_iterations power iterations (from below), giving eta.
    private: 'input' or 'input+label' (the one-hot label too; loss_fn must accept class
    probabilities as targets, as torch.nn.functional.cross_entropy does). sampling: how the
    batches are drawn, which fixes the neighbouring relation epsilon is stated for (filkit dpsgd's
    names): 'poisson' (each example with probability q; add/remove one), 'uniform' (B of n without
    replacement every step, q = B/n; replace one) or 'shuffle' (the default, a shuffled DataLoader:
    epochs of a permutation, which no accountant covers; accounted as Poisson at rate q, and the
    summary says so). accountant: 'rdp' or 'pld', the one epsilon() uses. num_examples n: the
    training set's size (default: the largest example id seen + 1). memory_budget: bytes of
    per-example work held at once (an estimate; batches are cut into chunks to fit).
    snapshot_every: steps between automatic snapshots for the report ('epoch', the default, is
    1/q steps; None keeps none but those record() takes).

    Under torch.distributed (K > 1 processes; a DistributedDataParallel model is unwrapped) every
    rank steps with its own examples, and each step's per-example sums are gathered on every rank
    (finish_step): dfil(), epsilon() and write_summary() describe all ranks' examples. The ranks'
    settings and models must agree (RanksDisagree otherwise); their probes come from streams of
    their own (distributed.py).
    """

    def __init__(self, model, *, loss_fn, clip_norm, noise_multiplier, sample_rate, clipping="smooth",
                 trace="gaussian", probes=1, spectral=False, power_iterations=20, private="input",
                 sampling="shuffle", accountant="rdp", subsampling="amplified", kappa_delta=None, num_examples=None,
                 memory_budget=2 ** 30, seed=0, loss_reduction="mean", snapshot_every="epoch"):
        self.graph_caveats = []  # operations found in the loop's graph (make_private): graph_caveats()
        # Several processes: the ranks agree on the arguments first, so that a refusal is every rank's
        # (memory_budget may differ between machines).
        self.ranks = Ranks.current()
        if self.ranks:
            arguments = {k: v for k, v in locals().items() if k not in ("self", "model", "memory_budget")}
            self.ranks.agree(arguments_description(arguments, model))
        model, _ = unwrap(model)
        self.caveats = check_module(model)
        if not callable(loss_fn):
            raise ValueError(f"loss_fn: expected a callable loss(outputs, targets), got {type(loss_fn).__name__}")
        clip_norm = positive("clip_norm", clip_norm)
        noise_multiplier = positive("noise_multiplier", noise_multiplier)
        sample_rate = positive("sample_rate", sample_rate, upper=1.0)
        noise_scale("clip_norm", clip_norm, noise_multiplier)
        seed = count("seed", seed, 0)
        choice("clipping", clipping, CLIPPINGS)
        choice("trace", trace, TRACES)
        choice("private", private, PRIVATE)
        choice("subsampling", subsampling, SUBSAMPLING)
        choice("sampling", sampling, SAMPLINGS)
        choice("accountant", accountant, ACCOUNTANTS)
        choice("loss_reduction", loss_reduction, REDUCTIONS)
        if snapshot_every == "epoch":
            snapshot_every = 1.0 / sample_rate
        elif snapshot_every is not None:
            positive("snapshot_every", snapshot_every)
        probes = count("probes", probes, 1, 10 ** 6)
        power_iterations = count("power_iterations", power_iterations, 1, 10 ** 6)
        if kappa_delta is not None and not (isinstance(kappa_delta, (int, float)) and 0 < kappa_delta < 1):
            raise ValueError(f"kappa_delta = {kappa_delta!r}: must be in (0, 1), or None for 1/(n T)")
        if num_examples is not None:
            num_examples = count("num_examples", num_examples, 1)
        memory_budget = positive("memory_budget", memory_budget)
        if not any(p.requires_grad for p in model.parameters()):
            raise ValueError("model: no parameter requires grad, so there is no gradient to account")
        self.model, self.loss_fn = model, loss_fn
        self.settings = dict(clip_norm=float(clip_norm), noise_multiplier=float(noise_multiplier),
                             sample_rate=float(sample_rate), clipping=clipping, trace=trace, probes=probes,
                             spectral=bool(spectral), power_iterations=power_iterations, private=private,
                             sampling=sampling, accountant=accountant, subsampling=subsampling,
                             kappa_delta=kappa_delta, seed=seed, loss_reduction=loss_reduction)
        self.snapshot_every = snapshot_every
        self._in_progress = False  # a step accounted in part (account() without finish_step())
        self.num_examples = num_examples
        self.memory_budget = memory_budget
        self.steps = 0
        self.seconds = 0.0  # wall time in step()
        self.private_dims = None
        self.private_dims_label = None  # K with a private label
        self.parameter_count = sum(p.numel() for p in model.parameters() if p.requires_grad)
        # Sums over steps of Tr(G^T G) / (sigma C)^2 and ||G||^2 / (sigma C)^2 (kappa not applied), per example.
        self._trace = torch.zeros(0, dtype=torch.float64)
        self._spectral = torch.zeros(0, dtype=torch.float64)
        self._sampled = torch.zeros(0, dtype=torch.float64)
        self._labels = torch.zeros(0, dtype=torch.float64)  # class indices as seen (NaN: never seen)
        # The probes' generator, made at the first step (_new_generator).
        self._generator = None
        # The dense layers held in factors, by (trained parameters, input shape, private label):
        # verified on the first example of the first batch of that kind (verify_factored).
        self._factored = {}
        self._activations = {}  # input shape -> an example's activation elements (_activation_elements)
        self.snapshots = []
        # Several processes: this rank's probes' seed and its sums of the step in progress.
        self._seed = seed_of_rank(seed, self.ranks.rank if self.ranks else 0)
        self._step_parts = []

    # ---- accounting -------------------------------------------------------------------------
    def _device_and_dtype(self):
        p = next(p for p in self.model.parameters() if p.requires_grad)
        return p.device, p.dtype

    def _private_coordinates(self, inputs, targets, outputs, dtype, device):
        """Z (B x d_z), the one-hot labels (None unless the label is private) and K."""
        batch = inputs.shape[0]
        Z = inputs.to(device=device, dtype=dtype).reshape(batch, -1)
        if self.settings["private"] == "input":
            return Z, None, None
        num_classes = outputs.reshape(batch, -1).shape[1]
        if targets.dtype.is_floating_point or targets.dim() != 1:
            raise ValueError("private = 'input+label': targets must be class indices (a 1-d integer tensor)")
        if batch and (int(targets.min()) < 0 or int(targets.max()) >= num_classes):
            raise ValueError(f"private = 'input+label': a target is not a class index in 0..{num_classes - 1}")
        onehot = torch.nn.functional.one_hot(targets.long(), num_classes).to(dtype)
        return torch.cat([Z, onehot], 1), onehot, num_classes

    def _ids(self, example_ids, batch):
        ids = torch.as_tensor(np.asarray(example_ids.cpu() if isinstance(example_ids, torch.Tensor) else example_ids))
        if ids.dim() != 1 or ids.numel() != batch or ids.dtype.is_floating_point or ids.dtype == torch.bool:
            raise ValueError(f"example_ids: expected {batch} integer ids (one per example of the batch), got "
                             f"shape {tuple(ids.shape)} of {ids.dtype}")
        ids = ids.long()
        if batch and ids.min() < 0:
            raise ValueError(f"example_ids: ids must be >= 0, got {int(ids.min())}")
        if ids.unique().numel() != batch:
            raise ValueError("example_ids: an id appears twice in one batch")
        if self.num_examples is not None and batch and ids.max() >= self.num_examples:
            raise ValueError(f"example_ids: id {int(ids.max())} is not below num_examples = {self.num_examples}")
        return ids

    def _grow(self, size):
        """The per-example sums up to example id size - 1 (four float64 vectors), within memory_budget."""
        if size > self._trace.numel() and 4 * 8 * size > self.memory_budget:
            raise ValueError(f"example id {size - 1} needs the per-example sums of {size} examples (4 vectors of "
                             f"float64, {4 * 8 * size / 2 ** 20:.1f} MiB) beyond memory_budget = "
                             f"{self.memory_budget / 2 ** 20:.1f} MiB: give example ids from 0 to n - 1 "
                             "(with_example_ids does), or a larger memory_budget")
        if size > self._trace.numel():
            pad = lambda t: torch.cat([t, torch.zeros(size - t.numel(), dtype=torch.float64)])
            self._trace, self._spectral, self._sampled = pad(self._trace), pad(self._spectral), pad(self._sampled)
            self._labels = torch.cat([self._labels, torch.full((size - self._labels.numel(),), math.nan,
                                                               dtype=torch.float64)])

    def _activation_elements(self, x):
        """The elements of every leaf module's output in a forward of one example (x: a batch of
        one), kept by input shape: the activations a lane holds through the double backward."""
        key = tuple(x.shape[1:])
        if key not in self._activations:
            counted = [0]

            def count(module, args, output):
                if isinstance(output, torch.Tensor):
                    counted[0] += output.numel()

            handles = [m.register_forward_hook(count) for m in self.model.modules() if not list(m.children())]
            try:
                with torch.no_grad(), paused(self.model):
                    self.model(x)
            finally:
                for handle in handles:
                    handle.remove()
            self._activations[key] = counted[0]
        return self._activations[key]

    def _chunk_sizes(self, batch, p, d_z, element_size, device, activations=0):
        """Examples and basis vectors per chunk: each (example, probe) lane holds a few copies of the
        gradient and of z and about ACTIVATION_COPIES of the example's activations through the
        double and triple backward (an estimate: 16 (p + d_z) + 4 a elements; the 32-channel
        convolution of 128 x 128 images took 13.3 MiB an example, the estimate 16.8). A lane over
        memory_budget is refused with its estimate. On the CPU the exact trace's chunks also stay
        near EXACT_CPU_CHUNK_ELEMENTS, which keeps its tensors in cache (the MNIST ConvNet's exact
        trace: 1.2 s for 4 examples at 78 basis vectors a chunk, 3.0 s at 313)."""
        lane = element_size * (16 * (p + d_z) + ACTIVATION_COPIES * activations)
        if lane > self.memory_budget:
            raise ValueError(f"memory_budget = {self.memory_budget / 2 ** 20:.1f} MiB: one example's accounting "
                             f"needs about {lane / 2 ** 20:.1f} MiB ({p} parameters, {d_z} private coordinates, "
                             f"{activations} activations); give a larger memory_budget")
        lanes = max(1, int(self.memory_budget // lane))
        if self.settings["trace"] == "gaussian":
            return max(1, min(batch, lanes)), 1
        if device.type == "cpu":
            lanes = min(lanes, max(1, EXACT_CPU_CHUNK_ELEMENTS // (p + d_z)))
        width = min(p, d_z)
        examples = max(1, min(batch, lanes // width))
        return examples, max(1, min(width, lanes // examples))

    def step(self, inputs, targets, example_ids, per_sample_gradients=None):
        """Account one batch at the model's current parameters; returns the batch's per-example
        Tr(G^T G) / (sigma C)^2 (a CPU float64 tensor, kappa not applied). per_sample_gradients:
        the per-example gradients the user's DP-SGD clips (Opacus' grad_sample: pass
        "grad_sample" to read each trained parameter's .grad_sample; or a dict by parameter name, a
        list in named_parameters() order of B x (shape) tensors, or one B x p tensor): the
        accountant's own per-example gradients must equal them (LoopMismatch otherwise), so that
        what it accounts is what was privatised."""
        trace = self.account(inputs, targets, example_ids, per_sample_gradients=per_sample_gradients).trace
        self.finish_step()
        return trace

    def step_and_clip(self, inputs, targets, example_ids):
        """step(), and the batch's sum of clipped gradients (flat in the order of the trained
        parameters) from the same per-example gradients."""
        accounted = self.account(inputs, targets, example_ids, sums=True)
        self.finish_step()
        return accounted.trace, accounted.clipped_sum

    def account(self, inputs, targets, example_ids, *, outputs=None, output_gradient=None, sums=False,
                per_sample_gradients=None):
        """Add these examples' FIL to the step in progress (finish_step() ends it; a logical batch
        may be accounted in several physical parts). outputs: the model's outputs on `inputs` as
        the loop computed them (else one forward here, without a graph); output_gradient: the
        gradient the loop's backward() put at them, which must be loss_fn's (else LoopMismatch).
        Returns an AccountedBatch: the traces and, with sums, the sums of the clipped and of the
        unclipped per-example gradients."""
        began = time.perf_counter()
        self.caveats = check_module(self.model) + list(self.graph_caveats)
        if not isinstance(inputs, torch.Tensor) or not isinstance(targets, torch.Tensor):
            raise ValueError("step: inputs and targets must be tensors")
        if inputs.dim() < 2 or targets.shape[:1] != inputs.shape[:1]:
            raise ValueError(f"step: inputs {tuple(inputs.shape)} and targets {tuple(targets.shape)} must share the "
                             "batch dimension (the first)")
        batch = inputs.shape[0]
        ids = self._ids(example_ids, batch)
        step = self.steps + 1
        device, dtype = self._device_and_dtype()
        if batch == 0:
            self._in_progress = True
            self.seconds += time.perf_counter() - began
            p = self.parameter_count
            empty = torch.zeros(p, dtype=dtype, device=device) if sums else None
            return AccountedBatch(torch.zeros(0, dtype=torch.float64), empty, empty)
        checks = Deferred()  # read back together before the per-example work
        checks.finite(inputs, ids, step, "inputs")
        labels = targets.detach().double().cpu() if targets.dim() == 1 else torch.full((batch,), math.nan)
        targets = targets.to(device)
        x = inputs.to(device=device, dtype=dtype)
        input_dims = x[0].numel()
        if self.private_dims is not None and input_dims != self.private_dims - (self.private_dims_label or 0):
            raise ValueError(f"step: examples have {input_dims} input coordinates, earlier batches had "
                             f"{self.private_dims - (self.private_dims_label or 0)}")
        if outputs is None:
            with torch.no_grad(), paused(self.model):
                outputs = self.model(x)
        checks.finite(outputs, ids, step, "the model's outputs")
        Z, onehot, num_classes = self._private_coordinates(x, targets, outputs, dtype, device)
        d_z = Z.shape[1]
        if self.private_dims is not None and d_z != self.private_dims:
            raise ValueError(f"step: examples have {d_z} private coordinates, earlier batches had {self.private_dims}")
        self.private_dims, self.private_dims_label = d_z, num_classes
        expansion = LossExpansion(self.loss_fn, outputs, targets, self.settings["loss_reduction"], onehot,
                                  check_example=self.steps, checks=checks)
        if output_gradient is not None:
            check_output_gradient(expansion, output_gradient, ids, step, checks)
        checks.resolve()
        if self._generator is None:
            self._generator = self._new_generator(device, dtype)
        g = ClippedGradient(self.model, ExpandedLoss(), self.settings["clip_norm"], self.settings["clipping"],
                            inputs.shape[1:], num_classes)
        params, constants = split_parameters(self.model)
        p = self.parameter_count
        given = None if per_sample_gradients is None else self._given_gradients(per_sample_gradients, params, batch)
        examples, basis = self._chunk_sizes(batch, p, d_z, Z.element_size(), device,
                                            self._activation_elements(x[:1]))
        trace = torch.zeros(batch, dtype=torch.float64)
        spectral = torch.zeros(batch, dtype=torch.float64)
        clipped = torch.zeros(p, dtype=dtype, device=device) if sums else None
        unclipped = torch.zeros(p, dtype=dtype, device=device) if sums else None
        with paused(self.model), vmap_refusals(step):
            for start in range(0, batch, examples):
                rows = slice(start, min(batch, start + examples))
                z, y = Z[rows], expansion.rows(rows)
                compare = None if given is None else \
                    lambda mine, rows=rows: self._compare(mine, given[rows], ids[rows], step)
                chunk_trace, chunk_sums = self._trace_of(g, params, constants, z, y, p, basis, sums, compare)
                trace[rows] = chunk_trace.double().cpu()
                if sums:
                    clipped += chunk_sums[0]
                    unclipped += chunk_sums[1]
                if self.settings["spectral"]:
                    spectral[rows] = self._spectral_of(g, params, constants, z, y, p).double().cpu()
        scale = (self.settings["noise_multiplier"] * self.settings["clip_norm"]) ** 2
        trace /= scale
        spectral /= scale
        refuse_nonfinite("traces", trace, ids, step, what="the per-example Fisher information traces")
        self.add_traces(ids, trace, spectral, labels.double())
        if self.ranks:
            self._step_parts.append((ids, trace, spectral, labels.double()))
        self._in_progress = True
        self.seconds += time.perf_counter() - began
        return AccountedBatch(trace, clipped, unclipped)

    def add_traces(self, ids, trace, spectral, labels):
        """Add examples' traces of the step in progress to their sums, as account() does with its
        own: ids (integers, distinct within the step), each example's Fisher information trace and
        spectral norm (float64, already divided by the noise's variance (noise_multiplier *
        clip_norm)^2) and label (float64, NaN for a target that is not a class label). Under
        torch.distributed, finish_step adds the other ranks' examples so (distributed.gather_step)."""
        sizes = [t.shape for t in (ids, trace, spectral, labels)]
        if any(len(size) != 1 for size in sizes) or len(set(sizes)) != 1:
            raise ValueError(f"add_traces: ids, trace, spectral and labels must be vectors of one length, not of "
                             f"shapes {', '.join(str(tuple(size)) for size in sizes)}")
        if ids.numel() == 0:
            return
        self._grow(int(ids.max()) + 1)
        self._trace.index_add_(0, ids, trace)
        self._spectral.index_add_(0, ids, spectral)
        self._sampled.index_add_(0, ids, torch.ones(ids.numel(), dtype=torch.float64))
        self._labels[ids] = labels

    def finish_step(self):
        """End the step in progress (one logical batch, accounted in one or more parts; a step whose
        Poisson batch was empty released noise alone: no FIL, but a step for the accountants and
        kappa_delta's T). With snapshot_every, keeps a snapshot each time the step count crosses a
        multiple of it (an epoch, 1/q steps, by default). Under torch.distributed every rank's
        sums of the step are gathered first (a collective: every rank calls it)."""
        if self.ranks:
            parts, self._step_parts = self._step_parts, []
            gather_step(self, parts)
        self.steps += 1
        self._in_progress = False
        every = self.snapshot_every
        if every and math.floor(self.steps / every) > math.floor((self.steps - 1) / every):
            self.record()

    def empty_step(self):
        """A step whose (Poisson) batch was empty: it released noise alone, so it adds no FIL but
        counts for the RDP accountant and for kappa_delta's T."""
        self.finish_step()

    def _new_generator(self, device, dtype):
        """NumPy's PCG64 (ziggurat normals) for a float64 model on the CPU, where torch.randn is 1.5
        times slower; torch's generator on the model's device otherwise (on the CPU in float32
        torch.randn is 2.4 times faster than NumPy's)."""
        if device.type == "cpu" and dtype == torch.float64:
            return np.random.Generator(np.random.PCG64(self._seed))
        generator = torch.Generator(device=device)
        generator.manual_seed(self._seed)
        return generator

    def _normal(self, shape, like):
        """N(0, I) of this shape, in like's dtype and on its device, from the accountant's generator."""
        if isinstance(self._generator, np.random.Generator):
            single = like.dtype == torch.float32
            draws = self._generator.standard_normal(shape, dtype=np.float32 if single else np.float64)
            return torch.from_numpy(draws).to(like.dtype)
        return torch.randn(shape, generator=self._generator, device=like.device, dtype=like.dtype)

    def _given_gradients(self, given, params, batch):
        """The user's per-sample gradients as one B x p tensor in the trained parameters' order."""
        trained = [(n, t) for n, t in self.model.named_parameters() if t.requires_grad]
        if isinstance(given, str) and given == "grad_sample":
            missing = [n for n, t in trained if getattr(t, "grad_sample", None) is None]
            if missing:
                raise ValueError(f"per_sample_gradients = 'grad_sample': parameter(s) {', '.join(map(repr, missing))} "
                                 "have no .grad_sample (Opacus' GradSampleModule sets it in the backward)")
            given = [t.grad_sample for _, t in trained]
        if isinstance(given, dict):
            missing = [n for n, _ in trained if n not in given]
            if missing:
                raise ValueError(f"per_sample_gradients: no entry for {', '.join(map(repr, missing))}")
            given = [given[n] for n, _ in trained]
        if isinstance(given, (list, tuple)):
            if len(given) != len(trained):
                raise ValueError(f"per_sample_gradients: {len(given)} tensors for {len(trained)} trained parameters")
            for (name, t), v in zip(trained, given):
                if not isinstance(v, torch.Tensor) or tuple(v.shape) != (batch, *t.shape):
                    raise ValueError(f"per_sample_gradients['{name}']: expected shape {(batch, *tuple(t.shape))}, got "
                                     f"{tuple(v.shape) if isinstance(v, torch.Tensor) else type(v).__name__}")
            given = torch.cat([v.detach().reshape(batch, -1) for v in given], 1)
        if not isinstance(given, torch.Tensor) or tuple(given.shape) != (batch, self.parameter_count):
            raise ValueError(f"per_sample_gradients: expected 'grad_sample', a dict, a list or a {batch} x "
                             f"{self.parameter_count} tensor, got {type(given).__name__}"
                             + (f" of shape {tuple(given.shape)}" if isinstance(given, torch.Tensor) else ""))
        first = next(iter(params.values()))
        return given.detach().to(device=first.device, dtype=first.dtype)

    def _compare(self, mine, given, ids, step):
        """The accountant's per-example gradients (B x p) against the user's."""
        tolerance = 1e-8 if mine.dtype == torch.float64 else 1e-3
        gap = (mine - given).norm(dim=1)
        size = mine.norm(dim=1) + given.norm(dim=1)
        bad = ~(gap <= tolerance * size + 1e-30)
        if bool(bad.any()):
            rows = torch.nonzero(bad.cpu()).flatten()
            worst = int(rows[0])
            listed = ", ".join(str(int(ids[r])) for r in rows[:8])
            raise LoopMismatch(
                f"step {step}: the per-sample gradients given for example id(s) {listed} are not the gradients of "
                f"loss_fn at these inputs (relative gap {float(gap[worst] / (size[worst] + 1e-300)):.3g}): the "
                "accountant would account another gradient "
                "than the one privatised (inputs transformed after the accountant's step, another loss or reduction, "
                "other parameters)")

    def _trace_of(self, g, params, constants, z, y, p, basis, sums, compare=None):
        """A chunk's Tr(G^T G) per example, and (sums) its sums of clipped and unclipped gradients;
        compare(per-example gradients) checks them against the user's."""
        b, d_z = z.shape
        if self.settings["trace"] == "gaussian":  # (1/m) sum_j |G^T u_j|^2, u_j ~ N(0, I_p) (section 7.8)
            batched = BatchedClippedGradients(g, params, constants, z, y, self._factored_linears(g, params, constants, z, y))
            if compare is not None:
                compare(batched.gradients())
            total = torch.zeros(b, dtype=z.dtype, device=z.device)
            probes = self.settings["probes"]
            normal = lambda shape: self._normal(shape, z)
            for j in range(probes):
                total += batched.gaussian_transpose_products(normal, retain_graph=j + 1 < probes).pow(2).sum(1)
            return total / probes, (batched.clipped_sum(), batched.gradient_sum()) if sums else None
        # Exact: |G|_F^2 from the columns G e_k (d_z <= p) or the rows G^T e_j, whichever are fewer.
        transpose = p < d_z
        width = p if transpose else d_z
        total = torch.zeros(b, dtype=z.dtype, device=z.device)
        for start in range(0, width, basis):
            k = min(width, start + basis) - start
            E = torch.zeros(k, width, dtype=z.dtype, device=z.device)
            E[torch.arange(k), torch.arange(start, start + k)] = 1.0
            total += g.basis_products(params, constants, z, y, E, p, transpose).pow(2).sum((1, 2))
        if not sums and compare is None:
            return total, None
        with torch.no_grad():
            batched = BatchedClippedGradients(g, params, constants, z, y)
        if compare is not None:
            compare(batched.gradients())
        return total, (batched.clipped_sum(), batched.gradient_sum()) if sums else None

    def _factored_linears(self, g, params, constants, z, y):
        """The dense layers whose per-example gradients are held in factors (functional.py)."""
        key = (tuple(params), g.input_shape, g.num_classes)
        if key not in self._factored:
            self._factored[key] = verify_factored(g, params, constants, factorable_linears(self.model, params),
                                                  z[0], tuple(t[0] for t in y) if isinstance(y, tuple) else y[0])
        return self._factored[key]

    def _spectral_of(self, g, params, constants, z, y, p):
        """|G v|^2 after power iterations v <- G^T G v / |G^T G v| from a Gaussian start (section 7.8)."""
        v = self._normal(z.shape, z)
        v = v / v.norm(dim=1, keepdim=True)
        for _ in range(self.settings["power_iterations"]):
            w = g.products(params, constants, z, y, v, p)
            v_next = g.transpose_products(params, constants, z, y, w)
            norm = v_next.norm(dim=1, keepdim=True)
            v = torch.where(norm > 0, v_next / torch.where(norm > 0, norm, torch.ones_like(norm)), v)
        return g.products(params, constants, z, y, v, p).pow(2).sum(1)

    # ---- reading ------------------------------------------------------------------------------
    @property
    def n(self):
        return self.num_examples if self.num_examples is not None else self._trace.numel()

    def _padded(self, values):
        return torch.cat([values, torch.zeros(self.n - values.numel(), dtype=torch.float64)])

    def require_steps(self):
        """Raises ValueError unless a step was taken (what a result needs)."""
        if self.steps == 0:
            raise ValueError("the accountant has taken no step yet")

    def sums(self):
        """Copies of the raw per-example sums so far, by example id: the accounted trace, its
        spectral part and the times sampled (kappa is applied to them when a result is formed)."""
        return {"trace": self._trace.clone(), "spectral": self._spectral.clone(), "times_sampled": self._sampled.clone()}

    @property
    def kappa_delta(self):
        """delta behind kappa: as given, or filkit dpsgd's default 1/(n T) with the steps taken."""
        if self.settings["kappa_delta"] is not None:
            return self.settings["kappa_delta"]
        return 1.0 / (self.n * max(1, self.steps))

    @property
    def clip_norm_bound(self):
        """|g~| <= clip_norm_bound * C: kappa_clip = 1.11524... for the smooth clip, 1 for the hard."""
        return SOFT_CLIP_NORM_BOUND if self.settings["clipping"] == "smooth" else 1.0

    @property
    def effective_noise_multiplier(self):
        """The noise multiplier the RDP accountant sees: sigma / clip_norm_bound (section 7.11)."""
        return self.settings["noise_multiplier"] / self.clip_norm_bound

    @property
    def step_epsilon(self):
        """eps0 of one step at kappa_delta (section 7.5)."""
        return self.clip_norm_bound * 2.0 * math.sqrt(2.0 * math.log(1.25 / self.kappa_delta)) / \
            self.settings["noise_multiplier"]

    @property
    def kappa(self):
        """The subsampling factor of Theorem 4: q / (q + (1 - q) e^-eps0), or 1 (subsampling='one');
        filkit's subsampling_kappa (step_privacy.hpp), here in Python so that accounting needs no
        compiled module (the tests hold the two equal)."""
        if self.settings["subsampling"] == "one":
            return 1.0
        q = self.settings["sample_rate"]
        return q / (q + (1.0 - q) * math.exp(-self.step_epsilon))

    def _read_ids(self, ids):
        """The example ids a reader asked for, as a LongTensor: integers from 0 to n - 1."""
        try:
            array = np.asarray(ids.cpu() if isinstance(ids, torch.Tensor) else ids)
        except Exception as error:  # noqa: BLE001 - a ragged or odd sequence: say what was expected
            raise ValueError(f"ids: expected a sequence of example ids, got {type(ids).__name__}") from error
        if array.ndim > 1 or (array.size and (array.dtype.kind not in "iu")):
            raise ValueError(f"ids: expected integer example ids (a 1-d sequence), got {array.dtype} of shape "
                             f"{array.shape}")
        array = array.reshape(-1).astype(np.int64)
        if array.size and (array.min() < 0 or array.max() >= self.n):
            bad = int(array[(array < 0) | (array >= self.n)][0])
            raise ValueError(f"ids: example id {bad} is not from 0 to n - 1 = {self.n - 1}")
        return torch.from_numpy(array)

    def fisher_trace(self, ids=None):
        """Tr I(z_i) = sum over the steps that sampled i of kappa Tr(G^T G) / (sigma C)^2 (numpy)."""
        self.require_steps()
        values = self.kappa * self._padded(self._trace)
        return (values if ids is None else values[self._read_ids(ids)]).numpy()

    def dfil(self, ids=None):
        """dFIL sqrt(Tr I(z_i) / d_z) of every example (or of `ids`)."""
        return np.sqrt(self.fisher_trace(ids) / self.private_dims)

    def eta(self, ids=None):
        """sqrt(sum_t kappa |G_t|_2^2 / (sigma C)^2), an upper bound on |I(z_i)|_2^(1/2) (NaN unless spectral)."""
        self.require_steps()
        if not self.settings["spectral"]:
            return np.full(self.n if ids is None else len(self._read_ids(ids)), np.nan)
        values = (self.kappa * self._padded(self._spectral)).sqrt()
        return (values if ids is None else values[self._read_ids(ids)]).numpy()

    def mse_bound(self, ids=None):
        """The Cramer-Rao bound 1 / dFIL^2 on an unbiased reconstruction's MSE per coordinate."""
        with np.errstate(divide="ignore"):
            return 1.0 / np.square(self.dfil(ids))

    def times_sampled(self):
        return self._padded(self._sampled).numpy()

    def labels(self):
        """The label of every example as last seen by step (NaN for one never seen)."""
        return torch.cat([self._labels, torch.full((self.n - self._labels.numel(),), math.nan,
                                                   dtype=torch.float64)]).numpy()

    @property
    def accounted_sampling(self):
        """The sampling the accountants assume: 'uniform' (without replacement, replace one) for
        uniform batches, 'poisson' (add/remove one) for Poisson and shuffled ones (filkit dpsgd's
        accounted_sampling)."""
        return "uniform" if self.settings["sampling"] == "uniform" else "poisson"

    def privacy_accountant(self, accountant=None, steps=None, orders=None):
        """A filkit.RdpAccountant or PldAccountant (accountant: the setting by default) for the
        steps taken (or `steps`): rate q, noise multiplier effective_noise_multiplier, the sampling
        of accounted_sampling (docs/accountants.md)."""
        kind = accountant or self.settings["accountant"]
        choice("accountant", kind, ACCOUNTANTS)
        filkit = library()
        sampling = self.accounted_sampling
        made = filkit.RdpAccountant(orders, sampling) if kind == "rdp" else filkit.PldAccountant(sampling)
        made.step(self.effective_noise_multiplier, self.settings["sample_rate"], self.steps if steps is None else steps)
        return made

    def privacy_spent(self, delta=1e-5, orders=None):
        """filkit's RDP accountant (section 7.10) for the steps taken, Opacus' orders by default:
        a filkit.PrivacySpent (eps, optimal order, ...)."""
        return self.privacy_accountant("rdp", orders=orders).get_privacy_spent(delta)

    def epsilon(self, delta=1e-5):
        """eps at delta by the accountant of the setting `accountant` (RDP or PLD)."""
        return self.privacy_accountant().epsilon(delta)

    def rdp(self, orders=None):
        """The RDP of the steps taken at each order (a list; Opacus' orders by default)."""
        return list(self.privacy_accountant("rdp", orders=orders).rdp)

    # ---- state --------------------------------------------------------------------------------
    def state_dict(self):
        return {"settings": dict(self.settings), "parameter_count": self.parameter_count,
                "num_examples": self.num_examples, "steps": self.steps, "seconds": self.seconds,
                "private_dims": self.private_dims, "trace": self._trace.clone(), "spectral": self._spectral.clone(),
                "times_sampled": self._sampled.clone(), "labels": self._labels.clone(),
                "private_dims_label": self.private_dims_label, "snapshots": [dict(s) for s in self.snapshots],
                "generator": None if self._generator is None else
                self._generator.bit_generator.state if isinstance(self._generator, np.random.Generator) else
                self._generator.get_state()}

    def load_state_dict(self, state):
        """Resume from state_dict(): everything is checked first (the settings, the model's parameter
        count, the sums' lengths, signs and finiteness, the counts), then assigned, so that a state
        that is refused leaves the accountant as it was."""
        checked = checked_state(state, self.settings, self.parameter_count)
        generator = None
        if state["generator"] is not None:
            device, dtype = self._device_and_dtype()
            generator = self._new_generator(device, dtype)
            numpy = isinstance(generator, np.random.Generator)
            if numpy != isinstance(state["generator"], dict):
                raise state_error("the probes' generator was saved with the model "
                          f"{'on another device or in another dtype' if numpy else 'on the CPU in float64'}; "
                          f"the model is now on {device} in {dtype}")
            try:
                if numpy:
                    generator.bit_generator.state = state["generator"]
                else:
                    generator.set_state(state["generator"])
            except (ValueError, TypeError, RuntimeError) as error:
                raise state_error(f"the probes' generator state is not one: {error}") from error
        # Everything checked: assign.
        self.num_examples, self.steps = checked["num_examples"], checked["steps"]
        self.private_dims, self.seconds = checked["private_dims"], checked["seconds"]
        self._trace, self._spectral = checked["trace"].clone(), checked["spectral"].clone()
        self._sampled, self._labels = checked["times_sampled"].clone(), checked["labels"].clone()
        self.private_dims_label = checked["private_dims_label"]
        self.snapshots = [dict(s) for s in checked["snapshots"]]
        self._generator = generator

    # ---- output -------------------------------------------------------------------------------
    def record(self, *, test_accuracy=None, train_accuracy=None):
        """Keep a snapshot of the accountant now (with the model's accuracies, for the report)."""
        from .summary import snapshot
        self.require_steps()
        self.snapshots = [s for s in self.snapshots if s["step"] != self.steps]
        self.snapshots.append(snapshot(self, test_accuracy, train_accuracy))

    def write_summary(self, json_path, csv_path, *, labels=None, rdp_delta=1e-5, test_accuracy=None,
                      train_accuracy=None, images=None, class_names=None):
        """The summary JSON and per-example CSV of `filkit dpsgd`, for `filkit report` (images: the
        n training examples, for the report's montages of the most and least exposed; class_names:
        label k's name), written together or not at all."""
        from .summary import write_summary
        write_summary(self, json_path, csv_path, labels=labels, rdp_delta=rdp_delta, test_accuracy=test_accuracy,
                      train_accuracy=train_accuracy, images=images, class_names=class_names)
