"""Per-example gradients of a layer's parameters from what the user's own forward and backward
passed through it (docs/pytorch.md, "The loop's own gradient"): the layer's input a_b, captured by a
forward hook, and the gradient dL/dy_b at its output, captured by a hook on the output tensor when
the user's loss.backward() reaches it. The rules, as Opacus' grad samplers:

  nn.Linear     dW_b = sum_t dy_bt a_bt^T (t over any middle dimensions), db_b = sum_t dy_bt; with one
                row per example (a is B x in) held as the factors (dy_b, a_b) (OuterBlock), never
                formed: |dW_b| = |dy_b| |a_b| and sum_b f_b dW_b = (f dy)^T a;
  nn.Conv2d     dW_b = dy_b unfold(a_b)^T (zero padding, numeric padding; ConvBlock: formed by a
                convolution with the batch as groups, or held as those factors where the
                formed gradients would be too large);
  nn.GroupNorm, nn.LayerNorm, nn.BatchNorm (eval mode, its running statistics)
                dgamma_b = sum dy_b * a^_b, dbeta_b = sum dy_b, a^ the normalised input;
  any other     vmap(grad) of <layer(a_b), dy_b> in the layer's own parameters (a backward
                through that layer alone, for each example at once).

These are the gradients of L, the loss as the loop reduced it; an example's own term is s times
its part (s = B for a mean, 1 for a sum), applied by the caller.
"""
import torch
import torch.nn.functional as F
from torch import nn

try:  # PyTorch >= 2.0
    from torch.func import functional_call, grad, vmap
except ImportError:  # PyTorch 1.13 (Debian 12): functorch
    from functorch import grad, vmap
    from torch.nn.utils.stateless import functional_call


class OuterBlock:
    """B per-example matrices dy_b a_b^T held as their factors dy (B x out) and a (B x in)."""

    def __init__(self, dy, a):
        self.dy, self.a = dy, a

    def squared_norms(self):
        return self.dy.pow(2).sum(1) * self.a.pow(2).sum(1)

    def weighted_sums(self, weights):
        """k x out x in: sum_b weights[j, b] dy_b a_b^T for each row j of weights (k x B)."""
        return torch.stack([(self.dy * w[:, None]).t() @ self.a for w in weights])

    def dense(self):
        return torch.einsum("bo,bi->boi", self.dy, self.a)


class DenseBlock:
    """B per-example gradients of one parameter, B x (the parameter's shape)."""

    def __init__(self, values):
        self.values = values

    def squared_norms(self):
        return self.values.reshape(self.values.shape[0], -1).pow(2).sum(1)

    def weighted_sums(self, weights):
        """k x (the parameter's shape): sum_b weights[j, b] g_b for each row j of weights (k x B)."""
        B = self.values.shape[0]
        return (weights @ self.values.reshape(B, -1)).reshape(weights.shape[0], *self.values.shape[1:])

    def dense(self):
        return self.values


# Per-example gradients of one convolution are formed (B x the weight's size) up to this many
# elements; a larger layer (ResNet-18's last blocks at B = 256: 6e8) is held as factors.
FORMED_ELEMENTS = 2 ** 26


class ConvBlock:
    """B per-example gradients of a Conv2d's weight, dW_b = D_b A_b^T with A_b = unfold(a_b) (in k x L
    columns of the layer's input) and D_b (out x L) the output gradient. Formed, B x out x in/groups
    x kh x kw, by one convolution weight gradient with the batch as groups (a convolution with B G
    groups over the examples' channels side by side: 2 to 4 times faster than unfold and a batched
    product on a CPU), the cheapest way when they fit FORMED_ELEMENTS; else, with one group, held
    as the factors: the norms from the L x L Gram matrices |dW_b|^2 = sum((D_b^T D_b) * (A_b^T A_b))
    ("ghost" norms, cheap where the positions L are few) and sum_b w_b dW_b as the convolution's own
    weight gradient of the output gradients weighted by w (torch.nn.grad.conv2d_weight)."""

    def __init__(self, layer, a, dy):
        self.layer, self.a, self.dy = layer, a, dy
        B, out = dy.shape[0], layer.out_channels
        self.formed = None
        if layer.groups == 1 and B * layer.weight.numel() > FORMED_ELEMENTS:
            self.D = dy.reshape(B, out, -1)
            self.columns = F.unfold(a, layer.kernel_size, dilation=layer.dilation, padding=layer.padding,
                                    stride=layer.stride)
        else:
            formed = torch.nn.grad.conv2d_weight(
                a.reshape(1, -1, *a.shape[2:]), (B * out, *layer.weight.shape[1:]), dy.reshape(1, -1, *dy.shape[2:]),
                stride=layer.stride, padding=layer.padding, dilation=layer.dilation, groups=B * layer.groups)
            self.formed = DenseBlock(formed.reshape(B, *layer.weight.shape))

    def squared_norms(self):
        if self.formed is not None:
            return self.formed.squared_norms()
        gram_d = torch.bmm(self.D.transpose(1, 2), self.D)
        gram_a = torch.bmm(self.columns.transpose(1, 2), self.columns)
        return (gram_d * gram_a).sum((1, 2))

    def weighted_sums(self, weights):
        if self.formed is not None:
            return self.formed.weighted_sums(weights)
        layer, shape = self.layer, (-1,) + (1,) * (self.dy.dim() - 1)
        return torch.stack([torch.nn.grad.conv2d_weight(self.a, layer.weight.shape, self.dy * w.reshape(shape),
                                                        stride=layer.stride, padding=layer.padding,
                                                        dilation=layer.dilation, groups=layer.groups)
                            for w in weights])

    def dense(self):
        if self.formed is not None:
            return self.formed.values
        return torch.bmm(self.D, self.columns.transpose(1, 2)).reshape(self.a.shape[0], *self.layer.weight.shape)


def add_blocks(a, b):
    """Two uses of one parameter (a layer called twice): their per-example gradients add."""
    return DenseBlock(a.dense() + b.dense())


def _norm_input(layer, a):
    if isinstance(layer, nn.GroupNorm):
        return F.group_norm(a, layer.num_groups, eps=layer.eps)
    if isinstance(layer, nn.LayerNorm):
        return F.layer_norm(a, layer.normalized_shape, eps=layer.eps)
    shape = (1, -1) + (1,) * (a.dim() - 2)  # BatchNorm with its running statistics (eval mode)
    return (a - layer.running_mean.view(shape)) * torch.rsqrt(layer.running_var.view(shape) + layer.eps)


def _reduce_to(values, B, shape):
    """Sum B x ... x shape over the middle dimensions to B x shape (or B x C for channels first)."""
    return values.reshape(B, -1, *shape).sum(1) if shape else values.reshape(B, -1).sum(1)


def _affine_norm(layer, a, dy):
    """{parameter name: block} of GroupNorm / LayerNorm / BatchNorm's weight and bias."""
    B = a.shape[0]
    blocks = {}
    if isinstance(layer, nn.LayerNorm):
        shape = tuple(layer.normalized_shape)
        reduce = lambda t: _reduce_to(t, B, shape)
    else:  # channels in dimension 1: sum over the spatial ones
        reduce = lambda t: t.reshape(B, t.shape[1], -1).sum(2)
    if layer.weight is not None and layer.weight.requires_grad:
        blocks["weight"] = DenseBlock(reduce(dy * _norm_input(layer, a)))
    if layer.bias is not None and layer.bias.requires_grad:
        blocks["bias"] = DenseBlock(reduce(dy))
    return blocks


def _linear(layer, a, dy):
    B = a.shape[0]
    blocks = {}
    if layer.weight.requires_grad:
        if a.dim() == 2:
            blocks["weight"] = OuterBlock(dy, a)
        else:
            blocks["weight"] = DenseBlock(torch.einsum("bto,bti->boi", dy.reshape(B, -1, dy.shape[-1]),
                                                       a.reshape(B, -1, a.shape[-1])))
    if layer.bias is not None and layer.bias.requires_grad:
        blocks["bias"] = DenseBlock(dy.reshape(B, -1, dy.shape[-1]).sum(1))
    return blocks


def _conv2d(layer, a, dy):
    blocks = {}
    if layer.weight.requires_grad:
        blocks["weight"] = ConvBlock(layer, a, dy)
    if layer.bias is not None and layer.bias.requires_grad:
        blocks["bias"] = DenseBlock(dy.reshape(a.shape[0], layer.out_channels, -1).sum(2))
    return blocks


def _by_vmap(layer, a, dy):
    """vmap(grad) of <layer(a_b), dy_b> in the layer's own trained parameters."""
    own = {name: p.detach() for name, p in layer.named_parameters(recurse=False) if p.requires_grad}

    def inner(params, x, d):
        return (functional_call(layer, params, (x.unsqueeze(0),)) * d.unsqueeze(0)).sum()

    grads = vmap(grad(inner), in_dims=(None, 0, 0))(own, a, dy)
    return {name: DenseBlock(value) for name, value in grads.items()}


def _rule(layer):
    if type(layer) is nn.Linear:
        return _linear
    if type(layer) is nn.Conv2d and layer.padding_mode == "zeros" and not isinstance(layer.padding, str):
        return _conv2d
    if type(layer) in (nn.GroupNorm, nn.LayerNorm) or (
            isinstance(layer, nn.modules.batchnorm._BatchNorm) and not layer.training):
        return _affine_norm
    return _by_vmap


def layer_gradients(layer, a, dy):
    """{parameter name (the layer's own): per-example block} of one use of the layer."""
    with torch.no_grad():
        return _rule(layer)(layer, a, dy)
