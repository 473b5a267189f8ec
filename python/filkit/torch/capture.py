"""What the user's loop did to the model between two optimizer steps (docs/pytorch.md, "The loop's
own gradient"): hooks on the module record, for each forward pass with gradients enabled, the
input as the module received it (after any transform in the loop), its output and the gradient the
loop's backward() put at that output, and (per_layer) every trained layer's input and output
gradient, from which per_example.py forms the per-example gradients without a second backward.
Forward passes under torch.no_grad() (evaluation) are not recorded; filkit's own passes (the
accountant's) are let by (checks.paused).
"""
import torch

from .checks import LoopMismatch, attach, detach, graph_operations, paused
from .per_example import add_blocks, layer_gradients


def autocast_enabled():
    """Whether a torch.autocast region is active (CUDA or CPU; the names of PyTorch 1.13 to 2.x)."""
    try:
        return torch.is_autocast_enabled("cuda") or torch.is_autocast_enabled("cpu")
    except TypeError:  # PyTorch < 2.4: no device argument
        return torch.is_autocast_enabled() or torch.is_autocast_cpu_enabled()


class LayerUse:
    """One call of a trained layer inside a recorded forward: its input and output gradient."""

    def __init__(self, name, layer, activation):
        self.name, self.layer, self.activation = name, layer, activation
        self.gradient = None
        self.gradients = 0

    def on_gradient(self, gradient):
        self.gradient = gradient.detach() if self.gradient is None else self.gradient + gradient.detach()
        self.gradients += 1


class ForwardRecord:
    """One forward pass of the model with gradients enabled."""

    def __init__(self, inputs, baseline):
        self.input = inputs
        self.baseline = baseline  # each trained parameter's .grad before this pass (None: none)
        self.output = None
        self.output_gradient = None
        self.backwards = 0  # how many backward passes reached the output
        self.layers = []

    def on_gradient(self, gradient):
        self.output_gradient = gradient.detach()
        self.backwards += 1


class LoopCapture:
    """The hooks make_private puts on the user's module (remove() takes them off)."""

    def __init__(self, module, trained, per_layer):
        self.module, self.trained = module, trained  # trained: {name: parameter} at make_private
        self.paused = 0
        self.records = []
        self.current = None
        self.stray = set()  # trained layers called outside a recorded forward of the module
        self.graphs = {}  # (input shape, training) -> (random ops, non-smooth ops)
        self.handles = [module.register_forward_pre_hook(self._before)]
        if per_layer:  # (before the module's own forward hook: a model with parameters of its own is a layer too)
            for name, layer in module.named_modules():
                if any(p.requires_grad for p in layer.parameters(recurse=False)):
                    self.handles.append(layer.register_forward_hook(self._layer_hook(name)))
        self.handles.append(module.register_forward_hook(self._after))
        attach(module, self)

    def remove(self):
        for handle in self.handles:
            handle.remove()
        detach(self.module)

    def _recording(self):
        return self.paused == 0 and torch.is_grad_enabled()

    def _before(self, module, args):
        if not self._recording():
            return
        if self.current is not None:
            raise LoopMismatch("the model's forward was entered again inside its own forward (a recursive call): "
                               "filkit.torch records one forward of the model per batch")
        if len(args) != 1 or not isinstance(args[0], torch.Tensor):
            raise LoopMismatch("the model was called with " + (f"{len(args)} positional arguments" if len(args) != 1
                                                               else f"a {type(args[0]).__name__}") +
                               ": make_private takes a model called with one tensor, the batch's inputs")
        if autocast_enabled():
            raise LoopMismatch("the model was called under torch.autocast (mixed precision): make_private refuses it, "
                               "since the per-example gradients it privatises must sum to the loop's own gradient "
                               "and the accounting's Jacobians need the model's own precision; train in float32 "
                               "(or float64) with make_private")
        baseline = {name: None if p.grad is None else p.grad.detach().clone() for name, p in self.trained.items()}
        self.current = ForwardRecord(args[0].detach(), baseline)
        self.records.append(self.current)

    def _after(self, module, args, output):
        record, self.current = self.current, None
        if record is None:
            return
        if not isinstance(output, torch.Tensor):
            raise LoopMismatch(f"the model returned a {type(output).__name__}: make_private takes a model whose "
                               "forward returns one tensor (the outputs the loss is taken of)")
        record.output = output.detach()
        if output.requires_grad:
            output.register_hook(record.on_gradient)
            key = (tuple(record.input.shape[1:]), module.training)
            if key not in self.graphs:
                self.graphs[key] = graph_operations(output)

    def _layer_hook(self, name):
        def hook(layer, args, output):
            if not self._recording():
                return
            if self.current is None:
                self.stray.add(name)
                return
            use = LayerUse(name, layer, args[0].detach() if len(args) == 1 and isinstance(args[0], torch.Tensor)
                           else None)
            self.current.layers.append(use)
            if isinstance(output, torch.Tensor) and output.requires_grad:
                output.register_hook(use.on_gradient)
        return hook

    def take(self):
        """(the forward records that a backward reached since the last take, the trained layers
        called outside a recorded forward); the records without a backward are dropped."""
        records, stray = [r for r in self.records if r.backwards], sorted(self.stray)
        self.records, self.stray = [], set()
        return records, stray

    def operations(self):
        """(random ops, non-smooth ops) over every graph seen."""
        random, nonsmooth = set(), set()
        for r, n in self.graphs.values():
            random |= r
            nonsmooth |= n
        return random, nonsmooth


def per_example_blocks(capture, record):
    """{trained parameter name: per-example block} of the loss the loop reduced, from the layers'
    captured inputs and output gradients (per_example.py)."""
    names = {id(p): name for name, p in capture.trained.items()}
    blocks = {}
    for use in record.layers:
        if use.gradient is None:
            continue  # the layer's output did not reach the loss
        if use.gradients > 1:
            raise LoopMismatch(f"layer '{use.name}': {use.gradients} backward passes reached it in one forward "
                               "(backward(retain_graph=True) called twice?): one backward per forward")
        if use.activation is None:
            raise LoopMismatch(f"layer '{use.name}' ({type(use.layer).__name__}) was called with other than one "
                               "tensor: its per-example gradient cannot be formed from its input")
        B = record.input.shape[0]
        if use.activation.shape[:1] != (B,) or use.gradient.shape[:1] != (B,):
            raise LoopMismatch(f"layer '{use.name}' ({type(use.layer).__name__}) was called on a tensor whose first "
                               f"dimension {tuple(use.activation.shape)[:1]} is not the batch's {B} examples (a "
                               "reshape that merges or moves the batch dimension): per-example gradients need "
                               "the batch first in every trained layer")
        with paused(capture.module):  # the vmap rule calls the layer again
            made = layer_gradients(use.layer, use.activation, use.gradient)
        for own, block in made.items():
            tensor = getattr(use.layer, own)
            name = names.get(id(tensor))
            if name is None:
                continue  # a frozen parameter
            blocks[name] = block if name not in blocks else add_blocks(blocks[name], block)
    return blocks
