"""A Google ADK agent whose sessions live in openclaw-ctx: run it twice, it remembers.

    pip install -e ".[adk]"
    python examples/adk_memory.py agent.db "My locker code is 4417."
    python examples/adk_memory.py agent.db "What is my locker code?"
    openclaw-ctx --db agent.db grep 4417 --key adk:support:user-42:main

The model is a scripted stand-in (no network, no key) that answers with a fixed line and prints what
it was sent, so the second run shows the first run's events arriving from the database. Give the
agent a real model (``model="gemini-2.5-flash"``) and nothing else changes.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import AsyncGenerator

from google.adk.agents import LlmAgent
from google.adk.models.base_llm import BaseLlm
from google.adk.models.llm_request import LlmRequest
from google.adk.models.llm_response import LlmResponse
from google.adk.runners import Runner
from google.genai import types

from openclaw_ctx.integrations.adk import OpenClawSessionService


class NotingModel(BaseLlm):
    """Answers "Noted" and prints the conversation it was sent."""

    async def generate_content_async(
        self, llm_request: LlmRequest, stream: bool = False
    ) -> AsyncGenerator[LlmResponse, None]:
        print(f"the model was sent {len(llm_request.contents)} contents:")
        for content in llm_request.contents:
            print(f"  {content.role}: {' '.join(p.text or '' for p in content.parts or [])[:100]}")
        yield LlmResponse(content=types.Content(role="model", parts=[types.Part(text="Noted.")]))


async def main(db_path: str, prompt: str) -> None:
    service = OpenClawSessionService(db_path)
    agent = LlmAgent(name="assistant", model=NotingModel(model="noting"), instruction="Remember what you are told.")
    runner = Runner(agent=agent, app_name="support", session_service=service)
    try:
        if await service.get_session(app_name="support", user_id="user-42", session_id="main") is None:
            await service.create_session(app_name="support", user_id="user-42", session_id="main")
        message = types.Content(role="user", parts=[types.Part(text=prompt)])
        async for event in runner.run_async(user_id="user-42", session_id="main", new_message=message):
            if event.is_final_response() and event.content and event.content.parts:
                print(f"reply: {event.content.parts[0].text}")
    finally:
        await runner.close()
        await service.close()


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit("usage: adk_memory.py DB PROMPT")
    asyncio.run(main(sys.argv[1], sys.argv[2]))
