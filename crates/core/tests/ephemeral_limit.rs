//! Issue 18, item 5: the ephemeral-pool limit error says what happened (the pool does not
//! exist, so the operation would create one) and how to name an existing pool.

mod common;

use common::{StartOp, op, res, scheduler, task};
use fairsched_core::SchedulerConfig;

/// (case, tree, pool the second operation names, fragments of the error)
const CASES: &[(&str, &str, &str, &[&str])] = &[
    (
        "a name close to a configured pool",
        r#"{"pool_trees": {"default": {"pools": {"research": {}, "prod": {}}}}}"#,
        "reserch",
        &[
            // YTsaurus' text stays first.
            "cannot create new ephemeral pool \"reserch\" for user \"user\": the limit of 1 \
             ephemeral pools per user in \"<Root>\" has been reached; previously created pools \
             are [\"mine\"]",
            "Pool \"reserch\" does not exist, so running the operation there would create it",
            "would create it as your ephemeral pool. Did you mean \"research\"? Name an \
             existing pool (pools of tree \"default\": \"prod\", \"research\")",
            "or one of your ephemeral pools [\"mine\"]",
            "raise max_ephemeral_pools_per_user",
        ],
    ),
    (
        "no configured pool at all",
        r#"{"pool_trees": {"default": {"pools": {}}}}"#,
        "other",
        &[
            "Pool \"other\" does not exist",
            "Name an existing pool (the tree configures no pools)",
        ],
    ),
];

#[test]
fn the_ephemeral_pool_limit_error_explains_and_names_existing_pools() {
    for &(name, tree, pool, fragments) in CASES {
        let mut s = scheduler(tree, SchedulerConfig::default());
        s.start_op(
            0,
            op("first", Some("mine"), vec![task(1, res(1.0, 1.0), None)]),
        )
        .expect("the first ephemeral pool is allowed");
        let err = s
            .start_op(
                0,
                op("second", Some(pool), vec![task(1, res(1.0, 1.0), None)]),
            )
            .expect_err("over the limit")
            .to_string();
        for f in fragments {
            assert!(err.contains(f), "{name}: {err:?} lacks {f:?}");
        }
    }
}
