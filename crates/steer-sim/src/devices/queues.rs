//! The host side of a device kind's queues, kept in one registry per kind (`Queues`): every queue
//! of the kind, its id its index, and each device's queues by device name. A device kind with
//! queues (the NIC's RX rings, the NVMe queue pairs) declares its queue and id types here
//! (`Queue`, `QueueId`); programs take completions from any of them alike (`CompletionQueue`).
//! Also what every device with host queues checks alike (`QueueHost`).

use crate::devices::pcie::PcieSpec;
use crate::devices::placement::{self, PlacementSpec};
use crate::engine::{Facility, Signal};
use crate::error::{ensure, ConfigError, ConfigResult};
use crate::platform::PlatformSpec;
use crate::system::Builder;
use crate::units::Time;

/// One queue of a device kind, as its registry holds it.
pub trait Queue: 'static {
    /// The id devices and programs hold the queue by.
    type Id: QueueId<Queue = Self>;
    /// Zeroes its statistics at the end of the warm-up.
    fn reset_stats(&mut self);
}

/// A queue's index among the queues of its kind.
pub trait QueueId: Copy {
    type Queue: Queue<Id = Self>;
    fn new(index: u32) -> Self;
    fn index(self) -> usize;
}

/// A queue whose consumer takes completions in the order written, each visible from a time.
pub trait CompletionQueue: Queue {
    type Completion;
    /// When the first completion becomes visible to the consumer, if there is one.
    fn first_visible(&self) -> Option<Time>;
    /// Takes the first completion out of the queue.
    fn take_first(&mut self) -> Self::Completion;
    /// Notified when a completion becomes visible.
    fn ready(&self) -> Signal;
}

/// Every queue of one kind, shared by the devices and the programs that use them (indexed by
/// the kind's id), with each device's queues by device name.
#[derive(Debug)]
pub struct Queues<Q: Queue> {
    queues: Vec<Q>,
    of_device: Vec<(String, Vec<Q::Id>)>,
}

impl<Q: Queue> Default for Queues<Q> {
    fn default() -> Self {
        Queues { queues: Vec::new(), of_device: Vec::new() }
    }
}

impl<Q: Queue> Facility for Queues<Q> {
    fn reset_stats(&mut self, _now: Time) {
        self.queues.iter_mut().for_each(Q::reset_stats);
    }
}

impl<Q: Queue> std::ops::Deref for Queues<Q> {
    type Target = [Q];
    fn deref(&self) -> &[Q] {
        &self.queues
    }
}

impl<Q: Queue> std::ops::DerefMut for Queues<Q> {
    fn deref_mut(&mut self) -> &mut [Q] {
        &mut self.queues
    }
}

impl<Q: Queue> Queues<Q> {
    /// Adds a queue of device `device`.
    pub fn add(&mut self, device: &str, queue: Q) -> Q::Id {
        let id = Q::Id::new(self.queues.len() as u32);
        self.queues.push(queue);
        match self.of_device.iter_mut().find(|(name, _)| name == device) {
            Some((_, ids)) => ids.push(id),
            None => self.of_device.push((device.to_string(), vec![id])),
        }
        id
    }

    /// The queues of device `device`, in the order added (none for a device without).
    pub fn of(&self, device: &str) -> &[Q::Id] {
        self.of_device.iter().find(|(name, _)| name == device).map_or(&[], |(_, ids)| ids.as_slice())
    }
}

/// The queues as device and workload kinds build with them.
impl Builder<'_> {
    /// Adds a queue of device `device`.
    pub fn add_queue<Q: Queue>(&mut self, device: &str, queue: Q) -> Q::Id {
        self.facility::<Queues<Q>>().add(device, queue)
    }

    /// The queues of kind `Q` of device `device` (validation has checked that it exists).
    pub fn queues_of<Q: Queue>(&self, device: &str) -> &[Q::Id] {
        self.try_facility::<Queues<Q>>().map_or(&[], |queues| queues.of(device))
    }

    /// Every queue of kind `Q`.
    pub fn queues<Q: Queue>(&self) -> &[Q] {
        self.try_facility::<Queues<Q>>().map_or(&[], |queues| queues)
    }

    pub fn queue<I: QueueId>(&self, id: I) -> &I::Queue {
        &self.queues::<I::Queue>()[id.index()]
    }
}

/// How a device with host queues is named in messages, for the checks every such device makes.
#[derive(Debug, Clone, Copy)]
pub struct QueueHost {
    /// What the device is (`a NIC`).
    pub device: &'static str,
    /// What one of its queues is (`queue`, `queue pair`).
    pub queue: &'static str,
}

impl QueueHost {
    /// Checks what comes before the queues: the device's NUMA node exists, it has `entries` queue
    /// entries (at least one), its placement's CPU and policy suit the platform, its PCIe link
    /// is one. Errors name keys below `path`.
    pub fn check_device(
        &self,
        path: &str,
        platform: &PlatformSpec,
        numa_node: u32,
        entries: usize,
        placement: &PlacementSpec,
        pcie: &PcieSpec,
    ) -> ConfigResult<()> {
        let cpus = platform.topology.cpus();
        let nodes = platform.memory.nodes(&platform.topology);
        let key = |k: &str| format!("{path}.{k}");
        ensure(numa_node < nodes, &key("numa_node"), || {
            format!("node {numa_node} does not exist (the platform has {nodes})")
        })?;
        ensure(entries > 0, &key("queues"), || format!("{} needs at least one {}", self.device, self.queue))?;
        if let Some(cpu) = placement.cpu {
            ensure(cpu < cpus, &key("placement.cpu"), || format!("CPU {cpu} out of range (the platform has {cpus})"))?;
        }
        let policy = placement::find(placement, &key("placement"))?;
        (policy.check)(platform).map_err(|m| ConfigError::new(key("placement.policy"), m))?;
        pcie.validate(&key("pcie"))
    }

    /// Checks a queue entry at `path` standing for `count` queues consumed by the CPUs from
    /// `consumer_cpu` up, on a platform of `cpus` CPUs.
    pub fn check_entry(&self, path: &str, consumer_cpu: u32, count: u32, cpus: u32) -> ConfigResult<()> {
        let key = |k: &str| format!("{path}.{k}");
        ensure(count >= 1, &key("count"), || "must be at least 1".into())?;
        ensure(consumer_cpu < cpus, &key("consumer_cpu"), || {
            format!("CPU {consumer_cpu} out of range (the platform has {cpus})")
        })?;
        let last_cpu = consumer_cpu as u64 + count as u64 - 1;
        ensure(last_cpu < cpus as u64, &key("count"), || {
            format!(
                "{count} {}s from consumer_cpu {consumer_cpu} need CPUs up to {last_cpu}, out of range (the platform has {cpus})",
                self.queue
            )
        })
    }
}
