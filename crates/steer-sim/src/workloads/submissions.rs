//! A program's side of DSA work queues: its submissions, made one at a time (`dsa_copy`, `qdp`).

use std::collections::VecDeque;

use crate::cpu::{Next, ProgramCx};
use crate::devices::dsa::CopyPorts;
use crate::devices::dsa::{Descriptor, Submit};

/// A program's submissions to DSA work queues, made one at a time: each pays its ENQCMD or
/// MOVDIR64B on the core, then reaches its queue; one a shared queue refused waits until an entry
/// frees and is tried again.
#[derive(Debug, Default)]
pub struct Submissions {
    /// Descriptors to submit, with the device each goes to.
    queue: VecDeque<(usize, Descriptor)>,
    /// The front one's last ENQCMD got "retry".
    retry_wait: bool,
}

impl Submissions {
    pub fn push(&mut self, device: usize, descriptor: Descriptor) {
        self.queue.push_back((device, descriptor));
    }

    pub fn extend(&mut self, descriptors: Vec<(usize, Descriptor)>) {
        self.queue.extend(descriptors);
    }

    /// The next step of submitting, if there is one: the submission's core time then `call`, or
    /// (after a "retry") a wait for the queue to free an entry.
    pub fn next(&mut self, cx: &mut ProgramCx, call: u32) -> Option<Next> {
        let &(device, _) = self.queue.front()?;
        let port = &cx.shared().get::<CopyPorts>().devices[device];
        if self.retry_wait && port.queue.is_full() {
            let space = port.queue.space;
            cx.wait_on(space);
            return Some(Next::Wait);
        }
        let cost = port.queue.submit_cost(&port.spec);
        cx.hold(cost);
        cx.call(call);
        Some(Next::Unit)
    }

    /// The front submission reached its queue (the `call` of `next`): what the queue answered,
    /// and the descriptor. An accepted one rings the doorbell; accepted or dropped, it is done.
    pub fn on_call(&mut self, cx: &mut ProgramCx) -> (Submit, Descriptor) {
        let (device, descriptor) = self.queue.front().cloned().expect("a submission in progress");
        let queue = &mut cx.shared().get_mut::<CopyPorts>().devices[device].queue;
        let answer = queue.submit(descriptor.clone());
        self.retry_wait = answer == Submit::Retry;
        if answer != Submit::Retry {
            self.queue.pop_front();
        }
        if answer == Submit::Accepted {
            let doorbell = queue.doorbell;
            cx.notify(doorbell);
        }
        (answer, descriptor)
    }
}
