"""Publishing a built site so that it cannot half-happen.

The new site is assembled in ``.<out>.building-<pid>`` beside ``out`` and then exchanged with ``out``
in one ``renameat2(RENAME_EXCHANGE)`` call: at every instant ``out`` is either the old site or the new
one, whole. What a build killed mid-way leaves beside ``out`` (its half-assembled folder, or the old
site it had swapped out but not yet deleted) carries the same prefix, and the next build removes it.

Builds into one folder take a lock on the folder that holds it, so the second waits for the first and
then starts from the first one's result.

Every site carries a marker file, ``.atlas-site``: a build publishes only into a folder that holds
one (or that is missing, empty, or a site built before the marker existed), and never into the
project itself, so a folder of the user's own files is never replaced by a site.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import fcntl
import os
import shutil
import signal
import stat
import sys
import time
from pathlib import Path
from typing import Iterator

from atlas.errors import AtlasError, one_line

PROJECT = Path(__file__).resolve().parents[2]
MARKER = ".atlas-site"
# Fixed text: two builds of the same families write the very same bytes, marker included.
MARKER_TEXT = "This folder is a site the architecture atlas built (python build.py --out); a build replaces it whole.\n"
# What a build writes at the top of a site besides one folder per family: how a site built before the
# marker existed is still recognised.
SITE_PARTS = ("index.html", "static", "compare")
SITE_FILES = ("index.html", "search-data.js")  # the files (not folders) a build writes at the site's root

# The steps of publishing, in order. A test names one in STEP_VARIABLE to stop a build there:
# "STEP kill" (the build kills itself, as a power cut would), "STEP term" (SIGTERM) or "STEP hold
# FOLDER" (it writes FOLDER/reached and waits until FOLDER/go exists), so that nothing depends on timing.
STEPS = ("locked", "cleaned", "staged", "copying", "copied", "writing", "written", "marked", "exchanged")
STEP_VARIABLE = "ATLAS_TEST_PUBLISH_STEP"
_RENAME_EXCHANGE = 2
_AT_FDCWD = -100


@contextlib.contextmanager
def lock(out: Path, shown: Path) -> Iterator[None]:
    """Hold the lock of builds into ``out``: an flock on the folder that holds it (no lock file to
    leave behind). A build that finds it held says so and waits."""
    out.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(out.parent, os.O_RDONLY | os.O_DIRECTORY)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            print(one_line(f"waiting for another build into {out.parent} to finish publishing ..."), file=sys.stderr, flush=True)
            fcntl.flock(fd, fcntl.LOCK_EX)
        pause("locked")
        yield
    finally:
        os.close(fd)  # closing releases the lock


def staging_folder(out: Path) -> Path:
    staging = out.parent / f".{out.name}.building-{os.getpid()}"
    discard(staging)
    staging.mkdir()
    pause("staged")
    return staging


def leftovers(out: Path) -> list[Path]:
    """What builds into ``out`` that were killed left beside it (a pages folder only once no build holds it)."""
    found = [p for pattern in (f".{out.name}.building-*", f".{out.name}.previous-*") for p in out.parent.glob(pattern)]
    found += [p for p in out.parent.glob(f".{out.name}.pages-*") if not _held(p)]
    return sorted(found)


@contextlib.contextmanager
def pages_folder(out: Path) -> Iterator[Path]:
    """``.<out>.pages-<pid>`` beside ``out``, for the whole build: the worker that renders a family writes
    its pages there, and publishing moves each family's folder into the new site in one rename. The
    build holds a shared flock on it (its workers inherit it), so that another build removing what
    killed builds left sees that it is in use; it is removed when the build ends."""
    folder = out.parent / f".{out.name}.pages-{os.getpid()}"
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        discard(folder)
        folder.mkdir()
        fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    except OSError as e:
        raise AtlasError("--out", str(out), f"cannot write the site there ({e.strerror or e})") from None
    try:
        fcntl.flock(fd, fcntl.LOCK_SH)
        yield folder
    finally:
        discard(folder)
        os.close(fd)


def _held(folder: Path) -> bool:
    """Whether a running build holds this pages folder."""
    try:
        fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return False
    except BlockingIOError:
        return True
    finally:
        os.close(fd)


def write_files(folder: Path, files: dict[str, str]) -> None:
    """Each text at its path under ``folder`` (UTF-8), as a new file (``fresh``), folders made as needed."""
    made: set[Path] = set()
    for rel, text in files.items():
        target = folder / rel
        if target.parent not in made:
            target.parent.mkdir(parents=True, exist_ok=True)
            made.add(target.parent)
        try:
            fresh(target).write_text(text, encoding="utf-8")
        except OSError as e:  # a write that fails (a full disk) names no file of itself: name the page
            raise OSError(e.errno, e.strerror, str(target)) from None
        pause("writing")


def remove_leftovers(out: Path) -> None:
    """Under the lock no other build is publishing into ``out``: every leftover is a dead build's."""
    for path in leftovers(out):
        discard(path)
    pause("cleaned")


def tidy(out: Path) -> None:
    """Remove what killed builds left beside ``out`` when no build is publishing into it now; a build
    that finds its site up to date calls this, as it publishes nothing (the one publishing tidies)."""
    fd = os.open(out.parent, os.O_RDONLY | os.O_DIRECTORY)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return
        for path in leftovers(out):
            discard(path)
    finally:
        os.close(fd)


def discard(path: Path) -> None:
    """Remove ``path``, never following a symbolic link out of it."""
    if path.is_symlink() or (path.exists() and not path.is_dir()):
        path.unlink()
    elif path.exists():
        shutil.rmtree(path)


def copy_previous(out: Path, staging: Path) -> None:
    """The previous site's files into ``staging``: only folders and regular files, so a symbolic link
    placed in the site (or a pipe) is neither followed nor carried into the next site.

    Files are hard-linked, not copied (a no-op rebuild would otherwise spend most of its time copying
    the site). That is safe because a build never writes into a file it carried over: a rebuilt
    family's folder, static/ and compare/ are removed and written afresh, and ``fresh`` unlinks a single
    file (the index) before it is written, so the old site, still in place, never changes."""
    if not out.is_dir():
        return
    for folder, dirs, files in os.walk(out):  # os.walk does not descend into linked folders
        here = Path(folder)
        target = staging / here.relative_to(out)
        for name in sorted(dirs + files):
            mode = os.lstat(here / name).st_mode
            if stat.S_ISDIR(mode):
                (target / name).mkdir()
            elif stat.S_ISREG(mode):
                try:
                    os.link(here / name, target / name, follow_symlinks=False)
                except OSError:  # a file system without hard links
                    shutil.copy2(here / name, target / name, follow_symlinks=False)
            else:
                kind = "a symbolic link" if stat.S_ISLNK(mode) else "not a regular file"
                print(one_line(f"note: {here / name} is {kind}; the new site leaves it out"), file=sys.stderr)
            pause("copying")
        dirs[:] = [d for d in dirs if stat.S_ISDIR(os.lstat(here / d).st_mode)]


def fresh(path: Path) -> Path:
    """``path``, unlinked first: what is written there next is a new file, never the old site's."""
    path.unlink(missing_ok=True)
    return path


def replace(staging: Path, out: Path) -> None:
    """Mark ``staging`` as a site, and put it in the place of ``out`` in one atomic step; the old site
    ends up in ``staging``."""
    fresh(staging / MARKER).write_text(MARKER_TEXT, encoding="utf-8")
    pause("marked")
    exchange(staging, out)


def exchange(staging: Path, out: Path) -> None:
    """Put the folder ``staging`` in the place of ``out`` in one atomic step (a site, or the checkpoint
    folder ``pin`` writes); what was at ``out`` ends up in ``staging``."""
    if not out.exists() and not out.is_symlink():
        os.rename(staging, out)  # nothing to keep: one rename is atomic
        pause("exchanged")
        return
    if not _exchange(staging, out):
        # No atomic exchange here (a kernel or file system without renameat2): two renames, with a
        # moment between them when ``out`` is missing; the old folder is then at .<out>.previous-<pid>.
        previous = out.parent / f".{out.name}.previous-{os.getpid()}"
        os.rename(out, previous)
        pause("between renames")
        os.rename(staging, out)
        os.rename(previous, staging)
    pause("exchanged")


def _exchange(a: Path, b: Path) -> bool:
    try:
        renameat2 = ctypes.CDLL(None, use_errno=True).renameat2
    except (AttributeError, OSError):
        return False
    if renameat2(_AT_FDCWD, os.fsencode(a), _AT_FDCWD, os.fsencode(b), _RENAME_EXCHANGE) == 0:
        return True
    err = ctypes.get_errno()
    if err in (errno.ENOSYS, errno.EINVAL, errno.ENOTSUP):
        return False
    raise OSError(err, os.strerror(err), str(b))


def pause(step: str) -> None:
    """A step of publishing is reached: where a test asked (STEP_VARIABLE), the build stops here."""
    asked = os.environ.get(STEP_VARIABLE, "").split(" ", 2)
    if asked[0] != step:
        return
    if asked[1:2] == ["kill"]:
        os.kill(os.getpid(), signal.SIGKILL)
    elif asked[1:2] == ["term"]:
        os.kill(os.getpid(), signal.SIGTERM)
    elif asked[1:2] == ["hold"] and len(asked) == 3:
        gate = Path(asked[2])
        (gate / "reached").write_text(step, encoding="utf-8")
        while not (gate / "go").exists():
            time.sleep(0.01)


def output_folder(out: Path) -> Path:
    """``out`` resolved; refused, before anything is built or written, unless it is a folder or can be made one."""
    resolved = Path(out).resolve()
    if resolved.exists() and not resolved.is_dir():
        raise AtlasError("--out", str(out), "is not a folder; give a folder (the file was left as it is)")
    ancestor = resolved
    while not ancestor.exists():
        ancestor = ancestor.parent
    if not ancestor.is_dir():
        raise AtlasError("--out", str(out), f"{ancestor} is not a folder")
    if not os.access(ancestor, os.W_OK | os.X_OK):
        raise AtlasError("--out", str(out), f"cannot write in {ancestor} (permission denied)")
    if resolved == PROJECT or PROJECT.is_relative_to(resolved):
        where = "is the project's own folder" if resolved == PROJECT else f"holds the project ({PROJECT})"
        raise AtlasError("--out", str(out), f"{where}; a build replaces its --out folder whole: give a folder of its own, such as site (nothing in it was touched)")
    if resolved.is_dir():
        try:
            why = not_site(resolved)
        except OSError as e:
            raise AtlasError("--out", str(out), f"cannot be read ({e.strerror or e})") from None
        if why is not None:
            raise AtlasError("--out", str(out), f"is not a site the atlas built ({why}); give a new or empty folder, or a site a build made (its files were left as they are)")
    return resolved


def not_site(folder: Path) -> str | None:
    """None when a build may replace ``folder``: it is empty, holds the marker a build writes, or holds
    just what a build before the marker wrote (families' folders, and index.html, static/ and compare/:
    all three or none; and the index's search-data.js); else why it is not a site."""
    names = sorted(os.listdir(folder))
    if not names or _marked(folder / MARKER):
        return None
    from atlas import families

    ours = set(SITE_PARTS) | set(SITE_FILES) | set(families.names())
    for name in names:
        path = folder / name
        if name not in ours or path.is_symlink() or path.is_dir() == (name in SITE_FILES):
            return f"it holds {name!r}, which a build does not write, and no {MARKER} marker"
    parts = [n for n in SITE_PARTS if n in names]
    if parts and len(parts) < len(SITE_PARTS):  # a site's index comes with its scripts and its compare pages
        missing = [n if n == "index.html" else f"{n}/" for n in SITE_PARTS if n not in names]
        return f"it holds {parts[0]!r} but no {missing[0]}, and no {MARKER} marker"
    return None


def _marked(path: Path) -> bool:
    """Whether ``path`` is a build's marker: a regular file (never a pipe opened) holding MARKER_TEXT."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return False
    try:
        return stat.S_ISREG(os.fstat(fd).st_mode) and os.read(fd, len(MARKER_TEXT) + 1) == MARKER_TEXT.encode()
    finally:
        os.close(fd)
