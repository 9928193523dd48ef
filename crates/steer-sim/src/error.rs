//! Configuration errors: each names the dotted key path it is about, so the scenario loader can
//! point at the file position.

use std::fmt;

#[derive(Debug, Clone, PartialEq)]
pub struct ConfigError {
    /// Dotted key path (`platform.l2.ways`, `devices.0.queues.1.ring_entries`), empty if global.
    pub path: String,
    pub message: String,
}

impl ConfigError {
    pub fn new(path: impl Into<String>, message: impl Into<String>) -> ConfigError {
        ConfigError { path: path.into(), message: message.into() }
    }
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.path.is_empty() {
            write!(f, "{}", self.message)
        } else {
            write!(f, "{}: {}", self.path, self.message)
        }
    }
}

impl std::error::Error for ConfigError {}

pub type ConfigResult<T> = Result<T, ConfigError>;

/// Fails with `message` at `path` unless `ok`.
pub fn ensure(ok: bool, path: &str, message: impl FnOnce() -> String) -> ConfigResult<()> {
    if ok {
        Ok(())
    } else {
        Err(ConfigError::new(path, message()))
    }
}
