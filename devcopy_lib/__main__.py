"""`python -m devcopy_lib` is the `devcopy` command."""

import sys

from .cli import main

sys.exit(main())
