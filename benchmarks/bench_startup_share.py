"""Share of a vision attribution job spent on start-up (issue 37's target: <= 20% of a 50-class job).

The paper workflow runs the attribution of a group of classes as one process (``certified-circuits batch
vision-attribute ... :: vision-attribute ...``): it pays the start-up once (imports of torch and torchvision,
the model build and its weights, the data index; the job logs it as ``start-up X s``), then attributes each
class. This benchmark builds an ImageNet-shaped tree in a temporary folder -- ``--classes`` wnid folders of
``--images`` JPEGs at ImageNet's typical 500 x 375 px (smooth random images, so that they decode like photos
rather than like noise), the 1,000-line LOC_synset_mapping.txt and a random-weight ResNet-50 state dict --
and runs one such batch through the real CLI on ``--device``, as the workflow does (``--threads 1``).

By default only the concept split is attributed. A paper job also attributes each class's images of four
evaluation sets (ImageNet-A, -O, -C, OOD-CV) in the same process: ``--eval-sets 4`` adds that many sets of
``--images`` images per class (ImageNet-C has 50 per class, A and OOD-CV fewer, O about 10), the job shape of
the workflow's ``vision_attribute`` rule (``--also NAME ROOT OUT``).

    python benchmarks/bench_startup_share.py                      # 50 classes x 50 images (needs CUDA)
    python benchmarks/bench_startup_share.py --eval-sets 4        # the paper job's shape: concept + 4 eval sets
    python benchmarks/bench_startup_share.py --classes 3 --images 4 --device cpu   # smoke test

The last line is a one-line summary.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
STARTUP = re.compile(r"start-up ([0-9.]+)s")
WIDTH, HEIGHT = 500, 375  # ImageNet val's most common size
TARGET_SHARE = 0.20


def load_fixtures():
    spec = importlib.util.spec_from_file_location("paper_fixtures", ROOT / "tests" / "integration" / "paper_fixtures.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def write_class(folder: Path, n_images: int, seed: int) -> None:
    """``n_images`` smooth random JPEGs: a 20 x 15 random image upsampled bicubically, plus mild noise."""
    from PIL import Image

    rng = np.random.default_rng(seed)
    folder.mkdir(parents=True, exist_ok=True)
    for i in range(n_images):
        coarse = Image.fromarray(rng.integers(0, 256, (15, 20, 3), dtype=np.uint8)).resize((WIDTH, HEIGHT),
                                                                                          Image.Resampling.BICUBIC)
        pixels = np.asarray(coarse, dtype=np.int16) + rng.integers(-8, 9, (HEIGHT, WIDTH, 3))
        Image.fromarray(np.clip(pixels, 0, 255).astype(np.uint8)).save(folder / f"{folder.name}_{i}.JPEG", quality=90)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--classes", type=int, default=50)
    ap.add_argument("--images", type=int, default=50, help="images per class (|D|)")
    ap.add_argument("--eval-sets", type=int, default=0, help="evaluation sets attributed per class (paper: 4)")
    ap.add_argument("--device", default="auto")
    args = ap.parse_args()
    from certified_circuits.core.devices import cuda_available

    if args.device == "auto" and not cuda_available():
        print("bench_startup_share measures a GPU job (on a CPU the attribution, not the start-up, dominates); "
              "no CUDA here. Run `--device cpu --classes 3 --images 4` for a CPU smoke test.")
        print("SUMMARY startup-share: skipped (needs CUDA)")
        return 0
    fixtures = load_fixtures()
    cli = shutil.which("certified-circuits", path=f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")
    if cli is None:
        sys.exit("certified-circuits is not on PATH: run `make` first (it installs it into .venv)")
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        wnids = fixtures.write_class_index(root / "LOC_synset_mapping.txt")[: args.classes]
        fixtures.write_resnet50(root / "resnet50.pth")
        sets = ["val"] + [f"eval{j}" for j in range(args.eval_sets)]
        folders = [root / name / w for name in sets for w in wnids]
        with ProcessPoolExecutor() as pool:
            list(pool.map(write_class, folders, [args.images] * len(folders), range(len(folders))))
        common = ["--model", "resnet50", "--class-index", str(root / "LOC_synset_mapping.txt"), "--weights",
                  str(root / "resnet50.pth"), "--device", args.device, "--threads", "1", "--data", str(root / "val"),
                  "--n-examples", str(args.images), "--split", "concept", "--experiment", "bench"]
        command = [cli, "batch"]
        for i, w in enumerate(wnids):  # the batch syntax: invocations separated by ``::``
            also = [x for j in range(args.eval_sets)
                    for x in ("--also", f"eval{j}", str(root / f"eval{j}"), str(root / f"eval{j}_out" / f"{w}.h5"))]
            command += (["::"] if i else []) + ["vision-attribute", *common, "--concept", w, "--out",
                                                str(root / "out" / f"{w}.h5"), *also]
        start = time.perf_counter()
        done = subprocess.run(command, capture_output=True, text=True)
        wall = time.perf_counter() - start
    if done.returncode != 0:
        sys.exit(f"the attribution batch failed:\n{done.stderr[-4000:]}")
    found = STARTUP.search(done.stderr)
    if found is None:
        sys.exit(f"the job logged no start-up line:\n{done.stderr[-2000:]}")
    startup = float(found[1])
    device = re.search(r"device: (.*)", done.stderr)
    share = startup / wall
    print(f"{args.classes} classes x {args.images} images x {1 + args.eval_sets} sets at {WIDTH} x {HEIGHT} px, ResNet-50, "
          f"{device[1] if device else args.device}: job wall {wall:.1f} s, start-up {startup:.2f} s, "
          f"attribution {(wall - startup) / args.classes:.2f} s per class")
    print(f"SUMMARY startup-share: {share:.1%} of a {args.classes}-class attribution job "
          f"({'meets' if share <= TARGET_SHARE else 'misses'} the <= {TARGET_SHARE:.0%} target)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
