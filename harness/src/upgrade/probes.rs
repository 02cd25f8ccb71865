//! Probes that run all through an upgrade run, each on its own task: the API server's `/readyz`,
//! and traffic through each load balancer of the workload where the cloud carries any. Each stage
//! reads what they saw while it ran ([`Probes::take`]): the worst gap between two answers (an
//! outage longer than the period shows as a gap that long), and how many tries failed.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::future::BoxFuture;

/// How often each probe tries.
pub const PERIOD: Duration = Duration::from_millis(500);
/// How long one try may take before it counts as failed.
const TRY_TIMEOUT: Duration = Duration::from_secs(3);

/// One try of a probe: `Ok` when it was answered as it should be.
pub type Try = Arc<dyn Fn() -> BoxFuture<'static, Result<(), String>> + Send + Sync>;

/// What one probe saw during a stage.
#[derive(Debug, Clone, PartialEq)]
pub struct Measured {
    pub name: String,
    /// The longest time between two answers (or from the stage's start or last answer to its end).
    pub worst_gap: Duration,
    pub tries: u32,
    pub failures: u32,
    /// The last failure's message, if any try failed.
    pub last_error: Option<String>,
}

/// A probe's record since the stage started; answers carry over stages (a gap spans them).
#[derive(Debug, Clone)]
struct Window {
    started: Instant,
    last_answer: Option<Instant>,
    worst_gap: Duration,
    tries: u32,
    failures: u32,
    last_error: Option<String>,
}

impl Window {
    fn new(now: Instant) -> Self {
        Window { started: now, last_answer: None, worst_gap: Duration::ZERO, tries: 0, failures: 0, last_error: None }
    }

    fn since(&self) -> Instant {
        self.last_answer.map_or(self.started, |last| last.max(self.started))
    }

    fn record(&mut self, at: Instant, result: Result<(), String>) {
        self.tries += 1;
        match result {
            Ok(()) => {
                self.worst_gap = self.worst_gap.max(at.saturating_duration_since(self.since()));
                self.last_answer = Some(at);
            }
            Err(error) => {
                self.failures += 1;
                self.last_error = Some(error);
            }
        }
    }

    /// What the window saw up to `now`, and a new window from `now` (the last answer kept).
    fn close(&mut self, name: &str, now: Instant) -> Measured {
        let open_gap = now.saturating_duration_since(self.since());
        let measured = Measured {
            name: name.to_owned(),
            worst_gap: self.worst_gap.max(open_gap),
            tries: self.tries,
            failures: self.failures,
            last_error: self.last_error.clone(),
        };
        let last_answer = self.last_answer;
        *self = Window::new(now);
        self.last_answer = last_answer;
        measured
    }
}

struct Probe {
    name: String,
    window: Window,
}

/// The probes of a run, running until dropped.
pub struct Probes {
    probes: Arc<Mutex<Vec<Probe>>>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl Probes {
    /// Starts a task per `(name, try)`, each trying every [`PERIOD`].
    pub fn start(probes: Vec<(String, Try)>) -> Self {
        let now = Instant::now();
        let records: Vec<Probe> =
            probes.iter().map(|(name, _)| Probe { name: name.clone(), window: Window::new(now) }).collect();
        let records = Arc::new(Mutex::new(records));
        let tasks = probes
            .into_iter()
            .enumerate()
            .map(|(index, (_, attempt))| {
                let records = records.clone();
                tokio::spawn(async move {
                    loop {
                        let started = Instant::now();
                        let result = match tokio::time::timeout(TRY_TIMEOUT, attempt()).await {
                            Ok(result) => result,
                            Err(_) => Err(format!("no answer within {TRY_TIMEOUT:?}")),
                        };
                        records.lock().expect("probe records")[index].window.record(Instant::now(), result);
                        tokio::time::sleep(PERIOD.saturating_sub(started.elapsed())).await;
                    }
                })
            })
            .collect();
        Probes { probes: records, tasks }
    }

    /// What each probe saw since the last call (or its start); the next call measures from now.
    pub fn take(&self) -> Vec<Measured> {
        let now = Instant::now();
        let mut probes = self.probes.lock().expect("probe records");
        probes.iter_mut().map(|probe| probe.window.close(&probe.name, now)).collect()
    }

    /// The probes' names, in order.
    pub fn names(&self) -> Vec<String> {
        self.probes.lock().expect("probe records").iter().map(|p| p.name.clone()).collect()
    }
}

impl Drop for Probes {
    fn drop(&mut self) {
        for task in &self.tasks {
            task.abort();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn the_worst_gap_is_the_longest_time_between_answers_and_an_outage_at_the_end_counts() {
        let t0 = Instant::now();
        let mut window = Window::new(t0);
        window.record(t0 + ms(500), Ok(()));
        window.record(t0 + ms(1000), Err("refused".into()));
        window.record(t0 + ms(1500), Err("refused".into()));
        window.record(t0 + ms(3500), Ok(()));
        window.record(t0 + ms(4000), Ok(()));
        let measured = window.close("api", t0 + ms(4200));
        assert_eq!(measured.worst_gap, ms(3000), "from 0.5 s to 3.5 s without an answer");
        assert_eq!((measured.tries, measured.failures), (5, 2));
        assert_eq!(measured.last_error.as_deref(), Some("refused"));

        // The next stage starts from the close, with the last answer carried over: a stage that
        // ends in an outage reports it up to its end.
        window.record(t0 + ms(4500), Err("timeout".into()));
        let measured = window.close("api", t0 + ms(9200));
        assert_eq!(measured.worst_gap, ms(5000), "no answer from the close at 4.2 s to 9.2 s");
        assert_eq!((measured.tries, measured.failures), (1, 1));
    }

    #[test]
    fn a_gap_spanning_two_stages_counts_in_the_second_from_its_start_not_from_the_last_answer() {
        let t0 = Instant::now();
        let mut window = Window::new(t0);
        window.record(t0 + ms(100), Ok(()));
        let first = window.close("lb", t0 + ms(2100));
        assert_eq!(first.worst_gap, ms(2000));
        window.record(t0 + ms(2600), Ok(()));
        let second = window.close("lb", t0 + ms(2700));
        assert_eq!(second.worst_gap, ms(500), "measured from the second stage's start at 2.1 s");
    }

    #[tokio::test]
    async fn probes_running_on_their_own_tasks_record_answers_and_failures() {
        let flips = Arc::new(std::sync::atomic::AtomicU32::new(0));
        let flaky: Try = {
            let flips = flips.clone();
            Arc::new(move || {
                let n = flips.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                Box::pin(async move { if n.is_multiple_of(2) { Ok(()) } else { Err(format!("try {n} refused")) } })
            })
        };
        let always: Try = Arc::new(|| Box::pin(async { Ok(()) }));
        let probes = Probes::start(vec![("flaky".into(), flaky), ("always".into(), always)]);
        tokio::time::sleep(PERIOD * 4 + ms(200)).await;
        let measured = probes.take();
        assert_eq!(probes.names(), ["flaky", "always"]);
        let (flaky, always) = (&measured[0], &measured[1]);
        assert!(flaky.tries >= 4 && flaky.failures >= 2, "{flaky:?}");
        assert!(flaky.last_error.as_deref().is_some_and(|e| e.ends_with("refused")), "{flaky:?}");
        assert!(flaky.worst_gap >= PERIOD * 2 - ms(50), "every other try fails: {flaky:?}");
        assert_eq!(always.failures, 0, "{always:?}");
        assert!(always.worst_gap < flaky.worst_gap, "{always:?} vs {flaky:?}");
    }
}
