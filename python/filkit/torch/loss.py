"""The user's loss, one term per example, as filkit.torch differentiates it (docs/pytorch.md,
"The loop's own gradient").

A DP-SGD step needs the gradient of each example's own loss term; the accountant needs that
gradient's Jacobian in the example, which takes the loss's first and second derivatives in the
model's outputs. Both are read off the loss of the whole batch, exactly as the user's loop calls
it: L = loss_fn(outputs, targets), whose example terms are l_b = s * (the part of L that depends on
example b's outputs), s = B for a mean over the batch and 1 for a sum (Opacus' loss_reduction).
From L: g_b = s dL/do_b and the m x m blocks H_b = s d2L/do_b^2 (m passes of a backward through
the loss alone, never through the model), and with a private label the m x K blocks
s d2L/do_b dy_b. Inside vmap the accountant then differentiates the expansion

    q_b(o, y) = <g_b, o - o_b> + (1/2) (o - o_b)^T H_b (o - o_b) + (o - o_b)^T M_b (y - y_b),

which has l_b's gradient and second derivatives at the batch's outputs o_b, so the clipped
gradient and its Jacobian there are l_b's: the loss function itself is never put under vmap (any
loss autograd differentiates twice works: label smoothing, class weights, a custom criterion).

Refused, with the reason: a loss that is not a scalar, one whose example terms are coupled (the
Hessian of L is not block-diagonal over examples: checked with a probe each batch), and a
reduction that is not the one declared (checked on one example alone each batch).
"""
import torch

REDUCTIONS = ("mean", "sum")


class LossError(ValueError):
    """The loss is not a sum of per-example terms of the declared reduction."""


def _probe(shape, like, seed):
    """A fixed pseudo-random probe (its own generator: the user's random state is left alone)."""
    generator = torch.Generator(device=like.device)
    generator.manual_seed(seed)
    return torch.randn(shape, generator=generator, device=like.device, dtype=like.dtype)


def _tolerance(dtype):
    return 1e-9 if dtype == torch.float64 else 2e-4


def _call(loss_fn, outputs, targets):
    """loss_fn(outputs, targets), its failure said as what it was given (the targets' range too)."""
    try:
        return loss_fn(outputs, targets)
    except (RuntimeError, IndexError, ValueError, TypeError) as error:
        seen = ""
        if isinstance(targets, torch.Tensor) and targets.numel() and not targets.dtype.is_floating_point:
            seen = f", from {int(targets.min())} to {int(targets.max())}"
        what = f"{tuple(targets.shape)} {targets.dtype}{seen}" if isinstance(targets, torch.Tensor) else \
            type(targets).__name__
        raise LossError(f"loss_fn failed on the batch's outputs {tuple(outputs.shape)} and targets {what}: "
                        f"{error}") from error


class LossExpansion:
    """The per-example terms' derivatives at a batch's outputs: `data` is the tuple of batched
    tensors (o_b, g_b, H_b[, M_b, y_b]) that ExpandedLoss takes per example; `gradient` is
    g_b (B x m), the example terms' gradients in the outputs."""

    def __init__(self, loss_fn, outputs, targets, reduction, onehot=None, *, check_example=0, checks=None):
        """checks: a checks.Deferred to add the coupling and reduction checks to (read back with
        the caller's others); None raises at once."""
        self._checks = checks
        if reduction not in REDUCTIONS:
            raise ValueError(f"loss_reduction = {reduction!r}: must be one of {', '.join(map(repr, REDUCTIONS))}")
        B = outputs.shape[0]
        self.batch = B
        self.scale = float(B) if reduction == "mean" else 1.0  # s: an example's term is s times its part of L
        o = outputs.detach().reshape(B, -1).clone().requires_grad_(True)
        m = o.shape[1]
        scale = self.scale
        label = None if onehot is None else onehot.detach().clone().requires_grad_(True)
        with torch.enable_grad():
            L = _call(loss_fn, o.view(outputs.shape), targets if label is None else label)
            if not isinstance(L, torch.Tensor) or L.numel() != 1:
                raise LossError(f"loss_fn returned {type(L).__name__}"
                                f"{'' if not isinstance(L, torch.Tensor) else ' of shape ' + str(tuple(L.shape))}: "
                                "expected a scalar (a loss reduced over the batch, by mean or sum)")
            g, = torch.autograd.grad(L.reshape(()), o, create_graph=True)
            wrt = (o,) if label is None else (o, label)
            H = torch.zeros(B, m, m, dtype=o.dtype, device=o.device)
            M = None if label is None else torch.zeros(B, m, label.shape[1], dtype=o.dtype, device=o.device)
            if g.requires_grad:
                self._second_derivatives(g, wrt, H, M)
                # Coupled examples put d2L/do_b do_b' (b' != b) into the blocks: a probe sees it.
                if B > 1:
                    v = _probe((B, m), o, seed=1)
                    direct, = torch.autograd.grad((g * v).sum(), o, retain_graph=True, allow_unused=True)
                    direct = torch.zeros_like(o) if direct is None else direct
                    blocks = torch.einsum("bjk,bk->bj", H, v)
                    gap, size = (direct - blocks).norm(), direct.norm() + blocks.norm()
                    self._require(gap <= _tolerance(o.dtype) * size + 1e-300, lambda: LossError(
                        "loss_fn couples the examples of a batch (its Hessian in the outputs is not block-diagonal "
                        f"over examples: relative gap {float(gap / size):.3g}), so no example has a loss term of "
                        "its own; per-example privacy needs a sum or mean of per-example terms"))
        self.gradient = g.detach() * scale
        H = H * scale
        if B > 0:
            self._check_reduction(loss_fn, outputs, targets, label, reduction, check_example % B)
        self.outputs = o.detach()
        self.data = (self.outputs, self.gradient, H) if label is None else \
            (self.outputs, self.gradient, H, M * scale, label.detach())

    @staticmethod
    def _second_derivatives(g, wrt, H, M):
        """H[b, :, k] = d(sum_b' g[b', k]) / do_b (and M[b, k, :] in the label): the m columns at once
        by a batched backward (is_grads_batched, vmap over the m unit vectors), or one backward
        each where the loss's backward does not batch."""
        B, m = g.shape
        units = torch.eye(m, dtype=g.dtype, device=g.device)[:, None, :].expand(m, B, m).contiguous()
        try:
            parts = torch.autograd.grad(g, wrt, grad_outputs=units, retain_graph=True, allow_unused=True,
                                        is_grads_batched=True)
            if parts[0] is not None:
                H.copy_(parts[0].permute(1, 2, 0))
            if M is not None and parts[1] is not None:
                M.copy_(parts[1].permute(1, 0, 2))
            return
        except RuntimeError:
            pass  # a backward vmap cannot batch: one column at a time
        for k in range(m):
            parts = torch.autograd.grad(g[:, k].sum(), wrt, retain_graph=True, allow_unused=True)
            if parts[0] is not None:
                H[:, :, k] = parts[0]
            if M is not None and parts[1] is not None:
                M[:, k, :] = parts[1]

    def _check_reduction(self, loss_fn, outputs, targets, label, reduction, b):
        """Example b's term alone (a batch of one) must have the gradient s dL/do_b."""
        o = outputs.detach()[b:b + 1].clone().requires_grad_(True)
        with torch.enable_grad():
            alone = _call(loss_fn, o, targets[b:b + 1] if label is None else label.detach()[b:b + 1])
            got, = torch.autograd.grad(alone.reshape(()), o, allow_unused=True)
        got = torch.zeros_like(o) if got is None else got
        want = self.gradient[b]
        gap = (got.reshape(-1) - want).norm()
        other = "sum" if reduction == "mean" else "mean"
        self._require(gap <= _tolerance(o.dtype) * (want.norm() + got.norm()) + 1e-300, lambda: LossError(
            f"loss_fn on example {b} of the batch alone has a gradient in its outputs that is not "
            f"{'B' if reduction == 'mean' else '1'} times its part of the batch's (loss_reduction = {reduction!r}; "
            f"relative gap {float(gap / (want.norm() + 1e-300)):.3g}): is its reduction {other!r} (pass "
            f"loss_reduction={other!r}), or does it weight or couple the examples (class weights normalised over the "
            "batch, a batch statistic)?"))

    def _require(self, ok, error):
        if self._checks is not None:
            self._checks.add(ok, error)
        elif not bool(ok):
            raise error()

    def rows(self, rows):
        """The expansion data of the examples `rows` (a slice or index tensor)."""
        return tuple(t[rows] for t in self.data)


class ExpandedLoss:
    """loss(outputs, y) for ClippedGradient: y = (label, (o_b, g_b, H_b[, M_b, y_b])) of one example,
    label the private one-hot label from z (None when the label is public): the expansion q_b."""

    def __call__(self, outputs, y):
        label, data = y
        o0, g, H = data[:3]
        d = outputs.reshape(-1) - o0
        value = torch.dot(g, d) + 0.5 * torch.dot(d, H @ d)
        if len(data) > 3:
            M, y0 = data[3:]
            value = value + torch.dot(d, M @ (label - y0))
        return value
