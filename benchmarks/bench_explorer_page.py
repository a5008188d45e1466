"""Explorer pages at the paper's sizes: how long a browser takes to open them from disk.

Builds, from synthetic certificates (random votes, the real page code), the explorer of one ResNet-50 class
(3,840 channels in 4 layers, a 20-value K grid) and one GPT-2 Small task (32,491 EAP edges, 12 layers x 12
heads, K = 2%, 5% and 10% of the edges), then opens each page in headless Chromium from file:// and waits
for its scripts (``--dump-dom``). The time includes the browser's own start (measured alone on an empty
page and reported beside it). Budget: 2 s a page (issue "The circuit explorer"). Needs ``chromium`` on PATH.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from certified_circuits.core.contracts import Certificates, Votes
from certified_circuits.language.graph import edge_names
from certified_circuits.reports.explorer import Circuit, Experiment, build_explorer
from certified_circuits.storage.store import write_attributions, write_certificates, write_votes

K_GRID = np.linspace(0.05, 1.0, 20)
SETTING = {"tau": 0.95, "p_del": 0.6, "alpha": 0.001, "n0": 100, "n": 1000, "correction": "bonferroni", "seed": 0, "radius": 1}


def synthetic_circuit(folder: Path, names: list[str], groups: np.ndarray, k_grid: np.ndarray, rng, attrs: dict) -> tuple[Path, Path, Path]:
    n_components = len(names)
    # the baseline at K holds a K fraction of the components; they collect most votes, the rest few
    baseline = np.stack([rng.permutation(n_components) < round(k * n_components) for k in k_grid])
    counts = np.where(baseline, rng.integers(700, 1001, baseline.shape), rng.integers(0, 300, baseline.shape)).astype(np.int32)
    decision = np.where(counts >= 990, 1, np.where(counts < 250, 0, -1)).astype(np.int8)
    votes = Votes(k_grid=k_grid, baseline=baseline, selection_counts=(counts // 10).astype(np.int32),
                  certification_counts=counts, groups=groups, attrs={**SETTING, "n_examples": 50, **attrs})
    certificates = Certificates(k_grid=k_grid, decision=decision, majority=counts > 500, pvalue=np.zeros(decision.shape),
                                attrs={**SETTING, "n_examples": 50, **attrs})
    scores = rng.standard_normal((4, n_components)).astype(np.float32)
    paths = (folder / f"{attrs['concept']}_attr.h5", folder / f"{attrs['concept']}_votes.h5", folder / f"{attrs['concept']}_cert.h5")
    write_attributions(paths[0], {attrs["scorer"]: scores}, groups=groups, names=names, example_ids=[str(i) for i in range(4)],
                       attrs={**attrs, "n_layers": 12, "n_heads": 12})
    write_votes(paths[1], votes)
    write_certificates(paths[2], certificates)
    return paths


def open_seconds(chromium: str, url: str) -> float:
    start = time.perf_counter()
    subprocess.run([chromium, "--headless=new", "--no-sandbox", "--disable-gpu", "--dump-dom", url], capture_output=True,
                   check=True, timeout=120)
    return time.perf_counter() - start


def main() -> None:
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        print("SUMMARY explorer_page: skipped (needs chromium on PATH; .ci/chromium-setup.sh installs it)")
        sys.exit(0)
    rng = np.random.default_rng(0)
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        (root / "vision_tables").mkdir()
        (root / "language_tables").mkdir()
        widths = [256, 512, 1024, 2048]
        names = [f"layer{i + 1}.{c}" for i, w in enumerate(widths) for c in range(w)]
        groups = np.repeat(np.arange(4), widths).astype(np.int32)
        vision = synthetic_circuit(root, names, groups, K_GRID, rng, {"concept": "n01440764", "scorer": "relevance", "model": "resnet50"})
        edges = edge_names(12, 12)
        language = synthetic_circuit(root, edges, np.zeros(len(edges), np.int32), np.array([0.02, 0.05, 0.1]), rng,
                                     {"concept": "ioi", "scorer": "eap_ig", "model": "gpt2"})
        start = time.perf_counter()
        build_explorer(root / "explorer", [Experiment("vision", "resnet50", root / "vision_tables"),
                                           Experiment("language", "gpt2_small", root / "language_tables")],
                       [Circuit("resnet50", "n01440764", *vision), Circuit("gpt2_small", "ioi", *language)])
        build = time.perf_counter() - start
        empty = root / "empty.html"
        empty.write_text("<html><body></body></html>")
        browser = min(open_seconds(chromium, empty.as_uri()) for _ in range(3))
        rows = []
        for page in ("resnet50/n01440764.html", "gpt2_small/ioi.html", "index.html"):
            path = root / "explorer" / page
            seconds = min(open_seconds(chromium, path.as_uri()) for _ in range(3))
            rows.append((page, path.stat().st_size, seconds))
            print(f"{page}: {path.stat().st_size / 1e3:.0f} kB, opened in {seconds:.2f} s (browser start alone {browser:.2f} s)")
    worst = max(seconds for _, _, seconds in rows)
    print(f"SUMMARY explorer_page: slowest paper-size page {worst:.2f} s including the browser's start ({browser:.2f} s), "
          f"budget 2 s ({worst / 2:.2f} of it); explorer built in {build:.1f} s")


if __name__ == "__main__":
    main()
