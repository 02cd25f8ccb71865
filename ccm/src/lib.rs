//! The bundled reference cloud-controller-manager (CCM), written with kube-rs.
//!
//! It follows upstream `k8s.io/cloud-provider`: a provider implements the traits in [`cloud`]
//! (mirroring `cloudprovider.Interface`), and the controllers (cloud-node, cloud-node-lifecycle,
//! service, route) drive them, each owning its own state ([`controllers`]) and stopping on the
//! one [`shutdown`] a signal requests. The controllers' decisions live in pure functions
//! ([`node`], and beside each controller) so they can be tested without a cluster; the deliberate
//! [`bugs`] are wired in from outside the controllers. [`app::run`] is the CCM's command line and
//! life, with the cloud passed in by the caller: a provider's `main` brings its own cloud and
//! reuses the controllers unchanged (`examples/own_cloud.rs`). The bundled `reference-ccm` (its
//! own package) wires the local simulated cloud (the `local-cloud` crate) in the same way.

pub mod app;
pub mod bugs;
pub mod cloud;
pub mod controllers;
pub mod hostname_ingress;
pub mod metrics;
pub mod node;
pub mod shutdown;
