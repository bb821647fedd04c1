//! The examples' clocks: a cheap one for timestamps taken inside critical
//! sections, the process's CPU time, and the time the host took from the
//! machine's CPUs.

#![allow(dead_code)]

use std::time::{Duration, Instant};

/// A cheap timestamp: the TSC on x86_64 (about 8 ns to read here, against
/// 25 ns for `Instant::now`), nanoseconds elsewhere.
#[inline(always)]
pub fn ticks() -> u64 {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: `rdtsc` has no preconditions on x86_64.
    unsafe {
        core::arch::x86_64::_rdtsc()
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        static START: std::sync::OnceLock<Instant> = std::sync::OnceLock::new();
        START.get_or_init(Instant::now).elapsed().as_nanos() as u64
    }
}

/// Nanoseconds per tick, measured once.
pub fn ns_per_tick() -> f64 {
    static V: std::sync::OnceLock<f64> = std::sync::OnceLock::new();
    *V.get_or_init(|| {
        let (t0, i0) = (ticks(), Instant::now());
        std::thread::sleep(Duration::from_millis(30));
        let (t1, i1) = (ticks(), Instant::now());
        (i1 - i0).as_nanos() as f64 / (t1 - t0).max(1) as f64
    })
}

/// User + system CPU time of the whole process (every thread).
pub fn cpu_time() -> Duration {
    let mut ru = std::mem::MaybeUninit::<libc::rusage>::zeroed();
    // SAFETY: getrusage writes a rusage into the pointer we pass.
    let ru = unsafe {
        libc::getrusage(libc::RUSAGE_SELF, ru.as_mut_ptr());
        ru.assume_init()
    };
    let tv = |t: libc::timeval| Duration::new(t.tv_sec as u64, t.tv_usec as u32 * 1000);
    tv(ru.ru_utime) + tv(ru.ru_stime)
}

/// CPU time the hypervisor has taken from this machine's virtual CPUs since
/// boot, summed over all of them: the "steal" column of `/proc/stat`, in
/// the kernel's clock ticks (10 ms at the usual 100 Hz). While a vCPU is
/// taken away, whatever thread ran on it stops, a lock's holder included,
/// and every wait that spans it grows by as much. Zero on a machine that
/// is not virtual or whose hypervisor does not report it; zero too where
/// the file is missing (not Linux), which [`has_steal_clock`] tells apart.
pub fn stolen_time() -> Duration {
    read_steal().unwrap_or(Duration::ZERO)
}

/// Whether [`stolen_time`] reads anything: `/proc/stat` is there with its
/// steal column.
pub fn has_steal_clock() -> bool {
    static HAS: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *HAS.get_or_init(|| read_steal().is_some())
}

/// The process's CPU time and the host's steal at one moment, to measure
/// a stretch of work by both.
#[derive(Clone, Copy)]
pub struct Usage {
    cpu: Duration,
    stolen: Duration,
}

impl Usage {
    pub fn now() -> Usage {
        Usage { cpu: cpu_time(), stolen: stolen_time() }
    }

    /// (CPU time used, time stolen) since `self`. Saturating: the steal
    /// count is a hypervisor's figure read from a file, and should it ever
    /// go backwards the run must not panic.
    pub fn since(self) -> (Duration, Duration) {
        let now = Usage::now();
        (now.cpu.saturating_sub(self.cpu), now.stolen.saturating_sub(self.stolen))
    }
}

fn read_steal() -> Option<Duration> {
    static TICK_NS: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
    let tick_ns = *TICK_NS.get_or_init(|| {
        // SAFETY: sysconf has no preconditions; it returns -1 for an
        // unknown name, which the check below turns into the usual 100 Hz.
        let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
        1_000_000_000 / if hz > 0 { hz as u64 } else { 100 }
    });
    let stat = std::fs::read_to_string("/proc/stat").ok()?;
    // The first line sums every CPU: "cpu user nice system idle iowait irq
    // softirq steal ...".
    let line = stat.lines().next().filter(|l| l.starts_with("cpu "))?;
    let steal: u64 = line.split_whitespace().nth(8)?.parse().ok()?;
    Some(Duration::from_nanos(steal * tick_ns))
}
