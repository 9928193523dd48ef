//! Devices that move data into and out of host memory, and where their writes land.

pub mod nic;
pub mod placement;
pub mod tph;
