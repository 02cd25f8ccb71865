//! A run's last step: its build published to the store and the index, tried again while they
//! cannot be reached; and when it still cannot be, the build kept in its directory with the
//! `harness publish` command that publishes it later.
//!
//! An attempt is [`publish::publish`], which is safe to repeat: it writes only what the store lacks
//! and indexes the build once, so an attempt cut short anywhere (the store written, the index not)
//! is completed by the next one, or by `harness publish`. Each attempt's requests are retried by
//! the store's client already (connection failures and 5xx: up to 10 retries with backoff), and the
//! index waits up to a minute for a connection; what fails all the same is tried again here when
//! waiting may heal it ([`PublishError::is_transient`]: the store or the database down, busy or
//! restarting), after 1, 2, 4, 8 and 16 seconds ([`DEFAULT_RETRIES`], `--publish-retries`). A
//! SIGINT or SIGTERM stops publishing at once.

use std::fmt;
use std::future::Future;
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::time::Duration;

use cli_support::signals::{self, StopSignal};
use results::index::Index;
use results::layout::BuildLocation;
use results::publish::{self, PublishError};
use results::record::{ReadBuildOptions, Unfinished};
use results::store::ResultStore;

use crate::deploy::command::quote;

/// The waits before each retry of a publish that failed on a store or index that could not be
/// reached: 31 seconds in all, past the store client's and the index pool's own waits.
pub const DEFAULT_RETRIES: [Duration; 5] = [
    Duration::from_secs(1),
    Duration::from_secs(2),
    Duration::from_secs(4),
    Duration::from_secs(8),
    Duration::from_secs(16),
];

/// `--publish-retries`: the waits before each retry of publishing, comma-separated (`1s,2s,4s`),
/// or `none`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PublishRetries(pub Vec<Duration>);

impl Default for PublishRetries {
    fn default() -> Self {
        PublishRetries(DEFAULT_RETRIES.to_vec())
    }
}

impl FromStr for PublishRetries {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        if text.trim() == "none" {
            return Ok(PublishRetries(Vec::new()));
        }
        let wait = |wait: &str| {
            humantime::parse_duration(wait.trim())
                .map_err(|e| format!("{wait:?}: {e} (give the waits before each retry, e.g. 1s,2s,4s, or none)"))
        };
        text.split(',').map(wait).collect::<Result<_, _>>().map(PublishRetries)
    }
}

impl fmt::Display for PublishRetries {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0.is_empty() {
            return f.write_str("none");
        }
        let waits: Vec<String> = self.0.iter().map(|wait| humantime::format_duration(*wait).to_string()).collect();
        f.write_str(&waits.join(","))
    }
}

/// Why a run's build was not published, and how to publish it later.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NotPublished {
    /// Why the last attempt failed, or that a signal stopped publishing.
    pub error: String,
    /// Attempts made, the first included.
    pub attempts: usize,
    /// Whether the error was one waiting may heal (and so was retried).
    pub transient: bool,
    /// The signal that stopped publishing, if one did.
    pub interrupted: Option<StopSignal>,
    /// What publishes the build later, from the directory it is kept in.
    pub later: PublishCommand,
}

impl fmt::Display for NotPublished {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.error)?;
        match (self.interrupted, self.transient, self.attempts) {
            (Some(_), _, _) => Ok(()),
            (None, false, _) => f.write_str(" (not retried: waiting would not change it)"),
            (None, true, 1) => Ok(()),
            (None, true, attempts) => write!(f, " ({attempts} attempts)"),
        }
    }
}

/// `harness publish` for a build directory, every flag spelled out, so that it works pasted into a
/// shell in any directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PublishCommand {
    /// The build directory, absolute.
    pub dir: PathBuf,
    /// The command, its arguments quoted for a POSIX shell.
    pub command: String,
    /// What the command takes from the environment that it cannot show, if anything: the store's
    /// credentials, the database's password.
    pub needs: Option<String>,
}

impl PublishCommand {
    /// The command in backquotes, for a line of text, followed by what it needs, if anything.
    pub fn quoted(&self) -> String {
        match &self.needs {
            Some(needs) => format!("`{}` (with {needs})", self.command),
            None => format!("`{}`", self.command),
        }
    }
}

impl fmt::Display for PublishCommand {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.command)
    }
}

/// The `harness publish` command for the build in `dir` (`job` and `build`, when known), to the
/// store and the database a run was given. A store directory and a SQLite file are made absolute. A
/// database URL holding a password is never printed: the command reads it from `DATABASE_URL`
/// (`--database "$DATABASE_URL"`), and [`PublishCommand::needs`] names the URL with the password
/// masked, and says whether this run's `DATABASE_URL` (`env_database`) already holds it.
pub fn publish_command(
    dir: &Path,
    job: Option<&str>,
    build: Option<&str>,
    store: &str,
    database: &str,
    env_database: Option<&str>,
) -> PublishCommand {
    let dir = std::path::absolute(dir).unwrap_or_else(|_| dir.to_path_buf());
    let mut words = vec!["harness publish --dir".to_owned(), quote(&dir.display().to_string())];
    for (flag, value) in [("--job", job), ("--build", build)] {
        if let Some(value) = value {
            words.extend([flag.to_owned(), quote(value)]);
        }
    }
    words.extend(["--store".to_owned(), quote(&absolute_store(store))]);
    let mut needs = Vec::new();
    if store.starts_with("s3://") {
        needs.push("the store's AWS_* settings (credentials, AWS_ENDPOINT) as this run had them".to_owned());
    } else if store.starts_with("gs://") {
        needs.push(
            "the store's GOOGLE_APPLICATION_CREDENTIALS (or STORAGE_EMULATOR_HOST) as this run had them".to_owned(),
        );
    }
    match redacted(database) {
        None => words.extend(["--database".to_owned(), quote(&absolute_sqlite(database))]),
        Some(masked) => {
            words.push(r#"--database "$DATABASE_URL""#.to_owned());
            needs.push(if env_database == Some(database) {
                format!("DATABASE_URL as this run had it ({masked})")
            } else {
                format!("DATABASE_URL set to {masked}, with the password shown as ***")
            });
        }
    }
    PublishCommand { dir, command: words.join(" "), needs: (!needs.is_empty()).then(|| needs.join("; ")) }
}

/// A directory store's path made absolute; any other store URL as it is.
fn absolute_store(store: &str) -> String {
    if store.contains("://") && !store.starts_with("file://") {
        return store.to_owned();
    }
    let path = store.strip_prefix("file://").unwrap_or(store);
    match std::path::absolute(path) {
        Ok(path) => format!("file://{}", path.display()),
        Err(_) => store.to_owned(),
    }
}

/// A `sqlite:` URL's file made absolute (`sqlite://index.sqlite` → `sqlite:///work/index.sqlite`);
/// any other URL as it is.
fn absolute_sqlite(url: &str) -> String {
    let Some(rest) = url.strip_prefix("sqlite:") else { return url.to_owned() };
    let path = rest.trim_start_matches("//");
    let (file, query) = path.split_once('?').map_or((path, None), |(file, query)| (file, Some(query)));
    if file.is_empty() || file == ":memory:" || Path::new(file).is_absolute() {
        return url.to_owned();
    }
    let Ok(file) = std::path::absolute(file) else { return url.to_owned() };
    match query {
        Some(query) => format!("sqlite://{}?{query}", file.display()),
        None => format!("sqlite://{}", file.display()),
    }
}

/// The URL with its password shown as `***` (`user:password@`, a `password=` parameter), or `None`
/// when it holds none.
fn redacted(url: &str) -> Option<String> {
    let (scheme, rest) = url.split_once("://")?;
    let (before_query, query) = rest.split_once('?').map_or((rest, None), |(b, q)| (b, Some(q)));
    let (authority, path) = before_query.split_once('/').map_or((before_query, None), |(a, p)| (a, Some(p)));
    let mut found = false;
    let authority = match authority.rsplit_once('@') {
        Some((userinfo, host)) if userinfo.contains(':') => {
            found = true;
            let user = userinfo.split(':').next().unwrap_or_default();
            format!("{user}:***@{host}")
        }
        _ => authority.to_owned(),
    };
    let query = query.map(|query| {
        let params: Vec<String> = query
            .split('&')
            .map(|param| match param.split_once('=') {
                Some((name, _)) if name.eq_ignore_ascii_case("password") => {
                    found = true;
                    format!("{name}=***")
                }
                _ => param.to_owned(),
            })
            .collect();
        params.join("&")
    });
    let mut masked = format!("{scheme}://{authority}");
    if let Some(path) = path {
        masked.push('/');
        masked.push_str(path);
    }
    if let Some(query) = query {
        masked.push('?');
        masked.push_str(&query);
    }
    found.then_some(masked)
}

/// Publishes the build in `dir` as `location`, retried after each of `retries` while the error is
/// one waiting may heal; the URL it was published at, or why not and how to publish it later.
pub(crate) async fn publish_or_keep(
    store: &ResultStore,
    index: &Index,
    dir: &Path,
    location: &BuildLocation,
    retries: &PublishRetries,
    database: &str,
) -> Result<String, NotPublished> {
    // Whoever publishes a run's directory has seen the run end: no finished.json means it was killed.
    let options = ReadBuildOptions { unfinished: Unfinished::Aborted, ..ReadBuildOptions::default() };
    let attempt = || publish::publish(store, index, dir, location, &options);
    match retrying(&retries.0, attempt, PublishError::is_transient, signals::until_signal()).await {
        Ok((published, attempts)) => {
            if attempts > 1 {
                tracing::info!("published {} on attempt {attempts}", published.url);
            }
            Ok(published.url)
        }
        Err(failed) => {
            let env_database = std::env::var("DATABASE_URL").ok();
            let later = publish_command(
                dir,
                Some(location.job()),
                Some(location.build()),
                store.url(),
                database,
                env_database.as_deref(),
            );
            tracing::error!("the build was not published: {}; it is kept in {}", failed.error, later.dir.display());
            Err(NotPublished {
                error: failed.error,
                attempts: failed.attempts,
                transient: failed.transient,
                interrupted: failed.interrupted,
                later,
            })
        }
    }
}

/// How [`retrying`] gave up.
#[derive(Debug, PartialEq, Eq)]
struct GaveUp {
    error: String,
    attempts: usize,
    transient: bool,
    interrupted: Option<StopSignal>,
}

/// Runs `attempt` until it succeeds, or fails with an error `transient` says waiting will not heal,
/// or `waits` (one before each retry) are spent; `stop` ending (a signal) stops it at once. The
/// value and the attempts it took, or why it gave up.
async fn retrying<T, E: std::error::Error + 'static, Fut: Future<Output = Result<T, E>>>(
    waits: &[Duration],
    mut attempt: impl FnMut() -> Fut,
    transient: impl Fn(&E) -> bool,
    stop: impl Future<Output = StopSignal>,
) -> Result<(T, usize), GaveUp> {
    tokio::pin!(stop);
    let total = waits.len() + 1;
    let mut waits = waits.iter();
    let mut last: Option<String> = None;
    let mut attempts = 0;
    loop {
        attempts += 1;
        let interrupted = |signal: StopSignal, last: Option<String>| GaveUp {
            error: match last {
                Some(error) => format!("publishing was stopped by {signal}; the last attempt failed: {error}"),
                None => format!("publishing was stopped by {signal}"),
            },
            attempts,
            transient: true,
            interrupted: Some(signal),
        };
        let error = tokio::select! {
            result = attempt() => match result {
                Ok(value) => return Ok((value, attempts)),
                Err(error) => error,
            },
            signal = &mut stop => return Err(interrupted(signal, last)),
        };
        let healable = transient(&error);
        let error = with_root_cause(&error);
        let Some(wait) = waits.next().filter(|_| healable) else {
            return Err(GaveUp { error, attempts, transient: healable, interrupted: None });
        };
        tracing::warn!(
            "publishing failed (attempt {attempts} of {total}): {error}; retrying in {}",
            humantime::format_duration(*wait)
        );
        last = Some(error);
        tokio::select! {
            () = tokio::time::sleep(*wait) => {}
            signal = &mut stop => return Err(interrupted(signal, last)),
        }
    }
}

/// An error's message, ending with its root cause when the message leaves that out (an S3
/// client's "error sending request" is a "Connection refused (os error 111)").
fn with_root_cause(error: &(dyn std::error::Error + 'static)) -> String {
    let message = error.to_string();
    let mut root = error;
    while let Some(source) = root.source() {
        root = source;
    }
    let cause = root.to_string();
    if message.contains(&cause) { message } else { format!("{message}: {cause}") }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::run::steps::StepResult;
    use std::sync::atomic::{AtomicUsize, Ordering};

    #[test]
    fn the_default_schedule_waits_1_2_4_8_16_seconds_and_can_be_shortened_or_turned_off() {
        let default = PublishRetries::default();
        assert_eq!(default.to_string(), "1s,2s,4s,8s,16s");
        assert_eq!(default.0.iter().sum::<Duration>(), Duration::from_secs(31));
        assert_eq!("1s,2s,4s,8s,16s".parse::<PublishRetries>().unwrap(), default);
        assert_eq!(
            "200ms, 1s".parse::<PublishRetries>().unwrap().0,
            [Duration::from_millis(200), Duration::from_secs(1)]
        );
        assert_eq!("none".parse::<PublishRetries>().unwrap(), PublishRetries(Vec::new()));
        assert_eq!(PublishRetries(Vec::new()).to_string(), "none");
        for bad in ["", "1s,", "soon", "-1s"] {
            let error = bad.parse::<PublishRetries>().unwrap_err();
            assert!(error.contains("e.g. 1s,2s,4s, or none"), "{bad:?}: {error}");
        }
    }

    /// An attempt's failure, and whether waiting heals it.
    #[derive(Debug, Clone, Copy)]
    struct Fault(&'static str, bool);

    impl fmt::Display for Fault {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str(self.0)
        }
    }

    impl std::error::Error for Fault {}

    fn heals(fault: &Fault) -> bool {
        fault.1
    }

    const DOWN: Fault = Fault("store down", true);

    #[tokio::test(start_paused = true)]
    async fn transient_failures_are_retried_after_each_wait_until_one_succeeds() {
        let calls = AtomicUsize::new(0);
        let attempt = || async {
            match calls.fetch_add(1, Ordering::SeqCst) {
                0 | 1 => Err(DOWN),
                _ => Ok("published"),
            }
        };
        let started = tokio::time::Instant::now();
        let outcome = retrying(&PublishRetries::default().0, attempt, heals, std::future::pending()).await;
        assert_eq!(outcome, Ok(("published", 3)));
        assert_eq!(started.elapsed(), Duration::from_secs(3), "waited 1s, then 2s");
    }

    #[tokio::test(start_paused = true)]
    async fn retries_end_when_the_waits_are_spent_or_at_an_error_waiting_cannot_heal() {
        let failing = |fault: Fault| move || async move { Err::<(), _>(fault) };
        let waits = PublishRetries::default().0;
        let started = tokio::time::Instant::now();
        let spent = retrying(&waits, failing(DOWN), heals, std::future::pending()).await;
        assert_eq!(spent, Err(GaveUp { error: "store down".into(), attempts: 6, transient: true, interrupted: None }));
        assert_eq!(started.elapsed(), Duration::from_secs(31));

        let started = tokio::time::Instant::now();
        let permanent = retrying(&waits, failing(Fault("bad layout", false)), heals, std::future::pending()).await;
        assert_eq!(
            permanent,
            Err(GaveUp { error: "bad layout".into(), attempts: 1, transient: false, interrupted: None })
        );
        assert_eq!(started.elapsed(), Duration::ZERO, "not retried");
        let none = retrying(&[], failing(DOWN), heals, std::future::pending()).await;
        assert_eq!(none.unwrap_err().attempts, 1);
    }

    #[tokio::test(start_paused = true)]
    async fn a_signal_stops_the_retries_at_once() {
        let attempt = || async { Err::<(), _>(DOWN) };
        let stop = async {
            tokio::time::sleep(Duration::from_millis(1500)).await;
            StopSignal::Interrupt
        };
        let started = tokio::time::Instant::now();
        let outcome = retrying(&PublishRetries::default().0, attempt, heals, stop).await.unwrap_err();
        assert_eq!((outcome.attempts, outcome.interrupted), (2, Some(StopSignal::Interrupt)));
        assert!(outcome.error.contains("stopped by SIGINT; the last attempt failed: store down"), "{}", outcome.error);
        assert_eq!(started.elapsed(), Duration::from_millis(1500), "in the middle of the second wait");
    }

    #[test]
    fn a_message_that_hides_its_root_cause_gets_it_appended() {
        #[derive(Debug)]
        struct Vague(std::io::Error);
        impl fmt::Display for Vague {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("HTTP error: error sending request")
            }
        }
        impl std::error::Error for Vague {
            fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
                Some(&self.0)
            }
        }
        let refused = std::io::Error::new(std::io::ErrorKind::ConnectionRefused, "Connection refused (os error 111)");
        assert_eq!(
            with_root_cause(&Vague(refused)),
            "HTTP error: error sending request: Connection refused (os error 111)"
        );
        assert_eq!(with_root_cause(&DOWN), "store down", "no cause, nothing added");
    }

    #[test]
    fn the_command_spells_out_every_flag_with_absolute_paths() {
        let cwd = std::env::current_dir().unwrap();
        let command = publish_command(
            Path::new("_artifacts"),
            Some("ci-cloud-provider-local-k8s-1.37"),
            Some("1700000000123"),
            "results dir",
            "sqlite://index.sqlite",
            None,
        );
        let expected = format!(
            "harness publish --dir {dir} --job ci-cloud-provider-local-k8s-1.37 --build 1700000000123 --store 'file://{cwd}/results dir' --database sqlite://{cwd}/index.sqlite",
            dir = cwd.join("_artifacts").display(),
            cwd = cwd.display(),
        );
        assert_eq!(command.command, expected);
        assert_eq!((command.dir, command.needs), (cwd.join("_artifacts"), None));

        let command = publish_command(
            Path::new("/b"),
            None,
            None,
            "file:///srv/results",
            "sqlite:///var/index.sqlite?mode=rwc",
            None,
        );
        assert_eq!(
            command.command,
            "harness publish --dir /b --store file:///srv/results --database 'sqlite:///var/index.sqlite?mode=rwc'"
        );
        let s3 = publish_command(Path::new("/b"), None, None, "s3://bucket/ci", "postgres://harness@db/results", None);
        assert!(s3.command.ends_with("--store s3://bucket/ci --database postgres://harness@db/results"), "{s3}");
        assert!(s3.needs.unwrap().contains("AWS_*"));
    }

    #[test]
    fn a_database_password_is_never_printed_and_the_command_reads_it_from_database_url() {
        let url = "postgres://harness:s3cret@db.example:5432/results?sslmode=require";
        let flag = publish_command(Path::new("/b"), Some("j"), Some("1"), "gs://ci", url, None);
        assert_eq!(
            flag.command,
            r#"harness publish --dir /b --job j --build 1 --store gs://ci --database "$DATABASE_URL""#
        );
        let needs = flag.needs.unwrap();
        assert!(!needs.contains("s3cret") && needs.contains("GOOGLE_APPLICATION_CREDENTIALS"), "{needs}");
        assert!(
            needs.contains(
                "DATABASE_URL set to postgres://harness:***@db.example:5432/results?sslmode=require, with the password shown as ***"
            ),
            "{needs}"
        );
        let env = publish_command(Path::new("/b"), Some("j"), Some("1"), "/s", url, Some(url)).needs.unwrap();
        assert!(env.contains("DATABASE_URL as this run had it (postgres://harness:***@db"), "{env}");

        let in_query = "postgres://db/results?user=harness&password=s3cret&sslmode=require";
        let masked = publish_command(Path::new("/b"), None, None, "/s", in_query, None);
        assert!(masked.command.ends_with(r#"--database "$DATABASE_URL""#), "{masked}");
        assert!(masked.needs.as_deref().unwrap().contains("?user=harness&password=***&sslmode"), "{masked:?}");
        assert_eq!(redacted("postgres://harness@db/results"), None, "no password, nothing masked");
        assert_eq!(redacted("sqlite:///var/index.sqlite"), None);
    }

    #[test]
    fn a_run_not_published_fails_with_the_command_whatever_else_failed() {
        let later = publish_command(Path::new("/ci/_artifacts"), Some("j"), Some("7"), "/s", "sqlite:///i", None);
        let not = NotPublished { error: "store down".into(), attempts: 6, transient: true, interrupted: None, later };
        let step = |result| crate::run::steps::Step {
            name: "Test".into(),
            result,
            duration: Duration::ZERO,
            properties: Vec::new(),
        };
        let report = |steps, published| crate::run::RunReport {
            job: "j".into(),
            build: "7".into(),
            kubernetes_version: "v1.37.1".into(),
            passed: true,
            interrupted: None,
            steps,
            build_dir: "/ci/_artifacts".into(),
            published,
        };
        let command =
            "`harness publish --dir /ci/_artifacts --job j --build 7 --store file:///s --database sqlite:///i`";
        let passed = report(vec![step(StepResult::Passed)], Err(not.clone())).failure().unwrap();
        assert_eq!(
            passed,
            format!(
                "the build ran but was not published: store down (6 attempts); it is kept in /ci/_artifacts: publish it with {command}"
            )
        );
        let failed = report(vec![step(StepResult::Failed("2 tests failed".into()))], Err(not)).failure().unwrap();
        assert!(failed.starts_with("step Test failed: 2 tests failed; and the build was not published: "), "{failed}");
        assert!(failed.ends_with(command), "{failed}");
        assert_eq!(report(vec![step(StepResult::Passed)], Ok("file:///s/logs/j/7".into())).failure(), None);
    }

    #[test]
    fn the_message_says_how_many_attempts_and_whether_it_was_retried() {
        let later = publish_command(Path::new("/b"), None, None, "/s", "sqlite:///i", None);
        let not = |attempts, transient| NotPublished {
            error: "cannot reach the store".into(),
            attempts,
            transient,
            interrupted: None,
            later: later.clone(),
        };
        assert_eq!(not(6, true).to_string(), "cannot reach the store (6 attempts)");
        assert_eq!(not(1, true).to_string(), "cannot reach the store");
        assert_eq!(not(1, false).to_string(), "cannot reach the store (not retried: waiting would not change it)");
    }
}
