"""What filkit.torch refuses in a user's loop rather than compute something else (docs/pytorch.md,
"Nothing silent"): non-finite values, a loop whose backward() is not the accounted loss, and
operations in the model's graph whose Jacobian is random or defined only almost everywhere.
Every refusal is a LoopMismatch (a ValueError) naming the step and the example ids."""
import contextlib
import weakref
from collections import namedtuple

import torch

# One accounted (part of a) batch: per-example traces (CPU float64), and the sums of the clipped
# and unclipped per-example gradients (flat, None unless asked for).
AccountedBatch = namedtuple("AccountedBatch", "trace clipped_sum gradient_sum")


class LoopMismatch(ValueError):
    """The user's loop did something filkit.torch cannot privatise or account as it is."""


def _listed(ids, limit=8):
    ids = [int(i) for i in ids]
    shown = ", ".join(map(str, ids[:limit]))
    return shown + (f" and {len(ids) - limit} more" if len(ids) > limit else "")


class Deferred:
    """Checks whose outcome lives on the model's device, read back together (one synchronisation
    of a GPU per step, not one per check) before anything is released: add() a boolean tensor and
    a function making the error where it is false."""

    def __init__(self):
        self.items = []

    def add(self, ok, error):
        self.items.append((ok.reshape(()), error))

    def finite(self, values, ids, step, what):
        if values.numel():
            flat = values.detach().reshape(values.shape[0], -1)
            self.add(torch.isfinite(flat).all(), lambda: _nonfinite_error(flat, ids, step, what))

    def resolve(self):
        if not self.items:
            return
        items, self.items = self.items, []
        passed = [None] * len(items)
        by_device = {}
        for i, (ok, _) in enumerate(items):
            by_device.setdefault(ok.device, []).append(i)
        for rows in by_device.values():  # one read-back per device (the inputs may be on the CPU)
            for i, ok in zip(rows, torch.stack([items[i][0] for i in rows]).cpu().tolist()):
                passed[i] = ok
        for ok, (_, error) in zip(passed, items):
            if not ok:
                raise error()


def _nonfinite_error(flat, ids, step, what):
    rows = torch.nonzero((~torch.isfinite(flat).all(1)).cpu()).flatten()
    return LoopMismatch(f"step {step}: {what} of example id(s) {_listed(ids[rows])} are not finite (NaN or "
                        "infinite); nothing was accounted or released for this step")


def refuse_nonfinite(name, values, ids, step, what=None):
    """LoopMismatch naming the examples (rows of `values`) with a NaN or infinite entry."""
    checks = Deferred()
    checks.finite(values, ids, step, what or name)
    checks.resolve()


def check_output_gradient(expansion, output_gradient, ids, step, checks):
    """The gradient the loop's backward() put at the model's outputs must be loss_fn's on the
    loader's targets (expansion.gradient is s times it, s the reduction's scale): added to
    `checks` (a Deferred)."""
    B = expansion.batch
    if B == 0:
        return
    got = output_gradient.detach().reshape(B, -1).to(expansion.gradient.dtype)
    checks.finite(got, ids, step, "the gradients at the model's outputs")
    want = expansion.gradient  # s dL/do of loss_fn; got is dL/do of the loop's own loss
    gap = (got * expansion.scale - want).norm(dim=1)
    size = want.norm(dim=1).max()
    tolerance = 1e-9 if want.dtype == torch.float64 else 2e-4

    def error():
        worst = int(gap.argmax())
        return LoopMismatch(
            f"step {step}: the gradient that the loop's loss.backward() put at the model's outputs is not that of "
            f"loss_fn on the loader's targets (example id {int(ids[worst])}: relative gap "
            f"{float(gap[worst] / (size + 1e-300)):.3g}). The loop's loss is what is privatised and must be what "
            "is accounted: pass it as make_private(..., loss_fn=...) (the loss of a batch, e.g. "
            "lambda out, y: F.cross_entropy(out, y, label_smoothing=0.1)), with loss_reduction as it reduces; "
            "targets changed in the loop (mixup, soft labels) cannot be accounted")

    checks.add((gap <= tolerance * size + 1e-300).all(), error)


_captures = weakref.WeakKeyDictionary()  # module -> its LoopCapture (capture.py)


def attach(module, capture):
    _captures[module] = capture


def detach(module):
    _captures.pop(module, None)


def capture_of(module):
    return _captures.get(module)


@contextlib.contextmanager
def paused(module):
    """filkit's own forward passes of the module (the accountant's) are not the loop's: the
    capture's hooks let them by."""
    capture = _captures.get(module)
    if capture is None:
        yield
        return
    capture.paused += 1
    try:
        yield
    finally:
        capture.paused -= 1


RANDOM_REFUSAL = ("step {step}: the model's forward draws random numbers ({detail}): dropout or the like, perhaps "
                  "functional; the accounted gradient would be a random function of the example, which FIL does "
                  "not cover. Remove it, switch it off in eval mode, or make_private(..., account=False)")


@contextlib.contextmanager
def vmap_refusals(step):
    """functorch's vmap refuses random operations (its default randomness='error') and operations it
    has no batching rule for: those refusals, as what they mean for the accounting."""
    try:
        yield
    except RuntimeError as error:
        if "random operation" in str(error):
            raise LoopMismatch(RANDOM_REFUSAL.format(step=step, detail="vmap refused a random operation")) from error
        if "Batching rule not implemented" in str(error):
            raise LoopMismatch(f"step {step}: the model uses an operation that vmap cannot take example by example "
                               f"({error}); the accountant needs each example's gradient as a function of the "
                               "example: write that part from operations vmap batches (nn.Linear, convolutions, "
                               "elementwise functions)") from error
        raise


# Autograd nodes by name (PyTorch 1.13 to 2.x): random ones, whose Jacobian is a random function of
# the example, and those differentiable only almost everywhere.
RANDOM_NODES = ("NativeDropoutBackward", "FusedDropoutBackward", "RreluWithNoiseBackward", "BernoulliBackward")
NONSMOOTH_NODES = ("ReluBackward", "ThresholdBackward", "MaxPool1DWithIndicesBackward", "MaxPool2DWithIndicesBackward",
                   "MaxPool3DWithIndicesBackward", "AdaptiveMaxPool1DBackward", "AdaptiveMaxPool2DBackward",
                   "AdaptiveMaxPool3DBackward", "HardtanhBackward", "LeakyReluBackward", "ClampBackward",
                   "ClampMinBackward", "ClampMaxBackward", "AbsBackward", "SignBackward", "MaximumBackward",
                   "MinimumBackward", "MaxBackward", "MinBackward", "HardswishBackward", "HardsigmoidBackward",
                   "PreluBackward", "HardshrinkBackward", "SoftshrinkBackward", "EluBackward", "CeluBackward",
                   "SeluBackward", "RoundBackward", "FloorBackward", "CeilBackward", "SortBackward",
                   "TopkBackward", "MedianBackward", "KthvalueBackward", "MaxUnpool2DBackward")


def _kind(node_name):
    stem = node_name.rstrip("0123456789")
    if stem in RANDOM_NODES:
        return "random"
    if stem in NONSMOOTH_NODES:
        return "nonsmooth"
    return None


def graph_operations(output):
    """({random op names}, {non-smooth op names}) in the autograd graph that produced `output`."""
    random, nonsmooth = set(), set()
    seen, stack = set(), [output.grad_fn] if output.grad_fn is not None else []
    while stack:
        node = stack.pop()
        if node is None or node in seen:
            continue
        seen.add(node)
        kind = _kind(type(node).__name__)
        if kind == "random":
            random.add(type(node).__name__)
        elif kind == "nonsmooth":
            nonsmooth.add(type(node).__name__)
        stack.extend(next_node for next_node, _ in node.next_functions)
    return random, nonsmooth


GRAPH_CAVEAT = ("operations in the model's graph differentiable only almost everywhere: {ops} (a functional "
                "F.relu, max, clamp, ...); the accounted Jacobian is the one autograd takes at a kink, and an "
                "input exactly at one has no Fisher information defined there")
