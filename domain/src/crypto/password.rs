//! Password hashing with argon2id at OWASP's recommended parameters
//! (19 MiB memory, 2 iterations, 1 lane).

use argon2::{
    Algorithm, Argon2, Params, Version,
    password_hash::{PasswordHash, PasswordHasher, PasswordVerifier, SaltString, rand_core::OsRng},
};
use std::sync::OnceLock;
use zeroize::Zeroizing;

use super::CryptoError;

/// A password in transit from a form, stdin or a generator. Redacted in
/// `Debug`, zeroized on drop.
pub struct Password(Zeroizing<String>);

impl Password {
    pub fn new(text: String) -> Self {
        Password(Zeroizing::new(text))
    }
    pub fn expose(&self) -> &str {
        &self.0
    }
    /// A generated password of 24 URL-safe characters (~143 bits).
    pub fn generate() -> Self {
        let token = super::random_token("");
        Password(Zeroizing::new(token.expose().chars().take(24).collect()))
    }
}

impl std::fmt::Debug for Password {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Password(<redacted>)")
    }
}

fn argon2() -> Result<Argon2<'static>, CryptoError> {
    let params = Params::new(19 * 1024, 2, 1, None).map_err(|_| CryptoError::PasswordHash)?;
    Ok(Argon2::new(Algorithm::Argon2id, Version::V0x13, params))
}

/// Hashes to a PHC string (`$argon2id$v=19$m=19456,t=2,p=1$…`).
pub fn hash_password(password: &Password) -> Result<String, CryptoError> {
    let salt = SaltString::generate(&mut OsRng);
    argon2()?
        .hash_password(password.expose().as_bytes(), &salt)
        .map(|h| h.to_string())
        .map_err(|_| CryptoError::PasswordHash)
}

/// Checks a password against a stored PHC string. A malformed hash verifies
/// as false.
pub fn verify_password(password: &Password, phc: &str) -> bool {
    let Ok(parsed) = PasswordHash::new(phc) else {
        return false;
    };
    match argon2() {
        Ok(a) => a.verify_password(password.expose().as_bytes(), &parsed).is_ok(),
        Err(_) => false,
    }
}

/// Spends the same work as a real verification, for logins naming an
/// unknown user, so response time does not reveal which usernames exist.
pub fn verify_password_dummy(password: &Password) {
    static DUMMY: OnceLock<Option<String>> = OnceLock::new();
    if let Some(phc) = DUMMY.get_or_init(|| hash_password(&Password::generate()).ok()) {
        let _ = verify_password(password, phc);
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn hashes_verify_and_use_owasp_parameters() {
        let pw = Password::new("correct horse battery staple".into());
        let phc = hash_password(&pw).unwrap();
        assert!(phc.starts_with("$argon2id$v=19$m=19456,t=2,p=1$"), "{phc}");
        assert!(verify_password(&pw, &phc));
        assert!(!verify_password(&Password::new("wrong".into()), &phc));
        assert!(!verify_password(&pw, "not a phc string"));
        assert_ne!(phc, hash_password(&pw).unwrap(), "salted");
    }

    #[test]
    fn generated_passwords_are_long_and_redacted() {
        let pw = Password::generate();
        assert_eq!(pw.expose().len(), 24);
        assert!(!format!("{pw:?}").contains(pw.expose()));
    }
}
