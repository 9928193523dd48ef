//! PCIe TPH codec (see README).
