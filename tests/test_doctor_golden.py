"""Golden output of `steer doctor`: every check (area, name, verdict, evidence, fix) on each tree
test_doctor builds or extracts, as `steer doctor --json` reports it, in `tests/fixtures/doctor/`.
A change to any word is a change to what users read: bless it with `STEER_BLESS=1 .venv/bin/python
-m pytest tests/test_doctor_golden.py` and review the diff."""

from __future__ import annotations

import gzip
import json
import os
from dataclasses import asdict
from pathlib import Path

import pytest

from steer import doctor
from test_doctor import (
    REAL_HOSTS,
    config_spaces,
    real_host,
    sapphire_rapids_tree,
    turin_tree,
    unprivileged_and_malformed_tree,
    write,
    xeon_tree,
)

GOLDEN = Path(__file__).parent / "fixtures" / "doctor"
BLESS = os.environ.get("STEER_BLESS") == "1"


def without_tph_completer(space: bytes) -> bytes:
    """A root port's config space with DevCap2's TPH Completer Supported bits (12-13) cleared."""
    data = bytearray(space)
    cap = data[0x34]
    while data[cap] != 0x10:  # the PCI Express capability
        cap = data[cap + 1]
    devcap2 = int.from_bytes(data[cap + 0x24 : cap + 0x28], "little") & ~0x3000
    data[cap + 0x24 : cap + 0x28] = devcap2.to_bytes(4, "little")
    return bytes(data)


def genoa_variants(root: Path) -> Path:
    """An AMD host on the other side of most checks: Zen 4, a kernel configured without TPH (in
    /proc/config.gz), `notph` among other pci= options, no TPH requester and an unreadable config
    space, a NIC without a driver whose ten IRQs are elsewhere or unread, io_alloc off, a DSA
    and a work queue set up wrong, a memory-only node without meminfo."""
    # A byte that is not UTF-8 is read as a replacement character.
    write(root, "proc/cpuinfo", b"vendor_id\t: AuthenticAMD\ncpu family\t: 25\nmodel name\t: AMD EPYC 9654\xff\n\n")
    # Only the first processor's fields count.
    cpuinfo = root / "proc/cpuinfo"
    cpuinfo.write_bytes(cpuinfo.read_bytes() + b"vendor_id\t: Other\nmodel name\t: x\n")
    write(root, "proc/sys/kernel/osrelease", "6.19.0-rc1\n")
    write(root, "proc/config.gz", gzip.compress(b'CONFIG_LOCALVERSION="\xff"\n# CONFIG_PCIE_TPH is not set\n'))
    write(root, "boot/config-6.19.0-rc1", "CONFIG_PCIE_TPH=y\n")  # /proc/config.gz comes first
    write(root, "proc/cmdline", "BOOT_IMAGE=/vmlinuz pci=realloc=off,notph iommu=pt\n")
    write(root, "proc/4242/status", "Name:\tapp\nCpus_allowed_list:\t0-3\n")
    write(root, "sys/bus/pci/devices/0000:40:01.1/config", without_tph_completer(config_spaces()["0000:40:01.1"]))
    (root / "sys/bus/pci/devices/0000:00:02.0/config").mkdir(parents=True)  # unreadable as a file, listed first
    nic = root / "sys/bus/pci/devices/0000:42:00.0"
    nic.mkdir()
    for irq in range(100, 109):
        write(root, f"sys/bus/pci/devices/0000:42:00.0/msi_irqs/{irq}", "msix\n")
        if irq < 108:
            write(root, f"proc/irq/{irq}/smp_affinity_list", "20-21\n")
    (root / "sys/class/net/eth0/queues/rx-0").mkdir(parents=True)
    (root / "sys/class/net/eth0/queues/tx-0").mkdir(parents=True)
    os.symlink("../../../bus/pci/devices/0000:42:00.0", root / "sys/class/net/eth0/device")
    (root / "sys/class/net/br0").mkdir()  # no device: not a PCI NIC (listed before eth0)
    # A second NIC with exactly eight IRQs (all shown), on the consumer's CPUs.
    for irq in range(200, 208):
        write(root, f"sys/bus/pci/devices/0000:43:00.0/msi_irqs/{irq}", "msix\n")
        write(root, f"proc/irq/{irq}/smp_affinity_list", "1\n")
    (root / "sys/class/net/eth1").mkdir()
    os.symlink("../../../bus/pci/devices/0000:43:00.0", root / "sys/class/net/eth1/device")
    # A NIC without IRQs, listed between the two.
    (root / "sys/class/net/eth00").mkdir()
    (root / "sys/bus/pci/devices/0000:44:00.0").mkdir()
    os.symlink("../../../bus/pci/devices/0000:44:00.0", root / "sys/class/net/eth00/device")
    # Config spaces longer than 4 KiB (the first 4 KiB are read) and of 65 bytes (not a short read).
    port = config_spaces()["0000:40:01.1"]
    write(root, "sys/bus/pci/devices/0000:45:00.0/config", port + bytes(5000 - len(port)))
    write(root, "sys/bus/pci/devices/0000:46:00.0/config", port[:65])
    assert nic.is_dir()
    for cpu in (0, 1, 2, 3, 20):
        l3 = "0-7\n" if cpu < 8 else "16-23\n"
        write(root, f"sys/devices/system/cpu/cpu{cpu}/cache/index3/shared_cpu_list", l3)
    write(root, "sys/fs/resctrl/info/L3/io_alloc", "disabled\n")
    write(root, "sys/fs/resctrl/schemata", "MB:0=100\n")
    (root / "sys/bus/dsa/devices/dsa0").mkdir(parents=True)
    wq = {"mode": "dedicated", "size": "16", "group_id": "0", "state": "enabled", "type": "kernel"}
    for attr, value in wq.items():
        write(root, f"sys/bus/dsa/devices/wq0.0/{attr}", value + "\n")
    (root / "sys/bus/dsa/devices/wq0.1").mkdir()  # no attributes readable
    write(root, "sys/devices/system/node/node0/cpulist", "0-31\n")
    write(root, "sys/devices/system/node/node1/cpulist", "\n")
    return root


def xeon_variants(root: Path) -> Path:
    """A Xeon with DDIO off (no way in the register), no family nor model, a root port and no TPH
    requester, and resctrl's own
    directories beside a group that shares two ways and one with no L3 line."""
    write(root, "proc/cpuinfo", "vendor_id\t: GenuineIntel\n\n")  # no family, no model name
    write(root, "dev/cpu/0/msr", bytes(0xC8B) + (0xFFF00000).to_bytes(8, "little"))
    write(root, "sys/fs/resctrl/info/L3/cbm_mask", "7ff\n")
    write(root, "sys/fs/resctrl/schemata", "L3:0=7ff;1=7ff\n")
    # One PCI function, readable, no TPH requester.
    write(root, "sys/bus/pci/devices/0000:40:01.1/config", config_spaces()["0000:40:01.1"])
    for own in ("info", "mon_groups", "mon_data"):
        write(root, f"sys/fs/resctrl/{own}/schemata", "L3:0=1\n")
    write(root, "sys/fs/resctrl/two/schemata", "L3:0=201;1=401\n")
    write(root, "sys/fs/resctrl/memory-bandwidth-only/schemata", "MB:0=50\n")
    return root


def xeon_two_shared_ways(root: Path) -> Path:
    xeon_variants(root)
    write(root, "proc/cpuinfo", "vendor_id\t: GenuineIntel\ncpu family\t:\nmodel name\t: Xeon\n\n")  # an empty family
    write(root, "dev/cpu/0/msr", bytes(0xC8B) + (0x600).to_bytes(8, "little"))
    return root


def bad_config_gz(root: Path) -> Path:
    """A /proc/config.gz that is not gzip: the doctor falls back to /boot/config-RELEASE."""
    write(root, "proc/config.gz", b"CONFIG_PCIE_TPH=n\n")
    return root


# Each case: a tree and the consumer CPUs the doctor is asked about.
CASES = {
    "turin-consumer-0": (turin_tree, "0"),
    "turin-consumer-2-9": (lambda root: bad_config_gz(turin_tree(root)), "2,9"),
    "xeon-ddio-ways": (lambda root: xeon_tree(root, 0x600), None),
    "xeon-no-msr": (lambda root: xeon_tree(root, None), None),
    "empty": (lambda root: root, None),
    "sapphire-rapids-config-spaces": (sapphire_rapids_tree, None),
    "unprivileged-and-malformed": (unprivileged_and_malformed_tree, None),
    **{f"real-{name}": (lambda root, name=name: real_host(name, root), "0") for name in REAL_HOSTS},
    "genoa-variants": (genoa_variants, None),
    "xeon-ddio-off": (xeon_variants, None),
    "xeon-two-shared-ways": (xeon_two_shared_ways, None),
}
# Cases whose consumer is a process: its allowed CPUs (/proc/PID/status in the tree).
PIDS = {"genoa-variants": 4242}


@pytest.mark.parametrize("case", sorted(CASES))
def test_every_check_on_every_tree_is_as_blessed(tmp_path, case):
    build, cpus = CASES[case]
    checks, _ = doctor.diagnose(build(tmp_path), pid=PIDS.get(case), cpus=cpus)
    got = [asdict(c) for c in checks]
    # The tree's place is not part of what the doctor says about it.
    assert str(tmp_path) not in json.dumps(got)
    path = GOLDEN / f"{case}.json"
    if BLESS:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(got, indent=1) + "\n")
    assert got == json.loads(path.read_text())
