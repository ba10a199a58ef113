//! Errors: validation problems ([`ConfigError`], [`ConfigErrors`]) and loading problems
//! ([`LoadError`]).

use serde::Serialize;
use std::fmt;
use std::path::PathBuf;

/// One problem found in a configuration.
///
/// `pool` is the pool's path in its tree (`"research/adhoc"`), `None` for tree-level and
/// file-level problems; `field` names the option (`"weight"`,
/// `"strong_guarantee_resources.cpu"`, `"config.fair_share_starvation_tolerance"`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ConfigError {
    /// The tree, when validating several trees (`None` when validating one tree on its own).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tree: Option<String>,
    /// Path of the pool in its tree, `None` for tree-level problems.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pool: Option<String>,
    /// The option at fault.
    pub field: String,
    /// What is wrong, with the offending value.
    pub message: String,
    /// YTsaurus error code, when one exists (29000 guarantees overcommit, ...).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub code: Option<u32>,
}

impl ConfigError {
    /// An error about a pool's option.
    pub fn pool(
        pool: impl Into<String>,
        field: impl Into<String>,
        message: impl Into<String>,
    ) -> Self {
        ConfigError {
            tree: None,
            pool: Some(pool.into()),
            field: field.into(),
            message: message.into(),
            code: None,
        }
    }

    /// An error about a tree-level (or file-level) option.
    pub fn tree_level(field: impl Into<String>, message: impl Into<String>) -> Self {
        ConfigError {
            tree: None,
            pool: None,
            field: field.into(),
            message: message.into(),
            code: None,
        }
    }

    /// Sets the error code.
    #[must_use]
    pub fn with_code(mut self, code: u32) -> Self {
        self.code = Some(code);
        self
    }

    /// Sets the tree name.
    #[must_use]
    pub fn in_tree(mut self, tree: impl Into<String>) -> Self {
        self.tree = Some(tree.into());
        self
    }
}

/// `tree "t": pool "research/adhoc": field "weight": must be > 0 (got -1)`.
impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(tree) = &self.tree {
            write!(f, "tree {tree:?}: ")?;
        }
        if let Some(pool) = &self.pool {
            write!(f, "pool {pool:?}: ")?;
        }
        write!(f, "field {:?}: {}", self.field, self.message)?;
        if let Some(code) = self.code {
            write!(f, " (code {code})")?;
        }
        Ok(())
    }
}

impl std::error::Error for ConfigError {}

/// Every problem found in one validation. Never empty when returned as an error.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(transparent)]
pub struct ConfigErrors(pub Vec<ConfigError>);

impl ConfigErrors {
    /// The errors.
    pub fn errors(&self) -> &[ConfigError] {
        &self.0
    }

    /// Number of errors.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Whether there is no error.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Finds the first error about `pool` (path, `None` for tree level) and `field`.
    pub fn find(&self, pool: Option<&str>, field: &str) -> Option<&ConfigError> {
        self.0
            .iter()
            .find(|e| e.pool.as_deref() == pool && e.field == field)
    }
}

impl From<Vec<ConfigError>> for ConfigErrors {
    fn from(errors: Vec<ConfigError>) -> Self {
        ConfigErrors(errors)
    }
}

impl IntoIterator for ConfigErrors {
    type Item = ConfigError;
    type IntoIter = std::vec::IntoIter<ConfigError>;
    fn into_iter(self) -> Self::IntoIter {
        self.0.into_iter()
    }
}

/// One error per line, after a count line.
impl fmt::Display for ConfigErrors {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let n = self.0.len();
        write!(
            f,
            "invalid configuration: {n} error{}",
            if n == 1 { "" } else { "s" }
        )?;
        for e in &self.0 {
            write!(f, "\n  - {e}")?;
        }
        Ok(())
    }
}

impl std::error::Error for ConfigErrors {}

/// Text format of a configuration document.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Format {
    Toml,
    Json,
}

impl Format {
    /// Picks the format from a file extension (`.toml`, `.json`; case-insensitive).
    pub fn from_path(path: &std::path::Path) -> Option<Format> {
        let ext = path.extension()?.to_str()?.to_ascii_lowercase();
        match ext.as_str() {
            "toml" => Some(Format::Toml),
            "json" => Some(Format::Json),
            _ => None,
        }
    }

    /// `"TOML"` or `"JSON"`.
    pub const fn name(self) -> &'static str {
        match self {
            Format::Toml => "TOML",
            Format::Json => "JSON",
        }
    }
}

impl fmt::Display for Format {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A document could not be read or did not match the configuration schema.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// The file could not be read.
    #[error("{}: cannot read: {source}", file.display())]
    Io {
        file: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// The file's extension is neither `.toml` nor `.json`.
    #[error("{}: unknown configuration format (expected a .toml or .json file)", file.display())]
    UnknownFormat { file: PathBuf },
    /// Syntax error, unknown option, wrong type or bad value.
    #[error("{}", render_parse(file.as_ref(), *format, path, *line, *column, message))]
    Parse {
        /// The file, when loading from a file.
        file: Option<PathBuf>,
        format: Format,
        /// Path inside the document (`pools.research.pools.adhoc.weight`); empty at the top.
        path: String,
        /// 1-based line, when the parser reports it.
        line: Option<usize>,
        /// 1-based column, when the parser reports it.
        column: Option<usize>,
        /// The parser's message.
        message: String,
    },
}

impl LoadError {
    /// The path inside the document for parse errors.
    pub fn document_path(&self) -> Option<&str> {
        match self {
            LoadError::Parse { path, .. } => Some(path),
            _ => None,
        }
    }

    /// Attaches a file name (for errors produced while parsing a string read from a file).
    #[must_use]
    pub fn with_file(mut self, new_file: PathBuf) -> Self {
        if let LoadError::Parse { file, .. } = &mut self {
            *file = Some(new_file);
        }
        self
    }
}

fn render_parse(
    file: Option<&PathBuf>,
    format: Format,
    path: &str,
    line: Option<usize>,
    column: Option<usize>,
    message: &str,
) -> String {
    let mut out = match file {
        Some(file) => file.display().to_string(),
        None => format!("<{format} input>"),
    };
    if let Some(line) = line {
        out.push_str(&format!(":{line}"));
        if let Some(column) = column {
            out.push_str(&format!(":{column}"));
        }
    }
    if path.is_empty() {
        out.push_str(&format!(": {message}"));
    } else {
        out.push_str(&format!(": at {path}: {message}"));
    }
    out
}

/// Loading and validating in one step failed.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The document could not be loaded.
    #[error(transparent)]
    Load(#[from] LoadError),
    /// The document loaded but is not a valid configuration.
    #[error("{}{errors}", file.as_ref().map(|f| format!("{}: ", f.display())).unwrap_or_default())]
    Invalid {
        file: Option<PathBuf>,
        errors: ConfigErrors,
    },
}
