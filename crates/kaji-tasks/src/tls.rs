//! The process's TLS crypto provider: rustls with `ring`, installed once as
//! the process default before any HTTP client is built (reqwest is compiled
//! without a provider of its own, so that no build compiles aws-lc-rs's C).
//! It must never replace a provider someone else installed first.

/// Installs rustls's `ring` provider as the process default, once; a no-op
/// when a provider is already installed. Call it before building a
/// `reqwest::Client` (or anything that builds one, such as an MCP HTTP
/// transport): reqwest panics when it finds no provider.
pub fn install_crypto_provider() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        // Err means another provider is already the default: keep it.
        let _ = rustls::crypto::ring::default_provider().install_default();
    });
}
