//! The ports a cluster's components listen on, picked where the kernel does not pick the local
//! ports of outgoing connections: a port the kernel chose as free (`bind` to port 0) lies in that
//! ephemeral range, so any connection a busy machine opens (a kubelet's to its API server, a test's
//! to a cloud) can take it before the component that was given it binds it.

use std::net::{Ipv4Addr, TcpListener};
use std::path::Path;

use crate::{Result, io_err};

/// The ports components are given: below Linux's default ephemeral range (32768–60999) and
/// NodePort's (30000–32767), above the ports Kubernetes' own components default to (10248–10259).
const LISTEN_BAND: std::ops::Range<u16> = 20000..30000;

/// Random ports tried for each one picked before giving the choice to the kernel.
const TRIES_PER_PORT: usize = 64;

/// `N` distinct free ports on 127.0.0.1: every listener is held until all are picked, so no two
/// components get the same port.
pub(crate) fn free_ports<const N: usize>() -> Result<[u16; N]> {
    let band = band_below(&ephemeral_range());
    let mut listeners = Vec::with_capacity(N);
    for _ in 0..N {
        let listener = band.clone().and_then(pick_in).map_or_else(|| bind(0), Ok)?;
        listeners.push(listener);
    }
    let mut ports = [0u16; N];
    for (port, listener) in ports.iter_mut().zip(&listeners) {
        *port = listener.local_addr().map(|a| a.port()).unwrap_or_default();
    }
    Ok(ports)
}

/// A listener on a random free port of `band`, if one of a few tries is free.
fn pick_in(band: std::ops::Range<u16>) -> Option<TcpListener> {
    let width = u32::from(band.end - band.start);
    (0..TRIES_PER_PORT).find_map(|_| {
        let mut bytes = [0u8; 4];
        getrandom::fill(&mut bytes).ok()?;
        let port = band.start + (u32::from_le_bytes(bytes) % width) as u16;
        TcpListener::bind((Ipv4Addr::LOCALHOST, port)).ok()
    })
}

fn bind(port: u16) -> Result<TcpListener> {
    TcpListener::bind((Ipv4Addr::LOCALHOST, port)).map_err(io_err("binding a free port on", Path::new("127.0.0.1")))
}

/// [`LISTEN_BAND`], unless this machine's ephemeral range reaches into it (then `None`: the kernel's
/// choice is as good as any).
fn band_below(ephemeral: &std::ops::RangeInclusive<u16>) -> Option<std::ops::Range<u16>> {
    let overlaps = *ephemeral.start() < LISTEN_BAND.end && *ephemeral.end() >= LISTEN_BAND.start;
    (!overlaps).then_some(LISTEN_BAND)
}

/// `net.ipv4.ip_local_port_range`, or Linux's default when it cannot be read.
fn ephemeral_range() -> std::ops::RangeInclusive<u16> {
    std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|text| parse_range(&text))
        .unwrap_or(32768..=60999)
}

fn parse_range(text: &str) -> Option<std::ops::RangeInclusive<u16>> {
    let mut bounds = text.split_whitespace().map(str::parse::<u16>);
    let (low, high) = (bounds.next()?.ok()?, bounds.next()?.ok()?);
    (low <= high).then_some(low..=high)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ports_are_distinct_free_and_outside_the_ephemeral_range() {
        let ephemeral = ephemeral_range();
        let ports: [u16; 7] = free_ports().unwrap();
        let mut sorted = ports.to_vec();
        sorted.sort_unstable();
        sorted.dedup();
        assert_eq!(sorted.len(), 7, "{ports:?}");
        for port in ports {
            assert!(!ephemeral.contains(&port), "{port} is in the ephemeral range {ephemeral:?}");
            TcpListener::bind((Ipv4Addr::LOCALHOST, port)).unwrap_or_else(|e| panic!("{port} is not free: {e}"));
        }
    }

    #[test]
    fn a_machine_whose_ephemeral_range_covers_the_band_leaves_the_choice_to_the_kernel() {
        assert_eq!(band_below(&(32768..=60999)), Some(LISTEN_BAND));
        assert_eq!(band_below(&(1024..=65535)), None);
        assert_eq!(band_below(&(29000..=40000)), None);
        assert_eq!(band_below(&(10000..=19999)), Some(LISTEN_BAND));
    }

    #[test]
    fn the_kernels_range_is_read_as_it_prints_it() {
        assert_eq!(parse_range("32768\t60999\n"), Some(32768..=60999));
        assert_eq!(parse_range("60999 32768"), None);
        assert_eq!(parse_range("nonsense"), None);
    }
}
