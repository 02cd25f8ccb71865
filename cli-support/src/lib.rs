//! What every long-running harness command shares: progress on long steps ([`progress`]),
//! signals ([`signals`]): waiting for SIGINT or SIGTERM, the [`signals::Interrupted`] error with
//! its exit code, and children started with the dispositions a shell's background job lost; and
//! the directories its state and caches live in ([`roots`]); and exclusive holds that harness processes
//! honour among themselves ([`exclusive`]).

pub mod exclusive;
pub mod progress;
pub mod roots;
pub mod signals;
