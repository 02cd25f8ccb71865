//! The reference CCM's own code besides its `main`: the `local` cloud provider, ccm's cloud traits
//! over the local cloud's API, as a provider's CCM repository holds its cloud's implementation.

pub mod local_provider;
