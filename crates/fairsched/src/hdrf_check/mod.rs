//! `fairsched hdrf check`: runs vector-HDRF conformance files.
//!
//! The file format is the one of `shared/conformance/vector_hdrf_cases.json`; its `conventions`
//! block defines it. Modules:
//! * [`format`]: serde types of the file;
//! * [`build`]: checks a parsed file (JSON paths in errors) and builds `fairsched_hdrf` trees;
//! * [`attribute`]: attribute names -> `ElementAttributes` fields;
//! * [`compare`]: the comparisons;
//! * [`run`]: steps, variants, panics and timing;
//! * [`report`]: plain and JSON output.
//!
//! Exit status: 0 when every case passes, 1 when one fails, 2 when a file cannot be read or is
//! malformed (the well-formed files given with it are still run and reported).

pub mod attribute;
pub mod build;
pub mod compare;
pub mod format;
pub mod report;
pub mod run;

use std::path::{Path, PathBuf};
use std::process::ExitCode;

pub use run::Flags;

/// Why a file could not be used.
#[derive(Debug)]
pub struct FileError {
    pub file: PathBuf,
    pub message: String,
}

impl std::fmt::Display for FileError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.file.display(), self.message)
    }
}

/// Reads, parses and checks one file.
pub fn load(file: &Path) -> Result<build::Plan, FileError> {
    let error = |message: String| FileError {
        file: file.to_path_buf(),
        message,
    };
    let text =
        std::fs::read_to_string(file).map_err(|e| error(format!("cannot read the file: {e}")))?;
    // Serde would also accept a struct written as an array; the format is an object.
    if !text.trim_start().starts_with('{') {
        return Err(error(
            "invalid JSON: expected an object with `cases` at the top level".to_string(),
        ));
    }
    let mut de = serde_json::Deserializer::from_str(&text);
    let parsed: format::File = serde_path_to_error::deserialize(&mut de).map_err(|e| {
        let path = build::dotted(e.path());
        let inner = e.into_inner();
        if inner.is_syntax() || inner.is_eof() {
            error(format!("invalid JSON (near `{path}`): {inner}"))
        } else {
            let path = if path.is_empty() { "." } else { &path };
            error(format!("{path}: {inner}"))
        }
    })?;
    de.end().map_err(|e| error(format!("invalid JSON: {e}")))?;
    build::plan_file(&parsed).map_err(|e| error(format!("{}: {}", e.path, e.message)))
}

/// Runs the command; prints the report on stdout and problems on stderr.
pub fn check(files: &[PathBuf], json: bool, flags: Flags) -> ExitCode {
    run::install_panic_hook();
    let mut malformed = false;
    let mut report = report::Report::default();
    for file in files {
        match load(file) {
            Ok(plan) => {
                for w in &plan.warnings {
                    eprintln!("warning: {}: {w}", file.display());
                }
                for case in &plan.cases {
                    report.cases.push(run::run_case(case, flags));
                }
            }
            Err(e) => {
                eprintln!("error: {e}");
                malformed = true;
            }
        }
    }
    if json {
        print!("{}", report::render_json(&report));
    } else {
        print!(
            "{}",
            report::render_plain(&report, flags.time, flags.derived)
        );
    }
    if malformed {
        ExitCode::from(2)
    } else if report.cases.iter().any(|c| !c.passed) {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    }
}
