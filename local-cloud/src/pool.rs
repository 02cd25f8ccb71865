//! The pool load balancer ingress IPs are allocated from: a CIDR (`127.200.0.0/16`) or an inclusive
//! range (`127.200.0.10-127.200.0.20`), always inside loopback `127.0.0.0/8`.

use std::collections::BTreeSet;
use std::fmt;
use std::net::Ipv4Addr;
use std::str::FromStr;

use ipnet::Ipv4Net;

/// The pool used when none is configured.
pub const DEFAULT_IP_POOL: &str = "127.200.0.0/16";

/// Why a pool description was rejected.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum IpPoolError {
    /// Neither a CIDR nor a `first-last` range of IPv4 addresses.
    #[error("invalid IP pool {0:?}: expected an IPv4 CIDR like 127.200.0.0/16 or a range like 127.200.0.1-127.200.0.9")]
    Invalid(String),
    /// Part of the pool lies outside loopback.
    #[error("IP pool {0:?} is not inside 127.0.0.0/8; the local cloud only hands out loopback addresses")]
    NotLoopback(String),
    /// The range's last address is before its first.
    #[error("IP pool {0:?} is empty")]
    Empty(String),
    /// A private pool lies (partly) outside the private ranges.
    #[error(
        "private IP pool {0:?} is not inside 10.0.0.0/8, 172.16.0.0/12 or 192.168.0.0/16; a private pool serves a cluster's own network (real nodes' hub)"
    )]
    NotPrivate(String),
}

/// An inclusive range of IPv4 addresses inside `127.0.0.0/8`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IpPool {
    first: Ipv4Addr,
    last: Ipv4Addr,
}

impl IpPool {
    /// The lowest address in the pool that `used` does not hold.
    pub fn first_free(&self, used: &BTreeSet<Ipv4Addr>) -> Option<Ipv4Addr> {
        (u32::from(self.first)..=u32::from(self.last)).map(Ipv4Addr::from).find(|ip| !used.contains(ip))
    }

    /// Whether `ip` is in the pool.
    pub fn contains(&self, ip: Ipv4Addr) -> bool {
        self.first <= ip && ip <= self.last
    }
}

impl IpPool {
    /// A pool inside the private ranges (RFC 1918), for a cluster whose load balancers live in a
    /// network of its own that the data plane programs (real nodes' hub); never loopback.
    pub fn private(text: &str) -> Result<Self, IpPoolError> {
        let (first, last) = bounds(text)?;
        if !first.is_private() || !last.is_private() || private_block(first) != private_block(last) {
            return Err(IpPoolError::NotPrivate(text.to_owned()));
        }
        Ok(IpPool { first, last })
    }
}

/// The first octets that tell the RFC 1918 block of a private address.
fn private_block(ip: Ipv4Addr) -> (u8, u8) {
    let [a, b, ..] = ip.octets();
    if a == 10 { (10, 0) } else { (a, b & 0xf0) }
}

fn bounds(text: &str) -> Result<(Ipv4Addr, Ipv4Addr), IpPoolError> {
    let (first, last) = match text.split_once('-') {
        Some((first, last)) => (parse_ip(first, text)?, parse_ip(last, text)?),
        None => cidr_hosts(text)?,
    };
    if last < first {
        return Err(IpPoolError::Empty(text.to_owned()));
    }
    Ok((first, last))
}

impl Default for IpPool {
    fn default() -> Self {
        DEFAULT_IP_POOL.parse().expect("the default pool parses")
    }
}

impl fmt::Display for IpPool {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}-{}", self.first, self.last)
    }
}

impl FromStr for IpPool {
    type Err = IpPoolError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let (first, last) = bounds(text)?;
        if !first.is_loopback() || !last.is_loopback() {
            return Err(IpPoolError::NotLoopback(text.to_owned()));
        }
        Ok(IpPool { first, last })
    }
}

fn parse_ip(part: &str, text: &str) -> Result<Ipv4Addr, IpPoolError> {
    part.trim().parse().map_err(|_| IpPoolError::Invalid(text.to_owned()))
}

/// The usable host addresses of a CIDR: without network and broadcast address, unless it is a /31 or /32.
fn cidr_hosts(text: &str) -> Result<(Ipv4Addr, Ipv4Addr), IpPoolError> {
    let net: Ipv4Net = text.trim().parse().map_err(|_| IpPoolError::Invalid(text.to_owned()))?;
    let (network, broadcast) = (u32::from(net.network()), u32::from(net.broadcast()));
    if net.prefix_len() >= 31 {
        return Ok((network.into(), broadcast.into()));
    }
    Ok(((network + 1).into(), (broadcast - 1).into()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cidr_pool_skips_network_and_broadcast_addresses() {
        let pool: IpPool = "127.200.0.0/30".parse().unwrap();

        assert_eq!(pool.to_string(), "127.200.0.1-127.200.0.2");
    }

    #[test]
    fn single_address_cidr_is_a_pool_of_one() {
        let pool: IpPool = "127.0.0.9/32".parse().unwrap();

        assert_eq!(pool.first_free(&BTreeSet::new()), Some(Ipv4Addr::new(127, 0, 0, 9)));
        assert_eq!(pool.first_free(&BTreeSet::from([Ipv4Addr::new(127, 0, 0, 9)])), None);
    }

    #[test]
    fn range_pool_hands_out_lowest_free_address() {
        let pool: IpPool = "127.1.0.5-127.1.0.7".parse().unwrap();
        let used = BTreeSet::from([Ipv4Addr::new(127, 1, 0, 5)]);

        assert_eq!(pool.first_free(&used), Some(Ipv4Addr::new(127, 1, 0, 6)));
        assert!(pool.contains(Ipv4Addr::new(127, 1, 0, 7)));
        assert!(!pool.contains(Ipv4Addr::new(127, 1, 0, 8)));
    }

    #[test]
    fn pools_outside_loopback_are_refused() {
        assert_eq!("10.0.0.0/24".parse::<IpPool>(), Err(IpPoolError::NotLoopback("10.0.0.0/24".into())));
        assert_eq!(
            "127.255.255.250-128.0.0.1".parse::<IpPool>(),
            Err(IpPoolError::NotLoopback("127.255.255.250-128.0.0.1".into()))
        );
    }

    #[test]
    fn malformed_and_empty_pools_are_refused() {
        assert!(matches!("127.0.0.0/33".parse::<IpPool>(), Err(IpPoolError::Invalid(_))));
        assert!(matches!("banana".parse::<IpPool>(), Err(IpPoolError::Invalid(_))));
        assert!(matches!("127.0.0.9-127.0.0.1".parse::<IpPool>(), Err(IpPoolError::Empty(_))));
    }

    #[test]
    fn private_pools_take_rfc1918_ranges_only() {
        assert_eq!(IpPool::private("10.250.1.0/24").unwrap().to_string(), "10.250.1.1-10.250.1.254");
        for refused in ["127.200.0.0/16", "8.8.8.0/24", "172.15.255.250-172.16.0.5", "10.255.255.250-11.0.0.2"] {
            assert_eq!(IpPool::private(refused), Err(IpPoolError::NotPrivate(refused.into())), "{refused}");
        }
        assert!(matches!(IpPool::private("10.0.0.9-10.0.0.1"), Err(IpPoolError::Empty(_))));
    }

    #[test]
    fn default_pool_is_loopback() {
        assert_eq!(IpPool::default().to_string(), "127.200.0.1-127.200.255.254");
    }
}
