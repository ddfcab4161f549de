//! The bit of JSON the export format needs: string escaping for the writer, and a pull reader
//! that walks a document from a `BufRead` so a file of a million nodes is read one node at a
//! time (the top-level object and its `nodes` array are streamed; every other value, each node
//! record included, is read whole, within size limits).

use std::io::BufRead;

/// Nesting deeper than this is refused (a node record is three levels deep).
const MAX_DEPTH: u32 = 16;
/// A string longer than this is refused: the base64 of a node's data stays under 1.5 MB with
/// jute.maxbuffer's 1 MB; this leaves room for servers configured with a larger one.
const MAX_STRING_BYTES: usize = 64 << 20;
/// An array or object with more entries than this is refused (an ACL has a handful).
const MAX_ENTRIES: usize = 65_536;

/// A JSON value read whole. Numbers are kept as their text, so integers up to i64 stay exact.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    /// `null`.
    Null,
    /// `true` or `false`.
    Bool(bool),
    /// A number, as written.
    Number(String),
    /// A string.
    String(String),
    /// An array.
    Array(Vec<Value>),
    /// An object, keys in document order.
    Object(Vec<(String, Value)>),
}

impl Value {
    /// The value of `key` in an object.
    pub fn get(&self, key: &str) -> Option<&Value> {
        match self {
            Value::Object(kv) => kv.iter().find(|(k, _)| k == key).map(|(_, v)| v),
            _ => None,
        }
    }

    /// A string's text.
    pub fn as_str(&self) -> Option<&str> {
        match self {
            Value::String(s) => Some(s),
            _ => None,
        }
    }

    /// An integral number that fits an i64.
    pub fn as_i64(&self) -> Option<i64> {
        match self {
            Value::Number(n) => n.parse().ok(),
            _ => None,
        }
    }
}

/// Appends `s` as a quoted JSON string.
pub fn write_str(out: &mut String, s: &str) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 || c == '\u{7f}' => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
}

/// A malformed or oversized document: what was wrong and the byte offset where it was seen.
#[derive(Debug)]
pub struct JsonError {
    /// What was wrong.
    pub message: String,
    /// Bytes read before the problem.
    pub offset: u64,
}

impl std::fmt::Display for JsonError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} at byte {}", self.message, self.offset)
    }
}

/// A pull reader over a JSON document.
pub struct Reader<R> {
    r: R,
    offset: u64,
    /// Whether the array or object being walked by `next_*` has had an entry already.
    seen_entry: Vec<bool>,
}

impl<R: BufRead> Reader<R> {
    /// A reader at the start of a document.
    pub fn new(r: R) -> Reader<R> {
        Reader { r, offset: 0, seen_entry: Vec::new() }
    }

    fn err<T>(&self, message: impl Into<String>) -> Result<T, JsonError> {
        Err(JsonError { message: message.into(), offset: self.offset })
    }

    fn peek(&mut self) -> Result<Option<u8>, JsonError> {
        match self.r.fill_buf() {
            Ok(b) => Ok(b.first().copied()),
            Err(e) => self.err(format!("read error: {e}")),
        }
    }

    fn bump(&mut self) -> Result<Option<u8>, JsonError> {
        let b = self.peek()?;
        if b.is_some() {
            self.r.consume(1);
            self.offset += 1;
        }
        Ok(b)
    }

    fn skip_ws(&mut self) -> Result<(), JsonError> {
        while let Some(b) = self.peek()? {
            if !matches!(b, b' ' | b'\t' | b'\n' | b'\r') {
                break;
            }
            self.bump()?;
        }
        Ok(())
    }

    fn expect(&mut self, want: u8) -> Result<(), JsonError> {
        self.skip_ws()?;
        match self.bump()? {
            Some(b) if b == want => Ok(()),
            Some(b) => self.err(format!("expected '{}', found '{}'", want as char, b.escape_ascii())),
            None => self.err(format!("expected '{}', found the end of the file", want as char)),
        }
    }

    /// Enters an object: the next token must be `{`. Walk it with [`Reader::next_key`].
    pub fn begin_object(&mut self) -> Result<(), JsonError> {
        self.expect(b'{')?;
        self.seen_entry.push(false);
        Ok(())
    }

    /// The next key of the object entered last (its value is to be read next), or None at its
    /// closing brace.
    pub fn next_key(&mut self) -> Result<Option<String>, JsonError> {
        if !self.more(b'}')? {
            return Ok(None);
        }
        self.skip_ws()?;
        let key = self.string()?;
        self.expect(b':')?;
        Ok(Some(key))
    }

    /// Enters an array: the next token must be `[`. Walk it with [`Reader::next_element`].
    pub fn begin_array(&mut self) -> Result<(), JsonError> {
        self.expect(b'[')?;
        self.seen_entry.push(false);
        Ok(())
    }

    /// Whether another element of the array entered last follows (then read it), false at its
    /// closing bracket.
    pub fn next_element(&mut self) -> Result<bool, JsonError> {
        self.more(b']')
    }

    /// Common to both walks: consumes the separating comma or the closing `close`.
    fn more(&mut self, close: u8) -> Result<bool, JsonError> {
        self.skip_ws()?;
        let Some(seen) = self.seen_entry.last().copied() else { return self.err("not inside a value") };
        if self.peek()? == Some(close) {
            self.bump()?;
            self.seen_entry.pop();
            return Ok(false);
        }
        if seen {
            self.expect(b',')?;
        }
        if let Some(s) = self.seen_entry.last_mut() {
            *s = true;
        }
        Ok(true)
    }

    /// Checks that nothing but white space follows.
    pub fn end(&mut self) -> Result<(), JsonError> {
        self.skip_ws()?;
        match self.peek()? {
            None => Ok(()),
            Some(_) => self.err("data after the end of the document"),
        }
    }

    /// Reads one whole value.
    pub fn value(&mut self) -> Result<Value, JsonError> {
        self.value_at(0)
    }

    fn value_at(&mut self, depth: u32) -> Result<Value, JsonError> {
        if depth > MAX_DEPTH {
            return self.err("nested too deeply");
        }
        self.skip_ws()?;
        match self.peek()? {
            None => self.err("unexpected end of the file"),
            Some(b'"') => Ok(Value::String(self.string()?)),
            Some(b'{') => {
                self.begin_object()?;
                let mut kv = Vec::new();
                while let Some(k) = self.next_key()? {
                    if kv.len() >= MAX_ENTRIES {
                        return self.err("object too large");
                    }
                    let v = self.value_at(depth + 1)?;
                    kv.push((k, v));
                }
                Ok(Value::Object(kv))
            }
            Some(b'[') => {
                self.begin_array()?;
                let mut items = Vec::new();
                while self.next_element()? {
                    if items.len() >= MAX_ENTRIES {
                        return self.err("array too large");
                    }
                    items.push(self.value_at(depth + 1)?);
                }
                Ok(Value::Array(items))
            }
            Some(b't') => self.literal("true", Value::Bool(true)),
            Some(b'f') => self.literal("false", Value::Bool(false)),
            Some(b'n') => self.literal("null", Value::Null),
            Some(b'-' | b'0'..=b'9') => {
                let mut n = String::new();
                while let Some(b) = self.peek()? {
                    if !matches!(b, b'-' | b'+' | b'.' | b'e' | b'E' | b'0'..=b'9') || n.len() > 64 {
                        break;
                    }
                    n.push(b as char);
                    self.bump()?;
                }
                if n.parse::<f64>().is_err() {
                    return self.err(format!("bad number {n}"));
                }
                Ok(Value::Number(n))
            }
            Some(b) => self.err(format!("unexpected '{}'", b.escape_ascii())),
        }
    }

    fn literal(&mut self, word: &str, v: Value) -> Result<Value, JsonError> {
        for want in word.bytes() {
            if self.bump()? != Some(want) {
                return self.err(format!("expected {word}"));
            }
        }
        Ok(v)
    }

    fn hex4(&mut self) -> Result<u32, JsonError> {
        let mut v = 0;
        for _ in 0..4 {
            let d = match self.bump()? {
                Some(b) => (b as char).to_digit(16),
                None => None,
            };
            match d {
                Some(d) => v = v * 16 + d,
                None => return self.err("bad \\u escape"),
            }
        }
        Ok(v)
    }

    fn string(&mut self) -> Result<String, JsonError> {
        if self.bump()? != Some(b'"') {
            return self.err("expected a string");
        }
        let mut out: Vec<u8> = Vec::new();
        loop {
            if out.len() > MAX_STRING_BYTES {
                return self.err("string too long");
            }
            match self.bump()? {
                None => return self.err("unterminated string"),
                Some(b'"') => break,
                Some(b'\\') => {
                    let c = match self.bump()? {
                        Some(b'"') => '"',
                        Some(b'\\') => '\\',
                        Some(b'/') => '/',
                        Some(b'b') => '\u{8}',
                        Some(b'f') => '\u{c}',
                        Some(b'n') => '\n',
                        Some(b'r') => '\r',
                        Some(b't') => '\t',
                        Some(b'u') => {
                            let hi = self.hex4()?;
                            let code = if (0xD800..0xDC00).contains(&hi) {
                                if self.bump()? != Some(b'\\') || self.bump()? != Some(b'u') {
                                    return self.err("lone surrogate in \\u escape");
                                }
                                let lo = self.hex4()?;
                                if !(0xDC00..0xE000).contains(&lo) {
                                    return self.err("lone surrogate in \\u escape");
                                }
                                0x10000 + ((hi - 0xD800) << 10) + (lo - 0xDC00)
                            } else {
                                hi
                            };
                            match char::from_u32(code) {
                                Some(c) => c,
                                None => return self.err("bad \\u escape"),
                            }
                        }
                        _ => return self.err("bad escape"),
                    };
                    let mut buf = [0u8; 4];
                    out.extend_from_slice(c.encode_utf8(&mut buf).as_bytes());
                }
                Some(b) if b < 0x20 => return self.err("control character in a string"),
                Some(b) => out.push(b),
            }
        }
        match String::from_utf8(out) {
            Ok(s) => Ok(s),
            Err(_) => self.err("string is not UTF-8"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strings_round_trip_through_the_writer_and_reader() {
        let s = "a\"b\\c\n\u{1}é😀/\u{7f}";
        let mut out = String::new();
        write_str(&mut out, s);
        let mut r = Reader::new(out.as_bytes());
        assert_eq!(r.value().unwrap(), Value::String(s.into()));
        r.end().unwrap();
        let mut r = Reader::new(&br#""\ud83d\ude00\u00e9""#[..]);
        assert_eq!(r.value().unwrap(), Value::String("😀é".into()));
    }

    #[test]
    fn a_document_is_walked_key_by_key_and_element_by_element() {
        let doc = br#" { "a" : 1 , "nodes" : [ {"p": [true, null]}, {"p": -12} ], "z": "x" } "#;
        let mut r = Reader::new(&doc[..]);
        r.begin_object().unwrap();
        assert_eq!(r.next_key().unwrap().as_deref(), Some("a"));
        assert_eq!(r.value().unwrap().as_i64(), Some(1));
        assert_eq!(r.next_key().unwrap().as_deref(), Some("nodes"));
        r.begin_array().unwrap();
        let mut got = Vec::new();
        while r.next_element().unwrap() {
            got.push(r.value().unwrap());
        }
        assert_eq!(got[0].get("p"), Some(&Value::Array(vec![Value::Bool(true), Value::Null])));
        assert_eq!(got[1].get("p").and_then(Value::as_i64), Some(-12));
        assert_eq!(r.next_key().unwrap().as_deref(), Some("z"));
        assert_eq!(r.value().unwrap().as_str(), Some("x"));
        assert_eq!(r.next_key().unwrap(), None);
        r.end().unwrap();
    }

    #[test]
    fn malformed_documents_are_refused_with_where() {
        let bad = |doc: &str| {
            let mut r = Reader::new(doc.as_bytes());
            r.value().and_then(|_| r.end()).unwrap_err().to_string()
        };
        assert_eq!(bad(r#"{"a" 1}"#), "expected ':', found '1' at byte 6");
        assert_eq!(bad(r#"[1 2]"#), "expected ',', found '2' at byte 4");
        assert_eq!(bad(r#"{"a": [1,"#), "unexpected end of the file at byte 9");
        assert_eq!(bad(r#""abc"#), "unterminated string at byte 4");
        assert_eq!(bad(r#"{} x"#), "data after the end of the document at byte 3");
        assert_eq!(bad(&"[".repeat(40)), "nested too deeply at byte 17");
        assert_eq!(bad(r#""\ud800x""#), "lone surrogate in \\u escape at byte 8");
    }
}
