//! The states the API shows: of operations ([`OperationState`]), of jobs ([`JobState`], also a
//! node's report of how a job ended: [`FinishedJob::outcome`](crate::FinishedJob::outcome))
//! and of nodes ([`NodeState`]). On the wire each is its snake_case name (`"running"`), as it
//! was when these fields were strings.
//!
//! **Forward compatibility.** Each enum has an `Unknown` variant that any other string parses
//! to (`#[serde(other)]`): a client (the CLI, an agent) reading the reply of a newer server
//! that has a state this version does not name still reads the rest of the reply. The server
//! never sends `Unknown` (it would go on the wire as `"unknown"`); code that decides by a
//! state treats it as "none of the known ones" (e.g. not finished). Where the API takes a
//! state from a caller as text (`?state=` of `GET /api/v1/operations`), the server parses it
//! with `from_name`, which knows no `Unknown`, and refuses an unknown name.

use serde::{Deserialize, Serialize};
use std::fmt;

macro_rules! named_states {
    (
        $(#[$meta:meta])*
        $name:ident { $($(#[$vmeta:meta])* $variant:ident => $text:literal,)+ }
    ) => {
        $(#[$meta])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
        #[serde(rename_all = "snake_case")]
        pub enum $name {
            $($(#[$vmeta])* $variant,)+
            /// A state this version does not know (a newer server's): see the [module
            /// documentation](self). Never sent by the server.
            #[serde(other)]
            Unknown,
        }

        impl $name {
            /// Every known state (not [`Self::Unknown`]), in the order the API documents them.
            pub const ALL: &[$name] = &[$($name::$variant,)+];

            /// The state's name on the wire (`Unknown`: `"unknown"`).
            pub fn name(self) -> &'static str {
                match self {
                    $($name::$variant => $text,)+
                    $name::Unknown => "unknown",
                }
            }

            /// The known state named `name` (never [`Self::Unknown`]).
            pub fn from_name(name: &str) -> Option<$name> {
                $name::ALL.iter().copied().find(|s| s.name() == name)
            }
        }

        /// The name, padded as the formatter asks (`{:<10}`).
        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.pad(self.name())
            }
        }
    };
}

named_states! {
    /// An operation's state ([`OperationView::state`](crate::OperationView::state)).
    OperationState {
        /// Accepted, waiting for a running slot in its pools.
        Pending => "pending",
        Running => "running",
        Completed => "completed",
        Failed => "failed",
        Aborted => "aborted",
    }
}

impl OperationState {
    /// Completed, failed or aborted: it changes no more.
    pub fn is_finished(self) -> bool {
        matches!(
            self,
            OperationState::Completed | OperationState::Failed | OperationState::Aborted
        )
    }
}

named_states! {
    /// A job's state ([`JobView::state`](crate::JobView::state)), and how a job ended as its
    /// node reports it ([`FinishedJob::outcome`](crate::FinishedJob::outcome): completed,
    /// failed or aborted).
    JobState {
        Running => "running",
        Completed => "completed",
        Failed => "failed",
        Aborted => "aborted",
    }
}

named_states! {
    /// A node's state for scheduling ([`NodeView::state`](crate::NodeView::state)).
    NodeState {
        /// It gets new jobs.
        Enabled => "enabled",
        /// Nothing new starts on it; its running jobs finish.
        Draining => "draining",
        /// `scheduler_jobs_enabled = false` (wins over draining): its jobs were aborted.
        Disabled => "disabled",
        /// No heartbeat within `node_timeout_ms`, or its agent stopped: the node is gone
        /// (its jobs ran again elsewhere); listed until it registers again.
        Lost => "lost",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// Each state's JSON string, and back; `Display` is the same name.
    #[test]
    fn states_round_trip_as_their_names() {
        fn check<T>(cases: &[(T, &str)], all: &[T])
        where
            T: Copy + PartialEq + fmt::Debug + fmt::Display + Serialize,
            T: for<'de> Deserialize<'de>,
        {
            for (state, text) in cases {
                assert_eq!(
                    serde_json::to_value(state).unwrap(),
                    json!(text),
                    "{state:?}"
                );
                let back: T = serde_json::from_value(json!(text)).unwrap();
                assert_eq!(back, *state, "{text}");
                assert_eq!(state.to_string(), *text);
            }
            // Every known state has a case (the unknown one is the last case).
            let known: Vec<T> = cases[..cases.len() - 1].iter().map(|c| c.0).collect();
            assert_eq!(known, all);
        }
        use JobState as J;
        use NodeState as N;
        use OperationState as O;
        check(
            &[
                (O::Pending, "pending"),
                (O::Running, "running"),
                (O::Completed, "completed"),
                (O::Failed, "failed"),
                (O::Aborted, "aborted"),
                (O::Unknown, "unknown"),
            ],
            O::ALL,
        );
        check(
            &[
                (J::Running, "running"),
                (J::Completed, "completed"),
                (J::Failed, "failed"),
                (J::Aborted, "aborted"),
                (J::Unknown, "unknown"),
            ],
            J::ALL,
        );
        check(
            &[
                (N::Enabled, "enabled"),
                (N::Draining, "draining"),
                (N::Disabled, "disabled"),
                (N::Lost, "lost"),
                (N::Unknown, "unknown"),
            ],
            N::ALL,
        );
    }

    /// A state of a newer server parses as `Unknown`; `from_name` (what the server takes from
    /// callers) knows only the known ones; what is not a string is an error.
    #[test]
    fn unknown_states() {
        for text in ["suspended", "Running", ""] {
            let s: OperationState = serde_json::from_value(json!(text)).unwrap();
            assert_eq!(s, OperationState::Unknown, "{text:?}");
            assert_eq!(OperationState::from_name(text), None, "{text:?}");
            let j: JobState = serde_json::from_value(json!(text)).unwrap();
            assert_eq!(j, JobState::Unknown, "{text:?}");
        }
        assert_eq!(OperationState::from_name("unknown"), None);
        assert_eq!(
            OperationState::from_name("aborted"),
            Some(OperationState::Aborted)
        );
        assert!(serde_json::from_value::<JobState>(json!(1)).is_err());
        assert!(serde_json::from_value::<JobState>(json!(null)).is_err());
    }

    #[test]
    fn display_pads() {
        assert_eq!(format!("[{:<9}]", OperationState::Running), "[running  ]");
        assert_eq!(format!("[{:>6}]", JobState::Failed), "[failed]");
    }

    #[test]
    fn finished() {
        let finished: Vec<OperationState> = OperationState::ALL
            .iter()
            .copied()
            .filter(|s| s.is_finished())
            .collect();
        use OperationState as O;
        assert_eq!(finished, [O::Completed, O::Failed, O::Aborted]);
        assert!(!O::Unknown.is_finished());
    }
}
