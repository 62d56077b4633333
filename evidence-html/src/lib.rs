//! `evidence.html`: an evidence bundle as one self-contained printable page
//! (inline CSS with print rules; no scripts, fonts or images from anywhere),
//! written by the askama template `templates/evidence.html`, which is
//! checked when this crate compiles.
//!
//! The page is a function of `evidence.json` alone and applies no rule of its
//! own (a durability setting is weak where the bundle's findings say so, as
//! on the console). The domain signs the page with the rest of the bundle
//! but holds no HTML: its export takes [`render`] from the edges that call
//! it (the CLI, `/api/v1` and the console).
//!
//! Every value is escaped: tenant names, owners, comments and reasons are
//! user input. The page is served under a policy that allows its one style
//! block by hash ([`style_hash`]) and nothing else.

use std::fmt;

use askama::Template;
use views::evidence::{CohortCheck, Evidence, KekSeals};

/// The page's one style block, as written between `<style>` and `</style>`.
///
/// Pages already exported are stored byte for byte and served under the
/// current [`style_hash`]: a change to a single byte here (its first, empty
/// line included) leaves every stored page unstyled.
pub const STYLE: &str = include_str!("../templates/evidence.css");

/// The CSP source that allows exactly the page's style block:
/// `sha256-<base64>`.
pub fn style_hash() -> String {
    use base64::Engine;
    use sha2::Digest;
    format!("sha256-{}", base64::engine::general_purpose::STANDARD.encode(sha2::Sha256::digest(STYLE.as_bytes())))
}

/// Renders the page. `evidence_sha256` (hex) is printed so the page can be
/// tied to its `evidence.json`.
pub fn render(e: &Evidence, evidence_sha256: &str) -> String {
    Page::new(e, evidence_sha256)
        .render()
        // Writing into a String cannot fail, and no value on the page has a
        // fallible `Display`.
        .expect("the evidence page renders")
}

/// The escaper of the page's `.html` templates (`askama.toml`): the five
/// characters that can end a text or an attribute value, `& < > " '`, as
/// named entities. askama's own escaper writes numeric ones (`&#60;`); this
/// one writes what the page has always written, so a bundle exported before
/// the template and one exported after read the same.
#[derive(Debug, Clone, Copy)]
pub struct Entities;

impl askama::filters::Escaper for Entities {
    fn write_escaped_str<W: fmt::Write>(&self, mut dest: W, text: &str) -> fmt::Result {
        let mut rest = text;
        while let Some(at) = rest.find(['&', '<', '>', '"', '\'']) {
            dest.write_str(&rest[..at])?;
            dest.write_str(match rest.as_bytes()[at] {
                b'&' => "&amp;",
                b'<' => "&lt;",
                b'>' => "&gt;",
                b'"' => "&quot;",
                _ => "&#39;",
            })?;
            rest = &rest[at + 1..];
        }
        dest.write_str(rest)
    }
}

#[derive(Template)]
#[template(path = "evidence.html")]
struct Page<'a> {
    e: &'a Evidence,
    evidence_sha256: &'a str,
    style: &'static str,
    /// `all tenants`, or `tenant <slug>`.
    scope: String,
    critical: usize,
    /// The durability settings the bundle's findings call weak, in their
    /// order: the rule lives in the domain (`durability_weak`, one finding
    /// per setting, named by its subject), the page only shows it.
    weak: Vec<&'a str>,
}

impl<'a> Page<'a> {
    fn new(e: &'a Evidence, evidence_sha256: &'a str) -> Self {
        Page {
            e,
            evidence_sha256,
            style: STYLE,
            scope: e.tenant.as_deref().map_or_else(|| "all tenants".to_owned(), |t| format!("tenant {t}")),
            critical: e.critical(),
            weak: e.findings.iter().filter(|f| f.id == "durability_weak").map(|f| f.subject.as_str()).collect(),
        }
    }

    fn newest_kek(&self) -> Option<&'a KekSeals> {
        self.e.deployment.kek_seals.iter().find(|k| k.newest)
    }

    fn constraints_present(&self) -> usize {
        self.e.constraints.iter().filter(|c| c.present).count()
    }

    /// The newest drill run passed and still counts for this build.
    fn drills_current(&self) -> bool {
        self.e.drills.latest.as_ref().is_some_and(|r| r.passed == Some(true)) && !self.e.drills.stale
    }

    fn judged(&self, setting: &str) -> bool {
        views::evidence::durability_judged(&self.e.database.engine, setting)
    }

    fn is_weak(&self, setting: &str) -> bool {
        self.weak.contains(&setting)
    }

    /// Weak settings the database did not report at all.
    fn unread_weak(&self) -> Vec<&'a str> {
        self.weak.iter().copied().filter(|w| !self.e.database.durability.contains_key(*w)).collect()
    }

    /// A retention period in words (`30 d`).
    fn human(&self, secs: &i64) -> String {
        views::retention::human(*secs)
    }

    /// Which entries the bundle's chain check recomputed, in words.
    fn recomputed(&self) -> String {
        views::evidence::chain_recomputed(self.e.audit.verified_from_seq)
    }

    /// Breaches counted but not listed.
    fn unlisted(&self, c: &CohortCheck) -> u64 {
        c.breaches_total.saturating_sub(c.breaches.len() as u64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The fixture bundles' pages, byte for byte as the hand-written
    /// renderer this template replaced wrote them (the golden files were
    /// made by it, and nothing rewrites them).
    #[test]
    fn evidence_page_matches_golden() {
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures");
        for name in ["full", "tenant", "empty"] {
            let json = std::fs::read_to_string(format!("{dir}/evidence-{name}.json")).expect("fixture");
            let e: Evidence = serde_json::from_str(&json).expect("fixture parses");
            let html = render(&e, "5e884898da28047151d0e56f8dc6292773603d0d6aabbdd62a11ef721d1542d8");
            let golden = std::fs::read_to_string(format!("{dir}/evidence-{name}.html")).expect("golden");
            if html != golden {
                let line = html.lines().zip(golden.lines()).position(|(a, b)| a != b);
                panic!("evidence-{name}.html differs (first at line {line:?})\n{html}");
            }
        }
    }

    fn fixture(name: &str) -> serde_json::Value {
        let path = format!("{}/tests/fixtures/evidence-{name}.json", env!("CARGO_MANIFEST_DIR"));
        serde_json::from_str(&std::fs::read_to_string(path).expect("fixture")).expect("fixture parses")
    }

    /// Every string of the bundle, and every key of its maps, starts with
    /// markup and quotes: none of it reaches the page unescaped.
    #[test]
    fn evidence_page_escapes_every_value() {
        use serde_json::Value;
        const MARK: &str = "<i>\"'&";
        fn poison(v: &mut Value) {
            match v {
                Value::String(s) => *s = format!("{MARK}{s}"),
                Value::Array(a) => a.iter_mut().for_each(poison),
                Value::Object(o) => o.values_mut().for_each(poison),
                _ => {}
            }
        }
        fn poison_keys(v: &mut Value) {
            if let Value::Object(o) = v {
                *o = std::mem::take(o).into_iter().map(|(k, v)| (format!("{MARK}{k}"), v)).collect();
            }
        }
        let mut json = fixture("full");
        poison(&mut json);
        poison_keys(&mut json["database"]["durability"]);
        for d in json["drills"]["latest"]["drills"].as_array_mut().expect("drills") {
            poison_keys(&mut d["expected"]);
            poison_keys(&mut d["observed"]);
        }
        let html = render(&serde_json::from_value(json).expect("still a bundle"), MARK);
        let body = &html[html.find("</style>").expect("style block")..];
        assert!(!body.contains("<i>") && !body.contains("\"'&"), "{body}");
        assert!(body.matches("&lt;i&gt;&quot;&#39;&amp;").count() > 100, "{body}");
    }

    /// The style block is what [`style_hash`] allows, and the hash is the
    /// one pages were served under before the template: stored pages are
    /// served under the current hash, so a new one would unstyle them.
    #[test]
    fn evidence_style_block_is_the_hashed_one() {
        let html = render(&serde_json::from_value(fixture("empty")).expect("fixture"), "x");
        let block = html.split_once("<style>").and_then(|(_, rest)| rest.split_once("</style>")).expect("style").0;
        assert_eq!(block, STYLE);
        assert_eq!(style_hash(), "sha256-khlBi+PxtPYjcEq6oUE0Wc8oF9AQBoKV6ecg/z6GIEQ=");
    }

    #[test]
    fn evidence_escapes_markup_and_quotes() {
        let mut out = String::new();
        askama::filters::Escaper::write_escaped_str(&Entities, &mut out, r#"<script>alert("x")</script> & 'y'"#)
            .unwrap();
        assert_eq!(out, "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt; &amp; &#39;y&#39;");
    }
}
