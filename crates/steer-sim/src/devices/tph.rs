//! PCIe TPH steering as the software stack sets it up, on top of the `steer-tph` codec. The three
//! parties of the LPC 2025 SDCI talk:
//!
//! - the platform: the root ports' TPH Completer support and the firmware's steering-tag map
//!   (`StMap`, the host bridge's ACPI `_DSM`: CPU UID -> tag), with which the I/O die also decodes
//!   the tag of each write (the `tph` placement);
//! - the device: a configuration space with MSI-X and TPH Requester capabilities plus an MSI-X
//!   table, synthesized with `steer_tph::synth` and read and written only through the codec;
//! - the driver: Linux's TPH core (`pcie_enable_tph`, `pcie_tph_get_cpu_st`,
//!   `pcie_tph_set_st_entry`) used as bnxt_en uses it: one tag per RX queue, for the first CPU of
//!   the queue's IRQ affinity, reprogrammed when the affinity changes, then only that RX queue is
//!   restarted.
//!
//! Which DMA writes carry a hint (payload, header, completion entries) is the device's choice,
//! `tph.hints`: the "driver heuristics" of the talk.

use rustc_hash::FxHashMap;
use steer_tph::synth::DeviceBuilder;
use steer_tph::tph::{TPH_CONTROL, TPH_ST_TABLE};
use steer_tph::{
    decode, tph_completer, ConfigSpace, MsixCapability, MsixTable, RequesterEnable, StMode, StTableLocation,
    TphCapability, TphCompleter,
};

use crate::devices::dma::{DmaKind, Hint};
use crate::error::{ensure, ConfigResult, Shown};
use crate::params::{choice, params};
use crate::platform::{Completer, TopologySpec, TphHostSpec};
use crate::stats::{stat, Report};
use crate::units::Time;

const DSM_VM_ST8_VALID: u64 = 1 << 0;
const DSM_VM_ST16_VALID: u64 = 1 << 1;
const DSM_VM_ST8_SHIFT: u32 = 8;
const DSM_VM_ST16_SHIFT: u32 = 16;

/// The word the host bridge's `_DSM` (revision 7, function 0xF) returns for one CPU: bit 0 the
/// 8-bit tag for volatile memory is valid, bit 1 the 16-bit one is, bits 15:8 the 8-bit tag,
/// bits 31:16 the 16-bit tag. Bit 2 (ignore processing hints) and the persistent-memory half
/// (bits 63:32) stay 0.
pub fn dsm_word(st8: Option<u8>, st16: Option<u16>) -> u64 {
    let mut word = 0;
    if let Some(st) = st8 {
        word |= DSM_VM_ST8_VALID | (st as u64) << DSM_VM_ST8_SHIFT;
    }
    if let Some(st) = st16 {
        word |= DSM_VM_ST16_VALID | (st as u64) << DSM_VM_ST16_SHIFT;
    }
    word
}

/// The tag `pcie_tph_get_cpu_st` takes from a `_DSM` word for the negotiated request type: the
/// 8-bit one for TPH only, the 16-bit one for extended TPH; 0 when that one is not valid or TPH is
/// not enabled.
pub fn tag_from_dsm(word: u64, request: RequesterEnable) -> u16 {
    match request {
        RequesterEnable::TphOnly if word & DSM_VM_ST8_VALID != 0 => (word >> DSM_VM_ST8_SHIFT) as u8 as u16,
        RequesterEnable::TphAndExtended if word & DSM_VM_ST16_VALID != 0 => (word >> DSM_VM_ST16_SHIFT) as u16,
        _ => 0,
    }
}

/// The platform's steering-tag map: the `_DSM` word of each CPU UID (Linux passes the logical CPU
/// number as the UID) and its inverse, with which the I/O die decodes a write's tag.
#[derive(Debug, Clone, Default)]
pub struct StMap {
    words: Vec<u64>,
    cpu_of_st8: FxHashMap<u16, u32>,
    cpu_of_st16: FxHashMap<u16, u32>,
}

impl StMap {
    /// The map of a validated platform: CPU n's tag is `st_base` plus its APIC-style id.
    pub fn new(spec: &TphHostSpec, topology: &TopologySpec) -> StMap {
        let words: Vec<u64> = (0..topology.cpus())
            .map(|cpu| {
                let tag = spec.st_base + topology.apic_id(cpu);
                let st8 = (spec.st_8bit && tag <= u8::MAX as u32).then_some(tag as u8);
                let st16 = spec.st_16bit.then_some(tag as u16);
                dsm_word(st8, st16)
            })
            .collect();
        let mut map = StMap { words, ..StMap::default() };
        for (cpu, &word) in map.words.iter().enumerate() {
            if word & DSM_VM_ST8_VALID != 0 {
                map.cpu_of_st8.entry(tag_from_dsm(word, RequesterEnable::TphOnly)).or_insert(cpu as u32);
            }
            if word & DSM_VM_ST16_VALID != 0 {
                map.cpu_of_st16.entry(tag_from_dsm(word, RequesterEnable::TphAndExtended)).or_insert(cpu as u32);
            }
        }
        map
    }

    /// The `_DSM` result for a CPU UID; `None` when firmware knows no such CPU (the call fails).
    pub fn dsm(&self, cpu_uid: u32) -> Option<u64> {
        self.words.get(cpu_uid as usize).copied()
    }

    /// The CPU a write's tag names, as the I/O die decodes it (an 8-bit tag unless `extended`);
    /// `None` for a tag no CPU has.
    pub fn cpu_of(&self, st: u16, extended: bool) -> Option<u32> {
        if extended { self.cpu_of_st16.get(&st) } else { self.cpu_of_st8.get(&st) }.copied()
    }
}

choice! {
    /// The ST mode a NIC's driver enables.
    pub enum TphMode {
        /// TPH not enabled (the driver does not ask for it).
        Off,
        /// No-ST mode: writes carry a processing hint but no steering tag.
        NoSt,
        /// Interrupt Vector mode: each RX queue's tag sits in the ST entry of its MSI-X vector (bnxt_en).
        Iv,
        /// Device Specific mode: the device picks the entry; the model uses entry i for RX queue i.
        Ds,
    }
}

impl TphMode {
    fn st_mode(self) -> Option<StMode> {
        match self {
            TphMode::Off => None,
            TphMode::NoSt => Some(StMode::NoSt),
            TphMode::Iv => Some(StMode::InterruptVector),
            TphMode::Ds => Some(StMode::DeviceSpecific),
        }
    }

    fn name(self) -> String {
        serde_json::to_value(self).ok().and_then(|v| v.as_str().map(str::to_string)).unwrap_or_default()
    }
}

choice! {
    /// Where a device keeps its steering-tag table.
    pub enum StTable {
        /// In bits 31:16 of each MSI-X table entry's Vector Control.
        Msix,
        /// In the TPH Requester capability, after its control register.
        Capability,
    }
}

params! {
    /// An IRQ affinity change, as writing `/proc/irq/N/smp_affinity_list` makes one.
    pub struct AffinityChange {
        /// RX queue whose IRQ moves.
        queue: u32 = 0,
        /// When, in simulated µs from the start (warm-up included).
        at_us: f64 = 0.0,
        /// First CPU of the new affinity mask.
        cpu: u32 = 0,
    }
}

params! {
    /// PCIe TPH on a NIC: the device's capability, the ST mode its driver enables and which DMA
    /// writes carry hints. The `tph` placement turns the hints into destinations.
    pub struct NicTphSpec {
        /// ST mode the driver enables: `iv` (as bnxt_en), `ds`, `no_st` or `off`.
        mode: TphMode = TphMode::Off,
        /// The device has a TPH Requester capability.
        capability: bool = true,
        /// ST modes the capability advertises (`no_st`, `iv`, `ds`).
        supported_modes: Vec<TphMode> = vec![TphMode::NoSt, TphMode::Iv, TphMode::Ds],
        /// The device is an extended TPH requester (16-bit steering tags).
        extended: bool = true,
        /// Where the steering-tag table lives: `msix` (MSI-X Vector Control) or `capability`.
        st_table: StTable = StTable::Msix,
        /// DMA writes that carry a hint: `header` (a packet's first line), `payload` (the rest of
        /// it), `completion` (completion entries). Writes without one go to memory.
        hints: Vec<DmaKind> = vec![DmaKind::Header, DmaKind::Payload, DmaKind::Completion],
        /// How long a queue restart keeps the queue from taking packets (µs); arrivals meanwhile
        /// are dropped. Not published; 0 by default.
        restart_us: f64 = 0.0,
        /// IRQ affinity changes: each reprograms the queue's tag for the new CPU and restarts that
        /// queue. The workload consuming the queue stays on its CPU.
        affinity_changes: Vec<AffinityChange> = Vec::new(),
    }
}

/// Vendor and device id of the synthesized NIC: a Broadcom BCM57508 (NetXtreme-E, bnxt_en).
const NIC_ID: (u16, u16) = (0x14e4, 0x1750);
/// Vendor id of the synthesized root port (AMD; its device id is not modelled).
const ROOT_PORT_VENDOR: u16 = 0x1022;
const MSIX_OFFSET: u8 = 0xA0;
const TPH_OFFSET: u16 = 0x100;
/// Most entries the TPH capability's own table can have at `TPH_OFFSET` in 4 KiB of config space.
pub const MAX_CAPABILITY_ST_ENTRIES: usize = (0x1000 - TPH_OFFSET as usize - TPH_ST_TABLE as usize) / 2;
/// Most MSI-X vectors (one per RX queue), hence ST entries in the MSI-X table.
pub const MAX_MSIX_VECTORS: usize = 2048;

impl NicTphSpec {
    fn table_limit(&self) -> usize {
        match self.st_table {
            StTable::Msix => MAX_MSIX_VECTORS,
            StTable::Capability => MAX_CAPABILITY_ST_ENTRIES,
        }
    }

    /// Checks the section of a device with `queues` RX queues on a platform of `cpus` CPUs.
    pub fn validate(&self, path: &str, queues: usize, cpus: u32) -> ConfigResult<()> {
        let key = |k: &str| format!("{path}.{k}");
        for (i, mode) in self.supported_modes.iter().enumerate() {
            ensure(*mode != TphMode::Off, &key(&format!("supported_modes.{i}")), || {
                "`off` is not an ST mode (no_st, iv, ds)".into()
            })?;
        }
        ensure(self.restart_us >= 0.0, &key("restart_us"), || {
            format!("must not be negative (got {})", Shown(self.restart_us))
        })?;
        if self.mode != TphMode::Off {
            ensure(queues <= self.table_limit(), &key("st_table"), || {
                format!("{queues} RX queues need {queues} ST entries; this table holds at most {}", self.table_limit())
            })?;
        }
        for (i, change) in self.affinity_changes.iter().enumerate() {
            let key = |k: &str| format!("{path}.affinity_changes.{i}.{k}");
            ensure((change.queue as usize) < queues, &key("queue"), || {
                format!("queue {} out of range (the device has {queues})", change.queue)
            })?;
            ensure(change.cpu < cpus, &key("cpu"), || {
                format!("CPU {} out of range (the platform has {cpus})", change.cpu)
            })?;
            ensure(change.at_us.is_finite() && change.at_us >= 0.0, &key("at_us"), || {
                format!("must be a time from the start (got {})", Shown(change.at_us))
            })?;
        }
        Ok(())
    }
}

/// What Linux's TPH core holds for a device, as results report it.
#[derive(Debug, Clone, PartialEq)]
pub struct TphStatus {
    /// TPH is enabled (`pdev->tph_enabled`).
    pub enabled: bool,
    /// The mode the driver asked for.
    pub mode: TphMode,
    /// The negotiated request type (`Disabled` while TPH is off).
    pub request: RequesterEnable,
    /// Why TPH is off, when it is.
    pub reason_disabled: Option<String>,
}

/// One `pcie_tph_set_st_entry`: entry, tag, and the Requester Enable field read back while the tag
/// was written and after.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StWrite {
    pub index: usize,
    pub tag: u16,
    pub enable_during: RequesterEnable,
    pub enable_after: RequesterEnable,
}

/// A NIC's TPH: the device (configuration space, MSI-X table), the root port above it, Linux's
/// TPH state for it, and the driver's per-queue steering.
pub struct NicTph {
    spec: NicTphSpec,
    /// The device's configuration space: PCI Express and MSI-X capabilities, and the TPH
    /// Requester capability unless `capability = false`.
    pub config: ConfigSpace,
    /// The MSI-X table (device BAR memory): one vector per RX queue.
    pub msix: MsixTable,
    /// The root port above the device; its Device Capabilities 2 say what it completes.
    pub root_port: ConfigSpace,
    notph: bool,
    st_map: StMap,
    pub status: TphStatus,
    /// The ST mode Linux enabled (`pdev->tph_mode`).
    st_mode: StMode,
    /// First CPU of each RX queue's IRQ affinity.
    pub irq_cpu: Vec<u32>,
    /// The tag each RX queue's writes carry: its table entry, read when the queue (re)starts.
    latched: Vec<u16>,
    /// Affinity changes in time order; those before `next_change` are done.
    changes: Vec<AffinityChange>,
    next_change: usize,
    /// Every steering-table write, in order.
    pub st_writes: Vec<StWrite>,
    /// Whether each `DmaKind` carries a hint.
    carries: [bool; 3],
}

impl NicTph {
    /// The device and its driver for a validated spec, one RX queue per entry of `irq_cpus` (the
    /// first CPU of each queue's initial IRQ affinity). Runs the driver's IRQ setup: enable TPH,
    /// then program and start each queue.
    pub fn new(spec: &NicTphSpec, host: &TphHostSpec, st_map: StMap, irq_cpus: &[u32]) -> NicTph {
        let vectors = irq_cpus.len().clamp(1, spec.table_limit()) as u16;
        let mut msix = MsixCapability::new(MSIX_OFFSET, vectors, 0);
        msix.enabled = true;
        let mut device = DeviceBuilder::endpoint(NIC_ID.0, NIC_ID.1).msix(msix);
        if spec.capability {
            let location = match spec.st_table {
                StTable::Msix => StTableLocation::MsixTable,
                StTable::Capability => StTableLocation::InCapability,
            };
            let mut cap = TphCapability::new(TPH_OFFSET, location, vectors);
            cap.no_st = spec.supported_modes.contains(&TphMode::NoSt);
            cap.interrupt_vector = spec.supported_modes.contains(&TphMode::Iv);
            cap.device_specific = spec.supported_modes.contains(&TphMode::Ds);
            cap.extended_requester = spec.extended;
            device = device.tph(cap);
        }
        let completer = match host.completer {
            Completer::TphAndExtended => TphCompleter::TphAndExtended,
            Completer::TphOnly => TphCompleter::TphOnly,
            Completer::None => TphCompleter::None,
        };
        let mut changes = spec.affinity_changes.clone();
        changes.sort_by(|a, b| a.at_us.total_cmp(&b.at_us));
        let mut carries = [false; 3];
        for &kind in &spec.hints {
            carries[kind as usize] = true;
        }
        let mut tph = NicTph {
            spec: spec.clone(),
            config: device.build().expect("the synthesized device fits its configuration space"),
            msix: MsixTable::zeroed(vectors as usize),
            root_port: DeviceBuilder::root_port(ROOT_PORT_VENDOR, 0, completer).build().expect("a root port fits"),
            notph: host.notph,
            st_map,
            status: TphStatus {
                enabled: false,
                mode: spec.mode,
                request: RequesterEnable::Disabled,
                reason_disabled: None,
            },
            st_mode: StMode::NoSt,
            irq_cpu: irq_cpus.to_vec(),
            latched: vec![0; irq_cpus.len()],
            changes,
            next_change: 0,
            st_writes: Vec::new(),
            carries,
        };
        tph.setup();
        tph
    }

    /// The driver's IRQ setup (bnxt_request_irq): enable TPH in the requested mode, then give each
    /// RX queue the tag of its IRQ's first CPU and start it. A queue whose tag cannot be had or
    /// written is started with its entry as it is, as bnxt_en carries on after a warning.
    fn setup(&mut self) {
        let Some(mode) = self.spec.mode.st_mode() else {
            self.status.reason_disabled = Some("not requested (tph.mode = off)".into());
            return;
        };
        if let Err(reason) = self.enable(mode) {
            self.status.reason_disabled = Some(reason);
            return;
        }
        for queue in 0..self.irq_cpu.len() {
            if let Ok(tag) = self.get_cpu_st(self.irq_cpu[queue]) {
                let _ = self.set_st_entry(queue, tag);
            }
            self.start_queue(queue);
        }
    }

    fn capability(&self) -> Option<TphCapability> {
        decode(&self.config).ok().flatten()
    }

    /// `pcie_enable_tph`: fails under `pci=notph`, without a capability, when already enabled or
    /// when the capability lacks the mode. The request type is extended if the device is an
    /// extended requester, else TPH only, capped by the root port's completer support; none left
    /// fails. Writes the mode and request type into the control register.
    pub fn enable(&mut self, mode: StMode) -> Result<(), String> {
        if self.notph {
            return Err("pci=notph".into());
        }
        let cap = self.capability().ok_or("the device has no TPH Requester capability")?;
        if self.status.enabled {
            return Err("TPH is already enabled".into());
        }
        let supported = match mode {
            StMode::NoSt => cap.no_st,
            StMode::InterruptVector => cap.interrupt_vector,
            StMode::DeviceSpecific => cap.device_specific,
            StMode::Reserved(_) => false,
        };
        if !supported {
            return Err(format!("the device does not support ST mode `{}`", self.spec.mode.name()));
        }
        let device = if cap.extended_requester { RequesterEnable::TphAndExtended } else { RequesterEnable::TphOnly };
        let completer = tph_completer(&self.root_port).ok().flatten().unwrap_or(TphCompleter::None);
        let request = RequesterEnable::from_bits(device.bits().min(completer.bits()));
        if request == RequesterEnable::Disabled {
            return Err("the root port is not a TPH completer".into());
        }
        self.write_control(&cap, mode, request);
        self.status = TphStatus { enabled: true, request, reason_disabled: None, ..self.status.clone() };
        self.st_mode = mode;
        Ok(())
    }

    /// `pcie_disable_tph`: control register 0.
    pub fn disable(&mut self, reason: String) {
        if let Some(cap) = self.capability() {
            self.write_control(&cap, StMode::NoSt, RequesterEnable::Disabled);
        }
        self.status = TphStatus {
            enabled: false,
            request: RequesterEnable::Disabled,
            reason_disabled: Some(reason),
            ..self.status.clone()
        };
    }

    fn write_control(&mut self, cap: &TphCapability, mode: StMode, request: RequesterEnable) {
        let word =
            TphCapability { mode, requester_enable: request, ..cap.clone() }.control_word().expect("a defined mode");
        self.config
            .write_u32(cap.offset as usize + TPH_CONTROL as usize, word)
            .expect("the capability is in the space");
    }

    /// The Requester Enable field, read back through the codec.
    pub fn requester_enable(&self) -> RequesterEnable {
        self.capability().map_or(RequesterEnable::Disabled, |cap| cap.requester_enable)
    }

    /// `pcie_tph_get_cpu_st` for volatile memory: the tag of the negotiated width from the
    /// `_DSM` word of `cpu_uid` (0 if that width is not valid or TPH is not enabled).
    pub fn get_cpu_st(&self, cpu_uid: u32) -> Result<u16, String> {
        let word = self.st_map.dsm(cpu_uid).ok_or_else(|| format!("_DSM knows no CPU UID {cpu_uid}"))?;
        Ok(tag_from_dsm(word, self.status.request))
    }

    /// `pcie_tph_set_st_entry`: nothing to do in No-ST mode; otherwise clears Requester Enable
    /// (PCIe r6.2 sec. 6.17.3 advises against changing tags while it is set), writes the tag into
    /// the MSI-X Vector Control of entry `index` or the capability's table, and restores it. Any
    /// error disables TPH.
    pub fn set_st_entry(&mut self, index: usize, tag: u16) -> Result<(), String> {
        if !self.status.enabled {
            return Err("TPH is not enabled".into());
        }
        if self.st_mode == StMode::NoSt {
            return Ok(());
        }
        let cap = self.capability().expect("TPH is enabled, so the capability exists");
        self.write_control(&cap, self.st_mode, RequesterEnable::Disabled);
        let enable_during = self.requester_enable();
        let written = match cap.st_table_location {
            StTableLocation::MsixTable => self.msix.set_st(index, tag).map_err(|e| e.to_string()),
            StTableLocation::InCapability if index < cap.st_table_size as usize => {
                let at = cap.offset as usize + TPH_ST_TABLE as usize + 2 * index;
                self.config.write_u16(at, tag).map_err(|e| e.to_string())
            }
            StTableLocation::InCapability => {
                Err(format!("entry {index} is beyond the {}-entry ST table", cap.st_table_size))
            }
            location => Err(format!("nowhere to write a tag: {}", location.lspci_text())),
        };
        if let Err(error) = written {
            self.disable(format!("set_st_entry({index}): {error}"));
            return Err(error);
        }
        self.write_control(&cap, self.st_mode, self.status.request);
        self.st_writes.push(StWrite { index, tag, enable_during, enable_after: self.requester_enable() });
        Ok(())
    }

    /// ST entry `index` as the device holds it, read through the codec.
    pub fn st_entry(&self, index: usize) -> Option<u16> {
        let cap = self.capability()?;
        match cap.st_table_location {
            StTableLocation::MsixTable => self.msix.st(index).ok(),
            StTableLocation::InCapability => cap.st_entry(index),
            _ => None,
        }
    }

    /// RX queue `queue` (re)starts: the device reads the tag its writes will carry from the
    /// queue's entry (firmware applies a new tag only when the rings are allocated anew).
    pub fn start_queue(&mut self, queue: usize) {
        self.latched[queue] = self.st_entry(queue).unwrap_or(0);
    }

    /// The hint a write of `kind` on RX queue `queue` carries, if any.
    pub fn hint(&self, queue: usize, kind: DmaKind) -> Option<Hint> {
        if !self.status.enabled || !self.carries[kind as usize] {
            return None;
        }
        Some(match self.st_mode {
            StMode::NoSt => Hint::NoSt,
            _ => {
                Hint::Tag { st: self.latched[queue], extended: self.status.request == RequesterEnable::TphAndExtended }
            }
        })
    }

    /// The CPU RX queue `queue`'s tag names, as the I/O die decodes it; `None` without a tag (TPH
    /// off, No-ST mode) or for a tag naming no CPU.
    pub fn steering_cpu(&self, queue: usize) -> Option<u32> {
        let tagged = self.status.enabled && self.st_mode != StMode::NoSt;
        let extended = self.status.request == RequesterEnable::TphAndExtended;
        tagged.then(|| self.st_map.cpu_of(self.latched[queue], extended)).flatten()
    }

    /// When the next affinity change is due, if any.
    pub fn next_event(&self) -> Option<Time> {
        self.changes.get(self.next_change).map(|c| Time::from_us(c.at_us))
    }

    /// Applies the affinity changes due by `now` as bnxt_irq_affinity_notify does: the tag of the
    /// new mask's first CPU is written into the queue's entry, and the queue is to be restarted
    /// (returned, in order). Without TPH enabled there is no notifier: only the IRQ moves.
    pub fn affinity_changes_due(&mut self, now: Time) -> Vec<usize> {
        let mut restart = Vec::new();
        while let Some(change) = self.changes.get(self.next_change).filter(|c| Time::from_us(c.at_us) <= now).cloned() {
            self.next_change += 1;
            let queue = change.queue as usize;
            self.irq_cpu[queue] = change.cpu;
            if !self.status.enabled {
                continue;
            }
            let Ok(tag) = self.get_cpu_st(change.cpu) else { continue };
            if self.set_st_entry(queue, tag).is_ok() {
                restart.push(queue);
            }
        }
        restart
    }

    /// `enabled`, `mode`, `request_type`, `reason_disabled`, for results.
    pub fn report(&self, out: &mut Report) {
        let request = match self.status.request {
            RequesterEnable::Disabled => None,
            RequesterEnable::TphOnly => Some("tph_only"),
            RequesterEnable::TphAndExtended => Some("tph_and_extended"),
            RequesterEnable::Reserved => Some("reserved"),
        };
        out.put(&ENABLED, self.status.enabled);
        out.put(&MODE, self.status.mode.name());
        out.put(&REQUEST_TYPE, request);
        out.put(&REASON_DISABLED, self.status.reason_disabled.clone());
    }
}

stat!(ENABLED, "enabled", "bool", "whether Linux enabled TPH for the device");
stat!(MODE, "mode", "name", "the ST mode the driver asked for (off, no_st, iv, ds)");
stat!(REQUEST_TYPE, "request_type", "name", "the negotiated request type (null while TPH is off)");
stat!(REASON_DISABLED, "reason_disabled", "text", "why TPH is off, when it is");

#[cfg(test)]
mod tests {
    use super::*;

    /// 2 CCX x 4 cores, SMT 2: 16 CPUs; CPU n and n + 8 share core n.
    fn topology() -> TopologySpec {
        TopologySpec { sockets: 1, ccx_per_socket: 2, cores_per_ccx: 4, threads_per_core: 2 }
    }

    fn device(spec: NicTphSpec, host: TphHostSpec, irq_cpus: &[u32]) -> NicTph {
        let st_map = StMap::new(&host, &topology());
        NicTph::new(&spec, &host, st_map, irq_cpus)
    }

    fn iv() -> NicTphSpec {
        NicTphSpec { mode: TphMode::Iv, ..NicTphSpec::default() }
    }

    #[test]
    fn a_table_in_the_capability_holds_what_fits_in_config_space() {
        // 4 KiB of config space, the capability at 0x100, its table 0xC further, 2 bytes an entry.
        assert_eq!(MAX_CAPABILITY_ST_ENTRIES, (4096 - 256 - 12) / 2);
        let capability = NicTphSpec { st_table: StTable::Capability, ..iv() };
        capability.validate("tph", 1914, 16).unwrap();
        let error = capability.validate("tph", 1915, 16).unwrap_err();
        assert_eq!(
            error.to_string(),
            "tph.st_table: 1915 RX queues need 1915 ST entries; this table holds at most 1914"
        );
        NicTphSpec { st_table: StTable::Msix, ..iv() }.validate("tph", 2048, 16).unwrap();
    }

    #[test]
    fn the_dsm_word_carries_both_tags_and_their_valid_bits() {
        let word = dsm_word(Some(0x12), Some(0x3456));
        assert_eq!(word, 0x3456_1203);
        assert_eq!(tag_from_dsm(word, RequesterEnable::TphOnly), 0x12);
        assert_eq!(tag_from_dsm(word, RequesterEnable::TphAndExtended), 0x3456);
        // Before TPH is enabled the request type is 0: no tag.
        assert_eq!(tag_from_dsm(word, RequesterEnable::Disabled), 0);
        // A width that is not valid gives 0.
        let only16 = dsm_word(None, Some(0x0180));
        assert_eq!(only16, 0x0180_0002);
        assert_eq!(tag_from_dsm(only16, RequesterEnable::TphOnly), 0);
        assert_eq!(tag_from_dsm(only16, RequesterEnable::TphAndExtended), 0x0180);
        assert_eq!(tag_from_dsm(dsm_word(Some(0xAB), None), RequesterEnable::TphAndExtended), 0);
        // A tag field without its valid bit is not a tag, whatever it holds.
        assert_eq!(tag_from_dsm(0x0000_AB00, RequesterEnable::TphOnly), 0);
        assert_eq!(tag_from_dsm(0xCDEF_0000, RequesterEnable::TphAndExtended), 0);
    }

    #[test]
    fn the_st_map_publishes_apic_style_ids_and_the_io_die_inverts_them() {
        let t = topology();
        // CPU 9 is thread 1 of core 1: APIC-style id 0b11.
        assert_eq!(t.apic_id(9), 3);
        assert_eq!(t.apic_id(1), 2);
        let map = StMap::new(&TphHostSpec { st_base: 0x40, ..TphHostSpec::default() }, &t);
        assert_eq!(map.dsm(9), Some(dsm_word(Some(0x43), Some(0x43))));
        assert_eq!(map.cpu_of(0x43, false), Some(9));
        assert_eq!(map.cpu_of(0x43, true), Some(9));
        assert_eq!(map.cpu_of(0x3F, true), None);
        assert_eq!(map.dsm(16), None);
        // Tags above 255 have no 8-bit form.
        let high = StMap::new(&TphHostSpec { st_base: 0x100, ..TphHostSpec::default() }, &t);
        assert_eq!(high.dsm(0), Some(dsm_word(None, Some(0x100))));
        assert_eq!(high.cpu_of(0x00, false), None);
        assert_eq!(high.cpu_of(0x100, true), Some(0));
    }

    #[test]
    fn enabling_fails_cleanly_and_says_why() {
        let cases = [
            (iv(), TphHostSpec { notph: true, ..TphHostSpec::default() }, "pci=notph"),
            (NicTphSpec { capability: false, ..iv() }, TphHostSpec::default(), "no TPH Requester capability"),
            (
                NicTphSpec { supported_modes: vec![TphMode::NoSt], ..iv() },
                TphHostSpec::default(),
                "does not support ST mode `iv`",
            ),
            (iv(), TphHostSpec { completer: Completer::None, ..TphHostSpec::default() }, "not a TPH completer"),
            (NicTphSpec::default(), TphHostSpec::default(), "tph.mode = off"),
        ];
        for (spec, host, reason) in cases {
            let tph = device(spec, host, &[1, 2]);
            assert!(!tph.status.enabled, "{reason}");
            assert!(tph.status.reason_disabled.as_deref().unwrap().contains(reason), "{:?}", tph.status);
            assert_eq!(tph.requester_enable(), RequesterEnable::Disabled);
            assert_eq!(tph.hint(0, DmaKind::Payload), None);
            assert_eq!(tph.steering_cpu(0), None);
            assert!(tph.st_writes.is_empty());
        }
    }

    #[test]
    fn the_request_type_is_the_lesser_of_device_and_root_port() {
        let only = TphHostSpec { completer: Completer::TphOnly, ..TphHostSpec::default() };
        for (spec, host, request) in [
            (iv(), TphHostSpec::default(), RequesterEnable::TphAndExtended),
            (iv(), only.clone(), RequesterEnable::TphOnly),
            (NicTphSpec { extended: false, ..iv() }, TphHostSpec::default(), RequesterEnable::TphOnly),
        ] {
            let tph = device(spec, host, &[9]);
            assert_eq!(tph.status.request, request);
            assert_eq!(tph.requester_enable(), request);
            // The 8- or 16-bit tag of CPU 9 (APIC-style id 3) steers back to it.
            assert_eq!(tph.get_cpu_st(9), Ok(3));
            assert_eq!(tph.steering_cpu(0), Some(9));
            let extended = request == RequesterEnable::TphAndExtended;
            assert_eq!(tph.hint(0, DmaKind::Header), Some(Hint::Tag { st: 3, extended }));
        }
    }

    #[test]
    fn an_extended_tag_steers_by_its_16_bits() {
        // Tags from 0x100 up do not fit 8 bits: only the extended request type can carry them.
        let host = TphHostSpec { st_base: 0x100, ..TphHostSpec::default() };
        let tph = device(iv(), host, &[9]);
        assert_eq!(tph.status.request, RequesterEnable::TphAndExtended);
        assert_eq!(tph.get_cpu_st(9), Ok(0x103));
        assert_eq!(tph.steering_cpu(0), Some(9));
    }

    #[test]
    fn tags_are_written_to_the_msix_table_or_the_capability_with_the_requester_disabled() {
        for table in [StTable::Msix, StTable::Capability] {
            let tph = device(NicTphSpec { st_table: table, ..iv() }, TphHostSpec::default(), &[1, 2, 11]);
            let cap = decode(&tph.config).unwrap().unwrap();
            assert_eq!(cap.mode, StMode::InterruptVector);
            assert_eq!(cap.requester_enable, RequesterEnable::TphAndExtended);
            assert_eq!(cap.st_table_size, 3);
            for (queue, cpu) in [1, 2, 11].into_iter().enumerate() {
                let tag = tph.get_cpu_st(cpu).unwrap();
                let stored = match table {
                    StTable::Msix => tph.msix.st(queue).unwrap(),
                    StTable::Capability => cap.st_table[queue],
                };
                assert_eq!(stored, tag, "{table:?} queue {queue}");
                assert_eq!(tph.st_entry(queue), Some(tag));
            }
            match table {
                StTable::Msix => assert!(cap.st_table.is_empty()),
                StTable::Capability => assert_eq!(tph.msix.st_table(), vec![0, 0, 0]),
            }
            assert_eq!(tph.st_writes.len(), 3);
            for write in &tph.st_writes {
                assert_eq!(write.enable_during, RequesterEnable::Disabled);
                assert_eq!(write.enable_after, RequesterEnable::TphAndExtended);
            }
        }
    }

    #[test]
    fn no_st_mode_writes_no_tags_and_hints_without_one() {
        let tph = device(NicTphSpec { mode: TphMode::NoSt, ..NicTphSpec::default() }, TphHostSpec::default(), &[1]);
        assert!(tph.status.enabled);
        assert_eq!(decode(&tph.config).unwrap().unwrap().mode, StMode::NoSt);
        assert!(tph.st_writes.is_empty());
        assert_eq!(tph.hint(0, DmaKind::Payload), Some(Hint::NoSt));
        assert_eq!(tph.steering_cpu(0), None);
    }

    #[test]
    fn an_st_table_in_the_capability_takes_its_last_entry_and_refuses_the_next() {
        let mut tph = device(NicTphSpec { st_table: StTable::Capability, ..iv() }, TphHostSpec::default(), &[1, 2]);
        assert_eq!(tph.set_st_entry(1, 9), Ok(()));
        assert_eq!(tph.set_st_entry(2, 9), Err("entry 2 is beyond the 2-entry ST table".into()));
    }

    #[test]
    fn a_failed_tag_write_disables_tph() {
        let mut tph = device(NicTphSpec { st_table: StTable::Capability, ..iv() }, TphHostSpec::default(), &[1, 2]);
        assert_eq!(tph.set_st_entry(5, 7), Err("entry 5 is beyond the 2-entry ST table".into()));
        assert!(!tph.status.enabled);
        assert_eq!(tph.requester_enable(), RequesterEnable::Disabled);
        assert!(tph.status.reason_disabled.as_deref().unwrap().starts_with("set_st_entry(5)"));
        assert_eq!(tph.status.request, RequesterEnable::Disabled);
        // Enabled again, it has no reason to be off.
        tph.enable(StMode::InterruptVector).unwrap();
        assert!(tph.status.enabled && tph.status.reason_disabled.is_none(), "{:?}", tph.status);
    }

    #[test]
    fn an_affinity_change_rewrites_the_entry_and_the_restart_applies_it() {
        let spec = NicTphSpec {
            affinity_changes: vec![
                AffinityChange { queue: 1, at_us: 20.0, cpu: 6 },
                AffinityChange { queue: 0, at_us: 10.0, cpu: 5 },
            ],
            ..iv()
        };
        let mut tph = device(spec, TphHostSpec::default(), &[1, 2]);
        assert_eq!(tph.next_event(), Some(Time::from_us(10.0)));
        assert_eq!(tph.affinity_changes_due(Time::from_us(9.0)), Vec::<usize>::new());
        assert_eq!(tph.affinity_changes_due(Time::from_us(10.0)), vec![0]);
        assert_eq!(tph.irq_cpu, vec![5, 2]);
        assert_eq!(tph.st_entry(0), Some(tph.get_cpu_st(5).unwrap()));
        // The device keeps the old tag until the queue restarts.
        assert_eq!(tph.steering_cpu(0), Some(1));
        tph.start_queue(0);
        assert_eq!(tph.steering_cpu(0), Some(5));
        assert_eq!(tph.steering_cpu(1), Some(2));
        assert_eq!(tph.next_event(), Some(Time::from_us(20.0)));
        assert_eq!(tph.affinity_changes_due(Time::from_us(30.0)), vec![1]);
        assert_eq!(tph.next_event(), None);
    }

    #[test]
    fn the_host_side_is_listed_with_the_platform_parameters() {
        use crate::params::Describe;
        let docs = crate::platform::preset("turin-9655").unwrap().describe();
        for key in ["tph.completer", "tph.notph", "tph.st_base", "tph.st_8bit", "tph.st_16bit"] {
            let doc = docs.iter().find(|d| d.key == key).unwrap_or_else(|| panic!("{key} not listed"));
            assert!(!doc.meaning.is_empty());
        }
        assert_eq!(docs.iter().find(|d| d.key == "tph.completer").unwrap().value, "\"tph_and_extended\"");
    }

    #[test]
    fn without_tph_an_affinity_change_only_moves_the_irq() {
        let spec = NicTphSpec {
            capability: false,
            affinity_changes: vec![AffinityChange { queue: 0, at_us: 1.0, cpu: 3 }],
            ..iv()
        };
        let mut tph = device(spec, TphHostSpec::default(), &[1]);
        assert_eq!(tph.affinity_changes_due(Time::from_us(1.0)), Vec::<usize>::new());
        assert_eq!(tph.irq_cpu, vec![3]);
    }
}
