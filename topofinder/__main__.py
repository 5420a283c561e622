"""`python -m topofinder` runs the command line."""

from topofinder.cli.main import main

raise SystemExit(main())
