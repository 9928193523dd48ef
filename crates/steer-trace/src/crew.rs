//! The host threads a replay shares each batch with, started once and kept for the next batch.
//!
//! Why not a thread per batch (`std::thread::scope`), or threads that sleep between batches: on a
//! 2-vCPU virtual machine a thread started or woken for 1.4 ms of work finished the pair of jobs
//! in 2.2–3.2 ms, slower than one thread doing both (2.7 ms): the new or woken thread ran first on
//! the core that woke it. Threads that spin while they wait ran the pair in 1.37 ms. So a crew
//! member spins for the next job, and sleeps only after `SPIN` without one (between replays, or
//! behind a slow reader).

use std::any::Any;
use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// How long a member spins for its next job before it sleeps: longer than reading a batch (a
/// few hundred µs), short enough that an idle crew costs its host next to nothing.
const SPIN: Duration = Duration::from_millis(2);

/// A job every member runs with its own index (the caller is member 0).
type Job<'a> = dyn Fn(usize) + Sync + 'a;

/// Host threads that run jobs alongside the calling thread.
pub(super) struct Crew {
    shared: Arc<Shared>,
    members: Vec<JoinHandle<()>>,
}

/// What the calling thread and the members share.
struct Shared {
    /// Rounds of jobs started; a member runs a round's job when this changes.
    round: AtomicU64,
    /// The round's job while it runs. Its lifetime is the caller's: `run` returns only after
    /// every member reported the job done, and no member touches it after that.
    job: Mutex<Option<&'static Job<'static>>>,
    /// Members done with the round's job.
    done: AtomicUsize,
    /// The first panic of a member in this round, raised again on the calling thread.
    panic: Mutex<Option<Box<dyn Any + Send>>>,
    stop: AtomicBool,
}

impl Crew {
    /// The calling thread and `helpers` more host threads.
    pub(super) fn new(helpers: usize) -> Crew {
        let shared = Arc::new(Shared {
            round: AtomicU64::new(0),
            job: Mutex::new(None),
            done: AtomicUsize::new(0),
            panic: Mutex::new(None),
            stop: AtomicBool::new(false),
        });
        let members = (1..=helpers)
            .map(|index| {
                let shared = Arc::clone(&shared);
                std::thread::Builder::new()
                    .name(format!("steer-replay-{index}"))
                    .spawn(move || shared.serve(index))
                    .expect("the host cannot start a replay thread")
            })
            .collect();
        Crew { shared, members }
    }

    /// Threads in the crew, the calling one included.
    pub(super) fn size(&self) -> usize {
        self.members.len() + 1
    }

    /// Runs `jobs` (at most `size` of them) one per thread, the first on the calling thread;
    /// returns their results in order. A panic in any job is raised here once all have ended.
    pub(super) fn map<T: Send>(&self, jobs: Vec<impl FnOnce() -> T + Send>) -> Vec<T> {
        assert!(jobs.len() <= self.size(), "more jobs than crew members");
        if jobs.len() <= 1 {
            return jobs.into_iter().map(|job| job()).collect();
        }
        let slots: Vec<_> = jobs.into_iter().map(|job| Mutex::new((Some(job), None))).collect();
        self.run(&|index| {
            let Some(slot) = slots.get(index) else { return };
            let job = lock(slot).0.take().expect("each job runs once");
            let result = job();
            lock(slot).1 = Some(result);
        });
        slots
            .into_iter()
            .map(|slot| slot.into_inner().unwrap_or_else(PoisonError::into_inner).1.expect("every job ran"))
            .collect()
    }

    /// Runs `job(index)` on every member, index 0 on the calling thread, and waits for all.
    fn run(&self, job: &Job<'_>) {
        // SAFETY: the reference is only used until every member has reported this round done,
        // which this function waits for before it returns (or unwinds), so it never outlives `job`.
        let job = unsafe { std::mem::transmute::<&Job<'_>, &'static Job<'static>>(job) };
        let shared = &self.shared;
        *lock(&shared.job) = Some(job);
        shared.done.store(0, Ordering::Relaxed);
        shared.round.fetch_add(1, Ordering::Release);
        for member in &self.members {
            member.thread().unpark();
        }
        let mine = catch_unwind(AssertUnwindSafe(|| job(0)));
        wait_until(|| shared.done.load(Ordering::Acquire) == self.members.len());
        *lock(&shared.job) = None;
        if let Err(panic) = mine {
            resume_unwind(panic);
        }
        if let Some(panic) = lock(&shared.panic).take() {
            resume_unwind(panic);
        }
    }
}

impl Shared {
    /// A member's life: run each round's job, until the crew is dropped.
    fn serve(&self, index: usize) {
        let mut seen = 0;
        loop {
            let mut round = self.round.load(Ordering::Acquire);
            let mut wait = Wait::new();
            while round == seen {
                if self.stop.load(Ordering::Acquire) {
                    return;
                }
                if !wait.pause() {
                    // Returns at once if `run` unparked this thread after the load above.
                    std::thread::park();
                }
                round = self.round.load(Ordering::Acquire);
            }
            seen = round;
            let job = lock(&self.job).expect("a round has a job");
            if let Err(panic) = catch_unwind(AssertUnwindSafe(|| job(index))) {
                lock(&self.panic).get_or_insert(panic);
            }
            self.done.fetch_add(1, Ordering::Release);
        }
    }
}

impl Drop for Crew {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::Release);
        for member in self.members.drain(..) {
            member.thread().unpark();
            // A member's panics were caught and raised on the calling thread already.
            let _ = member.join();
        }
    }
}

/// Spins until `ready`.
fn wait_until(ready: impl Fn() -> bool) {
    let mut wait = Wait::new();
    while !ready() {
        wait.pause();
    }
}

/// Polls between two hand-overs of the host core while waiting: a hand-over is a system call
/// (1–4 µs on a virtual machine), longer than most waits between two jobs of a replay.
const POLLS_PER_YIELD: u32 = 256;

/// A wait for another thread of the crew: it polls keeping the host core awake, and every
/// `POLLS_PER_YIELD` polls hands the core over to any other thread ready to run on it (more
/// replay threads than host cores, or other processes).
struct Wait {
    polls: u32,
    started: Instant,
}

impl Wait {
    fn new() -> Wait {
        Wait { polls: 0, started: Instant::now() }
    }

    /// Pauses before the next poll; false once the wait has lasted `SPIN` (checked at hand-overs).
    fn pause(&mut self) -> bool {
        self.polls = self.polls.wrapping_add(1);
        if !self.polls.is_multiple_of(POLLS_PER_YIELD) {
            std::hint::spin_loop();
            return true;
        }
        std::thread::yield_now();
        self.started.elapsed() < SPIN
    }
}

/// Locks a mutex whose data stays valid if a holder panicked (a panic is raised again anyway).
fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jobs_run_once_each_and_results_keep_their_order() {
        let crew = Crew::new(3);
        for round in 0..50u64 {
            let jobs: Vec<_> = (0..4u64).map(|i| move || round * 10 + i).collect();
            assert_eq!(crew.map(jobs), (0..4).map(|i| round * 10 + i).collect::<Vec<_>>());
            // Fewer jobs than members.
            let jobs: Vec<_> = (0..2u64).map(|i| move || i).collect();
            assert_eq!(crew.map(jobs), vec![0, 1]);
        }
    }

    #[test]
    fn jobs_may_borrow_mutably_and_run_after_members_slept() {
        let crew = Crew::new(1);
        let mut halves = [vec![0u32; 1000], vec![0u32; 1000]];
        for pause in [0, 3] {
            std::thread::sleep(Duration::from_millis(pause) + SPIN * pause as u32);
            let jobs: Vec<_> = halves.iter_mut().map(|half| move || half.iter_mut().for_each(|x| *x += 1)).collect();
            crew.map(jobs);
        }
        assert!(halves.iter().flatten().all(|&x| x == 2));
    }

    #[test]
    fn a_member_panic_is_raised_on_the_caller_and_the_crew_goes_on() {
        let crew = Crew::new(1);
        let jobs: Vec<Box<dyn FnOnce() -> u32 + Send>> = vec![Box::new(|| 1), Box::new(|| panic!("member"))];
        let raised = catch_unwind(AssertUnwindSafe(|| crew.map(jobs)));
        assert!(raised.is_err());
        let jobs: Vec<_> = (0..2u32).map(|i| move || i).collect();
        assert_eq!(crew.map(jobs), vec![0, 1]);
    }

    #[test]
    fn a_dropped_crew_ends_its_threads() {
        let crew = Crew::new(2);
        let shared = Arc::downgrade(&crew.shared);
        drop(crew);
        assert!(shared.upgrade().is_none(), "a member still holds the crew's state");
    }

    #[test]
    fn a_wait_spins_then_says_to_sleep_after_spin() {
        // Only every POLLS_PER_YIELD-th poll hands the core over and looks at the clock.
        let mut wait = Wait::new();
        assert!((1..POLLS_PER_YIELD).all(|_| wait.pause()));
        std::thread::sleep(SPIN);
        assert!(!wait.pause(), "a hand-over after SPIN says to sleep");
        assert!(wait.pause());
    }
}
