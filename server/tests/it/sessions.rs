//! The session cookie: `Secure` with the `__Host-` prefix (and HSTS) unless
//! the public URL is plain http on loopback; a sign-in never redirects off
//! the site; the sign-in throttle's client address behind a trusted proxy.

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

/// A sign-in (API style: the answer's status tells) with extra headers.
async fn sign_in_with(
    s: &crate::support::Server,
    username: &str,
    password: &str,
    headers: &[(&str, &str)],
) -> reqwest::Response {
    let c = reqwest::Client::builder().redirect(reqwest::redirect::Policy::none()).build().unwrap();
    let mut req =
        c.post(s.url("/fn/login")).header("Origin", &s.base).form(&[("username", username), ("password", password)]);
    for (name, value) in headers {
        req = req.header(*name, *value);
    }
    req.send().await.unwrap()
}

// Item 24.11: forwarding headers name the client only when the peer is a
// trusted proxy (`SIGNET_TRUSTED_PROXIES`), and then by the rightmost
// untrusted hop; a header a trusted proxy sent that cannot be read refuses
// the sign-in.
both_engines!(forwarding_headers_count_only_from_a_trusted_proxy, async |i: &Install| {
    i.cli_json_stdin(&["user", "create", "root", "--role", "admin"], &format!("{PASSWORD}\n"));
    let wrong = "not the password at all";

    // Nobody trusted: a spoofed header is ignored, the peer is the client.
    let s = i.serve();
    let spoofed = [("x-forwarded-for", "203.0.113.7"), ("forwarded", "for=203.0.113.7")];
    assert_eq!(sign_in_with(&s, "ghost", wrong, &spoofed).await.status(), 422);
    let log = s.output();
    assert!(log.contains("ip:127.0.0.1") && !log.contains("203.0.113.7"), "{log}");
    drop(s);

    // The loopback peer trusted: the rightmost hop it does not trust counts;
    // the spoofed hop the client put on the left does not.
    let s = i.serve_with(&[("SIGNET_TRUSTED_PROXIES", "127.0.0.0/8, ::1")]);
    let behind = |client: &'static str| [("x-forwarded-for", client)];
    for n in 0..20 {
        let chain = [("x-forwarded-for", "198.51.100.1, 203.0.113.8")];
        assert_eq!(sign_in_with(&s, &format!("ghost{n}"), wrong, &chain).await.status(), 422, "failure {n}");
    }
    let log = s.output();
    assert!(log.contains("ip:203.0.113.8") && !log.contains("198.51.100.1"), "{log}");
    // That client is locked; another one behind the same proxy is not.
    assert_eq!(sign_in_with(&s, "root", PASSWORD, &behind("203.0.113.8")).await.status(), 429);
    let other = sign_in_with(&s, "root", PASSWORD, &behind("203.0.113.9")).await;
    assert!(other.status().is_success() || other.status().is_redirection(), "{}", other.status());
    // RFC 7239, a quoted IPv6 node with a port (throttled by its /64).
    let v6 = [("forwarded", "for=\"[2001:db8::5]:4711\";proto=https")];
    assert_eq!(sign_in_with(&s, "ghost", wrong, &v6).await.status(), 422);
    assert!(s.output().contains("ip:2001:db8:0:0::/64"), "{}", s.output());
    // Unreadable, or two headers naming different clients: refused, and
    // nothing is counted against the proxy's own address.
    for headers in [
        &[("x-forwarded-for", "203.0.113.9:1234")][..],
        &[("forwarded", "for=unknown")],
        &[("forwarded", "for=198.51.100.1"), ("x-forwarded-for", "203.0.113.9")],
    ] {
        let r = sign_in_with(&s, "root", PASSWORD, headers).await;
        assert_eq!(r.status(), 400, "{headers:?}");
        assert!(r.text().await.unwrap().contains("forwarding_invalid"), "{headers:?}");
    }
});
