"""The Hub over HTTP, bounded, for ``pin``: GET requests to one endpoint, every one of them within the
pin's one deadline and under a byte cap, range reads whose answers are checked to be the range asked
for, redirects followed a few times and only to http or https, and every failure one line.
"""

from __future__ import annotations

import http.client
import re
import socket
import ssl
import threading
import time
import urllib.request
from dataclasses import dataclass
from urllib.parse import urljoin, urlsplit

from atlas.errors import AtlasError
from atlas.errors import one_line

MAX_REDIRECTS = 5
CHUNK = 64 * 1024


class Offline(Exception):
    """The Hub could not be reached at all (refused, no such host)."""


@dataclass
class Answer:
    status: int
    reason: str
    body: bytes
    headers: http.client.HTTPMessage
    commit: str | None  # X-Repo-Commit, from the first answer of the redirects that gave one


class Hub:
    """GET requests to one endpoint, every one of them within the pin's deadline and under a byte cap.

    A deadline per read would let a server that sends one byte every few seconds hold the pin for ever;
    here a timer shuts the connection down when the pin's time is up, whatever it was waiting for.
    HF_TOKEN goes only to the endpoint's own address (never to the address a redirect names), and only
    when that endpoint is https://huggingface.co or the user asked for it (--send-token).
    """

    def __init__(self, endpoint: str, timeout: float, token: str | None):
        self.endpoint = endpoint
        self.origin = _origin(endpoint)
        self.timeout = timeout
        self.deadline = time.monotonic() + timeout
        self.token = token

    def left(self, url: str) -> float:
        left = self.deadline - time.monotonic()
        if left <= 0:
            raise self.late(url)
        return left

    def late(self, url: str) -> AtlasError:
        return AtlasError(url, None, f"no complete answer within the {self.timeout:g} s a pin may take (--timeout)")

    def get(self, url: str, cap: int, byte_range: tuple[int, int] | None = None, missing_ok: bool = False) -> Answer | None:
        """The answer to GET ``url`` after redirects; ``byte_range`` (first, last) asks for those bytes and
        refuses any answer but 206 with exactly them. A body over ``cap`` bytes is refused unread."""
        commit, asked = None, url
        for _ in range(MAX_REDIRECTS + 1):
            status, reason, headers, body = self._one(url, cap, byte_range)
            commit = commit or headers.get("X-Repo-Commit")
            if status in (301, 302, 303, 307, 308):
                location = headers.get("Location")
                if not location:
                    raise AtlasError(url, "Location", f"a {status} redirect that names no address")
                url = urljoin(url, location)
                if not _fetchable(url):
                    raise AtlasError(asked, "Location", f"redirected to {one_line(url[:200])!r}, not an http:// or https:// address")
                continue
            if status == 404 and missing_ok:
                return None
            if status == 404:
                raise AtlasError(url, None, f"not found (404{_error_code(headers)})")
            if status in (401, 403):
                sent = "HF_TOKEN was sent" if self.token else "no token was sent (HF_TOKEN goes only to https://huggingface.co unless --send-token)"
                raise AtlasError(url, None, f"refused ({status}{_error_code(headers)}): a gated or private repository needs a token; {sent}")
            if byte_range is not None and status == 200:
                raise AtlasError(url, "Range", "the server ignored it and began sending the whole file (200, not 206); "
                                 "a pin reads headers only, so the body was left unread")
            if status != (206 if byte_range is not None else 200):
                said = one_line(headers.get("X-Error-Message", "")[:200])
                raise AtlasError(url, None, f"the server answered {status} {one_line(reason[:80])}{': ' + said if said else ''}".rstrip())
            return Answer(status, reason, body, headers, commit)
        raise AtlasError(asked, "Location", f"more than {MAX_REDIRECTS} redirects")

    def _one(self, url: str, cap: int, byte_range: tuple[int, int] | None) -> tuple[int, str, http.client.HTTPMessage, bytes]:
        parts = urlsplit(url)
        headers = {"User-Agent": "atlas-pin", "Accept-Encoding": "identity"}
        if byte_range is not None:
            headers["Range"] = f"bytes={byte_range[0]}-{byte_range[1]}"
        if self.token and _origin(url) == self.origin:
            headers["Authorization"] = f"Bearer {self.token}"
        connection, by_full_url = _connection(parts, self.left(url))
        expired = threading.Event()
        opened: list[socket.socket] = []  # the socket itself: http.client lets go of it once a response owns it

        def expire():
            expired.set()
            for sock in opened:
                try:
                    sock.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

        timer = threading.Timer(self.left(url), expire)
        timer.daemon = True
        timer.start()
        try:
            connection.connect()
            opened.append(connection.sock)
            if expired.is_set():  # the time ran out while connecting
                raise self.late(url)
            target = url if by_full_url else (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
            connection.request("GET", target, headers=headers)
            response = connection.getresponse()
            if response.status in (301, 302, 303, 307, 308, 401, 403, 404) or \
                    (byte_range is not None and response.status == 200) or response.status >= 400:
                body = b""  # never read: what it says is in the status and headers
            else:
                expected = byte_range[1] - byte_range[0] + 1 if byte_range is not None else None
                body = _capped(response, url, min(cap, expected) if expected is not None else cap, expired)
            if expired.is_set():
                raise self.late(url)
            if response.status == 206:
                _check_range(url, response.headers, byte_range, len(body))
            return response.status, response.reason, response.headers, body
        except AtlasError:
            raise
        except (socket.gaierror, ConnectionRefusedError) as e:
            raise Offline(f"{parts.scheme}://{parts.netloc}: {type(e).__name__}") from None
        except (TimeoutError, OSError, http.client.HTTPException) as e:
            if expired.is_set() or isinstance(e, TimeoutError):
                raise self.late(url) from None
            raise AtlasError(url, None, _broken(e)) from None
        except ValueError as e:  # http.client's own refusal of a request line (a space, a character not ASCII)
            raise AtlasError(url, None, f"not an address that can be asked for ({one_line(e)})") from None
        finally:
            timer.cancel()
            connection.close()


def _fetchable(url: str) -> bool:
    """An http:// or https:// URL with a host and a port that is a number, every character printable ASCII."""
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - raises on a port that is not a number
    except ValueError:
        return False
    return parts.scheme in ("http", "https") and bool(parts.hostname) and url.isascii() and url.isprintable() and " " not in url


def _connection(parts, timeout: float) -> tuple[http.client.HTTPConnection, bool]:
    """A connection to the URL's host, or through the proxy the environment names for it (HTTPS_PROXY,
    HTTP_PROXY, NO_PROXY, as other HTTP clients read them)."""
    port = parts.port or (443 if parts.scheme == "https" else 80)
    proxy = urllib.request.getproxies().get(parts.scheme)
    if proxy and not urllib.request.proxy_bypass(parts.hostname):
        through = urlsplit(proxy if "//" in proxy else "http://" + proxy)
        if parts.scheme == "https":
            connection = http.client.HTTPSConnection(through.hostname, through.port or 80, timeout=timeout,
                                                     context=ssl.create_default_context())
            connection.set_tunnel(parts.hostname, port)
            return connection, False
        return http.client.HTTPConnection(through.hostname, through.port or 80, timeout=timeout), True  # asked for by full URL
    if parts.scheme == "https":
        return http.client.HTTPSConnection(parts.hostname, port, timeout=timeout, context=ssl.create_default_context()), False
    return http.client.HTTPConnection(parts.hostname, port, timeout=timeout), False


def _capped(response: http.client.HTTPResponse, url: str, cap: int, expired: threading.Event) -> bytes:
    """The body, refused as soon as it is known to pass ``cap``: by its Content-Length before a byte is
    read, else after ``cap`` + 1 bytes."""
    declared = response.getheader("Content-Length")
    if declared is not None:
        if not declared.strip().isdigit():
            raise AtlasError(url, "Content-Length", f"{one_line(declared[:40])!r} is not a number of bytes")
        if int(declared) > cap:
            raise AtlasError(url, "Content-Length", f"{int(declared):,} bytes is over the {cap:,} bytes it can be; left unread")
    chunks, size = [], 0
    while size <= cap:
        chunk = response.read(min(CHUNK, cap + 1 - size))
        if not chunk or expired.is_set():
            break
        chunks.append(chunk)
        size += len(chunk)
    if size > cap:
        raise AtlasError(url, "body", f"more than the {cap:,} bytes it can be; the rest left unread")
    if declared is not None and size != int(declared) and not expired.is_set():
        raise AtlasError(url, "body", f"the connection closed after {size:,} of {int(declared):,} bytes")
    return b"".join(chunks)


CONTENT_RANGE = re.compile(r"^bytes (\d+)-(\d+)/(\d+)$")


def _check_range(url: str, headers, byte_range: tuple[int, int] | None, received: int) -> None:
    """A 206's Content-Range: exactly the bytes asked for (fewer only at the file's end), as many as sent."""
    found = CONTENT_RANGE.match(headers.get("Content-Range", "").strip())
    if byte_range is None or found is None:
        raise AtlasError(url, "Content-Range", f"{one_line(headers.get('Content-Range', 'missing')[:80])!r} is not 'bytes FIRST-LAST/SIZE'")
    first, last, size = (int(g) for g in found.groups())
    if first != byte_range[0] or last != min(byte_range[1], size - 1) or received != last - first + 1:
        raise AtlasError(url, "Content-Range", f"bytes {first}-{last}/{size} with {received:,} bytes sent, "
                                               f"for bytes {byte_range[0]}-{byte_range[1]} asked")


def content_size(answer: Answer) -> int:
    return int(CONTENT_RANGE.match(answer.headers["Content-Range"].strip()).group(3))


def _broken(error: BaseException) -> str:
    if isinstance(error, http.client.RemoteDisconnected):
        return "the server closed the connection without an answer"
    if isinstance(error, http.client.IncompleteRead):
        return f"the connection closed after {len(error.partial):,} bytes of the body"
    if isinstance(error, http.client.HTTPException):
        return f"not an HTTP answer ({type(error).__name__})"
    return f"the connection failed ({one_line(getattr(error, 'strerror', None) or getattr(error, 'reason', None) or type(error).__name__)})"


def _error_code(headers) -> str:
    code = headers.get("X-Error-Code", "")
    return f" {code}" if re.fullmatch(r"[A-Za-z0-9_-]{1,64}", code) else ""


def _origin(url: str) -> tuple[str, str | None, int | None]:
    parts = urlsplit(url)
    return parts.scheme, parts.hostname, parts.port or (443 if parts.scheme == "https" else 80)
