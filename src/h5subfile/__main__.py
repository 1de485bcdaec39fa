"""``python -m h5subfile``: the command line."""

import sys

from .cli import main

sys.exit(main())
