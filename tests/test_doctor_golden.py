"""Golden output of `steer doctor`: every check (area, name, verdict, evidence, fix) on each tree
test_doctor builds or extracts, as `steer doctor --json` reports it, in `tests/fixtures/doctor/`.
A change to any word is a change to what users read: bless it with `STEER_BLESS=1 .venv/bin/python
-m pytest tests/test_doctor_golden.py` and review the diff."""

from __future__ import annotations

import json
import os
from dataclasses import asdict
from pathlib import Path

import pytest

from steer import doctor
from test_doctor import REAL_HOSTS, TPH_DATA, config_spaces, real_host, turin_tree, write, xeon_tree

GOLDEN = Path(__file__).parent / "fixtures" / "doctor"
BLESS = os.environ.get("STEER_BLESS") == "1"


def sapphire_rapids(root: Path) -> Path:
    """Real config spaces (crates/steer-tph/tests/data/real/PROVENANCE.md) and nothing else."""
    real = TPH_DATA / "real"
    for dump in ("pciutils-pri-pasid.txt", "pciutils-cap-dvsec-cxl.txt", "pciutils-broken-ecaps.txt"):
        for bdf, space in config_spaces(real / dump).items():
            write(root, f"sys/bus/pci/devices/{bdf}/config", space)
    return root


def unprivileged_and_malformed(root: Path) -> Path:
    write(root, "sys/bus/pci/devices/0000:00:00.0/config", config_spaces()["0000:41:00.0"][:64])
    broken = bytearray(config_spaces()["0000:41:00.0"])
    broken[0x34] = 0x01  # a capability pointer into the header
    write(root, "sys/bus/pci/devices/0000:00:01.0/config", bytes(broken))
    return root


# Each case: a tree and the consumer CPUs the doctor is asked about.
CASES = {
    "turin-consumer-0": (turin_tree, "0"),
    "turin-consumer-2-9": (turin_tree, "2,9"),
    "xeon-ddio-ways": (lambda root: xeon_tree(root, 0x600), None),
    "xeon-no-msr": (lambda root: xeon_tree(root, None), None),
    "empty": (lambda root: root, None),
    "sapphire-rapids-config-spaces": (sapphire_rapids, None),
    "unprivileged-and-malformed": (unprivileged_and_malformed, None),
    **{f"real-{name}": (lambda root, name=name: real_host(name, root), "0") for name in REAL_HOSTS},
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_every_check_on_every_tree_is_as_blessed(tmp_path, case):
    build, cpus = CASES[case]
    checks, _ = doctor.diagnose(build(tmp_path), cpus=cpus)
    got = [asdict(c) for c in checks]
    # The tree's place is not part of what the doctor says about it.
    assert str(tmp_path) not in json.dumps(got)
    path = GOLDEN / f"{case}.json"
    if BLESS:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(got, indent=1) + "\n")
    assert got == json.loads(path.read_text())
