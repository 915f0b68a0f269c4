"""Runs one turn of the remembering agent in a session, in a process of its own.

    python tests/session_driver.py URL KEY SESSION_ID RUN_ID TEXT

prints one line of JSON: the run's final output, and the texts its model was given.
"""

from __future__ import annotations

import asyncio
import json
import sys

from store_drivers import remembering

from helikon.durable import open_store


async def main(url: str, key: str, session_id: str, run_id: str, text: str) -> int:
    store = open_store(url, key=key)
    try:
        agent, model = remembering()
        session = store.session(session_id)
        result = await agent.run(text, store=store, run_id=run_id, session=session).collect()
    finally:
        store.close()
    seen = [getattr(item, "content", None) for item in model.requests[0].items]
    print(json.dumps({"output": result.final_output, "seen": seen}))
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main(*sys.argv[1:])))
