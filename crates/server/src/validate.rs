//! Checks of request bodies the handlers make before a command reaches the actor: ids (a
//! strict character set and length), job counts (bounded, so that no count or sum overflows),
//! and, for a submit, the whole body parsed into the API's [`SubmitOperation`], with errors
//! that name the field by its path (`tasks[0].envv: unknown field ...`).

use fairsched_api::{ApiError, SubmitOperation, codes};
use serde_json::Value;

/// The longest operation or node id, in bytes.
pub const MAX_ID_LEN: usize = 128;

/// The most jobs an operation may have, over all its tasks.
pub const MAX_OPERATION_JOBS: u64 = 1_000_000;

/// Whether `id` is a valid operation or node id: 1 to [`MAX_ID_LEN`] characters out of
/// `A-Z a-z 0-9 . _ -`, not starting with `.` (ids name directories on the nodes).
pub fn is_valid_id(id: &str) -> bool {
    !id.is_empty()
        && id.len() <= MAX_ID_LEN
        && !id.starts_with('.')
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
}

/// `what` (`operation`, `node`) id `id` in field `field`, checked: the error names the field
/// and says what an id may be (showing at most 64 characters of the one given).
pub fn check_id(field: &str, what: &str, id: &str) -> Result<(), ApiError> {
    if is_valid_id(id) {
        return Ok(());
    }
    let shown: String = id.chars().take(64).collect();
    let more = if shown.len() < id.len() { "..." } else { "" };
    Err(ApiError::new(
        codes::BAD_REQUEST,
        format!(
            "{field}: {shown:?}{more} is not a valid {what} id: use 1 to {MAX_ID_LEN} of the \
             characters A-Z a-z 0-9 . _ - (not starting with .)"
        ),
    )
    .with_attribute("field", field))
}

fn bad(field: &str, message: String) -> ApiError {
    ApiError::new(codes::BAD_REQUEST, message).with_attribute("field", field)
}

/// A submitted operation (`POST /api/v1/operations`), before the actor takes it: an object
/// whose `id`, if given, is a valid id, whose tasks have at most [`MAX_OPERATION_JOBS`] jobs
/// in all, and which parses as a [`SubmitOperation`] (unknown fields, also inside tasks, are
/// refused naming their path): that, parsed.
pub fn submit(spec: &Value) -> Result<SubmitOperation, ApiError> {
    let Some(obj) = spec.as_object() else {
        return Err(ApiError::new(
            codes::BAD_REQUEST,
            "an operation must be a JSON object",
        ));
    };
    match obj.get("id") {
        None => {}
        Some(Value::String(id)) => check_id("id", "operation", id)?,
        Some(_) => return Err(bad("id", "id: must be a string".into())),
    }
    let mut total: u64 = 0;
    let tasks = obj.get("tasks").and_then(Value::as_array);
    for (i, task) in tasks.into_iter().flatten().enumerate() {
        let field = format!("tasks[{i}].job_count");
        let Some(count) = task.get("job_count") else {
            continue; // The parse below says it is missing.
        };
        let Some(count) = count.as_u64().filter(|c| *c > 0) else {
            return Err(bad(
                &field,
                format!("{field}: must be a whole number of jobs from 1 to {MAX_OPERATION_JOBS}"),
            ));
        };
        total = total.saturating_add(count);
        if total > MAX_OPERATION_JOBS {
            return Err(bad(
                &field,
                format!(
                    "{field}: too many jobs: an operation may have at most \
                     {MAX_OPERATION_JOBS} jobs over all its tasks ({total} so far); split it \
                     into several operations"
                ),
            ));
        }
    }
    serde_path_to_error::deserialize::<_, SubmitOperation>(spec).map_err(|e| {
        let path = e.path().to_string();
        let inner = fairsched_config::user_words(&e.inner().to_string());
        let message = if path == "." {
            format!("bad operation spec: {inner}")
        } else {
            format!("bad operation spec: {path}: {inner}")
        };
        ApiError::new(codes::BAD_REQUEST, message).with_attribute("field", path)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids() {
        for ok in ["a", "op-1", "0.7", "A_b.c-d", &"x".repeat(MAX_ID_LEN)] {
            assert!(is_valid_id(ok), "{ok:?}");
        }
        for bad in [
            "",
            ".",
            "..",
            "../x",
            ".hidden",
            "a b",
            "a/b",
            "a\0b",
            "é",
            &"x".repeat(MAX_ID_LEN + 1),
        ] {
            assert!(!is_valid_id(bad), "{bad:?}");
        }
    }
}

/// A node as [`fits_some_node`] sees it.
#[derive(Debug)]
pub struct NodeFit {
    pub id: String,
    /// Its pool tree (none: no tree takes it).
    pub tree: Option<String>,
    pub tags: std::collections::BTreeSet<String>,
    pub resources: fairsched_resources::Resources,
}

/// Refuses an operation whose jobs could never run: in every tree it runs in that has nodes,
/// no node (of those its `scheduling_tag_filter` matches) is large enough for one of its jobs.
/// A tree without nodes yet (a cluster starting) passes: nodes that fit may join. The error
/// names the task, what a job needs and the largest node there is; `wait_for_nodes` (the
/// submit's `?wait_for_nodes=true`) skips the check, for clusters whose nodes come later.
pub fn fits_some_node(
    spec: &SubmitOperation,
    nodes: &[NodeFit],
    default_tree: &str,
) -> Result<(), ApiError> {
    let filter = spec
        .scheduling_tag_filter
        .as_deref()
        .and_then(|f| fairsched_config::TagFilter::parse(f).ok());
    let trees = spec
        .pool_trees
        .clone()
        .unwrap_or_else(|| vec![default_tree.to_string()]);
    let mut refusal = None;
    for tree in &trees {
        let nodes: Vec<&NodeFit> = nodes
            .iter()
            .filter(|n| n.tree.as_deref() == Some(tree.as_str()))
            .collect();
        if nodes.is_empty() {
            return Ok(());
        }
        let eligible: Vec<&&NodeFit> = nodes
            .iter()
            .filter(|n| filter.as_ref().is_none_or(|f| f.matches(&n.tags)))
            .collect();
        let unfit = spec
            .tasks
            .iter()
            .enumerate()
            .find(|(_, t)| !eligible.iter().any(|n| n.resources.dominates(&t.resources)));
        let Some((i, task)) = unfit else {
            return Ok(());
        };
        let largest = eligible
            .iter()
            .max_by_key(|n| n.resources.raw_of(fairsched_resources::ResourceKind::Cpu))
            .map(|n| {
                format!(
                    "the largest: node {:?} with {}",
                    n.id,
                    fairsched_api::format_resources(&n.resources)
                )
            })
            .unwrap_or_else(|| "none matches its scheduling_tag_filter".into());
        refusal.get_or_insert_with(|| {
            ApiError::new(
                codes::BAD_REQUEST,
                format!(
                    "tasks[{i}]: a job needs {} but no node of pool tree {tree:?} can hold one \
                     ({largest}), so it would wait forever; submit it with \
                     ?wait_for_nodes=true (`fairsched op run --wait-for-nodes`) if such nodes \
                     will join",
                    fairsched_api::format_resources(&task.resources)
                ),
            )
            .with_attribute("field", format!("tasks[{i}].resources"))
        });
    }
    match refusal {
        Some(e) => Err(e),
        None => Ok(()),
    }
}
