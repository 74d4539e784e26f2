"""``python -m moe_balance``: see ``moe_balance.cli``."""

import sys

from moe_balance.cli import main

sys.exit(main())
