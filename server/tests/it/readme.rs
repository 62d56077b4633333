//! The README is a promise: its operator CLI block, its admin API text and
//! its configuration table are checked against the binary and the OpenAPI
//! document, both ways, so a command, route or setting the README names
//! exists, and one the code has is in the README.

use std::{
    collections::{BTreeMap, BTreeSet},
    process::Command,
};

use crate::support::BIN;

fn readme() -> String {
    std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../README.md")).expect("README.md")
}

/// The text between a `## heading` and the next `## `.
fn section<'a>(text: &'a str, heading: &str) -> &'a str {
    let start = text.find(&format!("\n## {heading}\n")).unwrap_or_else(|| panic!("README has no ## {heading}"));
    let rest = &text[start + heading.len() + 4..];
    &rest[..rest.find("\n## ").unwrap_or(rest.len())]
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
fn every_cli_command_is_in_the_readme_and_every_one_it_names_exists() {
    let text = readme();
    let cli = section(&text, "Operator CLI");
    let block = &cli[cli.find("```").expect("a code block")..];
    let paths = command_paths();
    assert!(paths.len() > 30, "{paths:?}");
    let missing: Vec<&String> = paths.iter().filter(|p| !block.contains(p.as_str())).collect();
    assert!(missing.is_empty(), "commands the README's CLI block does not name: {missing:?}");
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
            "the README names `signet {two}`, which the binary does not have"
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
async fn every_api_route_is_in_the_readme_and_every_one_it_names_exists() {
    let i = crate::support::Install::new(crate::support::Engine::Sqlite).expect("sqlite");
    let s = i.serve();
    let doc: serde_json::Value = reqwest::get(s.url("/api/v1/openapi.json")).await.unwrap().json().await.unwrap();
    let routes: BTreeSet<String> = doc["paths"].as_object().unwrap().keys().map(|p| normalized(p)).collect();
    let text = readme();
    let api = section(&text, "Admin API");
    let named: BTreeSet<String> = api
        .split(|c: char| c.is_whitespace() || c == '`' || c == '(' || c == '"')
        .filter(|w| w.starts_with("/api/v1/"))
        .map(normalized)
        .collect();
    let missing: Vec<&String> =
        routes.iter().filter(|r| !named.contains(*r) && r.as_str() != "/api/v1/openapi.json").collect();
    assert!(missing.is_empty(), "routes the README's Admin API section does not name: {missing:?}");
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
    assert!(invented.is_empty(), "the README names routes the API does not have: {invented:?}");
}

#[test]
fn every_setting_is_in_the_readme_configuration_table_and_back() {
    let mut vars: BTreeMap<String, ()> = BTreeMap::new();
    for args in [&["serve"][..], &[]] {
        for part in help(args).split("[env: ").skip(1) {
            vars.insert(part.split('=').next().unwrap_or_default().to_owned(), ());
        }
    }
    let text = readme();
    let config = section(&text, "Configuration");
    let missing: Vec<&String> = vars
        .keys()
        .filter(|v| {
            !config.contains(v.as_str())
                && !config.contains(&format!("{}_*", v.rsplit_once('_').map_or("", |(a, _)| a)))
        })
        .collect();
    assert!(missing.is_empty(), "settings the README's configuration section does not name: {missing:?}");
    // The reverse, for the table itself (the prose around it also names the
    // test suites' own variables).
    let table: String = config.lines().filter(|l| l.starts_with('|')).collect::<Vec<_>>().join("\n");
    for word in table
        .split(|c: char| !(c.is_ascii_uppercase() || c == '_'))
        .filter(|w| w.starts_with("SIGNET_") && !w.ends_with('_'))
    {
        assert!(
            vars.contains_key(word) || word == "SIGNET_MASTER_KEY" || word == "SIGNET_LOG",
            "the README names {word}, which no command reads"
        );
    }
}
