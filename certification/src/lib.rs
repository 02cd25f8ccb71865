//! CNCF conformance certification, the way `cncf/k8s-conformance` accepts it.
//!
//! A submission is one folder `vX.Y/<product>/` of exactly four files: `PRODUCT.yaml`
//! ([`product`]), `README.md` ([`readme`]), `e2e.log` (ginkgo's verbose output, [`e2e_log`]) and
//! `junit_01.xml` (what upstream `e2e.test` writes with `--report-dir`, [`junit_report`]).
//! [`verify()`] applies every rule the repository's checks apply to a pull request, offline,
//! against the release's conformance list ([`conformance_list`]).
//!
//! The crate is rules over files: no network (the caller fetches the URLs' content types when
//! asked), no async, no other workspace crate.

pub mod conformance_list;
pub mod e2e_log;
pub mod junit_report;
pub mod product;
pub mod readme;
pub mod verify;

pub use conformance_list::{ConformanceTest, Minor};
pub use product::Product;
pub use readme::Reproduction;
pub use verify::{Check, FILES, Inputs, Outcome, Verdict, title_for, verify};

use std::path::{Path, PathBuf};

/// Where a submission goes under `root`: `root/vX.Y/<product folder>`.
pub fn submission_dir(root: &Path, release: Minor, product: &Product) -> PathBuf {
    root.join(release.to_string()).join(product.folder())
}
