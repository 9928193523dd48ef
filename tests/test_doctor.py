"""`steer doctor` on fixture trees, on real hosts' captured trees and on this machine: each
check's verdict, the consumer's injection target, captures that replay, bad input, and never a
write to the tree it reads."""

import contextlib
import hashlib
import io
import json
import os
import tarfile
from dataclasses import asdict
from pathlib import Path

import pytest

from steer import doctor

TPH_DATA = Path(__file__).resolve().parents[1] / "crates/steer-tph/tests/data"
DUMPS = TPH_DATA / "lspci-xxxx-tph.txt"
# Real machines' /proc and /sys, cut down to what the doctor reads (each one's PROVENANCE.md).
HOSTS = Path(__file__).resolve().parent / "fixtures/hosts"


def config_spaces(dumps: Path = DUMPS) -> dict[str, bytes]:
    """The binary config spaces of an `lspci -xxxx` file (by default the fixture synthesized to
    the PCIe layouts; see its header), by bus address."""
    spaces: dict[str, bytearray] = {}
    current = None
    for line in dumps.read_text().splitlines():
        if line and not line.startswith("#") and not line[0].isspace() and " " in line and line[2] == ":":
            head, rest = line.split(" ", 1)
            if len(head) == 7 and ":" in head and "." in head:
                current = spaces.setdefault(f"0000:{head}", bytearray())
                continue
        if current is not None and ":" in line[:4]:
            offset, hexes = line.split(":", 1)
            assert int(offset, 16) == len(current)
            current.extend(bytes.fromhex(hexes))
    return {bdf: bytes(space) for bdf, space in spaces.items()}


def write(root: Path, name: str, content: str | bytes) -> None:
    path = root / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(content.encode() if isinstance(content, str) else content)


def turin_tree(root: Path) -> Path:
    """A Turin host with a bnxt NIC (TPH requester), its root port, a DSA and an HBM node."""
    write(root, "proc/cpuinfo", "vendor_id\t: AuthenticAMD\ncpu family\t: 26\nmodel name\t: AMD EPYC 9655\n\n")
    write(root, "proc/sys/kernel/osrelease", "6.15.2-test\n")
    write(root, "proc/cmdline", "BOOT_IMAGE=/vmlinuz root=/dev/sda1 pci=realloc,notph quiet\n")
    write(root, "boot/config-6.15.2-test", "CONFIG_PCI=y\nCONFIG_PCIE_TPH=y\n")
    for bdf, space in config_spaces().items():
        write(root, f"sys/bus/pci/devices/{bdf}/config", space)
    nic = root / "sys/bus/pci/devices/0000:41:00.0"
    for irq in (100, 101):
        write(root, f"sys/bus/pci/devices/0000:41:00.0/msi_irqs/{irq}", "msix\n")
    (root / "sys/bus/pci/drivers/bnxt_en").mkdir(parents=True)
    os.symlink("../../drivers/bnxt_en", nic / "driver")
    write(root, "sys/module/bnxt_en/version", "1.10.3\n")
    (root / "sys/class/net/eth1/queues/rx-0").mkdir(parents=True)
    (root / "sys/class/net/eth1/queues/rx-1").mkdir(parents=True)
    os.symlink("../../../bus/pci/devices/0000:41:00.0", root / "sys/class/net/eth1/device")
    write(root, "proc/irq/100/smp_affinity_list", "2\n")
    write(root, "proc/irq/101/smp_affinity_list", "9-10\n")
    for cpu in range(16):
        write(root, f"sys/devices/system/cpu/cpu{cpu}/cache/index3/shared_cpu_list", "0-7\n" if cpu < 8 else "8-15\n")
    write(root, "sys/fs/resctrl/info/L3/io_alloc", "enabled\n")
    write(root, "sys/fs/resctrl/info/L3/io_alloc_cbm", "0=ffff\n")
    write(root, "sys/fs/resctrl/schemata", "L3:0=ffff\n")
    write(root, "sys/bus/dsa/devices/dsa0/state", "enabled\n")
    (root / "sys/bus/dsa/devices/engine0.0").mkdir(parents=True)
    for attr, value in (("mode", "shared"), ("size", "128"), ("group_id", "0"), ("state", "enabled"), ("type", "user")):
        write(root, f"sys/bus/dsa/devices/wq0.0/{attr}", value + "\n")
    write(root, "dev/dsa/wq0.0", "")
    write(root, "sys/devices/system/node/node0/cpulist", "0-15\n")
    write(root, "sys/devices/system/node/node1/cpulist", "\n")
    write(root, "sys/devices/system/node/node1/meminfo", "Node 1 MemTotal:       16777216 kB\n")
    return root


def verdicts(checks) -> dict[str, tuple[str, str]]:
    return {f"{c.area}/{c.name}": (c.verdict, c.evidence) for c in checks}


def test_a_turin_tree_gets_a_verdict_for_every_check(tmp_path):
    checks, _ = doctor.diagnose(turin_tree(tmp_path), cpus="0")
    got = verdicts(checks)
    assert got["cpu/SDCI"][0] == "ok"
    assert got["kernel/PCIe TPH core (pcie_enable_tph)"][0] == "ok"
    assert got["kernel/resctrl io_alloc (SDCIAE)"] == ("not usable", "kernel 6.15.2-test < 6.19")
    assert got["kernel/CONFIG_PCIE_TPH"] == ("ok", "=y in /boot/config-6.15.2-test")
    assert got["kernel/pci=notph"][0] == "misconfigured"
    assert got["pci/0000:40:01.1 TPH completer"] == ("ok", "root port, DevCap2 TPHComp+ ExtTPHComp-")
    verdict, evidence = got["pci/0000:41:00.0 TPH requester"]
    assert verdict == "ok" and "14e4:1750 TPH requester: IV/DS, ST table" in evidence and "Interrupt vector" in evidence
    assert got["nic/eth1"] == ("ok", "driver bnxt_en 1.10.3, 2 RX queues, IRQs 100->2, 101->9-10")
    # IRQ 100's first CPU (2) shares CPU 0's L3; IRQ 101's (9) does not.
    assert got["nic/eth1 injection target"] == (
        "misconfigured",
        "0 IRQs on the consumer's CPUs, 1 on its CCX, 1 elsewhere",
    )
    assert got["resctrl/io_alloc"] == ("ok", "io_alloc enabled; mask 0=ffff")
    assert got["dsa/dsa0"] == ("ok", "enabled, 1 engine")
    assert got["dsa/wq0.0"][0] == "ok" and "shared, size 128" in got["dsa/wq0.0"][1]
    assert got["hbm/memory-only nodes"] == ("ok", "node1 (16.0 GiB)")
    on_core, _ = doctor.diagnose(tmp_path, cpus="2,9")
    assert verdicts(on_core)["nic/eth1 injection target"][0] == "ok"


def test_a_nic_with_many_irqs_shows_eight_and_its_fix_names_eight_of_those_elsewhere(tmp_path):
    root = turin_tree(tmp_path)
    for irq in range(102, 110):
        write(root, f"sys/bus/pci/devices/0000:41:00.0/msi_irqs/{irq}", "msix\n")
        write(root, f"proc/irq/{irq}/smp_affinity_list", "12\n")
    checks = {c.name: c for c in doctor.diagnose(root, cpus="0")[0]}
    assert checks["eth1"].evidence.endswith(
        "IRQs 100->2, 101->9-10, 102->12, 103->12, 104->12, 105->12, 106->12, 107->12 (+2)"
    )
    target = checks["eth1 injection target"]
    assert target.evidence == "0 IRQs on the consumer's CPUs, 1 on its CCX, 9 elsewhere"
    assert target.fix.endswith("(IRQs 101, 102, 103, 104, 105, 106, 107, 108)")


def xeon_tree(root: Path, msr: int | None) -> Path:
    """A Xeon with resctrl groups: one in DDIO's two ways only, one sharing a way, one apart."""
    write(root, "proc/cpuinfo", "vendor_id\t: GenuineIntel\ncpu family\t: 6\nmodel name\t: Xeon\n\n")
    write(root, "sys/fs/resctrl/info/L3/cbm_mask", "7ff\n")
    write(root, "sys/fs/resctrl/schemata", "L3:0=7ff;1=7ff\n")
    write(root, "sys/fs/resctrl/io_only/schemata", "    MB:0=100\n    L3:0=600;1=600\n")
    write(root, "sys/fs/resctrl/straddles/schemata", "L3:0=3c0;1=00f\n")
    write(root, "sys/fs/resctrl/apart/schemata", "L3:0=0ff;1=0ff\n")
    write(root, "sys/fs/resctrl/mon_groups/x/schemata", "L3:0=600\n")
    if msr is not None:
        write(root, "dev/cpu/0/msr", bytes(0xC8B) + msr.to_bytes(8, "little"))  # the register at its offset
    return root


def test_cat_groups_allocating_in_ddio_ways_are_named(tmp_path):
    got = verdicts(doctor.diagnose(xeon_tree(tmp_path, 0x600))[0])
    assert got["ddio/IIO LLC ways"] == ("ok", "MSR 0xc8b = 0x600: 2 ways")
    assert got["ddio/CAT group io_only"] == (
        "misconfigured",
        "L3 0=600;1=600: allocates only in DDIO's ways (0x600) in domain 0,1",
    )
    assert got["ddio/CAT group straddles"] == (
        "ok",
        "L3 0=3c0;1=f: shares 0x200 with DDIO's 0x600 (inbound writes may evict its lines there)",
    )
    assert got["ddio/CAT group apart"] == ("ok", "L3 0=ff;1=ff: no way shared with DDIO's 0x600")
    assert not [k for k in got if "mon_groups" in k or "CAT group info" in k]


def test_cat_groups_without_the_ddio_register_are_unknown(tmp_path):
    got = verdicts(doctor.diagnose(xeon_tree(tmp_path, None))[0])
    assert got["ddio/IIO LLC ways"][0] == "unknown"
    assert got["ddio/CAT group io_only"] == ("unknown", "L3 0=600;1=600; DDIO's ways unknown (MSR 0xc8b not readable)")


def test_an_empty_tree_gives_unknowns_not_errors(tmp_path):
    checks, _ = doctor.diagnose(tmp_path)
    assert checks and all(c.verdict in {"ok", "not usable", "misconfigured", "unknown"} for c in checks)
    assert verdicts(checks)["cpu/vendor"][0] == "unknown"


def sapphire_rapids_tree(root: Path) -> Path:
    """Config spaces captured on real machines (crates/steer-tph/tests/data/real/PROVENANCE.md):
    an Intel DSA whose driver enabled TPH, a CXL device with TPH disabled, a host bridge whose
    extended space mirrors the standard one; nothing else."""
    real = TPH_DATA / "real"
    for dump in ("pciutils-pri-pasid.txt", "pciutils-cap-dvsec-cxl.txt", "pciutils-broken-ecaps.txt"):
        for bdf, space in config_spaces(real / dump).items():
            write(root, f"sys/bus/pci/devices/{bdf}/config", space)
    return root


def test_real_config_spaces_of_a_sapphire_rapids_host(tmp_path):
    sapphire_rapids_tree(tmp_path)
    spaces = {p.name for p in (tmp_path / "sys/bus/pci/devices").iterdir()}
    assert spaces == {"0000:6a:01.0", "0000:6b:00.0", "0000:7f:00.0", "0000:00:00.0"}
    got = verdicts(doctor.diagnose(tmp_path)[0])
    assert got["pci/0000:6a:01.0 TPH requester"] == (
        "ok",
        "8086:0b25 TPH requester: DS, ST table Steering table in TPH capability structure (2), mode Device specific, "
        "TPH only",
    )
    assert got["pci/0000:6b:00.0 TPH requester"][0] == "not usable"
    assert got["pci/0000:00:00.0"][0] == "unknown" and "extended capability list broken" in got["pci/0000:00:00.0"][1]
    assert "pci/0000:7f:00.0 TPH requester" not in got


def unprivileged_and_malformed_tree(root: Path) -> Path:
    """A config space read unprivileged (its first 64 bytes) and one whose capability pointer
    leads into the header."""
    write(root, "sys/bus/pci/devices/0000:00:00.0/config", config_spaces()["0000:41:00.0"][:64])
    broken = bytearray(config_spaces()["0000:41:00.0"])
    broken[0x34] = 0x01  # a capability pointer into the header
    write(root, "sys/bus/pci/devices/0000:00:01.0/config", bytes(broken))
    return root


def test_unprivileged_and_malformed_config_spaces_are_said_so(tmp_path):
    got = verdicts(doctor.diagnose(unprivileged_and_malformed_tree(tmp_path))[0])
    assert got["pci/config space"][0] == "unknown" and "first 64 bytes" in got["pci/config space"][1]
    assert got["pci/0000:00:01.0"][0] == "unknown" and "malformed" in got["pci/0000:00:01.0"][1]


def tree_digest(root: Path) -> str:
    digest = hashlib.sha256()
    for path in sorted(root.rglob("*")):
        digest.update(str(path.relative_to(root)).encode())
        if path.is_file() and not path.is_symlink():
            digest.update(path.read_bytes())
    return digest.hexdigest()


@contextlib.contextmanager
def read_only(root: Path):
    """`root` and everything under it read-only meanwhile (a write fails, unless as root), then writable."""
    for path in [root, *root.rglob("*")]:
        if not path.is_symlink():
            path.chmod(0o555 if path.is_dir() else 0o444)
    try:
        yield root
    finally:
        for path in [root, *root.rglob("*")]:
            if not path.is_symlink():
                path.chmod(0o755 if path.is_dir() else 0o644)


def same_evidence(checks: list[dict]) -> list[tuple]:
    """Each check's verdict and evidence, file modes aside (a tar keeps its own)."""
    return [(c["area"], c["name"], c["verdict"], c["evidence"].split(", portal")[0]) for c in checks]


def test_doctor_reads_a_read_only_tree_and_a_capture_replays_it(steer_cli, tmp_path):
    root = turin_tree(tmp_path / "host")
    before = tree_digest(root)
    with read_only(root):
        capture = tmp_path / "capture.tar.gz"
        done = steer_cli(
            "doctor", "--root", str(root), "--cpus", "0", "--json", str(tmp_path / "d.json"), "--capture", str(capture)
        )
        assert done.returncode == 0, done.stderr
    assert tree_digest(root) == before
    first = json.loads((tmp_path / "d.json").read_text())["checks"]
    replay = tmp_path / "replay"
    with tarfile.open(capture) as tar:
        tar.extractall(replay, filter="fully_trusted")
    again = steer_cli("doctor", "--root", str(replay), "--cpus", "0", "--json")
    second = json.loads(again.stdout)["checks"]
    assert same_evidence(second) == same_evidence(first)


def real_host(name: str, root: Path) -> Path:
    """The captured tree of a real machine (tests/fixtures/hosts/NAME/PROVENANCE.md), extracted at root."""
    with tarfile.open(HOSTS / name / "tree.tar.gz") as tar:
        tar.extractall(root, filter="data")
    return root


REAL_HOSTS = sorted(p.name for p in HOSTS.iterdir() if (p / "tree.tar.gz").exists())
# What none of the three captures holds: the kernel's release and config, resctrl, the MSRs, DSA.
NOT_CAPTURED = {
    "kernel/PCIe TPH core (pcie_enable_tph)": ("unknown", "kernel release unreadable"),
    "kernel/bnxt_en steering tags": ("unknown", "kernel release unreadable"),
    "kernel/resctrl io_alloc (SDCIAE)": ("unknown", "kernel release unreadable"),
    "kernel/CONFIG_PCIE_TPH": ("unknown", "no /proc/config.gz nor /boot/config-RELEASE"),
    "resctrl/resctrl": ("unknown", "/sys/fs/resctrl not mounted"),
    "dsa/devices": ("not usable", "no /sys/bus/dsa/devices/dsaN (no DSA, or idxd not loaded)"),
}


def test_a_real_epyc_7451_host(tmp_path):
    # util-linux's lscpu dump of a 2-socket EPYC 7451 (Zen): /proc/cpuinfo and the CPUs' caches,
    # only each node's cpumap (not kept: the doctor reads cpulist), no PCI, no network devices.
    root = real_host("epyc-7451", tmp_path)
    assert verdicts(doctor.diagnose(root, cpus="0")[0]) == {
        "cpu/vendor": ("ok", "AuthenticAMD, family 0x17, AMD EPYC 7451 24-Core Processor"),
        "cpu/SDCI": ("not usable", "family 0x17: SDCI needs EPYC 9005 (family 0x1a)"),
        **NOT_CAPTURED,
        "kernel/pci=notph": ("unknown", "/proc/cmdline unreadable"),
        "pci/devices": ("unknown", "no /sys/bus/pci/devices"),
        "nic/network devices": ("not usable", "no PCI network device in /sys/class/net"),
        # Nodes whose cpulist is missing are not memory-only (they were 8 "? GiB" HBM nodes before).
        "hbm/memory-only nodes": ("unknown", "no cpulist readable in 8 NUMA nodes"),
    }
    # The L3 a consumer shares (its CCX): 3 cores and their SMT siblings, 16 of them in all.
    host = doctor.Host(root)
    assert doctor.l3_of(host, 0) == doctor.l3_of(host, 49) == [0, 1, 2, 48, 49, 50]
    assert doctor.l3_of(host, 95) == [45, 46, 47, 93, 94, 95]
    ccxs = {tuple(doctor.l3_of(host, cpu)) for cpu in range(96)}
    assert len(ccxs) == 16 and sorted(cpu for ccx in ccxs for cpu in ccx) == list(range(96))


def test_a_real_xeon_silver_4108_host(tmp_path):
    # hwloc-gather-topology's tree of a 2-socket Skylake-SP with 8 NEC Vector Engines and two X722
    # ports (i40e): 64-byte config spaces, MSI-X IRQs listed but no /proc/irq, a real command line.
    root = real_host("xeon-silver-4108", tmp_path)

    def irqs(first: int) -> str:  # the first 8 of an interface's 99, affinity unknown
        return ", ".join(f"{irq}->?" for irq in range(first, first + 8)) + " (+91)"

    unread = (
        "0 IRQs on the consumer's CPUs, 0 on its CCX, 0 elsewhere, 99 with no readable /proc/irq/N/smp_affinity_list"
    )
    no_queue = "(no RX queue listed)"
    assert verdicts(doctor.diagnose(root, cpus="0")[0]) == {
        "cpu/vendor": ("ok", "GenuineIntel, family 0x6, Intel(R) Xeon(R) Silver 4108 CPU @ 1.80GHz"),
        **NOT_CAPTURED,
        "kernel/pci=notph": ("ok", "not on the command line"),
        # Once for the 28 functions (each was "malformed" too before).
        "pci/config space": ("unknown", "only the first 64 bytes of 28 devices are readable (not root)"),
        # No RX queue captured: found, with nothing to check (was "ok").
        "nic/enp96s0f0": ("not checked", f"driver i40e, 0 RX queues, IRQs {irqs(52)} {no_queue}"),
        "nic/enp96s0f1": ("not checked", f"driver i40e, 0 RX queues, IRQs {irqs(159)} {no_queue}"),
        # IRQs whose affinity is unknown (was "ok" on 0 of 99 IRQs).
        "nic/enp96s0f0 injection target": ("unknown", unread),
        "nic/enp96s0f1 injection target": ("unknown", unread),
        "ddio/IIO LLC ways": ("unknown", "/dev/cpu/0/msr not readable"),
        "hbm/memory-only nodes": ("not usable", "none among 2 NUMA nodes (no HBM in flat mode)"),
    }
    host = doctor.Host(root)
    assert doctor.l3_of(host, 0) == doctor.l3_of(host, 23) == [*range(8), *range(16, 24)]
    assert doctor.l3_of(host, 8) == [*range(8, 16), *range(24, 32)]


def test_a_real_xeon_with_memory_only_nodes(tmp_path):
    # nri-plugins' sysfs sample of a 2-socket Xeon Scalable (model 0x55, SNC2) with 4 nodes of
    # memory and no CPU: /sys only. The doctor takes memory-only nodes for HBM whatever they are:
    # these are not (no model 0x55 Xeon has HBM), which these files do not tell (docs/doctor.md).
    root = real_host("xeon-memory-only-nodes", tmp_path)
    assert verdicts(doctor.diagnose(root, cpus="0")[0]) == {
        "cpu/vendor": ("unknown", "/proc/cpuinfo unreadable or empty"),
        **NOT_CAPTURED,
        "kernel/pci=notph": ("unknown", "/proc/cmdline unreadable"),
        "pci/devices": ("unknown", "no /sys/bus/pci/devices"),
        "nic/network devices": ("not usable", "no PCI network device in /sys/class/net"),
        "hbm/memory-only nodes": ("ok", ", ".join(f"node{n} (124.0 GiB)" for n in range(4, 8))),
    }
    host = doctor.Host(root)
    assert doctor.l3_of(host, 0) == list(range(0, 112, 2)) and doctor.l3_of(host, 57) == list(range(1, 112, 2))


@pytest.mark.parametrize("name", REAL_HOSTS)
def test_a_real_tree_is_left_as_it_is_and_its_capture_replays(tmp_path, name):
    root = real_host(name, tmp_path / "host")
    before = tree_digest(root)
    with read_only(root):
        checks, host = doctor.diagnose(root, cpus="0")
    assert tree_digest(root) == before
    # sysfs is links (/sys/class/net/X, its device, /sys/bus/pci/devices/B): the capture keeps
    # them, so that it extracts (it did not: a file under a link) to the same verdicts.
    with tarfile.open(fileobj=io.BytesIO(host.capture())) as tar:
        tar.extractall(tmp_path / "replay", filter="data")
    again, _ = doctor.diagnose(tmp_path / "replay", cpus="0")
    assert same_evidence([asdict(c) for c in again]) == same_evidence([asdict(c) for c in checks])


def test_this_machine_gets_a_verdict_for_every_check(steer_cli):
    done = steer_cli("doctor", "--json")
    assert done.returncode == 0, done.stderr
    checks = json.loads(done.stdout)["checks"]
    assert {c["area"] for c in checks} >= {"cpu", "kernel", "pci", "dsa", "hbm"}
    assert all(c["verdict"] in {"ok", "not usable", "misconfigured", "unknown", "not checked"} for c in checks)


@pytest.mark.parametrize(
    "args, line",
    [
        (["--root", "/no/such/dir"], "--root /no/such/dir: not a directory"),
        (["--pid", "999999999"], "--pid 999999999: no such process"),
        (["--cpus", "all"], "--cpus 'all': not a CPU list (e.g. 0-3,8)"),
    ],
)
def test_bad_input_is_one_line_with_exit_code_2(steer_cli, args, line):
    done = steer_cli("doctor", *args)
    assert (done.returncode, done.stderr, done.stdout) == (2, f"steer: error: {line}\n", "")


def test_the_json_names_the_tree_and_lists_every_check(tmp_path):
    checks, _ = doctor.diagnose(turin_tree(tmp_path), cpus="0")
    expected = {"root": str(tmp_path), "checks": [asdict(c) for c in checks]}
    assert json.loads(doctor.as_json(checks, tmp_path)) == expected


def test_on_a_terminal_the_table_wraps_to_its_width_and_colours_verdicts(tmp_path):
    from rich.console import Console

    checks, _ = doctor.diagnose(turin_tree(tmp_path))
    console = Console(record=True, width=100, color_system="standard", force_terminal=True)
    doctor.rich_table(checks, console)
    text = console.export_text(clear=False)
    assert max(len(line) for line in text.splitlines()) <= 100
    assert sum(line.startswith("│ ") for line in text.splitlines()) >= len(checks)
    styled = console.export_text(styles=True)
    assert "\x1b[32mok" in styled and "\x1b[33mnot usable" in styled and "\x1b[1;31mmisconfigured" in styled
    assert [c.strip() for c in text.splitlines()[1].split("┃")[1:-1]] == ["area", "check", "verdict", "evidence", "fix"]
    # One line a check, or more where it wraps: no rule between checks. The table takes the
    # width, most of it for the evidence.
    assert not [line for line in text.splitlines() if line.startswith("├")]
    assert text.splitlines()[3] == (
        "│ cpu     │ vendor           │ ok            │ AuthenticAMD, family 0x1a, AMD    │                 │"
    )
    assert len(text.splitlines()) == 33
    unknown = [c for c in doctor.diagnose(tmp_path / "empty")[0] if c.verdict == "unknown"]
    doctor.rich_table(unknown, console)
    assert "\x1b[2munknown" in console.export_text(styles=True)


def test_a_path_is_followed_through_relative_absolute_and_chained_links_inside_the_tree(tmp_path):
    write(tmp_path, "sys/devices/pci0/0000:41:00.0/config", b"\x14\xe4")
    (tmp_path / "sys/bus/pci/devices").mkdir(parents=True)
    os.symlink("../../../devices/pci0/0000:41:00.0", tmp_path / "sys/bus/pci/devices/0000:41:00.0")
    os.symlink("/sys/bus/pci/devices/0000:41:00.0", tmp_path / "sys/nic")  # absolute: from the tree's root
    os.symlink("nic", tmp_path / "sys/eth1")  # a link to a link
    os.symlink("../../etc", tmp_path / "sys/out")  # leaves the tree: not followed
    os.symlink("loop-b", tmp_path / "sys/loop-a")
    os.symlink("loop-a", tmp_path / "sys/loop-b")
    host = doctor.Host(tmp_path)
    links: dict[str, str] = {}
    assert host.real("sys/bus/pci/devices/0000:41:00.0/config", links) == "sys/devices/pci0/0000:41:00.0/config"
    assert links == {"sys/bus/pci/devices/0000:41:00.0": "../../../devices/pci0/0000:41:00.0"}
    links = {}
    assert host.real("/sys/eth1/config", links) == "sys/devices/pci0/0000:41:00.0/config"
    assert links == {
        "sys/eth1": "nic",
        "sys/nic": "/sys/bus/pci/devices/0000:41:00.0",
        "sys/bus/pci/devices/0000:41:00.0": "../../../devices/pci0/0000:41:00.0",
    }
    links = {}
    assert host.real("sys/out/passwd", links) == "sys/out/passwd" and links == {}
    # What lies under a link out of the tree is never read: it is missing.
    write(tmp_path.parent, "etc/passwd", "root:x:0:0\n")
    assert (tmp_path / "sys/out/passwd").exists()
    assert host.bytes("sys/out/passwd") is None and host.listdir("sys/out") == [] and not host.exists("sys/out")
    assert host.is_dir("sys/out") is False and host.is_dir("sys/out/x") is False
    os.symlink("..", tmp_path / "up")  # the tree's parent: not followed either
    os.symlink(".", tmp_path / "sys/here")
    assert host.real("up/x", {}) == "up/x"
    assert host.real("sys/here/nic/config", {}) == "sys/devices/pci0/0000:41:00.0/config"
    os.symlink(".", tmp_path / "again")  # the tree's root itself
    assert host.real("again/sys/devices/pci0", {}) == "sys/devices/pci0"
    # A loop of links ends (after 4096 steps), somewhere in the loop.
    assert host.real("sys/loop-a/x", {}).startswith("sys/loop-")


def test_a_capture_holds_what_was_read_where_it_lies_the_links_to_it_and_what_was_only_seen(tmp_path):
    root = tmp_path / "host"
    write(root, "sys/devices/pci0/0000:41:00.0/config", b"\x14\xe4")
    write(root, "sys/devices/pci0/0000:41:00.0/vendor", "0x14e4\n")
    (root / "sys/devices/pci0/0000:41:00.0/msi_irqs").mkdir()
    (root / "sys/bus/pci/devices").mkdir(parents=True)
    os.symlink("../../../devices/pci0/0000:41:00.0", root / "sys/bus/pci/devices/0000:41:00.0")
    os.symlink("/sys/bus/pci/devices/0000:41:00.0", root / "sys/nic")
    host = doctor.Host(root)
    assert host.bytes("sys/nic/config") == b"\x14\xe4"
    assert host.listdir("sys/bus/pci/devices/0000:41:00.0") == ["config", "msi_irqs", "vendor"]
    assert host.mode("sys/bus/pci/devices") is not None and host.link("sys/nic") is not None
    with tarfile.open(fileobj=io.BytesIO(host.capture())) as tar:
        members = {
            m.name: (m.type, m.linkname, tar.extractfile(m).read() if m.isreg() else None) for m in tar.getmembers()
        }
    assert members == {
        "sys/devices/pci0/0000:41:00.0/config": (tarfile.REGTYPE, "", b"\x14\xe4"),
        "sys/bus/pci/devices/0000:41:00.0": (tarfile.SYMTYPE, "../../../devices/pci0/0000:41:00.0", None),
        "sys/nic": (tarfile.SYMTYPE, "/sys/bus/pci/devices/0000:41:00.0", None),
        # Seen but not read: empty, so that listing them finds them.
        "sys/devices/pci0/0000:41:00.0/msi_irqs": (tarfile.DIRTYPE, "", None),
        "sys/devices/pci0/0000:41:00.0/vendor": (tarfile.REGTYPE, "", b""),
    }


def test_a_config_space_the_codec_refuses_is_said_malformed_and_the_rest_are_still_read(tmp_path, monkeypatch):
    for bdf in ("0000:00:00.0", "0000:00:01.0"):
        write(tmp_path, f"sys/bus/pci/devices/{bdf}/config", config_spaces()["0000:41:00.0"])
    inspect = doctor._core.inspect_tph
    refused = iter([True, False])

    def refuses_the_first(data: bytes) -> str:
        if next(refused):
            raise doctor.ScenarioError("config space: too odd")
        return inspect(data)

    monkeypatch.setattr(doctor._core, "inspect_tph", refuses_the_first)
    got = verdicts(doctor.diagnose(tmp_path)[0])
    assert got["pci/0000:00:00.0"] == ("unknown", "malformed config space: config space: too odd")
    assert got["pci/0000:00:01.0 TPH requester"][0] == "ok"


def test_a_cpu_list_takes_ranges_and_caps_an_absurd_one():
    assert doctor.cpu_lists("0-2,7, 9") == [0, 1, 2, 7, 9]
    assert len(doctor.cpu_lists("5-100000000")) == 65537  # 5 and the 65536 after it


def test_consumer_cpus_the_host_does_not_have_are_refused(steer_cli, tmp_path):
    root = real_host("epyc-7451", tmp_path)  # CPUs 0-95
    done = steer_cli("doctor", "--root", str(root), "--cpus", "5-300")
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr == "steer: error: --cpus 5-300: no CPU 96-300 on this host (it has CPUs 0-95)\n"
    assert doctor.consumer_cpus(doctor.Host(root), None, "90-95") == [*range(90, 96)]
    # A tree that does not list its CPUs takes any list.
    assert doctor.consumer_cpus(doctor.Host(tmp_path / "proc"), None, "5-7") == [5, 6, 7]
    assert doctor.cpu_list_text([3, 0, 1, 2, 8, 10, 11]) == "0-3,8,10-11"


def test_a_root_one_level_too_deep_is_said_to_be_so(tmp_path):
    root = real_host("epyc-7451", tmp_path)
    checks, _ = doctor.diagnose(root / "proc")
    assert checks[0] == doctor.Check(
        "host",
        "tree",
        "unknown",
        "--root holds neither proc/ nor sys/: not a host's tree",
        f"give --root {root} (the directory that holds proc/)",
    )
    assert all(c.area != "host" for c in doctor.diagnose(root)[0])


def test_a_nic_without_irqs_is_not_called_ok_and_the_consumer_question_gets_an_answer(tmp_path):
    root = turin_tree(tmp_path)
    (root / "sys/class/net/eth9").mkdir(parents=True)
    os.symlink("../../../bus/pci/devices/0000:40:01.1", root / "sys/class/net/eth9/device")
    write(root, "sys/class/net/eth9/queues/rx-0/rps_cpus", "0\n")
    got = verdicts(doctor.diagnose(root, cpus="0-1")[0])
    assert got["nic/eth9"] == ("not checked", "driver ?, 1 RX queue, IRQs none (no MSI IRQ listed)")
    assert got["nic/eth9 injection target"] == (
        "unknown",
        "no MSI IRQ listed in /sys/class/net/eth9/device/msi_irqs: which CPU its queues steer to cannot be told",
    )


def test_a_captured_tree_read_without_root_is_not_answered_with_sudo_steer_doctor(tmp_path):
    root = real_host("xeon-silver-4108", tmp_path)
    (check,) = [c for c in doctor.diagnose(root)[0] if c.name == "config space"]
    assert check.fix == "capture the tree again as root (sudo steer doctor --capture FILE)"


def test_a_guest_is_told_by_the_hypervisor_flag(tmp_path):
    cpuinfo = tmp_path / "proc/cpuinfo"
    cpuinfo.parent.mkdir()
    cpuinfo.write_text(
        "vendor_id\t: GenuineIntel\ncpu family\t: 6\nmodel name\t: Xeon\nflags\t\t: fpu hypervisor avx2\n"
    )
    [vendor] = [c for c in doctor.check_cpu(doctor.Host(tmp_path)) if c.name == "vendor"]
    assert vendor.evidence.startswith("GenuineIntel, family 0x6, Xeon; a virtual machine (the hypervisor flag)")
    cpuinfo.write_text("vendor_id\t: GenuineIntel\ncpu family\t: 6\nmodel name\t: Xeon\nflags\t\t: fpu avx2\n")
    [vendor] = [c for c in doctor.check_cpu(doctor.Host(tmp_path)) if c.name == "vendor"]
    assert vendor.evidence == "GenuineIntel, family 0x6, Xeon"
