//! The fairsched scheduler server (work in progress).
