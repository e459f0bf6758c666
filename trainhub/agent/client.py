"""The agent's side of the agent API: JSON over HTTP(S), authenticated with the node credential.

Every call is retried with backoff on a network error or a 5xx (the control plane restarting),
so a report is never lost to a blip; the API makes every report idempotent, so a retry after a
lost answer is harmless. Anything else (4xx) is returned to the caller to decide.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from typing import Any

import requests

logger = logging.getLogger("trainhub.agent")

#: How a node credential starts, on both sides of the agent API (an agent may choose its own).
NODE_CREDENTIAL_PREFIX = "thn_"


@dataclass
class Answer:
    status: int
    body: Any
    etag: str = ""
    #: The Link header's URLs by rel ("long-poll": where the control plane long-polls assignments).
    links: dict[str, str] = field(default_factory=dict)


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

    def _headers(self, etag: str) -> dict[str, str]:
        headers = {"Accept": "application/json"}
        if self.credential:
            headers["Authorization"] = f"Bearer {self.credential}"
        if etag:
            headers["If-None-Match"] = etag
        return headers

    def call(self, method: str, path: str, body: Any = None, *, etag: str = "") -> Answer:
        delay = 0.2
        for attempt in range(self.retries + 1):
            try:
                response = self.session.request(method, f"{self.url}{path}", json=body, headers=self._headers(etag),
                                                timeout=self.timeout)
            except requests.RequestException as exc:
                problem = f"{type(exc).__name__}: {exc}"
            else:
                if response.status_code < 500:
                    return _answer(response)
                problem = f"HTTP {response.status_code}"
            if attempt < self.retries:
                logger.warning("%s %s failed (%s); retrying in %.1f s", method, path, problem, delay)
                time.sleep(delay)
                delay = min(delay * 4, 5.0)
        raise ControlPlaneUnreachable(f"{method} {path}: {problem}")

    def long_poll(self, url: str, *, etag: str, wait: float) -> Answer:
        """GET the long-poll ``url`` once (no retry: the caller falls back to ``get`` on any trouble)."""
        try:
            response = self.session.get(url, params={"wait": f"{wait:.3f}"}, headers=self._headers(etag),
                                        timeout=(self.timeout, wait + self.timeout))
        except requests.RequestException as exc:
            raise ControlPlaneUnreachable(f"GET {url}: {type(exc).__name__}: {exc}") from None
        return _answer(response)

    def post(self, path: str, body: Any = None) -> Answer:
        return self.call("POST", path, body if body is not None else {})

    def get(self, path: str, *, etag: str = "") -> Answer:
        return self.call("GET", path, etag=etag)


def _answer(response: requests.Response) -> Answer:
    try:
        payload = response.json() if response.content else {}
    except ValueError:
        payload = {"error": {"message": response.text[:500]}}
    links = {link["rel"]: link["url"] for link in response.links.values() if "rel" in link and "url" in link}
    return Answer(response.status_code, payload, response.headers.get("ETag", ""), links)


def error_message(answer: Answer) -> str:
    body = answer.body if isinstance(answer.body, dict) else {}
    return str((body.get("error") or {}).get("message") or body or f"HTTP {answer.status}")
