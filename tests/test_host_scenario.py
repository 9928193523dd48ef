"""`steer scenario --from-host`: the scenario written for each captured host tree (golden, in
`tests/fixtures/host_scenario/`; bless a change with `STEER_BLESS=1 .venv/bin/python -m pytest
tests/test_host_scenario.py` and review the diff), for synthetic trees (queues to IRQ CPUs,
consumers, placements offered), for this machine, that each runs, and bad input."""

from __future__ import annotations

import os
import tomllib
from pathlib import Path

import pytest

from steer import api, host_scenario
from steer.cli import main
from test_doctor import REAL_HOSTS, real_host, turin_tree, write

GOLDEN = Path(__file__).parent / "fixtures" / "host_scenario"
BLESS = os.environ.get("STEER_BLESS") == "1"
SHORT = ["sim.warmup_us=20", "sim.measure_us=30"]


def from_host(capsys, *args: str) -> tuple[int, str, str]:
    code = main(["scenario", "--from-host", *args])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize("name", REAL_HOSTS)
def test_each_captured_host_writes_its_golden_scenario_or_its_one_line_error(tmp_path, capsys, name):
    root = real_host(name, tmp_path / "host")
    code, out, err = from_host(capsys, "--root", str(root))
    got = out if code == 0 else f"exit {code}: {err.replace(str(root), 'ROOT')}"
    golden = GOLDEN / f"{name}.{'toml' if code == 0 else 'txt'}"
    if BLESS:
        GOLDEN.mkdir(exist_ok=True)
        golden.write_text(got)
    assert got == golden.read_text()


def test_the_captured_host_with_nics_writes_a_scenario_that_runs(tmp_path, capsys):
    root = real_host("xeon-silver-4108", tmp_path / "host")
    scenario = tmp_path / "silver.toml"
    assert from_host(capsys, "--root", str(root), "-o", str(scenario))[0] == 0
    result = api.run(str(scenario), SHORT)
    assert set(result["devices"]) == {"enp96s0f0", "enp96s0f1"}
    assert all(d["rx_gbps"] > 0 for d in result["devices"].values())


def test_captured_hosts_without_a_nic_say_so_in_one_line_exit_2_and_write_nothing(tmp_path, capsys):
    root = real_host("epyc-7451", tmp_path / "host")
    out = tmp_path / "s.toml"
    code, _, err = from_host(capsys, "--root", str(root), "-o", str(out))
    assert code == 2
    assert err == f"steer: error: {root}: no network device in /sys/class/net: nothing to receive on\n"
    assert not out.exists()


def this_host_has_a_nic() -> bool:
    return bool(host_scenario.read_nics(host_scenario.doctor.Host("/")))


def test_this_host_writes_a_scenario_that_runs_or_says_it_has_no_nic(tmp_path, capsys):
    scenario = tmp_path / "here.toml"
    code, out, err = from_host(capsys, "-o", str(scenario))
    if not this_host_has_a_nic():
        assert code == 2 and "no network device" in err
        return
    assert (code, out) == (0, f"wrote {scenario}\n")
    result = api.run(str(scenario), SHORT)
    assert sum(d["rx_gbps"] for d in result["devices"].values()) > 0


def turin_with_irq_names(root: Path) -> Path:
    """The doctor's Turin tree (eth1: rx-0 and rx-1; IRQ 100 on CPU 2, 101 on CPUs 9-10; two L3s
    of 8 CPUs) with /proc/interrupts naming each IRQ's queue, and a process allowed CPUs 4-5."""
    turin_tree(root)
    write(
        root,
        "proc/interrupts",
        "           CPU0\n 100:  5  IR-PCI-MSIX eth1-TxRx-0\n 101:  7  IR-PCI-MSIX eth1-TxRx-1\n",
    )
    write(root, "proc/77/status", "Name:\tapp\nCpus_allowed_list:\t4-5\n")
    return root


def written(capsys, *args: str) -> dict:
    code, out, err = from_host(capsys, *args)
    assert code == 0, err
    return tomllib.loads(out)


def test_each_queue_is_steered_to_its_irqs_first_cpu_and_consumed_on_the_cpus_named(tmp_path, capsys):
    root = turin_with_irq_names(tmp_path)
    scenario = written(capsys, "--root", str(root), "--cpus", "6,3")
    queues = scenario["devices"][0]["queues"]
    assert [q["consumer_cpu"] for q in queues] == [2, 9]
    assert [(w["cpu"], w["device"], w["queue"]) for w in scenario["workloads"]] == [(6, "eth1", 0), (3, "eth1", 1)]
    assert scenario["platform"]["topology"] == {
        "sockets": 1,
        "ccx_per_socket": 2,
        "cores_per_ccx": 8,
        "threads_per_core": 1,
    }


def test_a_pid_consumes_on_the_cpus_it_may_run_on(tmp_path, capsys):
    root = turin_with_irq_names(tmp_path)
    scenario = written(capsys, "--root", str(root), "--pid", "77")
    assert [w["cpu"] for w in scenario["workloads"]] == [4, 5]


def test_without_cpus_every_cpu_consumes_one_queue_in_order(tmp_path, capsys):
    scenario = written(capsys, "--root", str(turin_with_irq_names(tmp_path)))
    assert [w["cpu"] for w in scenario["workloads"]] == [0, 1]


def test_queues_beyond_the_cpus_named_are_left_out_and_said(tmp_path, capsys):
    code, out, _ = from_host(capsys, "--root", str(turin_with_irq_names(tmp_path)), "--cpus", "5")
    assert code == 0
    assert "# 1 queue left out: one receive loop per CPU, 1 CPU named." in out.splitlines()
    assert len(tomllib.loads(out)["devices"][0]["queues"]) == 1


def test_a_queue_whose_irq_is_not_named_is_steered_to_its_consumer(tmp_path, capsys):
    root = turin_tree(tmp_path)  # no /proc/interrupts: which IRQ serves which queue is not told
    scenario = written(capsys, "--root", str(root), "--cpus", "12-13")
    assert [q["consumer_cpu"] for q in scenario["devices"][0]["queues"]] == [12, 13]


def test_a_turin_host_with_notph_offers_sdci_only_hypothetically_and_says_why(tmp_path, capsys):
    code, out, _ = from_host(capsys, "--root", str(turin_with_irq_names(tmp_path)))
    assert code == 0
    assert "# placement ddio: hypothetical (DDIO is Intel's; this CPU is AuthenticAMD)" in out
    assert "# placement l2: hypothetical (pci=notph: misconfigured (pci=notph on the command line))" in out.splitlines()


def test_a_turin_host_with_tph_enabled_offers_sdci(tmp_path, capsys):
    root = turin_with_irq_names(tmp_path)
    write(root, "proc/cmdline", "BOOT_IMAGE=/vmlinuz root=/dev/sda1\n")
    offers = host_scenario.verdicts(host_scenario.doctor.Host(root))
    assert (
        offers["l2"]
        == offers["tph"]
        == offers["inject"]
        == (True, "SDCI, TPH and a requester enabled, as steer doctor found")
    )
    assert offers["memory"][0] and not offers["ddio"][0]


def test_a_xeon_offers_ddio_from_its_way_mask_unless_it_is_off(tmp_path):
    root = tmp_path
    write(root, "proc/cpuinfo", "vendor_id\t: GenuineIntel\ncpu family\t: 6\nflags\t: fpu sse\n\n")
    write(root, "dev/cpu/0/msr", bytes(0xC8B) + (0x600).to_bytes(8, "little"))
    assert host_scenario.verdicts(host_scenario.doctor.Host(root))["ddio"] == (True, "MSR 0xc8b = 0x600: 2 ways")
    write(root, "dev/cpu/0/msr", bytes(0xC8B + 8))
    assert host_scenario.verdicts(host_scenario.doctor.Host(root))["ddio"] == (
        False,
        "DDIO is off: MSR 0xc8b = 0x0: 0 ways",
    )
    (root / "dev/cpu/0/msr").unlink()
    assert host_scenario.verdicts(host_scenario.doctor.Host(root))["ddio"] == (
        True,
        "MSR 0xc8b not read; DDIO is on by default on Xeon E5 and later servers",
    )
    write(root, "proc/cpuinfo", "vendor_id\t: GenuineIntel\ncpu family\t: 6\nflags\t: fpu hypervisor\n\n")
    offered, why = host_scenario.verdicts(host_scenario.doctor.Host(root))["ddio"]
    assert not offered and why.startswith("a virtual machine")


def test_an_interleaved_l3_numbering_is_mapped_onto_the_models(tmp_path):
    # 112 CPUs, the even ones sharing one L3 and the odd ones the other; no thread siblings told.
    topology = host_scenario.read_topology(host_scenario.doctor.Host(real_host("xeon-memory-only-nodes", tmp_path)))
    assert (topology.sockets, topology.ccx_per_socket, topology.cores_per_ccx, topology.threads_per_core) == (
        1,
        2,
        56,
        1,
    )
    assert [topology.model_cpu[c] for c in (0, 1, 2, 3, 111)] == [0, 56, 1, 57, 111]


def test_smt_siblings_keep_their_numbers_when_the_host_numbers_them_as_the_model(tmp_path):
    topology = host_scenario.read_topology(host_scenario.doctor.Host(real_host("epyc-7451", tmp_path)))
    assert (topology.sockets, topology.ccx_per_socket, topology.cores_per_ccx, topology.threads_per_core) == (
        2,
        8,
        3,
        2,
    )
    assert all(host == model for host, model in topology.model_cpu.items())


def test_the_offered_load_fits_each_link_over_its_queues():
    slow = host_scenario.Nic(
        "a", "x", 1.0, [host_scenario.Queue(0, None, None), host_scenario.Queue(1, None, None)], True
    )
    fast = host_scenario.Nic("b", "x", None, [host_scenario.Queue(0, None, None)], True)
    simulated = [((slow, slow.queues[0]), 0), ((slow, slow.queues[1]), 1), ((fast, fast.queues[0]), 2)]
    assert host_scenario.offered_per_queue([slow, fast], simulated) == 0.5
    assert host_scenario.offered_per_queue([fast], simulated[2:]) == host_scenario.DEFAULT_OFFERED_GBPS


def test_compare_says_which_of_its_columns_the_host_offers(tmp_path, capsys):
    root = turin_with_irq_names(tmp_path / "host")
    scenario = tmp_path / "turin.toml"
    assert from_host(capsys, "--root", str(root), "-o", str(scenario))[0] == 0
    # The tree's 16 CPUs, on the turin-9655 preset's caches: the run does not depend on this machine.
    args = ["compare", str(scenario), "--placement", "memory,sdci,ddio", "--set", 'platform.preset="turin-9655"']
    assert main([*args, "--quiet", *(a for s in SHORT for a in ("--set", s))]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[-1] == (
        "on the host this scenario was written from: offered memory; hypothetical sdci, ddio "
        "(its `# placement` lines say why)"
    )


def test_compare_of_a_scenario_not_from_a_host_says_nothing_of_it(tmp_path):
    assert host_scenario.compare_line("rx-default", {"memory": "memory"}) is None
    (tmp_path / "bad.toml").write_bytes(b"\xff")
    assert host_scenario.compare_line(str(tmp_path / "bad.toml"), {"memory": "memory"}) is None


@pytest.mark.parametrize(
    ("args", "error"),
    [
        (["--cpus", "0,x"], "steer: error: --cpus '0,x': not a CPU list (e.g. 0-3,8)"),
        (["--cpus", "99"], "steer: error: --cpus 99: no CPU 99 on this host (it has CPUs 0-15)"),
        (["--pid", "4"], "steer: error: --pid 4: no such process"),
        (["--pid", "78"], "steer: error: --pid 78: no Cpus_allowed_list in /proc/78/status"),
    ],
)
def test_bad_cpus_or_pid_is_one_line_exit_2(tmp_path, capsys, args, error):
    root = turin_with_irq_names(tmp_path)
    write(root, "proc/78/status", "Name:\tx\n")
    code, out, err = from_host(capsys, "--root", str(root), *args)
    assert (code, out, err) == (2, "", error + "\n")


def test_cpus_and_pid_together_and_a_root_that_is_no_directory_are_refused(tmp_path, capsys):
    with pytest.raises(SystemExit) as usage:
        main(["scenario", "--from-host", "--cpus", "0", "--pid", "1"])
    err = capsys.readouterr().err
    assert usage.value.code == 2 and err.count("\n") == 1 and "not allowed with argument --cpus" in err
    code, _, err = from_host(capsys, "--root", str(tmp_path / "none"))
    assert (code, err) == (2, f"steer: error: --root {tmp_path / 'none'}: not a directory\n")


def test_a_virtio_nics_queue_irq_is_found_on_its_pci_function_by_its_name(tmp_path):
    pci = "sys/devices/pci0000:00/0000:00:03.0"
    for irq in (37, 38, 39):
        write(tmp_path, f"{pci}/msi_irqs/{irq}", "msix\n")
    (tmp_path / pci / "virtio2").mkdir()
    (tmp_path / "sys/class/net/eth0/queues/rx-0").mkdir(parents=True)
    (tmp_path / "sys/class/net/eth0/queues/tx-0").mkdir(parents=True)
    os.symlink("../../../devices/pci0000:00/0000:00:03.0/virtio2", tmp_path / "sys/class/net/eth0/device")
    write(tmp_path, "sys/class/net/eth0/speed", "-1\n")
    names = ("virtio2-config", "virtio2-input.0", "virtio2-output.0")
    write(tmp_path, "proc/interrupts", "".join(f" {37 + i}: 0 PCI-MSIX {n}\n" for i, n in enumerate(names)))
    write(tmp_path, "proc/irq/38/smp_affinity_list", "1\n")
    [nic] = host_scenario.read_nics(host_scenario.doctor.Host(tmp_path))
    assert (nic.name, nic.link_gbps, nic.listed_queues) == ("eth0", None, True)
    assert nic.queues == [host_scenario.Queue(0, 1, 38)]


def test_an_i40e_nic_names_its_rx_vectors_and_says_its_speed(tmp_path):
    root = turin_tree(tmp_path)
    names = ("i40e-0000:41:00.0:misc", "i40e-eth1-rx-1", "i40e-eth1-TxRx-0")
    write(root, "proc/interrupts", "".join(f" {100 + i}: 0 PCI-MSIX {n}\n" for i, n in enumerate(names)))
    write(root, "sys/bus/pci/devices/0000:41:00.0/msi_irqs/102", "msix\n")
    write(root, "proc/irq/102/smp_affinity_list", "5-6\n")  # IRQ 101 is on CPUs 9-10
    write(root, "sys/class/net/eth1/speed", "25000\n")
    [nic] = host_scenario.read_nics(host_scenario.doctor.Host(root))
    assert nic.link_gbps == 25.0
    assert nic.queues == [host_scenario.Queue(0, 5, 102), host_scenario.Queue(1, 9, 101)]


def topology_of(root: Path) -> tuple:
    t = host_scenario.read_topology(host_scenario.doctor.Host(root))
    return (t.sockets, t.ccx_per_socket, t.cores_per_ccx, t.threads_per_core), t.notes


def test_a_tree_with_no_l3_listed_is_one_l3_of_every_cpu_with_what_is_assumed_said(tmp_path):
    write(tmp_path, "sys/devices/system/cpu/possible", "0-3\n")
    assert topology_of(tmp_path) == (
        (1, 1, 4, 1),
        [
            "4 CPUs in 1 L3 group (each CPU's cache/index3/shared_cpu_list)",
            "threads per core: assumed: the tree does not say; sockets: assumed: the tree does not say",
        ],
    )


def test_thread_siblings_give_the_threads_per_core(tmp_path):
    write(tmp_path, "sys/devices/system/cpu/possible", "0-3\n")
    write(tmp_path, "sys/devices/system/cpu/cpu0/topology/thread_siblings_list", "0,2\n")
    shape, notes = topology_of(tmp_path)
    assert shape == (1, 1, 2, 2) and notes[1].startswith("threads per core: cpu0's thread_siblings_list;")


def test_threads_that_do_not_divide_an_l3_and_sockets_that_do_not_divide_the_l3s_are_assumed_away(tmp_path):
    cpuinfo = "".join(f"processor\t: {c}\nphysical id\t: {c % 2}\nsiblings\t: 4\ncpu cores\t: 2\n\n" for c in range(6))
    write(tmp_path, "proc/cpuinfo", cpuinfo)
    for cpu in range(6):  # two L3s of three CPUs: no whole number of 2-thread cores
        write(
            tmp_path, f"sys/devices/system/cpu/cpu{cpu}/cache/index3/shared_cpu_list", "0-2\n" if cpu < 3 else "3-5\n"
        )
    shape, notes = topology_of(tmp_path)
    assert shape == (2, 1, 3, 1)
    assert notes[1] == (
        "threads per core: assumed: an L3 of 3 CPUs is no whole number of 2-thread cores; "
        "sockets: /proc/cpuinfo's physical ids"
    )
    write(tmp_path, "sys/devices/system/cpu/cpu5/cache/index3/shared_cpu_list", "5\n")  # a third L3
    shape, notes = topology_of(tmp_path)
    assert shape == (1, 3, 3, 1) and notes[1].endswith("sockets: assumed: the tree does not say")


def sdci_verdict(root: Path) -> tuple[bool, str]:
    return host_scenario.verdicts(host_scenario.doctor.Host(root))["l2"]


def turin_with_tph_on(root: Path) -> Path:
    """The Turin tree with TPH enabled in the kernel: what SDCI then needs is PCI's."""
    turin_with_irq_names(root)
    write(root, "proc/cmdline", "BOOT_IMAGE=/vmlinuz root=/dev/sda1\n")
    return root


def test_sdci_is_hypothetical_without_a_root_port_that_completes_tph(tmp_path):
    root = turin_with_tph_on(tmp_path)
    (root / "sys/bus/pci/devices/0000:40:01.1/config").unlink()
    assert sdci_verdict(root) == (False, "no root port says it completes TPH")


def test_sdci_is_hypothetical_without_a_device_that_enabled_tph_as_a_requester(tmp_path):
    root = turin_with_tph_on(tmp_path)
    (root / "sys/bus/pci/devices/0000:41:00.0/config").unlink()
    assert sdci_verdict(root) == (False, "no device has TPH enabled as a requester")


def test_config_spaces_read_without_root_say_why_sdci_is_not_known_to_be_offered(tmp_path):
    root = turin_with_tph_on(tmp_path)
    spaces = sorted((root / "sys/bus/pci/devices").glob("*/config"))
    for config in spaces:
        config.write_bytes(config.read_bytes()[:64])
    offered, why = sdci_verdict(root)
    assert not offered
    assert why == (
        f"no root port says it completes TPH (only the first 64 bytes of {len(spaces)} devices are readable (not root))"
    )


def test_a_nic_without_msi_irqs_has_queues_whose_irq_cpu_is_not_told(tmp_path):
    root = turin_with_irq_names(tmp_path)
    for irq in (root / "sys/bus/pci/devices/0000:41:00.0/msi_irqs").iterdir():
        irq.unlink()
    [nic] = host_scenario.read_nics(host_scenario.doctor.Host(root))
    assert nic.queues == [host_scenario.Queue(0, None, None), host_scenario.Queue(1, None, None)]


def test_a_nic_none_of_whose_queues_has_a_cpu_is_not_written(tmp_path, capsys):
    root = real_host("xeon-silver-4108", tmp_path / "host")
    code, out, _ = from_host(capsys, "--root", str(root), "--cpus", "0")
    scenario = tomllib.loads(out)
    assert code == 0 and [d["name"] for d in scenario["devices"]] == ["enp96s0f0"]
    assert [(w["device"], w["queue"]) for w in scenario["workloads"]] == [("enp96s0f0", 0)]
