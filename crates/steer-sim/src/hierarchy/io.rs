//! Device traffic: DMA writes carried out at the destination their placement chose (injection,
//! update in place, memory), and DMA reads served by a cache or memory.

use super::{Destination, Hierarchy, Requester};
use crate::directory::Holders;
use crate::platform::{InjectedInsertion, PartialWrite};
use crate::steering::Steered;
use crate::units::{Line, Time};

impl Hierarchy {
    /// Device `device` writes a whole line; `destination` comes from its placement policy.
    ///
    /// Way masks (SDCIAE, resctrl `io_alloc`): every allocation this write causes uses the
    /// device's mask, so an L3 injection allocates in the device's L3 ways, and so do the victims
    /// an L2 injection pushes into the L3. The sources do not say how `io_alloc` treats
    /// L2-injected lines; the model assumes that a line injected into an L2 and evicted later by
    /// the core's own activity is allocated in the L3 under the core's mask: only evictions
    /// caused by the injecting write itself use the device's mask.
    pub fn dma_write(&mut self, device: u32, line: Line, destination: Destination, now: Time) {
        let cores = self.topology.cores();
        let holders = self.holders(line);
        let traffic = &mut self.stats.devices[device as usize];
        traffic.writes += 1;
        if holders.iter().any(|h| h >= cores) {
            traffic.write_llc_hits += 1;
        } else if !holders.is_empty() {
            traffic.write_private_hits += 1;
        }
        self.place_write(device, line, holders, destination, now);
    }

    /// Device `device` writes part of a line (the end of a packet or of a segment, a completion
    /// entry smaller than a line), as the platform's I/O stack treats such writes
    /// (`io.partial_write`): a line in no cache is read from memory first under `rfo` and
    /// `memory`, and `memory` writes the merged line there whatever `destination` says.
    pub fn dma_write_partial(&mut self, device: u32, line: Line, destination: Destination, now: Time) {
        let holders = self.holders(line);
        let traffic = &mut self.stats.devices[device as usize];
        traffic.partial_writes += 1;
        if self.partial_write != PartialWrite::Merge && holders.is_empty() {
            traffic.partial_write_reads += 1;
            self.memory.read(line, now);
        }
        let destination = if self.partial_write == PartialWrite::Memory { Destination::Memory } else { destination };
        self.place_write(device, line, holders, destination, now);
    }

    /// Carries out a device's write of a line that `holders` hold.
    pub(super) fn place_write(
        &mut self,
        device: u32,
        line: Line,
        holders: Holders,
        destination: Destination,
        now: Time,
    ) {
        let by = Requester::Device(device);
        self.stats.line_ops += 1;
        let cores = self.topology.cores();
        let destination = match destination {
            Destination::L3Of { cpu } => Destination::L3 { ccx: self.ccx_of_cpu(cpu) },
            other => other,
        };
        match destination {
            Destination::Memory => self.write_to_memory(line, holders, now),
            Destination::L2 { cpu } => {
                let core = self.core_of_cpu[cpu as usize];
                if !self.steering.is_empty() {
                    let ccx = self.ccx_of(core);
                    if let Steered::ToMemory { fetch_at } = self.steering[ccx as usize].steer(now) {
                        self.steer_through_memory(by, core, line, holders, now, fetch_at);
                        return;
                    }
                }
                // An inclusive L3 keeps a copy of what its CCX's L2s hold, an injected line too.
                let own_l3 = self.inclusive_l3_of(core);
                for holder in holders.iter().filter(|&h| h != core && Some(h) != own_l3) {
                    self.drop_copy(holder, line, now);
                }
                let ccx = self.ccx_of(core);
                if own_l3.is_some() && !self.l3[ccx as usize].contains(line) {
                    self.l3_install(by, ccx, line, false, now);
                }
                // The core's L1 copy is stale; the next load refills it from L2.
                self.l1[core as usize].remove(line);
                // A write to a present line updates it in place. Injected lines entering as
                // most recently used, it is a use; entering where replacement evicts next, it
                // leaves the line where it is: only a core's use moves it (a line written in
                // two parts, at a segment boundary, is not promoted by the second).
                let present = match self.l2_injected_insertion {
                    InjectedInsertion::Mru => self.l2[core as usize].access(line, true).hit(),
                    InjectedInsertion::Lru => self.l2[core as usize].mark_dirty(line),
                };
                if !present {
                    self.fill_l2_injected(by, core, line, true, now);
                }
                self.dir_add(line, core);
                self.stats.dma_lines_to_cache += 1;
            }
            Destination::L3 { ccx } => {
                let id = self.l3_id(ccx);
                let used_by_cores = holders.iter().any(|h| h < cores);
                for holder in holders.iter().filter(|&h| h != id) {
                    self.drop_copy(holder, line, now);
                }
                // A write hit updates in place (a use) and never allocates. A line taken from a
                // core's caches goes to the ways of lines cores use, where there are such.
                if !self.l3[ccx as usize].access(line, true).hit() {
                    if used_by_cores && self.inclusive_mask != 0 {
                        self.l3_install_in(by, ccx, line, true, self.inclusive_mask, now);
                    } else {
                        self.l3_install(by, ccx, line, true, now);
                    }
                }
                self.stats.dma_lines_to_cache += 1;
            }
            Destination::UpdateIfCached => {
                // The copy kept is the first holder: a core's private caches before any L3.
                let Some(keep) = holders.iter().next() else {
                    return self.write_to_memory(line, holders, now);
                };
                // A core's copy keeps its CCX's inclusive L3 copy with it.
                let keep_l3 = if keep < cores { self.inclusive_l3_of(keep) } else { None };
                for holder in holders.iter().filter(|&h| h != keep && Some(h) != keep_l3) {
                    self.drop_copy(holder, line, now);
                }
                if keep >= cores {
                    self.l3[(keep - cores) as usize].access(line, true);
                } else if self.l2[keep as usize].access(line, true).hit() {
                    // As for an L2 injection, the L1 copy is stale and the next load refills it.
                    self.l1[keep as usize].remove(line);
                } else {
                    // Only in the L1 of a core whose L2 is not inclusive: update it there.
                    self.l1[keep as usize].access(line, true);
                }
                self.stats.dma_lines_to_cache += 1;
            }
            Destination::L3Of { .. } => unreachable!("resolved to L3 above"),
        }
    }

    /// A line steered into `core`'s L2 that found the fabric's queue full: it is written to
    /// memory, cached copies dropped, and the L2 fetches it from there at `fetch_at`, clean, where
    /// an injected line would have entered its replacement order.
    pub(super) fn steer_through_memory(
        &mut self,
        by: Requester,
        core: u32,
        line: Line,
        holders: Holders,
        now: Time,
        fetch_at: Time,
    ) {
        self.write_to_memory(line, holders, now);
        self.memory.read(line, fetch_at);
        if self.inclusive_l3_of(core).is_some() {
            self.l3_install(by, self.ccx_of(core), line, false, now);
        }
        self.fill_l2_injected(by, core, line, false, now);
        self.stats.steered_through_memory += 1;
    }

    /// A device's write of a whole line to memory: cached copies are dropped, dirty or not.
    pub(super) fn write_to_memory(&mut self, line: Line, holders: Holders, now: Time) {
        for holder in holders.iter() {
            self.drop_copy(holder, line, now);
        }
        self.memory.write(line, now);
        self.stats.dma_lines_to_memory += 1;
    }

    /// Fills `core`'s L2 with a line a device placed there, where injected lines enter its
    /// replacement order.
    pub(super) fn fill_l2_injected(&mut self, by: Requester, core: u32, line: Line, dirty: bool, now: Time) {
        self.fill_l2(by, core, line, dirty, now);
        if self.l2_injected_insertion == InjectedInsertion::Lru {
            self.l2[core as usize].demote(line);
        }
    }

    /// Device `device` reads a line (TX DMA, descriptor fetch): served by any cache holding it
    /// (without allocating), else by memory. Returns how long the host takes to supply it: the
    /// L3's latency from an L3, the memory's idle latency from a core's private caches, the
    /// memory's (queueing included) from memory.
    pub fn dma_read(&mut self, device: u32, line: Line, now: Time) -> Time {
        self.stats.line_ops += 1;
        self.stats.devices[device as usize].reads += 1;
        let holders = self.holders(line);
        if !holders.is_empty() {
            self.stats.dma_reads_from_cache += 1;
            self.stats.devices[device as usize].read_cache_hits += 1;
            // A line only a core's private caches hold is taken from there by a snoop, which
            // costs about what the memory's latency does (Double Trouble, on Skylake-SP).
            let cores = self.topology.cores();
            if holders.iter().any(|id| id >= cores) {
                self.latency.l3
            } else {
                self.stats.devices[device as usize].read_private_hits += 1;
                self.memory.idle_latency()
            }
        } else {
            self.stats.dma_reads_from_memory += 1;
            self.memory.read(line, now)
        }
    }
}
