"""Which modules the per-example FIL accountant can take (docs/pytorch.md, "Layers").

FIL needs the clipped per-example gradient to be a function of that example alone and
differentiable in it. BatchNorm in train mode couples the examples of a batch (it normalises with
the batch's statistics; as Opacus, filkit refuses it); in eval mode it is a fixed affine map of each
example (its running statistics) and is accepted. Dropout in train mode makes the gradient a random
function of the example: refused for accounting, accepted for DP-SGD alone (accounting=False).
ReLU-like activations and max pooling are differentiable almost everywhere: accepted, with that
caveat recorded.
"""
from torch import nn

# Differentiable except on a set of measure zero (a kink or a switch between inputs).
NONSMOOTH = (nn.ReLU, nn.ReLU6, nn.LeakyReLU, nn.PReLU, nn.RReLU, nn.Hardtanh, nn.Hardswish, nn.Hardsigmoid,
             nn.Hardshrink, nn.Softshrink, nn.Threshold, nn.MaxPool1d, nn.MaxPool2d, nn.MaxPool3d,
             nn.AdaptiveMaxPool1d, nn.AdaptiveMaxPool2d, nn.AdaptiveMaxPool3d)
DROPOUT = (nn.Dropout, nn.Dropout1d, nn.Dropout2d, nn.Dropout3d, nn.AlphaDropout, nn.FeatureAlphaDropout) \
    if hasattr(nn, "Dropout1d") else (nn.Dropout, nn.Dropout2d, nn.Dropout3d, nn.AlphaDropout, nn.FeatureAlphaDropout)

ALMOST_EVERYWHERE = ("{layers}: differentiable only almost everywhere (a kink or a switch between inputs); "
                     "the accounted Jacobian is the one autograd takes at the kink, and an input that lands "
                     "exactly on it has no Fisher information defined there")


def _describe(name, module):
    return f"layer '{name}' ({type(module).__name__})" if name else f"the model ({type(module).__name__})"


def check_module(model, accounting=True):
    """Raise ValueError for a layer FIL accounting (or, accounting=False, per-example DP-SGD) cannot
    take; return the caveats of the others (a list of strings, empty for a smooth model)."""
    if not isinstance(model, nn.Module):
        raise ValueError(f"model: expected a torch.nn.Module, got {type(model).__name__}")
    nonsmooth = []
    for name, module in model.named_modules():
        if isinstance(module, nn.modules.batchnorm._BatchNorm) and (module.training or module.running_mean is None):
            raise ValueError(f"{_describe(name, module)}: batch normalisation in train mode (or without running "
                             "statistics) couples the examples of a batch (an example's output uses the batch's "
                             "statistics), so its per-example gradient and Fisher information are not defined; use "
                             "GroupNorm or LayerNorm (Opacus refuses it too), or call .eval() on it to normalise "
                             "with its fixed running statistics")
        if isinstance(module, nn.RNNBase):
            raise ValueError(f"{_describe(name, module)}: recurrent layers run as one fused kernel over the "
                             "sequence, which vmap cannot take example by example (neither for per-example "
                             "gradients nor their Jacobians); write the recurrence from nn.Linear layers and "
                             "elementwise gates in a loop over the sequence (PyTorch 1.13's vmap cannot batch "
                             "nn.LSTMCell's fused kernel either)")
        if accounting and isinstance(module, DROPOUT) and module.training and module.p > 0:
            raise ValueError(f"{_describe(name, module)}: dropout in train mode makes the released gradient a "
                             "random function of the example; call .eval() on it, remove it, or set p = 0")
        if isinstance(module, NONSMOOTH):
            nonsmooth.append(name or type(module).__name__)
    if not nonsmooth:
        return []
    return [ALMOST_EVERYWHERE.format(layers=", ".join(f"'{n}'" for n in nonsmooth))]
