//! What the benchmarks measure with: the timing options, CPU time per process, medians.

use std::time::Duration;

/// Shared timing options.
#[derive(Debug, Clone, clap::Args)]
pub struct Timing {
    /// Seconds each measured cell runs.
    #[arg(long, default_value_t = 4.0)]
    pub seconds: f64,
    /// Rounds; the modes run interleaved in each round, in a rotating order, so drift of the
    /// machine hits every mode alike.
    #[arg(long, default_value_t = 3)]
    pub rounds: usize,
    /// Concurrent clients, comma separated.
    #[arg(long, value_delimiter = ',', default_values_t = [1usize, 4, 16])]
    pub clients: Vec<usize>,
}

impl Timing {
    /// The measured duration of one cell.
    pub fn cell(&self) -> Duration {
        Duration::from_secs_f64(self.seconds.max(0.05))
    }
}

/// CPU time so far of every thread of process `pid` (`self` for this one), from
/// `/proc/<pid>/task/*/schedstat`; `None` when the process cannot be read.
pub fn task_cpu(pid: &str) -> Option<std::time::Duration> {
    let mut total = 0u64;
    for task in std::fs::read_dir(format!("/proc/{pid}/task")).ok()? {
        let Ok(text) = std::fs::read_to_string(task.ok()?.path().join("schedstat")) else {
            continue; // the thread ended meanwhile
        };
        total += text.split_whitespace().next()?.parse::<u64>().ok()?;
    }
    Some(std::time::Duration::from_nanos(total))
}

/// The value at fraction `p` (0.5: the median, 0.99) of `sorted`; zero when it is empty.
pub fn percentile(sorted: &[Duration], p: f64) -> Duration {
    #[allow(
        clippy::cast_precision_loss,
        clippy::cast_possible_truncation,
        clippy::cast_sign_loss
    )]
    let index = ((sorted.len().max(1) - 1) as f64 * p).round() as usize;
    sorted.get(index).copied().unwrap_or_default()
}

/// The median of `values` (sorted in place); `None` when there are none.
pub fn median(values: &mut [f64]) -> Option<f64> {
    values.sort_by(f64::total_cmp);
    match values.len() {
        0 => None,
        n if n % 2 == 1 => Some(values[n / 2]),
        n => Some(f64::midpoint(values[n / 2 - 1], values[n / 2])),
    }
}

/// `clients` tasks, each calling `op` over and over until `duration` has passed: the calls
/// completed in all, and the time it took (a benchmark's measured cell).
///
/// # Errors
/// The first error of a call, or a task that panicked.
pub async fn concurrently<F, Fut>(
    clients: usize,
    duration: Duration,
    op: F,
) -> Result<(u64, Duration), Box<dyn std::error::Error + Send + Sync>>
where
    F: Fn() -> Fut + Clone + Send + 'static,
    Fut: std::future::Future<Output = Result<(), Box<dyn std::error::Error + Send + Sync>>> + Send,
{
    let start = std::time::Instant::now();
    let deadline = start + duration;
    let mut tasks = Vec::with_capacity(clients);
    for _ in 0..clients {
        let op = op.clone();
        tasks.push(tokio::spawn(async move {
            let mut done = 0_u64;
            while std::time::Instant::now() < deadline {
                op().await?;
                done += 1;
            }
            Ok::<_, Box<dyn std::error::Error + Send + Sync>>(done)
        }));
    }
    let mut total = 0;
    for task in tasks {
        total += task.await??;
    }
    Ok((total, start.elapsed()))
}
