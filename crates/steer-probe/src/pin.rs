//! Which CPUs this process may run on, and pinning a thread to one.

use std::io;

/// Pins the calling thread to `cpu` (Linux; elsewhere the thread is left where it is).
pub fn pin_current_thread(cpu: u32) -> io::Result<()> {
    #[cfg(target_os = "linux")]
    {
        if cpu as usize >= libc::CPU_SETSIZE as usize {
            return Err(crate::invalid("cpu", format!("{cpu} is beyond the {} a CPU set holds", libc::CPU_SETSIZE)));
        }
        // SAFETY: a zeroed cpu_set_t is a valid empty set; CPU_SET stays in bounds (checked above);
        // sched_setaffinity reads the set we pass with its size.
        let result = unsafe {
            let mut set: libc::cpu_set_t = std::mem::zeroed();
            libc::CPU_SET(cpu as usize, &mut set);
            libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set)
        };
        if result != 0 {
            let error = io::Error::last_os_error();
            return Err(io::Error::new(error.kind(), format!("cpu {cpu}: cannot run there: {error}")));
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = cpu;
    Ok(())
}

/// The CPUs this process may run on, in order.
pub fn allowed_cpus() -> Vec<u32> {
    #[cfg(target_os = "linux")]
    {
        // SAFETY: sched_getaffinity fills the zeroed set we own; CPU_ISSET reads within its size.
        unsafe {
            let mut set: libc::cpu_set_t = std::mem::zeroed();
            if libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) == 0 {
                return (0..libc::CPU_SETSIZE as usize)
                    .filter(|&c| libc::CPU_ISSET(c, &set))
                    .map(|c| c as u32)
                    .collect();
            }
        }
    }
    (0..std::thread::available_parallelism().map(|n| n.get() as u32).unwrap_or(1)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_thread_can_be_pinned_to_each_allowed_cpu_and_not_beyond() {
        let cpus = allowed_cpus();
        assert!(!cpus.is_empty());
        std::thread::spawn(move || {
            for &cpu in &cpus {
                pin_current_thread(cpu).unwrap();
            }
        })
        .join()
        .unwrap();
        #[cfg(target_os = "linux")]
        assert_eq!(pin_current_thread(1 << 20).unwrap_err().kind(), io::ErrorKind::InvalidInput);
    }
}
