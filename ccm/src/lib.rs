//! The bundled reference cloud-controller-manager (CCM), written with kube-rs.
//!
//! It follows upstream `k8s.io/cloud-provider`: a provider implements the traits in [`cloud`]
//! (mirroring `cloudprovider.Interface`), and the controllers (cloud-node, cloud-node-lifecycle,
//! service, route) drive them. The controllers' decisions live in pure functions ([`node`]) so
//! they can be tested without a cluster. The harness builds and deploys this CCM against its
//! local simulated cloud; a provider can fork it as a starting point.

pub mod app;
pub mod bugs;
pub mod cloud;
pub mod controllers;
pub mod local_cloud;
pub mod metrics;
pub mod node;
