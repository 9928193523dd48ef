//! Errors. Validation works with `ConfigError`s, each naming the dotted key path it is about, so
//! the scenario loader can point at the file position; what leaves the crate is an `Error`, whose
//! kind says whose fault it is (the input's, the limits', the caller's, or steer's own).

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

/// A number as a message shows it: as written at everyday magnitudes, in exponent form when
/// huge or tiny (`1e300`, not three hundred digits).
pub struct Shown(pub f64);

impl fmt::Display for Shown {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let x = self.0;
        if x != 0.0 && x.is_finite() && !(1e-4..1e9).contains(&x.abs()) {
            write!(f, "{x:e}")
        } else {
            write!(f, "{x}")
        }
    }
}

/// An I/O error's reason as a message shows it, without the OS's code: "No such file or directory",
/// not "No such file or directory (os error 2)".
pub fn io_reason(error: &std::io::Error) -> String {
    let message = error.to_string();
    match message.rfind(" (os error ") {
        Some(at) => message[..at].to_string(),
        None => message,
    }
}

/// Characters a run without spaces (a key, a value, a path) keeps in a message.
const MAX_SHOWN_WORD: usize = 120;
/// Characters a message keeps.
const MAX_SHOWN_MESSAGE: usize = 1000;

/// A message with what the user typed kept readable: a run without spaces longer than
/// `MAX_SHOWN_WORD` characters (a 100 KB key or value) is shown by its start and end with how
/// much was left out, and a message still longer than `MAX_SHOWN_MESSAGE` by its start and end.
/// The Python layer shortens its own messages the same way (`steer.output.shortened`).
pub fn shortened(message: &str) -> String {
    let words: Vec<String> = message.split(' ').map(|word| elided(word, MAX_SHOWN_WORD, 80, 20)).collect();
    elided(&words.join(" "), MAX_SHOWN_MESSAGE, 700, 200)
}

/// `text` if at most `most` characters, else its first `head` and last `tail` characters around a
/// note of how many were left out.
fn elided(text: &str, most: usize, head: usize, tail: usize) -> String {
    let count = text.chars().count();
    if count <= most {
        return text.to_string();
    }
    let start: String = text.chars().take(head).collect();
    let end: String = text.chars().skip(count - tail).collect();
    format!("{start}…[{} characters]…{end}", count - head - tail)
}

/// Fails with `message` at `path` unless `ok`.
pub fn ensure(ok: bool, path: &str, message: impl FnOnce() -> String) -> ConfigResult<()> {
    if ok {
        Ok(())
    } else {
        Err(ConfigError::new(path, message()))
    }
}

/// Why steer could not do what it was asked. Each message is one line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Error {
    /// Input steer cannot accept: a scenario, platform, override or file (`file:line:col: key:
    /// message`). Bad input: the command line exits with 2.
    Input(String),
    /// A run that would need more memory or simulated work than the limits allow; the message
    /// names the key and the estimate.
    TooLarge(String),
    /// The caller stopped the run.
    Stopped,
    /// A broken invariant inside steer: a bug to report.
    Internal(String),
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Input(message) | Error::TooLarge(message) => write!(f, "{message}"),
            Error::Stopped => write!(f, "the run was stopped"),
            Error::Internal(message) => write!(f, "internal error: {message}"),
        }
    }
}

impl std::error::Error for Error {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_number_is_shown_as_written_unless_huge_or_tiny() {
        let cases = [
            (0.0, "0"),
            (2.5, "2.5"),
            (1e-4, "0.0001"),
            (999_999_999.0, "999999999"),
            (1e9, "1e9"),
            (-1e300, "-1e300"),
            (-5e-5, "-5e-5"),
            (f64::INFINITY, "inf"),
        ];
        for (x, shown) in cases {
            assert_eq!(Shown(x).to_string(), shown);
        }
    }

    #[test]
    fn long_words_and_long_messages_are_shortened_keeping_their_ends() {
        assert_eq!(shortened("short: message"), "short: message");
        let key = "k".repeat(200_000);
        let message = format!("--set {key}: not a parameter");
        let expected = format!("--set {}…[199901 characters]…{}: not a parameter", "k".repeat(80), "k".repeat(19));
        assert_eq!(shortened(&message), expected);
        let exactly = "w".repeat(MAX_SHOWN_WORD);
        assert_eq!(shortened(&exactly), exactly);
        // Many short words: the message is cut as a whole.
        let spaced = "ab ".repeat(1000);
        let cut = shortened(&spaced);
        assert_eq!(cut.chars().count(), 700 + 200 + "…[2100 characters]…".chars().count());
        assert!(cut.starts_with("ab ab") && cut.ends_with("ab ab "), "{cut}");
    }

    #[test]
    fn an_io_reason_drops_the_os_code_and_keeps_a_message_without_one() {
        assert_eq!(io_reason(&std::io::Error::from_raw_os_error(2)), "No such file or directory");
        let custom = std::io::Error::other("disk on fire");
        assert_eq!(io_reason(&custom), "disk on fire");
    }
}
