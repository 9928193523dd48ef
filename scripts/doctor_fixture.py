#!/usr/bin/env python3
"""Cut a captured host tree down to the files `steer doctor` reads, as a small reproducible tar.gz.

The source is a tarball of a real machine's /proc and /sys subset (hwloc-gather-topology's, an
lscpu dump, ...) or its extracted directory. The doctor runs on it (with each ``--cpus`` given);
every file it read, every symbolic link on the way to one, and every entry of the directories it
listed are kept byte for byte, as are the files matched by ``--keep`` (globs under the root, for
files the tests read beside the doctor); nothing else. Paths in the output are the host's
(``proc/cpuinfo``, ``sys/...``), owners and times zeroed, so the same input gives the same bytes:

    .venv/bin/python scripts/doctor_fixture.py SOURCE.tar.bz2 --prefix DIR_IN_TARBALL \\
        [--cpus 0] [--keep 'sys/devices/system/cpu/cpu*/cache/index3/shared_cpu_list'] OUT.tar.gz
"""

from __future__ import annotations

import argparse
import gzip
import io
import os
import tarfile
import tempfile
from pathlib import Path

from steer import doctor


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("source", type=Path, help="a tarball of the captured tree, or its directory")
    parser.add_argument("out", type=Path)
    parser.add_argument("--prefix", default="", help="the tree's directory inside the tarball")
    parser.add_argument("--cpus", action="append", default=[None], help="also run the doctor with these --cpus")
    parser.add_argument("--keep", action="append", default=[], help="a glob of further files to keep")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        if args.source.is_dir():
            root = args.source / args.prefix
        else:
            with tarfile.open(args.source) as tar:
                tar.extractall(tmp, filter="data")
            root = Path(tmp) / args.prefix
        logical: set[str] = set()
        for cpus in args.cpus:
            _, host = doctor.diagnose(root, cpus=cpus)
            logical |= {name.lstrip("/") for name in (*host.read, *host.links, *host.seen)}
        for pattern in args.keep:
            logical |= {str(p.relative_to(root)) for p in root.glob(pattern)}
        # Each name where it lies in the tree, and the links on the way, as the doctor's capture finds them.
        links: dict[str, str] = {}
        host = doctor.Host(root)
        keep = {real for name in sorted(logical) if (root / (real := host.real(name, links))).exists()}

        entries = {name: ("link", target) for name, target in links.items()}
        for name in keep:
            if name in entries:
                continue
            path = root / name
            entries[name] = ("dir", None) if path.is_dir() else ("file", path.read_bytes())
        for name in list(entries):
            parent = os.path.dirname(name)
            while parent and parent not in entries:
                entries[parent] = ("dir", None)
                parent = os.path.dirname(parent)

        buffer = io.BytesIO()
        with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT) as tar:
            for name, (kind, data) in sorted(entries.items()):
                info = tarfile.TarInfo(name)
                info.mtime, info.uid, info.gid, info.uname, info.gname = 0, 0, 0, "", ""
                if kind == "link":
                    info.type, info.linkname, info.mode = tarfile.SYMTYPE, data, 0o777
                    tar.addfile(info)
                elif kind == "dir":
                    info.type, info.mode = tarfile.DIRTYPE, 0o755
                    tar.addfile(info)
                else:
                    info.size, info.mode = len(data), 0o644
                    tar.addfile(info, io.BytesIO(data))
        with open(args.out, "wb") as f, gzip.GzipFile(fileobj=f, mode="wb", mtime=0, filename="") as gz:
            gz.write(buffer.getvalue())
    files = sum(kind == "file" for kind, _ in entries.values())
    print(f"{args.out}: {files} files, {len(links)} links, {args.out.stat().st_size} bytes")


if __name__ == "__main__":
    main()
