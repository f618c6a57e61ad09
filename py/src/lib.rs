//! Python module (being written).
