//! The fairsched node agent (work in progress).
