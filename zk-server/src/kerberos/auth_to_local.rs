//! `zookeeper.security.auth_to_local`: the rules that give a Kerberos principal its short name,
//! in the grammar Apache's server reads (Hadoop's rules as ZooKeeper took them, before Hadoop
//! added the `/L` lower-case flag: Apache 3.8 refuses `/L`, and so does zkrs).
//!
//! A rule list is rules one after another (white space between them is allowed, not needed):
//! - `DEFAULT`: a principal of the default realm gets its first component (`alice@R` and
//!   `zk/h@R` give `alice` and `zk`); any other realm is left to the next rule.
//! - `RULE:[n:format](filter)s/from/to/g`: applies to principals of exactly `n` components. The
//!   format is text with `$0` (the realm), `$1` (the first component) and `$2` (the second); the
//!   optional `(filter)` is a regular expression the whole formatted string must match; the
//!   optional `s/from/to/` replaces the first match of `from` with `to` (every match with `g`),
//!   `to` referring to groups as `$1` or `${name}` and escaping with `\`.
//!
//! The first rule that applies gives the short name. A short name with `/` or `@` in it is an
//! error, as is no rule applying; a principal without a realm is its own short name.
//!
//! Where Apache fails only when a rule is used (a `$n` past the rule's components, a `$` with no
//! number, a replacement naming a group the pattern lacks), zkrs refuses the rule list when it
//! reads it. Regular expressions are the `regex` crate's: Java's look-around and back-references
//! are refused there too, and `\d`, `\w`, `\s` take Unicode classes where Java's take ASCII
//! (Kerberos principals are ASCII in practice).

use regex::{Captures, Regex};
use std::fmt;

/// The longest rule list read (a limit on the work a configuration can ask for).
const MAX_RULES_LEN: usize = 64 * 1024;

/// A parsed `auth_to_local` rule list.
#[derive(Clone)]
pub struct AuthToLocal {
    text: String,
    rules: Vec<Rule>,
}

impl fmt::Debug for AuthToLocal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("AuthToLocal").field(&self.text).finish()
    }
}

impl PartialEq for AuthToLocal {
    fn eq(&self, other: &AuthToLocal) -> bool {
        self.text == other.text
    }
}

impl Eq for AuthToLocal {}

impl Default for AuthToLocal {
    /// `DEFAULT` alone, Apache's rule list when the property is not set.
    fn default() -> AuthToLocal {
        AuthToLocal { text: "DEFAULT".into(), rules: vec![Rule::Default] }
    }
}

#[derive(Clone)]
enum Rule {
    Default,
    Map(MapRule),
}

#[derive(Clone)]
struct MapRule {
    /// The rule as written, for messages.
    text: String,
    components: usize,
    format: Vec<Piece>,
    /// Anchored at both ends: the whole formatted string must match.
    filter: Option<Regex>,
    substitution: Option<Substitution>,
}

#[derive(Clone)]
struct Substitution {
    from: Regex,
    to: Vec<Piece>,
    global: bool,
}

/// Part of a format or a replacement: text, or a numbered parameter or group.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Piece {
    Text(String),
    Number(usize),
    Named(String),
}

/// The parts of a principal a rule sees: `[realm, first component, second component]`.
pub(crate) struct Parts<'a> {
    pub(crate) realm: &'a str,
    pub(crate) components: Vec<&'a str>,
}

impl AuthToLocal {
    /// Parses a rule list.
    ///
    /// Errors say what is wrong and where: text that is no rule (Hadoop's `/L` flag included),
    /// a rule with no component count, a format with `$` and no number or a number past the
    /// rule's components, a filter or pattern the `regex` crate does not take, a replacement
    /// with a dangling `\` or `$` or a group its pattern lacks, an empty list, a list longer than
    /// 64 KiB.
    pub fn parse(text: &str) -> Result<AuthToLocal, String> {
        if text.len() > MAX_RULES_LEN {
            return Err(format!("rule list of {} bytes (at most {MAX_RULES_LEN})", text.len()));
        }
        let mut rules = Vec::new();
        let mut rest = text.trim_matches(|c: char| c <= ' ');
        while !rest.is_empty() {
            rest = rest.trim_start_matches(is_java_space);
            let (rule, after) = parse_rule(rest)?;
            rules.push(rule);
            rest = after;
        }
        if rules.is_empty() {
            return Err("no rules (DEFAULT is Apache's default)".into());
        }
        Ok(AuthToLocal { text: text.trim().to_string(), rules })
    }

    /// The short name of a principal, from the first rule that applies.
    ///
    /// Errors: no rule applies, a rule gives a name with `/` or `@` (the rules after it are not
    /// tried, as Apache does not).
    pub(crate) fn short_name(&self, parts: &Parts<'_>, default_realm: &str) -> Result<String, String> {
        for rule in &self.rules {
            let result = match rule {
                Rule::Default => (parts.realm == default_realm).then(|| parts.components[0].to_string()),
                Rule::Map(m) => m.apply(parts),
            };
            if let Some(name) = result {
                if name.contains(['/', '@']) {
                    return Err(format!("rule {} gives {name:?}, not a simple name", rule.text()));
                }
                return Ok(name);
            }
        }
        Err("no auth_to_local rule applies".into())
    }
}

impl Rule {
    fn text(&self) -> &str {
        match self {
            Rule::Default => "DEFAULT",
            Rule::Map(m) => &m.text,
        }
    }
}

impl MapRule {
    fn apply(&self, parts: &Parts<'_>) -> Option<String> {
        if parts.components.len() != self.components {
            return None;
        }
        let mut base = String::new();
        for piece in &self.format {
            match piece {
                Piece::Text(t) => base.push_str(t),
                // In range: the rule was refused at parse time otherwise, and the component
                // count was just checked.
                Piece::Number(0) => base.push_str(parts.realm),
                Piece::Number(n) => base.push_str(parts.components.get(n - 1).copied().unwrap_or("")),
                Piece::Named(_) => {}
            }
        }
        if self.filter.as_ref().is_some_and(|f| !f.is_match(&base)) {
            return None;
        }
        Some(match &self.substitution {
            Some(s) => s.replace(&base),
            None => base,
        })
    }
}

impl Substitution {
    /// Replaces the first match of `from` (every match when global), as Java's `replaceFirst`
    /// and `replaceAll` do: after an empty match the search resumes one character on.
    fn replace(&self, base: &str) -> String {
        let mut out = String::new();
        let mut copied = 0;
        let mut at = 0;
        while at <= base.len() {
            let Some(caps) = self.from.captures_at(base, at) else { break };
            let Some(m) = caps.get(0) else { break };
            out.push_str(&base[copied..m.start()]);
            self.expand(&caps, &mut out);
            copied = m.end();
            if !self.global {
                break;
            }
            at = if m.is_empty() {
                match base[m.end()..].chars().next() {
                    Some(c) => m.end() + c.len_utf8(),
                    None => break,
                }
            } else {
                m.end()
            };
        }
        out.push_str(&base[copied..]);
        out
    }

    fn expand(&self, caps: &Captures<'_>, out: &mut String) {
        for piece in &self.to {
            let group = match piece {
                Piece::Text(t) => {
                    out.push_str(t);
                    continue;
                }
                Piece::Number(n) => caps.get(*n),
                Piece::Named(name) => caps.name(name),
            };
            // A group that took no part in the match adds nothing.
            if let Some(g) = group {
                out.push_str(g.as_str());
            }
        }
    }
}

/// Java's `\s`: space, tab, newline, vertical tab, form feed, carriage return.
fn is_java_space(c: char) -> bool {
    matches!(c, ' ' | '\t' | '\n' | '\x0b' | '\x0c' | '\r')
}

/// One rule at the start of `s`; the rule and the text after it.
fn parse_rule(s: &str) -> Result<(Rule, &str), String> {
    let invalid = |why: &str| format!("invalid rule at {:?}: {why}", clip(s));
    if let Some(rest) = s.strip_prefix("DEFAULT") {
        return Ok((Rule::Default, rest));
    }
    let Some(rest) = s.strip_prefix("RULE:[") else {
        if s.starts_with('L') {
            return Err(invalid(
                "the /L (lower-case) flag of Hadoop's rules is not in Apache ZooKeeper's grammar",
            ));
        }
        return Err(invalid("expected DEFAULT or RULE:[n:format]"));
    };
    let digits = rest.len() - rest.trim_start_matches(|c: char| c.is_ascii_digit()).len();
    let (count, rest) = rest.split_at(digits);
    let Some(rest) = rest.strip_prefix(':') else {
        return Err(invalid("expected the component count, then ':'"));
    };
    let components: usize = match count.parse() {
        Ok(n) => n,
        Err(_) => return Err(invalid("the component count is missing or too large")),
    };
    let Some((format, mut rest)) = rest.split_once(']') else {
        return Err(invalid("the format has no closing ']'"));
    };
    let format = parse_format(format, components).map_err(|e| invalid(&e))?;
    let mut filter = None;
    if let Some(after) = rest.strip_prefix('(') {
        let Some((f, after)) = after.split_once(')') else {
            return Err(invalid("the filter has no closing ')'"));
        };
        filter = Some(regex(&format!(r"\A(?:{f})\z"), f).map_err(|e| invalid(&e))?);
        rest = after;
    }
    let mut substitution = None;
    if let Some(after) = rest.strip_prefix("s/") {
        let mut fields = after.splitn(3, '/');
        let (Some(from), Some(to), Some(after)) = (fields.next(), fields.next(), fields.next()) else {
            return Err(invalid("a substitution is s/pattern/replacement/ with an optional g"));
        };
        let (global, after) = match after.strip_prefix('g') {
            Some(a) => (true, a),
            None => (false, after),
        };
        let from_re = regex(from, from).map_err(|e| invalid(&e))?;
        let to = parse_replacement(to, &from_re).map_err(|e| invalid(&e))?;
        substitution = Some(Substitution { from: from_re, to, global });
        rest = after;
    }
    let text = s[..s.len() - rest.len()].to_string();
    Ok((Rule::Map(MapRule { text, components, format, filter, substitution }), rest))
}

/// The first 60 characters of `s`, for messages.
fn clip(s: &str) -> String {
    s.chars().take(60).collect()
}

fn regex(pattern: &str, as_written: &str) -> Result<Regex, String> {
    Regex::new(pattern).map_err(|e| format!("regular expression {as_written:?}: {e}"))
}

/// A format: text and `$n` parameters, `n` at most `components`.
fn parse_format(format: &str, components: usize) -> Result<Vec<Piece>, String> {
    let mut pieces = Vec::new();
    let mut text = String::new();
    let mut chars = format.char_indices().peekable();
    while let Some((i, c)) = chars.next() {
        if c != '$' {
            text.push(c);
            continue;
        }
        let digits: String =
            std::iter::from_fn(|| chars.next_if(|(_, d)| d.is_ascii_digit()).map(|(_, d)| d)).collect();
        let n: usize = digits
            .parse()
            .map_err(|_| format!("'$' at {i} of the format {format:?} has no parameter number"))?;
        if n > components {
            return Err(format!(
                "${n} in the format {format:?}: a principal of {components} components has $0 to ${components}"
            ));
        }
        if !text.is_empty() {
            pieces.push(Piece::Text(std::mem::take(&mut text)));
        }
        pieces.push(Piece::Number(n));
    }
    if !text.is_empty() {
        pieces.push(Piece::Text(text));
    }
    Ok(pieces)
}

/// A replacement as Java reads one: `\c` is `c`; `${name}` a named group; `$` and digits the
/// group of the longest number the pattern has (`$12` is group 1 then `2` in a pattern of fewer
/// than 12 groups).
fn parse_replacement(to: &str, from: &Regex) -> Result<Vec<Piece>, String> {
    let groups = from.captures_len() - 1;
    let mut pieces = Vec::new();
    let mut text = String::new();
    let mut chars = to.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\\' => text.push(chars.next().ok_or_else(|| format!("replacement {to:?} ends with '\\'"))?),
            '$' => {
                let piece = if chars.next_if_eq(&'{').is_some() {
                    let name: String = std::iter::from_fn(|| chars.next_if(|&c| c != '}')).collect();
                    if chars.next().is_none() {
                        return Err(format!("replacement {to:?}: '${{' without '}}'"));
                    }
                    if !from.capture_names().any(|n| n == Some(name.as_str())) {
                        return Err(format!("replacement {to:?}: the pattern has no group named {name:?}"));
                    }
                    Piece::Named(name)
                } else {
                    let Some(first) = chars.next().and_then(|d| d.to_digit(10)) else {
                        return Err(format!("replacement {to:?}: '$' without a group number"));
                    };
                    let mut n = first as usize;
                    if n > groups {
                        return Err(format!("replacement {to:?}: the pattern has no group {n}"));
                    }
                    while let Some(d) = chars.peek().and_then(|d| d.to_digit(10)) {
                        let longer = n * 10 + d as usize;
                        if longer > groups {
                            break;
                        }
                        n = longer;
                        chars.next();
                    }
                    Piece::Number(n)
                };
                if !text.is_empty() {
                    pieces.push(Piece::Text(std::mem::take(&mut text)));
                }
                pieces.push(piece);
            }
            c => text.push(c),
        }
    }
    if !text.is_empty() {
        pieces.push(Piece::Text(text));
    }
    Ok(pieces)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The short name of `principal` (`name[/host]@realm`) under `rules`, default realm R.
    fn short(rules: &str, principal: &str) -> Result<String, String> {
        let (name, realm) = principal.rsplit_once('@').unwrap();
        let parts = Parts { realm, components: name.split('/').collect() };
        AuthToLocal::parse(rules).unwrap().short_name(&parts, "R")
    }

    #[test]
    fn default_takes_the_first_component_of_the_default_realm_only() {
        assert_eq!(short("DEFAULT", "alice@R").unwrap(), "alice");
        assert_eq!(short("DEFAULT", "zk/h1@R").unwrap(), "zk");
        assert!(short("DEFAULT", "carol@OTHER").unwrap_err().contains("no auth_to_local rule"));
        assert_eq!(AuthToLocal::default(), AuthToLocal::parse("  DEFAULT\n").unwrap());
    }

    #[test]
    fn rules_format_filter_and_substitute() {
        // Components counted exactly; $0 the realm, $1 and $2 the components.
        let r = r"RULE:[2:$1;$2;$0](zk;.*)s/zk;([^;]*);.*/svc-$1/ DEFAULT";
        assert_eq!(short(r, "zk/h1@R").unwrap(), "svc-h1");
        assert_eq!(short(r, "other/h1@R").unwrap(), "other", "filter fails: DEFAULT next");
        assert_eq!(short(r, "zk@R").unwrap(), "zk", "one component: the rule does not apply");
        // Another realm mapped by a rule; no substitution: the format is the name.
        let r = r"RULE:[1:$1@$0](.*@OTHER)s/@.*// RULE:[1:guest]";
        assert_eq!(short(r, "carol@OTHER").unwrap(), "carol");
        assert_eq!(short(r, "dave@ELSE").unwrap(), "guest");
        // The filter matches the whole string, not a part.
        assert!(short(r"RULE:[1:$1](li)", "alice@R").is_err());
        assert_eq!(short(r"RULE:[1:$1](.li.*)", "alice@R").unwrap(), "alice");
        // First match, or every one with g, as Java's replaceFirst and replaceAll (empty matches
        // included: Apache's server gives XXbX for this one).
        assert_eq!(short(r"RULE:[1:$1]s/a/X/", "aab@R").unwrap(), "Xab");
        assert_eq!(short(r"RULE:[1:$1]s/a/X/g", "aab@R").unwrap(), "XXb");
        assert_eq!(short(r"RULE:[1:$1]s/a*/X/g", "aaab@R").unwrap(), "XXbX");
        // Java's replacement: the longest group number the pattern has; \ escapes; named groups.
        assert_eq!(short(r"RULE:[1:$1]s/(a)/$12x/g", "aaab@R").unwrap(), "a2xa2xa2xb");
        assert_eq!(short(r"RULE:[1:$1]s/(?P<u>.*)/\$${u}/", "alice@R").unwrap(), "$alice");
        // Rules need no white space between them.
        assert_eq!(short(r"RULE:[2:$2]DEFAULT", "alice@R").unwrap(), "alice");
    }

    #[test]
    fn a_name_that_is_not_simple_stops_the_rules() {
        let e = short(r"RULE:[1:$1@$0] DEFAULT", "alice@R").unwrap_err();
        assert!(e.contains("not a simple name") && e.contains("RULE:[1:$1@$0]"), "{e}");
    }

    #[test]
    fn bad_rules_are_refused_with_what_is_wrong() {
        for (rules, why) in [
            ("", "no rules"),
            ("RULE:[1:$1]s/x/y/L", "/L"),
            ("RULE:[1:$1]s/x/y/ DEFAULTS", "expected DEFAULT"),
            ("RULE[1:$1]", "expected DEFAULT"),
            ("RULE:[:$1]", "component count"),
            ("RULE:[x:$1]", "component count"),
            ("RULE:[99999999999999999999999:$1]", "too large"),
            ("RULE:[1:$1", "closing ']'"),
            ("RULE:[1:$]", "no parameter number"),
            ("RULE:[1:$2]", "$0 to $1"),
            ("RULE:[1:$1](a", "closing ')'"),
            ("RULE:[1:$1](a(b)", "regular expression"),
            ("RULE:[1:$1](a)(b)", "expected DEFAULT"),
            ("RULE:[1:$1]s/x/y", "s/pattern/replacement/"),
            (r"RULE:[1:$1]s/(a)\1/y/", "regular expression"),
            (r"RULE:[1:$1]s/(a)/$2/", "no group 2"),
            (r"RULE:[1:$1]s/a/$/", "without a group number"),
            (r"RULE:[1:$1]s/a/\/", "ends with"),
            (r"RULE:[1:$1]s/(a)/${b}/", "no group named"),
            (r"RULE:[1:$1]s/(a)/${b/", "without"),
        ] {
            let e = AuthToLocal::parse(rules).err().unwrap_or_else(|| panic!("{rules:?} parsed"));
            assert!(e.contains(why), "{rules:?}: {e}");
        }
        assert!(AuthToLocal::parse(&"DEFAULT ".repeat(10_000)).unwrap_err().contains("at most"));
    }
}
