"""How the agents' long-poll process is served (no Django here: make run and the benchmarks build
its command line before any settings exist; docker-compose.yml spells the same options).

uvicorn on uvloop's event loop with httptools' HTTP parser, its production configuration: with
a thousand requests held, the pure-Python defaults (asyncio's loop, h11) spent a third more CPU
per request in ``bench agent_fleet``, and a process short of CPU answers every timed-out wait late.
"""

APPLICATION = "trainhub.longpoll_asgi:application"
#: Longer than an agent's longest wait plus its pause, so an idle agent keeps its connection.
KEEP_ALIVE_SECONDS = 40


def uvicorn_argv(python: str, *, host: str, port: int | str) -> list[str]:
    return [python, "-m", "uvicorn", APPLICATION, "--host", host, "--port", str(port), "--loop", "uvloop",
            "--http", "httptools", "--log-level", "warning", "--no-access-log",
            "--timeout-keep-alive", str(KEEP_ALIVE_SECONDS)]
