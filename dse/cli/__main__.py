"""`python -m dse.cli`: the same as the `dse` command."""

import sys

from dse.cli import main

sys.exit(main())
