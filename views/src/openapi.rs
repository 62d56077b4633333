//! Building blocks for the OpenAPI document's constraints (feature
//! `openapi`). Each rule's numbers and patterns come from the constants its
//! validator reads, so the document states what the validator does.

use utoipa::openapi::{
    Array, Object, ObjectBuilder, Type,
    schema::{ArrayBuilder, SchemaType},
};

/// An integer in `min..=max`.
pub fn integer(min: i64, max: i64) -> Object {
    ObjectBuilder::new().schema_type(Type::Integer).minimum(Some(min)).maximum(Some(max)).build()
}

/// A string matching `pattern` (a search, as in JSON Schema, unless anchored),
/// of at most `max_chars` characters.
pub fn string(pattern: &str, max_chars: Option<usize>) -> Object {
    ObjectBuilder::new().schema_type(Type::String).pattern(Some(pattern)).max_length(max_chars).build()
}

/// One of the given strings.
pub fn one_of(values: &[&str]) -> Object {
    ObjectBuilder::new().schema_type(Type::String).enum_values(Some(values.iter().copied())).build()
}

/// One of the given strings, or `null` (an omitted optional field).
pub fn nullable_one_of(values: &[&str]) -> Object {
    let values = values.iter().map(|v| serde_json::Value::from(*v)).chain([serde_json::Value::Null]);
    ObjectBuilder::new()
        .schema_type(SchemaType::from_iter([Type::String, Type::Null]))
        .enum_values(Some(values))
        .build()
}

/// An array of `items`, with at least `min_items`.
pub fn array(items: Object, min_items: usize) -> Array {
    ArrayBuilder::new().items(items).min_items(Some(min_items)).build()
}

/// The same schema, also admitting `null` (an omitted optional field).
pub fn nullable(mut schema: Object) -> Object {
    schema.schema_type = match schema.schema_type {
        SchemaType::Type(t) => SchemaType::from_iter([t, Type::Null]),
        other => other,
    };
    schema
}

/// The same array, also admitting `null`.
pub fn nullable_array(mut schema: Array) -> Array {
    schema.schema_type = SchemaType::from_iter([Type::Array, Type::Null]);
    schema
}
