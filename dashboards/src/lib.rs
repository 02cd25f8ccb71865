//! dashboards
