"""The agent's side of the agent API: JSON over HTTP(S), authenticated with the node credential.

Every call is retried with backoff on a network error or a 5xx (the control plane restarting),
so a report is never lost to a blip; the API makes every report idempotent, so a retry after a
lost answer is harmless. Anything else (4xx) is returned to the caller to decide.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import Any

import requests

logger = logging.getLogger("trainhub.agent")


@dataclass
class Answer:
    status: int
    body: Any
    etag: str = ""


class ControlPlaneUnreachable(Exception):
    pass


class ControlPlane:
    def __init__(self, url: str, credential: str = "", *, timeout: float = 15.0, retries: int = 3,
                 verify: bool | str = True, session: requests.Session | None = None):
        self.url = url.rstrip("/")
        self.credential = credential
        self.timeout = timeout
        self.retries = retries
        self.session = session or requests.Session()
        self.session.verify = verify

    def call(self, method: str, path: str, body: Any = None, *, etag: str = "") -> Answer:
        headers = {"Accept": "application/json"}
        if self.credential:
            headers["Authorization"] = f"Bearer {self.credential}"
        if etag:
            headers["If-None-Match"] = etag
        delay = 0.2
        for attempt in range(self.retries + 1):
            try:
                response = self.session.request(method, f"{self.url}{path}", json=body, headers=headers,
                                                timeout=self.timeout)
            except requests.RequestException as exc:
                problem = f"{type(exc).__name__}: {exc}"
            else:
                if response.status_code < 500:
                    try:
                        payload = response.json() if response.content else {}
                    except ValueError:
                        payload = {"error": {"message": response.text[:500]}}
                    return Answer(response.status_code, payload, response.headers.get("ETag", ""))
                problem = f"HTTP {response.status_code}"
            if attempt < self.retries:
                logger.warning("%s %s failed (%s); retrying in %.1f s", method, path, problem, delay)
                time.sleep(delay)
                delay = min(delay * 4, 5.0)
        raise ControlPlaneUnreachable(f"{method} {path}: {problem}")

    def post(self, path: str, body: Any = None) -> Answer:
        return self.call("POST", path, body if body is not None else {})

    def get(self, path: str, *, etag: str = "") -> Answer:
        return self.call("GET", path, etag=etag)


def error_message(answer: Answer) -> str:
    body = answer.body if isinstance(answer.body, dict) else {}
    return str((body.get("error") or {}).get("message") or body or f"HTTP {answer.status}")
