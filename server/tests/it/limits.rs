//! Request bodies for the console's server functions and the admin API are
//! bounded by a declared limit (64 KiB): over it, 413 and never a 500,
//! whether the size is declared up front or the body just keeps streaming.

use crate::{both_engines, support::Install};

fn stream_of(total: usize) -> reqwest::Body {
    let chunk = bytes::Bytes::from(vec![b'a'; 16 * 1024]);
    let chunks = (0..total / chunk.len()).map(move |_| Ok::<_, std::io::Error>(chunk.clone()));
    reqwest::Body::wrap_stream(futures_util::stream::iter(chunks))
}

both_engines!(oversized_control_bodies_answer_413, async |i: &Install| {
    let s = i.serve();
    let c = reqwest::Client::new();
    let origin = s.url("/").trim_end_matches('/').to_owned();

    // Declared: 1 MiB to the sign-in server function (no session needed).
    let declared = c
        .post(s.url("/fn/login"))
        .header("origin", &origin)
        .header("content-type", "application/x-www-form-urlencoded")
        .body(vec![b'a'; 1024 * 1024])
        .send()
        .await
        .unwrap();
    assert_eq!(declared.status(), 413);
    let err: serde_json::Value = declared.json().await.unwrap();
    assert_eq!(err["error"], "body_too_large");

    // Streamed without a length: 8 MiB to the sign-in function and the API.
    for path in ["/fn/login", "/api/v1/tenants"] {
        let res = c
            .post(s.url(path))
            .header("origin", &origin)
            .header("content-type", "application/json")
            .body(stream_of(8 * 1024 * 1024))
            .send()
            .await
            .expect("the 413 arrives before the connection closes");
        assert_eq!(res.status(), 413, "{path}");
    }

    // Within the limit, the sign-in function still answers normally.
    let ok = c
        .post(s.url("/fn/login"))
        .header("origin", &origin)
        .header("accept", "application/json")
        .form(&[("username", "nobody"), ("password", "wrong password here")])
        .send()
        .await
        .unwrap();
    assert_ne!(ok.status(), 413);
    assert!(ok.status().is_client_error(), "{}", ok.status());
    // The server is still healthy after all of that.
    assert_eq!(c.get(s.url("/healthz")).send().await.unwrap().status(), 200);
});
