//! Integer fields as JSON Schema counts integers: `3600` and `3600.0` are
//! the same integer, so a field documented as an integer takes both; a
//! fraction or a value out of the type's range is still refused.

use std::fmt;

use serde::{
    Deserializer,
    de::{self, Visitor},
};

struct Integral<T>(std::marker::PhantomData<T>);

impl<T: TryFrom<i64> + TryFrom<u64>> Visitor<'_> for Integral<T> {
    type Value = T;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("an integer")
    }
    fn visit_i64<E: de::Error>(self, v: i64) -> Result<T, E> {
        T::try_from(v).map_err(|_| E::invalid_value(de::Unexpected::Signed(v), &self))
    }
    fn visit_u64<E: de::Error>(self, v: u64) -> Result<T, E> {
        T::try_from(v).map_err(|_| E::invalid_value(de::Unexpected::Unsigned(v), &self))
    }
    fn visit_f64<E: de::Error>(self, v: f64) -> Result<T, E> {
        // Exactly representable and whole: within ±2^53.
        const EXACT: f64 = 9_007_199_254_740_992.0;
        if v.fract() == 0.0 && v.abs() <= EXACT {
            self.visit_i64(v as i64)
        } else {
            Err(E::invalid_value(de::Unexpected::Float(v), &self))
        }
    }
}

struct OptionalIntegral<T>(std::marker::PhantomData<T>);

impl<'de, T: TryFrom<i64> + TryFrom<u64>> Visitor<'de> for OptionalIntegral<T> {
    type Value = Option<T>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("an integer or null")
    }
    fn visit_none<E: de::Error>(self) -> Result<Option<T>, E> {
        Ok(None)
    }
    fn visit_unit<E: de::Error>(self) -> Result<Option<T>, E> {
        Ok(None)
    }
    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Option<T>, D::Error> {
        d.deserialize_i64(Integral(std::marker::PhantomData)).map(Some)
    }
}

/// `#[serde(deserialize_with = "views::integral::integer")]`
pub fn integer<'de, D: Deserializer<'de>, T: TryFrom<i64> + TryFrom<u64>>(d: D) -> Result<T, D::Error> {
    d.deserialize_i64(Integral(std::marker::PhantomData))
}

/// `#[serde(default, deserialize_with = "views::integral::optional")]`
pub fn optional<'de, D: Deserializer<'de>, T: TryFrom<i64> + TryFrom<u64>>(d: D) -> Result<Option<T>, D::Error> {
    d.deserialize_option(OptionalIntegral(std::marker::PhantomData))
}

#[cfg(test)]
mod tests {
    use serde::Deserialize;

    #[derive(Deserialize)]
    struct Body {
        #[serde(default, deserialize_with = "super::optional")]
        n: Option<i64>,
        #[serde(deserialize_with = "super::integer")]
        m: u64,
    }

    #[test]
    fn whole_floats_are_integers_and_fractions_are_not() {
        let b: Body = serde_json::from_str(r#"{"n": 3600.0, "m": 7}"#).unwrap();
        assert_eq!((b.n, b.m), (Some(3600), 7));
        let b: Body = serde_json::from_str(r#"{"n": null, "m": 7.0}"#).unwrap();
        assert_eq!((b.n, b.m), (None, 7));
        let b: Body = serde_json::from_str(r#"{"m": 1}"#).unwrap();
        assert_eq!(b.n, None);
        for bad in [r#"{"m": 1.5}"#, r#"{"m": -1}"#, r#"{"m": "1"}"#, r#"{"m": 1e300}"#] {
            assert!(serde_json::from_str::<Body>(bad).is_err(), "{bad}");
        }
    }
}
