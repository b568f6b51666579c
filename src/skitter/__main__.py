"""``python -m skitter`` runs the command line."""

import sys

from skitter.cli import main

sys.exit(main())
