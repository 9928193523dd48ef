//! The event-driven engine. Agents (NIC queues generating packets, workloads on CPUs) run in time
//! order; ties break by scheduling order, so a scenario and seed always give the same run.
//! Statistics are reset when the warm-up ends; results cover the measured window only.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use crate::devices::nic::{Allocator, Nic};
use crate::hierarchy::Hierarchy;
use crate::platform::PlatformSpec;
use crate::results::{self, RunResult};
use crate::scenario::Scenario;
use crate::units::{Clock, Time};
use crate::workloads::l2fwd::L2fwd;
use crate::workloads::pingpong::PingPong;
use crate::workloads::reduce::Reduce;
use crate::workloads::rx_loop::RxLoop;
use crate::workloads::stream::Stream;
use crate::workloads::tcp_rx::{Role, Socket, TcpRx};
use crate::workloads::{Workload, WorkloadSpec};

/// Everything agents act on.
pub struct System {
    pub platform: PlatformSpec,
    pub hierarchy: Hierarchy,
    pub nics: Vec<Nic>,
    pub allocator: Allocator,
    /// TX engines to start, as (nic, queue, time): a workload posted to an idle one.
    pub tx_kicks: Vec<(usize, usize, Time)>,
    /// Workloads to wake, as (workload index, time): another workload has work for them.
    pub wakes: Vec<(usize, Time)>,
    /// Sockets between the two halves of TCP receive paths.
    pub sockets: Vec<Socket>,
    /// When each logical CPU is next free: workloads sharing a CPU take turns.
    pub cpu_free_at: Vec<Time>,
}

impl System {
    /// NUMA node closest to a CPU (memory nodes split a socket's CCXs evenly).
    pub fn node_of_cpu(&self, cpu: u32) -> u32 {
        let t = &self.platform.topology;
        let ccx = t.ccx_of_core(t.core_of_cpu(cpu));
        let nodes_per_socket = self.platform.memory.nodes_per_socket;
        let socket = t.socket_of_ccx(ccx);
        let ccx_in_socket = ccx % t.ccx_per_socket;
        socket * nodes_per_socket + ccx_in_socket * nodes_per_socket / t.ccx_per_socket
    }
}

#[derive(Debug, Clone, Copy)]
enum Agent {
    Queue {
        nic: usize,
        queue: usize,
    },
    Transmit {
        nic: usize,
        queue: usize,
    },
    Workload(usize),
    /// A NIC driver's timed work (IRQ affinity changes).
    Driver {
        nic: usize,
    },
}

/// A validated scenario assembled into a runnable system.
pub struct Simulation {
    pub scenario: Scenario,
    pub system: System,
    workloads: Vec<Box<dyn Workload>>,
    events: BinaryHeap<Reverse<(Time, u64, usize)>>,
    agents: Vec<Agent>,
    /// Agent id of each workload, so a wake-up finds it without a search.
    workload_agents: Vec<usize>,
    /// Agent id of each queue's TX engine, by nic then queue.
    tx_agents: Vec<Vec<usize>>,
    sequence: u64,
    now: Time,
}

impl Simulation {
    /// Builds the system for a scenario that passed `Scenario::validate`.
    pub fn new(scenario: Scenario) -> Simulation {
        let platform = scenario.platform.clone();
        let mut allocator = Allocator::new(platform.memory.nodes(&platform.topology));
        let mut hierarchy = Hierarchy::new(&platform);
        let nics: Vec<Nic> = scenario
            .devices
            .iter()
            .enumerate()
            .map(|(i, spec)| {
                Nic::new(spec, &platform, &mut allocator, &mut hierarchy, scenario.seed.wrapping_add(i as u64))
            })
            .collect();
        let cpus = platform.topology.cpus() as usize;
        let mut system = System {
            hierarchy,
            nics,
            allocator,
            platform,
            tx_kicks: Vec::new(),
            wakes: Vec::new(),
            sockets: Vec::new(),
            cpu_free_at: vec![Time::ZERO; cpus],
        };
        let clock = Clock::new(system.platform.core.freq_ghz);
        let mut workloads: Vec<Box<dyn Workload>> = Vec::new();
        for spec in &scenario.workloads {
            let nic_of =
                |device: &str| scenario.devices.iter().position(|d| d.name == device).expect("validated device");
            match spec {
                WorkloadSpec::RxLoop(rx) => {
                    let nic = nic_of(&rx.device);
                    workloads.push(Box::new(RxLoop::new(workloads.len(), rx, nic, clock, &mut system)));
                }
                WorkloadSpec::Pingpong(pingpong) => {
                    let nic = nic_of(&pingpong.device);
                    workloads.push(Box::new(PingPong::new(pingpong, nic, clock, &mut system)));
                }
                WorkloadSpec::Reduce(reduce) => {
                    let nic = nic_of(&reduce.device);
                    workloads.push(Box::new(Reduce::new(workloads.len(), reduce, nic, clock, &mut system)));
                }
                WorkloadSpec::TcpRx(tcp) => {
                    let nic = nic_of(&tcp.device);
                    for queue in 0..system.nics[nic].queues.len() {
                        let socket = system.sockets.len();
                        // Page metadata lives with the pages, on the NIC's node.
                        let (rx, node) = (&system.nics[nic].queues[queue], system.nics[nic].spec.numa_node);
                        let line_bits = system.platform.line_bits();
                        system.sockets.push(Socket::for_queue(tcp, rx, &mut system.allocator, node, line_bits));
                        for role in [Role::Napi, Role::Recv] {
                            let half = TcpRx::new(workloads.len(), tcp, role, (nic, queue), socket, clock, &mut system);
                            workloads.push(Box::new(half));
                        }
                    }
                }
                WorkloadSpec::Stream(stream) => workloads.push(Box::new(Stream::new(stream, clock, &mut system))),
                WorkloadSpec::L2fwd(fwd) => {
                    let nic = nic_of(&fwd.device);
                    for queue in 0..system.nics[nic].queues.len() {
                        workloads.push(Box::new(L2fwd::new(workloads.len(), fwd, nic, queue, clock, &system)));
                    }
                }
            }
        }
        let mut simulation = Simulation {
            scenario,
            system,
            workloads,
            events: BinaryHeap::new(),
            agents: Vec::new(),
            workload_agents: Vec::new(),
            tx_agents: Vec::new(),
            sequence: 0,
            now: Time::ZERO,
        };
        for nic in 0..simulation.system.nics.len() {
            let mut tx = Vec::new();
            for queue in 0..simulation.system.nics[nic].queues.len() {
                let agent = simulation.add_agent(Agent::Queue { nic, queue });
                if let Some(first) = simulation.system.nics[nic].first_arrival(queue) {
                    simulation.schedule(first, agent);
                }
                tx.push(simulation.add_agent(Agent::Transmit { nic, queue }));
            }
            simulation.tx_agents.push(tx);
            if let Some(at) = simulation.system.nics[nic].next_driver_event() {
                let agent = simulation.add_agent(Agent::Driver { nic });
                simulation.schedule(at, agent);
            }
        }
        for index in 0..simulation.workloads.len() {
            let agent = simulation.add_agent(Agent::Workload(index));
            simulation.workload_agents.push(agent);
            simulation.schedule(Time::ZERO, agent);
        }
        simulation
    }

    fn add_agent(&mut self, agent: Agent) -> usize {
        self.agents.push(agent);
        self.agents.len() - 1
    }

    fn schedule(&mut self, time: Time, agent: usize) {
        self.sequence += 1;
        self.events.push(Reverse((time, self.sequence, agent)));
    }

    /// Runs all events before `until`; `progress` is called with the simulated time now and then
    /// and stops the run by returning false. Returns whether `until` was reached.
    pub fn run_until(&mut self, until: Time, progress: &mut dyn FnMut(Time) -> bool) -> bool {
        let mut next_report = self.now;
        while let Some(&Reverse((time, _, agent))) = self.events.peek() {
            if time >= until {
                break;
            }
            self.events.pop();
            self.now = time;
            if time >= next_report {
                if !progress(time) {
                    return false;
                }
                next_report = time + Time::from_us(50.0);
            }
            match self.agents[agent] {
                Agent::Queue { nic, queue } => {
                    let (next, wake) = self.system.nics[nic].arrive(queue, time, &mut self.system.hierarchy);
                    if let Some(next) = next {
                        self.schedule(next, agent);
                    }
                    if let Some((workload, at)) = wake {
                        self.schedule(at, self.workload_agents[workload]);
                    }
                }
                Agent::Transmit { nic, queue } => {
                    if let Some(next) = self.system.nics[nic].transmit(queue, time, &mut self.system.hierarchy) {
                        self.schedule(next, agent);
                    }
                }
                Agent::Driver { nic } => {
                    if let Some(next) = self.system.nics[nic].driver_event(time, &mut self.system.allocator) {
                        self.schedule(next, agent);
                    }
                }
                Agent::Workload(index) => {
                    if let Some(next) = self.workloads[index].step(&mut self.system, time) {
                        self.schedule(next, agent);
                    }
                    for (nic, queue, at) in std::mem::take(&mut self.system.tx_kicks) {
                        let start = self.system.nics[nic].queues[queue].tx_start(at);
                        self.schedule(start, self.tx_agents[nic][queue]);
                    }
                    for (workload, at) in std::mem::take(&mut self.system.wakes) {
                        self.schedule(at, self.workload_agents[workload]);
                    }
                }
            }
        }
        self.now = until;
        true
    }

    pub fn reset_stats(&mut self) {
        self.system.hierarchy.reset_stats();
        for nic in &mut self.system.nics {
            for queue in &mut nic.queues {
                queue.reset_stats();
            }
        }
        let now = self.now;
        for workload in &mut self.workloads {
            workload.reset_stats(now);
        }
    }

    pub fn workloads(&self) -> &[Box<dyn Workload>] {
        &self.workloads
    }

    pub fn now(&self) -> Time {
        self.now
    }

    /// Warm-up, reset, measured window; returns the results, or `None` if `progress` (called
    /// with the completed fraction) stopped the run by returning false.
    pub fn run(mut self, progress: &mut dyn FnMut(f64) -> bool) -> Option<RunResult> {
        let started = std::time::Instant::now();
        let warmup = Time::from_us(self.scenario.sim.warmup_us);
        let end = warmup + Time::from_us(self.scenario.sim.measure_us);
        let total = end.0.max(1) as f64;
        if !self.run_until(warmup, &mut |t| progress(t.0 as f64 / total)) {
            return None;
        }
        self.reset_stats();
        if !self.run_until(end, &mut |t| progress(t.0 as f64 / total)) || !progress(1.0) {
            return None;
        }
        Some(results::collect(&self, warmup, started.elapsed().as_secs_f64()))
    }
}
