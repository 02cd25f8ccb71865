//! What every long-running harness command shares: progress on long steps ([`progress`]) and
//! signals ([`signals`]): waiting for SIGINT or SIGTERM, the [`signals::Interrupted`] error with
//! its exit code, and children started with the dispositions a shell's background job lost.

pub mod progress;
pub mod signals;
