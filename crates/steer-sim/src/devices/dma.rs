//! What an inbound DMA write is, below both the placement policies that decide where it lands and
//! the TPH state that sets its hint.

use crate::params::choice;

choice! {
    /// What a DMA write carries, so a policy (or a driver choosing hints) can treat kinds apart.
    pub enum DmaKind {
        /// The first line of a packet (protocol headers).
        Header,
        /// The rest of the packet.
        Payload,
        /// A completion (event) entry telling the driver a packet arrived.
        Completion,
    }
}

/// The TLP Processing Hint a write carries (PCIe TPH), as the device's TPH state sets it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Hint {
    /// A hint without a steering tag (No-ST mode).
    NoSt,
    /// A steering tag: 8 bits, or 16 with extended TPH.
    Tag { st: u16, extended: bool },
}
