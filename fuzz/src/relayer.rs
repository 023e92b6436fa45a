//! What the relayer reads: its JSON5 config, and the messages of a Hyades record feed.
//!
//! Each `fn(&[u8])` here is one fuzz target's body: it must not panic on any input. The fuzz
//! targets call them, and aldb-relayer's `fuzz_regressions` test replays the checked-in inputs
//! through them.

use std::path::Path;

use aldb_relayer::Config;
use aldb_relayer::follow::{FeedMessage, parse_message};

/// Most characters of a server's text the follower quotes.
const QUOTE_MAX: usize = 200;

/// `Config::parse`: what it accepts holds together (a valid quorum, distinct ws:// endpoints,
/// distinct files, ordered backoff), in either trust mode.
pub fn relayer_config(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let Ok(config) = Config::parse(text, Path::new("/nonexistent/aldb-fuzz")) else { return };
    assert!(!config.endpoints.is_empty());
    for (i, e) in config.endpoints.iter().enumerate() {
        assert!(e.starts_with("ws://"), "endpoint {e:?} is not a ws:// URL");
        assert!(!config.endpoints[..i].contains(e));
    }
    match &config.trust {
        aldb_relayer::Trust::Signers(s) => {
            assert!(s.quorum.threshold() >= 1 && s.quorum.threshold() <= s.identities.len());
            assert_ne!(s.cursor_file, config.output_file);
        }
        aldb_relayer::Trust::Votes(v) => {
            assert_ne!(v.state_file, config.output_file);
            assert_ne!(v.state_file, v.checkpoint);
        }
        _ => {}
    }
    assert!(config.backoff_initial <= config.backoff_max);
}

/// `follow::parse_message`, on what a Hyades record feed sends the relayer: any text gives an
/// answer or an error, a record it accepts carries its own hash, and no error quotes more than
/// a bounded piece of the message.
pub fn relayer_message(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else { return };
    match parse_message(text) {
        Ok(FeedMessage::Record(r)) => assert_eq!(r.record_hash, r.record.hash()),
        Ok(FeedMessage::SubscribeFailed { error, .. }) => assert!(error.chars().count() <= QUOTE_MAX),
        Ok(_) => {}
        Err(e) => {
            let shown = e.to_string();
            assert!(shown.chars().count() <= QUOTE_MAX + 100, "error quotes {} characters", shown.chars().count());
        }
    }
}
