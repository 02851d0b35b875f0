"""`python -m openclaw_ctx` runs the command line."""

from openclaw_ctx.cli.app import main

main()
