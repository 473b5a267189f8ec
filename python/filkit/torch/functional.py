"""The clipped per-example gradient of a user's module as a function of the example, and its
Jacobian products, batched with torch.func (PyTorch >= 2) or functorch (PyTorch 1.13)
(docs/mathematics.md, sections 7.2, 7.3 and 7.8).

An example's private coordinates are one flat vector z: its input's entries, then (with a private
label) the one-hot label. G = d g~ / d z is p x d_z and is only ever applied:
  G^T u  one reverse pass through the gradient's graph (a double backward). For a batch with one
         probe per example (the Gaussian trace) the per-example gradients are taken once, batched
         by vmap(grad) inside ordinary autograd, and G_b^T u_b of every example is the gradient of
         sum_b <g~_b(z_b), u_b> in the batch of z (example b's term depends on z_b alone), one
         reverse pass through the batched graph (BatchedClippedGradients);
  G v    the reverse pass of u -> G^T u, which is linear in u (the double-backward trick; PyTorch
         1.13's forward mode lacks nll_loss_backward, so forward-over-reverse is not used).
"""
import math

import torch

try:  # PyTorch >= 2.0
    from torch.func import functional_call, grad, vjp, vmap
except ImportError:  # PyTorch 1.13 (Debian 12): functorch
    from functorch import grad, vjp, vmap
    from torch.nn.utils.stateless import functional_call

_GELU_K = math.sqrt(2.0 / math.pi)


def _gelu_tanh(t):
    tanh = torch.tanh if isinstance(t, torch.Tensor) else math.tanh
    return 0.5 * t * (1.0 + tanh(_GELU_K * (t + 0.044715 * t ** 3)))


def soft_clip_factor(norm, clip_norm):
    """f(|g|) = 1 / (GELU(|g|/C - 1) + 1), GELU in its tanh form (section 7.2)."""
    return 1.0 / (_gelu_tanh(norm / clip_norm - 1.0) + 1.0)


def hard_clip_factor(norm, clip_norm):
    """Opacus' min(1, C / |g|)."""
    return torch.clamp(clip_norm / norm, max=1.0)


def _soft_clip_norm_bound():
    """kappa_clip = max_t t / (GELU(t - 1) + 1) = 1.1152382...: the bound |g~| <= kappa_clip C, by
    golden-section search (the ratio is unimodal on [0, 4], its peak near t = 1.549)."""
    ratio = lambda t: t / (_gelu_tanh(t - 1.0) + 1.0)
    lo, hi = 0.0, 4.0
    golden = (math.sqrt(5.0) - 1.0) / 2.0
    for _ in range(200):
        a, b = hi - golden * (hi - lo), lo + golden * (hi - lo)
        if ratio(a) < ratio(b):
            lo = a
        else:
            hi = b
    return ratio(0.5 * (lo + hi))


SOFT_CLIP_NORM_BOUND = _soft_clip_norm_bound()


class ClippedGradient:
    """g~(z) = factor(|g|) g, g the gradient of loss_fn at one example, flat in the order of
    `names` (model.named_parameters() that require grad)."""

    def __init__(self, model, loss_fn, clip_norm, clipping, input_shape, num_classes=None):
        self.model, self.loss_fn, self.clip_norm = model, loss_fn, clip_norm
        self.factor = soft_clip_factor if clipping == "smooth" else hard_clip_factor
        self.input_shape = tuple(input_shape)
        self.input_dims = math.prod(self.input_shape)
        self.num_classes = num_classes  # set: the label is private, one-hot at the end of z

    def gradient_blocks(self, params, constants, z, target):
        """The gradient at one example as {name: tensor shaped like the parameter}."""
        x = z[:self.input_dims].reshape(self.input_shape)
        y = target if self.num_classes is None else z[self.input_dims:]

        def loss(p):
            return self.loss_fn(functional_call(self.model, {**p, **constants}, (x.unsqueeze(0),)), y.unsqueeze(0))

        return grad(loss)(params)

    def gradient(self, params, constants, z, target):
        g = self.gradient_blocks(params, constants, z, target)
        return torch.cat([g[name].reshape(-1) for name in params])

    def __call__(self, params, constants, z, target):
        g = self.gradient(params, constants, z, target)
        return self.factor(g.norm(), self.clip_norm) * g

    # Batched over the examples (leading dimension of Z, targets and the probes).
    def clipped(self, params, constants, Z, targets):
        return vmap(lambda z, y: self(params, constants, z, y))(Z, targets)

    def _gtu(self, params, constants, z, y, u):
        return grad(lambda z_: torch.dot(self(params, constants, z_, y), u))(z)

    def transpose_products(self, params, constants, Z, targets, U):
        """Row b: G_b^T U_b."""
        return vmap(lambda z, y, u: self._gtu(params, constants, z, y, u))(Z, targets, U)

    def _gv(self, params, constants, z, y, v, p):
        _, back = vjp(lambda u: self._gtu(params, constants, z, y, u), torch.zeros(p, dtype=z.dtype, device=z.device))
        return back(v)[0]

    def products(self, params, constants, Z, targets, V, p):
        """Row b: G_b V_b."""
        return vmap(lambda z, y, v: self._gv(params, constants, z, y, v, p))(Z, targets, V)

    def basis_products(self, params, constants, Z, targets, basis, p, transpose):
        """b x k x (p or d_z): G_b e for every row e of `basis` (or G_b^T e with transpose)."""
        if transpose:
            one = lambda z, y: vmap(lambda e: self._gtu(params, constants, z, y, e))(basis)
        else:
            one = lambda z, y: vmap(lambda e: self._gv(params, constants, z, y, e, p))(basis)
        return vmap(one)(Z, targets)


class BatchedClippedGradients:
    """The clipped gradients of a batch as one autograd graph over Z (B x d_z): each parameter
    block's per-example gradients (B x p_k) by vmap(grad), their norms n_b and clip factors
    f_b = f(n_b). Row b depends on z_b alone, so the gradient of S = sum_b f_b <g_b, u_b> in Z is
    the B rows G_b^T u_b: one reverse pass for the whole batch, and the forward pass and the
    per-example gradients are shared by every probe and by the clipped sum."""

    def __init__(self, clipped_gradient, params, constants, Z, targets):
        self.Z = Z.detach().requires_grad_(True)
        with torch.enable_grad():
            blocks = vmap(clipped_gradient.gradient_blocks, in_dims=(None, None, 0, 0))(
                params, constants, self.Z, targets)
            self.blocks = [blocks[name].reshape(Z.shape[0], -1) for name in params]
        with torch.no_grad():
            self.norm = torch.stack([torch.linalg.vector_norm(b, dim=1) for b in self.blocks]).norm(dim=0)
        # f(n) and f'(n) on the B norms (small): the derivative by autograd, so f has one definition.
        with torch.enable_grad():
            n = self.norm.clone().requires_grad_(True)
            factor = clipped_gradient.factor(n, clipped_gradient.clip_norm)
            self.slope, = torch.autograd.grad(factor.sum(), n)
        self.factor = factor.detach()

    def clipped_sum(self):
        """sum_b f_b g_b, flat (detached)."""
        with torch.no_grad():
            return torch.cat([self.factor @ b for b in self.blocks])

    def transpose_products(self, U, retain_graph=False):
        """Row b: G_b^T U_b (U: B x p, flat in the blocks' order)."""
        pieces = torch.split(U, [b.shape[1] for b in self.blocks], dim=1)
        with torch.enable_grad():
            S = _ClipAndContract.apply(self.factor, self.slope, self.norm, len(self.blocks), *self.blocks, *pieces)
            return torch.autograd.grad(S, self.Z, retain_graph=retain_graph)[0]


class _ClipAndContract(torch.autograd.Function):
    """S = sum_b f(n_b) <g_b, u_b> over the blocks of g, with the derivative in g written out:
    dS/dg_b = f(n_b) u_b + f'(n_b) <g_b, u_b> g_b / n_b (0 at n_b = 0, where <g_b, u_b> = 0): two
    passes over each block, where autograd's own chain (the product, the norm's backward, the
    sum of the two) takes five."""

    @staticmethod
    def forward(ctx, factor, slope, norm, count, *tensors):
        blocks, pieces = tensors[:count], tensors[count:]
        inner = sum(torch.einsum("bi,bi->b", g, u) for g, u in zip(blocks, pieces))
        ctx.save_for_backward(factor, slope, norm, inner, *blocks, *pieces)
        ctx.count = count
        return (factor * inner).sum()

    @staticmethod
    def backward(ctx, grad):
        factor, slope, norm, inner, *tensors = ctx.saved_tensors
        blocks, pieces = tensors[:ctx.count], tensors[ctx.count:]
        scale = torch.where(norm > 0, slope * inner / torch.where(norm > 0, norm, torch.ones_like(norm)),
                            torch.zeros_like(norm)).unsqueeze(1) * grad
        weight = (factor * grad).unsqueeze(1)
        return (None, None, None, None, *[torch.addcmul(g * scale, u, weight) for g, u in zip(blocks, pieces)],
                *[None] * ctx.count)


def assign_flat(module, flat):
    """Copy a flat vector into module.parameters() in order, each reshaped: filkit's flat layout of
    a network (each layer's weight, out x in [x kernel], then its bias) is this order."""
    flat = torch.as_tensor(flat)
    total = sum(p.numel() for p in module.parameters())
    if flat.numel() != total:
        raise ValueError(f"assign_flat: {flat.numel()} values for {total} parameters")
    offset = 0
    with torch.no_grad():
        for p in module.parameters():
            p.copy_(flat[offset:offset + p.numel()].reshape(p.shape))
            offset += p.numel()


def split_parameters(model):
    """({name: tensor} of the trained parameters, {name: tensor} of frozen ones and buffers), detached."""
    params, constants = {}, {}
    for name, tensor in model.named_parameters():
        (params if tensor.requires_grad else constants)[name] = tensor.detach()
    for name, tensor in model.named_buffers():
        constants[name] = tensor.detach()
    return params, constants
