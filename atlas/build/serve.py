"""The local server: the site folder on 127.0.0.1, and nothing else; watching, it rebuilds what is edited.

    python build.py --serve [PORT]         # build, serve, rebuild a family when its inputs change
    python -m atlas.build.serve SITE [--port N]  # serve a built site as it is

What it serves: files under the site folder, found by resolving the request's path (symbolic links
included) and refused (404) unless the result is inside the folder as it resolves now (the folder
may itself be a link that a build swaps); a folder's index.html, never a listing. Requests must name
127.0.0.1 or localhost with the server's port as their Host (421 otherwise, 400 without one), so
that a page on another site cannot reach this one through a name that resolves to 127.0.0.1. Every
response carries the pages' own Content-Security-Policy (read from templates/base.html, where the
pages get it), ``X-Content-Type-Options: nosniff`` and ``Referrer-Policy: no-referrer``; text is
served with ``charset=utf-8``.

Watching (atlas/build/watch.py): the families' inputs polled, rebuilds in a warm worker, each with a
deadline, and the status the pages fetch.

HTML responses get one script tag added on the way out, never in the files:
``/__atlas__/reload.js``, which fetches ``/__atlas__/status.json`` four times a second and reloads the page
after a successful rebuild, or shows the failed rebuild's error line above the last good site. The
status is JSON, with ``nosniff``, ``Cross-Origin-Resource-Policy: same-origin`` and no CORS header:
another origin can neither read it nor run it as a script. So that the pages may fetch it, the policy
of the pages served while watching says ``connect-src 'self'`` (header and meta tag alike).
"""

from __future__ import annotations

import argparse
import errno
import functools
import html.parser
import http.server
import signal
import sys
import threading
import urllib.parse
from pathlib import Path

from atlas.build.watch import DEADLINE_SECONDS, Status, WarmBuilder, watch

ROOT = Path(__file__).resolve().parents[2]
BASE_TEMPLATE = ROOT / "templates" / "base.html"
RELOAD_SCRIPT = Path(__file__).with_name("serve_reload.js")
RESERVED = "/__atlas__/"  # the server's own paths: the reload script and the rebuild status

TYPES = {
    ".html": "text/html; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".json": "application/json; charset=utf-8",
    ".svg": "image/svg+xml; charset=utf-8",
    ".txt": "text/plain; charset=utf-8",
    ".md": "text/plain; charset=utf-8",
    ".png": "image/png",
    ".ico": "image/x-icon",
    ".woff2": "font/woff2",
    ".woff": "font/woff",
    ".ttf": "font/ttf",
}


class PortError(Exception):
    """The port cannot be served on; ``exit_code`` is 2 for a usage error (not a port number), else 1."""

    def __init__(self, message: str, exit_code: int):
        super().__init__(message)
        self.exit_code = exit_code


class _MetaCSP(html.parser.HTMLParser):
    def __init__(self):
        super().__init__()
        self.policy: str | None = None

    def handle_starttag(self, tag, attrs):
        values = dict(attrs)
        if tag == "meta" and (values.get("http-equiv") or "").lower() == "content-security-policy":
            self.policy = values.get("content")


def content_security_policy(template: Path = BASE_TEMPLATE) -> str:
    """The policy the pages state in their meta tag, so that the header can never say something else."""
    parser = _MetaCSP()
    parser.feed(template.read_text(encoding="utf-8"))
    if not parser.policy:
        raise ValueError(f"{template} has no Content-Security-Policy meta tag")
    return parser.policy


def watching_policy(policy: str) -> str:
    """The pages' policy as served while watching: ``connect-src 'self'``, so that the reload script
    may fetch the status from the page's own origin; every other directive as the pages state it."""
    directives = [d.strip() for d in policy.split(";") if d.strip()]
    kept = [d for d in directives if d.split()[0].lower() != "connect-src"]
    return "; ".join(kept + ["connect-src 'self'"])


class Server(http.server.ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, folder: Path, port: int, status: Status | None):
        self.folder = Path(folder)
        self.page_policy = content_security_policy()
        self.policy = self.page_policy if status is None else watching_policy(self.page_policy)
        self.status = status  # None: no watching, no reload script
        try:
            super().__init__(("127.0.0.1", port), Handler)
        except OverflowError:
            raise PortError(f"port {port} is not a port number (0 to 65535)", 2) from None
        except OSError as e:
            if e.errno == errno.EADDRINUSE:
                raise PortError(f"port {port} is busy: another program is listening on 127.0.0.1:{port}", 1) from None
            if e.errno == errno.EACCES:
                raise PortError(f"port {port} needs privileges this user lacks; pick one above 1023", 1) from None
            raise PortError(f"port {port}: {e.strerror or e}", 1) from None

    @property
    def port(self) -> int:
        return self.server_address[1]


class Handler(http.server.BaseHTTPRequestHandler):
    server: Server

    def version_string(self) -> str:
        return "atlas"

    def log_message(self, format, *args):  # the terminal is for rebuilds and errors, not for every request
        pass

    def end_headers(self):
        self.send_header("Content-Security-Policy", self.server.policy)
        self.send_header("X-Content-Type-Options", "nosniff")
        self.send_header("Referrer-Policy", "no-referrer")
        self.send_header("Cache-Control", "no-cache")
        super().end_headers()

    def send_error(self, code, message=None, explain=None):
        # our own short body, typed and with its charset like every other text this server sends
        body = f"{code} {message or self.responses.get(code, ('',))[0]}\n".encode("utf-8")
        self.send_response(code)
        self.send_header("Content-Type", "text/plain; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Connection", "close")
        self.close_connection = True
        self.end_headers()
        if self.command != "HEAD" and code >= 200 and code not in (204, 304):
            self.wfile.write(body)

    def do_GET(self):
        self._answer(head=False)

    def do_HEAD(self):
        self._answer(head=True)

    def _refuse_method(self):
        self.send_error(405, "only GET and HEAD")

    do_POST = do_PUT = do_DELETE = do_PATCH = do_OPTIONS = _refuse_method

    def _host_allowed(self) -> bool | None:
        host = self.headers.get("Host")
        if host is None:
            return None
        allowed = {f"127.0.0.1:{self.server.port}", f"localhost:{self.server.port}"}
        if self.server.port == 80:
            allowed |= {"127.0.0.1", "localhost"}
        return host.strip().lower() in allowed

    def _answer(self, head: bool) -> None:
        allowed = self._host_allowed()
        if allowed is None:
            return self.send_error(400, "a Host header is required")
        if not allowed:
            return self.send_error(421, "this server answers to 127.0.0.1 and localhost only")
        path = urllib.parse.urlsplit(self.path).path
        if self.server.status is not None and path.startswith(RESERVED):
            return self._own(path[len(RESERVED):], head)
        found = self._resolve(path)
        if found is None:
            return self.send_error(404)
        if isinstance(found, str):  # a folder asked for without its slash: its relative links need one
            self.send_response(301)
            self.send_header("Location", found)
            self.send_header("Content-Length", "0")
            return self.end_headers()
        try:
            body = found.read_bytes()
        except OSError:
            return self.send_error(404)
        content_type = TYPES.get(found.suffix.lower(), "application/octet-stream")
        if self.server.status is not None and found.suffix.lower() == ".html":
            body = _with_reload_script(body, self.server.status.generation, self.server.page_policy, self.server.policy)
        self._send(body, content_type, head)

    def _resolve(self, path: str) -> Path | str | None:
        """The file a path names inside the site folder, a redirect for a folder without its slash, or None."""
        try:
            relative = urllib.parse.unquote(path, errors="strict")
            if "\0" in relative or "\\" in relative:
                return None
            root = self.server.folder.resolve()
            target = (root / relative.lstrip("/")).resolve()
            if not target.is_relative_to(root):
                return None
            if target.is_dir():
                index = (target / "index.html").resolve()
                if not index.is_relative_to(root) or not index.is_file():
                    return None  # a folder without its own index is not listed
                return index if path.endswith("/") else path + "/"
            return target if target.is_file() else None
        except (OSError, RuntimeError, ValueError):  # a name that cannot be decoded, a link that loops
            return None

    def _own(self, name: str, head: bool) -> None:
        if name == "reload.js":
            return self._send(RELOAD_SCRIPT.read_bytes(), TYPES[".js"], head)
        if name == "status.json":  # JSON, nosniff and no CORS header: no other origin can read or run it
            return self._send(self.server.status.json(), TYPES[".json"], head, own=True)
        self.send_error(404)

    def _send(self, body: bytes, content_type: str, head: bool, own: bool = False) -> None:
        self.send_response(200)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        if own:  # not even loadable by another origin's <script> or <img>
            self.send_header("Cross-Origin-Resource-Policy", "same-origin")
        self.end_headers()
        if not head:
            self.wfile.write(body)


def _with_reload_script(page: bytes, generation: int, policy: str, served_policy: str) -> bytes:
    """The page as served while watching: the reload script added before </body>, with the rebuild
    the page was served at (so a rebuild finished before the script first polls is still seen), and
    the policy in its meta tag the one the header sends (a page obeys both, so both must allow fetch)."""
    page = page.replace(f'content="{policy}"'.encode("utf-8"), f'content="{served_policy}"'.encode("utf-8"), 1)
    tag = f'<script src="{RESERVED}reload.js?generation={generation}" defer></script>\n'.encode("utf-8")
    at = page.rfind(b"</body>")
    return page + tag if at < 0 else page[:at] + tag + page[at:]


def site_families(folder: Path) -> list[str]:
    """The families the site folder holds now."""
    from atlas import families

    return [name for name in families.names() if (Path(folder) / name / "index.html").is_file()]


def serve(folder: Path, port: int, watching: bool = False, deadline: float = DEADLINE_SECONDS) -> None:
    """Serve ``folder`` until interrupted (Ctrl-C, or SIGTERM); watching, rebuild too, in a warm worker,
    each rebuild stopped after ``deadline`` seconds; the worker and its rebuild are stopped with the server."""
    status = Status() if watching else None
    server = Server(folder, port, status)
    stop = threading.Event()
    say = functools.partial(print, flush=True)
    builder = None
    if status is not None:
        served = functools.partial(site_families, folder)
        builder = WarmBuilder(Path(folder), deadline, served, say)
        builder.start()
        threading.Thread(target=watch, args=(served, builder, status, stop), kwargs={"say": say}, daemon=True).start()
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, _interrupt)  # stopped as Ctrl-C stops it: the worker and its rebuild too
    print(f"serving {folder} at http://127.0.0.1:{server.port}/ (Ctrl-C stops)", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        stop.set()
        if builder is not None:
            builder.close()
        server.server_close()


def _interrupt(signum, frame):
    raise KeyboardInterrupt


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m atlas.build.serve", description="Serve a built site on 127.0.0.1.")
    parser.add_argument("folder", type=Path, help="the site folder")
    parser.add_argument("--port", type=int, default=8000, help="the port (default 8000; 0 picks a free one)")
    args = parser.parse_args(argv)
    if not args.folder.is_dir():
        print(f"error: {args.folder}: not a folder", file=sys.stderr)
        return 2
    try:
        serve(args.folder, args.port)
    except PortError as e:
        print(f"error: {e}", file=sys.stderr)
        return e.exit_code
    return 0


if __name__ == "__main__":
    sys.exit(main())
