"""`python -m tphyolo` runs the command line."""

import sys

from tphyolo.cli import main

if __name__ == "__main__":
    sys.exit(main())
