//! Failure clusters across providers, as the Kubernetes Triage tool clusters one CI's failures:
//! the failures of the last days grouped by test and *normalised* failure message, so that the same
//! breakage reads the same wherever it happened. Each cluster says which providers, Kubernetes
//! versions and jobs hit it and since when, and which side it likely is on: seen by two or more
//! providers on the same Kubernetes version, *likely Kubernetes-side*; by one provider only, *likely
//! provider-side* (SIG Cloud Provider's first question). Pure: built from plain rows.
//!
//! What normalising masks (Triage's facts, carried over, plus what differs between providers):
//! dates and times; UUIDs; `0x` constants and long hex strings (commits, container ids); IPv4 and
//! IPv6 addresses with their ports; durations (`5m0s`, `1.5s`, `300ms`); generated pod and node
//! names (`web-7d9c8b6f5-x2k4p`, `name-abcde` with a random 5-character suffix,
//! `default-pool-...`); every remaining number. Go map literals (`map[b:2 a:1]`) have their entries
//! sorted, since Go prints them in random order; repeated lines of a long message are kept once,
//! and a message still too long is cut in its middle.

use std::borrow::Cow;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::LazyLock;

use regex::{Captures, Regex};
use regex_automata::meta::Regex as MultiRegex;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// One failed result, as the index holds it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Failure {
    pub provider: Option<String>,
    pub job: String,
    pub build: String,
    pub started_at: i64,
    pub kubernetes_version: Option<String>,
    pub provider_version: Option<String>,
    pub test: String,
    pub message: Option<String>,
    /// The message normalised, when the index kept it so (see [`NORMALISED_BY`]); `None`: it is
    /// normalised now.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub normalised: Option<String>,
}

/// The version of [`normalise`]: bump it whenever what it masks changes. The index keeps each
/// failure's normalised message with the version that made it, and a message normalised by another
/// version is normalised again, so that clusters never mix two versions' keys.
pub const NORMALISED_BY: i64 = 1;

/// Where a cluster's cause likely is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Side {
    /// Two or more providers hit it on the same Kubernetes version.
    Kubernetes,
    /// Only one provider hit it.
    Provider,
    /// Several providers, but never on the same Kubernetes version.
    Unclear,
}

impl Side {
    pub fn as_str(self) -> &'static str {
        match self {
            Side::Kubernetes => "likely Kubernetes-side",
            Side::Provider => "likely provider-side",
            Side::Unclear => "unclear: several providers, on different Kubernetes versions",
        }
    }

    pub fn class(self) -> &'static str {
        match self {
            Side::Kubernetes => "kubernetes-side",
            Side::Provider => "provider-side",
            Side::Unclear => "unclear",
        }
    }
}

/// A build that hit a cluster.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Hit {
    pub provider: String,
    pub job: String,
    pub build: String,
    pub started_at: i64,
    pub kubernetes_version: Option<String>,
    pub provider_version: Option<String>,
    /// The message as this build reported it.
    pub message: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Cluster {
    /// Stable for the same test and normalised message: the cluster page's address.
    pub id: String,
    pub test: String,
    /// The normalised message (empty when the failures had none).
    pub message: String,
    pub side: Side,
    pub providers: Vec<String>,
    pub kubernetes_versions: Vec<String>,
    pub jobs: Vec<String>,
    pub failures: usize,
    /// Every failure of the cluster, newest first (in a list of clusters, the newest and the
    /// oldest).
    pub hits: Vec<Hit>,
}

impl Cluster {
    /// The oldest failure: since when (its Kubernetes and provider versions) it is seen.
    pub fn first_seen(&self) -> &Hit {
        self.hits.last().expect("a cluster has a failure")
    }

    /// The newest failure.
    pub fn last_seen(&self) -> &Hit {
        &self.hits[0]
    }

    /// The cluster as a list shows it: only its newest and oldest failures.
    pub fn summary(mut self) -> Cluster {
        if self.hits.len() > 2 {
            let oldest = self.hits.pop().expect("more than two");
            self.hits.truncate(1);
            self.hits.push(oldest);
        }
        self
    }
}

const UNKNOWN_PROVIDER: &str = "(no provider)";
/// Longer normalised messages keep their first and last halves of this.
const LONGEST_MESSAGE: usize = 4000;

/// The failures grouped by test and normalised message: the clusters seen by most providers first,
/// then those with most failures, then by test.
pub fn clusters(failures: Vec<Failure>) -> Vec<Cluster> {
    // Hashed, not ordered: the clusters are sorted below, and a cluster's id tells any two apart.
    let mut grouped: HashMap<(String, String), Vec<Hit>> = HashMap::with_capacity(failures.len());
    for failure in failures {
        let message = match failure.normalised {
            Some(normalised) => normalised,
            None => failure.message.as_deref().map(normalise).unwrap_or_default(),
        };
        grouped.entry((failure.test, message)).or_default().push(Hit {
            provider: failure.provider.unwrap_or_else(|| UNKNOWN_PROVIDER.to_owned()),
            job: failure.job,
            build: failure.build,
            started_at: failure.started_at,
            kubernetes_version: failure.kubernetes_version,
            provider_version: failure.provider_version,
            message: failure.message,
        });
    }
    let mut clusters: Vec<Cluster> = grouped
        .into_iter()
        .map(|((test, message), mut hits)| {
            hits.sort_by(|a, b| (b.started_at, &b.job, &b.build).cmp(&(a.started_at, &a.job, &a.build)));
            let providers: BTreeSet<&str> = hits.iter().map(|h| h.provider.as_str()).collect();
            let mut by_version: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
            for hit in &hits {
                if let Some(version) = &hit.kubernetes_version {
                    by_version.entry(version).or_default().insert(&hit.provider);
                }
            }
            let side = if by_version.values().any(|providers| providers.len() >= 2) {
                Side::Kubernetes
            } else if providers.len() == 1 {
                Side::Provider
            } else {
                Side::Unclear
            };
            Cluster {
                id: cluster_id(&test, &message),
                side,
                providers: providers.into_iter().map(str::to_owned).collect(),
                kubernetes_versions: by_version.keys().map(|v| (*v).to_owned()).collect(),
                jobs: hits
                    .iter()
                    .map(|h| h.job.as_str())
                    .collect::<BTreeSet<_>>()
                    .into_iter()
                    .map(str::to_owned)
                    .collect(),
                test,
                message,
                failures: hits.len(),
                hits,
            }
        })
        .collect();
    clusters.sort_by(|a, b| {
        (b.providers.len(), b.hits.len(), &a.test, &a.id).cmp(&(a.providers.len(), a.hits.len(), &b.test, &b.id))
    });
    clusters
}

/// 16 hex digits of SHA-256 over the test and the normalised message.
pub fn cluster_id(test: &str, message: &str) -> String {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let digest =
        Sha256::new().chain_update(test.as_bytes()).chain_update([0]).chain_update(message.as_bytes()).finalize();
    digest[..8].iter().flat_map(|b| [HEX[usize::from(b >> 4)] as char, HEX[usize::from(b & 15)] as char]).collect()
}

/// What a mask replaces a match with: one per pattern of [`MASKS`], in its order.
#[derive(Debug, Clone, Copy)]
enum Mask {
    Time,
    Uuid,
    Addr,
    Hex,
    Duration,
    Pod,
    Number,
}

const MASK_OF_PATTERN: [Mask; 7] =
    [Mask::Time, Mask::Uuid, Mask::Addr, Mask::Hex, Mask::Duration, Mask::Pod, Mask::Number];

/// One pass over the message, most specific forms first (an address before its numbers): the
/// patterns are searched as one alternation (at the leftmost match, the first pattern that matches
/// wins), and the pattern that matched says what it is: no capture groups to resolve, which a
/// search for a match alone skips (docs/benchmarks.md: the failure clusters).
static MASKS: LazyLock<MultiRegex> = LazyLock::new(|| MultiRegex::new_many(&MASK_PATTERNS).expect("the masks compile"));

/// The patterns of [`MASKS`], in [`MASK_OF_PATTERN`]'s order.
const MASK_PATTERNS: [&str; 7] = [
    // Dates and times: 2026-11-22T17:57:17.123Z, 2026-11-22 17:57:17, Nov 22 17:57:17,
    // Sun, 22 Nov 2026 17:57:17 +0000.
    concat!(
        r"\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d(?:\.\d+)?(?:Z|[+-]\d\d:?\d\d)?",
        r"|[A-Z][a-z]{2}, \d{1,2} [A-Z][a-z]{2} \d{4} \d\d:\d\d:\d\d(?: [+-]\d{4}| [A-Z]{3})?",
        r"|\b[A-Z][a-z]{2}\s+\d{1,2} \d\d:\d\d:\d\d(?:\.\d+)?",
        r"|\b\d\d:\d\d:\d\d(?:\.\d+)?\b",
    ),
    r"\b[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}\b",
    concat!(
        r"\[[0-9a-fA-F:]*:[0-9a-fA-F:.]*\](?::\d+)?",
        r"|\b\d{1,3}\.\d{1,3}\.\d{1,3}\.\d{1,3}(?::\d+)?\b",
        r"|\b(?:[0-9a-fA-F]{1,4}:){2,7}[0-9a-fA-F]{0,4}(?:/\d+)?\b",
    ),
    r"\b0x[0-9a-fA-F]+\b|\b[0-9a-f]{12,}\b",
    r"\b(?:\d+(?:\.\d+)?(?:ns|us|µs|ms|h|m|s))+\b",
    // Generated names: a deployment's pod (name-<hash>-<5>), a pod of a ReplicaSet or a Job
    // (name-<5>), GKE/kube-up node names.
    r"\b[a-z][a-z0-9-]*?-(?:[a-z0-9]{8,10}-)?[a-z0-9]*\d[a-z0-9]*\b",
    r"\d+",
];

/// A pod suffix: 5 characters of Kubernetes' random alphabet with at least one digit, or a node
/// pool name. (The `pod` mask matches more, and this decides.)
fn generated_name(name: &str) -> Option<String> {
    for pool in ["minion-group-", "default-pool-"] {
        if let Some(at) = name.find(pool) {
            return Some(format!("{}{pool}NODE", &name[..at]));
        }
    }
    let (stem, suffix) = name.rsplit_once('-')?;
    if suffix.len() == 5 && suffix.bytes().any(|b| b.is_ascii_digit()) {
        let stem = match stem.rsplit_once('-') {
            Some((base, hash)) if (8..=10).contains(&hash.len()) && hash.bytes().any(|b| b.is_ascii_digit()) => base,
            _ => stem,
        };
        return Some(format!("{}-POD", mask_numbers(stem)));
    }
    None
}

fn mask_numbers(text: &str) -> String {
    static DIGITS: LazyLock<Regex> = LazyLock::new(|| Regex::new(r"\d+").expect("compiles"));
    DIGITS.replace_all(text, "N").into_owned()
}

/// The message with what differs between occurrences of the same failure masked (see the module
/// documentation).
pub fn normalise(message: &str) -> String {
    let sorted = sort_go_maps(message.trim());
    let mut text = String::with_capacity(sorted.len());
    let mut copied = 0;
    for found in MASKS.find_iter(sorted.as_ref()) {
        text.push_str(&sorted[copied..found.start()]);
        match MASK_OF_PATTERN[found.pattern().as_usize()] {
            Mask::Time => text.push_str("TIME"),
            Mask::Uuid => text.push_str("UUID"),
            Mask::Addr => text.push_str("ADDR"),
            Mask::Hex => text.push_str("HEX"),
            Mask::Duration => text.push_str("DURATION"),
            Mask::Pod => {
                let name = &sorted[found.range()];
                text.push_str(&generated_name(name).unwrap_or_else(|| mask_numbers(name)));
            }
            Mask::Number => text.push('N'),
        }
        copied = found.end();
    }
    text.push_str(&sorted[copied..]);
    if text.len() > LONGEST_MESSAGE {
        let mut seen = BTreeSet::new();
        text = text.lines().filter(|line| seen.insert(*line)).collect::<Vec<_>>().join("\n");
    }
    if text.len() > LONGEST_MESSAGE {
        let head = floor_char_boundary(&text, LONGEST_MESSAGE / 2);
        let tail = ceil_char_boundary(&text, text.len() - LONGEST_MESSAGE / 2);
        text = format!("{}\n…\n{}", &text[..head], &text[tail..]);
    }
    text
}

fn floor_char_boundary(text: &str, mut at: usize) -> usize {
    while !text.is_char_boundary(at) {
        at -= 1;
    }
    at
}

fn ceil_char_boundary(text: &str, mut at: usize) -> usize {
    while !text.is_char_boundary(at) {
        at += 1;
    }
    at
}

/// `map[b:2 a:1]` as `map[a:1 b:2]` (innermost maps only, as Triage does).
fn sort_go_maps(text: &str) -> Cow<'_, str> {
    static MAP: LazyLock<Regex> = LazyLock::new(|| Regex::new(r"map\[([^\[\]]*)\]").expect("compiles"));
    if !text.contains("map[") {
        return Cow::Borrowed(text);
    }
    MAP.replace_all(text, |caps: &Captures| {
        let mut entries: Vec<&str> = caps[1].split(' ').collect();
        entries.sort_unstable();
        format!("map[{}]", entries.join(" "))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_differs_between_occurrences_is_masked() {
        let cases = [
            (
                "timed out after 30.5s waiting for pod web-7d9c8b6f5-x2k4p at 10.0.3.7:8080",
                "timed out after DURATION waiting for pod web-POD at ADDR",
            ),
            ("pod job-abc12 in namespace services-8812 failed", "pod job-POD in namespace services-N failed"),
            (
                "2026-11-22T17:57:17.123Z request 5f2b4c1e-1a2b-4c3d-9e8f-0123456789ab took 1m30s",
                "TIME request UUID took DURATION",
            ),
            (
                "node gke-x-default-pool-1a2b3c4d-zz9k not ready since Nov 22 17:57:17",
                "node gke-x-default-pool-NODE not ready since TIME",
            ),
            ("dial tcp [fd00:127:1::5]:443: connection refused", "dial tcp ADDR: connection refused"),
            ("at 0xc000123456, commit 0123456789abcdef0123", "at HEX, commit HEX"),
            ("expected <3> nodes, saw <2>", "expected <N> nodes, saw <N>"),
            ("waited 2h0m0s, then 300ms", "waited DURATION, then DURATION"),
            ("labels map[zone:b app:web] differ", "labels map[app:web zone:b] differ"),
        ];
        for (message, normalised) in cases {
            assert_eq!(normalise(message), normalised, "{message}");
        }
        // Words are no pod names: no digit in the suffix.
        assert_eq!(normalise("the load-balancer was never ready"), "the load-balancer was never ready");
    }

    #[test]
    fn the_masks_match_as_one_alternation_with_a_group_per_mask_would() {
        let alternation: Vec<String> =
            MASK_PATTERNS.iter().enumerate().map(|(i, p)| format!("(?P<m{i}>{p})")).collect();
        let grouped = Regex::new(&alternation.join("|")).unwrap();
        let messages = [
            "timed out after 30.5s waiting for pod web-7d9c8b6f5-x2k4p at 10.0.3.7:8080: expected 3 nodes, saw 2",
            "2026-11-22T17:57:17.123Z E1122 17:57:17.123456 1 controller.go:88] node gke-x-default-pool-1a2b3c4d-zz9k",
            "Sun, 22 Nov 2026 17:57:17 +0000 request 5f2b4c1e-1a2b-4c3d-9e8f-0123456789ab took 1m30s at 0xc000123456",
            "dial tcp [fd00:127:1::5]:443 and fe80::1/64: connection refused after 300ms; commit 0123456789abcdef0123",
            "Nov 22 17:57:17 pod job-abc12 in namespace services-8812 failed: map[zone:b app:web] 2h0m0s x1y 12ab-34",
            "Ünïcode 42 näme-ab1c2 µs 5µs 10.0.0.256 1.2.3.4.5 999.1.1.1:65536 build-7919-00042 a-1 -1 0x 0xZ",
        ];
        for message in messages {
            let by_group: Vec<(usize, usize, usize)> = grouped
                .captures_iter(message)
                .map(|caps| {
                    let whole = caps.get(0).unwrap();
                    let group = (0..MASK_PATTERNS.len()).find(|i| caps.name(&format!("m{i}")).is_some()).unwrap();
                    (whole.start(), whole.end(), group)
                })
                .collect();
            let by_pattern: Vec<(usize, usize, usize)> =
                MASKS.find_iter(message).map(|m| (m.start(), m.end(), m.pattern().as_usize())).collect();
            assert_eq!(by_pattern, by_group, "{message}");
        }
    }

    #[test]
    fn a_long_message_keeps_each_line_once_then_its_two_ends() {
        let repeated = "the same line again\n".repeat(1000);
        assert_eq!(normalise(&repeated), "the same line again");
        let long: String =
            (0..3000).map(|i| format!("line {}\n", "x".repeat(i % 7 + 1))).collect::<String>() + &"é".repeat(5000);
        let normalised = normalise(&long);
        assert!(normalised.len() <= LONGEST_MESSAGE + 8 && normalised.contains("\n…\n"), "{}", normalised.len());
    }

    fn failure(provider: &str, build: &str, kubernetes: &str, test: &str, message: &str) -> Failure {
        Failure {
            provider: Some(provider.into()),
            job: format!("ci-{provider}"),
            build: build.into(),
            started_at: build.parse().unwrap(),
            kubernetes_version: Some(kubernetes.into()),
            provider_version: Some(format!("{provider}-commit-{build}")),
            test: test.into(),
            message: Some(message.into()),
            normalised: None,
        }
    }

    #[test]
    fn failures_cluster_by_test_and_normalised_message_and_say_which_side_they_are_on() {
        let clusters = clusters(vec![
            failure("aws", "10", "v1.37.1", "lb", "timed out after 31s at 10.0.0.1"),
            failure("gce", "12", "v1.37.1", "lb", "timed out after 45s at 10.9.9.9"),
            failure("aws", "11", "v1.37.1", "lb", "timed out after 33s at 10.0.0.2"),
            failure("aws", "13", "v1.37.1", "lb", "a different message"),
            failure("aws", "5", "v1.36.4", "routes", "route missing"),
            failure("gce", "6", "v1.36.3", "routes", "route missing"),
        ]);
        let summary: Vec<(&str, usize, Side)> =
            clusters.iter().map(|c| (c.test.as_str(), c.hits.len(), c.side)).collect();
        assert_eq!(
            summary,
            [("lb", 3, Side::Kubernetes), ("routes", 2, Side::Unclear), ("lb", 1, Side::Provider)],
            "most providers first, then most failures"
        );
        let lb = &clusters[0];
        assert_eq!(
            (lb.providers.clone(), lb.kubernetes_versions.clone()),
            (vec!["aws".into(), "gce".into()], vec!["v1.37.1".into()])
        );
        assert_eq!(lb.message, "timed out after DURATION at ADDR");
        assert_eq!(lb.hits.iter().map(|h| h.build.as_str()).collect::<Vec<_>>(), ["12", "11", "10"], "newest first");
        assert_eq!(lb.first_seen().provider_version.as_deref(), Some("aws-commit-10"));
        assert_eq!(lb.id, cluster_id("lb", "timed out after DURATION at ADDR"));
        assert_eq!(lb.id.len(), 16);
        assert_ne!(clusters[2].id, lb.id);
    }

    #[test]
    fn a_message_the_index_kept_normalised_is_not_normalised_again() {
        let kept = Failure {
            normalised: Some("timed out after DURATION at ADDR".into()),
            ..failure("aws", "10", "v1.37.1", "lb", "timed out after 31s at 10.0.0.1")
        };
        let trusted = Failure { normalised: Some("as the index says".into()), ..kept.clone() };
        let fresh = failure("gce", "11", "v1.37.1", "lb", "timed out after 45s at 10.9.9.9");
        let one = clusters(vec![kept, fresh.clone()]);
        assert_eq!((one.len(), one[0].failures), (1, 2), "the kept and the fresh key are the same");
        let two = clusters(vec![trusted, fresh]);
        assert_eq!(two.len(), 2, "the kept key is taken as it is");
        assert!(two.iter().any(|c| c.message == "as the index says"));
    }
}
