//! The provider's test hooks: commands cloud-e2e runs to act on the cloud behind Kubernetes' back
//! (terminate, shut down or start the instance of a node; list the cloud's load balancers; dial a
//! load balancer from a client of the cloud's network).
//!
//! A hook that cannot start, exits non-zero or outlives its timeout fails the test that called it,
//! and only that test: its process group is killed at the deadline.

use std::process::Stdio;
use std::time::Duration;

use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;
use tokio::io::AsyncReadExt;

use crate::suites::exec::{GroupGuard, go_exit_text};
use config::template::{Placeholder, Vars};
use config::{Hook, Hooks};

/// How much of a hook's stdout is kept (a load balancer listing of a big account is long).
const MAX_STDOUT: u64 = 16 << 20;
/// How much of its stderr a failure message quotes.
const STDERR_TAIL: usize = 600;

/// The hooks of `providers.yaml`, by their key there.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HookKind {
    TerminateInstance,
    ShutdownInstance,
    StartInstance,
    ListLoadBalancers,
    ProbeLoadBalancer,
}

impl HookKind {
    pub fn as_str(self) -> &'static str {
        match self {
            HookKind::TerminateInstance => "terminate_instance",
            HookKind::ShutdownInstance => "shutdown_instance",
            HookKind::StartInstance => "start_instance",
            HookKind::ListLoadBalancers => "list_load_balancers",
            HookKind::ProbeLoadBalancer => "probe_load_balancer",
        }
    }

    fn of(self, hooks: &Hooks) -> Option<&Hook> {
        match self {
            HookKind::TerminateInstance => hooks.terminate_instance.as_ref(),
            HookKind::ShutdownInstance => hooks.shutdown_instance.as_ref(),
            HookKind::StartInstance => hooks.start_instance.as_ref(),
            HookKind::ListLoadBalancers => hooks.list_load_balancers.as_ref(),
            HookKind::ProbeLoadBalancer => hooks.probe_load_balancer.as_ref(),
        }
    }
}

/// Runs the hooks with the run's placeholder values.
#[derive(Debug, Clone, Default)]
pub struct HookRunner {
    hooks: Hooks,
    vars: Vars,
}

impl HookRunner {
    pub fn new(hooks: Hooks, vars: Vars) -> Self {
        HookRunner { hooks, vars }
    }

    pub fn has(&self, kind: HookKind) -> bool {
        kind.of(&self.hooks).is_some()
    }

    /// Runs hook `kind` (for `node`, in the instance hooks) and returns its stdout; the error
    /// says which hook, its command line, and how it failed.
    pub async fn run(&self, kind: HookKind, node: Option<&str>) -> Result<String, String> {
        self.run_with(kind, node, &[]).await
    }

    /// [`HookRunner::run`] with `extra` arguments appended to the hook's command line.
    pub async fn run_with(&self, kind: HookKind, node: Option<&str>, extra: &[String]) -> Result<String, String> {
        let hook = kind.of(&self.hooks).ok_or_else(|| format!("the provider declares no `{}` hook", kind.as_str()))?;
        let mut vars = self.vars.clone();
        if let Some(node) = node {
            vars.insert(Placeholder::Node, node.to_owned());
        }
        let (mut argv, env) = hook.command.render(&vars).map_err(|e| format!("hook {}: {e}", kind.as_str()))?;
        argv.extend_from_slice(extra);
        run_command(kind.as_str(), &argv, &env, hook.timeout).await
    }
}

/// Runs `argv` with its own process group, stdout captured, stopped at `timeout`.
pub async fn run_command(
    hook: &str,
    argv: &[String],
    env: &std::collections::BTreeMap<String, String>,
    timeout: Duration,
) -> Result<String, String> {
    let shown = argv.join(" ");
    let Some((program, args)) = argv.split_first() else { return Err(format!("hook {hook}: the command is empty")) };
    let mut command = tokio::process::Command::new(program);
    command
        .args(args)
        .envs(env)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .kill_on_drop(true);
    cli_support::signals::with_default_signals_async(&mut command);
    let mut child = command.spawn().map_err(|e| {
        let why = match e.kind() {
            std::io::ErrorKind::NotFound => "not found (no such file, and not on PATH)".to_owned(),
            std::io::ErrorKind::PermissionDenied => "not executable (permission denied)".to_owned(),
            _ => e.to_string(),
        };
        format!("hook {hook}: cannot start `{program}`: {why}")
    })?;
    let group = Pid::from_raw(child.id().expect("a child just spawned has a pid") as i32);
    let mut guard = GroupGuard(Some(group));
    let mut stdout = child.stdout.take().expect("stdout is piped").take(MAX_STDOUT);
    let mut stderr = child.stderr.take().expect("stderr is piped").take(MAX_STDOUT);
    let work = async {
        let (mut out, mut err) = (Vec::new(), Vec::new());
        let (read_out, read_err, status) =
            tokio::join!(stdout.read_to_end(&mut out), stderr.read_to_end(&mut err), child.wait());
        read_out.and(read_err).map_err(|e| format!("hook {hook}: reading its output: {e}"))?;
        let status = status.map_err(|e| format!("hook {hook}: waiting for `{program}`: {e}"))?;
        Ok::<_, String>((status, out, err))
    };
    let outcome = tokio::time::timeout(timeout, work).await;
    // Whatever the hook left running in its group goes with it.
    let _ = killpg(group, Signal::SIGKILL);
    guard.0 = None;
    let (status, out, err) = match outcome {
        Ok(result) => result?,
        Err(_) => {
            return Err(format!(
                "hook {hook} (`{shown}`) did not finish within {}; it was killed",
                humantime::format_duration(timeout)
            ));
        }
    };
    if !status.success() {
        let err = String::from_utf8_lossy(&err);
        let tail = tail(err.trim(), STDERR_TAIL);
        return Err(format!("hook {hook} (`{shown}`) failed: {}: {tail}", go_exit_text(status)));
    }
    Ok(String::from_utf8_lossy(&out).into_owned())
}

fn tail(text: &str, max: usize) -> &str {
    if text.len() <= max {
        return text;
    }
    let mut start = text.len() - max;
    while !text.is_char_boundary(start) {
        start += 1;
    }
    &text[start..]
}

/// The entries of a `list_load_balancers` hook's output: the items of a JSON array (each as compact
/// JSON), or else its non-empty lines.
pub fn load_balancer_entries(stdout: &str) -> Vec<String> {
    if let Ok(serde_json::Value::Array(items)) = serde_json::from_str::<serde_json::Value>(stdout) {
        return items.iter().map(|item| item.to_string()).collect();
    }
    stdout.lines().map(str::trim).filter(|line| !line.is_empty()).map(str::to_owned).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use config::CommandSpec;

    fn hook(argv: &[&str], timeout: Duration) -> Hook {
        Hook {
            command: CommandSpec { argv: argv.iter().map(|s| s.to_string()).collect(), ..CommandSpec::default() },
            timeout,
        }
    }

    fn runner(kind: HookKind, hook: Hook) -> HookRunner {
        let mut hooks = Hooks::default();
        match kind {
            HookKind::TerminateInstance => hooks.terminate_instance = Some(hook),
            HookKind::ShutdownInstance => hooks.shutdown_instance = Some(hook),
            HookKind::StartInstance => hooks.start_instance = Some(hook),
            HookKind::ListLoadBalancers => hooks.list_load_balancers = Some(hook),
            HookKind::ProbeLoadBalancer => hooks.probe_load_balancer = Some(hook),
        }
        HookRunner::new(hooks, Vars::new())
    }

    #[tokio::test]
    async fn a_probe_hook_gets_the_dial_appended() {
        let runner = runner(HookKind::ProbeLoadBalancer, hook(&["echo", "probe"], Duration::from_secs(5)));
        let extra = ["--ip".to_owned(), "10.250.1.1".to_owned()];
        let answer = runner.run_with(HookKind::ProbeLoadBalancer, None, &extra).await.unwrap();
        assert_eq!(answer, "probe --ip 10.250.1.1\n");
    }

    #[tokio::test]
    async fn a_hook_gets_its_node_and_its_stdout_is_returned() {
        let runner = runner(HookKind::ShutdownInstance, hook(&["echo", "stopping {node}"], Duration::from_secs(5)));
        assert_eq!(runner.run(HookKind::ShutdownInstance, Some("w-1")).await.unwrap(), "stopping w-1\n");
        let missing = runner.run(HookKind::StartInstance, Some("w-1")).await.unwrap_err();
        assert_eq!(missing, "the provider declares no `start_instance` hook");
    }

    #[tokio::test]
    async fn a_missing_program_or_a_failing_hook_says_which_and_why() {
        let missing = runner(HookKind::TerminateInstance, hook(&["/nonexistent/terminate"], Duration::from_secs(5)));
        let err = missing.run(HookKind::TerminateInstance, Some("n")).await.unwrap_err();
        assert_eq!(
            err,
            "hook terminate_instance: cannot start `/nonexistent/terminate`: not found (no such file, and not on PATH)"
        );
        let failing = runner(
            HookKind::TerminateInstance,
            hook(&["sh", "-c", "echo no such instance >&2; exit 3"], Duration::from_secs(5)),
        );
        let err = failing.run(HookKind::TerminateInstance, Some("n")).await.unwrap_err();
        assert_eq!(
            err,
            "hook terminate_instance (`sh -c echo no such instance >&2; exit 3`) failed: exit status 3: no such instance"
        );
    }

    #[tokio::test]
    async fn a_hanging_hook_is_killed_at_its_timeout_with_its_children() {
        let marker = format!("cloud-e2e-hang-{}", std::process::id());
        let script = format!("sleep 300 & exec -a {marker} sleep 300");
        let hanging = runner(HookKind::StartInstance, hook(&["bash", "-c", &script], Duration::from_millis(500)));
        let started = std::time::Instant::now();
        let err = hanging.run(HookKind::StartInstance, Some("n")).await.unwrap_err();
        // Unbounded, the hook would sleep 300 s; a minute is room for a loaded machine.
        assert!(started.elapsed() < Duration::from_secs(60), "the timeout bounds the hook");
        assert!(
            err.starts_with("hook start_instance (`bash -c")
                && err.ends_with("did not finish within 500ms; it was killed"),
            "{err}"
        );
        // The background `sleep` of the group went too: its stdout pipe would otherwise keep a reader
        // waiting, and the process would outlive the test.
        tokio::time::sleep(Duration::from_millis(200)).await;
        let ps = std::process::Command::new("pgrep").args(["-f", &marker]).output().unwrap();
        assert!(ps.stdout.is_empty(), "left running: {}", String::from_utf8_lossy(&ps.stdout));
    }

    #[test]
    fn load_balancer_listings_are_json_items_or_lines() {
        let json = r#"[{"name":"a1","service":"ns/web"},{"name":"a2","service":"ns/db"}]"#;
        assert_eq!(
            load_balancer_entries(json),
            [r#"{"name":"a1","service":"ns/web"}"#, r#"{"name":"a2","service":"ns/db"}"#]
        );
        assert_eq!(load_balancer_entries("lb-1 ns/web\n\n  lb-2 ns/db  \n"), ["lb-1 ns/web", "lb-2 ns/db"]);
        assert!(load_balancer_entries("[]").is_empty());
    }
}
