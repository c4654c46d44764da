"""``python -m mmsim``: the same as the ``mmsim`` command."""

import sys

from mmsim.cli import main

if __name__ == "__main__":
    sys.exit(main())
