import sys

from helikon.cli import main

sys.exit(main())
