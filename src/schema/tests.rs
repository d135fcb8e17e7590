use serde_json::{json, Value};

use super::*;

fn compile(schema: Value) -> Schema {
    Schema::compile_value(&schema, SchemaLimits::default()).expect("compiles")
}

fn fails_at(schema: &Schema, instance: Value) -> (String, &'static str) {
    match schema.validate(&instance) {
        Err(v) => {
            assert!(!v.budget, "{v}");
            (v.pointer, v.reason)
        }
        Ok(()) => panic!("{instance} passed"),
    }
}

#[test]
fn tool_input_schema_names_the_failing_path() {
    let s = compile(json!({
        "type": "object",
        "properties": {
            "city": {"type": "string", "minLength": 2, "maxLength": 4},
            "days": {"type": "integer", "minimum": 1, "exclusiveMaximum": 8},
            "units": {"enum": ["c", "f"]},
            "tags": {"type": "array", "items": {"type": "string"}, "uniqueItems": true,
                     "maxItems": 3},
            "a/b": {"const": 1}
        },
        "required": ["city"],
        "additionalProperties": false
    }));
    assert!(s.validate(&json!({"city": "Oslo", "days": 7, "units": "c", "tags": ["x"]})).is_ok());
    assert!(s.validate(&json!({"city": "Åsæ"})).is_ok(), "length counts code points");
    assert_eq!(fails_at(&s, json!({})), ("/city".into(), "required: missing"));
    assert_eq!(fails_at(&s, json!({"city": 3})).0, "/city");
    assert_eq!(fails_at(&s, json!({"city": "O"})).1, "minLength: too short");
    assert_eq!(fails_at(&s, json!({"city": "Oslo!"})).1, "maxLength: too long");
    assert_eq!(fails_at(&s, json!({"city": "Oslo", "days": 8})).1, "exclusiveMaximum: too large");
    assert_eq!(fails_at(&s, json!({"city": "Oslo", "days": 0})).1, "minimum: too small");
    assert_eq!(fails_at(&s, json!({"city": "Oslo", "days": 1.5})).1, "type: wrong type");
    assert!(s.validate(&json!({"city": "Oslo", "days": 2.0})).is_ok(), "2.0 is an integer");
    assert_eq!(fails_at(&s, json!({"city": "Oslo", "units": "k"})).0, "/units");
    assert_eq!(fails_at(&s, json!({"city": "Oslo", "tags": ["a", 1]})).0, "/tags/1");
    assert_eq!(
        fails_at(&s, json!({"city": "Oslo", "tags": ["a", "a"]})).1,
        "uniqueItems: items repeat"
    );
    assert_eq!(fails_at(&s, json!({"city": "Oslo", "tags": ["a", "b", "c", "d"]})).0, "/tags");
    assert_eq!(
        fails_at(&s, json!({"city": "Oslo", "extra": 1})),
        ("/extra".into(), "false schema: nothing matches")
    );
    assert_eq!(fails_at(&s, json!({"city": "Oslo", "a/b": 2})).0, "/a~1b");
    assert!(s.validate(&json!({"city": "Oslo", "a/b": 1.0})).is_ok(), "1.0 equals 1");
    assert_eq!(fails_at(&s, json!([])).1, "type: wrong type");
}

#[test]
fn combinators_and_prefix_items() {
    let s = compile(json!({
        "prefixItems": [{"type": "string"}, {"type": "number"}],
        "items": {"type": "boolean"},
        "minItems": 2
    }));
    assert!(s.validate(&json!(["a", 1, true, false])).is_ok());
    assert_eq!(fails_at(&s, json!(["a", 1, 2])).0, "/2");
    assert_eq!(fails_at(&s, json!([1, 1])).0, "/0");
    assert_eq!(fails_at(&s, json!(["a"])).1, "minItems: too few items");
    // Draft-07's array form of `items`, with `additionalItems`.
    let d7 = compile(json!({"items": [{"type": "string"}], "additionalItems": false}));
    assert!(d7.validate(&json!(["a"])).is_ok());
    assert_eq!(fails_at(&d7, json!(["a", "b"])).0, "/1");

    let any = compile(json!({"anyOf": [{"type": "string"}, {"type": "integer"}]}));
    assert!(any.validate(&json!(3)).is_ok());
    assert_eq!(fails_at(&any, json!(1.5)).1, "anyOf: no subschema matches");
    let one = compile(json!({"oneOf": [{"type": "number"}, {"type": "integer"}]}));
    assert!(one.validate(&json!(1.5)).is_ok());
    assert_eq!(fails_at(&one, json!(1)).1, "oneOf: more than one subschema matches");
    assert_eq!(fails_at(&one, json!("x")).1, "oneOf: no subschema matches");
    let all = compile(json!({"allOf": [{"minimum": 1}, {"multipleOf": 0.1}]}));
    assert!(all.validate(&json!(0.3)).is_err());
    assert!(all.validate(&json!(1.3)).is_ok(), "1.3 is a multiple of 0.1 within rounding");
    assert_eq!(fails_at(&all, json!(1.25)).1, "multipleOf: not a multiple");
    let not = compile(json!({"not": {"type": "null"}}));
    assert!(not.validate(&json!(0)).is_ok());
    assert_eq!(fails_at(&not, json!(null)).1, "not: the subschema matches");
    assert!(compile(json!(true)).validate(&json!({"x": 1})).is_ok());
    assert!(compile(json!(false)).validate(&json!(1)).is_err());
    let props = compile(json!({"minProperties": 1, "maxProperties": 1}));
    assert!(props.validate(&json!({"a": 1})).is_ok());
    assert!(props.validate(&json!({})).is_err());
    assert!(props.validate(&json!({"a": 1, "b": 2})).is_err());
}

#[test]
fn local_refs_resolve_and_may_recurse() {
    let tree = compile(json!({
        "$defs": {"node": {"type": "object", "properties": {
            "value": {"type": "integer"},
            "children": {"type": "array", "items": {"$ref": "#/$defs/node"}}
        }, "required": ["value"]}},
        "$ref": "#/$defs/node"
    }));
    let ok = json!({"value": 1, "children": [{"value": 2, "children": [{"value": 3}]}]});
    assert!(tree.validate(&ok).is_ok());
    let bad = json!({"value": 1, "children": [{"value": 2, "children": [{"value": "x"}]}]});
    assert_eq!(fails_at(&tree, bad).0, "/children/0/children/0/value");
    // Draft-07 `definitions`, a percent-encoded pointer, and `#` itself.
    let d7 = compile(json!({
        "definitions": {"a b": {"type": "string"}},
        "properties": {"x": {"$ref": "#/definitions/a%20b"}, "self": {"$ref": "#"}}
    }));
    assert!(d7.validate(&json!({"x": "s", "self": {"x": "t"}})).is_ok());
    assert_eq!(fails_at(&d7, json!({"self": {"x": 1}})).0, "/self/x");
}

#[test]
fn remote_and_dangling_refs_are_refused() {
    let err = |s: Value| Schema::compile_value(&s, SchemaLimits::default()).unwrap_err();
    assert_eq!(
        err(json!({"$ref": "https://example.com/s.json"})),
        SchemaError::RemoteRef("https://example.com/s.json".into())
    );
    // Even in a definition nothing refers to, or under an ignored keyword.
    assert!(matches!(
        err(json!({"$defs": {"x": {"$ref": "other.json#/a"}}})),
        SchemaError::RemoteRef(_)
    ));
    assert!(matches!(err(json!({"if": {"$ref": "http://10.0.0.1/x"}})), SchemaError::RemoteRef(_)));
    assert_eq!(
        err(json!({"$ref": "#/$defs/none"})),
        SchemaError::UnresolvedRef("#/$defs/none".into())
    );
    // A plain name that no `$anchor` carries.
    assert!(matches!(err(json!({"$ref": "#anchor"})), SchemaError::UnresolvedRef(_)));
    assert!(matches!(err(json!({"type": "strung"})), SchemaError::Malformed { .. }));
    assert!(
        matches!(err(json!({"properties": {"a": 3}})), SchemaError::Malformed { at, .. } if at == "/properties/a")
    );
}

#[test]
fn a_plain_name_reference_points_at_the_schema_with_that_anchor() {
    let s = compile(json!({
        "$defs": {
            "pos": {"$anchor": "positive", "type": "integer", "minimum": 1},
            "odd/~name": {"$anchor": "three", "const": 3}
        },
        "properties": {
            "n": {"$ref": "#positive"},
            "m": {"$ref": "#three"},
            "k": {"$ref": "#/$defs/pos"}
        }
    }));
    assert!(s.validate(&json!({"n": 2, "m": 3, "k": 1})).is_ok());
    assert_eq!(fails_at(&s, json!({"n": 0})), ("/n".into(), "minimum: too small"));
    assert_eq!(fails_at(&s, json!({"m": 4})).0, "/m", "under a name that needs escaping");
    assert_eq!(fails_at(&s, json!({"k": "x"})).1, "type: wrong type");
    // Recursive through an anchor at the root: a tree.
    let tree = compile(json!({
        "$anchor": "node",
        "type": "object",
        "properties": {"kids": {"type": "array", "items": {"$ref": "#node"}}}
    }));
    assert!(tree.validate(&json!({"kids": [{"kids": []}, {}]})).is_ok());
    assert_eq!(fails_at(&tree, json!({"kids": [{"kids": [1]}]})).0, "/kids/0/kids/0");
}

#[test]
fn unknown_and_unsupported_keywords_are_ignored() {
    let s = compile(json!({
        "type": "object",
        "properties": {"s": {"type": "string", "format": "email", "pattern": "^(?=a)"}},
        "patternProperties": {"^x(?!y)": {"type": "integer"}},
        "additionalProperties": false,
        "x-vendor": {"anything": true},
        "unevaluatedProperties": false
    }));
    // `format` and `unevaluated*` are not checked, nor a pattern regex-lite cannot read
    // (lookaround); with a `patternProperties` pattern unread, `additionalProperties` cannot
    // be judged and is skipped too.
    assert!(s.validate(&json!({"s": "zzz", "xz": "not an integer", "other": 1})).is_ok());
}

#[test]
fn pattern_is_searched_for_anywhere_in_a_string() {
    let s = compile(json!({
        "properties": {
            "id": {"type": "string", "pattern": "^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$"},
            "code": {"pattern": "[A-Z]{3}"},
            "path": {"pattern": "^\\/[a-z]+$"}
        }
    }));
    assert!(s.validate(&json!({"id": "123e4567-e89b-12d3-a456-426614174000"})).is_ok());
    assert_eq!(fails_at(&s, json!({"id": "123e4567"})), ("/id".into(), "pattern: does not match"));
    assert!(s.validate(&json!({"code": "xxABCxx"})).is_ok(), "not anchored unless asked");
    assert_eq!(fails_at(&s, json!({"code": "AbC"})).0, "/code");
    assert!(s.validate(&json!({"code": 42})).is_ok(), "only strings");
    assert!(s.validate(&json!({"path": "/etc"})).is_ok(), "an escaped slash, as ECMA-262 allows");
    // Common shapes compile within the size bound: a date-time and an e-mail address.
    let s = compile(json!({"properties": {
        "at": {"pattern": "^\\d{4}-\\d{2}-\\d{2}T\\d{2}:\\d{2}:\\d{2}(\\.\\d+)?(Z|[+-]\\d{2}:\\d{2})$"},
        "mail": {"pattern": "^[a-zA-Z0-9._%+-]+@[a-zA-Z0-9.-]+\\.[a-zA-Z]{2,}$"}
    }}));
    assert!(s.validate(&json!({"at": "2026-12-05T10:00:00Z", "mail": "a.b@example.org"})).is_ok());
    assert_eq!(fails_at(&s, json!({"at": "5 Dec"})).0, "/at");
    assert_eq!(fails_at(&s, json!({"mail": "no at sign"})).0, "/mail");
    // A length by pattern, whose `.` (every Unicode scalar value) compiles to 22 KiB: checked,
    // in code points.
    let s = compile(json!({"pattern": "^.{1,255}$"}));
    assert!(s.validate(&json!("é".repeat(255))).is_ok());
    assert_eq!(fails_at(&s, json!("x".repeat(256))).1, "pattern: does not match");
}

#[test]
fn pattern_properties_apply_to_matching_names_and_settle_additional_properties() {
    let s = compile(json!({
        "properties": {"name": {"type": "string"}},
        "patternProperties": {"^x-": {"type": "integer"}, "-n$": {"minimum": 0}},
        "additionalProperties": false
    }));
    assert!(s.validate(&json!({"name": "a", "x-a": 1, "x-b-n": 2})).is_ok());
    assert_eq!(fails_at(&s, json!({"x-a": "1"})), ("/x-a".into(), "type: wrong type"));
    // Both patterns apply to a name both match.
    assert_eq!(fails_at(&s, json!({"x-b-n": -1})).1, "minimum: too small");
    assert_eq!(
        fails_at(&s, json!({"other": 1})),
        ("/other".into(), "false schema: nothing matches")
    );
    // A declared member is checked by its own schema and by the patterns it matches.
    let s = compile(json!({
        "properties": {"x-id": {"type": "integer"}},
        "patternProperties": {"^x-": {"minimum": 10}}
    }));
    assert_eq!(fails_at(&s, json!({"x-id": 5})).1, "minimum: too small");
    assert_eq!(fails_at(&s, json!({"x-id": "5"})).1, "type: wrong type");
}

#[test]
fn hostile_patterns_are_bounded() {
    // A short pattern that compiles to a large machine is ignored, not refused on.
    let s = compile(json!({"pattern": "a{1000}{1000}"}));
    assert!(s.validate(&json!("b")).is_ok());
    // Past the most patterns one schema compiles, the rest are ignored.
    let many: serde_json::Map<String, Value> =
        (0..300).map(|i| (format!("p{i}"), json!({"pattern": "^never$"}))).collect();
    let s = compile(json!({"properties": many}));
    let args: serde_json::Map<String, Value> =
        (0..300).map(|i| (format!("p{i}"), json!("x"))).collect();
    assert!(s.validate(&Value::Object(args)).is_err());
    let one = |i: usize| Value::Object([(format!("p{i}"), json!("x"))].into_iter().collect());
    let checked = (0..300).filter(|&i| s.validate(&one(i)).is_err()).count();
    assert_eq!(checked, 128, "128 patterns are checked, the other 172 ignored");
    // A long text costs steps in proportion to it and to the compiled pattern, whatever the
    // source's length: `.{1,255}x` (22 KiB compiled) on a mebibyte is past the default budget,
    // and stopped before the search runs.
    let s = compile(json!({"pattern": ".{1,255}x"}));
    let v = s.validate(&json!("a".repeat(1 << 20))).unwrap_err();
    assert!(v.budget, "{v}");
    assert!(s.validate(&json!("a".repeat(1000) + "x")).is_ok(), "a short text is searched");
    // A small pattern on the same text fits the default budget.
    assert!(compile(json!({"pattern": "^a+$"})).validate(&json!("a".repeat(1 << 20))).is_ok());
    // A long text costs steps in proportion: the budget stops the search before it runs.
    let limits = SchemaLimits { max_steps: 1_000, ..SchemaLimits::default() };
    let s = Schema::compile_value(&json!({"pattern": "(a|b|c|d|e|f|g|h)+z"}), limits).unwrap();
    let v = s.validate(&json!("a".repeat(1 << 20))).unwrap_err();
    assert!(v.budget, "{v}");
}

#[test]
fn unevaluated_members_and_items_are_checked_where_no_subschema_applies_in_place() {
    let s = compile(json!({
        "properties": {"a": {}},
        "patternProperties": {"^x-": {}},
        "unevaluatedProperties": false
    }));
    assert!(s.validate(&json!({"a": 1, "x-b": 2})).is_ok());
    assert_eq!(
        fails_at(&s, json!({"a": 1, "c": 2})),
        ("/c".into(), "false schema: nothing matches")
    );
    let s = compile(json!({"properties": {"a": {}}, "unevaluatedProperties": {"type": "integer"}}));
    assert!(s.validate(&json!({"a": "s", "b": 1})).is_ok());
    assert_eq!(fails_at(&s, json!({"b": "s"})), ("/b".into(), "type: wrong type"));
    let s = compile(json!({"prefixItems": [{"type": "string"}], "unevaluatedItems": false}));
    assert!(s.validate(&json!(["a"])).is_ok());
    assert_eq!(fails_at(&s, json!(["a", 1])).0, "/1");
    // With `additionalProperties` or `items` present, every member or item is evaluated.
    let s = compile(json!({"additionalProperties": true, "unevaluatedProperties": false}));
    assert!(s.validate(&json!({"c": 1})).is_ok());
    // Inside an `allOf` branch, the branch sees only its own members, as 2020-12 says.
    let s = compile(json!({
        "allOf": [{"properties": {"a": {}}, "unevaluatedProperties": false}],
        "properties": {"b": {}}
    }));
    assert_eq!(fails_at(&s, json!({"a": 1, "b": 2})).0, "/b");
    // Beside an in-place subschema they are not checked: what `allOf` evaluated is not tracked.
    let s = compile(json!({
        "allOf": [{"properties": {"b": {}}}],
        "properties": {"a": {}},
        "unevaluatedProperties": false
    }));
    assert!(s.validate(&json!({"a": 1, "b": 2})).is_ok());
    assert!(s.validate(&json!({"c": 1})).is_ok(), "not checked here, never refused on");
}

#[test]
fn if_chooses_then_or_else_and_is_no_failure_itself() {
    let s = compile(json!({
        "if": {"properties": {"unit": {"const": "c"}}, "required": ["unit"]},
        "then": {"properties": {"t": {"maximum": 60}}},
        "else": {"properties": {"t": {"maximum": 140}}}
    }));
    assert!(s.validate(&json!({"unit": "c", "t": 40})).is_ok());
    assert_eq!(fails_at(&s, json!({"unit": "c", "t": 100})), ("/t".into(), "maximum: too large"));
    assert!(s.validate(&json!({"unit": "f", "t": 100})).is_ok(), "else");
    assert!(s.validate(&json!({"t": 100})).is_ok(), "no unit: `if` fails, else applies");
    assert_eq!(fails_at(&s, json!({"t": 200})).1, "maximum: too large");
    // Without `if`, `then` and `else` mean nothing; an `if` alone never refuses.
    assert!(compile(json!({"then": false, "else": false})).validate(&json!(1)).is_ok());
    assert!(compile(json!({"if": false})).validate(&json!(1)).is_ok());
    let only_then = compile(json!({"if": {"type": "string"}, "then": {"minLength": 2}}));
    assert!(only_then.validate(&json!(5)).is_ok(), "no else: a mismatch of `if` passes");
    assert_eq!(fails_at(&only_then, json!("a")).1, "minLength: too short");
}

#[test]
fn contains_counts_matching_items_between_min_and_max() {
    let s = compile(json!({"contains": {"type": "integer"}}));
    assert!(s.validate(&json!(["a", 2])).is_ok());
    assert_eq!(fails_at(&s, json!(["a", "b"])), ("".into(), "contains: too few items match"));
    assert_eq!(fails_at(&s, json!([])).1, "contains: too few items match");
    assert!(s.validate(&json!({"not": "an array"})).is_ok(), "only arrays");
    let s = compile(json!({"contains": {"const": 1}, "minContains": 2, "maxContains": 3}));
    assert_eq!(fails_at(&s, json!([1, 0])).1, "contains: too few items match");
    assert!(s.validate(&json!([1, 0, 1])).is_ok());
    assert!(s.validate(&json!([1, 1, 1])).is_ok());
    assert_eq!(fails_at(&s, json!([1, 1, 1, 1])).1, "maxContains: too many items match contains");
    // `minContains: 0` takes an array with no match, and `min`/`maxContains` without
    // `contains` mean nothing.
    assert!(compile(json!({"contains": false, "minContains": 0})).validate(&json!([])).is_ok());
    assert!(compile(json!({"minContains": 5})).validate(&json!([])).is_ok());
    // Nested: the pointer is the array's.
    let s = compile(json!({"properties": {"tags": {"contains": {"const": "x"}}}}));
    assert_eq!(fails_at(&s, json!({"tags": ["y"]})).0, "/tags");
}

#[test]
fn property_names_check_each_name_as_a_string() {
    let s = compile(json!({
        "properties": {"env": {"propertyNames": {"maxLength": 3, "not": {"const": "bad"}}}}
    }));
    assert!(s.validate(&json!({"env": {"a": 1, "abc": 2}})).is_ok());
    let long = fails_at(&s, json!({"env": {"abcd": 1}}));
    assert_eq!(long, ("/env".into(), "propertyNames: a member name does not match"));
    assert_eq!(fails_at(&s, json!({"env": {"bad": 1}})).0, "/env");
    assert!(compile(json!({"propertyNames": false})).validate(&json!({})).is_ok(), "no names");
    assert!(compile(json!({"propertyNames": {"type": "integer"}})).validate(&json!([1])).is_ok());
}

#[test]
fn dependencies_require_members_or_a_schema_when_a_member_is_present() {
    let s = compile(json!({
        "dependentRequired": {"card": ["expiry", "cvc"]},
        "dependentSchemas": {"refund": {"required": ["reason"]}}
    }));
    assert!(s.validate(&json!({"cash": 1})).is_ok());
    assert!(s.validate(&json!({"card": 1, "expiry": 2, "cvc": 3})).is_ok());
    assert_eq!(
        fails_at(&s, json!({"card": 1, "expiry": 2})),
        ("/cvc".into(), "dependentRequired: missing")
    );
    assert_eq!(fails_at(&s, json!({"refund": true})), ("/reason".into(), "required: missing"));
    assert!(s.validate(&json!(["card"])).is_ok(), "only objects");
    // Draft-07 `dependencies` holds either form.
    let s = compile(
        json!({"dependencies": {"a": ["b"], "c": {"properties": {"d": {"type": "string"}}}}}),
    );
    assert_eq!(fails_at(&s, json!({"a": 1})).0, "/b");
    assert_eq!(fails_at(&s, json!({"c": 1, "d": 2})), ("/d".into(), "type: wrong type"));
    assert!(s.validate(&json!({"a": 1, "b": 2, "c": 1, "d": "x"})).is_ok());
    // A list that is not of names is a malformed schema, not one that is quietly ignored.
    let bad =
        Schema::compile_value(&json!({"dependentRequired": {"a": [1]}}), SchemaLimits::default());
    assert!(matches!(bad, Err(SchemaError::Malformed { at, .. }) if at == "/dependentRequired/a"));
    let bad =
        Schema::compile_value(&json!({"dependentRequired": {"a": {}}}), SchemaLimits::default());
    assert!(matches!(bad, Err(SchemaError::Malformed { .. })));
}

#[test]
fn the_new_keywords_share_the_step_budget() {
    // 2,000 items each checked against `contains` (which never matches) under a small budget.
    let limits = SchemaLimits { max_steps: 500, ..SchemaLimits::default() };
    let s = Schema::compile_value(&json!({"contains": {"const": -1}}), limits).unwrap();
    let v = s.validate(&Value::Array(vec![json!(0); 2_000])).unwrap_err();
    assert!(v.budget, "{v}");
    // Member names, each checked by a run of its own, count against the same budget.
    let s = Schema::compile_value(&json!({"propertyNames": {"minLength": 1}}), limits).unwrap();
    let members: serde_json::Map<String, Value> =
        (0..2_000).map(|i| (format!("k{i}"), json!(0))).collect();
    let v = s.validate(&Value::Object(members)).unwrap_err();
    assert!(v.budget, "{v}");
}

/// A `dependentRequired` or `dependentSchemas` entry is a look-up whether or not its member
/// is there: a node with thousands of them, reached again and again through `allOf`s,
/// cost a look-up per entry per visit and one step per visit, so a schema within every
/// bound took about 10^9 look-ups for one call's arguments.
#[test]
fn dependent_keywords_pay_for_each_entry() {
    let limits = SchemaLimits { max_steps: 1_000, ..SchemaLimits::default() };
    for keyword in ["dependentRequired", "dependentSchemas"] {
        let entries: serde_json::Map<String, Value> = (0..5_000)
            .map(|i| {
                let dep = if keyword == "dependentRequired" { json!([]) } else { json!({}) };
                (format!("k{i}"), dep)
            })
            .collect();
        let s = Schema::compile_value(&json!({ keyword: entries }), limits).unwrap();
        let v = s.validate(&json!({"a": 1})).unwrap_err();
        assert!(v.budget, "{keyword}: {v}");
    }
}

/// `propertyNames` checks each member name as a string of its own, copied: the copy is paid
/// for by its length, so long names checked again and again (in every branch of an `anyOf`)
/// end at the step budget instead of costing what no step counted.
#[test]
fn property_names_pay_for_the_names_they_copy() {
    let limits = SchemaLimits { max_steps: 1_000, ..SchemaLimits::default() };
    let s = Schema::compile_value(&json!({"propertyNames": {"type": "string"}}), limits).unwrap();
    let mut members = serde_json::Map::new();
    members.insert("n".repeat(64 * 1_000), json!(0));
    let v = s.validate(&Value::Object(members)).unwrap_err();
    assert!(v.budget, "{v}");
    let mut members = serde_json::Map::new();
    members.insert("n".repeat(64 * 10), json!(0));
    assert!(s.validate(&Value::Object(members)).is_ok(), "a short name is cheap");
}

/// Every location of a schema is built once, however many `$ref`s name it or a location
/// inside it: a chain of references into one nested definition built the definition's tail
/// again for each (about 1,900 nodes here, and its `enum` copied 61 times; a thousand times
/// the memory of the text for a large `enum`).
#[test]
fn each_location_is_built_once_however_often_it_is_referred_to() {
    let mut chain = json!({"enum": [0, 1, 2]});
    for _ in 0..60 {
        chain = json!({"not": chain});
    }
    let refs: Vec<Value> =
        (0..=60).map(|n| json!({"$ref": format!("#/$defs/c{}", "/not".repeat(n))})).collect();
    let s = compile(json!({"$defs": {"c": chain}, "anyOf": refs}));
    assert!(s.node_count() < 130, "{} nodes", s.node_count());
    // Still the same schema: the innermost `enum` is reached through 60 `not`s, an even count.
    assert!(s.validate(&json!(1)).is_ok());
    assert!(s.validate(&json!(7)).is_ok(), "the branch one `not` in (59 left: odd) lets 7 pass");
    let only_inner = compile(json!({"$defs": {"c": {"not": {"enum": [1]}}},
        "$ref": "#/$defs/c/not"}));
    assert!(only_inner.validate(&json!(1)).is_ok() && only_inner.validate(&json!(2)).is_err());
}

/// `uniqueItems` is linear in the array: 2,000 distinct items pass within the default budget
/// (every pair was compared, and about 450 took the whole budget: a valid array refused),
/// and what `json_eq` finds equal still repeats: 1 and 1.0, objects whatever their order,
/// -0.0 and 0; integers beyond 2^53 are told apart exactly.
#[test]
fn unique_items_is_linear_and_keeps_json_equality() {
    let unique = compile(json!({"uniqueItems": true}));
    let names: Vec<String> = (0..2_000).map(|i| format!("id-{i}")).collect();
    assert!(unique.validate(&json!(names)).is_ok());
    let numbers: Vec<u32> = (0..20_000).collect();
    assert!(unique.validate(&json!(numbers)).is_ok());
    for repeated in [
        json!([1, 1.0]),
        json!([{"a": 1, "b": [2, "x"]}, {"b": [2, "x"], "a": 1.0}]),
        json!([-0.0, 0]),
        json!(["x", "y", "x"]),
        json!([null, false, null]),
    ] {
        let v = unique.validate(&repeated).unwrap_err();
        assert!(!v.budget && v.reason.starts_with("uniqueItems"), "{repeated}: {v}");
    }
    for distinct in [
        json!([9_007_199_254_740_993u64, 9_007_199_254_740_992u64]),
        json!([[1, 2], [2, 1]]),
        json!([{"a": 1}, {"a": 1, "b": 1}]),
        json!([true, 1, "1", [1], {"1": 1}]),
    ] {
        assert!(unique.validate(&distinct).is_ok(), "{distinct}");
    }
}

/// A `$ref` to the name of a `$dynamicAnchor` resolves as one to an `$anchor` (JSON Schema
/// 2020-12: the test suite's "a $ref to a $dynamicAnchor in the same schema resource behaves
/// like a normal $ref to an $anchor"); it was an unresolved reference, and every checked call
/// of such a tool failed.
#[test]
fn a_ref_to_a_dynamic_anchor_resolves_as_to_an_anchor() {
    let s = compile(json!({"type": "array", "items": {"$ref": "#items"},
        "$defs": {"foo": {"$dynamicAnchor": "items", "type": "string"}}}));
    assert!(s.validate(&json!(["a", "b"])).is_ok());
    assert!(s.validate(&json!(["a", 1])).is_err());
}

/// Integer bounds hold exactly for integers: past 2^53 two integers may round to one `f64`,
/// and `maximum: 2^63 - 1` let 2^63 through, `exclusiveMaximum` refused 2^63 - 2.
#[test]
fn integer_bounds_are_exact_for_integers() {
    let max = i64::MAX;
    let at_most = compile(json!({"maximum": max}));
    assert!(at_most.validate(&json!(max)).is_ok());
    assert!(at_most.validate(&json!(1u64 << 63)).is_err(), "2^63 is over 2^63 - 1");
    let below = compile(json!({"exclusiveMaximum": max}));
    assert!(below.validate(&json!(max - 1)).is_ok(), "2^63 - 2 is below");
    assert!(below.validate(&json!(max)).is_err());
    let above = compile(json!({"exclusiveMinimum": i64::MIN + 1, "minimum": i64::MIN + 1}));
    assert!(above.validate(&json!(i64::MIN + 2)).is_ok());
    assert!(above.validate(&json!(i64::MIN + 1)).is_err());
    // Fractions and mixed pairs as before.
    let unit = compile(json!({"minimum": 0.5, "exclusiveMaximum": 2}));
    assert!(unit.validate(&json!(1)).is_ok() && unit.validate(&json!(1.5)).is_ok());
    assert!(unit.validate(&json!(0.25)).is_err() && unit.validate(&json!(2.0)).is_err());
}

#[test]
fn hostile_schemas_are_bounded() {
    let limits = SchemaLimits::default();
    // Too large as text.
    let big = format!("{{\"enum\":[{}0]}}", "0,".repeat(200_000));
    assert_eq!(Schema::compile(&big, limits).unwrap_err(), SchemaError::TooLarge);
    // Too deep: 100 nested `not`s.
    let mut deep = json!(true);
    for _ in 0..100 {
        deep = json!({"not": deep});
    }
    assert_eq!(Schema::compile_value(&deep, limits).unwrap_err(), SchemaError::TooDeep);
    // A level is a level whatever the keyword: 60 levels of `properties` (or `allOf`, or
    // `dependentSchemas`) are within the default 64, as 60 of `not` are; a member's schema
    // counted two levels, and 33 of them were refused.
    for wrap in [
        |s: Value| json!({"type": "object", "properties": {"a": s}}),
        |s: Value| json!({"allOf": [s]}),
        |s: Value| json!({"dependentSchemas": {"a": s}}),
        |s: Value| json!({"not": s}),
    ] {
        let mut nested = json!({"type": "string"});
        for _ in 0..60 {
            nested = wrap(nested);
        }
        assert!(Schema::compile_value(&nested, limits).is_ok(), "{nested}");
        for _ in 0..10 {
            nested = wrap(nested);
        }
        let deeper = Schema::compile_value(&nested, limits);
        assert_eq!(deeper.unwrap_err(), SchemaError::TooDeep);
    }
    // Too many nodes.
    let wide: serde_json::Map<String, Value> =
        (0..20_000).map(|i| (format!("p{i}"), json!({}))).collect();
    let wide = json!({"properties": wide});
    assert_eq!(Schema::compile_value(&wide, limits).unwrap_err(), SchemaError::TooManyNodes);
    // A `$ref` cycle that never descends into the instance stops at the depth bound.
    let cycle = compile(json!({"$defs": {"a": {"$ref": "#/$defs/b"}, "b": {"$ref": "#/$defs/a"}},
                                "$ref": "#/$defs/a"}));
    let v = cycle.validate(&json!(1)).unwrap_err();
    assert!(v.budget, "{v}");
    // Exponential work from a small schema: each level checks the one below twice (shared
    // through `$ref`, so the schema stays 40 nodes); the step budget stops it.
    let mut defs = serde_json::Map::new();
    defs.insert("l0".into(), json!({"type": "string"}));
    for i in 0..40 {
        let below = json!({"$ref": format!("#/$defs/l{i}")});
        defs.insert(format!("l{}", i + 1), json!({"anyOf": [{"allOf": [below, false]}, below]}));
    }
    let blowup = compile(json!({"$defs": defs, "$ref": "#/$defs/l40"}));
    let v = blowup.validate(&json!(1)).unwrap_err();
    assert!(v.budget, "{v}");
    assert_eq!(v.reason, "validation took more steps than allowed");
    // uniqueItems compares the items whose hashes meet, each comparison charged: integers
    // past 2^53 that share an `f64` value share a bucket (256 of them per value here).
    let unique = compile(json!({"uniqueItems": true}));
    let colliding: Vec<u64> = (0..10_000).map(|i| (1u64 << 60) + i).collect();
    assert!(unique.validate(&json!(colliding)).unwrap_err().budget);
}

#[test]
fn validate_str_reports_bad_json() {
    let s = compile(json!({"type": "object"}));
    assert!(s.validate_str("{\"a\":1}").is_ok());
    assert_eq!(s.validate_str("{").unwrap_err().reason, "not valid JSON");
}

#[test]
fn the_fuzz_seeds_hold_the_fuzz_invariants() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/corpus/schema_validate");
    let mut seen = 0;
    for entry in std::fs::read_dir(dir).expect("corpus") {
        crate::internal::fuzzing::schema_validate(&std::fs::read(entry.unwrap().path()).unwrap());
        seen += 1;
    }
    assert!(seen >= 4);
}

/// `multipleOf` is exact for integers and within a few ulps for other numbers, however large
/// the quotient: the tolerance once grew with it until every value passed.
#[test]
fn multiple_of_holds_for_large_quotients() {
    let two = compile(json!({"multipleOf": 2}));
    assert_eq!(fails_at(&two, json!(1_000_000_001u64)).1, "multipleOf: not a multiple");
    assert!(two.validate(&json!(1_000_000_002u64)).is_ok());
    let thousand = compile(json!({"type": "integer", "multipleOf": 1000}));
    assert_eq!(fails_at(&thousand, json!(1_700_000_000_123u64)).1, "multipleOf: not a multiple");
    assert!(thousand.validate(&json!(1_700_000_000_000u64)).is_ok());
    let cents = compile(json!({"multipleOf": 0.01}));
    assert_eq!(fails_at(&cents, json!(1_234_567.891)).1, "multipleOf: not a multiple");
    assert!(cents.validate(&json!(19.99)).is_ok());
    assert!(compile(json!({"multipleOf": 0.1})).validate(&json!(0.3)).is_ok());
}

/// The count keywords written with a decimal point (`"maxLength": 2.0`, as servers that keep
/// limits as doubles write them) are the same counts (JSON-Schema-Test-Suite: "minLength
/// validation with a decimal"), not ignored.
#[test]
fn count_keywords_written_with_a_decimal_point_count() {
    assert_eq!(
        fails_at(&compile(json!({"maxLength": 2.0})), json!("foo")).1,
        "maxLength: too long"
    );
    assert_eq!(fails_at(&compile(json!({"minLength": 2.0})), json!("f")).1, "minLength: too short");
    assert!(fails_at(&compile(json!({"maxItems": 1.0})), json!([1, 2])).1.starts_with("maxItems"));
    let none_needed = compile(json!({"contains": {"const": 1}, "minContains": 0.0}));
    assert!(none_needed.validate(&json!([])).is_ok());
}

/// `uniqueItems` pays for each comparison what it walks: items that are large and alike cost
/// steps in proportion, so a hostile schema and result cannot make one check take seconds
/// within the budget (it once paid one step a pair, whatever the items' size).
#[test]
fn unique_items_pays_for_what_it_compares() {
    let limits = SchemaLimits { max_steps: 1_000, ..SchemaLimits::default() };
    let s = Schema::compile_value(&json!({"uniqueItems": true}), limits).unwrap();
    // 40 arrays of 100 numbers, alike but for the last: 780 pairs of about 100 compares each.
    let items: Vec<Value> = (0..40)
        .map(|i| Value::Array((0..100).map(|j| json!(if j == 99 { i } else { 7 })).collect()))
        .collect();
    let v = s.validate(&Value::Array(items)).unwrap_err();
    assert!(v.budget, "{v}");
    // Small items stay well within it, and a repeat is still found.
    assert!(s.validate(&json!([1, 2, 3, [4], {"a": 5}])).is_ok());
    assert_eq!(fails_at(&s, json!([1, [2], {"a": 1.0}, {"a": 1}])).1, "uniqueItems: items repeat");
}

/// A member is looked up among many declared properties by name, not by a walk: the right
/// subschema applies to each, in any order of declaration.
#[test]
fn members_find_their_declared_property_among_many() {
    let properties: serde_json::Map<String, Value> =
        (0..2000).map(|i| (format!("p{i:04}"), json!({"type": "integer", "maximum": i}))).collect();
    let s = compile(json!({"properties": properties}));
    assert!(s.validate(&json!({"p0000": 0, "p1999": 1999, "other": "x"})).is_ok());
    assert_eq!(fails_at(&s, json!({"p1000": 1001})), ("/p1000".into(), "maximum: too large"));
}
