"""Networks users bring: TorchScript modules and layer specifications, checked against PyTorch's
own autograd on the user's module (an implementation independent of filkit's rebuilt network),
refusals of layers FIL accounting cannot take, and colour images through the dpsgd job."""
import os

import numpy as np
import pytest

import filkit

torch = pytest.importorskip("torch")
nn = torch.nn
pytestmark = pytest.mark.skipif(not filkit.networks_available(), reason="built without LibTorch")

IMAGE = (3, 8, 7)  # colour, not square
D = IMAGE[0] * IMAGE[1] * IMAGE[2]


def colour_module():
    torch.manual_seed(0)
    return nn.Sequential(
        nn.Conv2d(3, 4, 3, stride=1, padding=1), nn.Tanh(), nn.AvgPool2d(2),
        nn.Conv2d(4, 5, (2, 2), stride=(1, 1)), nn.GELU(), nn.Flatten(),
        nn.Linear(5 * 3 * 2, 6), nn.ELU(0.5), nn.Softplus(beta=2.0), nn.Linear(6, 3, bias=False), nn.Sigmoid(),
        nn.Linear(3, 3)).double()


def save(module, tmp_path, name, traced=False):
    path = str(tmp_path / name)
    if traced:
        torch.jit.trace(module, torch.zeros((2,) + IMAGE, dtype=torch.double)).save(path)
    else:
        torch.jit.script(module).save(path)
    return path


def soft_clip_factor(norm, C):  # docs/mathematics.md, section 7.2: 1 / (GELU(|g|/C - 1) + 1), GELU's tanh form
    t = norm / C - 1.0
    return 1.0 / (0.5 * t * (1.0 + torch.tanh(np.sqrt(2.0 / np.pi) * (t + 0.044715 * t ** 3))) + 1.0)


def torch_clipped_gradient(module, x, y, C):
    """The clipped gradient of one example as a differentiable function of x, by PyTorch."""
    params = list(module.parameters())
    loss = nn.functional.cross_entropy(module(x.reshape((1,) + IMAGE)), torch.tensor([y]))
    g = torch.cat([t.reshape(-1) for t in torch.autograd.grad(loss, params, create_graph=True)])
    return soft_clip_factor(g.norm(), C) * g


@pytest.mark.parametrize("traced", [False, True])
def test_a_torchscript_module_gives_pytorchs_own_gradients_and_jacobian_products(tmp_path, traced):
    module = colour_module()
    path = save(module, tmp_path, "net.pt", traced)
    net = filkit.Network("custom", D, 3, torchscript=path, image=IMAGE)
    assert net.layers.startswith("conv:4:3:1:1,tanh,avgpool:2:2:0,conv:5:2:1:0,gelu,flatten,dense:6,elu:0.5")
    assert net.parameter_count == sum(p.numel() for p in module.parameters())
    w = net.initial_parameters(seed=123)  # the module's own weights, whatever the seed
    np.testing.assert_array_equal(w, torch.cat([p.detach().reshape(-1) for p in module.parameters()]).numpy())
    rng = np.random.default_rng(1)
    X = rng.uniform(size=(4, D))
    y = np.array([0.0, 1.0, 2.0, 1.0])
    with torch.no_grad():
        expected = module(torch.from_numpy(X).reshape((4,) + IMAGE)).numpy()
    np.testing.assert_allclose(net.logits(w, X), expected, rtol=1e-12, atol=1e-14)
    C = 0.05  # clipping active
    V = rng.normal(size=(4, D))
    U = rng.normal(size=(4, net.parameter_count))
    clipped = net.clipped_gradients(w, X, y, C)
    Gv = net.jacobian_vector_products(w, X, y, C, V)
    GtU = net.vector_jacobian_products(w, X, y, C, U)
    for b in range(4):
        x = torch.from_numpy(X[b]).requires_grad_(True)
        g = torch_clipped_gradient(module, x, int(y[b]), C)
        np.testing.assert_allclose(clipped[b], g.detach().numpy(), rtol=1e-10, atol=1e-14)
        u = torch.from_numpy(U[b])
        gtu = torch.autograd.grad(g @ u, x, retain_graph=True)[0].numpy()
        np.testing.assert_allclose(GtU[b], gtu, rtol=1e-9, atol=1e-13)
        _, gv = torch.autograd.functional.jvp(
            lambda z: torch_clipped_gradient(module, z, int(y[b]), C), torch.from_numpy(X[b]), torch.from_numpy(V[b]))
        np.testing.assert_allclose(Gv[b], gv.numpy(), rtol=1e-9, atol=1e-13)


def refusal(tmp_path, module, *expected):
    path = save(module.double(), tmp_path, "bad.pt")
    with pytest.raises(ValueError) as error:
        filkit.Network("custom", D, 3, torchscript=path, image=IMAGE)
    for part in expected:
        assert part in str(error.value), str(error.value)


def test_layers_that_fil_accounting_cannot_take_are_refused_with_the_reason(tmp_path):
    conv = lambda: nn.Conv2d(3, 2, 3)
    head = lambda: [nn.Flatten(), nn.Linear(2 * 6 * 5, 3)]
    refusal(tmp_path, nn.Sequential(conv(), nn.ReLU(), *head()), "operation 2 (relu)", "not smooth", "use tanh")
    refusal(tmp_path, nn.Sequential(nn.MaxPool2d(1), conv(), *head()), "(max_pool2d)", "use avgpool")
    refusal(tmp_path, nn.Sequential(conv(), nn.BatchNorm2d(2), *head()), "(batch_norm)", "couples the examples")

    class Residual(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv, self.head = nn.Conv2d(3, 3, 3, padding=1), nn.Sequential(nn.Flatten(), nn.Linear(D, 3))

        def forward(self, x):
            return self.head(x + torch.tanh(self.conv(x)))

    refusal(tmp_path, Residual(), "is not one of the supported layers")

    class Scaled(nn.Module):  # a chain whose forward also scales: caught by comparing outputs
        def __init__(self):
            super().__init__()
            self.layers = nn.Sequential(nn.Flatten(), nn.Linear(D, 3))

        def forward(self, x):
            return self.layers(x)

    path = save(Scaled().double(), tmp_path, "ok.pt")
    assert filkit.Network("custom", D, 3, torchscript=path, image=IMAGE).parameter_count == 3 * D + 3
    refusal(tmp_path, nn.Sequential(nn.Flatten(), nn.Linear(D, 4)), "the last layer's output is 4")
    with open(tmp_path / "junk.pt", "wb") as f:
        f.write(b"not a zip")
    with pytest.raises(ValueError, match="not a readable TorchScript"):
        filkit.Network("custom", D, 3, torchscript=str(tmp_path / "junk.pt"), image=IMAGE)


def image_data(n, seed):
    rng = np.random.default_rng(seed)
    X = rng.uniform(size=(n, D))
    y = (np.arange(n) % 3).astype(float)
    return filkit.Dataset(X, y, image=IMAGE)


def test_dpsgd_trains_a_specification_and_a_torchscript_module_on_colour_images(tmp_path):
    train, test = image_data(40, 0), image_data(20, 1)
    options = dict(batch_size=10, steps=4, noise_multiplier=1.0, clip_norm=1.0, step_size=0.1, seed=5,
                   trace="gaussian", probes=1, spectral="none")
    spec = "conv:4:3:1:1,tanh,avgpool:2,flatten,dense:5,softplus,dense:3"
    result, summary = filkit.train_dpsgd(train, test, model="custom", arch=spec, **options)
    assert summary["settings"]["dpsgd"]["network"]["layers"] == spec
    assert result.final_snapshot.fisher_trace.shape == (40,)
    assert np.all(result.final_snapshot.fisher_trace >= 0) and result.final_snapshot.fisher_trace.max() > 0
    path = save(colour_module(), tmp_path, "net.pt")
    result, summary = filkit.train_dpsgd(train, test, model="custom", torchscript=path, **options)
    assert summary["settings"]["dpsgd"]["network"]["torchscript"] == path
    with pytest.raises(ValueError, match="needs model = custom"):
        filkit.train_dpsgd(train, test, model="cnn", arch=spec, **options)


def write_cifar_batches(directory, records_per_file=20, seed=0):
    """CIFAR-10's binary layout: a label byte, then 3 x 32 x 32 channel-major pixel bytes."""
    rng = np.random.default_rng(seed)
    os.makedirs(directory, exist_ok=True)
    for name in [f"data_batch_{i}.bin" for i in range(1, 6)] + ["test_batch.bin"]:
        labels = rng.integers(0, 10, size=(records_per_file, 1), dtype=np.uint8)
        pixels = rng.integers(0, 256, size=(records_per_file, 3072), dtype=np.uint8)
        np.concatenate([labels, pixels], axis=1).tofile(os.path.join(directory, name))


def test_the_cifar_convnet_trains_on_cifar10_files_from_the_cli_job(tmp_path):
    write_cifar_batches(tmp_path / "cifar")
    out = tmp_path / "out.csv"
    summary = filkit.run("dpsgd", data=f"cifar10:{tmp_path / 'cifar'}", model="cifar-cnn", classes=[0, 1, 2],
                         standardize="channel", batch_size=8, steps=2, trace="gaussian", probes=1, spectral="none",
                         seed=1, out=str(out), quiet=True)["summary"]
    assert summary["settings"]["model"] == "cifar-cnn"
    # 3 x 32 x 32 in, 3 classes out: the CIFAR ConvNet's 550,570 parameters less 7 x 129 in the last layer.
    assert summary["parameter_count"] == 549667 and "input [3 x 32 x 32]" in summary["architecture"]
    assert out.exists()


def test_models_out_loads_back_into_the_users_module(tmp_path):
    # --models-out writes each run's parameters in the order of module.parameters(), so that
    # vector_to_parameters puts the trained weights back into the user's own module, which then
    # classifies the test set as the summary says filkit's model does.
    rng = np.random.default_rng(3)
    X, X_test = rng.uniform(size=(40,) + IMAGE), rng.uniform(size=(30,) + IMAGE)
    y, y_test = np.arange(40) % 3, np.arange(30) % 3
    data = tmp_path / "images.npz"
    np.savez(data, X=X, y=y, X_test=X_test, y_test=y_test)
    module = colour_module()
    models = tmp_path / "models.csv"
    summary = filkit.run("dpsgd", data=str(data), model="custom", torchscript=save(module, tmp_path, "net.pt"),
                         image_layout="nchw", batch_size=10, steps=6, noise_multiplier=0.5, clip_norm=1.0,
                         step_size=0.5, optimizer="sgd", trace="gaussian", probes=1, spectral="none", runs=2, seed=5,
                         models_out=str(models), quiet=True)["summary"]
    assert summary["preprocessing"]["order"] == []  # the parameters act on the pixels as stored
    rows = np.loadtxt(models, delimiter=",", skiprows=1)
    assert rows.shape == (2, 1 + sum(p.numel() for p in module.parameters()))
    accuracies = summary["snapshots"][-1]["test_accuracy_per_run"]
    for run, row in enumerate(rows):
        assert row[0] == run
        trained = colour_module()
        nn.utils.vector_to_parameters(torch.from_numpy(row[1:]), trained.parameters())
        assert not np.array_equal(row[1:], nn.utils.parameters_to_vector(module.parameters()).detach().numpy())
        with torch.no_grad():
            predicted = trained(torch.from_numpy(X_test)).argmax(1).numpy()
        assert np.mean(predicted == y_test) == pytest.approx(accuracies[run], abs=1e-12)
