//! `l2`: every write goes into one core's L2, the SDCI mechanism without the TPH stack (the
//! `inject` policy at level `l2`).

use super::inject::Inject;
use super::{any_platform, InjectLevel, PolicyInfo};

/// The kind's registration.
#[linkme::distributed_slice(super::POLICIES)]
pub static KIND: PolicyInfo = PolicyInfo {
    name: "l2",
    description: "inject every write into one core's L2 (the SDCI mechanism; inject at level l2)",
    check: any_platform,
    build: |spec, _| Box::new(Inject { level: InjectLevel::L2, cpu: spec.cpu }),
};
