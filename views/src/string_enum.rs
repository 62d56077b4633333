//! Enums whose variants are words: statuses, outcomes, reasons.
//!
//! `string_enum!` writes each word once and derives from it the JSON name
//! (serde), the OpenAPI enum (behind `openapi`), the stored string (sea-orm's
//! `DeriveActiveEnum` behind `sea-orm`, `rs_type = "String"` over the
//! migrations' `string` columns) and `as_str`/`parse`/`Display`. So the word
//! in the database, on the wire and in a raw SQL filter is the same literal,
//! and the browser build carries the type without the database.

/// Declares a `Copy` enum of words: `Variant = "word",` for each variant.
macro_rules! string_enum {
    (
        $(#[$meta:meta])*
        pub enum $name:ident {
            $( $(#[$vmeta:meta])* $variant:ident = $word:tt, )+
        }
    ) => {
        $(#[$meta])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
        #[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
        #[cfg_attr(
            feature = "sea-orm",
            derive(sea_orm::EnumIter, sea_orm::DeriveActiveEnum),
            sea_orm(rs_type = "String", db_type = "String(sea_orm::sea_query::StringLen::None)")
        )]
        pub enum $name {
            $(
                $(#[$vmeta])*
                #[serde(rename = $word)]
                #[cfg_attr(feature = "sea-orm", sea_orm(string_value = $word))]
                $variant,
            )+
        }

        impl $name {
            /// Every variant, in declaration order.
            pub const ALL: &'static [$name] = &[$($name::$variant),+];

            /// The word, as stored, sent and filtered on.
            pub const fn as_str(self) -> &'static str {
                match self {
                    $($name::$variant => $word,)+
                }
            }

            /// The variant a word names; `None` for any other text.
            pub fn parse(word: &str) -> Option<$name> {
                match word {
                    $($word => Some($name::$variant),)+
                    _ => None,
                }
            }

            /// A listing's filter on this vocabulary, as a query parameter's
            /// schema: empty (any) or one of the words.
            #[cfg(feature = "openapi")]
            pub fn filter_schema() -> utoipa::openapi::Object {
                crate::openapi::one_of(&["", $($word),+])
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.as_str())
            }
        }
    };
}

pub(crate) use string_enum;

#[cfg(test)]
mod tests {
    string_enum! {
        /// A test vocabulary.
        pub enum Word {
            First = "first_word",
            /// A documented variant.
            Second = "second",
        }
    }

    #[test]
    fn one_word_for_text_json_and_parse() {
        for w in Word::ALL {
            assert_eq!(serde_json::to_value(w).unwrap(), serde_json::json!(w.as_str()));
            assert_eq!(serde_json::from_value::<Word>(serde_json::json!(w.as_str())).unwrap(), *w);
            assert_eq!(Word::parse(w.as_str()), Some(*w));
            assert_eq!(w.to_string(), w.as_str());
        }
        assert_eq!(Word::First.as_str(), "first_word");
        assert_eq!(Word::parse("First"), None, "only the word parses, not the variant's name");
        assert!(serde_json::from_value::<Word>(serde_json::json!("first")).is_err());
    }

    #[cfg(feature = "sea-orm")]
    #[test]
    fn the_stored_string_is_the_word() {
        use sea_orm::ActiveEnum;
        for w in Word::ALL {
            assert_eq!(w.to_value(), w.as_str());
            assert_eq!(Word::try_from_value(&w.as_str().to_owned()).unwrap(), *w);
            assert_eq!(sea_orm::Value::from(*w), sea_orm::Value::from(w.as_str()));
        }
        assert!(Word::try_from_value(&"First".to_owned()).is_err());
    }
}
