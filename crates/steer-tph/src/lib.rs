//! Codec for the PCIe TPH (TLP Processing Hints) Requester Extended Capability.
//!
//! The crate works on a captured or synthesized PCI configuration space
//! ([`ConfigSpace`]) and never touches hardware. It covers:
//!
//! * walking the standard and extended capability lists, reporting damaged
//!   lists (loops, bad pointers, truncated dumps) as errors instead of
//!   panicking or looping ([`caps`]);
//! * decoding and re-encoding the TPH Requester capability byte-exactly
//!   ([`tph`]);
//! * steering tags kept in the MSI-X table ([`msix`]);
//! * the root port's TPH Completer support from Device Capabilities 2
//!   ([`pcie`]);
//! * reading `lspci -vv` text and printing an lspci-like view ([`lspci`]);
//! * synthesizing config spaces for tests and simulation ([`synth`]).
//!
//! All multi-byte registers are little-endian, as in PCI configuration space.

#![warn(missing_docs)]

pub mod caps;
pub mod config;
pub mod error;
pub mod lspci;
pub mod msix;
pub mod pcie;
pub mod report;
pub mod synth;
pub mod tph;

pub use caps::{
    ext_caps, find_ext_cap, find_std_cap, list_ext_caps, list_std_caps, std_caps, CapError, ExtCapHeader, StdCapHeader,
};
pub use config::{ConfigError, ConfigSpace, HexError, HexLineError};
pub use error::{Result, TphError};
pub use lspci::{format_lspci_like, parse_lspci_devices, parse_lspci_vv, LspciError, LspciTph};
pub use msix::{encode_msix, find_msix, msix_st, with_msix_st, MsixCapability, MsixTable};
pub use pcie::{find_pcie, tph_completer, PcieCapability, TphCompleter};
pub use tph::{
    decode, decode_at, encode, st_lower, st_upper, st_word, RequesterEnable, StMode, StTableLocation, TphCapability,
};
