"""filkit.torch's bad inputs (issue 50's filkit.torch cases and variations): each refused with a
message naming the argument, the value and the rule, and nothing left half done."""
import math

import numpy as np
import pytest

torch = pytest.importorskip("torch")
nn, F = torch.nn, torch.nn.functional
from filkit.torch import FilAccountant, LoopMismatch, make_private  # noqa: E402


def accountant(**options):
    torch.manual_seed(0)
    settings = dict(loss_fn=F.cross_entropy, clip_norm=1.0, noise_multiplier=1.0, sample_rate=0.5)
    settings.update(options)
    return FilAccountant(nn.Linear(3, 2).double(), **settings)


X, Y = torch.rand(2, 3, dtype=torch.float64), torch.tensor([0, 1])


@pytest.mark.parametrize("option, value, message", [
    ("clip_norm", 1e-300, r"clip_norm = 1e-300 and noise_multiplier = 1.0: .*sigma C = 1e-300 must lie in"),
    ("clip_norm", 1e300, r"sigma C = 1e\+300 must lie in"),
    ("noise_multiplier", 1e300, r"sigma C = 1e\+300 must lie in"),
    ("clip_norm", float("nan"), "clip_norm = nan: must be a finite number > 0"),
    ("clip_norm", True, "clip_norm = True: must be a finite number > 0"),
    ("seed", -1, "seed = -1: must be an integer from 0 to"),
    ("seed", 1.5, "seed = 1.5: must be an integer"),
    ("probes", np.int64(0), "probes = 0: must be an integer from 1"),
    ("num_examples", 0, "num_examples = 0: must be an integer from 1"),
    ("memory_budget", float("inf"), "memory_budget = inf: must be a finite number > 0"),
])
def test_bad_numbers_are_refused_by_name(option, value, message):
    with pytest.raises(ValueError, match=message):
        accountant(**{option: value})


def test_numpy_numbers_are_numbers():
    acc = accountant(clip_norm=np.float32(1.0), noise_multiplier=np.float64(1.0), sample_rate=np.float32(0.5),
                     seed=np.int64(3), probes=np.int32(2))
    assert acc.settings["clip_norm"] == 1.0 and type(acc.settings["clip_norm"]) is float
    acc.step(X, Y, [0, 1])


def test_nan_inputs_and_parameters_are_refused_naming_the_examples():
    acc = accountant()
    x = X.clone()
    x[1, 2] = float("nan")
    with pytest.raises(LoopMismatch, match=r"step 1: inputs of example id\(s\) 8 are not finite"):
        acc.step(x, Y, [4, 8])
    model = nn.Linear(3, 2).double()
    with torch.no_grad():
        model.weight[0, 0] = float("nan")
    acc = FilAccountant(model, loss_fn=F.cross_entropy, clip_norm=1.0, noise_multiplier=1.0, sample_rate=0.5)
    with pytest.raises(LoopMismatch, match="the model's outputs of example id"):
        acc.step(X, Y, [0, 1])
    assert acc.steps == 0 and acc._trace.numel() == 0  # nothing accounted


def test_reading_ids_outside_the_examples_is_refused():
    acc = accountant(num_examples=4)
    acc.step(X, Y, [0, 1])
    for ids, message in (([-1], "example id -1 is not from 0 to n - 1 = 3"), ([4], "example id 4"),
                         ([0.5], "integer example ids"), ([[0, 1]], "integer example ids")):
        for read in (acc.dfil, acc.fisher_trace, acc.eta, acc.mse_bound):
            with pytest.raises(ValueError, match=message):
                read(ids)
    np.testing.assert_array_equal(acc.dfil([1, 0]), acc.dfil()[[1, 0]])


def test_a_huge_example_id_is_refused_with_the_memory_it_needs():
    acc = accountant(memory_budget=2 ** 20)
    with pytest.raises(ValueError, match=r"example id 300000000 needs .* 9155.3 MiB\) beyond memory_budget = 1.0 MiB"):
        acc.step(X, Y, [0, 300_000_000])
    assert acc.steps == 0


def states():
    acc = accountant(num_examples=4)
    acc.step(X, Y, [0, 1])
    return acc, acc.state_dict()


@pytest.mark.parametrize("change, message", [
    (lambda s: "not a dict", "expected the dict state_dict\\(\\) returns, got str"),
    (lambda s: {k: v for k, v in s.items() if k != "trace"}, "the state lacks 'trace'"),
    (lambda s: {**s, "parameter_count": 7}, "saved for a model with 7 trained parameters, this model has 8"),
    (lambda s: {**s, "settings": {**s["settings"], "sample_rate": math.nan}}, "saved with settings"),
    (lambda s: {**s, "trace": s["trace"] * -1 - 1}, "'trace' holds a negative or non-finite value"),
    (lambda s: {**s, "spectral": s["spectral"] + math.nan}, "'spectral' holds a negative or non-finite"),
    (lambda s: {**s, "times_sampled": s["times_sampled"] + 0.5}, "not a whole count"),
    (lambda s: {**s, "labels": s["labels"][:1]}, "one entry per example"),
    (lambda s: {**s, "steps": -3}, "steps = -3: must be an integer"),
    (lambda s: {**s, "trace": s["trace"].float()}, "'trace' must be a 1-d float64 tensor"),
    (lambda s: {**s, "generator": {"state": "garbage"}}, "generator state is not one"),
])
def test_a_bad_state_is_refused_and_the_accountant_left_as_it_was(change, message):
    acc, state = states()
    other = accountant(num_examples=4)
    other.step(X, Y, [2, 3])
    before = other.state_dict()
    with pytest.raises(ValueError, match=message):
        other.load_state_dict(change(state))
    after = other.state_dict()
    assert after["steps"] == before["steps"]
    torch.testing.assert_close(after["trace"], before["trace"])
    other.load_state_dict(state)  # the good state still loads
    np.testing.assert_array_equal(other.dfil(), acc.dfil())


def test_a_state_of_another_model_is_refused():
    _, state = states()
    wider = FilAccountant(nn.Linear(4, 2).double(), loss_fn=F.cross_entropy, clip_norm=1.0, noise_multiplier=1.0,
                          sample_rate=0.5, num_examples=4)
    with pytest.raises(ValueError, match="saved for a model with 8 trained parameters, this model has 10"):
        wider.load_state_dict(state)


def test_make_private_refuses_bad_numbers_by_name():
    model = nn.Linear(3, 2).double()
    loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(X, Y), batch_size=1)
    sgd = torch.optim.SGD(model.parameters(), lr=0.1)
    for options, message in ((dict(max_grad_norm=1e-300), r"sigma C = 1e-300 must lie in"),
                             (dict(seed=-1), "seed = -1: must be an integer"),
                             (dict(noise_multiplier=np.float32(1.0), max_grad_norm=np.float64(1.0), seed=2**63),
                              "seed = 9223372036854775808")):
        settings = dict(noise_multiplier=1.0, max_grad_norm=1.0)
        settings.update(options)
        with pytest.raises(ValueError, match=message):
            make_private(model, sgd, loader, **settings)


def test_the_memory_budget_counts_the_activations_and_refuses_a_lane_over_it():
    """A 16-channel convolution of 64 x 64 images: an example's activations (2 x 65,536 elements)
    dominate its parameters (170), so they set the chunk; a budget below one lane is refused."""
    model = nn.Sequential(nn.Conv2d(1, 16, 3, padding=1), nn.Tanh(), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
                          nn.Linear(16, 2)).double()
    x, y = torch.rand(6, 1, 64, 64, dtype=torch.float64), torch.tensor([0, 1] * 3)
    acc = FilAccountant(model, loss_fn=F.cross_entropy, clip_norm=1.0, noise_multiplier=1.0, sample_rate=0.5,
                        memory_budget=12 * 2 ** 20)
    activations = acc._activation_elements(x[:1])
    assert activations == 2 * 16 * 64 * 64 + 16 + 16 + 2
    examples, _ = acc._chunk_sizes(6, 178, 4096, 8, torch.device("cpu"), activations)
    assert examples == 2  # 12 MiB / (8 (16 (178 + 4096) + 4 x 131,122)) bytes
    whole = FilAccountant(model, loss_fn=F.cross_entropy, clip_norm=1.0, noise_multiplier=1.0, sample_rate=0.5,
                          trace="exact", memory_budget=2 ** 30)
    chunked = FilAccountant(model, loss_fn=F.cross_entropy, clip_norm=1.0, noise_multiplier=1.0, sample_rate=0.5,
                            trace="exact", memory_budget=12 * 2 ** 20)
    torch.testing.assert_close(chunked.step(x, y, range(6)), whole.step(x, y, range(6)), rtol=1e-12, atol=0)
    tiny = FilAccountant(model, loss_fn=F.cross_entropy, clip_norm=1.0, noise_multiplier=1.0, sample_rate=0.5,
                         memory_budget=2 ** 20)
    with pytest.raises(ValueError, match=r"memory_budget = 1.0 MiB: one example's accounting needs about 4.5 MiB"):
        tiny.step(x, y, range(6))


class Recurrent(nn.Module):
    def __init__(self, cell):
        super().__init__()
        torch.manual_seed(0)
        self.cell = cell
        self.recurrent = None if cell else nn.LSTM(3, 4, batch_first=True)
        self.lstm_cell = nn.LSTMCell(3, 4) if cell else None
        self.head = nn.Linear(4, 2)
        self.double()

    def forward(self, x):
        if not self.cell:
            return self.head(self.recurrent(x)[0][:, -1])
        h = c = x.new_zeros(x.shape[0], 4)
        for t in range(x.shape[1]):
            h, c = self.lstm_cell(x[:, t], (h, c))
        return self.head(h)


def test_recurrent_layers_are_refused_with_the_reason():
    with pytest.raises(ValueError, match=r"layer 'recurrent' \(LSTM\): recurrent layers run as one fused kernel"):
        accountant_of(Recurrent(cell=False))
    acc = accountant_of(Recurrent(cell=True))
    try:
        acc.step(torch.rand(2, 5, 3, dtype=torch.float64), torch.tensor([0, 1]), [0, 1])
    except LoopMismatch as error:  # PyTorch 1.13's vmap cannot batch the cell's fused kernel: said so
        assert "an operation that vmap cannot take example by example" in str(error)


def accountant_of(model, **options):
    return FilAccountant(model, loss_fn=F.cross_entropy, clip_norm=1.0, noise_multiplier=1.0, sample_rate=0.5,
                         **options)


def test_a_loss_that_fails_is_said_with_what_it_was_given():
    acc = accountant()
    with pytest.raises(ValueError, match=r"loss_fn failed on the batch's outputs \(2, 2\) and targets \(2,\) "
                                         r"torch.int64, from 0 to 7: Target 7 is out of bounds"):
        acc.step(X, torch.tensor([0, 7]), [0, 1])


def test_string_labels_in_write_summary_are_refused_naming_class_names(tmp_path):
    pytest.importorskip("filkit._filkit")
    acc = accountant()
    acc.step(X, Y, [0, 1])
    with pytest.raises(ValueError, match="labels: expected numeric class indices .* got <U1 .* class_names="):
        acc.write_summary(str(tmp_path / "a.json"), str(tmp_path / "a.csv"), labels=np.array(["a", "b"]))
    assert not (tmp_path / "a.json").exists()
