"""``steer scenario --from-host``: a scenario of the machine it runs on (or of a captured tree,
``--root``): its topology, its NICs with their RX queues and each queue's IRQ CPU (what ``steer
doctor`` reads), a receive loop per queue on the CPUs the user names, and, as comments that
``steer compare`` prints, which DMA placements the host's hardware offers and which are
hypothetical there. Reads files only, as the doctor does."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from steer import doctor
from steer.api import ScenarioError, toml_literal
from steer.output import count

# Offered load per queue unless --set offered_gbps=...: a host's files say nothing of its traffic.
DEFAULT_OFFERED_GBPS = 10.0
# Link rate where the interface does not say (virtio reports -1): the rx-default scenario's.
ASSUMED_LINK_GBPS = 100.0
# An interrupt's name in /proc/interrupts that says which RX queue it serves: i40e names its
# vectors `i40e-IFACE-TxRx-N` (or `-rx-N`), virtio_net `virtioM-input.N`.
RX_IRQ_NAME = re.compile(r"(?:rx|input)[-.](\d+)$", re.IGNORECASE)
# What --cpus takes: CPUs and ranges, comma-separated (the doctor reads the same lists more leniently).
CPU_LIST = re.compile(r"\d+(-\d+)?(,\d+(-\d+)?)*")
# The line of a written scenario that says whether the host offers a placement; compare reads it.
PLACEMENT_LINE = re.compile(r"^# placement (\w+): (offered|hypothetical) \((.*)\)$")


@dataclass
class Queue:
    index: int
    # First CPU of its IRQ's affinity (where bnxt_en steers its writes), None where not told.
    irq_cpu: int | None
    irq: int | None


@dataclass
class Nic:
    name: str
    driver: str
    link_gbps: float | None
    queues: list[Queue]
    listed_queues: bool


@dataclass
class Topology:
    """The model's topology of a host and where each host CPU lies in it (the model numbers a
    CCX's cores together and SMT siblings ``cores`` apart, as Linux does on most machines)."""

    sockets: int
    ccx_per_socket: int
    cores_per_ccx: int
    threads_per_core: int
    model_cpu: dict[int, int]
    notes: list[str]


def first_number(text: str | None) -> int | None:
    match = re.search(r"-?\d+", text or "")
    return int(match[0]) if match else None


def interrupt_names(host: doctor.Host) -> dict[int, str]:
    """Each IRQ's action name, the last word of its line in /proc/interrupts."""
    names = {}
    for line in (host.text("/proc/interrupts") or "").splitlines():
        irq, _, rest = line.partition(":")
        if irq.strip().isdigit() and rest.split():
            names[int(irq)] = rest.split()[-1]
    return names


def nic_irqs(host: doctor.Host, name: str) -> list[int]:
    """The MSI IRQs of a NIC's PCI function: its device's, else its parent's (a virtio NIC's
    device is the virtio device, under the PCI function that holds the IRQs)."""
    for device in (f"/sys/class/net/{name}/device", f"/sys/class/net/{name}/device/.."):
        irqs = sorted(int(i) for i in host.listdir(f"{device}/msi_irqs") if i.isdigit())
        if irqs:
            return irqs
    return []


def read_nics(host: doctor.Host) -> list[Nic]:
    """Every network interface with a device (as the doctor counts NICs), with its RX queues and
    the CPU each queue's IRQ goes to where /proc/interrupts and /proc/irq say."""
    names = interrupt_names(host)
    nics = []
    for name, driver in doctor.network_devices(host):
        rx = sorted(int(q[3:]) for q in host.listdir(f"/sys/class/net/{name}/queues") if re.fullmatch(r"rx-\d+", q))
        by_queue = {}
        for irq in nic_irqs(host, name):
            match = RX_IRQ_NAME.search(names.get(irq, ""))
            if match:
                by_queue.setdefault(int(match[1]), irq)
        queues = []
        for index in rx or [0]:
            irq = by_queue.get(index)
            affinity = host.text(f"/proc/irq/{irq}/smp_affinity_list") if irq is not None else None
            cpus = doctor.cpu_lists(affinity) if affinity else []
            queues.append(Queue(index, cpus[0] if cpus else None, irq))
        speed = first_number(host.text(f"/sys/class/net/{name}/speed"))
        nics.append(Nic(name, driver, speed / 1000 if speed and speed > 0 else None, queues, bool(rx)))
    return nics


def l3_groups(host: doctor.Host, cpus: list[int]) -> list[list[int]]:
    """The host's CPUs grouped by the L3 they share (by their lowest CPU); one group where the
    tree does not say."""
    groups: dict[tuple[int, ...], None] = {}
    for cpu in cpus:
        shared = tuple(sorted(set(doctor.l3_of(host, cpu)) & set(cpus))) or (cpu,)
        groups.setdefault(shared, None)
    if all(len(g) == 1 for g in groups) and len(groups) == len(cpus) > 1:
        return [cpus]  # no L3 listed at all
    return sorted((list(g) for g in groups), key=min)


def threads_per_core(host: doctor.Host, info: dict[str, str]) -> tuple[int, str]:
    siblings = host.text("/sys/devices/system/cpu/cpu0/topology/thread_siblings_list")
    if siblings and doctor.cpu_lists(siblings):
        return len(doctor.cpu_lists(siblings)), "cpu0's thread_siblings_list"
    per_package, cores = first_number(info.get("siblings")), first_number(info.get("cpu cores"))
    if per_package and cores and per_package % cores == 0:
        return per_package // cores, "/proc/cpuinfo's siblings and cpu cores"
    return 1, "assumed: the tree does not say"


def sockets_of(host: doctor.Host, groups: int) -> tuple[int, str]:
    packages = set(re.findall(r"^physical id\s*:\s*(\d+)", host.text("/proc/cpuinfo") or "", re.M))
    if packages and groups % len(packages) == 0:
        return len(packages), "/proc/cpuinfo's physical ids"
    return 1, "assumed: the tree does not say"


def read_topology(host: doctor.Host) -> Topology:
    cpus = doctor.host_cpus(host) or [0]
    groups = l3_groups(host, cpus)
    threads, threads_from = threads_per_core(host, doctor.cpu_info(host))
    largest = max(len(g) for g in groups)
    if largest % threads:
        threads, threads_from = 1, f"assumed: an L3 of {largest} CPUs is no whole number of {threads}-thread cores"
    sockets, sockets_from = sockets_of(host, len(groups))
    per_ccx = largest // threads
    cores = len(groups) * per_ccx
    model_cpu = {
        cpu: (p // per_ccx) * cores + g * per_ccx + p % per_ccx
        for g, group in enumerate(groups)
        for p, cpu in enumerate(group)
    }
    notes = [
        f"{count(len(cpus), 'CPU')} in {count(len(groups), 'L3 group')} (each CPU's cache/index3/shared_cpu_list)",
        f"threads per core: {threads_from}; sockets: {sockets_from}",
    ]
    moved = {h: m for h, m in model_cpu.items() if h != m}
    if moved:
        shown = ", ".join(f"{h}->{m}" for h, m in list(moved.items())[:16])
        notes.append(f"host CPU -> model CPU where they differ: {shown}{' ...' if len(moved) > 16 else ''}")
    return Topology(sockets, len(groups) // sockets, per_ccx, threads, model_cpu, notes)


def verdicts(host: doctor.Host) -> dict[str, tuple[bool, str]]:
    """For each placement policy, whether this host's hardware offers it and why (from the
    doctor's checks)."""
    info = doctor.cpu_info(host)
    vendor = info.get("vendor_id")
    checks = doctor.check_cpu(host) + doctor.check_kernel(host) + doctor.check_pci(host, doctor.pci_devices(host))
    checks += doctor.check_ddio(host, vendor)
    found = {f"{c.area}/{c.name}": c for c in checks}
    offers: dict[str, tuple[bool, str]] = {"memory": (True, "DMA to DRAM needs nothing of the host")}
    ways = found.get("ddio/IIO LLC ways")
    if "hypervisor" in info.get("flags", "").split():
        offers["ddio"] = (False, "a virtual machine: DDIO acts on the physical NIC's writes, which the hypervisor owns")
    elif vendor != "GenuineIntel":
        offers["ddio"] = (False, f"DDIO is Intel's; this CPU is {vendor or 'of an unknown vendor'}")
    elif ways is not None and ways.verdict == doctor.MISCONFIGURED:
        offers["ddio"] = (False, f"DDIO is off: {ways.evidence}")
    else:
        offers["ddio"] = (
            True,
            ways.evidence
            if ways and ways.verdict == doctor.OK
            else "MSR 0xc8b not read; DDIO is on by default on Xeon E5 and later servers",
        )
    # SDCI: a Zen 5 CPU, a kernel that enables TPH, a root port that completes it, a NIC that requests it.
    sdci = found.get("cpu/SDCI")
    needs = [sdci] if sdci else []
    needs += [c for key, c in found.items() if key.startswith("kernel/") and "io_alloc" not in key]
    completers = [c for c in checks if c.name.endswith("TPH completer")]
    requesters = [c for c in checks if c.name.endswith("TPH requester")]
    short = [c for c in checks if c.name == "config space"]
    missing = next((c for c in needs if c.verdict != doctor.OK), None)
    if sdci is None:
        why = f"SDCI is AMD's (EPYC 9005); this CPU is {vendor or 'of an unknown vendor'}"
    elif missing is not None:
        why = f"{missing.name}: {missing.verdict} ({missing.evidence})"
    elif not any(c.verdict == doctor.OK for c in completers):
        why = "no root port says it completes TPH" + (f" ({short[0].evidence})" if short else "")
    elif not any(c.verdict == doctor.OK for c in requesters):
        why = "no device has TPH enabled as a requester" + (f" ({short[0].evidence})" if short else "")
    else:
        why = ""
    steered = (not why, why or "SDCI, TPH and a requester enabled, as steer doctor found")
    for policy in ("l2", "tph", "inject"):
        offers[policy] = steered
    return offers


def steered_cpu(queue: Queue, topology: Topology, consumer: int) -> int:
    """The model CPU a queue's writes are steered to: its IRQ's, else (not told) its consumer's."""
    return consumer if queue.irq_cpu is None else topology.model_cpu.get(queue.irq_cpu, queue.irq_cpu)


def offered_per_queue(nics: list[Nic], simulated: list) -> float:
    """The default load on each simulated queue: at most DEFAULT_OFFERED_GBPS, and no more than
    each NIC's link carries over its simulated queues."""
    shares = [
        (nic.link_gbps or ASSUMED_LINK_GBPS) / n for nic in nics if (n := sum(1 for (m, _), _ in simulated if m is nic))
    ]
    return min([DEFAULT_OFFERED_GBPS, *shares])


def placement_comments(offers: dict[str, tuple[bool, str]]) -> list[str]:
    return [
        f"# placement {policy}: {'offered' if on else 'hypothetical'} ({why})" for policy, (on, why) in offers.items()
    ]


def scenario_text(root: str | Path = "/", cpus: str | None = None, pid: int | None = None) -> str:
    """The scenario of the host under ``root``: a ScenarioError (one line) for bad --cpus or
    --pid, or a host without a NIC."""
    host = doctor.Host(root)
    if cpus is not None and not CPU_LIST.fullmatch(cpus.strip()):
        raise ScenarioError(f"--cpus {cpus!r}: not a CPU list (e.g. 0-3,8)")
    chosen = doctor.consumer_cpus(host, pid, cpus)
    if pid is not None and chosen is None:
        raise ScenarioError(f"--pid {pid}: no Cpus_allowed_list in /proc/{pid}/status")
    nics = read_nics(host)
    if not nics:
        raise ScenarioError(f"{root}: no network device in /sys/class/net: nothing to receive on")
    topology = read_topology(host)
    # Each CPU once, in the order named: one receive loop a CPU.
    consumers = list(dict.fromkeys(topology.model_cpu.get(c, c) for c in (chosen or sorted(topology.model_cpu))))
    queues = [(nic, q) for nic in nics for q in nic.queues]
    simulated = list(zip(queues, consumers))
    info = doctor.cpu_info(host)
    lines = [
        f"# This host as steer scenario --from-host read it ({info.get('model name', 'CPU model unknown')}).",
        "# The platform is the `host` preset: cache geometry from sysfs and latencies and bandwidths from",
        "# `steer calibrate` where the scenario runs; the topology below is the host's, as read:",
        *(f"#   {note}" for note in topology.notes),
        "# Each RX queue is consumed by a receive loop on a CPU named by --cpus or --pid (all CPUs",
        "# otherwise); its DMA is steered, under tph and l2, to the first CPU of its IRQ's affinity.",
    ]
    for nic in nics:
        said = "listed" if nic.listed_queues else "none listed: one assumed"
        lines.append(f"#   {nic.name}: driver {nic.driver}, {count(len(nic.queues), 'RX queue')} ({said})")
        for q in nic.queues:
            irq = (
                f"IRQ {q.irq} on CPU {q.irq_cpu}"
                if q.irq_cpu is not None
                else "IRQ CPU not told: assumed the consumer's"
            )
            lines.append(f"#     rx-{q.index}: {irq}")
    if len(queues) > len(consumers):
        left = count(len(queues) - len(consumers), "queue")
        lines.append(f"# {left} left out: one receive loop per CPU, {count(len(consumers), 'CPU')} named.")
    lines += ["#", "# Which placements this host's hardware offers (steer doctor's verdicts; steer compare says it):"]
    lines += placement_comments(verdicts(host))
    lines += [
        'description = "this host, its NICs\' RX queues into receive loops (steer scenario --from-host)"',
        "seed = 1",
        "",
        "[params]",
        'placement = "memory"      # memory | ddio | l2 | tph | inject: steer compare runs each',
        f"offered_gbps = {toml_literal(offered_per_queue(nics, simulated))}"
        "   # per queue: a host's files say nothing of its traffic",
        "",
        "[platform]",
        'preset = "host"',
        "",
        "[platform.topology]",
        f"sockets = {topology.sockets}",
        f"ccx_per_socket = {topology.ccx_per_socket}",
        f"cores_per_ccx = {topology.cores_per_ccx}",
        f"threads_per_core = {topology.threads_per_core}",
        "",
        "[platform.io]",
        "ddio_ways = 2   # for the ddio placement: Intel's default, the two highest LLC ways (IIO_LLC_WAYS 0x600)",
        "",
        "[sim]",
        "warmup_us = 200.0",
        "measure_us = 1000.0",
    ]
    for nic in nics:
        mine = [(q, cpu) for (n, q), cpu in simulated if n is nic]
        if not mine:
            continue
        link = nic.link_gbps or ASSUMED_LINK_GBPS
        lines += [
            "",
            "[[devices]]",
            f"name = {toml_literal(nic.name)}",
            f"link_gbps = {toml_literal(float(link))}"
            + ("" if nic.link_gbps else "   # assumed: the interface does not say"),
            'placement = { policy = "${placement}" }',
            "tph = { mode = \"iv\" }   # as bnxt_en: each queue's tag names its IRQ's first CPU",
        ]
        for q, cpu in mine:
            lines += [
                "",
                "[[devices.queues]]",
                f"consumer_cpu = {steered_cpu(q, topology, cpu)}   # rx-{q.index}'s IRQ CPU"
                + ("" if q.irq_cpu is not None else " (not told: its consumer's)"),
                'offered_gbps = "${offered_gbps}"',
            ]
    taken: dict[str, int] = {}
    for (nic, _), cpu in simulated:
        device_queue = taken[nic.name] = taken.get(nic.name, -1) + 1
        lines += [
            "",
            "[[workloads]]",
            'kind = "rx_loop"',
            f"cpu = {cpu}",
            f"device = {toml_literal(nic.name)}",
            f"queue = {device_queue}",
        ]
    return "\n".join(lines) + "\n"


def host_offers(scenario: str) -> dict[str, tuple[str, str]]:
    """The ``# placement NAME: offered|hypothetical (why)`` lines of a scenario file, by policy;
    none for a built-in scenario or a file without them."""
    try:
        text = Path(scenario).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return {}
    return {m[1]: (m[2], m[3]) for m in map(PLACEMENT_LINE.match, text.splitlines()) if m}


def compare_line(scenario: str, policies: dict[str, str]) -> str | None:
    """What ``steer compare`` prints under its table for a scenario from a host: which of its
    columns (column name -> policy) the host offers and which are hypothetical there."""
    offers = host_offers(scenario)
    said = {
        verdict: [col for col, policy in policies.items() if offers.get(policy, ("",))[0] == verdict]
        for verdict in ("offered", "hypothetical")
    }
    parts = [f"{verdict} {', '.join(columns)}" for verdict, columns in said.items() if columns]
    if not parts:
        return None
    return f"on the host this scenario was written from: {'; '.join(parts)} (its `# placement` lines say why)"
