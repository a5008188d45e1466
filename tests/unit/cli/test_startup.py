"""Every workflow job starts a `certified-circuits` process: its start-up must not import torch (about 3 s each, over a
hundred light jobs per run: votes, certify, reports). A module-level import of a torch module in any CLI module
(language-train's option lists once did it) fails here."""

from __future__ import annotations

import subprocess
import sys


def test_the_cli_parses_every_stage_without_importing_torch() -> None:
    code = (
        "import sys\n"
        "from certified_circuits.cli.main import main\n"
        "try:\n"
        "    main(['certify', '--help'])\n"
        "except SystemExit:\n"
        "    pass\n"
        "heavy = sorted(m for m in ('torch', 'transformers', 'transformer_lens') if m in sys.modules)\n"
        "print('HEAVY=' + ','.join(heavy))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.splitlines()[-1] == "HEAVY=", f"the CLI imported {done.stdout.splitlines()[-1]} at start-up"
