"""``python -m adapters.cli``: the ``debate-kernel`` command line."""

from adapters.cli import main

raise SystemExit(main())
