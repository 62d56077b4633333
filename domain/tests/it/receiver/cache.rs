//! The receiver's endpoint cache: unknown paths cost little and evict
//! nothing; a key activated a moment ago verifies at once.

use domain::{
    crypto::SigningSecret,
    receiver::{Outcome, Refusal},
    registry::keys::{self, Approval},
};
use views::scheme::Scheme;

use super::{Setup, created, deliver, now_s, setup, signed};
use crate::{db_test, fixtures::*, support::TestDb};

db_test!(unknown_paths_never_evict_a_known_endpoint, async |t: &TestDb| {
    setup(t, Scheme::StandardWebhooks, None).await;
    // A TTL longer than the test: ten thousand lookups can outlast the
    // receiver's 5 s, and an expiry is not an eviction.
    let cache = &domain::receiver::cache::EndpointCache::new(std::time::Duration::from_secs(3600));
    assert!(
        cache.get(&t.db, &t.vault, &"clinic-a".parse().unwrap(), &"hooks".parse().unwrap()).await.unwrap().is_some()
    );
    let loads = cache.loads();
    // Paths that cannot be slugs cost nothing at all: they name no endpoint
    // before the cache is asked.
    for probe in ["UPPER", "../etc", "a b", "%0a", "x\ny", &"a".repeat(64), "_other"] {
        assert!(domain::receiver::address(probe, "hooks").is_none(), "{probe:?}");
        assert!(domain::receiver::address("clinic-a", probe).is_none(), "{probe:?}");
    }
    assert!(domain::receiver::address("_drill", "hooks").is_some(), "the drills' synthetic tenant");
    assert_eq!(cache.loads(), loads);
    // More unknown slugs than the unknown map holds: one lookup each, and the
    // known endpoint stays cached throughout.
    for i in 0..10_050 {
        assert!(
            cache
                .get(&t.db, &t.vault, &format!("probe-{i}").parse().unwrap(), &"hooks".parse().unwrap())
                .await
                .unwrap()
                .is_none()
        );
    }
    assert_eq!(cache.loads(), loads + 10_050);
    assert!(
        cache.get(&t.db, &t.vault, &"clinic-a".parse().unwrap(), &"hooks".parse().unwrap()).await.unwrap().is_some()
    );
    assert_eq!(cache.loads(), loads + 10_050, "the known endpoint was not evicted");
    // An unknown path asked again within the TTL is answered from memory.
    assert!(
        cache.get(&t.db, &t.vault, &"probe-10049".parse().unwrap(), &"hooks".parse().unwrap()).await.unwrap().is_none()
    );
    assert_eq!(cache.loads(), loads + 10_050);
});

db_test!(a_key_activated_a_moment_ago_verifies_at_once, async |t: &TestDb| {
    let s = setup(t, Scheme::StandardWebhooks, None).await;
    let body = created("r-1");
    // The receiver has the endpoint cached with the first key only.
    assert!(matches!(
        deliver(&s, &signed(&s, Scheme::StandardWebhooks, &body, now_s(), "m1"), &body).await,
        Outcome::Applied { .. }
    ));
    let rotated = keys::rotate(
        &t.db,
        &t.vault,
        &admin(),
        &s.key_id.parse().unwrap(),
        None,
        Approval::ApproveAs { reviewer: "rev".into(), comment: String::new() },
    )
    .await
    .unwrap();
    let fresh = Setup { r: s.r.clone(), secret: rotated.secret.unwrap(), key_id: rotated.key.key_id.into_string() };
    let b2 = created("r-2");
    let o = deliver(&fresh, &signed(&fresh, Scheme::StandardWebhooks, &b2, now_s(), "m2"), &b2).await;
    assert!(matches!(o, Outcome::Applied { .. }), "the new secret works at once: {o:?}");
    // Bad signatures reload the keys at most once a second.
    let loads = s.r.cache.loads();
    let wrong = SigningSecret::generate();
    let forger = Setup { r: s.r.clone(), secret: wrong, key_id: String::new() };
    for i in 0..20 {
        let b = created(&format!("x-{i}"));
        let o = deliver(&forger, &signed(&forger, Scheme::StandardWebhooks, &b, now_s(), &format!("f{i}")), &b).await;
        assert_eq!(o, Outcome::Refused(Refusal::SignatureMismatch));
    }
    assert!(s.r.cache.loads() - loads <= 1, "{} reloads", s.r.cache.loads() - loads);
});
