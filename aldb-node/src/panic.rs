//! The pipeline's one rule for a panic on its own thread: catch it, log it, count it, and stop.
//!
//! A panic half-way through a step may leave the engine or the snapshot writer's tables half
//! changed; going on from there could publish a wrong root or serve a wrong file. So the thread
//! that caught it stops taking work (the roots already given out stand) and the writer is shut
//! down with what it had. Validator callbacks catch their own panics and return them as errors:
//! they must never stop.

use std::any::Any;
use std::panic::{AssertUnwindSafe, catch_unwind};

use crate::stats::NodeStats;

/// The panic payload's message, for logs and errors.
pub fn panic_message(payload: &(dyn Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_string()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "(no message)".to_string()
    }
}

/// A step of a pipeline thread panicked: the thread must stop.
#[derive(Debug)]
pub struct Stopped;

/// Runs one step of a pipeline thread. A panic is counted in [`NodeStats::panics`] and logged as
/// `{stopping}: {message}`, and the thread is told to stop.
pub fn step(stats: &NodeStats, stopping: &str, f: impl FnOnce()) -> Result<(), Stopped> {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(()) => Ok(()),
        Err(payload) => {
            NodeStats::add(&stats.panics, 1);
            log::error!("{stopping}: {}", panic_message(payload.as_ref()));
            Err(Stopped)
        }
    }
}
