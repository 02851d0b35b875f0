"""Adapters that put agent frameworks' session stores on openclaw-ctx (each needs its framework's extra).

:mod:`~openclaw_ctx.integrations.openai_agents` (``pip install 'openclaw-ctx[openai-agents]'``) and
:mod:`~openclaw_ctx.integrations.adk` (``pip install 'openclaw-ctx[adk]'``). They sit at the top of
the house beside the CLI and use the runtime and the store as any program would.
"""
