//! The HTTP client builder of the model providers: rustls with the `ring`
//! crypto provider installed as the process default first (reqwest is built
//! without a provider, so that no build compiles aws-lc-rs's C). It must
//! never replace a provider someone else installed first.

/// A `reqwest::ClientBuilder` that is safe to `build()`: the process's
/// crypto provider is installed (once) before it is returned.
pub fn client_builder() -> reqwest::ClientBuilder {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        // Err means another provider is already the default: keep it.
        let _ = rustls::crypto::ring::default_provider().install_default();
    });
    reqwest::Client::builder()
}
