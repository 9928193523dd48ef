//! A copy job (workload kind `dsa_copy`): `total_bytes` from memory node `src_node` to `dst_node`,
//! split evenly among the copy engines a copy policy names and, per engine, among `threads`
//! submitting threads pinned to its node (as seed 001's benchmarks do). On the hardware path a
//! thread cuts its share into descriptors of `transfer_bytes`, groups `batch` of them per
//! submission, keeps `queue_depth` submissions in flight and polls their completion records,
//! finishing on the CPU what a partial completion leaves. On the software path the thread copies
//! each piece itself (DML's software path). The job's figures are reported under `copy`.

use std::collections::VecDeque;

use serde::{Deserialize, Serialize};

use crate::cpu::{Next, Program, ProgramCx, UnitKind, DESCRIPTOR};
use crate::devices::copy_job::CopyJob;
use crate::devices::copy_policy::{self, CopyPolicies};
use crate::devices::dsa::CopyPorts;
use crate::devices::dsa::{pages_first_touched, Descriptor, DsaSpec, Faults, Submit, WqMode, MAX_TRANSFER_BYTES};
use crate::devices::SystemShape;
use crate::engine::{Agent, Cx, ReportView, Step};
use crate::error::{ensure, ConfigError, ConfigResult};
use crate::flows::Flows;
use crate::flows::{OwnerId, Region, Transfer, Use};
use crate::params::{choice, params, Describe, Name, ParamDoc};
use crate::stats::{stat, Report};
use crate::system::Builder;
use crate::units::Time;
use crate::workloads::submissions::Submissions;
use crate::workloads::WorkloadSpec;

/// Most descriptors one job may need (a run beyond it is refused: raise `transfer_bytes`).
pub const MAX_DESCRIPTORS: u64 = 4 << 20;

choice! {
    /// Who copies.
    pub enum CopyPath {
        /// DSA descriptors.
        Hardware,
        /// The submitting threads copy on their CPUs (DML's software path).
        Software,
    }
}

/// Which devices take part: a registered copy policy, or a list of compute nodes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum CopyChoice {
    Policy(Name<CopyPolicies>),
    Nodes(Vec<u32>),
}

impl Describe for CopyChoice {
    fn describe_into(&self, prefix: &str, meaning: &str, out: &mut Vec<ParamDoc>) {
        match self {
            CopyChoice::Policy(name) => name.describe_into(prefix, meaning, out),
            CopyChoice::Nodes(nodes) => {
                out.push(ParamDoc { key: prefix.into(), value: format!("{nodes:?}"), meaning: meaning.into() })
            }
        }
    }
}

params! {
    /// The copy job's parameters.
    pub struct DsaCopySpec {
        /// `hardware` (DSA) or `software` (the CPU copies).
        path: CopyPath = CopyPath::Hardware,
        /// Name prefix of the DSA devices (`[[devices]] kind = "dsa"`).
        device: String = "dsa".to_string(),
        /// Descriptors per submission (1: no batch descriptor).
        batch: u32 = 1,
        /// Submissions each thread keeps in flight (1: synchronous).
        queue_depth: u32 = 1,
        /// Submitting threads per device taking part, pinned to the device's node.
        threads: u32 = 1,
        /// Bytes per descriptor.
        transfer_bytes: u64 = 1 << 20,
        /// Bytes the job copies.
        total_bytes: u64 = 1 << 30,
        /// Bytes of the one source and one destination buffer each thread copies again and
        /// again, both written before the first copy, as seed 001's benchmark loop does (0: no
        /// reuse, every byte of a thread's share is copied once).
        buffer_bytes: u64 = 0,
        /// Destination pages: `none` (pre-touched), `block_on_fault` or `partial`.
        faults: Faults = Faults::None,
        /// Destination written into the LLC (cache-control flag).
        cache_control: bool = false,
        /// Memory node copied from.
        src_node: u32 = 0,
        /// Memory node copied to.
        dst_node: u32 = 0,
        /// Devices taking part: a copy policy (`local`, `brute`, `smart`) or a list of compute nodes.
        copy_policy: CopyChoice = CopyChoice::Policy(Name::new("local")),
    }
}

/// The kind's registration.
#[linkme::distributed_slice(crate::workloads::WORKLOADS)]
pub static KIND: crate::workloads::WorkloadKind = crate::workloads::WorkloadKind::of::<DsaCopySpec>(
    "dsa_copy",
    "one copy job between memory nodes by DSA descriptors (or the CPU), split among devices and threads",
);

impl DsaCopySpec {
    /// The compute nodes whose devices take part.
    fn device_nodes(&self, platform: &crate::platform::PlatformSpec) -> Vec<u32> {
        match &self.copy_policy {
            CopyChoice::Policy(name) => copy_policy::devices_for(name, platform, self.src_node, self.dst_node),
            CopyChoice::Nodes(nodes) => nodes.clone(),
        }
    }

    /// The CPUs of the threads submitting to the device of `node`: its node's first CPUs.
    fn cpus_of(&self, platform: &crate::platform::PlatformSpec, node: u32) -> Vec<u32> {
        let cpus = platform.topology.cpus();
        (0..cpus).filter(|&c| platform.node_of_cpu(c) == node).take(self.threads as usize).collect()
    }

    fn descriptors(&self) -> u64 {
        self.total_bytes.div_ceil(self.transfer_bytes.max(1))
    }

    /// Whether the source is read from the LLC: the buffers the threads wrote before copying
    /// stay in the LLC caching their node if they fit there (the destinations count when the
    /// same LLC caches them), since nothing else runs, a device's read neither allocates nor
    /// evicts in the LLC, and a copy's writes replace only the destination's lines (docs/dsa.md).
    fn source_in_llc(&self, platform: &crate::platform::PlatformSpec, threads: u64) -> bool {
        let nodes = platform.memory_nodes();
        let same_llc = nodes[self.src_node as usize].compute_node == nodes[self.dst_node as usize].compute_node;
        let buffers = if same_llc { 2 } else { 1 };
        let written = self.buffer_bytes.saturating_mul(threads * buffers);
        self.buffer_bytes > 0 && written <= platform.llc_bytes_per_node()
    }
}

impl WorkloadSpec for DsaCopySpec {
    fn validate(&self, path: &str, system: &SystemShape) -> ConfigResult<()> {
        let key = |k: &str| format!("{path}.{k}");
        let platform = system.platform;
        let memory_nodes = platform.memory_nodes().len() as u32;
        for (name, node) in [("src_node", self.src_node), ("dst_node", self.dst_node)] {
            ensure(node < memory_nodes, &key(name), || {
                format!("node {node} does not exist (the platform has {memory_nodes} memory nodes)")
            })?;
        }
        let engines = system.copy_engines.iter().find(|e| e.name == self.device).ok_or_else(|| {
            ConfigError::new(
                key("device"),
                format!("no copy engine device named `{}` (add [[devices]] kind = \"dsa\")", self.device),
            )
        })?;
        if let CopyChoice::Policy(name) = &self.copy_policy {
            name.check(&key("copy_policy"))?;
        }
        let nodes = self.device_nodes(platform);
        for node in &nodes {
            ensure(engines.nodes.contains(node), &key("copy_policy"), || format!("node {node} has no DSA"))?;
        }
        ensure(!nodes.is_empty(), &key("copy_policy"), || "names no device".into())?;
        ensure((1..=MAX_TRANSFER_BYTES).contains(&self.transfer_bytes), &key("transfer_bytes"), || {
            format!("a descriptor moves 1 byte to 2 GiB (got {})", self.transfer_bytes)
        })?;
        ensure(self.total_bytes >= 1, &key("total_bytes"), || "must be at least 1".into())?;
        ensure(self.buffer_bytes == 0 || self.buffer_bytes >= self.transfer_bytes, &key("buffer_bytes"), || {
            format!("0 or at least one descriptor's transfer_bytes ({})", self.transfer_bytes)
        })?;
        ensure(self.descriptors() <= MAX_DESCRIPTORS, &key("total_bytes"), || {
            format!(
                "{} descriptors of {} bytes: more than {MAX_DESCRIPTORS}; raise transfer_bytes",
                self.descriptors(),
                self.transfer_bytes
            )
        })?;
        ensure((1..=engines.max_batch).contains(&self.batch), &key("batch"), || {
            format!("the work queue takes batches of 1 to {} descriptors (got {})", engines.max_batch, self.batch)
        })?;
        ensure((1..=65536).contains(&self.queue_depth), &key("queue_depth"), || {
            format!("must be 1 to 65536 submissions in flight (got {})", self.queue_depth)
        })?;
        let per_node = platform.topology.cpus() / platform.memory.nodes(&platform.topology);
        ensure((1..=per_node).contains(&self.threads), &key("threads"), || {
            format!("1 to {per_node} threads per device: its node has {per_node} CPUs (got {})", self.threads)
        })?;
        if engines.wq == WqMode::Dedicated && self.path == CopyPath::Hardware {
            ensure(self.threads == 1, &key("threads"), || {
                format!("a dedicated WQ takes one submitter; {} threads would share it", self.threads)
            })?;
            ensure(self.queue_depth <= engines.wq_size, &key("queue_depth"), || {
                format!(
                    "{} in flight would overflow the dedicated WQ's {} entries (it drops what does not fit)",
                    self.queue_depth, engines.wq_size
                )
            })?;
        }
        Ok(())
    }

    fn cpus(&self, system: &SystemShape) -> Vec<u32> {
        self.device_nodes(system.platform).into_iter().flat_map(|n| self.cpus_of(system.platform, n)).collect()
    }

    fn build(&self, b: &mut Builder) {
        let platform = b.platform.clone();
        let nodes = self.device_nodes(&platform);
        let cpus_by_node: Vec<Vec<u32>> = nodes.iter().map(|&n| self.cpus_of(&platform, n)).collect();
        let threads = cpus_by_node.iter().map(Vec::len).sum::<usize>() as u64;
        let src_in_llc = self.source_in_llc(&platform, threads);
        let done = b.signal();
        b.job();
        let job = {
            let ports = b.copy_ports();
            ports.jobs.push(CopyJob {
                done,
                end: None,
                devices: Vec::new(),
                bytes: 0,
                descriptors: 0,
                operations: 0,
                latency_ns: 0.0,
                software_bytes: 0,
                submit_ns: 0.0,
                poll_ns: 0.0,
                cpu_copy_ns: 0.0,
                src_in_llc,
                threads_left: threads as u32,
            });
            ports.jobs.len() - 1
        };
        let memory = platform.memory_nodes();
        let shares = split(self.total_bytes, nodes.len() as u64);
        for ((&node, device_bytes), cpus) in nodes.iter().zip(shares).zip(&cpus_by_node) {
            for (&cpu, bytes) in cpus.iter().zip(split(device_bytes, cpus.len() as u64)) {
                // Its source and destination: one buffer each, copied again and again if reused.
                let buffer = if self.buffer_bytes > 0 { self.buffer_bytes } else { bytes };
                let (src, dst) = (b.region(self.src_node, buffer), b.region(self.dst_node, buffer));
                let signal = b.signal();
                let (flows, network) = b.flows();
                let owner = flows.add_owner(signal);
                let socket = memory[platform.node_of_cpu(cpu) as usize].socket;
                let latency = |n: u32| platform.read_latency_ns(&memory[n as usize], socket);
                let src_node = &memory[self.src_node as usize];
                let src_latency =
                    if src_in_llc { platform.llc_read_latency_ns(src_node, socket) } else { latency(self.src_node) };
                // The core's copy rate by how its stores take the destination lines.
                let dst_node = &memory[self.dst_node as usize];
                let copy_gbs =
                    |dst_ns| crate::cpu::copy_stream_gbs(&platform.core, platform.line_bytes(), src_latency, dst_ns);
                let cpu_caps = CpuCaps {
                    read_for_ownership: copy_gbs(latency(self.dst_node)),
                    whole_line: copy_gbs(platform.llc_read_latency_ns(dst_node, socket)),
                };
                let cpu_route =
                    crate::flows::plain(network.copy_route(socket, self.src_node, self.dst_node, src_in_llc));
                let ports = b.copy_ports();
                let device = ports.device_on(&self.device, node).expect("validated: the node has a device");
                let me = ports.add_submitter(signal);
                let dsa = ports.devices[device].spec.clone();
                let submitter = Submitter {
                    spec: self.clone(),
                    dsa,
                    job,
                    me,
                    device,
                    owner,
                    cpu_route,
                    cpu_caps,
                    src_in_llc,
                    record_read: Time::from_ns(
                        platform.llc_read_latency_ns(&memory[platform.node_of_cpu(cpu) as usize], socket),
                    ),
                    src,
                    dst,
                    placed: 0,
                    software_from: None,
                    remaining: bytes,
                    in_flight: VecDeque::new(),
                    next_tag: 0,
                    submissions: Submissions::default(),
                    submitting_since: Time::ZERO,
                    dropped: false,
                    software_left: 0,
                    cpu_copy_since: None,
                    waiting_since: None,
                    finished: false,
                };
                b.run_on(cpu, Box::new(submitter));
            }
            let name = format!("{}{node}", self.device);
            b.copy_ports().jobs[job].devices.push(name);
        }
        b.add_agent(Box::new(JobAgent { job }), Some(Time::ZERO));
    }
}

/// `total` split into `parts` shares, the remainder spread over the first.
fn split(total: u64, parts: u64) -> impl Iterator<Item = u64> {
    (0..parts).map(move |i| total / parts + u64::from(i < total % parts))
}

/// Bytes from which glibc's `memcpy` copies with `rep movsb` on a CPU with fast short REP MOV
/// (FSRM: Ice Lake and later, Sapphire Rapids included), and above its non-temporal threshold with
/// non-temporal stores: both write whole destination lines without reading them
/// (sysdeps/x86/dl-cacheinfo.h: "The default REP MOVSB threshold is 2112 on processors with fast
/// short REP MOVSB (FSRM)"; `rep_movsb_stop_threshold` = the non-temporal threshold). Below it,
/// vector loads and stores, each destination line read for ownership.
pub const REP_MOVSB_BYTES: u64 = 2112;

/// A core's copy rate (GB/s) by its store path (`crate::cpu::copy_stream_gbs`).
#[derive(Debug, Clone, Copy, PartialEq)]
struct CpuCaps {
    read_for_ownership: f64,
    whole_line: f64,
}

impl CpuCaps {
    /// The rate of one `memcpy` of `bytes`.
    fn for_copy(&self, bytes: u64) -> f64 {
        if bytes >= REP_MOVSB_BYTES {
            self.whole_line
        } else {
            self.read_for_ownership
        }
    }
}

const SUBMIT: u32 = 0;
const CPU_COPY: u32 = 1;

/// One submitting thread.
struct Submitter {
    spec: DsaCopySpec,
    dsa: DsaSpec,
    job: usize,
    me: usize,
    device: usize,
    owner: OwnerId,
    cpu_route: Vec<Use>,
    cpu_caps: CpuCaps,
    src_in_llc: bool,
    /// Its core's read of a completion record from the LLC.
    record_read: Time,
    /// Its source and destination buffers.
    src: Region,
    dst: Region,
    /// Bytes of its share handed out so far (descriptors or CPU copies): where the next begins.
    placed: u64,
    /// Where the bytes partial completions left begin: those of the first such descriptor, the
    /// rest taken to follow on.
    software_from: Option<(Region, Region)>,
    /// Bytes of its share not yet submitted (or copied).
    remaining: u64,
    /// Submissions in flight: tag, when their submission began, and where they read and write.
    in_flight: VecDeque<(u64, Time, Region, Region)>,
    next_tag: u64,
    /// The submission being made (or retried) and when it began.
    submissions: Submissions,
    submitting_since: Time,
    dropped: bool,
    /// Bytes partial completions left for the CPU to copy.
    software_left: u64,
    /// When its current CPU copy began.
    cpu_copy_since: Option<Time>,
    /// When it began polling for completions.
    waiting_since: Option<Time>,
    finished: bool,
}

impl Submitter {
    fn job<'a>(&self, cx: &'a mut ProgramCx) -> &'a mut CopyJob {
        &mut cx.shared().get_mut::<CopyPorts>().jobs[self.job]
    }

    /// Where the next `bytes` of its share lie: its buffers from where the last piece ended.
    fn place(&mut self, bytes: u64) -> (Region, Region) {
        let at = (self.src.skip(self.placed), self.dst.skip(self.placed));
        self.placed += bytes;
        at
    }

    /// Whether the destination is still untouched where the next piece goes: only in the first
    /// pass over it (a reused buffer stays mapped after it).
    fn untouched(&self) -> bool {
        self.placed < self.dst.len
    }

    /// The next submission: up to `batch` descriptors of `transfer_bytes` from what is left.
    fn next_descriptor(&mut self) -> Descriptor {
        let transfer = self.spec.transfer_bytes;
        let tasks = self.remaining.div_ceil(transfer).min(self.spec.batch as u64);
        let bytes = (tasks * transfer).min(self.remaining);
        self.remaining -= bytes;
        self.next_tag += 1;
        let faults = if self.untouched() { self.spec.faults } else { Faults::None };
        let (src, dst) = self.place(bytes);
        Descriptor {
            submitter: self.me,
            tag: self.next_tag,
            tasks: tasks as u32,
            task_bytes: transfer,
            last_bytes: bytes - (tasks - 1) * transfer,
            src,
            src_in_llc: self.src_in_llc,
            dst,
            faults,
            cache_control: self.spec.cache_control,
        }
    }

    /// Reads the next completion record visible now, if there is one: an LLC hit, as the
    /// device's write of the record allocates in the LLC (DSA architecture specification) and
    /// took the line from the core polling it. Records are read one at a time (assumed: the
    /// poll loop checks a record, then the next).
    fn read_completion(&mut self, cx: &mut ProgramCx) -> bool {
        let now = cx.now();
        let Some(record) = cx.shared().get_mut::<CopyPorts>().completions[self.me].take_visible(now) else {
            return false;
        };
        cx.hold(self.record_read);
        let i = self.in_flight.iter().position(|(tag, ..)| *tag == record.tag).expect("a record of ours");
        let (_, began, src, dst) = self.in_flight.remove(i).expect("found");
        if record.left > 0 {
            self.software_from.get_or_insert((src, dst));
        }
        self.software_left += record.left;
        let read = self.record_read;
        let job = self.job(cx);
        job.operations += 1;
        job.latency_ns += (now + read - began).as_ns();
        job.bytes += record.copied;
        true
    }

    /// Copies `bytes` from `src` to `dst` on this CPU: fault in the untouched pages first if it
    /// must.
    fn copy_on_cpu(&mut self, cx: &mut ProgramCx, bytes: u64, (src, dst): (Region, Region), fault_pages: bool) {
        if fault_pages {
            let pages = pages_first_touched(dst.start, bytes);
            cx.hold(Time::from_ns(pages as f64 * self.dsa.software_fault_ns));
        }
        self.software_left = bytes;
        self.software_from = Some((src, dst));
        cx.call(CPU_COPY);
    }
}

impl Program for Submitter {
    fn role(&self) -> &'static str {
        "dsa_copy"
    }

    fn unit(&self) -> &'static UnitKind {
        &DESCRIPTOR
    }

    fn next(&mut self, cx: &mut ProgramCx) -> Next {
        let now = cx.now();
        if let Some(since) = self.waiting_since.take() {
            self.job(cx).poll_ns += (now - since).as_ns();
        }
        let signal = cx.shared().get_mut::<CopyPorts>().completions[self.me].signal;
        if let Some(since) = self.cpu_copy_since {
            if cx.shared().get_mut::<Flows>().take_finished(self.owner).is_empty() {
                cx.wait_on(signal);
                return Next::Wait;
            }
            self.cpu_copy_since = None;
            // Its core copied meanwhile.
            cx.busy_for(now - since);
            self.job(cx).cpu_copy_ns += (now - since).as_ns();
        }
        if self.dropped {
            return Next::Stall("a full dedicated WQ dropped its descriptor".into());
        }
        if self.read_completion(cx) {
            return Next::Unit;
        }
        if self.software_left > 0 {
            let left = self.software_left;
            self.job(cx).software_bytes += left;
            let from = self.software_from.expect("a partial completion says where");
            self.copy_on_cpu(cx, left, from, true);
            return Next::Unit;
        }
        if let Some(next) = self.submissions.next(cx, SUBMIT) {
            if next == Next::Wait {
                cx.wait_on(signal);
            }
            return next;
        }
        if self.remaining > 0 {
            match self.spec.path {
                CopyPath::Software => {
                    let bytes = self.remaining.min(self.spec.transfer_bytes);
                    self.remaining -= bytes;
                    self.job(cx).descriptors += 1;
                    cx.count(1);
                    let untouched = self.spec.faults != Faults::None && self.untouched();
                    let at = self.place(bytes);
                    self.copy_on_cpu(cx, bytes, at, untouched);
                    return Next::Unit;
                }
                CopyPath::Hardware if self.in_flight.len() < self.spec.queue_depth as usize => {
                    let descriptor = self.next_descriptor();
                    self.submissions.push(self.device, descriptor);
                    self.submitting_since = now;
                    return self.submissions.next(cx, SUBMIT).expect("a submission just queued");
                }
                CopyPath::Hardware => {}
            }
        }
        if !self.in_flight.is_empty() {
            self.waiting_since = Some(now);
            cx.wait_on(signal);
            // A record written while it was busy (its notification came before it waited).
            let records = &cx.shared().get::<CopyPorts>().completions[self.me].records;
            return match records.iter().map(|r| r.visible_at).min() {
                Some(at) => Next::At(at),
                None => Next::Wait,
            };
        }
        if !self.finished {
            self.finished = true;
            let job = self.job(cx);
            job.end = Some(job.end.map_or(now, |e| e.max(now)));
            job.threads_left -= 1;
            let (done, ended) = (job.done, job.threads_left == 0);
            if ended {
                cx.shared().jobs.end(now);
            }
            cx.notify(done);
        }
        Next::Wait
    }

    fn on_call(&mut self, tag: u32, cx: &mut ProgramCx) {
        let now = cx.now();
        match tag {
            SUBMIT => {
                let cost = cx.shared().get_mut::<CopyPorts>().devices[self.device].queue.submit_cost(&self.dsa).as_ns();
                match self.submissions.on_call(cx) {
                    (Submit::Accepted, descriptor) => {
                        let tasks = descriptor.tasks as u64;
                        let (src, dst) = (descriptor.src, descriptor.dst);
                        self.in_flight.push_back((descriptor.tag, self.submitting_since, src, dst));
                        let job = self.job(cx);
                        job.descriptors += tasks;
                        job.submit_ns += cost;
                        cx.count(tasks);
                    }
                    (Submit::Retry, _) => self.job(cx).submit_ns += cost,
                    (Submit::Dropped, _) => self.dropped = true,
                }
            }
            _ => {
                let bytes = std::mem::take(&mut self.software_left);
                let (src, dst) = self.software_from.take().expect("set with the bytes");
                self.cpu_copy_since = Some(now);
                let transfer = Transfer {
                    bytes,
                    route: self.cpu_route.clone(),
                    cap_gbs: self.cpu_caps.for_copy(bytes),
                    reads: (!self.src_in_llc).then_some(src),
                    writes: Some(dst),
                };
                let flows = cx.shared().get_mut::<Flows>();
                flows.start(now, transfer, self.owner, 0);
                let changed = flows.changed.expect("flows exist");
                cx.notify(changed);
                self.job(cx).bytes += bytes;
            }
        }
    }

    fn waiting_for(&self) -> String {
        format!("{} submissions in flight", self.in_flight.len())
    }
}

stat!(GIBPS, "gibps", "GiB/s", "bytes copied over the job's wall time");
stat!(SECONDS, "seconds", "s", "the job's wall time (null: not finished in the simulated time)");
stat!(LATENCY_US, "latency_us", "µs", "mean time from the start of a submission to its completion being seen");
stat!(PER_DESCRIPTOR_US, "per_descriptor_us", "µs", "wall time over descriptors");
stat!(BYTES, "bytes", "bytes", "bytes copied");
stat!(DESCRIPTORS, "descriptors", "descriptors", "descriptors (tasks) submitted, or pieces copied by the CPU");
stat!(OPERATIONS, "operations", "submissions", "submissions completed (a batch counts once)");
stat!(SOFTWARE_BYTES, "software_bytes", "bytes", "bytes the CPU copied after partial completions");
stat!(SUBMIT_US, "submit_us", "µs", "CPU time spent submitting, over all threads");
stat!(POLL_US, "poll_us", "µs", "CPU time spent polling completion records, over all threads");
stat!(CPU_COPY_US, "cpu_copy_us", "µs", "CPU time spent copying, over all threads");
stat!(DEVICES, "devices", "names", "the devices taking part");
stat!(SOURCE_IN_LLC, "source_in_llc", "bool", "whether the source was read from the LLC (reused buffers that fit)");

/// Waits for a job's threads and reports the job.
struct JobAgent {
    job: usize,
}

impl Agent for JobAgent {
    fn name(&self) -> String {
        format!("copy job {}", self.job)
    }

    fn step(&mut self, cx: &mut Cx, _now: Time, _limit: Time) -> Step {
        // Woken by each thread that finishes, so that it has run at the job's end.
        let done = cx.shared.get_mut::<CopyPorts>().jobs[self.job].done;
        cx.wait_on(done);
        Step::Wait
    }

    fn report(&self, out: &mut Report, view: &ReportView) {
        let job = &view.shared.get::<CopyPorts>().jobs[self.job];
        let seconds = job.end.map(|t| t.as_ns() / 1e9);
        out.section("copy", |r| {
            r.put(&GIBPS, seconds.map(|s| job.bytes as f64 / s.max(1e-12) / (1u64 << 30) as f64));
            r.put(&SECONDS, seconds);
            let latency = (job.operations > 0).then(|| job.latency_ns / job.operations as f64 / 1e3);
            r.put(&LATENCY_US, latency);
            r.put(&PER_DESCRIPTOR_US, seconds.map(|s| s * 1e6 / job.descriptors.max(1) as f64));
            r.put(&BYTES, job.bytes);
            r.put(&DESCRIPTORS, job.descriptors);
            r.put(&OPERATIONS, job.operations);
            r.put(&SOFTWARE_BYTES, job.software_bytes);
            r.put(&SUBMIT_US, job.submit_ns / 1e3);
            r.put(&POLL_US, job.poll_ns / 1e3);
            r.put(&CPU_COPY_US, job.cpu_copy_ns / 1e3);
            r.put(&DEVICES, job.devices.clone());
            r.put(&SOURCE_IN_LLC, job.src_in_llc);
        });
    }

    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::devices::DeviceSpec;
    use crate::system::Builder;

    #[test]
    fn a_cpu_copy_writes_whole_lines_from_the_rep_movsb_threshold_on() {
        let caps = CpuCaps { read_for_ownership: 4.0, whole_line: 7.0 };
        assert_eq!(caps.for_copy(REP_MOVSB_BYTES - 1), 4.0);
        assert_eq!(caps.for_copy(REP_MOVSB_BYTES), 7.0);
        assert_eq!(caps.for_copy(1 << 30), 7.0);
    }

    #[test]
    fn a_stalled_copy_says_what_it_waits_for_and_its_job_is_named() {
        let platform = crate::testing::tiny_platform();
        let mut b = Builder::new(&platform, 1);
        DsaSpec::default().build(&mut b);
        DsaCopySpec::default().build(&mut b);
        let (agents, _, _) = b.into_parts();
        let waits: Vec<(String, String)> = agents.iter().map(|(a, _)| (a.name(), a.waiting_for())).collect();
        assert!(waits.iter().any(|(name, _)| name == "copy job 0"), "{waits:?}");
        // Its one thread, on the device's node, before it has submitted anything.
        let waiting: Vec<&str> = waits.iter().map(|(_, w)| w.as_str()).filter(|w| w.contains("submissions")).collect();
        assert_eq!(waiting, ["0 submissions in flight"]);
    }
}
