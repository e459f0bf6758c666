"""The CLI quotes path segments and reads plain http:// URLs itself (start-up: no urllib.parse, nor
its ipaddress, on a command's path): exactly as urllib.parse.quote and urlsplit would."""

from __future__ import annotations

import re
from urllib.parse import quote, urlsplit

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from trainhub.cli.client import _plain_http, _quote


@settings(max_examples=500, deadline=None)
@given(st.text(max_size=12))
def test_a_path_segment_is_quoted_as_urllib_quotes_it(part: str) -> None:
    try:
        expected = quote(part, safe="")
    except UnicodeEncodeError:  # a lone surrogate: neither can encode it
        with pytest.raises(UnicodeEncodeError):
            _quote(part)
        return
    assert _quote(part) == expected


def _split(url: str) -> tuple | None:
    parts = urlsplit(url)
    if parts.scheme != "http":
        return None
    return (parts.netloc, parts.hostname, parts.port, parts.path, parts.query)


@pytest.mark.parametrize("url", [
    "http://127.0.0.1:8000/v1/projects/p/locations/r/slurmClusters/c/jobs", "http://Gpu-Box.Example.org/v1/x?a=b&c",
    "http://h:0080/x?", "http://h?q=1", "http://h", "http://h:65535/", "http://u:p@h:1/x", "http://[::1]:8000/x",
    "http://h/x#frag", "HTTP://H/x", "https://h/x", "http://h:/x", " http://h/x", "http://h/a b", "http://h:8a/x",
    "http://", "http://:80/x", "http://h\t/x", "http://hé/x", "http://h:1:2/x",
])
def test_a_url_is_read_as_urlsplit_reads_it(url: str) -> None:
    _assert_read_as_urlsplit_reads(url)


def _assert_read_as_urlsplit_reads(url: str) -> None:
    try:
        expected = _split(url)
    except ValueError as error:  # a port out of range or not a number, a bad IPv6 literal
        with pytest.raises(ValueError, match=re.escape(str(error))):
            _plain_http(url)
        return
    target = _plain_http(url)
    assert (tuple(target) if target is not None else None) == expected


_PIECES = st.sampled_from(["http://", "https://", "h", "H", "127.0.0.1", ":", "8000", "99999", "/", "?", "#", "@",
                           "[::1]", "a=b", "&", " ", "\t", "%20", "v1", "é", "-", "."])


@settings(max_examples=500, deadline=None)
@given(st.lists(_PIECES, max_size=8))
def test_any_url_is_read_as_urlsplit_reads_it(pieces: list[str]) -> None:
    _assert_read_as_urlsplit_reads("".join(pieces))
