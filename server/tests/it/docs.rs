//! The docs are a promise. The operator CLI table (`docs/cli.md`), the admin
//! API routes (`docs/api.md`) and the configuration table
//! (`docs/configuration.md`) are checked against the binary and the OpenAPI
//! document, both ways. Every module path, file path, relative link and anchor
//! that README.md and `docs/*.md` give exists; the README stays short; and no
//! code comment cites a document outside the repository.

use std::{
    collections::{BTreeMap, BTreeSet},
    path::{Path, PathBuf},
    process::Command,
};

use crate::support::BIN;

/// The README's length at most: a front door, the rest is in `docs/`.
const README_MAX_LINES: usize = 200;

/// Paths the docs name that a run creates (the Playwright screenshots).
const GENERATED: &[&str] = &["end2end/screenshots/"];

/// The workspace's crates, as module paths start (`domain::…`).
const CRATES: &[&str] = &["domain", "server", "app", "views", "migrations", "loadgen", "frontend"];

/// Top-level directories whose files the docs name as `dir/…`.
const TOP_DIRS: &[&str] = &[
    "domain/",
    "server/",
    "app/",
    "views/",
    "migrations/",
    "loadgen/",
    "frontend/",
    "bench/",
    "deploy/",
    "scripts/",
    "docs/",
    "end2end/",
    "style/",
    ".ci/",
];

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn read(rel: &str) -> String {
    std::fs::read_to_string(root().join(rel)).unwrap_or_else(|e| panic!("{rel}: {e}"))
}

/// README.md and every `docs/*.md`: (path from the repository root, text).
fn documents() -> Vec<(String, String)> {
    let mut names: Vec<String> = std::fs::read_dir(root().join("docs"))
        .expect("docs/")
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|n| n.ends_with(".md"))
        .map(|n| format!("docs/{n}"))
        .collect();
    names.sort();
    names.insert(0, "README.md".to_owned());
    names.into_iter().map(|n| (n.clone(), read(&n))).collect()
}

/// The text outside fenced code blocks, split into paragraphs (inline code
/// never crosses a blank line).
fn paragraphs(text: &str) -> Vec<String> {
    let mut out = vec![String::new()];
    let mut fenced = false;
    for line in text.lines() {
        if line.starts_with("```") {
            fenced = !fenced;
            out.push(String::new());
        } else if line.trim().is_empty() {
            out.push(String::new());
        } else if !fenced && let Some(last) = out.last_mut() {
            last.push_str(line);
            last.push('\n');
        }
    }
    out.retain(|p| !p.is_empty());
    out
}

/// A paragraph's inline code spans, and its text with them taken out.
fn split_code(paragraph: &str) -> (Vec<&str>, String) {
    let (mut code, mut prose) = (Vec::new(), String::new());
    for (i, part) in paragraph.split('`').enumerate() {
        if i % 2 == 1 {
            code.push(part);
        } else {
            prose.push_str(part);
        }
    }
    (code, prose)
}

/// GitHub's anchor for a heading: lower case, punctuation but `-` and `_`
/// dropped, spaces to `-`.
fn slug(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c),
            _ => None,
        })
        .collect()
}

/// Every anchor a markdown file's headings make (a repeated one gets `-1`, `-2`…).
fn anchors(text: &str) -> BTreeSet<String> {
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    let mut out = BTreeSet::new();
    let mut fenced = false;
    for line in text.lines() {
        if line.starts_with("```") {
            fenced = !fenced;
            continue;
        }
        let hashes = line.chars().take_while(|c| *c == '#').count();
        if fenced || !(1..=6).contains(&hashes) || !line[hashes..].starts_with(' ') {
            continue;
        }
        let base = slug(&line[hashes + 1..]);
        let n = seen.entry(base.clone()).or_insert(0);
        out.insert(if *n == 0 { base } else { format!("{base}-{n}") });
        *n += 1;
    }
    out
}

/// The targets of `[text](target)` links in some prose.
fn link_targets(prose: &str) -> Vec<&str> {
    prose
        .match_indices("](")
        .filter_map(|(at, _)| {
            let rest = &prose[at + 2..];
            let end = rest.find([')', ' ', '\n'])?;
            rest[end..].starts_with(')').then_some(&rest[..end])
        })
        .collect()
}

/// Resolves a relative link (or anchor) from the markdown file `from`; `Err`
/// says what is missing.
fn check_link(from: &str, target: &str) -> Result<(), String> {
    if target.contains("://") || target.starts_with("mailto:") {
        return Ok(());
    }
    let (path, anchor) = target.split_once('#').unwrap_or((target, ""));
    let file =
        if path.is_empty() { root().join(from) } else { root().join(from).parent().expect("a directory").join(path) };
    if !file.exists() {
        return Err(format!("{from}: the link {target} names a file that does not exist"));
    }
    if anchor.is_empty() || file.extension().is_none_or(|e| e != "md") {
        return Ok(());
    }
    let text = std::fs::read_to_string(&file).map_err(|e| format!("{from}: {target}: {e}"))?;
    if anchors(&text).contains(anchor) {
        Ok(())
    } else {
        Err(format!("{from}: the link {target} names an anchor its file does not have"))
    }
}

/// The identifiers of a Rust source, in order.
fn words(text: &str) -> Vec<&str> {
    text.split(|c: char| !(c.is_alphanumeric() || c == '_')).filter(|w| !w.is_empty()).collect()
}

/// Whether a Rust file declares `name` (fn, struct, enum, const, static, mod,
/// trait, type, union, macro) or re-exports it with `pub use`.
fn declares(file: &Path, name: &str) -> bool {
    const KINDS: &[&str] = &["fn", "struct", "enum", "const", "static", "mod", "trait", "type", "union", "macro_rules"];
    let Ok(text) = std::fs::read_to_string(file) else { return false };
    let ws = words(&text);
    if ws.windows(2).any(|w| KINDS.contains(&w[0]) && w[1] == name) {
        return true;
    }
    text.match_indices("pub use ").any(|(at, _)| text[at..].split(';').next().is_some_and(|u| words(u).contains(&name)))
}

/// Resolves `crate::a::b`: each segment a module file (`a.rs`, `a/mod.rs`) or
/// directory, or an item declared in the module reached so far, after which
/// the remaining segments (`Enum::Variant`, `Type::method`) must appear in
/// that module's file.
fn resolves(path: &str) -> bool {
    let mut segments = path.split("::");
    let Some(krate) = segments.next() else { return false };
    let mut dir = root().join(krate).join("src");
    let mut file = Some(if dir.join("lib.rs").exists() { dir.join("lib.rs") } else { dir.join("main.rs") });
    let segments: Vec<&str> = segments.collect();
    for (i, segment) in segments.iter().enumerate() {
        if dir.join(format!("{segment}.rs")).is_file() {
            file = Some(dir.join(format!("{segment}.rs")));
        } else if dir.join(segment).join("mod.rs").is_file() {
            file = Some(dir.join(segment).join("mod.rs"));
        } else if dir.join(segment).is_dir() {
            file = None;
        } else {
            let Some(file) = file.filter(|f| declares(f, segment)) else { return false };
            let text = std::fs::read_to_string(&file).unwrap_or_default();
            let ws = words(&text);
            return segments[i + 1..].iter().all(|rest| ws.contains(rest));
        }
        dir = dir.join(segment);
    }
    true
}

/// The module path a code span starts with (`domain::receiver::gates::receive`
/// of `domain::receiver::gates::receive(…)`), if it names one of ours.
fn module_path(span: &str) -> Option<&str> {
    let end = span.find(|c: char| !(c.is_alphanumeric() || c == '_' || c == ':')).unwrap_or(span.len());
    let path = span[..end].trim_end_matches(':');
    let (krate, rest) = path.split_once("::")?;
    (CRATES.contains(&krate) && !rest.is_empty()).then_some(path)
}

/// The file path a code span names (`server/src/otel`, `domain/src/x.rs`),
/// without an anchor or trailing punctuation; none for a pattern or a command.
fn file_path(span: &str) -> Option<&str> {
    if !TOP_DIRS.iter().any(|d| span.starts_with(d)) || span.contains(|c: char| c.is_whitespace() || "*{…<".contains(c))
    {
        return None;
    }
    Some(span.split('#').next().unwrap_or(span).trim_end_matches(['.', ',', ':', ';']))
}

fn help(args: &[&str]) -> String {
    let out = Command::new(BIN).args(args).arg("--help").output().expect("signet --help");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The subcommands a `--help` lists (without `help` itself).
fn subcommands(text: &str) -> Vec<String> {
    let Some(start) = text.find("Commands:\n") else { return Vec::new() };
    text[start + 10..]
        .lines()
        .take_while(|l| l.starts_with("  "))
        .filter_map(|l| l.split_whitespace().next())
        .filter(|c| *c != "help")
        .map(str::to_owned)
        .collect()
}

/// Every command path of the binary: `tenant create`, `kek retire`, …
fn command_paths() -> Vec<String> {
    let mut out = Vec::new();
    for top in subcommands(&help(&[])) {
        let subs = subcommands(&help(&[&top]));
        if subs.is_empty() {
            out.push(top);
        } else {
            out.extend(subs.into_iter().map(|s| format!("{top} {s}")));
        }
    }
    out
}

#[test]
fn every_cli_command_is_in_docs_cli_and_every_one_it_names_exists() {
    let text = read("docs/cli.md");
    let block = &text[text.find("```").expect("docs/cli.md has a code block")..];
    let paths = command_paths();
    assert!(paths.len() > 30, "{paths:?}");
    let missing: Vec<&String> = paths.iter().filter(|p| !block.contains(p.as_str())).collect();
    assert!(missing.is_empty(), "commands the CLI block of docs/cli.md does not name: {missing:?}");
    // The reverse: each `signet <word> [<word>]` the block shows is a command.
    let known: BTreeSet<String> =
        paths.iter().flat_map(|p| [p.clone(), p.split(' ').next().unwrap_or_default().to_owned()]).collect();
    for line in block.lines().filter_map(|l| l.trim_start().strip_prefix("signet ")) {
        let words: Vec<&str> = line
            .split_whitespace()
            .take_while(|w| w.chars().all(|c| c.is_ascii_lowercase() || c == '-'))
            .take(2)
            .collect();
        if words.is_empty() {
            continue; // `signet [serve]`
        }
        let two = words.join(" ");
        assert!(
            known.contains(&two) || known.contains(words[0]),
            "docs/cli.md names `signet {two}`, which the binary does not have"
        );
    }
}

/// `/api/v1/tenants/{tenant}/…` with every `{…}` as `{}` and no query.
fn normalized(path: &str) -> String {
    let path = path.split('?').next().unwrap_or_default().trim_end_matches(['.', ',', ')', ':', '`']);
    let mut out = String::new();
    let mut in_param = false;
    for c in path.chars() {
        match c {
            '{' => {
                in_param = true;
                out.push_str("{}");
            }
            '}' => in_param = false,
            _ if !in_param => out.push(c),
            _ => {}
        }
    }
    out
}

#[tokio::test]
async fn every_api_route_is_in_docs_api_and_every_one_it_names_exists() {
    let i = crate::support::Install::new(crate::support::Engine::Sqlite).expect("sqlite");
    let s = i.serve();
    let doc: serde_json::Value = reqwest::get(s.url("/api/v1/openapi.json")).await.unwrap().json().await.unwrap();
    let routes: BTreeSet<String> = doc["paths"].as_object().unwrap().keys().map(|p| normalized(p)).collect();
    let api = read("docs/api.md");
    let named: BTreeSet<String> = api
        .split(|c: char| c.is_whitespace() || c == '`' || c == '(' || c == '"')
        .filter(|w| w.starts_with("/api/v1/"))
        .map(normalized)
        .collect();
    let missing: Vec<&String> =
        routes.iter().filter(|r| !named.contains(*r) && r.as_str() != "/api/v1/openapi.json").collect();
    assert!(missing.is_empty(), "routes docs/api.md does not name: {missing:?}");
    // Names like `…/bulk-releases[/{id}]` stand for two routes.
    let expanded: BTreeSet<String> = named
        .iter()
        .flat_map(|n| match n.split_once('[') {
            Some((base, opt)) => vec![base.to_owned(), format!("{base}{}", opt.trim_end_matches(']'))],
            None => vec![n.clone()],
        })
        .collect();
    let invented: Vec<&String> = expanded
        .iter()
        .filter(|n| !routes.contains(*n) && !n.ends_with('/') && n.as_str() != "/api/v1/openapi.json")
        .collect();
    assert!(invented.is_empty(), "docs/api.md names routes the API does not have: {invented:?}");
}

#[test]
fn every_setting_is_in_docs_configuration_and_back() {
    let mut vars: BTreeMap<String, ()> = BTreeMap::new();
    for args in [&["serve"][..], &[]] {
        for part in help(args).split("[env: ").skip(1) {
            vars.insert(part.split('=').next().unwrap_or_default().to_owned(), ());
        }
    }
    let config = read("docs/configuration.md");
    let missing: Vec<&String> = vars
        .keys()
        .filter(|v| {
            !config.contains(v.as_str())
                && !config.contains(&format!("{}_*", v.rsplit_once('_').map_or("", |(a, _)| a)))
        })
        .collect();
    assert!(missing.is_empty(), "settings docs/configuration.md does not name: {missing:?}");
    // The reverse, for the table itself (the prose around it also names the
    // test suites' own variables).
    let table: String = config.lines().filter(|l| l.starts_with('|')).collect::<Vec<_>>().join("\n");
    for word in table
        .split(|c: char| !(c.is_ascii_uppercase() || c == '_'))
        .filter(|w| w.starts_with("SIGNET_") && !w.ends_with('_'))
    {
        assert!(
            vars.contains_key(word) || word == "SIGNET_MASTER_KEY" || word == "SIGNET_LOG",
            "docs/configuration.md names {word}, which no command reads"
        );
    }
}

#[test]
fn every_module_and_file_the_docs_name_exists() {
    let mut wrong = Vec::new();
    let mut checked = 0;
    for (name, text) in documents() {
        for paragraph in paragraphs(&text) {
            for span in split_code(&paragraph).0 {
                if let Some(path) = module_path(span) {
                    checked += 1;
                    if !resolves(path) {
                        wrong.push(format!("{name}: `{span}` names no module or item"));
                    }
                } else if let Some(path) = file_path(span) {
                    checked += 1;
                    if !root().join(path).exists() && !GENERATED.contains(&path) {
                        wrong.push(format!("{name}: `{span}` names no file"));
                    }
                }
            }
        }
    }
    assert!(checked > 100, "only {checked} names found: is the parser broken?");
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

#[test]
fn every_link_and_anchor_in_the_docs_resolves() {
    let mut wrong = Vec::new();
    let mut checked = 0;
    for (name, text) in documents() {
        for paragraph in paragraphs(&text) {
            for target in link_targets(&split_code(&paragraph).1) {
                checked += 1;
                if let Err(e) = check_link(&name, target) {
                    wrong.push(e);
                }
            }
        }
    }
    assert!(checked > 50, "only {checked} links found: is the parser broken?");
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

#[test]
fn the_readme_is_short() {
    let lines = read("README.md").lines().count();
    assert!(lines <= README_MAX_LINES, "README.md has {lines} lines; at most {README_MAX_LINES}: move detail to docs/");
}

/// Every `.rs` file of the workspace, from the repository root.
fn rust_files() -> Vec<PathBuf> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        let Ok(entries) = std::fs::read_dir(dir) else { return };
        for entry in entries.flatten() {
            let path = entry.path();
            let name = entry.file_name();
            if path.is_dir() && name != "target" && name != "node_modules" {
                walk(&path, out);
            } else if path.extension().is_some_and(|e| e == "rs") {
                out.push(path);
            }
        }
    }
    let mut out = Vec::new();
    for krate in CRATES {
        walk(&root().join(krate), &mut out);
    }
    out
}

/// The `docs/….md[#anchor]` references in some text; `Err` for each that
/// does not resolve.
fn doc_references(text: &str) -> Vec<Result<(), String>> {
    text.match_indices("docs/")
        .filter_map(|(at, _)| {
            let tail = &text[at..];
            let end = tail.find(|c: char| !(c.is_alphanumeric() || "/._-#".contains(c))).unwrap_or(tail.len());
            let target = tail[..end].trim_end_matches('.');
            // Relative to the repository root, where README.md is.
            target
                .contains(".md")
                .then(|| check_link("README.md", target).map_err(|e| e.trim_start_matches("README.md: ").to_owned()))
        })
        .collect()
}

#[test]
fn code_comments_cite_only_documents_in_the_repository() {
    // The contract is docs/contract.md and the design articles are summarized
    // in docs/architecture.md; a comment cites those, by path.
    let outside = ["contract §", "seed 00"];
    let mut wrong = Vec::new();
    let files = rust_files();
    assert!(files.len() > 100, "{} Rust files", files.len());
    for file in &files {
        let text = std::fs::read_to_string(file).expect("a Rust source");
        let rel = file.strip_prefix(root()).unwrap_or(file).display().to_string();
        for (n, line) in text.lines().enumerate() {
            let comment = line.find("//").map(|at| line[at..].to_lowercase()).unwrap_or_default();
            if outside.iter().any(|o| comment.contains(o)) {
                wrong.push(format!("{rel}:{}: {}", n + 1, line.trim()));
            }
            wrong.extend(
                doc_references(&comment).into_iter().filter_map(Result::err).map(|e| format!("{rel}:{}: {e}", n + 1)),
            );
        }
    }
    assert!(wrong.is_empty(), "comments citing what the repository does not hold:\n{}", wrong.join("\n"));
}

#[test]
fn every_docs_reference_in_the_build_and_deploy_files_resolves() {
    let mut files: Vec<PathBuf> = ["Makefile", "Cargo.toml"].iter().map(|f| root().join(f)).collect();
    for dir in ["scripts", "bench", "deploy", ".ci"] {
        let mut stack = vec![root().join(dir)];
        while let Some(dir) = stack.pop() {
            for entry in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
                if entry.path().is_dir() {
                    stack.push(entry.path());
                } else {
                    files.push(entry.path());
                }
            }
        }
    }
    let mut wrong = Vec::new();
    for file in &files {
        let Ok(text) = std::fs::read_to_string(file) else { continue };
        let rel = file.strip_prefix(root()).unwrap_or(file).display().to_string();
        wrong.extend(doc_references(&text).into_iter().filter_map(Result::err).map(|e| format!("{rel}: {e}")));
    }
    assert!(files.len() > 10, "{} files", files.len());
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}
