//! Errors of the engine.

/// What can go wrong building or running the engine.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CoreError {
    /// The layout is out of bounds.
    #[error("invalid engine config: {0}")]
    Config(String),
    /// The worker pool could not start.
    #[error("cannot start worker threads: {0}")]
    ThreadPool(#[from] rayon::ThreadPoolBuildError),
}
