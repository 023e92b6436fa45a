//! Pleiades.
