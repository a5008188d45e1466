"""Command-line registration of the reporting stages (``report-*``).

The implementations live in :mod:`certified_circuits.reporting`, which imports pandas, matplotlib and
scipy.stats (seconds); it is imported only when a report stage runs, so every other
``certified-circuits`` stage starts fast.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Callable


def _lazy(name: str) -> Callable[[argparse.Namespace], int]:
    def handler(args: argparse.Namespace) -> int:
        from . import reporting

        return getattr(reporting, name)(args)

    return handler


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("report-sufficiency", help="Table 1/3 and cACC-K curves from per-concept tables")
    p.add_argument("--inputs", nargs="+", required=True, help="per-concept sufficiency CSVs")
    p.add_argument("--by", nargs="*", default=[], help="extra row keys: scorer, concept, setting")
    p.add_argument("--best-setting", action="store_true", help="keep the best certification setting per row")
    p.add_argument("--test", choices=("wilcoxon", "ttest"), default="wilcoxon")
    p.add_argument("--title", default="")
    p.add_argument("--out-dir", required=True, type=Path)
    p.set_defaults(func=_lazy("_cmd_sufficiency"))

    p = subparsers.add_parser("report-iou", help="IoU of ID vs OOD re-discovered circuits (Fig. IoU)")
    p.add_argument("--experiment", required=True)
    p.add_argument("--curves", required=True, type=Path, help="curves.csv of report-sufficiency")
    p.add_argument("--scorer", default=None, help="scorer whose curve sets the operating K (needed when the curves hold several)")
    p.add_argument("--item", nargs=6, action="append", required=True,
                   metavar=("CONCEPT", "EVAL_SET", "ID_VOTES", "ID_CERTS", "OOD_VOTES", "OOD_CERTS"))
    p.add_argument("--out-dir", required=True, type=Path)
    p.set_defaults(func=_lazy("_cmd_iou"))

    p = subparsers.add_parser("report-seeds", help="pairwise IoU across certification seeds")
    p.add_argument("--experiment", required=True)
    p.add_argument("--curves", required=True, type=Path)
    p.add_argument("--scorer", default=None, help="scorer whose curve sets the operating K (needed when the curves hold several)")
    p.add_argument("--eval-set", default="id")
    p.add_argument("--k", type=float, default=None, help="K target (default: certified ID peak)")
    p.add_argument("--item", nargs=4, action="append", required=True, metavar=("CONCEPT", "SEED", "VOTES", "CERTS"))
    p.add_argument("--out-dir", required=True, type=Path)
    p.set_defaults(func=_lazy("_cmd_seeds"))

    p = subparsers.add_parser("report-radius", help="abstention and cACC across radii and |D| (App. D)")
    p.add_argument("--experiment", required=True)
    p.add_argument("--eval-set", default="id")
    p.add_argument("--k", type=float, default=0.6, help="fixed K of the fixed-K panel (paper: 0.6)")
    p.add_argument("--item", nargs=5, action="append", required=True,
                   metavar=("CONCEPT", "N_EXAMPLES", "VOTES", "CERTS", "SUFFICIENCY"))
    p.add_argument("--out-dir", required=True, type=Path)
    p.set_defaults(func=_lazy("_cmd_radius"))

    p = subparsers.add_parser("report-spurious", help="spurious index by certification category")
    p.add_argument("--curves", required=True, type=Path)
    p.add_argument("--scorer", default=None, help="scorer whose curve sets the operating K (needed when the curves hold several)")
    p.add_argument("--eval-set", default="id")
    p.add_argument("--item", nargs=4, action="append", required=True, metavar=("CONCEPT", "ATTRIBUTIONS", "VOTES", "CERTS"))
    p.add_argument("--out-dir", required=True, type=Path)
    p.set_defaults(func=_lazy("_cmd_spurious"))

    p = subparsers.add_parser("report-features", help="feature grid of certified-in / abstained / out channels")
    p.add_argument("--curves", required=True, type=Path)
    p.add_argument("--scorer", default=None, help="scorer whose curve sets the operating K (needed when the curves hold several)")
    p.add_argument("--eval-set", default="id")
    p.add_argument("--attributions", required=True, type=Path)
    p.add_argument("--votes", required=True, type=Path)
    p.add_argument("--certificates", required=True, type=Path)
    p.add_argument("--data", required=True, help="the concept data the attributions were made from")
    p.add_argument("--channels", type=int, default=3, help="channels per category")
    p.add_argument("--examples", type=int, default=6, help="top-activating examples per channel")
    p.add_argument("--out-stem", required=True, type=Path)
    p.set_defaults(func=_lazy("_cmd_features"))

    p = subparsers.add_parser("report-theory", help="radius vs p_del and minimum n vs tau (App. C)")
    p.add_argument("--n-components", type=int, default=3840)
    p.add_argument("--out-dir", required=True, type=Path)
    p.set_defaults(func=_lazy("_cmd_theory"))

    p = subparsers.add_parser("report-summary", help="headline numbers of a run")
    p.add_argument("--peaks", nargs="+", required=True, type=Path)
    p.add_argument("--out", required=True, type=Path)
    p.set_defaults(func=_lazy("_cmd_summary"))
