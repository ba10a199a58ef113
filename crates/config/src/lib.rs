//! Pool-tree configuration (filled in by the config work).
