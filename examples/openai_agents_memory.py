"""An OpenAI Agents SDK agent whose memory is openclaw-ctx: run it twice, it remembers.

    pip install -e ".[openai-agents]"
    python examples/openai_agents_memory.py agent.db "My locker code is 4417."
    python examples/openai_agents_memory.py agent.db "What is my locker code?"
    openclaw-ctx --db agent.db grep 4417 --key user-42

The model is the SDK's own scripted test model (no network, no key): it answers with a fixed line and
this script prints what the model was sent, so the second run shows the first run's turn arriving
from the database. Swap in a real model (``Agent(model="gpt-4o-mini")``) and nothing else changes.
"""

from __future__ import annotations

import asyncio
import sys

from agents import Agent, Runner, set_tracing_disabled
from agents.testing import ScriptedModel, assistant_message

from openclaw_ctx.integrations.openai_agents import OpenClawSession


async def main(db_path: str, prompt: str) -> None:
    set_tracing_disabled(True)  # the SDK would otherwise try to export traces to OpenAI
    model = ScriptedModel([[assistant_message(f"Noted: {prompt}")]])
    agent = Agent(name="assistant", instructions="You remember what the user tells you.", model=model)
    session = OpenClawSession("user-42", db_path)  # the session id is the store's session key
    try:
        result = await Runner.run(agent, prompt, session=session)
        sent = model.calls[-1].input
        print(f"the model was sent {len(sent)} items:")
        for item in sent:
            print(f"  {item.get('role', item.get('type'))}: {str(item.get('content'))[:100]}")
        print(f"reply: {result.final_output}")
    finally:
        session.close()


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit("usage: openai_agents_memory.py DB PROMPT")
    asyncio.run(main(sys.argv[1], sys.argv[2]))
