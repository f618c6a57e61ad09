//! What the runtime counts as it works, in a leaf module every layer may write to: per-op and
//! per-error counters (`counters`), the running profile's rows (`recording`) and the phases of
//! the process's start (`startup`, public: the models and the CLI mark theirs too). Readers sit
//! above: `metrics` exports the counters, `profile` starts, stops and prints profiles.

pub(crate) mod counters;
pub(crate) mod recording;
pub mod startup;
