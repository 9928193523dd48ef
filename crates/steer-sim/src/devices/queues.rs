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

/// A queue's index among the queues of its kind (declared with `queue_id!`).
pub trait QueueId: Copy {
    type Queue: Queue<Id = Self>;
    fn new(index: u32) -> Self;
    fn index(self) -> usize;
}

/// Declares the id type of a kind of queue: `queue_id!(/** doc */ pub struct RingId for RxRing);`.
macro_rules! queue_id {
    ($(#[$doc:meta])* $vis:vis struct $id:ident for $queue:ty) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        $vis struct $id(pub u32);

        impl $crate::devices::queues::QueueId for $id {
            type Queue = $queue;
            fn new(index: u32) -> Self {
                $id(index)
            }
            fn index(self) -> usize {
                self.0 as usize
            }
        }
    };
}
pub(crate) use queue_id;

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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::tiny_platform;

    /// A queue of a kind made up for the registry's tests: what it is called and a statistic.
    #[derive(Debug, PartialEq)]
    struct Toy {
        name: &'static str,
        count: u64,
    }

    queue_id!(struct ToyId for Toy);

    impl Queue for Toy {
        type Id = ToyId;
        fn reset_stats(&mut self) {
            self.count = 0;
        }
    }

    fn toy(name: &'static str) -> Toy {
        Toy { name, count: 7 }
    }

    /// Queues of `dev0`, `dev1`, `dev0` added in that order.
    fn three() -> Queues<Toy> {
        let mut queues = Queues::default();
        for (device, name) in [("dev0", "a"), ("dev1", "b"), ("dev0", "c")] {
            queues.add(device, toy(name));
        }
        queues
    }

    #[test]
    fn a_queues_id_is_its_index_among_every_queue_of_its_kind() {
        let mut queues = Queues::default();
        assert_eq!([queues.add("dev0", toy("a")), queues.add("dev1", toy("b"))], [ToyId(0), ToyId(1)]);
        assert_eq!(queues[1].name, "b");
        assert_eq!(queues.len(), 2);
    }

    #[test]
    fn a_devices_queues_are_its_own_in_the_order_added() {
        let queues = three();
        assert_eq!(queues.of("dev0"), [ToyId(0), ToyId(2)]);
        assert_eq!(queues.of("dev1"), [ToyId(1)]);
    }

    #[test]
    fn a_device_without_queues_has_none() {
        assert_eq!(three().of("dev2"), []);
        assert_eq!(Queues::<Toy>::default().of("dev0"), []);
    }

    #[test]
    fn resetting_the_statistics_resets_every_queue() {
        let mut queues = three();
        Facility::reset_stats(&mut queues, Time::ZERO);
        assert!(queues.iter().all(|q| q.count == 0));
    }

    #[test]
    fn a_builder_with_no_queue_of_a_kind_finds_none() {
        let platform = tiny_platform();
        let b = Builder::new(&platform, 1);
        assert!(b.queues::<Toy>().is_empty() && b.queues_of::<Toy>("dev0").is_empty());
    }

    #[test]
    fn a_builder_adds_queues_to_the_kinds_registry_and_finds_them_by_device_and_id() {
        let platform = tiny_platform();
        let mut b = Builder::new(&platform, 1);
        let first = b.add_queue("dev0", toy("a"));
        let second = b.add_queue("dev1", toy("b"));
        assert_eq!((first, second), (ToyId(0), ToyId(1)));
        assert_eq!(b.queues_of::<Toy>("dev1"), [second]);
        assert_eq!(b.queue(second).name, "b");
        assert_eq!(b.queues::<Toy>().len(), 2);
    }

    const HOST: QueueHost = QueueHost { device: "a thing", queue: "widget" };

    fn entry_error(consumer_cpu: u32, count: u32) -> String {
        HOST.check_entry("devices.0.queues.3", consumer_cpu, count, 4).unwrap_err().to_string()
    }

    #[test]
    fn an_entry_of_no_queues_is_refused_at_its_count() {
        assert_eq!(entry_error(0, 0), "devices.0.queues.3.count: must be at least 1");
    }

    #[test]
    fn an_entry_whose_consumer_cpu_does_not_exist_is_refused_at_its_consumer_cpu() {
        assert_eq!(entry_error(4, 1), "devices.0.queues.3.consumer_cpu: CPU 4 out of range (the platform has 4)");
    }

    #[test]
    fn an_entry_whose_queues_run_past_the_last_cpu_is_refused_at_its_count_naming_its_queues() {
        assert_eq!(
            entry_error(2, 3),
            "devices.0.queues.3.count: 3 widgets from consumer_cpu 2 need CPUs up to 4, out of range (the platform has 4)"
        );
    }

    #[test]
    fn an_entry_reaching_exactly_the_last_cpu_is_accepted() {
        for (consumer_cpu, count) in [(3, 1), (2, 2), (0, 4)] {
            assert_eq!(HOST.check_entry("q", consumer_cpu, count, 4), Ok(()), "{consumer_cpu} + {count}");
        }
    }

    fn device_error(numa_node: u32, entries: usize, placement: PlacementSpec, pcie: PcieSpec) -> String {
        let platform = tiny_platform();
        HOST.check_device("devices.1", &platform, numa_node, entries, &placement, &pcie).unwrap_err().to_string()
    }

    #[test]
    fn a_device_on_a_node_the_platform_lacks_is_refused_at_its_numa_node() {
        assert_eq!(
            device_error(1, 1, PlacementSpec::default(), PcieSpec::default()),
            "devices.1.numa_node: node 1 does not exist (the platform has 1)"
        );
    }

    #[test]
    fn a_device_without_queues_is_refused_naming_what_it_and_its_queues_are() {
        assert_eq!(
            device_error(0, 0, PlacementSpec::default(), PcieSpec::default()),
            "devices.1.queues: a thing needs at least one widget"
        );
    }

    #[test]
    fn a_placement_on_a_cpu_the_platform_lacks_is_refused() {
        let on_cpu_2 = PlacementSpec { cpu: Some(2), ..PlacementSpec::default() };
        assert_eq!(
            device_error(0, 1, on_cpu_2, PcieSpec::default()),
            "devices.1.placement.cpu: CPU 2 out of range (the platform has 2)"
        );
    }

    #[test]
    fn a_placement_policy_the_platform_cannot_carry_out_is_refused_at_its_policy() {
        // The small platform has no DDIO ways.
        let ddio = PlacementSpec { policy: crate::params::Name::new("ddio"), ..PlacementSpec::default() };
        let error = device_error(0, 1, ddio, PcieSpec::default());
        assert!(error.starts_with("devices.1.placement.policy: platform `"), "{error}");
        let unknown = PlacementSpec { policy: crate::params::Name::new("nowhere"), ..PlacementSpec::default() };
        let error = device_error(0, 1, unknown, PcieSpec::default());
        assert!(error.starts_with("devices.1.placement.policy: unknown "), "{error}");
    }

    #[test]
    fn a_pcie_link_that_cannot_be_is_refused_below_its_key() {
        let three_lanes = PcieSpec { lanes: 3, ..PcieSpec::default() };
        let error = device_error(0, 1, PlacementSpec::default(), three_lanes);
        assert!(error.starts_with("devices.1.pcie.lanes: "), "{error}");
    }

    #[test]
    fn a_device_with_every_value_in_range_is_accepted() {
        let platform = tiny_platform();
        let on_cpu_1 = PlacementSpec { cpu: Some(1), ..PlacementSpec::default() };
        assert_eq!(HOST.check_device("d", &platform, 0, 1, &on_cpu_1, &PcieSpec::default()), Ok(()));
    }
}
