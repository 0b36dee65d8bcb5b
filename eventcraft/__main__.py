"""`python -m eventcraft`: the `eventcraft` command."""

from eventcraft.cli.main import run

run()
