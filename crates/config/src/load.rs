//! Reading and writing configuration documents (TOML and JSON).

use crate::error::{Error, Format, LoadError};
use crate::trees::{PoolTreeConfig, PoolTrees};
use crate::validate::{ValidatedPoolTrees, ValidatedTree, validate_pool_trees, validate_tree};
use serde::Serialize;
use serde::de::DeserializeOwned;
use std::path::Path;

/// Parses any configuration type from text. Unknown options, wrong types and bad values are
/// errors naming the path inside the document (`pools.research.pools.adhoc.weight`).
pub fn from_str<T: DeserializeOwned>(text: &str, format: Format) -> Result<T, LoadError> {
    match format {
        Format::Toml => {
            let de = toml::Deserializer::new(text);
            serde_path_to_error::deserialize(de).map_err(|e| {
                let path = document_path(e.path());
                let inner = e.into_inner();
                let (line, column) = match inner.span() {
                    Some(span) => {
                        let (l, c) = line_column(text, span.start);
                        (Some(l), Some(c))
                    }
                    None => (None, None),
                };
                LoadError::Parse {
                    file: None,
                    format,
                    path,
                    line,
                    column,
                    message: tidy_message(inner.message().trim_end()),
                }
            })
        }
        Format::Json => {
            let mut de = serde_json::Deserializer::from_str(text);
            let value = serde_path_to_error::deserialize(&mut de).map_err(|e| {
                let path = document_path(e.path());
                json_error(path, e.inner())
            })?;
            de.end().map_err(|e| json_error(String::new(), &e))?;
            Ok(value)
        }
    }
}

/// Reads any configuration type from a `.toml` or `.json` file (format by extension).
pub fn from_file<T: DeserializeOwned>(path: impl AsRef<Path>) -> Result<T, LoadError> {
    let path = path.as_ref();
    let format = Format::from_path(path).ok_or_else(|| LoadError::UnknownFormat {
        file: path.to_path_buf(),
    })?;
    let text = std::fs::read_to_string(path).map_err(|source| LoadError::Io {
        file: path.to_path_buf(),
        source,
    })?;
    from_str(&text, format).map_err(|e| e.with_file(path.to_path_buf()))
}

/// Writes any configuration type as TOML or JSON (pretty, ending with a newline). Options at
/// their default are mostly left out of pool objects; tree configs are written in full.
pub fn to_string<T: Serialize>(value: &T, format: Format) -> Result<String, SerializeError> {
    match format {
        Format::Toml => toml::to_string_pretty(value).map_err(|e| SerializeError(e.to_string())),
        Format::Json => serde_json::to_string_pretty(value)
            .map(|mut s| {
                s.push('\n');
                s
            })
            .map_err(|e| SerializeError(e.to_string())),
    }
}

/// A value could not be written (for example a non-finite number in TOML is fine, but a
/// number out of TOML's integer range is not).
#[derive(Debug, thiserror::Error)]
#[error("cannot serialize configuration: {0}")]
pub struct SerializeError(pub String);

/// Parses a set of trees (`default_tree` + `pool_trees`).
pub fn load_pool_trees_str(text: &str, format: Format) -> Result<PoolTrees, LoadError> {
    from_str(text, format)
}

/// Reads a set of trees from a `.toml` or `.json` file.
pub fn load_pool_trees_file(path: impl AsRef<Path>) -> Result<PoolTrees, LoadError> {
    from_file(path)
}

/// Parses one tree (`config` + `pools`).
pub fn load_pool_tree_str(text: &str, format: Format) -> Result<PoolTreeConfig, LoadError> {
    from_str(text, format)
}

/// Reads one tree from a `.toml` or `.json` file.
pub fn load_pool_tree_file(path: impl AsRef<Path>) -> Result<PoolTreeConfig, LoadError> {
    from_file(path)
}

/// Reads and validates one tree: the value the server should run with, or every problem.
pub fn load_and_validate_pool_tree_file(path: impl AsRef<Path>) -> Result<ValidatedTree, Error> {
    let path = path.as_ref();
    let tree = load_pool_tree_file(path)?;
    validate_tree(&tree).map_err(|errors| Error::Invalid {
        file: Some(path.to_path_buf()),
        errors,
    })
}

/// Reads and validates a set of trees.
pub fn load_and_validate_pool_trees_file(
    path: impl AsRef<Path>,
) -> Result<ValidatedPoolTrees, Error> {
    let path = path.as_ref();
    let trees = load_pool_trees_file(path)?;
    validate_pool_trees(&trees).map_err(|errors| Error::Invalid {
        file: Some(path.to_path_buf()),
        errors,
    })
}

fn document_path(path: &serde_path_to_error::Path) -> String {
    let s = path.to_string();
    if s == "." { String::new() } else { s }
}

fn json_error(path: String, e: &serde_json::Error) -> LoadError {
    let (line, column) = (e.line(), e.column());
    let full = e.to_string();
    let suffix = format!(" at line {line} column {column}");
    let message = tidy_message(full.strip_suffix(&suffix).unwrap_or(&full));
    LoadError::Parse {
        file: None,
        format: Format::Json,
        path,
        line: (line > 0).then_some(line),
        column: (line > 0).then_some(column),
        message,
    }
}

/// 1-based line and column of a byte offset.
fn line_column(text: &str, offset: usize) -> (usize, usize) {
    let mut offset = offset.min(text.len());
    while !text.is_char_boundary(offset) {
        offset -= 1;
    }
    let before = &text[..offset];
    let line = before.matches('\n').count() + 1;
    let column = before.rfind('\n').map_or(offset, |i| offset - i - 1) + 1;
    (line, column)
}

/// Shortens serde's "unknown field `x`, expected one of `a`, `b`, ..." (which lists every
/// option) to "unknown option `x`" plus the closest known name when one is close.
fn tidy_message(message: &str) -> String {
    let Some(rest) = message.strip_prefix("unknown field `") else {
        return crate::user_words(message);
    };
    let Some((field, expected)) = rest.split_once('`') else {
        return crate::user_words(message);
    };
    let candidates: Vec<&str> = expected
        .split('`')
        .skip(1)
        .step_by(2)
        .filter(|c| !c.is_empty())
        .collect();
    let best = candidates
        .iter()
        .map(|c| (edit_distance(field, c), *c))
        .min();
    match best {
        Some((d, name)) if d <= 3.max(field.len() / 4) => {
            format!("unknown option `{field}` (did you mean `{name}`?)")
        }
        _ if candidates.is_empty() => format!("unknown option `{field}` (no options allowed here)"),
        // A tree named where the set of trees is (`[pool_trees.default]` in a server file).
        _ if candidates.contains(&"pool_trees") && candidates.contains(&"default_tree") => {
            format!(
                "unknown option `{field}` (trees are named inside this table's own \
                 `pool_trees`: [pool_trees.pool_trees.{field}] in a server file, \
                 [pool_trees.{field}] in a pool-trees file)"
            )
        }
        _ => format!("unknown option `{field}`"),
    }
}

/// The candidate closest to `word` when one is close enough to be a likely typo (the rule of
/// "did you mean" for options, also used for pool names); `None` for `word` itself.
pub fn closest<'a>(word: &str, candidates: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    candidates
        .into_iter()
        .filter(|c| *c != word)
        .map(|c| (edit_distance(word, c), c))
        .min()
        .filter(|(d, _)| *d <= 3.max(word.len() / 4))
        .map(|(_, c)| c)
}

/// Levenshtein distance over bytes (option names are ASCII).
fn edit_distance(a: &str, b: &str) -> usize {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for (i, &ca) in a.iter().enumerate() {
        let mut cur = vec![i + 1; b.len() + 1];
        for (j, &cb) in b.iter().enumerate() {
            let cost = usize::from(ca != cb);
            cur[j + 1] = (prev[j] + cost).min(prev[j + 1] + 1).min(cur[j] + 1);
        }
        prev = cur;
    }
    prev[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_field_messages_are_shortened_with_a_suggestion() {
        let cases = [
            (
                "unknown field `wieght`, expected one of `weight`, `mode`",
                "unknown option `wieght` (did you mean `weight`?)",
            ),
            (
                "unknown field `colour`, expected one of `weight`, `mode`",
                "unknown option `colour`",
            ),
            (
                "unknown field `x`, there are no fields",
                "unknown option `x` (no options allowed here)",
            ),
            ("invalid type: string", "invalid type: string"),
            (
                "unknown field `default`, expected `default_tree` or `pool_trees`",
                "unknown option `default` (trees are named inside this table's own \
                 `pool_trees`: [pool_trees.pool_trees.default] in a server file, \
                 [pool_trees.default] in a pool-trees file)",
            ),
        ];
        for (input, expected) in cases {
            assert_eq!(tidy_message(input), expected);
        }
    }

    #[test]
    fn edit_distance_and_positions() {
        assert_eq!(edit_distance("weight", "weight"), 0);
        assert_eq!(edit_distance("wieght", "weight"), 2);
        assert_eq!(edit_distance("", "abc"), 3);
        assert_eq!(line_column("ab\ncd", 0), (1, 1));
        assert_eq!(line_column("ab\ncd", 4), (2, 2));
        assert_eq!(line_column("ab\ncd", 99), (2, 3));
        assert_eq!(line_column("é\nx", 1), (1, 1));
    }
}
