//! A device's PCIe link to the root complex, one direction each way. Every transfer crosses it
//! as transaction-layer packets (TLPs): DMA writes go up in TLPs of at most the maximum payload;
//! DMA reads send requests up (no data, at most the maximum read request each) and take their
//! data down in completions the root complex splits at its read completion boundary. Each TLP
//! costs its header and 8 B of framing, sequence number and LCRC besides its data (a 3-DW header
//! and no ECRC make 20 B: Intel's PCIe throughput notes).
//! DLLPs (acknowledgements, flow-control updates) are left out. A direction carries one TLP at a
//! time at the link's rate, so a transfer waits for the ones before it; a received packet that
//! would wait longer than the device's buffer can hold is dropped at the device.

use crate::error::{ensure, ConfigResult, Shown};
use crate::params::params;
use crate::units::{Addr, Time};

/// Framing, sequence number and LCRC of each TLP.
const LINK_BYTES_PER_TLP: u64 = 8;
/// A memory request's header with a 64-bit address (4 DW).
const REQUEST_HEADER_BYTES: u64 = 16;
/// A completion's header (3 DW).
const COMPLETION_HEADER_BYTES: u64 = 12;
/// Where a descriptor is read from, for counting its completions: descriptors are naturally
/// aligned, so one read completes in one TLP.
const DESCRIPTOR: Addr = Addr(0);

/// Twice PCIe 7.0's 128 GT/s: room for what comes next, not for a typo.
const MAX_GTS: f64 = 256.0;
/// Below PCIe 1.0's 2.5 GT/s, with room for a deliberately slow link; a slower one is a typo.
const MIN_GTS: f64 = 1.0;

params! {
    /// The device's PCIe link.
    pub struct PcieSpec {
        /// Transfer rate per lane in GT/s: 8 for Gen3, 16 for Gen4, 32 for Gen5 (0: the link is
        /// not modelled and never limits the device).
        gts: f64 = 0.0,
        /// Lanes of the link.
        lanes: u32 = 16,
        /// Largest payload of a write TLP (the negotiated Max_Payload_Size).
        max_payload_bytes: u32 = 256,
        /// Largest read request (Max_Read_Request_Size).
        max_read_request_bytes: u32 = 512,
        /// The root complex's read completion boundary: read data comes back in completions
        /// split at these aligned boundaries (64 or 128 B for a root complex).
        read_completion_boundary_bytes: u32 = 64,
        /// The device's buffer for received packets waiting for the link (KiB).
        rx_buffer_kib: f64 = 256.0,
    }
}

impl PcieSpec {
    pub fn validate(&self, path: &str) -> ConfigResult<()> {
        let key = |k: &str| format!("{path}.{k}");
        ensure(self.gts == 0.0 || (MIN_GTS..=MAX_GTS).contains(&self.gts), &key("gts"), || {
            format!("must be 0 (no link modelled) or {MIN_GTS} to {MAX_GTS} GT/s (got {})", Shown(self.gts))
        })?;
        ensure([1, 2, 4, 8, 16, 32].contains(&self.lanes), &key("lanes"), || {
            format!("a link has 1, 2, 4, 8, 16 or 32 lanes (got {})", self.lanes)
        })?;
        for (name, bytes) in [
            ("max_payload_bytes", self.max_payload_bytes),
            ("max_read_request_bytes", self.max_read_request_bytes),
            ("read_completion_boundary_bytes", self.read_completion_boundary_bytes),
        ] {
            ensure(bytes.is_power_of_two() && (64..=4096).contains(&bytes), &key(name), || {
                format!("must be a power of two from 64 to 4096 (got {bytes})")
            })?;
        }
        ensure(self.rx_buffer_kib >= 0.0, &key("rx_buffer_kib"), || "must not be negative".into())
    }

    /// Read requests a DMA read of `bytes` takes (at most `max_read_request_bytes` each).
    pub fn read_requests(&self, bytes: u32) -> u64 {
        tlps(bytes, self.max_read_request_bytes)
    }

    /// Data bytes a direction carries per ns: 128b/130b encoding from Gen3 (8 GT/s) on, 8b/10b
    /// before.
    fn bytes_per_ns(&self) -> f64 {
        let encoding = if self.gts >= 8.0 { 128.0 / 130.0 } else { 0.8 };
        self.gts * self.lanes as f64 * encoding / 8.0
    }
}

/// TLPs of at most `chunk` bytes carrying `bytes`.
fn tlps(bytes: u32, chunk: u32) -> u64 {
    bytes.max(1).div_ceil(chunk) as u64
}

/// TLPs covering `bytes` from `addr` split at `chunk`-aligned boundaries.
fn aligned_tlps(addr: Addr, bytes: u32, chunk: u32) -> u64 {
    let chunk = chunk as u64;
    (addr.0 + bytes.max(1) as u64 - 1) / chunk - addr.0 / chunk + 1
}

/// One direction of the link: when it has sent everything queued on it so far.
#[derive(Debug, Clone, Copy, Default)]
struct Direction {
    free_at: Time,
}

impl Direction {
    /// Queues `bytes` at `now`; returns when they are across.
    fn send(&mut self, now: Time, bytes: u64, bytes_per_ns: f64) -> Time {
        self.free_at = self.free_at.max(now) + Time::from_ns(bytes as f64 / bytes_per_ns);
        self.free_at
    }
}

/// A device's link in use.
#[derive(Debug, Clone)]
pub struct PcieLink {
    spec: PcieSpec,
    bytes_per_ns: f64,
    upstream: Direction,
    downstream: Direction,
}

impl PcieLink {
    pub fn new(spec: &PcieSpec) -> PcieLink {
        PcieLink {
            spec: spec.clone(),
            bytes_per_ns: spec.bytes_per_ns(),
            upstream: Direction::default(),
            downstream: Direction::default(),
        }
    }

    fn modelled(&self) -> bool {
        self.bytes_per_ns > 0.0
    }

    /// Bytes on the link of a DMA write of `bytes`.
    fn write_bytes(&self, bytes: u32) -> u64 {
        bytes as u64 + tlps(bytes, self.spec.max_payload_bytes) * (REQUEST_HEADER_BYTES + LINK_BYTES_PER_TLP)
    }

    /// Bytes on the link of the requests of a DMA read of `bytes` (upstream).
    fn request_bytes(&self, bytes: u32) -> u64 {
        self.spec.read_requests(bytes) * (REQUEST_HEADER_BYTES + LINK_BYTES_PER_TLP)
    }

    /// Bytes on the link of the completions of a DMA read of `bytes` at `addr` (downstream).
    fn completion_bytes(&self, addr: Addr, bytes: u32) -> u64 {
        let tlps = aligned_tlps(addr, bytes, self.spec.read_completion_boundary_bytes);
        bytes as u64 + tlps * (COMPLETION_HEADER_BYTES + LINK_BYTES_PER_TLP)
    }

    /// A received packet at `now`: the device fetches the RX descriptor (`descriptor_bytes`),
    /// then writes the packet's `writes` (bytes each) up the link. Returns how long they wait
    /// behind earlier traffic, or `None` (dropped, nothing sent) when the device's buffer
    /// cannot hold what is already waiting.
    pub fn receive(&mut self, now: Time, descriptor_bytes: u32, writes: &[u32]) -> Option<Time> {
        if !self.modelled() {
            return Some(Time::ZERO);
        }
        let wait = self.upstream.free_at.max(now) - now;
        if wait.as_ns() * self.bytes_per_ns > self.spec.rx_buffer_kib * 1024.0 {
            return None;
        }
        self.downstream.send(now, self.completion_bytes(DESCRIPTOR, descriptor_bytes), self.bytes_per_ns);
        let up =
            self.request_bytes(descriptor_bytes) + writes.iter().map(|&bytes| self.write_bytes(bytes)).sum::<u64>();
        self.upstream.send(now, up, self.bytes_per_ns);
        Some(wait)
    }

    /// The device reads a packet of `bytes` at `addr` for TX at `now`, after its descriptor
    /// (`descriptor_bytes`): requests go up, data comes down. Returns when the last completion
    /// has arrived (`now` if the link is not modelled).
    pub fn transmit(&mut self, now: Time, descriptor_bytes: u32, addr: Addr, bytes: u32) -> Time {
        if !self.modelled() {
            return now;
        }
        let up = self.request_bytes(descriptor_bytes) + self.request_bytes(bytes);
        self.upstream.send(now, up, self.bytes_per_ns);
        let down = self.completion_bytes(DESCRIPTOR, descriptor_bytes) + self.completion_bytes(addr, bytes);
        self.downstream.send(now, down, self.bytes_per_ns)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gen3_x16() -> PcieSpec {
        PcieSpec { gts: 8.0, ..PcieSpec::default() }
    }

    #[test]
    fn tlps_carry_at_most_a_chunk_and_completions_split_at_aligned_boundaries() {
        assert_eq!((tlps(256, 256), tlps(257, 256), tlps(0, 256)), (1, 2, 1));
        assert_eq!(aligned_tlps(Addr(0), 256, 256), 1);
        assert_eq!(aligned_tlps(Addr(128), 256, 256), 2, "an unaligned 256 B read crosses one boundary");
        assert_eq!(aligned_tlps(Addr(64), 1500, 64), 24);
        assert_eq!(aligned_tlps(Addr(0), 0, 64), 1);
    }

    #[test]
    fn gen3_x16_carries_15_75_bytes_per_ns_and_gen2_loses_a_fifth_to_encoding() {
        assert!((gen3_x16().bytes_per_ns() - 15.753_846).abs() < 1e-6);
        let gen2 = PcieSpec { gts: 5.0, lanes: 8, ..PcieSpec::default() };
        assert!((gen2.bytes_per_ns() - 4.0).abs() < 1e-12);
    }

    #[test]
    fn a_tx_read_of_1500_bytes_takes_24_completions_down_and_3_requests_up() {
        let mut link = PcieLink::new(&PcieSpec { gts: 8.0, lanes: 1, ..PcieSpec::default() });
        let rate = link.bytes_per_ns;
        // Descriptor: 16 B in one completion (12 + 8 B); data: 1500 B in 24 completions of 20 B
        // overhead each; requests: one for the descriptor, three of 512 B for the data, 24 B each.
        let done = link.transmit(Time::ZERO, 16, Addr(0x1040), 1500);
        assert_eq!(done, Time::from_ns((16.0 + 20.0 + 1500.0 + 24.0 * 20.0) / rate));
        assert_eq!(link.upstream.free_at, Time::from_ns(4.0 * 24.0 / rate));
    }

    #[test]
    fn transfers_queue_behind_each_other_and_an_idle_link_starts_at_once() {
        let mut link = PcieLink::new(&gen3_x16());
        let first = link.transmit(Time::ZERO, 16, Addr(0), 64);
        let second = link.transmit(Time::ZERO, 16, Addr(0), 64);
        assert_eq!(second - first, first, "the second waits for the first");
        let later = Time::from_ns(1000.0);
        assert_eq!(link.transmit(later, 16, Addr(0), 64) - later, first);
    }

    #[test]
    fn a_packet_waits_behind_earlier_writes_and_is_dropped_when_the_buffer_is_full() {
        let mut link = PcieLink::new(&PcieSpec { gts: 8.0, lanes: 1, rx_buffer_kib: 2.0, ..PcieSpec::default() });
        let rate = link.bytes_per_ns;
        let packet = [1024, 64];
        assert_eq!(link.receive(Time::ZERO, 16, &packet), Some(Time::ZERO));
        // 24 B of descriptor request, 1024 B in four 256 B writes and one 64 B completion entry,
        // 24 B of overhead each: 1232 B already waiting.
        let waiting = Time::from_ns((24.0 + 1024.0 + 64.0 + 5.0 * 24.0) / rate);
        assert_eq!(link.receive(Time::ZERO, 16, &packet), Some(waiting));
        assert_eq!(link.receive(Time::ZERO, 16, &packet), None, "2464 B waiting exceed the 2 KiB buffer");
        assert_eq!(link.receive(waiting + waiting, 16, &packet), Some(Time::ZERO));
    }

    #[test]
    fn a_packet_behind_exactly_a_full_buffer_is_taken_and_one_byte_more_is_dropped() {
        // Gen2 x1 carries 0.5 B/ns exactly; the first packet leaves 1232 B waiting (as above).
        for (buffer_bytes, taken) in [(1232.0, true), (1231.0, false)] {
            let spec = PcieSpec { gts: 5.0, lanes: 1, rx_buffer_kib: buffer_bytes / 1024.0, ..PcieSpec::default() };
            let mut link = PcieLink::new(&spec);
            link.receive(Time::ZERO, 16, &[1024, 64]);
            let expected = taken.then(|| Time::from_ns(1232.0 / 0.5));
            assert_eq!(link.receive(Time::ZERO, 16, &[1024, 64]), expected, "buffer of {buffer_bytes} B");
        }
    }

    #[test]
    fn an_unmodelled_link_never_delays_or_drops() {
        let mut link = PcieLink::new(&PcieSpec::default());
        for _ in 0..1000 {
            assert_eq!(link.receive(Time::ZERO, 16, &[4096]), Some(Time::ZERO));
        }
        assert_eq!(link.transmit(Time::ZERO, 16, Addr(0), 4096), Time::ZERO);
    }

    #[test]
    fn bad_link_settings_are_named() {
        let error = PcieSpec { max_payload_bytes: 300, ..gen3_x16() }.validate("devices.0.pcie").unwrap_err();
        assert!(error.to_string().contains("devices.0.pcie.max_payload_bytes"), "{error}");
        for (gts, shown) in [(-1.0, "-1"), (1e-30, "1e-30"), (0.99, "0.99"), (256.1, "256.1")] {
            let error = PcieSpec { gts, ..gen3_x16() }.validate("devices.0.pcie").unwrap_err();
            let expected = format!("devices.0.pcie.gts: must be 0 (no link modelled) or 1 to 256 GT/s (got {shown})");
            assert_eq!(error.to_string(), expected);
        }
        for gts in [0.0, 1.0, 2.5] {
            assert!(PcieSpec { gts, ..gen3_x16() }.validate("p").is_ok(), "{gts} GT/s");
        }
        for (lanes, fine) in [(0, false), (1, true), (3, false), (32, true), (64, false)] {
            assert_eq!(PcieSpec { lanes, ..gen3_x16() }.validate("p").is_ok(), fine, "x{lanes}");
        }
        assert!(PcieSpec { gts: 256.0, ..gen3_x16() }.validate("p").is_ok());
    }
}
