//! Operation-level starvation settings may only make an operation more conservative than its
//! pool (scheduler spec §2.1): tolerance = min(pool, spec), timeout = max(pool, spec).

mod common;

use common::*;
use fairsched_core::SchedulerConfig;

#[test]
fn operation_overrides_are_only_more_conservative() {
    let tree = r#"{"pool_trees": {"default": {"pools": {"p": {"fair_share_starvation_tolerance": 0.8, "fair_share_starvation_timeout_ms": 5000}}}}}"#;
    // (spec tolerance, spec timeout, effective tolerance, effective timeout)
    let cases = [
        (None, None, 0.8, 5000),
        (Some(0.5), None, 0.5, 5000),
        (Some(0.9), None, 0.8, 5000),
        (None, Some(10_000), 0.8, 10_000),
        (None, Some(1000), 0.8, 5000),
    ];
    for (tolerance, timeout, want_tolerance, want_timeout) in cases {
        let mut s = scheduler(tree, SchedulerConfig::default());
        add_nodes(&mut s, 1, res(1.0, 1.0));
        let mut o = op("o", Some("p"), vec![task(2, res(1.0, 1.0), None)]);
        o.fair_share_starvation_tolerance = tolerance;
        o.fair_share_starvation_timeout_ms = timeout;
        s.start_op(0, o).unwrap();
        s.tick(0);
        let snap = s.snapshot(0);
        let e = snap.operations["o"].element.as_ref().expect("in the tree");
        assert_eq!(
            e.effective_fair_share_starvation_tolerance, want_tolerance,
            "{tolerance:?}"
        );
        assert_eq!(
            e.effective_fair_share_starvation_timeout_ms, want_timeout,
            "{timeout:?}"
        );
    }
}
