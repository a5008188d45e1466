"""One device setting and batch sizes from free device memory (issue 8; CUDA paths skip without CUDA)."""

from __future__ import annotations

import os

import numpy as np
import pytest
import torch

from certified_circuits.core import devices
from certified_circuits.core.devices import CPU_BUDGET_BYTES, batch_from_memory, free_device_bytes, resolve_device

CUDA = torch.cuda.is_available()


# ---------------------------------------------------------------------------------------------- resolve_device


def test_auto_is_cpu_without_cuda(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert resolve_device("auto") == torch.device("cpu")
    assert resolve_device("cpu") == torch.device("cpu")
    assert resolve_device(torch.device("cpu")) == torch.device("cpu")


@pytest.mark.parametrize("name", ["cuda", "cuda:0", "cuda:3"])
def test_cuda_without_cuda_names_the_fix(monkeypatch: pytest.MonkeyPatch, name: str) -> None:
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(ValueError, match=f"--device {name}: CUDA is not available on this machine; "
                                         "use --device auto or cpu"):
        resolve_device(name)


@pytest.mark.parametrize("name", ["gpu", "CUDA", "cuda:", "cuda:x", "mps0", ""])
def test_unknown_device_names_are_rejected(name: str) -> None:
    with pytest.raises(ValueError, match="use auto, cpu, cuda or cuda:N"):
        resolve_device(name)


def test_cuda_index_beyond_the_devices_is_rejected(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    assert resolve_device("cuda:0") == torch.device("cuda:0")
    with pytest.raises(ValueError, match="1 CUDA device"):
        resolve_device("cuda:1")


# ---------------------------------------------------------------------------------------------- vote_device


@pytest.fixture
def fake_cuda(monkeypatch: pytest.MonkeyPatch) -> None:
    """A machine with two CUDA devices, as far as the resolver can tell (no kernel runs)."""
    monkeypatch.setattr(devices, "NVIDIA_DRIVER_FILE", "/")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)


def test_vote_device_names_on_a_cuda_machine(fake_cuda: None) -> None:
    """One policy for the votes stage, the library and the runtime table: which backend counts, and where."""
    scores = np.zeros((2, 3))
    assert devices.vote_device(scores, "auto") == torch.device("cuda")  # torch on CUDA
    assert devices.vote_device(scores, "cuda") == torch.device("cuda")
    assert devices.vote_device(scores, "cuda:1") == torch.device("cuda:1")
    assert devices.vote_device(scores, "cpu") is None  # numpy, even where CUDA is
    assert devices.vote_device(scores, torch.device("cpu")) == torch.device("cpu")  # torch on the CPU
    assert devices.vote_device(scores) is None  # follow the data: numpy scores count with numpy
    with pytest.raises(ValueError, match="2 CUDA device"):
        devices.vote_device(scores, "cuda:2")
    with pytest.raises(ValueError, match="use auto, cpu, cuda or cuda:N"):
        devices.vote_device(scores, "gpu")


def test_vote_device_follows_a_tensor_off_the_cpu() -> None:
    on_meta = torch.zeros(2, 3, device="meta")  # an accelerator's tensor, without one
    assert devices.vote_device(on_meta) == torch.device("meta")
    assert devices.vote_device(on_meta, "cpu") is None


def test_vote_device_without_cuda(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert devices.vote_device(np.zeros(2), "auto") is None
    assert not devices.cuda_available()
    with pytest.raises(ValueError, match="CUDA is not available on this machine"):
        devices.vote_device(np.zeros(2), "cuda:0")


def test_cpu_and_auto_import_no_torch_without_a_driver(tmp_path) -> None:
    """The votes stage's --device cpu (and auto on a machine without an NVIDIA driver) decides without torch."""
    import subprocess
    import sys

    code = ("import sys, numpy as np\n"
            "from certified_circuits.core import devices\n"
            "devices.NVIDIA_DRIVER_FILE = sys.argv[1]\n"
            "assert devices.vote_device(np.zeros(2), 'cpu') is None\n"
            "assert devices.vote_device(np.zeros(2)) is None\n"
            "assert devices.vote_device(np.zeros(2), 'auto') is None\n"
            "assert not devices.cuda_available()\n"
            "print('torch' in sys.modules)\n")
    out = subprocess.run([sys.executable, "-c", code, str(tmp_path / "no-driver")], capture_output=True, text=True,
                         check=True)
    assert out.stdout.strip() == "False"


@pytest.mark.gpu
def test_auto_and_cuda_on_a_cuda_machine() -> None:
    assert resolve_device("auto").type == "cuda"
    assert resolve_device("cuda") == torch.device("cuda")


# ---------------------------------------------------------------------------------------------- batch sizes


def test_cpu_budget_is_capped_by_the_constant_and_available_ram(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(devices, "available_cpu_bytes", lambda: 64 << 30)
    assert free_device_bytes("cpu") == CPU_BUDGET_BYTES
    monkeypatch.setattr(devices, "available_cpu_bytes", lambda: 100 << 20)
    assert free_device_bytes(torch.device("cpu")) == 100 << 20
    # 0.5 * 100 MiB / 1 MiB = 50 items
    assert batch_from_memory("cpu", 1 << 20, cap=1000) == 50
    assert batch_from_memory("cpu", 1 << 20, cap=1000, fraction=1.0) == 100
    assert batch_from_memory("cpu", 1 << 20, cap=20) == 20  # never more than asked for
    assert batch_from_memory("cpu", 1 << 40, cap=20) == 1  # never fewer than floor
    assert batch_from_memory("cpu", 1 << 40, cap=20, floor=4) == 4


def test_real_cpu_memory_gives_a_sane_batch() -> None:
    assert 0 < devices.available_cpu_bytes()
    assert 1 <= batch_from_memory("cpu", 1 << 20, cap=10**9) <= CPU_BUDGET_BYTES // (1 << 20)


def test_cuda_budget_comes_from_mem_get_info(monkeypatch: pytest.MonkeyPatch) -> None:
    asked = []

    def mem_get_info(device=None):
        asked.append(device)
        return 8 << 30, 80 << 30  # free, total

    monkeypatch.setattr(torch.cuda, "mem_get_info", mem_get_info)
    assert free_device_bytes("cuda:0") == 8 << 30
    assert batch_from_memory(torch.device("cuda"), 1 << 20, cap=10**6) == 4096  # 0.5 * 8 GiB / 1 MiB
    assert asked[0] == torch.device("cuda:0")


@pytest.mark.gpu
def test_real_cuda_memory_gives_a_batch() -> None:
    free, total = torch.cuda.mem_get_info()
    assert free_device_bytes("cuda") == free
    assert batch_from_memory("cuda", 1 << 20, cap=10**9) >= 1


@pytest.mark.parametrize("kwargs, match", [
    (dict(bytes_per_item=0, cap=4), "bytes_per_item"),
    (dict(bytes_per_item=1.0, cap=4, fraction=0.0), "fraction"),
    (dict(bytes_per_item=1.0, cap=4, fraction=1.5), "fraction"),
    (dict(bytes_per_item=1.0, cap=4, floor=0), "floor"),
    (dict(bytes_per_item=1.0, cap=2, floor=3), "cap"),
    (dict(bytes_per_item=1.0, cap=2.5), "cap"),
])
def test_bad_batch_arguments_raise(kwargs: dict, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        batch_from_memory("cpu", **kwargs)


def test_unknown_device_type_for_memory() -> None:
    with pytest.raises(ValueError, match="cpu and cuda"):
        free_device_bytes("meta")


# ---------------------------------------------------------------------------------------------- vision


@pytest.fixture()
def tiny_vision_model():
    from certified_circuits.vision.networks.models import world_model_from_net
    from certified_circuits.vision.networks.world_resnet import world_resnet

    torch.manual_seed(0)
    return world_model_from_net(world_resnet(4, widths=(4, 8, 8, 8)).eval(), ["a", "b", "c", "d"], 32)


def _image_set(n: int):
    from certified_circuits.vision.data.image_sets import ImageSet

    x = torch.randn(n, 3, 32, 32, generator=torch.Generator().manual_seed(1))
    return ImageSet(labels=np.arange(n) % 4, ids=np.array([f"i{i}" for i in range(n)]),
                    loader=lambda idx, model: x[torch.as_tensor(idx)], source="synthetic")


def test_masked_eval_batch_from_memory(tiny_vision_model, monkeypatch: pytest.MonkeyPatch) -> None:
    from certified_circuits.vision.evaluate import batch_pairs, bytes_per_pair, predictions_under_masks

    model = tiny_vision_model
    per_pair = bytes_per_pair(model)
    # the largest leaf output of one 32 px image: the stem and layer1 at 4 x 16 x 16 float32
    assert per_pair == 4 * 4 * 16 * 16 * 4
    iset, idx = _image_set(7), np.arange(7)
    masks = np.random.default_rng(0).uniform(size=(5, model.n_vertices)) < 0.5
    reference = predictions_under_masks(model, iset, idx, masks, max_batch=3)
    monkeypatch.setattr(devices, "available_cpu_bytes", lambda: 6 * per_pair)  # 0.5 * 6 pairs -> 3
    assert batch_pairs(model, 35) == 3
    assert batch_pairs(model, 35, max_batch=8) == 8  # explicit override
    np.testing.assert_array_equal(predictions_under_masks(model, iset, idx, masks), reference)
    monkeypatch.setattr(devices, "available_cpu_bytes", lambda: 64 << 30)
    assert batch_pairs(model, 35) == 35  # everything fits: one pass
    np.testing.assert_array_equal(predictions_under_masks(model, iset, idx, masks), reference)
    with pytest.raises(ValueError, match="max_batch"):
        batch_pairs(model, 35, max_batch=0)


def test_block_rank_runs_on_the_data_device() -> None:
    from certified_circuits.vision.scoring.scorers import block_rank

    x = torch.tensor([[0.5, -1.0, 0.5, 2.0]])
    np.testing.assert_allclose(block_rank(x).numpy(), [[1 / 3, 0.0, 2 / 3, 1.0]])  # stable: lower index ranks lower
    if CUDA:
        np.testing.assert_allclose(block_rank(x.cuda()).cpu().numpy(), block_rank(x).numpy())


def test_runtime_measurement_counts_votes_on_a_device(tiny_vision_model) -> None:
    from certified_circuits.vision.runtime import measure_naive_vs_cached

    model = tiny_vision_model
    images = torch.randn(6, 3, 32, 32, generator=torch.Generator().manual_seed(2))
    table = measure_naive_vs_cached(model, images, 1, [10], np.array([0.25, 1.0]),
                                    votes_device=torch.device("cpu"))  # torch's path on the CPU
    assert list(table.paradigm) == ["baseline", "majority", "certified"]
    assert (table.loc[table.n == 10, "votes_equal_numpy"] == 1.0).all()
    assert (table.loc[table.n == 10, "agreement"] >= 0.9).all()
    numpy_path = measure_naive_vs_cached(model, images, 1, [10], np.array([0.25, 1.0]))
    assert numpy_path["votes_equal_numpy"].isna().all()  # CPU model: the numpy path itself


@pytest.mark.gpu
def test_runtime_measurement_on_cuda(tiny_vision_model) -> None:
    from certified_circuits.vision.runtime import measure_naive_vs_cached

    model = tiny_vision_model
    model.net.cuda()
    images = torch.randn(6, 3, 32, 32, device="cuda")
    table = measure_naive_vs_cached(model, images, 1, [10], np.array([0.25, 1.0]))
    assert (table.loc[table.n == 10, "votes_equal_numpy"] > 0.99).all()


# ---------------------------------------------------------------------------------------------- language


@pytest.fixture(scope="module")
def tiny_lm_batch():
    from certified_circuits.language.models import _bundle, build_model, tiny_config
    from certified_circuits.language.tasks import generate_examples
    from certified_circuits.language.tokenizer import WordTokenizer, encode_examples

    tok = WordTokenizer.default()
    lm = _bundle("tiny", build_model(tiny_config(tok.vocab_size, n_layer=2, n_head=4, n_embd=32), seed=0), tok,
                 with_bridge=False)
    return lm.weights, encode_examples(generate_examples("ioi", "id_test", 6, seed=2), tok)


def test_patched_eval_batch_from_memory(tiny_lm_batch, monkeypatch: pytest.MonkeyPatch) -> None:
    from certified_circuits.language.patching import DecomposedGraphModel, evaluate_edge_masks, patch_chunks

    w, batch = tiny_lm_batch
    p = int(batch.lengths.max())
    ops = DecomposedGraphModel(w)
    pair, cache = ops.pair_bytes(p), ops.cache_bytes(p)
    assert pair > 0 and cache > 0
    masks = np.random.default_rng(0).uniform(size=(5, w.graph.n_edges)) < np.linspace(0.1, 1.0, 5)[:, None]
    reference = evaluate_edge_masks(w, batch, masks, max_batch=4, progress=False)
    assert patch_chunks(w, 6, 5, p, max_batch=4) == (1, 4)  # masks first: 4 masks beside one prompt
    assert patch_chunks(w, 6, 5, p, budget_floats=1e12) == (6, 5)  # the older float budget still works
    monkeypatch.setattr(devices, "available_cpu_bytes", lambda: 64 << 30)
    assert patch_chunks(w, 6, 5, p) == (6, 5)  # everything in one pass
    monkeypatch.setattr(devices, "available_cpu_bytes", lambda: 2 * (pair + cache))  # one pair per pass
    assert patch_chunks(w, 6, 5, p) == (1, 1)
    monkeypatch.setattr(devices, "available_cpu_bytes", lambda: 2 * (3 * cache + 6 * pair))  # 3 prompts x 2 masks
    e, m = patch_chunks(w, 6, 5, p)
    assert e * cache + e * m * pair <= 3 * cache + 6 * pair  # the e prompt caches and e x m pairs fit the budget
    got = evaluate_edge_masks(w, batch, masks, progress=False)
    for name in ("accuracy", "binary_accuracy", "logit_diff"):
        np.testing.assert_allclose(getattr(got, name), getattr(reference, name), atol=1e-5)


@pytest.mark.slow
def test_configure_torch_pins_threads_and_deterministic_kernels() -> None:
    """Run in a fresh interpreter: the settings are process-global."""
    import subprocess
    import sys

    code = ("import os, torch; from certified_circuits.core.devices import configure_torch; configure_torch(1); "
            "print(torch.get_num_threads(), torch.are_deterministic_algorithms_enabled(), "
            "torch.is_deterministic_algorithms_warn_only_enabled(), os.environ['CUBLAS_WORKSPACE_CONFIG'])")
    env = {k: v for k, v in os.environ.items() if k != "CUBLAS_WORKSPACE_CONFIG"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True)
    assert out.stdout.split() == ["1", "True", "True", ":4096:8"]


def test_training_kernels_turn_onednn_off_only_inside():
    """Training runs without oneDNN (its weight-gradient kernel crashed on an AVX2-only CPU); inference keeps it."""
    import torch

    from certified_circuits.core.devices import training_kernels

    before = torch.backends.mkldnn.enabled
    with training_kernels():
        assert torch.backends.mkldnn.enabled is False
    assert torch.backends.mkldnn.enabled == before


# ---------------------------------------------------------------------------------------------- the device in the log


def test_the_resolved_device_is_logged_once_per_process(monkeypatch: pytest.MonkeyPatch,
                                                        caplog: pytest.LogCaptureFixture) -> None:
    """A job's log says where its model ran (issue 37: 'every model job on CUDA', read off the job logs)."""
    monkeypatch.setattr(devices, "_ANNOUNCED", set())
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with caplog.at_level("INFO", logger="certified_circuits.core.devices"):
        resolve_device("auto")
        resolve_device("cpu")
    assert [r.getMessage() for r in caplog.records] == ["device: cpu"]


def test_a_cuda_device_is_logged_with_its_name(monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    monkeypatch.setattr(devices, "_ANNOUNCED", set())
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda device=None: "NVIDIA H200")
    with caplog.at_level("INFO", logger="certified_circuits.core.devices"):
        resolve_device("cuda:0")
    assert [r.getMessage() for r in caplog.records] == ["device: cuda:0 (NVIDIA H200)"]
