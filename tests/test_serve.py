"""The local server (atlas/build/serve.py): the site folder and nothing else, to 127.0.0.1 and localhost
only, with the pages' CSP as a header; port errors in one line; and, while watching, the reload script
added to pages as served and the status as JSON only the site's own pages can read. The server at
work, rebuilding after real edits, is tests/test_serve_worker.py."""

from __future__ import annotations

import http.client
import json
import re
import socket
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from atlas.build import serve
from tests.conftest import ROOT, run_build

SECRET = "outside the site, never served"


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    """gpt2 built into a folder, plus what a server must not hand out: links out, a folder without an index."""
    out = tmp_path_factory.mktemp("serve") / "site"
    result = run_build(ROOT, "--family", "gpt2", "--out", str(out))
    assert result.returncode == 0, result.stderr
    (out.parent / "secret.txt").write_text(SECRET)
    (out / "leak.txt").symlink_to(out.parent / "secret.txt")
    (out / "etc").symlink_to("/etc")
    (out / "outside").symlink_to(out.parent)
    (out / "gpt2" / "same.html").symlink_to(out / "gpt2" / "index.html")  # a link that stays inside
    (out / "bare").mkdir()
    (out / "bare" / "a.txt").write_text("a file in a folder without index.html\n")
    return out


def running(server: serve.Server):
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    return server


@pytest.fixture
def plain(site):
    server = running(serve.Server(site, 0, None))
    yield server
    server.shutdown()
    server.server_close()


@pytest.fixture
def watching(site):
    server = running(serve.Server(site, 0, serve.Status()))
    yield server
    server.shutdown()
    server.server_close()


def request(port: int, path: str, host: str | None = "", method: str = "GET"):
    """(status, headers, body); host "" sends 127.0.0.1:port, None sends no Host header at all."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    conn.putrequest(method, path, skip_host=True, skip_accept_encoding=True)
    if host is not None:
        conn.putheader("Host", host or f"127.0.0.1:{port}")
    conn.endheaders()
    response = conn.getresponse()
    body = response.read()
    conn.close()
    return response.status, {k.lower(): v for k, v in response.getheaders()}, body


def meta_csp(page: Path) -> str:
    """The policy a built page states in its own meta tag."""
    [policy] = re.findall(r'<meta http-equiv="Content-Security-Policy" content="([^"]+)">', page.read_text(encoding="utf-8"))
    return policy


@pytest.mark.parametrize("path, status, content_type", [
    ("/", 200, "text/html; charset=utf-8"),
    ("/gpt2/index.html", 200, "text/html; charset=utf-8"),
    ("/gpt2/facts.json", 200, "application/json; charset=utf-8"),
    ("/static/atlas.css", 200, "text/css; charset=utf-8"),
    ("/static/atlas.js", 200, "text/javascript; charset=utf-8"),
    ("/static/katex/fonts/KaTeX_Main-Regular.woff2", 200, "font/woff2"),
    ("/no-such-page.html", 404, "text/plain; charset=utf-8"),
    ("/leak.txt", 404, "text/plain; charset=utf-8"),
])
def test_every_response_carries_the_pages_csp_nosniff_and_its_type(plain, site, path, status, content_type):
    got, headers, body = request(plain.port, path)
    assert got == status
    assert headers["content-security-policy"] == meta_csp(site / "gpt2" / "index.html") == meta_csp(site / "index.html")
    assert headers["x-content-type-options"] == "nosniff"
    assert headers["content-type"] == content_type
    assert int(headers["content-length"]) == len(body)


def test_files_are_served_byte_for_byte(plain, site):
    for rel in ("gpt2/index.html", "static/atlas.css", "gpt2/facts.json"):
        status, _, body = request(plain.port, "/" + rel)
        assert status == 200 and body == (site / rel).read_bytes()


@pytest.mark.parametrize("path", [
    "/leak.txt",  # a link to a file beside the site
    "/etc/passwd", "/etc/", "/etc",  # a link to a system folder
    "/outside/secret.txt",  # a link to the folder that holds the site
    "/../secret.txt", "/gpt2/../../secret.txt", "/%2e%2e/secret.txt", "/%2E%2E%2Fsecret.txt",
    "/..%5csecret.txt", "/gpt2/index.html%00.txt", "/%ff%fe",
])
def test_nothing_outside_the_site_folder_is_served(plain, path):
    status, _, body = request(plain.port, path)
    assert status == 404
    assert SECRET.encode() not in body and b"root:" not in body


def test_a_link_that_stays_inside_the_site_is_served(plain, site):
    status, _, body = request(plain.port, "/gpt2/same.html")
    assert status == 200 and body == (site / "gpt2" / "index.html").read_bytes()


def test_folders_are_never_listed(plain, site):
    assert request(plain.port, "/bare/")[0] == 404
    assert request(plain.port, "/static/")[0] == 404  # static/ has files, and no index.html
    status, headers, _ = request(plain.port, "/gpt2")
    assert status == 301 and headers["location"] == "/gpt2/"  # the page's relative links need the slash
    status, _, body = request(plain.port, "/gpt2/")
    assert status == 200 and body == (site / "gpt2" / "index.html").read_bytes()


def test_only_requests_to_this_servers_own_name_are_answered(plain):
    port = plain.port
    assert request(port, "/", host=None)[0] == 400
    for host in ("evil.example", f"evil.example:{port}", f"127.0.0.1:{port + 1}", f"localhost.evil.example:{port}",
                 "127.0.0.1", f"0.0.0.0:{port}", f"[::1]:{port}"):
        status, headers, body = request(port, "/", host=host)
        assert status == 421, host
        assert headers["x-content-type-options"] == "nosniff" and b"<html" not in body
    for host in (f"127.0.0.1:{port}", f"localhost:{port}", f"LocalHost:{port}"):
        assert request(port, "/", host=host)[0] == 200, host


def test_only_get_and_head(plain, site):
    status, headers, body = request(plain.port, "/gpt2/index.html", method="HEAD")
    assert status == 200 and body == b"" and int(headers["content-length"]) == (site / "gpt2/index.html").stat().st_size
    for method in ("POST", "PUT", "DELETE"):
        status, headers, _ = request(plain.port, "/gpt2/index.html", method=method)
        assert status == 405 and headers["x-content-type-options"] == "nosniff"


def test_watching_adds_the_reload_script_to_pages_as_served_never_to_the_files(watching, plain, site):
    page = (site / "gpt2" / "index.html").read_bytes()
    status, headers, served = request(watching.port, "/gpt2/index.html")
    tag = b'<script src="/__atlas__/reload.js?generation=0" defer></script>\n'
    policy = meta_csp(site / "gpt2" / "index.html")
    fetching = policy.replace("connect-src 'none'; ", "") + "; connect-src 'self'"  # the one fetch the reload script makes
    expected = page.replace(b"</body>", tag + b"</body>").replace(f'content="{policy}"'.encode(), f'content="{fetching}"'.encode())
    assert status == 200 and served == expected and served != page.replace(b"</body>", tag + b"</body>")
    assert headers["content-security-policy"] == fetching
    assert (site / "gpt2" / "index.html").read_bytes() == page
    assert request(watching.port, "/static/atlas.css")[2] == (site / "static/atlas.css").read_bytes()
    status, headers, script = request(watching.port, "/__atlas__/reload.js")
    assert status == 200 and headers["content-type"] == "text/javascript; charset=utf-8" and b"/__atlas__/status.json" in script
    assert request(plain.port, "/__atlas__/reload.js")[0] == 404  # a server that does not watch has none


def test_the_status_is_json_that_only_the_sites_own_pages_can_read(watching, plain):
    status, headers, body = request(watching.port, "/__atlas__/status.json")
    assert status == 200 and json.loads(body) == {"generation": 0, "error": None, "building": []}
    assert headers["content-type"] == "application/json; charset=utf-8"
    assert headers["x-content-type-options"] == "nosniff"  # never run as a script, whatever includes it
    assert headers["cross-origin-resource-policy"] == "same-origin"  # nor even loaded by another origin
    assert not any(name.startswith("access-control-") for name in headers)  # nor read by its fetch
    assert request(watching.port, "/__atlas__/status.js")[0] == 404  # the script any page could include is gone
    assert request(plain.port, "/__atlas__/status.json")[0] == 404


def _one_line(result: subprocess.CompletedProcess) -> str:
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and "Traceback" not in result.stderr, result.stderr
    return lines[0]


def test_a_busy_port_is_one_line_naming_it(site, tmp_path):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        alone = subprocess.run([sys.executable, "-m", "atlas.build.serve", str(site), "--port", str(port)],
                               cwd=ROOT, capture_output=True, text=True, timeout=60)
        assert alone.returncode == 1
        assert _one_line(alone) == f"error: port {port} is busy: another program is listening on 127.0.0.1:{port}"
        built = run_build(ROOT, "--family", "gpt2", "--out", str(tmp_path / "site"), "--serve", str(port))
        assert built.returncode == 1 and _one_line(built) == _one_line(alone)


def test_a_number_that_is_no_port_is_a_usage_error(site):
    result = subprocess.run([sys.executable, "-m", "atlas.build.serve", str(site), "--port", "70000"],
                            cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert result.returncode == 2
    assert _one_line(result) == "error: port 70000 is not a port number (0 to 65535)"


@pytest.mark.parametrize("args, message", [
    (["--rebuild-deadline", "5"], "error: --rebuild-deadline bounds the rebuilds of --serve: give --serve too"),
    (["--serve", "0", "--rebuild-deadline", "0"],
     "error: argument --rebuild-deadline: '0' is not a positive whole number (python build.py --help lists the options)"),
])
def test_a_deadline_without_serve_or_not_positive_is_a_usage_error(tmp_path, args, message):
    result = run_build(ROOT, "--family", "gpt2", "--out", str(tmp_path / "site"), *args)
    assert result.returncode == 2 and _one_line(result) == message
    assert not (tmp_path / "site").exists()
