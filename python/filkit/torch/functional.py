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
  G v    the forward-mode derivative (jvp) of g~ in z along v: forward over reverse, which the
         accountant's loss (loss.py's expansion, no nll_loss_backward) allows on PyTorch 1.13; where
         an operation has no forward mode, the reverse pass of u -> G^T u, which is linear in u (a
         third-order reverse pass, about 5 times slower).
A dense layer (nn.Linear on one row per example) has the per-example weight gradient dz a^T, dz the
gradient at its output and a its input: BatchedClippedGradients keeps the two factors instead of the
out x in matrix, and a Gaussian probe of that block needs only the pair (U a, U^T dz), drawn from its
joint law with out + in normals instead of out x in (section 7.9, as filkit's C++ networks).
"""
import math

import torch
from torch import nn

try:  # PyTorch >= 2.0
    from torch.func import functional_call, grad, jvp, vjp, vmap
except ImportError:  # PyTorch 1.13 (Debian 12): functorch
    from functorch import grad, jvp, vjp, vmap
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
    `names` (model.named_parameters() that require grad). loss_fn is a loss of a batch of one, or
    loss.ExpandedLoss with the examples' expansions as targets (what FilAccountant uses)."""

    def __init__(self, model, loss_fn, clip_norm, clipping, input_shape, num_classes=None):
        self.model, self.loss_fn, self.clip_norm = model, loss_fn, clip_norm
        self.factor = soft_clip_factor if clipping == "smooth" else hard_clip_factor
        self.input_shape = tuple(input_shape)
        self.input_dims = math.prod(self.input_shape)
        self.num_classes = num_classes  # set: the label is private, one-hot at the end of z
        self.reverse_only = False  # G v by the reverse form (set when the forward form is unsupported)

    def _example(self, z, target):
        """The model's input (a batch of one) and the loss's target of the private coordinates z.
        A tuple target is an example's loss expansion (loss.py): the loss gets (label, expansion),
        label the one-hot part of z (None when the label is public)."""
        x = z[:self.input_dims].reshape(self.input_shape)
        if isinstance(target, tuple):
            return x.unsqueeze(0), (None if self.num_classes is None else z[self.input_dims:], target)
        y = target if self.num_classes is None else z[self.input_dims:]
        return x.unsqueeze(0), y.unsqueeze(0)

    def gradient_blocks(self, params, constants, z, target):
        """The gradient at one example as {name: tensor shaped like the parameter}."""
        x, y = self._example(z, target)

        def loss(p):
            return self.loss_fn(functional_call(self.model, {**p, **constants}, (x,)), y)

        return grad(loss)(params)

    def factored_gradient(self, params, constants, linears, z, target):
        """The gradient at one example with the layers of `linears` (FactoredLinear) in factors:
        ({name: tensor} of the other trained parameters, [dz], [a]), dz the gradient at a layer's
        output (its bias gradient) and a its input, so that its weight gradient is dz a^T. dz is
        the gradient in a zero shift added to the layer's output by a forward hook."""
        x, y = self._example(z, target)
        factored = {name for layer in linears for name in layer.names}
        others = {name: tensor for name, tensor in params.items() if name not in factored}
        held = {name: params[name] for name in factored}

        def loss(others, shifts):
            inputs = {}

            def hook_of(i):
                def hook(module, args, output):
                    if i in inputs or len(args) != 1 or args[0].dim() != 2 or args[0].shape[0] != 1:
                        raise NotFactorable(f"{linears[i].name} is called more than once or on more than one row")
                    inputs[i] = args[0]
                    return output + shifts[i]
                return hook

            handles = [layer.module.register_forward_hook(hook_of(i)) for i, layer in enumerate(linears)]
            try:
                outputs = functional_call(self.model, {**others, **held, **constants}, (x,))
            finally:
                for handle in handles:
                    handle.remove()
            if len(inputs) != len(linears):
                raise NotFactorable("a dense layer is not called by the model's forward")
            return self.loss_fn(outputs, y), [inputs[i][0] for i in range(len(linears))]

        shifts = [torch.zeros(1, layer.module.out_features, dtype=z.dtype, device=z.device) for layer in linears]
        (g, dz), a = grad(loss, argnums=(0, 1), has_aux=True)(others, shifts)
        return g, [d[0] for d in dz], a

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

    def _gv_reverse(self, params, constants, z, y, v, p):
        """G v as the reverse pass of the linear map u -> G^T u (a third-order reverse pass)."""
        _, back = vjp(lambda u: self._gtu(params, constants, z, y, u), torch.zeros(p, dtype=z.dtype, device=z.device))
        return back(v)[0]

    def _gv_forward(self, params, constants, z, y, v, p):
        """G v as the forward-mode derivative of g~ in the direction v (forward over reverse: about
        5 times faster than the reverse form, for exact traces as filkit's C++ networks do)."""
        return jvp(lambda z_: self(params, constants, z_, y), (z,), (v,))[1]

    def _forward_or_reverse(self, batched):
        """batched(gv) with gv the forward form, or the reverse form where an operation in the model
        or loss has no forward-mode derivative (PyTorch 1.13's nll_loss_backward, say)."""
        if not self.reverse_only:
            try:
                return batched(self._gv_forward)
            except (RuntimeError, NotImplementedError) as error:
                if "forward" not in str(error).lower():
                    raise
                self.reverse_only = True
        return batched(self._gv_reverse)

    def products(self, params, constants, Z, targets, V, p):
        """Row b: G_b V_b."""
        return self._forward_or_reverse(
            lambda gv: vmap(lambda z, y, v: gv(params, constants, z, y, v, p))(Z, targets, V))

    def basis_products(self, params, constants, Z, targets, basis, p, transpose):
        """b x k x (p or d_z): G_b e for every row e of `basis` (or G_b^T e with transpose)."""
        if transpose:
            return vmap(lambda z, y: vmap(lambda e: self._gtu(params, constants, z, y, e))(basis))(Z, targets)
        return self._forward_or_reverse(
            lambda gv: vmap(lambda z, y: vmap(lambda e: gv(params, constants, z, y, e, p))(basis))(Z, targets))


class NotFactorable(Exception):
    """A dense layer whose per-example weight gradient is not one outer product dz a^T."""


class FactoredLinear:
    """A trained nn.Linear whose per-example weight gradient is held as dz and a (dz a^T): `names`
    its weight's (and, trained, its bias') names in the model's named_parameters()."""

    def __init__(self, name, module, weight, bias):
        self.name, self.module, self.weight, self.bias = name, module, weight, bias
        self.names = (weight,) if bias is None else (weight, bias)


def factorable_linears(model, params):
    """The layers of exactly nn.Linear whose weight is trained and whose parameters no other module
    holds, each appearing once in the model (candidates: verify_factored checks them on an example)."""
    appearances, holders = {}, {}
    for _, module in model.named_modules(remove_duplicate=False):
        appearances[id(module)] = appearances.get(id(module), 0) + 1
        for tensor in module.parameters(recurse=False):
            holders[id(tensor)] = holders.get(id(tensor), 0) + 1
    layers = []
    for name, module in model.named_modules():
        if type(module) is not nn.Linear or appearances[id(module)] != 1:
            continue
        prefix = f"{name}." if name else ""
        weight, bias = prefix + "weight", prefix + "bias"
        if weight not in params or holders[id(module.weight)] != 1:
            continue
        if module.bias is not None and holders[id(module.bias)] != 1:
            continue
        layers.append(FactoredLinear(name or type(module).__name__, module, weight, bias if bias in params else None))
    return layers


def verify_factored(clipped_gradient, params, constants, linears, z, target, rtol=1e-10):
    """The layers of `linears` if the factored gradient at one example (z, target) equals the
    gradient by autograd (to rtol of each block's norm), else none: the forward hooks see what the
    model's forward does, which the module tree alone does not say (a layer called twice, a weight
    used outside its layer)."""
    if not linears:
        return []
    try:
        with torch.no_grad():
            full = clipped_gradient.gradient_blocks(params, constants, z, target)
            others, dz, a = clipped_gradient.factored_gradient(params, constants, linears, z, target)
    except NotFactorable:
        return []
    close = lambda got, want: bool(torch.linalg.vector_norm(got - want) <= rtol * torch.linalg.vector_norm(want) + 1e-300)
    for layer, d, x in zip(linears, dz, a):
        if not close(torch.outer(d, x), full[layer.weight]) or (layer.bias is not None and not close(d, full[layer.bias])):
            return []
    return linears if all(close(others[name], full[name]) for name in others) else []


class BatchedClippedGradients:
    """The clipped gradients of a batch as one autograd graph over Z (B x d_z): each parameter
    block's per-example gradients (B x p_k) by vmap(grad), a factored dense layer's as its factors
    dz (B x out) and a (B x in), their norms n_b and clip factors f_b = f(n_b). Row b depends on z_b
    alone, so the gradient of S = sum_b f_b <g_b, u_b> in Z is the B rows G_b^T u_b: one reverse
    pass for the whole batch, and the forward pass and the per-example gradients are shared by
    every probe and by the clipped sum. The blocks keep the order of `params` (the flat layout)."""

    def __init__(self, clipped_gradient, params, constants, Z, targets, linears=()):
        self.Z = Z.detach().requires_grad_(True)
        self.linears = list(linears)
        self.sizes = [t.numel() for t in params.values()]
        with torch.enable_grad():
            if self.linears:
                one = lambda z, y: clipped_gradient.factored_gradient(params, constants, self.linears, z, y)
                others, self.dz, self.a = vmap(one)(self.Z, targets)
            else:
                others, self.dz, self.a = vmap(clipped_gradient.gradient_blocks, in_dims=(None, None, 0, 0))(
                    params, constants, self.Z, targets), [], []
        B = Z.shape[0]
        self.blocks = [others[name].reshape(B, -1) for name in params if name in others]
        # Where each parameter's block is: ("full", index into blocks), ("weight", i) or ("bias", i).
        self.layout = []
        factored = {layer.weight: ("weight", i) for i, layer in enumerate(self.linears)}
        factored.update({layer.bias: ("bias", i) for i, layer in enumerate(self.linears) if layer.bias is not None})
        full = 0
        for name in params:
            if name in factored:
                self.layout.append(factored[name])
            else:
                self.layout.append(("full", full))
                full += 1
        self.has_bias = [layer.bias is not None for layer in self.linears]
        with torch.no_grad():
            squared = sum(b.pow(2).sum(1) for b in self.blocks) if self.blocks else torch.zeros(
                B, dtype=Z.dtype, device=Z.device)
            for dz, a, bias in zip(self.dz, self.a, self.has_bias):
                squared = squared + dz.pow(2).sum(1) * (a.pow(2).sum(1) + float(bias))
            self.norm = squared.sqrt()
        # f(n) and f'(n) on the B norms (small): the derivative by autograd, so f has one definition.
        with torch.enable_grad():
            n = self.norm.clone().requires_grad_(True)
            factor = clipped_gradient.factor(n, clipped_gradient.clip_norm)
            self.slope, = torch.autograd.grad(factor.sum(), n)
        self.factor = factor.detach()

    def clipped_sum(self):
        """sum_b f_b g_b, flat (detached)."""
        return self.weighted_sum(self.factor)

    def gradient_sum(self):
        """sum_b g_b, the unclipped gradients' sum, flat (detached): make_private compares it with
        the gradient the user's backward() left."""
        return self.weighted_sum(torch.ones_like(self.factor))

    def gradients(self):
        """B x p: the per-example (unclipped) gradients, flat in the parameters' order (detached; a
        factored layer's formed), for comparison with per-sample gradients the user has."""
        B = self.Z.shape[0]
        with torch.no_grad():
            parts = []
            for kind, i in self.layout:
                if kind == "full":
                    parts.append(self.blocks[i].detach())
                elif kind == "weight":
                    parts.append(torch.einsum("bo,bi->boi", self.dz[i].detach(), self.a[i].detach()).reshape(B, -1))
                else:
                    parts.append(self.dz[i].detach())
            return torch.cat(parts, 1)

    def weighted_sum(self, weights):
        """sum_b weights_b g_b, flat (detached)."""
        with torch.no_grad():
            parts = []
            for kind, i in self.layout:
                if kind == "full":
                    parts.append(weights @ self.blocks[i])
                elif kind == "weight":
                    parts.append(((self.dz[i] * weights[:, None]).t() @ self.a[i]).reshape(-1))
                else:
                    parts.append(weights @ self.dz[i])
            return torch.cat(parts)

    def transpose_products(self, U, retain_graph=False):
        """Row b: G_b^T U_b (U: B x p, flat in the parameters' order)."""
        pieces = torch.split(U, self.sizes, dim=1)
        full = [None] * len(self.blocks)
        Ua, Utd = [None] * len(self.linears), [None] * len(self.linears)
        bias = [None] * len(self.linears)
        with torch.no_grad():
            for (kind, i), piece in zip(self.layout, pieces):
                if kind == "full":
                    full[i] = piece
                elif kind == "weight":
                    W = piece.reshape(piece.shape[0], self.dz[i].shape[1], self.a[i].shape[1])
                    Ua[i] = torch.bmm(W, self.a[i].detach().unsqueeze(2)).squeeze(2)
                    Utd[i] = torch.bmm(W.transpose(1, 2), self.dz[i].detach().unsqueeze(2)).squeeze(2)
                else:
                    bias[i] = piece
        return self._contract(full, Ua, Utd, bias, retain_graph)

    def gaussian_transpose_products(self, normal, retain_graph=False):
        """Row b: G_b^T u_b for u_b ~ N(0, I_p), normal(shape) drawing N(0, I) arrays. A factored
        layer's block of u_b enters only as (U a, U^T dz), drawn from their joint law: with
        a^ = a / |a|, U a = |a| z1 and U^T dz = a^ <dz, z1> + |dz| (I - a^ a^T) z2, z1 and z2
        standard normal (out and in numbers); a = 0 leaves U^T dz = |dz| z2."""
        full = [None] * len(self.blocks)
        Ua, Utd, bias = [None] * len(self.linears), [None] * len(self.linears), [None] * len(self.linears)
        B = self.Z.shape[0]
        with torch.no_grad():
            for kind, i in self.layout:
                if kind == "full":
                    full[i] = normal((B, self.blocks[i].shape[1]))
                elif kind == "weight":
                    dz, a = self.dz[i].detach(), self.a[i].detach()
                    z1, z2 = normal(tuple(dz.shape)), normal(tuple(a.shape))
                    length = a.norm(dim=1, keepdim=True)
                    direction = torch.where(length > 0, a / torch.where(length > 0, length, torch.ones_like(length)),
                                            torch.zeros_like(a))
                    Ua[i] = length * z1
                    Utd[i] = direction * (dz * z1).sum(1, keepdim=True) + dz.norm(dim=1, keepdim=True) * (
                        z2 - direction * (direction * z2).sum(1, keepdim=True))
                else:
                    bias[i] = normal((B, self.dz[i].shape[1]))
        return self._contract(full, Ua, Utd, bias, retain_graph)

    def _contract(self, full, Ua, Utd, bias, retain_graph):
        """The gradient in Z of S = sum_b f_b (sum_k <g_bk, u_bk> + sum_l <dz_bl, U_l a_bl + u_l>)."""
        shifted = [Ua[i] if bias[i] is None else Ua[i] + bias[i] for i in range(len(self.linears))]
        with torch.enable_grad():
            S = _ClipAndContract.apply(self.factor, self.slope, self.norm, len(self.blocks), len(self.linears),
                                       torch.tensor(self.has_bias, dtype=self.Z.dtype, device=self.Z.device),
                                       *self.blocks, *full, *self.dz, *self.a, *shifted, *Utd)
            return torch.autograd.grad(S, self.Z, retain_graph=retain_graph)[0]


class _ClipAndContract(torch.autograd.Function):
    """S = sum_b f(n_b) inner_b, inner_b = sum_k <g_bk, u_bk> over the full blocks plus
    sum_l <dz_bl, v_bl> over the factored layers (v = U a + u_bias, w = U^T dz held fixed: their
    derivatives in dz and a), with the derivative written out. With s_b = f'(n_b) inner_b / n_b
    (0 at n_b = 0, where inner_b = 0):
      dS/dg_bk  = f_b u_bk + s_b g_bk
      dS/ddz_bl = f_b v_bl + s_b (|a_bl|^2 + [bias]) dz_bl
      dS/da_bl  = f_b w_bl + s_b |dz_bl|^2 a_bl
    two passes over each block, where autograd's own chain (the product, the norm's backward, the
    sum of the two) takes five."""

    @staticmethod
    def forward(ctx, factor, slope, norm, count, layers, has_bias, *tensors):
        blocks, pieces = tensors[:count], tensors[count:2 * count]
        dz, a, v, w = (tensors[2 * count + j * layers:2 * count + (j + 1) * layers] for j in range(4))
        inner = torch.zeros_like(norm)
        for g, u in zip(blocks, pieces):
            inner = inner + torch.einsum("bi,bi->b", g, u)
        for d, vv in zip(dz, v):
            inner = inner + torch.einsum("bi,bi->b", d, vv)
        ctx.save_for_backward(factor, slope, norm, inner, has_bias, *tensors)
        ctx.count, ctx.layers = count, layers
        return (factor * inner).sum()

    @staticmethod
    def backward(ctx, grad):
        factor, slope, norm, inner, has_bias, *tensors = ctx.saved_tensors
        count, layers = ctx.count, ctx.layers
        blocks, pieces = tensors[:count], tensors[count:2 * count]
        dz, a, v, w = (tensors[2 * count + j * layers:2 * count + (j + 1) * layers] for j in range(4))
        scale = torch.where(norm > 0, slope * inner / torch.where(norm > 0, norm, torch.ones_like(norm)),
                            torch.zeros_like(norm)).unsqueeze(1) * grad
        weight = (factor * grad).unsqueeze(1)
        d_blocks = [torch.addcmul(g * scale, u, weight) for g, u in zip(blocks, pieces)]
        d_dz = [torch.addcmul(d * (scale * (x.pow(2).sum(1, keepdim=True) + has_bias[l])), vv, weight)
                for l, (d, x, vv) in enumerate(zip(dz, a, v))]
        d_a = [torch.addcmul(x * (scale * d.pow(2).sum(1, keepdim=True)), ww, weight) for d, x, ww in zip(dz, a, w)]
        return (None,) * 6 + (*d_blocks, *[None] * count, *d_dz, *d_a, *[None] * (2 * layers))


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
