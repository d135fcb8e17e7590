//! One instance against a compiled schema, within a step and depth budget.

use std::cmp::Ordering;
use std::collections::hash_map::RandomState;
use std::collections::HashMap;
use std::hash::{BuildHasher, Hasher};

use serde_json::{Number, Value};

use super::compile::{push_segment, types, Contains, Node, NodeId, Schema};
use super::SchemaViolation;

/// One segment of the instance location being checked.
#[derive(Debug, Clone, Copy)]
enum Seg<'v> {
    Key(&'v str),
    Index(usize),
}

struct Run<'v> {
    schema: &'v Schema,
    steps: u64,
    max_depth: usize,
    path: Vec<Seg<'v>>,
    /// How many checks whose mismatch is only a `false` ([`matches`](Run::matches)) enclose
    /// this one: their mismatches name no location, which nobody would read.
    quiet: u32,
}

impl Schema {
    pub(super) fn validate(&self, instance: &Value) -> Result<(), SchemaViolation> {
        let mut run = Run {
            schema: self,
            steps: 0,
            // Instance nesting and `$ref` hops together; a cycle through `$ref` that never
            // descends into the instance stops here instead of overflowing the stack.
            max_depth: self.limits.max_depth.saturating_mul(4),
            path: Vec::new(),
            quiet: 0,
        };
        run.check(NodeId(0), instance, 0)
    }
}

impl<'v> Run<'v> {
    /// A mismatch here. Its location is written only where it may be reported: a hostile
    /// schema makes thousands of mismatches inside `anyOf` and the like, and the pointer to a
    /// long member name, written for each, cost what no step counted.
    fn fail(&self, reason: &'static str) -> SchemaViolation {
        let pointer = if self.quiet > 0 { String::new() } else { self.pointer() };
        SchemaViolation { pointer, reason, budget: false }
    }

    /// The end of the budget, which stops the whole validation: reported, so located.
    fn budget(&self, reason: &'static str) -> SchemaViolation {
        SchemaViolation { pointer: self.pointer(), reason, budget: true }
    }

    fn pointer(&self) -> String {
        let mut pointer = String::new();
        for seg in &self.path {
            match seg {
                Seg::Key(k) => push_segment(&mut pointer, k),
                Seg::Index(i) => push_segment(&mut pointer, &i.to_string()),
            }
        }
        pointer
    }

    /// [`json_eq`] within the budget: the comparison pays for the values it walks.
    fn equal(&mut self, a: &Value, b: &Value) -> Result<bool, SchemaViolation> {
        let max = self.schema.limits.max_steps;
        let mut left = max.saturating_sub(self.steps);
        let same = json_eq(a, b, &mut left);
        self.steps = max - left;
        same.ok_or_else(|| self.budget("validation took more steps than allowed"))
    }

    /// `uniqueItems`: items bucketed by a hash that equal items share, and compared only
    /// within a bucket. Every pair was compared, and about 450 short items took the whole
    /// default budget: a valid array was refused.
    fn unique(&mut self, items: &'v [Value]) -> Result<(), SchemaViolation> {
        let state = RandomState::new();
        // Grown as items are hashed, not sized for the array: the step budget may stop the
        // check long before the end of a server's array of millions.
        let mut buckets: HashMap<u64, Vec<&Value>> = HashMap::new();
        for item in items {
            let max = self.schema.limits.max_steps;
            let mut left = max.saturating_sub(self.steps);
            let hash = json_hash(item, &state, &mut left);
            self.steps = max - left;
            let hash =
                hash.ok_or_else(|| self.budget("validation took more steps than allowed"))?;
            let bucket = buckets.entry(hash).or_default();
            for seen in bucket.iter() {
                if self.equal(seen, item)? {
                    return Err(self.fail("uniqueItems: items repeat"));
                }
            }
            bucket.push(item);
        }
        Ok(())
    }

    fn step(&mut self, n: u64) -> Result<(), SchemaViolation> {
        self.steps += n;
        if self.steps > self.schema.limits.max_steps {
            return Err(self.budget("validation took more steps than allowed"));
        }
        Ok(())
    }

    /// Checks `v` against the subschema under one more path segment.
    fn descend(
        &mut self,
        id: NodeId,
        v: &'v Value,
        seg: Seg<'v>,
        depth: usize,
    ) -> Result<(), SchemaViolation> {
        self.path.push(seg);
        let r = self.check(id, v, depth + 1);
        self.path.pop();
        r
    }

    /// `Ok(true)` when `v` matches; a budget stop is passed up, a mismatch is `Ok(false)`.
    fn matches(&mut self, id: NodeId, v: &'v Value, depth: usize) -> Result<bool, SchemaViolation> {
        self.quiet += 1;
        let outcome = self.check(id, v, depth + 1);
        self.quiet -= 1;
        match outcome {
            Ok(()) => Ok(true),
            Err(e) if e.budget => Err(e),
            Err(_) => Ok(false),
        }
    }

    fn check(&mut self, id: NodeId, v: &'v Value, depth: usize) -> Result<(), SchemaViolation> {
        if depth > self.max_depth {
            return Err(self.budget("validation nested deeper than allowed"));
        }
        self.step(1)?;
        let k = match self.schema.nodes.get(id.0 as usize) {
            Some(Node::Bool(true)) | None => return Ok(()),
            Some(Node::Bool(false)) => return Err(self.fail("false schema: nothing matches")),
            Some(Node::Keywords(k)) => k,
        };
        if let Some(r) = k.reference {
            self.check(r, v, depth + 1)?;
        }
        if k.types != 0 && k.types & type_of(v) == 0 {
            return Err(self.fail("type: wrong type"));
        }
        if let Some(allowed) = &k.enumeration {
            let mut found = false;
            for a in allowed {
                if self.equal(a, v)? {
                    found = true;
                    break;
                }
            }
            if !found {
                return Err(self.fail("enum: not one of the allowed values"));
            }
        }
        if let Some(c) = &k.constant {
            if !self.equal(c, v)? {
                return Err(self.fail("const: not the required value"));
            }
        }
        match v {
            Value::Number(n) => self.number(k, n)?,
            Value::String(s) => {
                if k.min_length.is_some() || k.max_length.is_some() {
                    self.step(1 + s.len() as u64 / 64)?;
                    let len = s.chars().count() as u64;
                    if k.min_length.is_some_and(|m| len < m) {
                        return Err(self.fail("minLength: too short"));
                    }
                    if k.max_length.is_some_and(|m| len > m) {
                        return Err(self.fail("maxLength: too long"));
                    }
                }
                if let Some(pattern) = &k.pattern {
                    self.step(pattern.steps(s))?;
                    if !pattern.is_match(s) {
                        return Err(self.fail("pattern: does not match"));
                    }
                }
            }
            Value::Array(items) => {
                let n = items.len() as u64;
                if k.min_items.is_some_and(|m| n < m) {
                    return Err(self.fail("minItems: too few items"));
                }
                if k.max_items.is_some_and(|m| n > m) {
                    return Err(self.fail("maxItems: too many items"));
                }
                if k.unique_items {
                    self.unique(items)?;
                }
                for (i, item) in items.iter().enumerate() {
                    let sub = k.prefix_items.get(i).copied().or(if i >= k.prefix_items.len() {
                        k.items
                    } else {
                        None
                    });
                    if let Some(sub) = sub {
                        self.descend(sub, item, Seg::Index(i), depth)?;
                    }
                }
                if let Some(c) = k.contains {
                    self.contains(c, items, depth)?;
                }
            }
            Value::Object(members) => {
                let n = members.len() as u64;
                if k.min_properties.is_some_and(|m| n < m) {
                    return Err(self.fail("minProperties: too few members"));
                }
                if k.max_properties.is_some_and(|m| n > m) {
                    return Err(self.fail("maxProperties: too many members"));
                }
                self.step(k.required.len() as u64)?;
                for name in &k.required {
                    if !members.contains_key(name) {
                        // The pointer names the missing member, the way a user reads it.
                        self.path.push(Seg::Key(name));
                        let e = self.fail("required: missing");
                        self.path.pop();
                        return Err(e);
                    }
                }
                for (name, value) in members {
                    self.step(1)?;
                    // Sorted by name when compiled: found without a walk, however many.
                    let declared = k
                        .properties
                        .binary_search_by(|(p, _)| p.as_str().cmp(name))
                        .ok()
                        .map(|i| k.properties[i].1);
                    // Every pattern the name matches applies, beside its declared schema.
                    let mut matched = false;
                    for (pattern, sub) in &k.pattern_properties {
                        self.step(pattern.steps(name))?;
                        if pattern.is_match(name) {
                            matched = true;
                            self.descend(*sub, value, Seg::Key(name), depth)?;
                        }
                    }
                    match (declared, k.additional) {
                        (Some(sub), _) => self.descend(sub, value, Seg::Key(name), depth)?,
                        (None, Some(sub)) if !matched => {
                            self.descend(sub, value, Seg::Key(name), depth)?
                        }
                        _ => {}
                    }
                }
                if let Some(names) = k.property_names {
                    for name in members.keys() {
                        self.property_name(names, name, depth)?;
                    }
                }
                // Each entry is a look-up whether or not its member is there: paid for, or a
                // node with thousands of them, reached again through `allOf`s, costs a
                // look-up per entry per visit for one step.
                self.step((k.dependent_required.len() + k.dependent_schemas.len()) as u64)?;
                for (member, required) in &k.dependent_required {
                    if !members.contains_key(member) {
                        continue;
                    }
                    self.step(required.len() as u64)?;
                    if let Some(missing) = required.iter().find(|r| !members.contains_key(*r)) {
                        // Named like `required`'s: the member that should be there.
                        self.path.push(Seg::Key(missing));
                        let e = self.fail("dependentRequired: missing");
                        self.path.pop();
                        return Err(e);
                    }
                }
                for (member, sub) in &k.dependent_schemas {
                    if members.contains_key(member) {
                        self.check(*sub, v, depth + 1)?;
                    }
                }
            }
            _ => {}
        }
        for sub in &k.all_of {
            self.check(*sub, v, depth + 1)?;
        }
        if !k.any_of.is_empty() {
            let mut any = false;
            for sub in &k.any_of {
                if self.matches(*sub, v, depth)? {
                    any = true;
                    break;
                }
            }
            if !any {
                return Err(self.fail("anyOf: no subschema matches"));
            }
        }
        if !k.one_of.is_empty() {
            let mut count = 0;
            for sub in &k.one_of {
                count += usize::from(self.matches(*sub, v, depth)?);
            }
            match count {
                0 => return Err(self.fail("oneOf: no subschema matches")),
                1 => {}
                _ => return Err(self.fail("oneOf: more than one subschema matches")),
            }
        }
        if let Some(not) = k.not {
            if self.matches(not, v, depth)? {
                return Err(self.fail("not: the subschema matches"));
            }
        }
        if let Some(c) = k.condition {
            // `if` only chooses: its own mismatch is no failure.
            let branch = if self.matches(c.test, v, depth)? { c.then } else { c.otherwise };
            if let Some(branch) = branch {
                self.check(branch, v, depth + 1)?;
            }
        }
        Ok(())
    }

    /// `contains`: between `min` and `max` elements of `items` match. Counting stops once the
    /// answer is known (past `max`, or at `min` without a `max`).
    fn contains(
        &mut self,
        c: Contains,
        items: &'v [Value],
        depth: usize,
    ) -> Result<(), SchemaViolation> {
        let mut found = 0u64;
        for item in items {
            if c.max.is_none() && found >= c.min {
                break;
            }
            found += u64::from(self.matches(c.schema, item, depth)?);
            if c.max.is_some_and(|max| found > max) {
                return Err(self.fail("maxContains: too many items match contains"));
            }
        }
        if found < c.min {
            return Err(self.fail("contains: too few items match"));
        }
        Ok(())
    }

    /// `propertyNames` on one member name. A name is not a location in the instance: a
    /// mismatch names the object.
    fn property_name(
        &mut self,
        names: NodeId,
        name: &str,
        depth: usize,
    ) -> Result<(), SchemaViolation> {
        // The name as a JSON string, checked by a run of its own that shares the budget (its
        // path would borrow the string, which lives only here). The copy is paid for: inside
        // `anyOf` branches a schema can have every name copied again and again.
        self.step(1 + name.len() as u64 / 64)?;
        let name = Value::String(name.to_owned());
        let mut run = Run {
            schema: self.schema,
            steps: self.steps,
            max_depth: self.max_depth.saturating_sub(depth),
            path: Vec::new(),
            quiet: self.quiet,
        };
        let outcome = run.check(names, &name, 0);
        self.steps = run.steps;
        match outcome {
            Ok(()) => Ok(()),
            Err(e) if e.budget => Err(self.budget(e.reason)),
            Err(_) => Err(self.fail("propertyNames: a member name does not match")),
        }
    }

    fn number(&self, k: &super::compile::Keywords, n: &Number) -> Result<(), SchemaViolation> {
        let Some(x) = n.as_f64() else { return Ok(()) };
        let against = |bound: &Option<Number>| bound.as_ref().and_then(|m| compare(n, m));
        if against(&k.minimum) == Some(Ordering::Less) {
            return Err(self.fail("minimum: too small"));
        }
        if against(&k.maximum) == Some(Ordering::Greater) {
            return Err(self.fail("maximum: too large"));
        }
        if matches!(against(&k.exclusive_minimum), Some(Ordering::Less | Ordering::Equal)) {
            return Err(self.fail("exclusiveMinimum: too small"));
        }
        if matches!(against(&k.exclusive_maximum), Some(Ordering::Greater | Ordering::Equal)) {
            return Err(self.fail("exclusiveMaximum: too large"));
        }
        if let Some(m) = k.multiple_of {
            if !is_multiple(n, x, m) {
                return Err(self.fail("multipleOf: not a multiple"));
            }
        }
        Ok(())
    }
}

fn type_of(v: &Value) -> u8 {
    match v {
        Value::Null => types::NULL,
        Value::Bool(_) => types::BOOLEAN,
        Value::Object(_) => types::OBJECT,
        Value::Array(_) => types::ARRAY,
        Value::String(_) => types::STRING,
        // An integer-valued number (1 or 1.0) is an integer, and every integer a number.
        Value::Number(n) if crate::proto::json::is_integer(n) => types::NUMBER | types::INTEGER,
        Value::Number(_) => types::NUMBER,
    }
}

/// Whether `n` (`x` as a float) is a multiple of `m` (positive): exactly for an integer of an
/// integer, else within a few units of the last place of the quotient (0.3 / 0.1 is
/// 2.9999999999999996), a tolerance that stays that small however large the quotient.
fn is_multiple(n: &Number, x: f64, m: f64) -> bool {
    let whole = m.fract() == 0.0 && m <= u64::MAX as f64;
    let int = n.as_u64().map(i128::from).or_else(|| n.as_i64().map(i128::from));
    if let (true, Some(i)) = (whole, int) {
        return i % (m as i128) == 0;
    }
    let q = x / m;
    q.is_finite() && (q - q.round()).abs() <= 4.0 * f64::EPSILON * q.abs().max(1.0)
}

/// JSON equality as JSON Schema defines it: numbers by value (1 equals 1.0), objects
/// regardless of member order. Pays one step of `left` for each value it compares (a string one
/// more for each 64 bytes), so comparing large values costs what it takes; `None` when `left`
/// runs out.
pub(super) fn json_eq(a: &Value, b: &Value, left: &mut u64) -> Option<bool> {
    *left = left.checked_sub(1)?;
    Some(match (a, b) {
        (Value::Number(x), Value::Number(y)) => match (int(x), int(y)) {
            (Some(x), Some(y)) => x == y,
            _ => x.as_f64() == y.as_f64(),
        },
        (Value::Array(x), Value::Array(y)) => {
            if x.len() != y.len() {
                return Some(false);
            }
            for (a, b) in x.iter().zip(y) {
                if !json_eq(a, b, left)? {
                    return Some(false);
                }
            }
            true
        }
        (Value::Object(x), Value::Object(y)) => {
            if x.len() != y.len() {
                return Some(false);
            }
            for (k, a) in x {
                match y.get(k) {
                    Some(b) if json_eq(a, b, left)? => {}
                    _ => return Some(false),
                }
            }
            true
        }
        (Value::String(x), Value::String(y)) => {
            *left = left.checked_sub((x.len().min(y.len()) / 64) as u64)?;
            x == y
        }
        _ => a == b,
    })
}

/// A hash that values [`json_eq`] finds equal share, within the same budget: a number by its
/// `f64` value (every pair `json_eq` finds equal has that in common, integers compared exactly
/// or not), an object whatever the order of its members.
fn json_hash(v: &Value, state: &RandomState, left: &mut u64) -> Option<u64> {
    *left = left.checked_sub(1)?;
    let mut h = state.build_hasher();
    match v {
        Value::Null => h.write_u8(0),
        Value::Bool(b) => h.write_u8(1 + u8::from(*b)),
        Value::Number(n) => {
            // `-0.0 == 0.0`: one hash for both.
            let f = n.as_f64().unwrap_or(0.0);
            h.write_u64(if f == 0.0 { 0 } else { f.to_bits() });
        }
        Value::String(s) => {
            *left = left.checked_sub((s.len() / 64) as u64)?;
            h.write_u8(3);
            h.write(s.as_bytes());
        }
        Value::Array(list) => {
            h.write_u8(4);
            for x in list {
                h.write_u64(json_hash(x, state, left)?);
            }
        }
        Value::Object(members) => {
            h.write_u8(5);
            let mut sum = 0u64;
            for (k, x) in members {
                *left = left.checked_sub((k.len() / 64) as u64)?;
                let mut member = state.build_hasher();
                member.write(k.as_bytes());
                member.write_u64(json_hash(x, state, left)?);
                sum = sum.wrapping_add(member.finish());
            }
            h.write_u64(sum);
        }
    }
    Some(h.finish())
}

/// A number against a bound: exactly when both are integers (past 2^53 two integers can round
/// to one `f64`: 2^63 - 1 and 2^63 did, so `maximum: 2^63 - 1` let 2^63 pass), else as `f64`.
fn compare(x: &Number, bound: &Number) -> Option<Ordering> {
    match (int(x), int(bound)) {
        (Some(a), Some(b)) => Some(a.cmp(&b)),
        _ => x.as_f64()?.partial_cmp(&bound.as_f64()?),
    }
}

fn int(n: &Number) -> Option<i128> {
    n.as_i64().map(i128::from).or_else(|| n.as_u64().map(i128::from))
}
