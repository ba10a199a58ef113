//! Checks of a submitted operation spec that do not need the scheduler's state.

use crate::error::CoreError;
use crate::model::OperationSpec;

/// Rejects specs that cannot run, naming the field.
/// The longest duration an operation may give (a timeout, a time limit), in milliseconds:
/// ten years. Longer ones are refused rather than overflow the core's time arithmetic.
pub const MAX_DURATION_MS: u64 = 10 * 365 * 24 * 3600 * 1000;

/// Refuses a duration above [`MAX_DURATION_MS`], naming operation `id` and `field` (a path
/// such as `tasks[0].time_limit_ms`). Drivers check the durations in their own task fields
/// with it too (the scenario's `duration_ms`), so that they are refused in the core's words.
pub fn check_duration(id: &str, field: &str, ms: Option<u64>) -> Result<(), CoreError> {
    match ms {
        Some(ms) if ms > MAX_DURATION_MS => Err(CoreError::new(format!(
            "operation {id:?}: {field} must be at most {MAX_DURATION_MS} ms (ten years; got {ms})"
        ))),
        _ => Ok(()),
    }
}

/// Refuses a simulated job's run time (`duration_ms`) or exit delay (`exit_after_interrupt_ms`)
/// above [`MAX_DURATION_MS`], per task (in order), in the core's words: the core does not read
/// these fields, but the drivers that do (the scenario runner, the server's API) refuse them
/// alike.
pub fn check_job_durations(
    id: &str,
    tasks: impl IntoIterator<Item = (Option<u64>, Option<u64>)>,
) -> Result<(), CoreError> {
    for (i, (duration, exit_after)) in tasks.into_iter().enumerate() {
        check_duration(id, &format!("tasks[{i}].duration_ms"), duration)?;
        check_duration(
            id,
            &format!("tasks[{i}].exit_after_interrupt_ms"),
            exit_after,
        )?;
    }
    Ok(())
}

/// An operation's weight takes the range of a pool's (`fairsched_config::MIN_WEIGHT` ..=
/// `MAX_WEIGHT`, YTsaurus' bounds): weights far apart make the fair-share computation's
/// ratios meaningless.
pub(crate) fn check_operation_weight(id: &str, field: &str, w: f64) -> Result<(), CoreError> {
    use fairsched_config::{MAX_WEIGHT, MIN_WEIGHT};
    if !w.is_finite() || w <= 0.0 {
        return Err(CoreError::new(format!(
            "operation {id:?}: {field} must be a positive number (got {w})"
        )));
    }
    if !(MIN_WEIGHT..=MAX_WEIGHT).contains(&w) {
        return Err(CoreError::new(format!(
            "operation {id:?}: {field} must be in [{MIN_WEIGHT:e}, {MAX_WEIGHT:e}] (got {w:e})"
        )));
    }
    Ok(())
}

pub(crate) fn validate_operation_spec(spec: &OperationSpec) -> Result<(), CoreError> {
    let id = &spec.id.0;
    if id.is_empty() {
        return Err(CoreError::new("operation id must not be empty"));
    }
    if spec.tasks.is_empty() {
        return Err(CoreError::new(format!(
            "operation {id:?}: tasks must not be empty"
        )));
    }
    if let Some(w) = spec.weight {
        check_operation_weight(id, "weight", w)?;
    }
    for (tree, o) in &spec.scheduling_options_per_pool_tree {
        if let Some(w) = o.weight {
            check_operation_weight(
                id,
                &format!("scheduling_options_per_pool_tree.{tree}.weight"),
                w,
            )?;
        }
    }
    if let Some(t) = spec.fair_share_starvation_tolerance
        && !(0.0..=1.0).contains(&t)
    {
        return Err(CoreError::new(format!(
            "operation {id:?}: fair_share_starvation_tolerance must be in [0, 1] (got {t})"
        )));
    }
    let durations = [
        ("interruption_timeout_ms", spec.interruption_timeout_ms),
        (
            "fair_share_starvation_timeout_ms",
            spec.fair_share_starvation_timeout_ms,
        ),
    ];
    for (field, ms) in durations {
        check_duration(id, field, ms)?;
    }
    if let Some(Err(e)) = spec
        .scheduling_tag_filter
        .as_deref()
        .map(fairsched_config::TagFilter::parse)
    {
        return Err(CoreError::new(format!(
            "operation {id:?}: scheduling_tag_filter: {e}"
        )));
    }
    for (i, t) in spec.tasks.iter().enumerate() {
        if t.resources.any_negative() {
            return Err(CoreError::new(format!(
                "operation {id:?}: tasks[{i}].resources must not be negative"
            )));
        }
        if t.resources.is_zero() {
            return Err(CoreError::new(format!(
                "operation {id:?}: tasks[{i}].resources must request something"
            )));
        }
        check_duration(id, &format!("tasks[{i}].time_limit_ms"), t.time_limit_ms)?;
        if t.time_limit_ms == Some(0) {
            return Err(CoreError::new(format!(
                "operation {id:?}: tasks[{i}].time_limit_ms must be positive (leave it out for \
                 no limit)"
            )));
        }
    }
    Ok(())
}
