//! The session cookie: `Secure` with the `__Host-` prefix (and HSTS) unless
//! the public URL is plain http on loopback; a sign-in never redirects off
//! the site.

use crate::{both_engines, support::Install};

const PASSWORD: &str = "a long enough password";

async fn sign_in(s: &crate::support::Server, next: &str) -> reqwest::Response {
    let c = reqwest::Client::builder().redirect(reqwest::redirect::Policy::none()).build().unwrap();
    c.post(s.url("/fn/login"))
        .header("Origin", &s.base)
        .form(&[("username", "root"), ("password", PASSWORD), ("next", next)])
        .send()
        .await
        .unwrap()
}

both_engines!(the_session_cookie_is_host_bound_and_secure_off_loopback, async |i: &Install| {
    i.cli_json_stdin(&["user", "create", "root", "--role", "admin"], &format!("{PASSWORD}\n"));

    // A public https URL: Secure, __Host- prefixed, HSTS on every answer.
    let s = i.serve_with(&[("SIGNET_PUBLIC_URL", "https://signet.example")]);
    let res = sign_in(&s, "/keys").await;
    assert!(res.status().is_redirection() || res.status().is_success(), "{}", res.status());
    let cookie = res.headers().get("set-cookie").unwrap().to_str().unwrap().to_owned();
    assert!(cookie.starts_with("__Host-signet_session="), "{cookie}");
    assert!(cookie.contains("Secure") && cookie.contains("HttpOnly") && cookie.contains("Path=/"), "{cookie}");
    assert!(!cookie.contains("Domain="), "{cookie}");
    assert!(res.headers().get("strict-transport-security").is_some());
    let healthz = reqwest::get(s.url("/healthz")).await.unwrap();
    assert!(healthz.headers().get("strict-transport-security").unwrap().to_str().unwrap().contains("max-age="));
    // The cookie works under that name, and only under that name.
    let token = cookie.split(';').next().unwrap().split_once('=').unwrap().1.to_owned();
    let c = reqwest::Client::new();
    let me = |name: &str| {
        c.get(s.url("/evidence/files/0000/evidence.json")).header("cookie", format!("{name}={token}")).send()
    };
    assert_ne!(me("__Host-signet_session").await.unwrap().status(), 401);
    assert_eq!(me("signet_session").await.unwrap().status(), 401);
    drop(s);

    // Plain http on loopback (the default): no Secure flag, no prefix, no HSTS.
    let s = i.serve();
    let res = sign_in(&s, "/\t/evil.example").await;
    let cookie = res.headers().get("set-cookie").unwrap().to_str().unwrap().to_owned();
    assert!(cookie.starts_with("signet_session=") && !cookie.contains("Secure"), "{cookie}");
    assert!(res.headers().get("strict-transport-security").is_none());
    // The crafted next= falls back to the site's root.
    let location = res.headers().get("location").map(|v| v.to_str().unwrap().to_owned()).unwrap_or_default();
    assert!(location.is_empty() || location == "/", "{location}");
    drop(s);

    // A plain-http public URL that is not loopback still gets Secure cookies.
    let s = i.serve_with(&[("SIGNET_PUBLIC_URL", "http://signet.internal:3000")]);
    let cookie = sign_in(&s, "/").await.headers().get("set-cookie").unwrap().to_str().unwrap().to_owned();
    assert!(cookie.starts_with("__Host-signet_session=") && cookie.contains("Secure"), "{cookie}");
});

/// The nonce in a rendered page's policy: `script-src 'nonce-…'`.
fn policy_nonce(res: &reqwest::Response) -> String {
    let csp = res.headers()["content-security-policy"].to_str().unwrap();
    let rest = csp.split_once("script-src 'nonce-").unwrap_or_else(|| panic!("no nonce policy: {csp}")).1;
    rest.split_once('\'').unwrap().0.to_owned()
}

#[tokio::test]
async fn every_script_of_a_page_carries_the_nonce_its_policy_names() {
    let i = Install::new(crate::support::Engine::Sqlite).expect("sqlite");
    let s = i.serve();
    let mut seen = Vec::new();
    // A page, the 404 page (rendered by the fallback handler), and the same
    // page again: a fresh nonce each time.
    for path in ["/login", "/no-such-page", "/login"] {
        let res = reqwest::get(s.url(path)).await.unwrap();
        assert!(res.headers()["content-type"].to_str().unwrap().starts_with("text/html"), "{path}");
        let nonce = policy_nonce(&res);
        let html = res.text().await.unwrap();
        let scripts: Vec<&str> = html.split("<script").skip(1).map(|s| s.split_once('>').unwrap().0).collect();
        assert!(!scripts.is_empty(), "{path} has no script");
        for attrs in scripts {
            assert!(attrs.contains(&format!("nonce=\"{nonce}\"")), "{path}: <script{attrs}> lacks nonce {nonce}");
        }
        assert!(!seen.contains(&nonce), "{path}: a nonce was reused");
        seen.push(nonce);
    }
}
