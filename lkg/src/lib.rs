//! lkg
