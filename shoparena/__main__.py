"""``python -m shoparena``: the CLI."""

from shoparena.cli import main

main()
