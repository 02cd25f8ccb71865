//! ccm
