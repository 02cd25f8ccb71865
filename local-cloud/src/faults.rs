//! Injected faults: the next N calls of an operation (or of all, `*`) fail or are delayed.
//!
//! A call consumes at most one fault: the oldest active one matching its operation.
//! Faults live in memory only; a restarted cloud has none.

use std::time::Duration;

use super::api::{Fault, FaultMode, FaultSpec, OPERATIONS};

/// The operation name that matches every operation.
pub const ANY_OPERATION: &str = "*";

/// Why a fault was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FaultError {
    /// The operation is neither known nor `*`.
    #[error("unknown operation {0:?}; expected `*` or one of: {ops}", ops = OPERATIONS.join(", "))]
    UnknownOperation(String),
    /// A count of zero would fault nothing.
    #[error("count must be at least 1, or null for every call until cleared")]
    ZeroCount,
    /// A failing fault needs a server-error status.
    #[error("status {0} is not a server error (500-599)")]
    BadStatus(u16),
    /// A delay fault needs a delay.
    #[error("a delay fault needs delay_ms > 0")]
    NoDelay,
}

/// What a faulted call must do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FaultAction {
    /// Answer with this HTTP status.
    Fail(u16),
    /// Wait this long, then proceed.
    Delay(Duration),
}

/// The active faults, oldest first.
#[derive(Debug, Default)]
pub struct Faults {
    next_id: u64,
    active: Vec<Fault>,
}

impl Faults {
    /// Adds a fault after checking it makes sense.
    pub fn inject(&mut self, spec: FaultSpec) -> Result<Fault, FaultError> {
        validate(&spec)?;
        self.next_id += 1;
        let fault = Fault { id: self.next_id, remaining: spec.count, spec };
        self.active.push(fault.clone());
        Ok(fault)
    }

    /// Consumes one call of the oldest fault matching `operation`, if any.
    pub fn take(&mut self, operation: &str) -> Option<FaultAction> {
        let index = self.active.iter().position(|fault| matches_operation(&fault.spec.operation, operation))?;
        let fault = &mut self.active[index];
        let action = match fault.spec.mode {
            FaultMode::Fail => FaultAction::Fail(fault.spec.status),
            FaultMode::Delay => FaultAction::Delay(Duration::from_millis(fault.spec.delay_ms)),
        };
        if let Some(remaining) = &mut fault.remaining {
            *remaining -= 1;
            if *remaining == 0 {
                self.active.remove(index);
            }
        }
        Some(action)
    }

    /// The active faults, oldest first.
    pub fn list(&self) -> Vec<Fault> {
        self.active.clone()
    }

    /// Removes every fault, returning how many there were.
    pub fn clear(&mut self) -> usize {
        std::mem::take(&mut self.active).len()
    }
}

fn matches_operation(pattern: &str, operation: &str) -> bool {
    pattern == ANY_OPERATION || pattern == operation
}

fn validate(spec: &FaultSpec) -> Result<(), FaultError> {
    if spec.operation != ANY_OPERATION && !OPERATIONS.contains(&spec.operation.as_str()) {
        return Err(FaultError::UnknownOperation(spec.operation.clone()));
    }
    if spec.count == Some(0) {
        return Err(FaultError::ZeroCount);
    }
    match spec.mode {
        FaultMode::Fail if !(500..=599).contains(&spec.status) => Err(FaultError::BadStatus(spec.status)),
        FaultMode::Delay if spec.delay_ms == 0 => Err(FaultError::NoDelay),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fail(operation: &str, count: Option<u64>) -> FaultSpec {
        FaultSpec { operation: operation.into(), count, mode: FaultMode::Fail, status: 503, delay_ms: 0 }
    }

    #[test]
    fn a_counted_fault_hits_exactly_that_many_calls_of_its_operation() {
        let mut faults = Faults::default();
        faults.inject(fail("create_route", Some(2))).unwrap();

        assert_eq!(faults.take("list_routes"), None);
        assert_eq!(faults.take("create_route"), Some(FaultAction::Fail(503)));
        assert_eq!(faults.take("create_route"), Some(FaultAction::Fail(503)));
        assert_eq!(faults.take("create_route"), None);
        assert!(faults.list().is_empty());
    }

    #[test]
    fn an_uncounted_wildcard_fault_lasts_until_cleared() {
        let mut faults = Faults::default();
        faults.inject(fail("*", None)).unwrap();

        for _ in 0..100 {
            assert_eq!(faults.take("instance_exists"), Some(FaultAction::Fail(503)));
        }
        assert_eq!(faults.clear(), 1);
        assert_eq!(faults.take("instance_exists"), None);
    }

    #[test]
    fn the_oldest_matching_fault_is_used_first() {
        let mut faults = Faults::default();
        let delay = FaultSpec { mode: FaultMode::Delay, delay_ms: 50, ..fail("*", Some(1)) };
        faults.inject(delay).unwrap();
        faults.inject(FaultSpec { status: 500, ..fail("get_load_balancer", Some(1)) }).unwrap();

        assert_eq!(faults.take("get_load_balancer"), Some(FaultAction::Delay(Duration::from_millis(50))));
        assert_eq!(faults.take("get_load_balancer"), Some(FaultAction::Fail(500)));
        assert_eq!(faults.take("get_load_balancer"), None);
    }

    #[test]
    fn nonsense_faults_are_refused() {
        let mut faults = Faults::default();

        assert_eq!(faults.inject(fail("reboot", None)), Err(FaultError::UnknownOperation("reboot".into())));
        assert_eq!(faults.inject(fail("*", Some(0))), Err(FaultError::ZeroCount));
        assert_eq!(faults.inject(FaultSpec { status: 404, ..fail("*", None) }), Err(FaultError::BadStatus(404)));
        assert_eq!(faults.inject(FaultSpec { mode: FaultMode::Delay, ..fail("*", None) }), Err(FaultError::NoDelay));
        assert!(faults.list().is_empty());
    }
}
