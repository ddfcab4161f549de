//! zoo.cfg: the Java properties syntax and the keys zk-server reads from it.

use zk_server::config::{load_properties, ServerConfig};

/// zoo.cfg text (invalid UTF-8 is replaced, as reading a file lossily would). The properties
/// split from it, written back with Java's `Properties.store` escapes, split into the same keys
/// and values; a config error names a line within the text. A text naming a
/// `dynamicConfigFile` is not parsed further: that key makes the parser read the file it names.
pub fn zoo_cfg(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    let Ok(props) = load_properties(&text) else {
        return;
    };
    let mut stored = String::new();
    for p in &props {
        escape(&p.key, &mut stored);
        stored.push('=');
        escape(&p.value, &mut stored);
        stored.push('\n');
    }
    let again = load_properties(&stored).expect("stored properties load");
    let pairs = |v: &[zk_server::config::Property]| {
        v.iter().map(|p| (p.key.clone(), p.value.clone())).collect::<Vec<_>>()
    };
    assert_eq!(pairs(&again), pairs(&props), "stored as:\n{stored}");

    if props.iter().any(|p| p.key.trim_matches(|c: char| c <= ' ') == "dynamicConfigFile") {
        return;
    }
    if let Err(e) = ServerConfig::parse(&text, Some(std::path::Path::new("/nonexistent-zkrs-fuzz"))) {
        if let Some(line) = e.line() {
            let lines = text.matches('\n').count() + text.matches('\r').count() + 1;
            assert!(line >= 1 && line as usize <= lines, "line {line} of {lines}: {e}");
        }
    }
}

/// Appends `s` escaped as `Properties.store` does, every space escaped (which also keeps a
/// value's leading spaces).
fn escape(s: &str, out: &mut String) {
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\t' => out.push_str("\\t"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\u{c}' => out.push_str("\\f"),
            '=' | ':' | '#' | '!' | ' ' => {
                out.push('\\');
                out.push(c);
            }
            c => out.push(c),
        }
    }
}
