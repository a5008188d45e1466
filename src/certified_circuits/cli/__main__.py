"""``python -m certified_circuits.cli <stage> ...``: the same entry point as the ``certified-circuits`` script."""

import sys

from certified_circuits.cli.main import main

sys.exit(main())
