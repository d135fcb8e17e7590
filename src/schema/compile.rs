//! Schema JSON to a flat node table: keywords read once, local `$ref`s resolved to node
//! indices (so recursive schemas are cycles in the table, not infinite trees).

use std::collections::HashMap;

use serde_json::{Number, Value};

use super::{SchemaError, SchemaLimits};

/// Index of a node in [`Schema::nodes`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct NodeId(pub(super) u32);

/// One compiled (sub)schema.
#[derive(Debug, Clone)]
pub(super) enum Node {
    /// `true` accepts everything, `false` nothing.
    Bool(bool),
    Keywords(Box<Keywords>),
}

/// The `type` keyword as a bit set (0: any type).
pub(super) mod types {
    pub(in crate::schema) const NULL: u8 = 1;
    pub(in crate::schema) const BOOLEAN: u8 = 2;
    pub(in crate::schema) const OBJECT: u8 = 4;
    pub(in crate::schema) const ARRAY: u8 = 8;
    pub(in crate::schema) const NUMBER: u8 = 16;
    pub(in crate::schema) const STRING: u8 = 32;
    pub(in crate::schema) const INTEGER: u8 = 64;
}

/// The keywords of one schema object that the validator checks.
#[derive(Debug, Clone, Default)]
pub(super) struct Keywords {
    pub(super) types: u8,
    pub(super) enumeration: Option<Vec<Value>>,
    pub(super) constant: Option<Value>,
    /// The bounds as written: an integer bound is compared exactly with an integer.
    pub(super) minimum: Option<Number>,
    pub(super) maximum: Option<Number>,
    pub(super) exclusive_minimum: Option<Number>,
    pub(super) exclusive_maximum: Option<Number>,
    pub(super) multiple_of: Option<f64>,
    pub(super) min_length: Option<u64>,
    pub(super) max_length: Option<u64>,
    pub(super) min_items: Option<u64>,
    pub(super) max_items: Option<u64>,
    pub(super) unique_items: bool,
    pub(super) min_properties: Option<u64>,
    pub(super) max_properties: Option<u64>,
    pub(super) properties: Vec<(String, NodeId)>,
    /// `patternProperties` whose pattern compiled.
    pub(super) pattern_properties: Vec<(Pattern, NodeId)>,
    pub(super) required: Vec<String>,
    /// `None` when absent, or when a `patternProperties` pattern that did not compile makes
    /// it undecidable which members are additional.
    pub(super) additional: Option<NodeId>,
    /// `pattern`, when it compiled.
    pub(super) pattern: Option<Pattern>,
    pub(super) prefix_items: Vec<NodeId>,
    /// Applies to the elements after `prefix_items`.
    pub(super) items: Option<NodeId>,
    pub(super) all_of: Vec<NodeId>,
    pub(super) any_of: Vec<NodeId>,
    pub(super) one_of: Vec<NodeId>,
    pub(super) not: Option<NodeId>,
    pub(super) reference: Option<NodeId>,
    /// `if`, with `then` and `else` (either may be absent; without `if` both are ignored).
    pub(super) condition: Option<Condition>,
    /// `contains`, and how many elements must match it (`minContains`, 1 by default, and
    /// `maxContains`).
    pub(super) contains: Option<Contains>,
    /// `propertyNames`: every member name, as a string, must match it.
    pub(super) property_names: Option<NodeId>,
    /// `dependentRequired` (and draft-07 `dependencies` with a list): when the member is
    /// present, these must be too.
    pub(super) dependent_required: Vec<(String, Vec<String>)>,
    /// `dependentSchemas` (and draft-07 `dependencies` with a schema): when the member is
    /// present, the whole object must match.
    pub(super) dependent_schemas: Vec<(String, NodeId)>,
}

/// A `pattern` (or a `patternProperties` name), searched for anywhere in a string as
/// ECMA-262 does. regex-lite's syntax is close to ECMA-262's: a pattern that is not valid in
/// it (lookaround, backreferences, `\p{..}`) or past the bounds below is ignored, never
/// refused on (the module documentation lists where the two read a pattern differently).
#[derive(Debug, Clone)]
pub(super) struct Pattern {
    regex: regex_lite::Regex,
    /// A bound on its compiled size: the smallest of [`SIZE_STEPS`] it compiled within.
    size: usize,
}

impl Pattern {
    /// Whether the pattern occurs in `text`.
    pub(super) fn is_match(&self, text: &str) -> bool {
        self.regex.is_match(text)
    }

    /// The validation steps a search of `text` costs, charged before it runs: regex-lite
    /// searches in time proportional to the text times the compiled machine (a short source
    /// such as `.{1,255}x` can make a large one), so a 1 KiB machine costs a step per 16 bytes
    /// of text and a 32 KiB one two steps per byte.
    pub(super) fn steps(&self, text: &str) -> u64 {
        let per_16_bytes = (self.size / 1024) as u64;
        1 + (text.len() as u64).saturating_mul(per_16_bytes) / 16
    }
}

/// The size limits a pattern is compiled under, smallest first; the one it fits bounds its
/// size (see [`Pattern::steps`]).
const SIZE_STEPS: [usize; 3] = [1024, 4 * 1024, PATTERN_BYTES];

/// The most patterns one schema compiles (the rest are ignored), and each one's compiled
/// size: a schema's text is bounded, but a short pattern can compile to a large machine
/// (`a{1000}{1000}`), so memory is bounded here, at 4 MiB per schema at worst (about what its
/// 10,000 nodes may take). 32 KiB admits `^.{1,255}$` (22 KiB: `.` is every Unicode scalar
/// value); an e-mail, date-time or UUID pattern takes under 2 KiB.
const MAX_PATTERNS: usize = 128;
const PATTERN_BYTES: usize = 32 * 1024;

/// `if` / `then` / `else`.
#[derive(Debug, Clone, Copy)]
pub(super) struct Condition {
    pub(super) test: NodeId,
    pub(super) then: Option<NodeId>,
    pub(super) otherwise: Option<NodeId>,
}

/// `contains` with `minContains` and `maxContains`.
#[derive(Debug, Clone, Copy)]
pub(super) struct Contains {
    pub(super) schema: NodeId,
    pub(super) min: u64,
    pub(super) max: Option<u64>,
}

/// A compiled schema; node 0 is the root.
#[derive(Debug, Clone)]
pub(crate) struct Schema {
    pub(super) nodes: Vec<Node>,
    pub(super) limits: SchemaLimits,
}

struct Compiler<'a> {
    root: &'a Value,
    nodes: Vec<Node>,
    limits: SchemaLimits,
    /// The node of each subschema built or reserved, by the address of its value in `root`
    /// (one location, one address): every `$ref` to a location and the location itself share
    /// one node, and cycles close. Built once per location, a schema's nodes (and the `enum`
    /// and `const` values they copy) grow with its text, not with how often its parts are
    /// referred to: a chain of `$ref`s into one nested definition built that definition's
    /// tail again for each, a thousand times the memory of its text.
    refs: HashMap<usize, NodeId>,
    /// Referenced pointers whose node is reserved but not built yet.
    pending: Vec<(String, NodeId)>,
    /// Patterns compiled so far (see [`MAX_PATTERNS`]).
    patterns: usize,
    /// Each `$anchor` name's JSON pointer, for `#name` references.
    anchors: HashMap<String, String>,
}

impl Schema {
    pub(super) fn compile(root: &Value, limits: SchemaLimits) -> Result<Self, SchemaError> {
        let mut c = Compiler {
            root,
            nodes: Vec::new(),
            limits,
            refs: HashMap::new(),
            pending: Vec::new(),
            patterns: 0,
            anchors: HashMap::new(),
        };
        // A remote `$ref` anywhere is refused up front, even under a keyword that is ignored
        // or a definition nothing refers to: such a schema expects fetching we never do. The
        // same walk finds the `$anchor`s.
        let max_depth = limits.max_depth.saturating_mul(2);
        scan_refs(root, &mut String::new(), &mut c.anchors, 0, max_depth)?;
        c.subschema(root, &mut String::new(), 0)?;
        // Referenced targets are built one after another, not nested in the referrer, so the
        // stack depth stays bounded by `max_depth` however long a chain of `$ref`s is.
        while let Some((pointer, id)) = c.pending.pop() {
            let target = c
                .root
                .pointer(&pointer)
                .ok_or_else(|| SchemaError::UnresolvedRef(format!("#{pointer}")))?;
            let mut at = pointer.clone();
            let node = c.build(target, &mut at, 0)?;
            c.nodes[id.0 as usize] = node;
        }
        Ok(Schema { nodes: c.nodes, limits })
    }
}

impl Compiler<'_> {
    fn reserve(&mut self) -> Result<NodeId, SchemaError> {
        if self.nodes.len() >= self.limits.max_nodes {
            return Err(SchemaError::TooManyNodes);
        }
        self.nodes.push(Node::Bool(true));
        Ok(NodeId(self.nodes.len() as u32 - 1))
    }

    /// Compiles the subschema at `at` (a JSON pointer into the schema, for errors).
    fn subschema(
        &mut self,
        value: &Value,
        at: &mut String,
        depth: usize,
    ) -> Result<NodeId, SchemaError> {
        if let Some(&id) = self.refs.get(&address(value)) {
            return Ok(id);
        }
        let id = self.reserve()?;
        self.refs.insert(address(value), id);
        let node = self.build(value, at, depth)?;
        self.nodes[id.0 as usize] = node;
        Ok(id)
    }

    /// `subschema` under one more pointer segment.
    fn child(
        &mut self,
        value: &Value,
        at: &mut String,
        segment: &str,
        depth: usize,
    ) -> Result<NodeId, SchemaError> {
        let len = at.len();
        push_segment(at, segment);
        let id = self.subschema(value, at, depth + 1);
        at.truncate(len);
        id
    }

    fn children(
        &mut self,
        value: Option<&Value>,
        at: &mut String,
        keyword: &str,
        depth: usize,
    ) -> Result<Vec<NodeId>, SchemaError> {
        let Some(value) = value else { return Ok(Vec::new()) };
        let Some(list) = value.as_array() else {
            return Err(malformed(at, keyword, "must be an array of schemas"));
        };
        under(at, keyword, |at| {
            let child = |(i, s): (usize, &Value)| self.child(s, at, &i.to_string(), depth);
            list.iter().enumerate().map(child).collect()
        })
    }

    /// The subschemas of a keyword whose value is an object of them, by member name
    /// (`properties`, `patternProperties`).
    fn named_children(
        &mut self,
        value: Option<&Value>,
        at: &mut String,
        keyword: &str,
        depth: usize,
    ) -> Result<Vec<(String, NodeId)>, SchemaError> {
        let Some(value) = value else { return Ok(Vec::new()) };
        let Some(members) = value.as_object() else {
            return Err(malformed(at, keyword, "must be an object"));
        };
        under(at, keyword, |at| {
            let child =
                |(name, s): (&String, &Value)| Ok((name.clone(), self.child(s, at, name, depth)?));
            members.iter().map(child).collect()
        })
    }

    fn build(&mut self, value: &Value, at: &mut String, depth: usize) -> Result<Node, SchemaError> {
        if depth > self.limits.max_depth {
            return Err(SchemaError::TooDeep);
        }
        let map = match value {
            Value::Bool(b) => return Ok(Node::Bool(*b)),
            Value::Object(map) => map,
            _ => {
                let at = at.clone();
                return Err(SchemaError::Malformed { at, reason: "a schema must be an object" });
            }
        };
        let mut k = Keywords { types: type_bits(map.get("type"), at)?, ..Keywords::default() };
        k.enumeration = map.get("enum").and_then(Value::as_array).cloned();
        k.constant = map.get("const").cloned();
        let num = |name| map.get(name).and_then(Value::as_f64);
        // A count may be written with a decimal point (2.0): JSON Schema counts it the same.
        let count = |name| map.get(name).and_then(count_of);
        let bound = |name| map.get(name).and_then(Value::as_number).cloned();
        k.minimum = bound("minimum");
        k.maximum = bound("maximum");
        // The draft-04 boolean form is not a number: ignored.
        k.exclusive_minimum = bound("exclusiveMinimum");
        k.exclusive_maximum = bound("exclusiveMaximum");
        k.multiple_of = num("multipleOf").filter(|m| *m > 0.0);
        k.min_length = count("minLength");
        k.max_length = count("maxLength");
        k.min_items = count("minItems");
        k.max_items = count("maxItems");
        k.min_properties = count("minProperties");
        k.max_properties = count("maxProperties");
        k.unique_items = map.get("uniqueItems").and_then(Value::as_bool).unwrap_or(false);
        k.required = map
            .get("required")
            .and_then(Value::as_array)
            .map(|r| r.iter().filter_map(Value::as_str).map(str::to_owned).collect())
            .unwrap_or_default();
        k.properties = self.named_children(map.get("properties"), at, "properties", depth)?;
        // Looked up by name for each member an instance has (`validate`).
        k.properties.sort_by(|a, b| a.0.cmp(&b.0));
        let mut all_patterns = true;
        let patterns =
            self.named_children(map.get("patternProperties"), at, "patternProperties", depth)?;
        for (source, id) in patterns {
            match self.pattern(&source) {
                Some(pattern) => k.pattern_properties.push((pattern, id)),
                None => all_patterns = false,
            }
        }
        if let Some(a) = map.get("additionalProperties") {
            let id = self.child(a, at, "additionalProperties", depth)?;
            // Which members are "additional" depends on every pattern.
            if all_patterns {
                k.additional = Some(id);
            }
        }
        k.pattern = map.get("pattern").and_then(Value::as_str).and_then(|p| self.pattern(p));
        k.prefix_items = self.children(map.get("prefixItems"), at, "prefixItems", depth)?;
        match map.get("items") {
            // Draft-07's array form is 2020-12's `prefixItems`; `additionalItems` the rest.
            Some(Value::Array(_)) if k.prefix_items.is_empty() => {
                k.prefix_items = self.children(map.get("items"), at, "items", depth)?;
                if let Some(rest) = map.get("additionalItems") {
                    k.items = Some(self.child(rest, at, "additionalItems", depth)?);
                }
            }
            Some(Value::Array(_)) => {}
            Some(items) => k.items = Some(self.child(items, at, "items", depth)?),
            None => {}
        }
        k.all_of = self.children(map.get("allOf"), at, "allOf", depth)?;
        k.any_of = self.children(map.get("anyOf"), at, "anyOf", depth)?;
        k.one_of = self.children(map.get("oneOf"), at, "oneOf", depth)?;
        if let Some(n) = map.get("not") {
            k.not = Some(self.child(n, at, "not", depth)?);
        }
        if let Some(test) = map.get("if") {
            let test = self.child(test, at, "if", depth)?;
            let then = map.get("then").map(|t| self.child(t, at, "then", depth)).transpose()?;
            let otherwise =
                map.get("else").map(|e| self.child(e, at, "else", depth)).transpose()?;
            k.condition = Some(Condition { test, then, otherwise });
        }
        if let Some(c) = map.get("contains") {
            let schema = self.child(c, at, "contains", depth)?;
            let (min, max) = (count("minContains").unwrap_or(1), count("maxContains"));
            k.contains = Some(Contains { schema, min, max });
        }
        if let Some(names) = map.get("propertyNames") {
            k.property_names = Some(self.child(names, at, "propertyNames", depth)?);
        }
        self.dependencies(map, &mut k, at, depth)?;
        if let Some(r) = map.get("$ref") {
            let Some(r) = r.as_str() else {
                return Err(malformed(at, "$ref", "must be a string"));
            };
            k.reference = Some(self.reference(r)?);
        }
        self.unevaluated(map, &mut k, all_patterns, at, depth)?;
        Ok(Node::Keywords(Box::new(k)))
    }

    /// `unevaluatedProperties` and `unevaluatedItems` where no subschema applies to the
    /// instance in place (`allOf`, `$ref`, `if`, ...): there the members and items they see are
    /// exactly those `additionalProperties` and `items` would, so they take those places (when
    /// free). Beside an in-place subschema, which members it evaluated would have to be
    /// tracked through every applicator: they are ignored there, never refused on.
    fn unevaluated(
        &mut self,
        map: &serde_json::Map<String, Value>,
        k: &mut Keywords,
        all_patterns: bool,
        at: &mut String,
        depth: usize,
    ) -> Result<(), SchemaError> {
        const IN_PLACE: [&str; 9] = [
            "allOf",
            "anyOf",
            "oneOf",
            "if",
            "$ref",
            "$dynamicRef",
            "dependentSchemas",
            "dependencies",
            "contains",
        ];
        let alone = !IN_PLACE.iter().any(|keyword| map.contains_key(*keyword));
        if let Some(u) = map.get("unevaluatedProperties") {
            let id = self.child(u, at, "unevaluatedProperties", depth)?;
            let free = !map.contains_key("additionalProperties");
            if alone && all_patterns && free {
                k.additional = Some(id);
            }
        }
        if let Some(u) = map.get("unevaluatedItems") {
            let id = self.child(u, at, "unevaluatedItems", depth)?;
            if alone && k.items.is_none() {
                k.items = Some(id);
            }
        }
        Ok(())
    }

    /// `source` compiled, unless it is not valid for regex-lite or past the bounds.
    fn pattern(&mut self, source: &str) -> Option<Pattern> {
        if self.patterns >= MAX_PATTERNS {
            return None;
        }
        self.patterns += 1;
        SIZE_STEPS.into_iter().find_map(|size| {
            let built =
                regex_lite::RegexBuilder::new(source).size_limit(size).nest_limit(64).build();
            Some(Pattern { regex: built.ok()?, size })
        })
    }

    /// `dependentRequired`, `dependentSchemas`, and draft-07's `dependencies`, whose members
    /// are either (a list of names, or a schema).
    fn dependencies(
        &mut self,
        map: &serde_json::Map<String, Value>,
        k: &mut Keywords,
        at: &mut String,
        depth: usize,
    ) -> Result<(), SchemaError> {
        let names = |list: &Value| -> Option<Vec<String>> {
            list.as_array()?.iter().map(|n| n.as_str().map(str::to_owned)).collect()
        };
        for keyword in ["dependentRequired", "dependentSchemas", "dependencies"] {
            let Some(deps) = map.get(keyword) else { continue };
            let Some(deps) = deps.as_object() else {
                return Err(malformed(at, keyword, "must be an object"));
            };
            under(at, keyword, |at| {
                for (member, dep) in deps {
                    let list = keyword != "dependentSchemas" && dep.is_array();
                    if list {
                        let Some(required) = names(dep) else {
                            return Err(malformed(at, member, "must be a list of member names"));
                        };
                        k.dependent_required.push((member.clone(), required));
                    } else if keyword == "dependentRequired" {
                        return Err(malformed(at, member, "must be a list of member names"));
                    } else {
                        let id = self.child(dep, at, member, depth)?;
                        k.dependent_schemas.push((member.clone(), id));
                    }
                }
                Ok(())
            })?;
        }
        Ok(())
    }

    fn reference(&mut self, r: &str) -> Result<NodeId, SchemaError> {
        let Some(fragment) = r.strip_prefix('#') else {
            return Err(SchemaError::RemoteRef(r.to_owned()));
        };
        let fragment = crate::proto::percent::decode(fragment)
            .ok_or_else(|| SchemaError::UnresolvedRef(r.into()))?;
        let pointer = if fragment.is_empty() || fragment.starts_with('/') {
            fragment.into_owned()
        } else {
            // `#name`: the schema object whose `$anchor` is that name.
            let anchored = self.anchors.get(fragment.as_ref());
            anchored.cloned().ok_or_else(|| SchemaError::UnresolvedRef(r.to_owned()))?
        };
        let Some(target) = self.root.pointer(&pointer) else {
            return Err(SchemaError::UnresolvedRef(r.to_owned()));
        };
        if let Some(&id) = self.refs.get(&address(target)) {
            return Ok(id);
        }
        let id = self.reserve()?;
        self.refs.insert(address(target), id);
        self.pending.push((pointer, id));
        Ok(id)
    }
}

/// Where a subschema sits in the schema's tree: its identity while the tree is borrowed.
fn address(value: &Value) -> usize {
    std::ptr::from_ref(value) as usize
}

/// Refuses remote `$ref`s anywhere under `value`, which is at pointer `at` (data in `enum`,
/// `const` or `default` too: an object there with a non-local `$ref` string is taken as a
/// reference), and files each `$anchor` name's pointer in `anchors` (the first of a name; one
/// `$id` does not scope them, as nothing is fetched).
fn scan_refs(
    value: &Value,
    at: &mut String,
    anchors: &mut HashMap<String, String>,
    depth: usize,
    max_depth: usize,
) -> Result<(), SchemaError> {
    if depth > max_depth {
        return Err(SchemaError::TooDeep);
    }
    if let Value::Object(map) = value {
        if let Some(r) = map.get("$ref").and_then(Value::as_str) {
            if !r.starts_with('#') {
                return Err(SchemaError::RemoteRef(r.to_owned()));
            }
        }
        if let Some(name) = map.get("$anchor").and_then(Value::as_str) {
            anchors.entry(name.to_owned()).or_insert_with(|| at.clone());
        }
        // A `$dynamicAnchor` is a plain anchor too (2020-12, §8.2.2), for a `#name` that no
        // `$anchor` has (`$anchor` first: it was read first above).
        if let Some(name) = map.get("$dynamicAnchor").and_then(Value::as_str) {
            anchors.entry(name.to_owned()).or_insert_with(|| at.clone());
        }
    }
    let mut scan = |segment: &str, v: &Value| {
        let len = at.len();
        push_segment(at, segment);
        let scanned = scan_refs(v, at, anchors, depth + 1, max_depth);
        at.truncate(len);
        scanned
    };
    match value {
        Value::Object(map) => map.iter().try_for_each(|(k, v)| scan(k, v)),
        Value::Array(list) => {
            list.iter().enumerate().try_for_each(|(i, v)| scan(&i.to_string(), v))
        }
        _ => Ok(()),
    }
}

/// Appends `/segment` to the JSON pointer `at`, escaped (RFC 6901).
pub(super) fn push_segment(at: &mut String, segment: &str) {
    at.push('/');
    for c in segment.chars() {
        match c {
            '~' => at.push_str("~0"),
            '/' => at.push_str("~1"),
            c => at.push(c),
        }
    }
}

/// `f` with `/keyword` pushed onto the pointer `at`, which is as it was again afterwards.
fn under<T>(at: &mut String, keyword: &str, f: impl FnOnce(&mut String) -> T) -> T {
    let len = at.len();
    at.push('/');
    at.push_str(keyword);
    let out = f(at);
    at.truncate(len);
    out
}

fn malformed(at: &str, keyword: &str, reason: &'static str) -> SchemaError {
    SchemaError::Malformed { at: format!("{at}/{keyword}"), reason }
}

fn type_bits(value: Option<&Value>, at: &str) -> Result<u8, SchemaError> {
    let one = |name: &str| match name {
        "null" => Ok(types::NULL),
        "boolean" => Ok(types::BOOLEAN),
        "object" => Ok(types::OBJECT),
        "array" => Ok(types::ARRAY),
        "number" => Ok(types::NUMBER),
        "string" => Ok(types::STRING),
        "integer" => Ok(types::INTEGER),
        _ => Err(malformed(at, "type", "unknown type name")),
    };
    match value {
        None => Ok(0),
        Some(Value::String(s)) => one(s),
        Some(Value::Array(list)) => list.iter().try_fold(0, |bits, t| match t.as_str() {
            Some(s) => Ok(bits | one(s)?),
            None => Err(malformed(at, "type", "must be a name or a list of names")),
        }),
        Some(_) => Err(malformed(at, "type", "must be a name or a list of names")),
    }
}

/// A non-negative integer, however it is written (2 or 2.0); `None` for anything else.
fn count_of(v: &Value) -> Option<u64> {
    v.as_u64().or_else(|| {
        let f = v.as_f64()?;
        // `as` saturates: past 2^64 the keyword could never be reached anyway.
        (f >= 0.0 && f.fract() == 0.0).then_some(f as u64)
    })
}
