"""``python -m tooldispatch`` runs the command-line interface."""

from tooldispatch.cli import main

main()
