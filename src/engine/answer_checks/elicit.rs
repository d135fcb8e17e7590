//! Form-mode elicitation: an answer built from the requested schema's defaults, and the local
//! check that an answer fits the requested schema before it is sent.
//!
//! The requested schema of a form elicitation is a flat object of primitive properties
//! (string, number, integer, boolean, string enums and string-array multi-selects); only that
//! shape is checked here; with the `schema` feature the answer also goes through the full
//! validator (`crate::schema`).

use serde_json::{Map, Value};

use crate::error::AnswerError;

/// The answer a user gives by accepting every default: `{"action":"accept","content":{..}}`
/// with each property of `params.requestedSchema` that has a `default` (string, integer,
/// number, enum, boolean) set to it. `None` when `params` is not an elicitation's params.
pub fn elicitation_defaults(params: &str) -> Option<String> {
    let params: Value = serde_json::from_str(params).ok()?;
    let schema = params.get("requestedSchema")?.as_object()?;
    let mut content = Map::new();
    if let Some(props) = schema.get("properties").and_then(Value::as_object) {
        for (name, prop) in props {
            if let Some(d) = prop.get("default").filter(|d| fits(prop, d).is_ok()) {
                content.insert(name.clone(), d.clone());
            }
        }
    }
    let answer = serde_json::json!({"action": "accept", "content": content});
    Some(answer.to_string())
}

/// Checks an `ElicitResult` against the request's `requestedSchema`: a known `action`, and for
/// `accept` a `content` object whose members are declared properties of the right type, with
/// every required property present.
pub(crate) fn check_form_answer(params: &str, answer: &str) -> Result<(), AnswerError> {
    let answer: Value = serde_json::from_str(answer).map_err(|_| AnswerError::NotObject)?;
    let answer = answer.as_object().ok_or(AnswerError::NotObject)?;
    if !accepted(answer)? {
        return Ok(());
    }
    let empty = Map::new();
    let content = match answer.get("content") {
        None => &empty,
        Some(Value::Object(c)) => c,
        Some(_) => return mismatch("content", "must be an object"),
    };
    let params: Value = serde_json::from_str(params).unwrap_or(Value::Null);
    let schema = params.get("requestedSchema");
    let props = schema.and_then(|s| s.get("properties")).and_then(Value::as_object);
    for (name, value) in content {
        let Some(prop) = props.and_then(|p| p.get(name)) else {
            return mismatch(name, "not a property of the requested schema");
        };
        if let Err(reason) = fits(prop, value) {
            return mismatch(name, reason);
        }
    }
    let required = schema.and_then(|s| s.get("required")).and_then(Value::as_array);
    for name in required.into_iter().flatten().filter_map(Value::as_str) {
        if !content.contains_key(name) {
            return mismatch(name, "required by the requested schema and missing");
        }
    }
    #[cfg(feature = "schema")]
    full_check(schema, content)?;
    Ok(())
}

/// Checks an `ElicitResult` for a URL-mode request: a known `action` and no `content` (the
/// user gave what was asked to the server's page, never to the client).
pub(crate) fn check_url_answer(answer: &str) -> Result<(), AnswerError> {
    let answer: Value = serde_json::from_str(answer).map_err(|_| AnswerError::NotObject)?;
    let answer = answer.as_object().ok_or(AnswerError::NotObject)?;
    accepted(answer)?;
    match carries_content(answer) {
        true => mismatch("content", "a URL-mode answer carries none"),
        false => Ok(()),
    }
}

/// Whether an answer carries content: `null` and `{}` (what serializers write for an absent
/// member) carry none.
fn carries_content(answer: &Map<String, Value>) -> bool {
    match answer.get("content") {
        None | Some(Value::Null) => false,
        Some(Value::Object(c)) => !c.is_empty(),
        Some(_) => true,
    }
}

/// Whether the answer accepts, once its `action` is known; a declined or cancelled answer
/// carries no `content` (what the user declined to give must not leave).
fn accepted(answer: &Map<String, Value>) -> Result<bool, AnswerError> {
    match answer.get("action").and_then(Value::as_str) {
        Some("accept") => Ok(true),
        Some("decline" | "cancel") if carries_content(answer) => {
            mismatch("content", "only an accepted answer carries content")
        }
        Some("decline" | "cancel") => Ok(false),
        _ => mismatch("action", "must be \"accept\", \"decline\" or \"cancel\""),
    }
}

fn mismatch<T>(field: &str, reason: &'static str) -> Result<T, AnswerError> {
    Err(AnswerError::Mismatch { field: field.into(), reason })
}

/// With the `schema` feature, every keyword the validator knows (`minLength`, `maximum`,
/// `minItems`, ...) is checked as well. A requested schema the validator refuses (a remote
/// `$ref`, past the bounds) gets only the check above.
#[cfg(feature = "schema")]
fn full_check(schema: Option<&Value>, content: &Map<String, Value>) -> Result<(), AnswerError> {
    use crate::schema::{Schema, SchemaLimits};
    let Some(schema) = schema else { return Ok(()) };
    let Ok(compiled) = Schema::compile_value(schema, SchemaLimits::default()) else {
        return Ok(());
    };
    // One clone of the content: answers are small and rare.
    compiled.validate(&Value::Object(content.clone())).map_err(|v| AnswerError::Mismatch {
        field: v.pointer.strip_prefix('/').unwrap_or(&v.pointer).to_owned(),
        reason: v.reason,
    })
}

/// Whether `value` fits one primitive property schema.
fn fits(prop: &Value, value: &Value) -> Result<(), &'static str> {
    let ok = match prop.get("type").and_then(Value::as_str) {
        Some("string") => value.is_string(),
        // 2.0 is an integer, as JSON Schema (and the crate's validator) count it.
        Some("integer") => value.as_number().is_some_and(crate::proto::json::is_integer),
        Some("number") => value.is_number(),
        Some("boolean") => value.is_boolean(),
        Some("array") => value.as_array().is_some_and(|a| a.iter().all(Value::is_string)),
        // An untyped property is not something this check can judge.
        _ => true,
    };
    if !ok {
        return Err("wrong type for the requested schema");
    }
    let listed =
        |allowed: &Option<Vec<&Value>>, v: &Value| allowed.as_ref().is_none_or(|a| a.contains(&v));
    let in_enum = match value {
        Value::Array(items) => {
            // A multi-select: `items.enum`, or titled options as `items.anyOf` of `const`s.
            let allowed = prop.get("items").and_then(allowed_values);
            items.iter().all(|i| listed(&allowed, i))
        }
        v => listed(&allowed_values(prop), v),
    };
    if !in_enum {
        return Err("not one of the allowed values");
    }
    within_bounds(prop, value)
}

/// The values a property lists (`enum`, or titled options as `oneOf`/`anyOf` of `const`s);
/// `None` when it lists none. An empty list allows nothing.
fn allowed_values(prop: &Value) -> Option<Vec<&Value>> {
    if let Some(Value::Array(e)) = prop.get("enum") {
        return Some(e.iter().collect());
    }
    let options = prop.get("oneOf").or_else(|| prop.get("anyOf"))?.as_array()?;
    Some(options.iter().filter_map(|c| c.get("const")).collect())
}

/// The bounds a requested schema's primitive may carry: `minLength`/`maxLength` (characters),
/// `minimum`/`maximum`, `minItems`/`maxItems`. Without the `schema` feature these were not
/// looked at, and an answer past them was sent.
fn within_bounds(prop: &Value, value: &Value) -> Result<(), &'static str> {
    let bound = |key: &str| prop.get(key).and_then(Value::as_f64);
    // The reasons are the validator's (`crate::schema`), which says the same with the feature.
    let (low, high, what, reasons) = match value {
        Value::String(s) => (
            bound("minLength"),
            bound("maxLength"),
            s.chars().count() as f64,
            ("minLength: too short", "maxLength: too long"),
        ),
        Value::Number(n) => (
            bound("minimum"),
            bound("maximum"),
            n.as_f64().unwrap_or(0.0),
            ("minimum: too small", "maximum: too large"),
        ),
        Value::Array(a) => (
            bound("minItems"),
            bound("maxItems"),
            a.len() as f64,
            ("minItems: too few items", "maxItems: too many items"),
        ),
        _ => return Ok(()),
    };
    if low.is_some_and(|l| what < l) {
        return Err(reasons.0);
    }
    if high.is_some_and(|h| what > h) {
        return Err(reasons.1);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn params() -> String {
        json!({"message": "m", "requestedSchema": {"type": "object", "properties": {
            "name": {"type": "string", "default": "John Doe"},
            "age": {"type": "integer", "default": 30},
            "score": {"type": "number", "default": 95.5},
            "status": {"type": "string", "enum": ["active", "inactive"], "default": "active"},
            "verified": {"type": "boolean", "default": true},
            "nick": {"type": "string"}
        }, "required": ["name"]}})
        .to_string()
    }

    #[test]
    fn defaults_fill_every_kind_that_has_one() {
        let a: Value = serde_json::from_str(&elicitation_defaults(&params()).unwrap()).unwrap();
        assert_eq!(
            a,
            json!({"action": "accept", "content": {"name": "John Doe", "age": 30,
                "score": 95.5, "status": "active", "verified": true}})
        );
        assert!(check_form_answer(&params(), &a.to_string()).is_ok());
        assert_eq!(elicitation_defaults("{\"message\":\"no schema\"}"), None);
    }

    /// A declined or cancelled answer carries no content (what the user declined to give was
    /// sent all the same), and a URL-mode answer none at all (the user gave it to the
    /// server's page); a URL-mode answer's action is checked as a form's is.
    #[test]
    fn only_an_accepted_form_answer_carries_content() {
        let declined = r#"{"action":"decline","content":{"nick":"x"}}"#;
        assert!(matches!(
            check_form_answer(&params(), declined),
            Err(AnswerError::Mismatch { field, .. }) if field == "content"
        ));
        assert!(check_form_answer(&params(), r#"{"action":"cancel"}"#).is_ok());
        for empty in
            [r#"{"action":"decline","content":null}"#, r#"{"action":"cancel","content":{}}"#]
        {
            assert!(check_form_answer(&params(), empty).is_ok(), "{empty}");
            assert!(check_url_answer(empty).is_ok(), "{empty}");
        }
        for bad in [
            r#"{"action":"accept","content":{"password":"x"}}"#,
            r#"{"action":"maybe"}"#,
            r#"{}"#,
            r#"[]"#,
        ] {
            assert!(check_url_answer(bad).is_err(), "{bad}");
        }
        for good in [r#"{"action":"accept"}"#, r#"{"action":"decline"}"#, r#"{"action":"cancel"}"#]
        {
            assert!(check_url_answer(good).is_ok(), "{good}");
        }
    }

    /// Without the `schema` feature too: a titled multi-select (`items.anyOf` of `const`s),
    /// its `minItems`/`maxItems`, a string's length, a number's range and an empty `enum`
    /// are checked; each was passed and sent.
    #[test]
    fn bounds_and_titled_options_are_checked() {
        let params = json!({"message": "m", "requestedSchema": {"type": "object", "properties": {
            "tags": {"type": "array", "items": {"anyOf": [{"const": "a", "title": "A"},
                {"const": "b", "title": "B"}]}, "minItems": 1, "maxItems": 1},
            "code": {"type": "string", "minLength": 2, "maxLength": 3},
            "n": {"type": "integer", "minimum": 1, "maximum": 5},
            "none": {"type": "string", "enum": []}
        }}})
        .to_string();
        let answer = |content: Value| json!({"action": "accept", "content": content}).to_string();
        for bad in [
            json!({"tags": ["zzz"]}),
            json!({"tags": ["a", "b"]}),
            json!({"tags": []}),
            json!({"code": "x"}),
            json!({"code": "xxxx"}),
            json!({"n": 0}),
            json!({"n": 6}),
            json!({"none": "x"}),
        ] {
            let field = bad.as_object().unwrap().keys().next().unwrap().clone();
            let got = check_form_answer(&params, &answer(bad.clone()));
            assert!(
                matches!(&got, Err(AnswerError::Mismatch { field: f, .. }) if *f == field),
                "{bad}: {got:?}"
            );
        }
        let good = json!({"tags": ["b"], "code": "éé", "n": 5});
        assert!(check_form_answer(&params, &answer(good)).is_ok());
    }

    #[test]
    fn a_mismatch_names_the_field() {
        let check = |content: Value| {
            check_form_answer(
                &params(),
                &json!({"action": "accept", "content": content}).to_string(),
            )
        };
        let field = |r: Result<(), AnswerError>| match r {
            Err(AnswerError::Mismatch { field, .. }) => field,
            other => panic!("{other:?}"),
        };
        assert_eq!(field(check(json!({"name": "a", "age": "thirty"}))), "age");
        assert_eq!(field(check(json!({"name": "a", "age": 1.5}))), "age");
        assert_eq!(field(check(json!({"name": "a", "status": "gone"}))), "status");
        assert_eq!(field(check(json!({"name": "a", "extra": 1}))), "extra");
        assert_eq!(field(check(json!({"age": 3}))), "name");
        assert_eq!(field(check_form_answer(&params(), r#"{"action":"maybe"}"#)), "action");
        assert!(check_form_answer(&params(), r#"{"action":"decline"}"#).is_ok());
        assert_eq!(check_form_answer(&params(), "[1]"), Err(AnswerError::NotObject));
    }

    /// An integer written with a decimal point (2.0: what a host holding form values as
    /// floats sends) is an integer, as JSON Schema and the crate's own validator say; and an
    /// integer default written so is offered.
    #[test]
    fn an_integer_written_with_a_decimal_point_is_an_integer() {
        let answer = json!({"action": "accept", "content": {"name": "a", "age": 2.0}});
        assert!(check_form_answer(&params(), &answer.to_string()).is_ok());
        let params = json!({"message": "m", "requestedSchema": {"type": "object",
            "properties": {"age": {"type": "integer", "default": 30.0}}}});
        let defaults = elicitation_defaults(&params.to_string()).unwrap();
        let defaults: Value = serde_json::from_str(&defaults).unwrap();
        assert_eq!(defaults["content"]["age"], json!(30.0));
    }

    #[cfg(feature = "schema")]
    #[test]
    fn with_the_schema_feature_every_known_keyword_is_checked() {
        let params = json!({"message": "m", "requestedSchema": {"type": "object", "properties": {
            "name": {"type": "string", "minLength": 2},
            "age": {"type": "integer", "minimum": 0, "maximum": 150}
        }}})
        .to_string();
        let check = |content: Value| {
            check_form_answer(&params, &json!({"action": "accept", "content": content}).to_string())
        };
        assert!(check(json!({"name": "Al", "age": 3})).is_ok());
        assert_eq!(
            check(json!({"name": "A"})),
            Err(AnswerError::Mismatch { field: "name".into(), reason: "minLength: too short" })
        );
        assert_eq!(
            check(json!({"age": 200})),
            Err(AnswerError::Mismatch { field: "age".into(), reason: "maximum: too large" })
        );
    }
}
