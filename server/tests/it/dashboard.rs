//! `deploy/grafana/signet.json`: provisionable as a file, with the panels an
//! on-call engineer opens first; every query runs in the live Prometheus of
//! `alerts.rs` and names only metrics Signet exports.

use std::collections::BTreeSet;

use serde_json::Value;

use crate::{alerts::Prometheus, support::Server};

fn dashboard() -> Value {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../deploy/grafana/signet.json");
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).expect("the dashboard is JSON")
}

/// Every panel, rows' nested panels included.
fn panels(d: &Value) -> Vec<&Value> {
    fn walk<'a>(list: &'a Value, out: &mut Vec<&'a Value>) {
        for p in list.as_array().into_iter().flatten() {
            out.push(p);
            walk(&p["panels"], out);
        }
    }
    let mut out = Vec::new();
    walk(&d["panels"], &mut out);
    out
}

/// Every PromQL query in the dashboard: each panel target's `expr`, and the
/// template variables' queries. Grafana's variables are replaced by what
/// Grafana would send (`$__rate_interval` by a duration, `$tenant` by its
/// "All" value).
fn queries(d: &Value) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for p in panels(d) {
        for t in p["targets"].as_array().into_iter().flatten() {
            let expr = t["expr"].as_str().unwrap_or_else(|| panic!("a target of {} has no expr", p["title"]));
            out.push((p["title"].as_str().unwrap_or_default().to_owned(), expr.to_owned()));
        }
    }
    for v in d["templating"]["list"].as_array().into_iter().flatten() {
        // Grafana's `label_values(metric, label)`: its metric.
        if let Some(q) = v["query"]["query"].as_str() {
            let metric = q.strip_prefix("label_values(").and_then(|m| m.split([',', ')']).next());
            out.push((format!("variable {}", v["name"]), metric.unwrap_or(q).trim().to_owned()));
        }
    }
    out.into_iter()
        .map(|(title, q)| {
            (title, q.replace("$__rate_interval", "1m").replace("${tenant}", ".*").replace("$tenant", ".*"))
        })
        .collect()
}

/// The metric names a PromQL expression selects: identifiers outside label
/// matchers, strings, ranges and grouping clauses that are neither a
/// function's name nor a keyword.
fn metric_names(expr: &str) -> BTreeSet<String> {
    // Keywords, and the aggregation operators (which `by` may follow).
    const KEYWORDS: [&str; 17] = [
        "and",
        "or",
        "unless",
        "offset",
        "bool",
        "sum",
        "min",
        "max",
        "avg",
        "count",
        "stddev",
        "stdvar",
        "topk",
        "bottomk",
        "quantile",
        "count_values",
        "group",
    ];
    const GROUPINGS: [&str; 6] = ["by", "without", "on", "ignoring", "group_left", "group_right"];
    let chars: Vec<char> = expr.chars().collect();
    // The index just past `close`, skipping quoted strings.
    let skip_to = |mut i: usize, close: char| {
        while i < chars.len() && chars[i] != close {
            if chars[i] == '"' {
                i += 1;
                while i < chars.len() && chars[i] != '"' {
                    i += if chars[i] == '\\' { 2 } else { 1 };
                }
            }
            i += 1;
        }
        i + 1
    };
    let mut names = BTreeSet::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c == '"' || c == '\'' {
            i += 1;
            while i < chars.len() && chars[i] != c {
                i += if chars[i] == '\\' { 2 } else { 1 };
            }
            i += 1;
        } else if c == '{' {
            i = skip_to(i, '}');
        } else if c == '[' {
            i = skip_to(i, ']');
        } else if c.is_ascii_digit() || c == '.' {
            while i < chars.len() && (chars[i].is_ascii_alphanumeric() || chars[i] == '.') {
                i += 1;
            }
        } else if c.is_ascii_alphabetic() || c == '_' || c == ':' {
            let start = i;
            while i < chars.len() && (chars[i].is_ascii_alphanumeric() || chars[i] == '_' || chars[i] == ':') {
                i += 1;
            }
            let word: String = chars[start..i].iter().collect();
            let mut next = i;
            while next < chars.len() && chars[next].is_whitespace() {
                next += 1;
            }
            let call = chars.get(next) == Some(&'(');
            if GROUPINGS.contains(&word.as_str()) {
                // `by (a, b)` names labels, not metrics.
                if call {
                    i = skip_to(next, ')');
                }
            } else if !call && !KEYWORDS.contains(&word.as_str()) {
                names.insert(word);
            }
        } else {
            i += 1;
        }
    }
    names
}

#[test]
fn metric_names_are_found_outside_matchers_functions_and_groupings() {
    let names = metric_names(
        r#"histogram_quantile(0.99, sum by (le, tenant) (rate(a_bucket{le="0.5",x=~"y|z"}[5m])))
           / on (instance) group_left (version) b_info - time() > 2 * c_seconds offset 5m
           and max without (result) (d_total) == 0"#,
    );
    let want: BTreeSet<String> = ["a_bucket", "b_info", "c_seconds", "d_total"].map(String::from).into();
    assert_eq!(names, want);
}

// Provisionable as a file: no import-time inputs or numeric id, every query
// on the `datasource` variable; and the panels the issue lists.
#[test]
fn the_dashboard_is_provisionable_with_the_on_call_panels() {
    let d = dashboard();
    assert_eq!(d["uid"], "signet-oncall");
    assert!(d["id"].is_null(), "a provisioned dashboard has no numeric id");
    assert!(d.get("__inputs").is_none(), "__inputs are for imports, not provisioning");
    assert!(d["schemaVersion"].as_u64().unwrap() >= 30);
    let vars: Vec<&str> =
        d["templating"]["list"].as_array().unwrap().iter().filter_map(|v| v["name"].as_str()).collect();
    assert!(vars.contains(&"datasource") && vars.contains(&"tenant"), "{vars:?}");
    let titles: Vec<&str> = panels(&d).iter().filter_map(|p| p["title"].as_str()).collect();
    for want in [
        "Traffic by outcome",
        "Failures by reason",
        "Failures by key",
        "Latency percentiles",
        "Outbox backlog",
        "Outbox oldest pending",
        "Quarantine",
        "Claim rollbacks and retries",
        "Keys in overlap",
    ] {
        assert!(titles.contains(&want), "no panel {want:?}: {titles:?}");
    }
    let mut ids = BTreeSet::new();
    for p in panels(&d) {
        assert!(ids.insert(p["id"].as_u64().unwrap()), "panel ids are unique");
        if p["type"] == "row" {
            continue;
        }
        assert_eq!(p["datasource"]["uid"], "${datasource}", "{}", p["title"]);
        let targets = p["targets"].as_array().unwrap();
        assert!(!targets.is_empty(), "{} has no query", p["title"]);
        for t in targets {
            assert_eq!(t["datasource"]["uid"], "${datasource}", "{}", p["title"]);
        }
    }
}

/// The metric names of a real scrape, histograms' series included.
fn exported(metrics: &str) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    for line in metrics.lines() {
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            let mut parts = rest.split_whitespace();
            if let (Some(name), Some("histogram")) = (parts.next(), parts.next()) {
                for suffix in ["_bucket", "_sum", "_count"] {
                    names.insert(format!("{name}{suffix}"));
                }
            }
        } else if !line.starts_with('#') && !line.is_empty() {
            let end = line.find(['{', ' ']).unwrap_or(line.len());
            names.insert(line[..end].to_owned());
        }
    }
    names
}

/// Runs every dashboard query in `p`, which scrapes `s`: each must parse and
/// evaluate, and select only metrics `s` exports.
pub(crate) async fn every_query_runs_and_names_exported_metrics(p: &Prometheus, s: &Server) {
    let metrics = reqwest::get(&s.metrics).await.unwrap().text().await.unwrap();
    let exported = exported(&metrics);
    let queries = queries(&dashboard());
    assert!(queries.len() >= 15, "{} queries", queries.len());
    for (panel, q) in &queries {
        let names = metric_names(q);
        assert!(!names.is_empty(), "{panel}: no metric in {q}");
        for name in &names {
            assert!(exported.contains(name), "{panel}: {name} is not a metric Signet exports ({q})");
        }
        // A variable's label_values() is Grafana's; its metric is checked above.
        if panel.starts_with("variable ") {
            continue;
        }
        let answer = p.api("query", &[("query", q.as_str())]).await;
        assert_eq!(answer["status"], "success", "{panel}: {q} → {answer}");
    }
}
