"""``steer doctor``: is SDCI / DDIO / DSA usable on this host, and set up right? Every check reads
files only (sysfs, procfs, the kernel's config, MSRs through ``/dev/cpu/N/msr`` where readable);
nothing is ever written to the host. ``--root DIR`` runs the checks on a captured tree, and
``--capture FILE.tar.gz`` saves exactly the files the checks read."""

from __future__ import annotations

import gzip
import io
import json
import os
import re
import stat
import tarfile
from dataclasses import asdict, dataclass
from pathlib import Path

from steer import _core
from steer.api import ScenarioError
from steer.output import count

OK, NOT_USABLE, MISCONFIGURED, UNKNOWN = "ok", "not usable", "misconfigured", "unknown"
# Found, but with nothing to check: a NIC with no RX queue or MSI IRQ listed.
NOT_CHECKED = "not checked"

# Kernel releases that brought each feature (docs/doctor.md gives the sources).
KERNEL_FEATURES = (
    ("PCIe TPH core (pcie_enable_tph)", (6, 13)),
    ("bnxt_en steering tags", (6, 15)),
    ("resctrl io_alloc (SDCIAE)", (6, 19)),
)
# Intel's IIO LLC WAYS register: the LLC ways inbound writes may allocate in (DDIO).
IIO_LLC_WAYS_MSR = 0xC8B


@dataclass
class Check:
    area: str
    name: str
    verdict: str
    evidence: str
    fix: str = ""


class Host:
    """A read-only view of a host's files under ``root``; remembers what it read."""

    def __init__(self, root: str | Path = "/") -> None:
        self.root = Path(root)
        self.read: dict[str, bytes] = {}
        self.links: dict[str, str] = {}
        # Paths seen to exist (listed or tested) without being read, and whether each is a directory.
        self.seen: dict[str, bool] = {}

    def path(self, name: str) -> Path:
        """Where `name` lies in the tree: each link on the way is followed inside it (an absolute
        target from the tree's root, as on the host it came from). Nothing outside the tree is
        ever read: under a link that leaves it, a name is missing (FileNotFoundError)."""
        real, inside = self.walk(name, {})
        if not inside:
            raise FileNotFoundError(f"{name}: under a link that leaves the tree")
        return self.root / real

    def is_dir(self, name: str) -> bool:
        try:
            return self.path(name).is_dir()
        except OSError:
            return False

    def bytes(self, name: str, limit: int = 1 << 20) -> bytes | None:
        try:
            with open(self.path(name), "rb") as f:
                data = f.read(limit)
        except OSError:
            return None
        self.read[name] = data
        return data

    def text(self, name: str) -> str | None:
        data = self.bytes(name)
        return None if data is None else data.decode("utf-8", "replace")

    def listdir(self, name: str) -> list[str]:
        try:
            names = sorted(os.listdir(self.path(name)))
        except OSError:
            return []
        self.seen[name] = True
        for child in names:
            self.seen.setdefault(f"{name}/{child}", self.is_dir(f"{name}/{child}"))
        return names

    def link(self, name: str) -> str | None:
        parent, _, base = name.rstrip("/").rpartition("/")
        try:
            target = os.readlink(self.path(parent) / base)
        except OSError:
            return None
        self.links[name] = target
        return target

    def exists(self, name: str) -> bool:
        return self.mode(name) is not None

    def mode(self, name: str) -> int | None:
        """The permission bits of `name`, or None where it does not exist."""
        try:
            st = self.path(name).stat()
        except OSError:
            return None
        self.seen.setdefault(name, stat.S_ISDIR(st.st_mode))
        return st.st_mode & 0o7777

    def real(self, name: str, links: dict[str, str]) -> str:
        """`name`'s path in the tree with each symbolic link on the way followed (sysfs is made of
        them: /sys/class/net/X, its device, /sys/bus/pci/devices/B); the links met go in `links`."""
        return self.walk(name, links)[0]

    def walk(self, name: str, links: dict[str, str]) -> tuple[str, bool]:
        """`real`, and whether the path stays inside the tree: False past a link out of it (kept
        as a directory of what is under it) or in a loop of links."""
        real: list[str] = []
        parts = [p for p in name.split("/") if p]
        inside = True
        for _ in range(4096):
            if not parts:
                break
            real.append(parts.pop(0))
            here = "/".join(real)
            target = os.readlink(self.root / here) if (self.root / here).is_symlink() else None
            if target is None:
                continue
            resolved = os.path.normpath(target.lstrip("/") if target.startswith("/") else f"{here}/../{target}")
            if resolved == ".." or resolved.startswith("../"):
                inside = False
                continue
            links[here] = target
            parts, real = [p for p in resolved.split("/") if p not in ("", ".")] + parts, []
        else:
            inside = False  # links still to follow after 4096 steps: a loop
        return "/".join(real + parts), inside

    def capture(self) -> bytes:
        """The files and links read, as a gzipped tar whose paths are the host's (each file where
        it lies, with the links that lead to it, so that the tar extracts to the same tree)."""
        links: dict[str, str] = {}
        read = {self.real(name, links): data for name, data in self.read.items()}
        seen = {self.real(name, links): is_dir for name, is_dir in self.seen.items()}
        for name in self.links:
            self.real(name, links)
        buffer = io.BytesIO()
        with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
            for name, data in sorted(read.items()):
                info = tarfile.TarInfo(name)
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
            for name, target in sorted(links.items()):
                info = tarfile.TarInfo(name)
                info.type, info.linkname = tarfile.SYMTYPE, target
                tar.addfile(info)
            kept = {*read, *links}
            for name, is_dir in sorted(seen.items()):
                if name in kept or any(k.startswith(name + "/") for k in kept):
                    continue
                info = tarfile.TarInfo(name)
                info.type = tarfile.DIRTYPE if is_dir else tarfile.REGTYPE
                tar.addfile(info, None if is_dir else io.BytesIO(b""))
        return buffer.getvalue()


def cpu_lists(text: str) -> list[int]:
    """``0-3,8,10-11`` as CPU numbers; an empty or malformed list gives none."""
    cpus: list[int] = []
    for part in text.strip().split(","):
        match = re.fullmatch(r"(\d+)(?:-(\d+))?", part.strip())
        if match:
            low, high = int(match[1]), int(match[2] or match[1])
            cpus.extend(range(low, min(high, low + 65536) + 1))
    return cpus


def cpu_list_text(cpus: list[int]) -> str:
    """CPU numbers as a CPU list (``0-3,8``), the inverse of ``cpu_lists``."""
    runs: list[list[int]] = []
    for cpu in sorted(set(cpus)):
        if runs and cpu == runs[-1][1] + 1:
            runs[-1][1] = cpu
        else:
            runs.append([cpu, cpu])
    return ",".join(f"{low}" if low == high else f"{low}-{high}" for low, high in runs)


def host_cpus(host: Host) -> list[int] | None:
    """The host's CPU numbers (those the kernel could bring online), or None where the tree does
    not say."""
    possible = host.text("/sys/devices/system/cpu/possible")
    if possible and cpu_lists(possible):
        return cpu_lists(possible)
    listed = [int(n[3:]) for n in host.listdir("/sys/devices/system/cpu") if re.fullmatch(r"cpu\d+", n)]
    if listed:
        return sorted(listed)
    processors = re.findall(r"^processor\s*:\s*(\d+)", host.text("/proc/cpuinfo") or "", re.M)
    return sorted(int(p) for p in processors) or None


def cpu_info(host: Host) -> dict[str, str]:
    text = host.text("/proc/cpuinfo") or ""
    info: dict[str, str] = {}
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if not line.strip():
            break
        info.setdefault(key.strip(), value.strip())
    return info


def check_cpu(host: Host) -> list[Check]:
    info = cpu_info(host)
    vendor, model = info.get("vendor_id"), info.get("model name", "?")
    if vendor is None:
        return [Check("cpu", "vendor", UNKNOWN, "/proc/cpuinfo unreadable or empty")]
    family = int(info.get("cpu family", "0") or 0)
    guest = ""
    if "hypervisor" in info.get("flags", "").split():
        # What a guest's sysfs says of the caches is the host's; what it can use is its share.
        guest = (
            "; a virtual machine (the hypervisor flag): its share of the L3 and its nested page walks are what "
            "steer calibrate measures, not what sysfs says"
        )
    checks = [Check("cpu", "vendor", OK, f"{vendor}, family {family:#x}, {model}{guest}")]
    if vendor == "AuthenticAMD":
        # SDCI came with EPYC 9005 (Zen 5, family 0x1a).
        usable = family >= 0x1A
        checks.append(
            Check(
                "cpu",
                "SDCI",
                OK if usable else NOT_USABLE,
                f"family {family:#x}: " + ("Zen 5 or later" if usable else "SDCI needs EPYC 9005 (family 0x1a)"),
                "" if usable else "SDCI needs an EPYC 9005 (Turin) or later processor",
            )
        )
    return checks


def kernel_release(host: Host) -> tuple[str, tuple[int, int] | None]:
    release = (host.text("/proc/sys/kernel/osrelease") or "").strip()
    match = re.match(r"(\d+)\.(\d+)", release)
    return release, (int(match[1]), int(match[2])) if match else None


def check_kernel(host: Host) -> list[Check]:
    release, version = kernel_release(host)
    checks = []
    for feature, needed in KERNEL_FEATURES:
        want = f"{needed[0]}.{needed[1]}"
        if version is None:
            checks.append(Check("kernel", feature, UNKNOWN, "kernel release unreadable"))
        elif version >= needed:
            checks.append(Check("kernel", feature, OK, f"kernel {release} (>= {want})"))
        else:
            checks.append(Check("kernel", feature, NOT_USABLE, f"kernel {release} < {want}", f"a kernel >= {want}"))
    config = None
    raw = host.bytes("/proc/config.gz")
    if raw is not None:
        try:
            config = gzip.decompress(raw).decode("utf-8", "replace")
        except (OSError, EOFError):
            config = None
    source = "/proc/config.gz"
    if config is None and release:
        source = f"/boot/config-{release}"
        config = host.text(source)
    if config is None:
        checks.append(Check("kernel", "CONFIG_PCIE_TPH", UNKNOWN, "no /proc/config.gz nor /boot/config-RELEASE"))
    elif re.search(r"^CONFIG_PCIE_TPH=y", config, re.M):
        checks.append(Check("kernel", "CONFIG_PCIE_TPH", OK, f"=y in {source}"))
    else:
        checks.append(
            Check("kernel", "CONFIG_PCIE_TPH", NOT_USABLE, f"not set in {source}", "a kernel built with PCIE_TPH=y")
        )
    cmdline = host.text("/proc/cmdline")
    if cmdline is None:
        checks.append(Check("kernel", "pci=notph", UNKNOWN, "/proc/cmdline unreadable"))
    elif any("notph" in arg.split("=", 1)[1].split(",") for arg in cmdline.split() if arg.startswith("pci=")):
        checks.append(
            Check("kernel", "pci=notph", MISCONFIGURED, "pci=notph on the command line", "remove pci=notph and reboot")
        )
    else:
        checks.append(Check("kernel", "pci=notph", OK, "not on the command line"))
    return checks


def pci_devices(host: Host) -> dict[str, dict]:
    """Every PCI function's inspected config space (or why it could not be read), by address."""
    devices = {}
    for bdf in host.listdir("/sys/bus/pci/devices"):
        data = host.bytes(f"/sys/bus/pci/devices/{bdf}/config", 4096)
        if not data:
            devices[bdf] = {"bytes": 0}
            continue
        try:
            devices[bdf] = json.loads(_core.inspect_tph(data))
        except ScenarioError as e:
            devices[bdf] = {"problems": [str(e)], "bytes": len(data)}
    return devices


def check_pci(host: Host, devices: dict[str, dict]) -> list[Check]:
    # On a captured tree, running the doctor as root again reads nothing more: the capture must be.
    as_root = (
        "capture the tree again as root (sudo steer doctor --capture FILE)"
        if host.root.resolve() != Path("/")
        else "run `sudo steer doctor`, or `sudo lspci -vv -xxxx | steer tph -`"
    )
    if not devices:
        return [Check("pci", "devices", UNKNOWN, "no /sys/bus/pci/devices")]
    checks = []
    short = [bdf for bdf, d in devices.items() if 0 < d["bytes"] <= 64]
    if short:
        checks.append(
            Check(
                "pci",
                "config space",
                UNKNOWN,
                f"only the first 64 bytes of {count(len(short), 'device')} are readable (not root)",
                as_root,
            )
        )
    unreadable = [bdf for bdf, d in devices.items() if d["bytes"] == 0]
    for bdf, device in devices.items():
        if bdf in unreadable:
            checks.append(Check("pci", bdf, UNKNOWN, "config space unreadable"))
            continue
        # A 64-byte (unprivileged) read ends before the capabilities: said once above, not malformed.
        for error in [] if bdf in short else device["problems"]:
            checks.append(Check("pci", bdf, UNKNOWN, f"malformed config space: {error}"))
    ports = {bdf: d for bdf, d in devices.items() if d.get("root_port")}
    for bdf, port in ports.items():
        supports = port["completer"] not in (None, "TPHComp- ExtTPHComp-")
        evidence = f"root port, DevCap2 {port['completer']}"
        checks.append(Check("pci", f"{bdf} TPH completer", OK if supports else NOT_USABLE, evidence))
    requesters = {bdf: d for bdf, d in devices.items() if d.get("requester")}
    for bdf, device in requesters.items():
        r = device["requester"]
        modes = [m for m, on in (("IV", r["interrupt_vector"]), ("DS", r["device_specific"])) if on] or ["No ST"]
        evidence = (
            f"{device['vendor_id']:04x}:{device['device_id']:04x} TPH requester: {'/'.join(modes)}, "
            f"ST table {r['st_table_location']} ({r['st_table_size']}), mode {r['mode']}, {r['enable']}"
        )
        enabled = r["enable"] not in ("Disabled",)
        checks.append(
            Check(
                "pci",
                f"{bdf} TPH requester",
                OK if enabled else NOT_USABLE,
                evidence,
                "" if enabled else "the driver has not enabled TPH (kernel and driver support, pci=notph)",
            )
        )
    if not requesters and not short:
        among = count(len(devices), "PCI function")
        if unreadable:  # any of them may be one
            checks.append(Check("pci", "TPH requesters", UNKNOWN, f"none among {among}, {len(unreadable)} unreadable"))
        else:
            checks.append(Check("pci", "TPH requesters", NOT_USABLE, f"none among {among}"))
    return checks


def consumer_cpus(host: Host, pid: int | None, cpus: str | None) -> list[int] | None:
    if cpus is not None:
        chosen = cpu_lists(cpus)
        if not chosen:
            raise ScenarioError(f"--cpus {cpus!r}: not a CPU list (e.g. 0-3,8)")
        present = host_cpus(host)
        absent = sorted(set(chosen) - set(present or chosen))
        if absent:
            raise ScenarioError(
                f"--cpus {cpus}: no CPU {cpu_list_text(absent)} on this host (it has CPUs {cpu_list_text(present)})"
            )
        return chosen
    if pid is None:
        return None
    status = host.text(f"/proc/{pid}/status")
    if status is None:
        raise ScenarioError(f"--pid {pid}: no such process")
    match = re.search(r"^Cpus_allowed_list:\s*(\S+)", status, re.M)
    return cpu_lists(match[1]) if match else None


def l3_of(host: Host, cpu: int) -> list[int]:
    text = host.text(f"/sys/devices/system/cpu/cpu{cpu}/cache/index3/shared_cpu_list")
    return cpu_lists(text) if text else []


def network_devices(host: Host) -> list[tuple[str, str]]:
    """Each network interface with a device (not a bridge, a tunnel or the loopback) and its
    driver ("?" where none is bound)."""
    found = []
    for name in host.listdir("/sys/class/net"):
        if host.link(f"/sys/class/net/{name}/device") is None:
            continue
        driver_link = host.link(f"/sys/class/net/{name}/device/driver")
        found.append((name, os.path.basename(driver_link) if driver_link else "?"))
    return found


def check_nics(host: Host, consumers: list[int] | None) -> list[Check]:
    checks = []
    for name, driver in network_devices(host):
        version = (host.text(f"/sys/module/{driver}/version") or "").strip()
        rx = [q for q in host.listdir(f"/sys/class/net/{name}/queues") if q.startswith("rx-")]
        irqs = sorted(int(i) for i in host.listdir(f"/sys/class/net/{name}/device/msi_irqs") if i.isdigit())
        affinity = {irq: (host.text(f"/proc/irq/{irq}/smp_affinity_list") or "").strip() for irq in irqs}
        shown = ", ".join(f"{irq}->{cpus or '?'}" for irq, cpus in list(affinity.items())[:8])
        more = f" (+{len(irqs) - 8})" if len(irqs) > 8 else ""
        evidence = (
            f"driver {driver}{' ' + version if version else ''}, {count(len(rx), 'RX queue')}, "
            f"IRQs {shown or 'none'}{more}"
        )
        # A NIC that receives has both: without them it was found, but nothing of it is known.
        missing = [what for what, listed in (("RX queue", rx), ("MSI IRQ", irqs)) if not listed]
        if missing:
            evidence += f" (no {' nor '.join(missing)} listed)"
        checks.append(Check("nic", name, NOT_CHECKED if missing else OK, evidence))
        if consumers is None:
            continue
        if not irqs:
            checks.append(
                Check(
                    "nic",
                    f"{name} injection target",
                    UNKNOWN,
                    f"no MSI IRQ listed in /sys/class/net/{name}/device/msi_irqs: which CPU its queues steer "
                    "to cannot be told",
                )
            )
            continue
        # bnxt tags each queue's IRQ with its first CPU: injection lands in that CPU's L2.
        firsts = {irq: cpu_lists(cpus)[0] for irq, cpus in affinity.items() if cpu_lists(cpus)}
        consumer_l3 = {c for cpu in consumers for c in l3_of(host, cpu)}
        on_core = [irq for irq, cpu in firsts.items() if cpu in consumers]
        on_ccx = [irq for irq, cpu in firsts.items() if cpu not in consumers and cpu in consumer_l3]
        elsewhere = [irq for irq in firsts if irq not in on_core and irq not in on_ccx]
        # An IRQ whose affinity cannot be read may land anywhere: no "ok" without them all.
        unread = [irq for irq in irqs if irq not in firsts]
        verdict = MISCONFIGURED if elsewhere else UNKNOWN if unread else OK
        checks.append(
            Check(
                "nic",
                f"{name} injection target",
                verdict,
                f"{count(len(on_core), 'IRQ')} on the consumer's CPUs, {len(on_ccx)} on its CCX, "
                f"{len(elsewhere)} elsewhere"
                + (f", {len(unread)} with no readable /proc/irq/N/smp_affinity_list" if unread else ""),
                ""
                if verdict != MISCONFIGURED
                else f"point each queue's IRQ at a consumer CPU: echo CPU > /proc/irq/N/smp_affinity_list "
                f"(IRQs {', '.join(map(str, elsewhere[:8]))})",
            )
        )
    if not checks:
        checks.append(Check("nic", "network devices", NOT_USABLE, "no PCI network device in /sys/class/net"))
    return checks


def check_resctrl(host: Host) -> list[Check]:
    if not host.exists("/sys/fs/resctrl/info"):
        return [
            Check(
                "resctrl",
                "resctrl",
                UNKNOWN,
                "/sys/fs/resctrl not mounted",
                "mount -t resctrl resctrl /sys/fs/resctrl (then run steer doctor again)",
            )
        ]
    checks = []
    io_alloc = host.text("/sys/fs/resctrl/info/L3/io_alloc")
    if io_alloc is None:
        checks.append(Check("resctrl", "io_alloc", NOT_USABLE, "no info/L3/io_alloc (kernel < 6.19 or no SDCIAE)"))
    else:
        masks = (host.text("/sys/fs/resctrl/info/L3/io_alloc_cbm") or "").strip()
        on = io_alloc.strip().startswith("enabled")
        checks.append(
            Check(
                "resctrl",
                "io_alloc",
                OK if on else MISCONFIGURED,
                f"io_alloc {io_alloc.strip()}; mask {masks or '?'}",
                "" if on else "echo 1 > /sys/fs/resctrl/info/L3/io_alloc",
            )
        )
    schemata = host.text("/sys/fs/resctrl/schemata")
    if schemata:
        line = next((ln for ln in schemata.splitlines() if ln.strip().startswith("L3:")), "")
        checks.append(Check("resctrl", "default group", OK, line.strip() or "no L3 line"))
    return checks


def check_ddio(host: Host, vendor: str | None) -> list[Check]:
    if vendor != "GenuineIntel":
        return []
    try:
        with open(host.path("/dev/cpu/0/msr"), "rb") as msr:
            msr.seek(IIO_LLC_WAYS_MSR)
            ddio_mask: int | None = int.from_bytes(msr.read(8), "little") & 0xFFFFF
    except OSError:
        ddio_mask = None
    if ddio_mask is None:
        checks = [
            Check(
                "ddio",
                "IIO LLC ways",
                UNKNOWN,
                "/dev/cpu/0/msr not readable",
                "as root: modprobe msr; rdmsr 0xc8b (the DDIO way mask)",
            )
        ]
    else:
        ways = bin(ddio_mask).count("1")
        verdict = OK if ways else MISCONFIGURED
        evidence = f"MSR 0xc8b = {ddio_mask:#x}: {ways} ways"
        checks = [Check("ddio", "IIO LLC ways", verdict, evidence, "" if ways else "DDIO off")]
    return checks + check_cat_groups(host, ddio_mask)


def l3_masks(schemata: str) -> dict[str, int]:
    """The L3 way masks of a resctrl schemata file by cache domain (``L3:0=7ff;1=7ff``)."""
    line = next((ln.strip() for ln in schemata.splitlines() if ln.strip().startswith("L3:")), "L3:")
    masks = {}
    for part in line[3:].split(";"):
        domain, _, mask = part.partition("=")
        if re.fullmatch(r"\s*[0-9a-fA-F]+\s*", mask):
            masks[domain.strip()] = int(mask, 16)
    return masks


def check_cat_groups(host: Host, ddio_mask: int | None) -> list[Check]:
    """Each resctrl group's L3 ways against DDIO's: a group allocating only in DDIO's ways has
    its lines evicted by every inbound write burst (the cores' reads of I/O data hit there
    whatever their masks: CAT limits where a core allocates, not what it reads)."""
    checks = []
    for group in sorted(set(host.listdir("/sys/fs/resctrl")) - {"info", "mon_groups", "mon_data"}):
        masks = l3_masks(host.text(f"/sys/fs/resctrl/{group}/schemata") or "")
        if not masks:
            continue
        listed = ";".join(f"{d}={m:x}" for d, m in masks.items())
        name = f"CAT group {group}"
        if ddio_mask is None:
            checks.append(Check("ddio", name, UNKNOWN, f"L3 {listed}; DDIO's ways unknown (MSR 0xc8b not readable)"))
            continue
        inside = [d for d, m in masks.items() if m and not m & ~ddio_mask]
        shared = {m & ddio_mask for m in masks.values()} - {0}
        if inside:
            outside = f"ways outside {ddio_mask:#x}"
            checks.append(
                Check(
                    "ddio",
                    name,
                    MISCONFIGURED,
                    f"L3 {listed}: allocates only in DDIO's ways ({ddio_mask:#x}) in domain {','.join(inside)}",
                    f"give it {outside} in /sys/fs/resctrl/{group}/schemata",
                )
            )
        elif shared:
            ways = ", ".join(f"{m:#x}" for m in sorted(shared))
            evidence = (
                f"L3 {listed}: shares {ways} with DDIO's {ddio_mask:#x} (inbound writes may evict its lines there)"
            )
            checks.append(Check("ddio", name, OK, evidence))
        else:
            checks.append(Check("ddio", name, OK, f"L3 {listed}: no way shared with DDIO's {ddio_mask:#x}"))
    return checks


def check_dsa(host: Host) -> list[Check]:
    names = host.listdir("/sys/bus/dsa/devices")
    devices = [n for n in names if re.fullmatch(r"dsa\d+", n)]
    if not devices:
        return [Check("dsa", "devices", NOT_USABLE, "no /sys/bus/dsa/devices/dsaN (no DSA, or idxd not loaded)")]
    checks = []
    for device in devices:
        state = (host.text(f"/sys/bus/dsa/devices/{device}/state") or "?").strip()
        engines = len([n for n in names if n.startswith(f"engine{device[3:]}.")])
        checks.append(
            Check("dsa", device, OK if state == "enabled" else MISCONFIGURED, f"{state}, {count(engines, 'engine')}")
        )
    for wq in [n for n in names if re.fullmatch(r"wq\d+\.\d+", n)]:
        attr = {
            a: (host.text(f"/sys/bus/dsa/devices/{wq}/{a}") or "?").strip()
            for a in ("mode", "size", "group_id", "state", "type")
        }
        portal = host.mode(f"/dev/dsa/{wq}")
        usable = attr["state"] == "enabled" and attr["type"] == "user" and portal is not None
        access = "portal " + (oct(portal & 0o777) if portal is not None else "missing")
        checks.append(
            Check(
                "dsa",
                wq,
                OK if usable else MISCONFIGURED,
                f"{attr['mode']}, size {attr['size']}, group {attr['group_id']}, {attr['state']}, "
                f"{attr['type']}, {access}",
                "" if usable else f"accel-config config-wq --type=user ... {wq}; accel-config enable-wq {wq}",
            )
        )
    return checks


def check_hbm(host: Host) -> list[Check]:
    nodes = [n for n in host.listdir("/sys/devices/system/node") if re.fullmatch(r"node\d+", n)]
    if not nodes:
        return [Check("hbm", "NUMA nodes", UNKNOWN, "no /sys/devices/system/node")]
    memory_only, unread = [], []
    for node in nodes:
        cpulist = host.text(f"/sys/devices/system/node/{node}/cpulist")
        if cpulist is None:
            # No cpulist (a partial capture) says nothing of the node's CPUs: not memory-only.
            unread.append(node)
            continue
        if not cpulist.strip():
            meminfo = host.text(f"/sys/devices/system/node/{node}/meminfo") or ""
            match = re.search(r"MemTotal:\s+(\d+) kB", meminfo)
            size = f"{int(match[1]) / (1 << 20):.1f} GiB" if match else "? GiB"
            memory_only.append(f"{node} ({size})")
    if len(unread) == len(nodes):
        return [Check("hbm", "memory-only nodes", UNKNOWN, f"no cpulist readable in {count(len(nodes), 'NUMA node')}")]
    if not memory_only:
        return [
            Check(
                "hbm",
                "memory-only nodes",
                NOT_USABLE,
                f"none among {count(len(nodes), 'NUMA node')} (no HBM in flat mode)",
            )
        ]
    return [Check("hbm", "memory-only nodes", OK, ", ".join(memory_only))]


# The top directories of a host's tree: given one of them as --root, the tree is one level up.
TREE_TOPS = ("proc", "sys", "dev", "boot", "etc")


def check_tree(host: Host) -> list[Check]:
    """Whether ``--root`` looks like a host's tree: one holding neither proc/ nor sys/ gives
    only unknowns, most often because the directory given is one level too deep."""
    if host.is_dir("/proc") or host.is_dir("/sys"):
        return []
    root = host.root
    fix = (
        f"give --root {root.parent} (the directory that holds {root.name}/)"
        if root.name in TREE_TOPS
        else "give --root the directory that holds proc/ and sys/"
    )
    return [Check("host", "tree", UNKNOWN, "--root holds neither proc/ nor sys/: not a host's tree", fix)]


def diagnose(root: str | Path = "/", pid: int | None = None, cpus: str | None = None) -> tuple[list[Check], Host]:
    """Every check on the host under ``root``, and the host view (what was read)."""
    host = Host(root)
    consumers = consumer_cpus(host, pid, cpus)
    checks = check_tree(host) + check_cpu(host) + check_kernel(host)
    checks += check_pci(host, pci_devices(host))
    checks += check_nics(host, consumers)
    checks += check_resctrl(host) + check_ddio(host, cpu_info(host).get("vendor_id"))
    checks += check_dsa(host) + check_hbm(host)
    return checks, host


def as_json(checks: list[Check], root: str | Path) -> str:
    return json.dumps({"root": str(root), "checks": [asdict(c) for c in checks]}, indent=2) + "\n"


VERDICT_STYLES = {
    "ok": "green",
    "not usable": "yellow",
    "misconfigured": "bold red",
    "unknown": "dim",
    "not checked": "dim",
}


def rich_table(checks: list[Check], console) -> None:
    """The checks as a rich table on ``console``: verdicts coloured, long evidence and fixes
    wrapped to the console's width instead of the plain table's one long line each."""
    from rich.table import Table

    table = Table(show_lines=False, expand=True)
    for header, ratio in (("area", None), ("check", 2), ("verdict", None), ("evidence", 4), ("fix", 2)):
        table.add_column(header, ratio=ratio, overflow="fold")
    for check in checks:
        style = VERDICT_STYLES.get(check.verdict, "")
        table.add_row(check.area, check.name, f"[{style}]{check.verdict}[/]", check.evidence, check.fix)
    console.print(table)
