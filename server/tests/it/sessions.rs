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
