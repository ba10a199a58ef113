//! The crates' modules form layers: no module imports one that (directly or through others)
//! imports it, and in the core no file's `Scheduler` methods call methods of a file that calls
//! back into it. A module and its own submodules count as one place (a parent may use its
//! children and they may use it); everything else is checked file by file.
//!
//! The check reads the sources: `crate::a::b` paths (including `use crate::{a, b::c}` groups),
//! `super::x` paths and a parent's `child::x` paths, outside comments and `mod tests`.

use regex::Regex;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

type Graph = BTreeMap<String, BTreeSet<String>>;

/// Every `.rs` file under `src`, by module path (`heartbeat::walk`; the crate root is "").
fn modules(src: &Path) -> BTreeMap<String, PathBuf> {
    fn walk(dir: &Path, src: &Path, out: &mut BTreeMap<String, PathBuf>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                walk(&path, src, out);
            } else if path.extension().is_some_and(|e| e == "rs") {
                let rel = path.strip_prefix(src).unwrap().with_extension("");
                let mut parts: Vec<String> = rel
                    .components()
                    .map(|c| c.as_os_str().to_string_lossy().into_owned())
                    .collect();
                if matches!(
                    parts.last().map(String::as_str),
                    Some("mod" | "lib" | "main")
                ) {
                    parts.pop();
                }
                out.insert(parts.join("::"), path);
            }
        }
    }
    let mut out = BTreeMap::new();
    walk(src, src, &mut out);
    out
}

/// The text the check reads: no comments, no `#[cfg(test)] mod tests`.
fn code(text: &str) -> String {
    let text = match text.find("#[cfg(test)]\nmod tests") {
        Some(i) => &text[..i],
        None => text,
    };
    text.lines()
        .filter(|l| !l.trim_start().starts_with("//"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// Whether one module is the other or contains it.
fn related(a: &str, b: &str) -> bool {
    a.is_empty()
        || b.is_empty()
        || a == b
        || a.starts_with(&format!("{b}::"))
        || b.starts_with(&format!("{a}::"))
}

/// The longest module path that `path` starts with.
fn resolve<'a>(mods: &'a BTreeMap<String, PathBuf>, path: &[&str]) -> Option<&'a String> {
    (1..=path.len())
        .rev()
        .find_map(|k| mods.get_key_value(&path[..k].join("::")).map(|(k, _)| k))
}

/// Which modules each module imports (sources given as module path -> code).
fn import_graph(sources: &BTreeMap<String, String>) -> Graph {
    let mods: BTreeMap<String, PathBuf> = sources
        .keys()
        .map(|k| (k.clone(), PathBuf::new()))
        .collect();
    let group = Regex::new(r"crate::((?:[a-z_][a-z0-9_]*::)*)\{([^}]*)\}").unwrap();
    let item = Regex::new(r"(?:^|,)\s*([a-z_][a-z0-9_:]*)").unwrap();
    let path = Regex::new(r"crate::([a-z_][a-z0-9_]*(?:::[a-z_][a-z0-9_]*)*)").unwrap();
    let sup = Regex::new(r"\bsuper::([a-z_][a-z0-9_]*(?:::[a-z_][a-z0-9_]*)*)").unwrap();
    let child = Regex::new(r"(?:^|[^:\w])([a-z_][a-z0-9_]*)::").unwrap();
    let mut graph = Graph::new();
    for (m, text) in sources {
        let own: Vec<&str> = m.split("::").filter(|s| !s.is_empty()).collect();
        let mut refs: Vec<Vec<String>> = Vec::new();
        for c in group.captures_iter(text) {
            for i in item.captures_iter(&c[2]) {
                refs.push(
                    format!("{}{}", &c[1], &i[1])
                        .split("::")
                        .map(String::from)
                        .collect(),
                );
            }
        }
        for c in path.captures_iter(text) {
            refs.push(c[1].split("::").map(String::from).collect());
        }
        for c in sup.captures_iter(text) {
            let parent = own.split_last().map_or(&[][..], |(_, p)| p);
            refs.push(
                parent
                    .iter()
                    .map(|s| s.to_string())
                    .chain(c[1].split("::").map(String::from))
                    .collect(),
            );
        }
        for c in child.captures_iter(text) {
            refs.push(
                own.iter()
                    .map(|s| s.to_string())
                    .chain([c[1].to_string()])
                    .collect(),
            );
        }
        let deps = graph.entry(m.clone()).or_default();
        for r in refs {
            let r: Vec<&str> = r
                .iter()
                .map(String::as_str)
                .filter(|s| !s.is_empty())
                .collect();
            if let Some(d) = resolve(&mods, &r)
                && !related(m, d)
            {
                deps.insert(d.clone());
            }
        }
    }
    graph
}

/// Which files each file's `impl Scheduler` and `impl Parts` methods (the core's stages over
/// all its parts) call, as `self.f(`, `s.f(` or `self.parts().f(` (by method name: each name
/// is defined once).
fn call_graph(sources: &BTreeMap<String, String>) -> Graph {
    let def = Regex::new(r"\n    (?:pub(?:\(crate\))? )?fn ([a-z_0-9]+)").unwrap();
    let call = Regex::new(r"\b(?:self|s)\s*\.\s*(?:parts\(\)\s*\.\s*)?([a-z_0-9]+)\s*\(").unwrap();
    let mut defined: BTreeMap<String, String> = BTreeMap::new();
    for (m, text) in sources {
        for head in ["impl Scheduler {", "impl Parts<'_> {"] {
            for block in impl_blocks(text, head) {
                for c in def.captures_iter(block) {
                    if let Some(p) = defined.insert(c[1].to_string(), m.clone()) {
                        assert_eq!(p, *m, "method {} is defined in two files", &c[1]);
                    }
                }
            }
        }
    }
    let mut graph = Graph::new();
    for (m, text) in sources {
        let deps = graph.entry(m.clone()).or_default();
        for c in call.captures_iter(text) {
            if let Some(d) = defined.get(&c[1])
                && d != m
            {
                deps.insert(d.clone());
            }
        }
    }
    graph
}

/// The bodies of the blocks opened by `head` (brace-matched).
fn impl_blocks<'a>(text: &'a str, head: &str) -> Vec<&'a str> {
    let mut out = Vec::new();
    for (start, _) in text.match_indices(head) {
        let mut depth = 0;
        for (i, ch) in text[start..].char_indices() {
            match ch {
                '{' => depth += 1,
                '}' => {
                    depth -= 1;
                    if depth == 0 {
                        out.push(&text[start..start + i]);
                        break;
                    }
                }
                _ => {}
            }
        }
    }
    out
}

/// A cycle of the graph, if it has one (as a path that returns to its start).
fn cycle(graph: &Graph) -> Option<Vec<String>> {
    fn visit(
        v: &str,
        graph: &Graph,
        state: &mut BTreeMap<String, u8>,
        stack: &mut Vec<String>,
    ) -> Option<Vec<String>> {
        state.insert(v.to_string(), 1);
        stack.push(v.to_string());
        for w in graph.get(v).into_iter().flatten() {
            match state.get(w).copied().unwrap_or(0) {
                0 => {
                    if let Some(c) = visit(w, graph, state, stack) {
                        return Some(c);
                    }
                }
                1 => {
                    let from = stack.iter().position(|s| s == w).unwrap();
                    let mut c = stack[from..].to_vec();
                    c.push(w.clone());
                    return Some(c);
                }
                _ => {}
            }
        }
        stack.pop();
        state.insert(v.to_string(), 2);
        None
    }
    let mut state = BTreeMap::new();
    for v in graph.keys() {
        if state.get(v).copied().unwrap_or(0) == 0
            && let Some(c) = visit(v, graph, &mut state, &mut Vec::new())
        {
            return Some(c);
        }
    }
    None
}

fn crate_sources(name: &str) -> BTreeMap<String, String> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .join(name)
        .join("src");
    modules(&src)
        .into_iter()
        .map(|(m, p)| (m, code(&std::fs::read_to_string(p).unwrap())))
        .collect()
}

#[test]
fn no_crate_has_an_import_loop() {
    let crates = [
        "agent",
        "api",
        "config",
        "core",
        "fairsched",
        "hdrf",
        "hdrf-testkit",
        "resources",
        "server",
        "sim",
        "store",
    ];
    for name in crates {
        let graph = import_graph(&crate_sources(name));
        assert!(!graph.is_empty(), "no sources found for crate {name}");
        if let Some(c) = cycle(&graph) {
            panic!(
                "crate {name}: modules import each other in a loop: {}",
                c.join(" -> ")
            );
        }
    }
}

#[test]
fn core_stages_call_each_other_in_layers() {
    let graph = call_graph(&crate_sources("core"));
    // The stages that must sit above the state (a sanity check that the parse sees them).
    for m in ["heartbeat", "lifecycle", "preemption", "update"] {
        assert!(!graph[m].is_empty(), "no calls seen from {m}");
    }
    if let Some(c) = cycle(&graph) {
        panic!(
            "the core's Scheduler methods call across files in a loop: {}",
            c.join(" -> ")
        );
    }
}

/// The call check finds methods of one file calling back into another.
#[test]
fn the_call_check_finds_loops() {
    let a = "impl Scheduler {\n    fn f(&self) { self.g() }\n}";
    let b = "impl Scheduler {\n    pub(crate) fn g(&self) { self.h() }\n}";
    let c_loop = "impl Scheduler {\n    fn h(&self) { self.f() }\n}";
    let c_leaf = "impl Scheduler {\n    fn h(&self) {}\n}";
    for (c, want) in [(c_loop, true), (c_leaf, false)] {
        let sources: BTreeMap<String, String> = [("a", a), ("b", b), ("c", c)]
            .iter()
            .map(|(m, t)| (m.to_string(), code(t)))
            .collect();
        assert_eq!(cycle(&call_graph(&sources)).is_some(), want, "c = {c:?}");
    }
}

/// The check itself finds loops, and only loops.
#[test]
fn the_check_finds_loops() {
    /// Files (module path, code) and the loop expected.
    type Case = (
        &'static [(&'static str, &'static str)],
        Option<&'static str>,
    );
    let cases: &[Case] = &[
        // Two siblings importing each other.
        (
            &[("a", "use crate::b::X;"), ("b", "use crate::a::Y;")],
            Some("a -> b -> a"),
        ),
        // Through a `use crate::{..}` group and a third module.
        (
            &[
                ("a", "use crate::{b::X, model};"),
                ("b", "fn f() { crate::c::g() }"),
                ("c", "use crate::a;"),
                ("model", ""),
            ],
            Some("a -> b -> c -> a"),
        ),
        // A parent and its child may use each other.
        (
            &[
                ("a", "mod walk; use walk::W;"),
                ("a::walk", "use super::X;"),
            ],
            None,
        ),
        // A child's type used by a sibling of its parent, which the parent uses: no loop.
        (
            &[
                ("s", "use crate::a::walk::W;"),
                ("a", "use crate::s::S;"),
                ("a::walk", ""),
            ],
            None,
        ),
        // ... but through the parent's re-export it is one.
        (
            &[
                ("s", "use crate::a::W;"),
                ("a", "use crate::s::S;"),
                ("a::walk", ""),
            ],
            Some("a -> s -> a"),
        ),
        // Comments do not count.
        (
            &[
                ("a", "// crate::b::X\nuse crate::model::M;"),
                ("b", "use crate::a::Y;"),
                ("model", ""),
            ],
            None,
        ),
    ];
    for (files, want) in cases {
        let sources: BTreeMap<String, String> = files
            .iter()
            .map(|(m, t)| (m.to_string(), code(t)))
            .collect();
        let got = cycle(&import_graph(&sources)).map(|c| c.join(" -> "));
        assert_eq!(got.as_deref(), *want, "files {files:?}");
    }
}
