"""Writing results: atomic files, tables, sizes, a progress bar."""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

KIB, MIB, GIB = 1 << 10, 1 << 20, 1 << 30


def fmt_bytes(n: int) -> str:
    """A size in the largest binary unit it reaches: three significant digits (`1.5 MiB`), or a
    whole number from 100 up (`1000 KiB`, never `1e+03 KiB`)."""
    for unit, size in (("GiB", GIB), ("MiB", MIB), ("KiB", KIB)):
        if n >= size:
            value = n / size
            return f"{value:.3g} {unit}" if value < 100 else f"{value:.0f} {unit}"
    return f"{n} B"


def current_umask() -> int:
    """The process umask (reading it requires setting it; it is restored at once)."""
    mask = os.umask(0)
    os.umask(mask)
    return mask


def destination(path: Path) -> Path:
    """Where writing `path` lands: a symlink's target, else the path itself."""
    return path.resolve() if path.is_symlink() else path


def check_destination(path: Path) -> Path:
    """Where writing ``path`` lands (see :func:`destination`), or a ScenarioError naming it if
    :func:`write_atomically` would refuse it; writes and makes nothing, so a command can check its
    outputs before it starts a long measurement."""
    from steer._core import ScenarioError

    target = destination(path)
    if target.exists() and not target.is_file():
        if target.is_char_device():
            return target
        kind = "a directory" if target.is_dir() else "not a regular file"
        raise ScenarioError(f"{path}: cannot write there: {kind}")
    blocking = next((a for a in reversed(target.parents) if a.exists() and not a.is_dir()), None)
    if blocking is not None:
        raise ScenarioError(f"{path}: cannot write there: {blocking} is not a directory")
    if target != path and not target.parent.is_dir():
        # A link may point anywhere: directories are made for the path given, not for it.
        raise ScenarioError(
            f"{path}: cannot write there: a symbolic link to {os.readlink(path)}, in a directory that does not exist"
        )
    return target


def write_atomically(files: dict[Path, str | bytes]) -> None:
    """Writes every file (text or bytes) or none. A regular file (new, or reached through a
    symlink) goes to a temporary file beside it, then all are renamed; an existing character
    device (`/dev/null`, `/dev/stdout`) is written through. Directories are made for a path that
    needs them, never for a symlink's target. Anything else (a directory, a FIFO, a path under a
    file or in /proc, a symlink into a directory that does not exist) is refused with a
    `ScenarioError` naming it, before any output is replaced."""
    from steer._core import ScenarioError

    staged: list[tuple[str, Path]] = []
    devices: list[tuple[Path, bytes]] = []
    path = Path()
    try:
        for path, content in files.items():
            data = content.encode("utf-8") if isinstance(content, str) else content
            target = check_destination(path)
            if target.is_char_device():
                devices.append((target, data))
                continue
            target.parent.mkdir(parents=True, exist_ok=True)
            handle, temporary = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
            staged.append((temporary, target))
            # mkstemp creates private files; results are ordinary files, so follow the umask.
            os.fchmod(handle, 0o666 & ~current_umask())
            with os.fdopen(handle, "wb") as out:
                out.write(data)
                out.flush()
                os.fsync(out.fileno())
        for path, data in devices:
            with open(path, "wb") as out:
                out.write(data)
        for temporary, path in staged:
            os.replace(temporary, path)
    except OSError as error:
        raise ScenarioError(f"{path}: cannot write there: {error.strerror or error}") from None
    finally:
        for temporary, _ in staged:
            if os.path.exists(temporary):
                os.unlink(temporary)


def table(headers: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    """A plain aligned text table: numbers right-aligned, text left-aligned."""
    cells = [[str(h) for h in headers]] + [[str(c) for c in row] for row in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]
    numeric = [
        all(
            isinstance(row[i], (int, float)) or str(row[i]).rstrip("%").replace(".", "", 1).replace(",", "").isdigit()
            for row in rows
        )
        for i in range(len(headers))
    ]
    lines = []
    for row in cells:
        parts = [c.rjust(w) if right else c.ljust(w) for c, w, right in zip(row, widths, numeric)]
        lines.append("  ".join(parts).rstrip())
    return "\n".join(lines)


class Progress:
    """A one-line progress bar on stderr, shown only on a terminal and unless quiet."""

    def __init__(self, label: str, quiet: bool = False) -> None:
        self.label = label
        self.enabled = not quiet and sys.stderr.isatty()
        self.started = time.monotonic()
        self.last_draw = 0.0

    def __call__(self, fraction: float) -> None:
        if not self.enabled:
            return
        now = time.monotonic()
        if now - self.last_draw < 0.1 and fraction < 1.0:
            return
        self.last_draw = now
        width = 30
        filled = int(width * min(max(fraction, 0.0), 1.0))
        elapsed = now - self.started
        eta = elapsed * (1 - fraction) / fraction if fraction > 0 else 0.0
        bar = "#" * filled + "-" * (width - filled)
        sys.stderr.write(f"\r{self.label} [{bar}] {fraction:6.1%}  {elapsed:5.1f}s  eta {eta:5.1f}s")
        sys.stderr.flush()

    def restart(self, label: str) -> None:
        """Starts the bar again from nothing, for the next stage of a job (the line is cleared:
        the new label may be shorter)."""
        self.close()
        self.label = label
        self.started = time.monotonic()
        self.last_draw = 0.0

    def close(self) -> None:
        if self.enabled:
            sys.stderr.write("\r\033[K")
            sys.stderr.flush()


# Characters a run without spaces (a key, a value, a path) keeps in a message, and a message keeps.
MAX_SHOWN_WORD = 120
MAX_SHOWN_MESSAGE = 1000


def elided(text: str, most: int, head: int, tail: int) -> str:
    """``text`` if at most ``most`` characters, else its first ``head`` and last ``tail`` around a
    note of how many were left out."""
    if len(text) <= most:
        return text
    return f"{text[:head]}…[{len(text) - head - tail} characters]…{text[len(text) - tail :]}"


def shortened(message: str) -> str:
    """A message with what the user typed kept readable: a run without spaces longer than
    ``MAX_SHOWN_WORD`` (a 100 KB key or value) is shown by its start and end with how much was left
    out, and a message still too long by its start and end. As the core shortens its own
    (``steer_sim::error::shortened``)."""
    words = " ".join(elided(word, MAX_SHOWN_WORD, 80, 20) for word in message.split(" "))
    return elided(words, MAX_SHOWN_MESSAGE, 700, 200)


def file_name(value: str, empty: str = "empty file name") -> str:
    """An argparse type for a file to write: refuses an empty name (saying ``empty``) and one
    spelled as a directory (its last part empty, `.` or `..`, as in `out/`), which would otherwise
    be written as a file."""
    if not value.strip():
        raise argparse.ArgumentTypeError(empty)
    if value.rsplit("/", 1)[-1] in ("", ".", ".."):
        raise argparse.ArgumentTypeError(f"{value}: a directory, not a file name")
    return value


def directory_name(value: str) -> str:
    """An argparse type for a directory to write into: refuses an empty name, which would
    otherwise mean the default silently."""
    if not value.strip():
        raise argparse.ArgumentTypeError("empty directory name (leave the option out for the default)")
    return value


def json_target(value: str) -> str:
    """An argparse type for ``--json [FILE]``: a file name, or ``-`` (the const) for stdout."""
    return file_name(value, "empty file name (give a file, or no value to print to stdout)")


def add_json_option(parser: argparse.ArgumentParser, help: str) -> None:
    """``--json [FILE]``: JSON to FILE, or to stdout without one (``args.json == "-"``)."""
    parser.add_argument("--json", nargs="?", const="-", type=json_target, metavar="FILE", help=help)


def emit_json(target: str, data: Any, sort_keys: bool = True) -> None:
    """Writes ``data`` as JSON for ``--json [FILE]``: to stdout for ``-``, else atomically to FILE
    (saying so). Listings keep their keys in column order (``sort_keys=False``)."""
    text = json.dumps(data, indent=2, sort_keys=sort_keys) + "\n"
    if target == "-":
        sys.stdout.write(text)
        return
    write_atomically({Path(target): text})
    print(f"wrote {target}")


def count(n: int, noun: str) -> str:
    """``1 run``, ``2 runs``."""
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"
