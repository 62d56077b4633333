//! Sign-in, sign-out, first-run setup and "who am I".

use leptos::prelude::*;
use server_fn::codec::GetUrl;

use super::AppError;
use crate::dto::Me;

/// The signed-in user, or `None`.
#[server(prefix = "/fn", endpoint = "whoami", input = GetUrl)]
pub async fn whoami() -> Result<Option<Me>, AppError> {
    use crate::ssr;
    match ssr::maybe_principal().await? {
        Some(p) => Ok(Some(ssr::me_dto(&p).await?)),
        None => Ok(None),
    }
}

/// Whether the one-time setup is still open (no user exists yet).
#[server(prefix = "/fn", endpoint = "setup_open", input = GetUrl)]
pub async fn setup_open() -> Result<bool, AppError> {
    use crate::ssr;
    let st = ssr::state()?;
    Ok(!domain::auth::users::any_exist(&st.db).await?)
}

/// Only same-site relative paths are followed after sign-in.
#[cfg(feature = "ssr")]
/// Where to go after signing in: only a path on this site. Browsers drop tabs
/// and newlines inside URLs and read `\\` as `/`, so `/\t/evil.example` would
/// become `//evil.example`; any control character, backslash or a second
/// leading slash therefore falls back to `/`.
pub fn safe_next(next: Option<String>) -> String {
    match next {
        Some(n)
            if n.starts_with('/') && !n[1..].starts_with('/') && !n.chars().any(|c| c.is_control() || c == '\\') =>
        {
            n
        }
        _ => "/".to_owned(),
    }
}

#[server(prefix = "/fn", endpoint = "login")]
pub async fn login(username: String, password: String, next: Option<String>) -> Result<(), AppError> {
    use crate::ssr;
    use domain::{auth::sessions, clock, crypto::Password};
    let st = ssr::state()?;
    let password = Password::new(password);
    let (ip, device) = (ssr::client_ip()?, ssr::device_token());
    let attempt = sessions::LoginAttempt {
        username: username.trim(),
        password: &password,
        client_ip: &ip,
        device: device.as_deref(),
    };
    let ok = sessions::login(&st.db, st.sessions, attempt, clock::now_ms()).await?;
    ssr::set_session_cookie(Some(ok.token.expose()), st.secure_cookies, st.sessions.absolute_ms / 1000);
    if let Some(device) = &ok.device {
        ssr::set_device_cookie(device.expose(), st.secure_cookies);
    }
    leptos_axum::redirect(&safe_next(next));
    Ok(())
}

#[server(prefix = "/fn", endpoint = "logout")]
pub async fn logout() -> Result<(), AppError> {
    use crate::ssr;
    let st = ssr::state()?;
    if let Some(token) = ssr::session_token() {
        domain::auth::sessions::logout(&st.db, &token).await?;
    }
    ssr::set_session_cookie(None, st.secure_cookies, 0);
    leptos_axum::redirect("/login");
    Ok(())
}

/// Creates the first administrator with the token from the setup link.
#[server(prefix = "/fn", endpoint = "setup_admin")]
pub async fn setup_admin(token: String, username: String, password: String, confirm: String) -> Result<(), AppError> {
    use crate::ssr;
    use domain::crypto::Password;
    let st = ssr::state()?;
    use domain::DomainError;
    if !st.setup.matches(&token) {
        return Err(AppError::from(DomainError::invalid(
            "invalid_setup_token",
            "this setup link is not valid (it changes at every start); use the one printed most recently",
        )));
    }
    if password != confirm {
        return Err(AppError::from(DomainError::invalid("password_mismatch", "the two passwords differ")));
    }
    domain::auth::users::bootstrap_admin(&st.db, username.trim().to_owned(), Password::new(password)).await?;
    st.setup.consume();
    leptos_axum::redirect("/login?setup=done");
    Ok(())
}

#[cfg(all(test, feature = "ssr"))]
mod tests {
    use super::safe_next;

    #[test]
    fn next_is_a_path_on_this_site_or_the_root() {
        for ok in ["/", "/keys", "/quarantine?tenant=clinic-a&reason=x", "/a/%2F%2Fb"] {
            assert_eq!(safe_next(Some(ok.into())), ok);
        }
        for bad in [
            "//evil.example",
            "/\t/evil.example",
            "/\n/evil.example",
            "/\\evil.example",
            "\\/evil.example",
            "https://evil.example/",
            "evil.example",
            "/ok\r\nSet-Cookie: x=1",
            "/x\u{7f}",
            "",
        ] {
            assert_eq!(safe_next(Some(bad.into())), "/", "{bad:?}");
        }
        assert_eq!(safe_next(None), "/");
    }
}
