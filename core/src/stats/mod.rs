//! What the runtime counts as it works, in a leaf module every layer may write to: per-op and
//! per-error counters (`counters`) and the running profile's rows (`recording`). Readers sit
//! above: `metrics` exports the counters, `profile` starts, stops and prints profiles.

pub(crate) mod counters;
pub(crate) mod recording;
