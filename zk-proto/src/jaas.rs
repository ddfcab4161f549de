//! JAAS login configuration files, as Java reads them for ZooKeeper's SASL users (a server's
//! `Server` section, a client's `Client` section), and the `-D` system properties of
//! `SERVER_JVMFLAGS` / `CLIENT_JVMFLAGS` / `JVMFLAGS`, where operators name that file.
//!
//! A JAAS file is a list of sections, each a list of login modules with options:
//!
//! ```text
//! Server {
//!     org.apache.zookeeper.server.auth.DigestLoginModule required
//!     user_bob="bobpw";
//! };
//! ```
//!
//! Comments are `//`, `/* */` and `#`; values are bare words or `"quoted"` strings.
//!
//! Parsing only: whoever reads the file (zk-server for its `Server` and quorum sections, zk-client
//! for zkrs-cli's `Client` section) checks its size with [`check_file_size`], reads it, and hands
//! the text to [`JaasConfig::parse_file`], so every error names the file as well as the line.

use std::path::{Path, PathBuf};

/// Largest JAAS file read: a login configuration is a few lines; anything bigger is a mistake.
pub const MAX_FILE_BYTES: u64 = 1 << 20;

/// One login module line of a section. `Debug` shows option names, never their values (they
/// hold passwords).
#[derive(Clone, PartialEq, Eq)]
pub struct LoginModule {
    /// The module's class name.
    pub class: String,
    /// `required`, `requisite`, `sufficient` or `optional` (lower case).
    pub flag: String,
    /// `name=value` options, in file order.
    pub options: Vec<(String, String)>,
}

impl std::fmt::Debug for LoginModule {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let names: Vec<&String> = self.options.iter().map(|(k, _)| k).collect();
        f.debug_struct("LoginModule")
            .field("class", &self.class)
            .field("flag", &self.flag)
            .field("options", &names)
            .finish()
    }
}

/// A parsed JAAS file: sections by name, in file order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct JaasConfig {
    /// `(section name, its modules)`; a name given twice keeps both entries, the modules of
    /// every entry count.
    pub sections: Vec<(String, Vec<LoginModule>)>,
}

/// A JAAS file that cannot be used, naming the file and line.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("JAAS file {}{}: {message}", file.display(), line.map(|l| format!(" line {l}")).unwrap_or_default())]
pub struct JaasError {
    /// The file.
    pub file: PathBuf,
    /// The line (1-based) where the problem is, when there is one.
    pub line: Option<u32>,
    /// What is wrong.
    pub message: String,
}

impl JaasError {
    /// `file` could not be read; `why` is what the system said (an I/O error's text).
    pub fn unreadable(file: &Path, why: impl std::fmt::Display) -> JaasError {
        JaasError { file: file.to_path_buf(), line: None, message: format!("cannot be read: {why}") }
    }
}

/// Whether a file of `len` bytes is small enough to be read as a login configuration (at most
/// [`MAX_FILE_BYTES`]), asked before reading it.
///
/// Errors: the file is bigger, naming `file` and its size.
pub fn check_file_size(file: &Path, len: u64) -> Result<(), JaasError> {
    if len <= MAX_FILE_BYTES {
        return Ok(());
    }
    Err(JaasError {
        file: file.to_path_buf(),
        line: None,
        message: format!("is {len} bytes; a login configuration is at most {MAX_FILE_BYTES}"),
    })
}

impl JaasConfig {
    /// Parses `text`, the contents of the JAAS file `file`.
    ///
    /// Errors: the text does not parse ([`JaasError`] names the file and the line).
    pub fn parse_file(file: &Path, text: &str) -> Result<JaasConfig, JaasError> {
        JaasConfig::parse(text).map_err(|(line, message)| JaasError {
            file: file.to_path_buf(),
            line: Some(line),
            message,
        })
    }

    /// Parses JAAS text; errors are `(line, message)`.
    pub fn parse(text: &str) -> Result<JaasConfig, (u32, String)> {
        let tokens = tokenize(text)?;
        let mut p = Parser { tokens, at: 0, last_line: text.lines().count().max(1) as u32 };
        let mut sections = Vec::new();
        while p.peek().is_some() {
            let name = p.word("a section name")?;
            p.symbol('{')?;
            let mut modules = Vec::new();
            loop {
                if p.take_symbol('}') {
                    break;
                }
                let class = p.word("a login module class name or '}'")?;
                let flag = p.word("a control flag (required, requisite, sufficient or optional)")?;
                let flag_lc = flag.to_ascii_lowercase();
                if !matches!(flag_lc.as_str(), "required" | "requisite" | "sufficient" | "optional") {
                    return Err((
                        p.line(),
                        format!(
                            "\"{flag}\" is not a control flag (required, requisite, sufficient or optional)"
                        ),
                    ));
                }
                let mut options = Vec::new();
                while !p.take_symbol(';') {
                    let key = p.word("an option name or ';'")?;
                    p.symbol('=')?;
                    let value = p.value()?;
                    options.push((key, value));
                }
                modules.push(LoginModule { class, flag: flag_lc, options });
            }
            p.symbol(';')?;
            sections.push((name, modules));
        }
        Ok(JaasConfig { sections })
    }

    /// The modules of every entry named `name`, or `None` when there is none.
    pub fn section(&self, name: &str) -> Option<Vec<&LoginModule>> {
        let mods: Vec<&LoginModule> =
            self.sections.iter().filter(|(n, _)| n == name).flat_map(|(_, m)| m.iter()).collect();
        self.sections.iter().any(|(n, _)| n == name).then_some(mods)
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Tok {
    Word(String),
    Quoted(String),
    Sym(char),
}

fn tokenize(text: &str) -> Result<Vec<(Tok, u32)>, (u32, String)> {
    let mut out = Vec::new();
    let mut line = 1u32;
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\n' => line += 1,
            c if c.is_whitespace() => {}
            '#' => while chars.next_if(|&c| c != '\n').is_some() {},
            '/' if chars.peek() == Some(&'/') => while chars.next_if(|&c| c != '\n').is_some() {},
            '/' if chars.peek() == Some(&'*') => {
                let start = line;
                chars.next();
                let mut prev = '\0';
                loop {
                    let Some(c) = chars.next() else {
                        return Err((start, "a /* comment is never closed".into()));
                    };
                    if c == '\n' {
                        line += 1;
                    }
                    if prev == '*' && c == '/' {
                        break;
                    }
                    prev = c;
                }
            }
            '{' | '}' | ';' | '=' => out.push((Tok::Sym(c), line)),
            '"' => {
                let start = line;
                let mut s = String::new();
                loop {
                    match chars.next() {
                        None => return Err((start, "a quoted value is never closed".into())),
                        Some('"') => break,
                        Some('\\') => match chars.next() {
                            None => return Err((start, "a quoted value is never closed".into())),
                            Some(e) => s.push(e),
                        },
                        Some(c) => {
                            if c == '\n' {
                                line += 1;
                            }
                            s.push(c)
                        }
                    }
                }
                out.push((Tok::Quoted(s), start));
            }
            c => {
                let mut s = String::from(c);
                while let Some(c) = chars.next_if(|&c| !c.is_whitespace() && !"{};=\"".contains(c)) {
                    s.push(c);
                }
                out.push((Tok::Word(s), line));
            }
        }
    }
    Ok(out)
}

struct Parser {
    tokens: Vec<(Tok, u32)>,
    at: usize,
    last_line: u32,
}

impl Parser {
    fn peek(&self) -> Option<&Tok> {
        self.tokens.get(self.at).map(|(t, _)| t)
    }

    fn line(&self) -> u32 {
        self.tokens.get(self.at.saturating_sub(1)).map_or(self.last_line, |t| t.1)
    }

    fn next(&mut self, wanted: &str) -> Result<Tok, (u32, String)> {
        let Some((t, _)) = self.tokens.get(self.at).cloned() else {
            return Err((self.last_line, format!("the file ends where {wanted} should be")));
        };
        self.at += 1;
        Ok(t)
    }

    fn word(&mut self, wanted: &str) -> Result<String, (u32, String)> {
        match self.next(wanted)? {
            Tok::Word(w) => Ok(w),
            t => Err((self.line(), format!("expected {wanted}, found {}", show(&t)))),
        }
    }

    fn value(&mut self) -> Result<String, (u32, String)> {
        match self.next("an option value")? {
            Tok::Word(w) | Tok::Quoted(w) => Ok(w),
            t => Err((self.line(), format!("expected an option value, found {}", show(&t)))),
        }
    }

    fn symbol(&mut self, c: char) -> Result<(), (u32, String)> {
        match self.next(&format!("'{c}'"))? {
            Tok::Sym(s) if s == c => Ok(()),
            t => Err((self.line(), format!("expected '{c}', found {}", show(&t)))),
        }
    }

    fn take_symbol(&mut self, c: char) -> bool {
        if self.peek() == Some(&Tok::Sym(c)) {
            self.at += 1;
            true
        } else {
            false
        }
    }
}

fn show(t: &Tok) -> String {
    match t {
        Tok::Word(w) => format!("\"{w}\""),
        Tok::Quoted(w) => format!("\"{w}\" (quoted)"),
        Tok::Sym(c) => format!("'{c}'"),
    }
}

/// The `-Dname=value` system properties in a JVM flags string, in order (a later one for the
/// same name wins, as in Java). The string is split into words as a shell would split a
/// command line: white space separates, `'...'` and `"..."` quote, `\` escapes outside single
/// quotes (zkServer.sh expands `$JVMFLAGS` unquoted, so quotes there reach Java; zkrs takes
/// them as the operator meant them). `-Dname` alone is `name` = "".
pub fn system_properties(flags: &str) -> Vec<(String, String)> {
    let mut words = Vec::new();
    let mut cur = String::new();
    let mut in_word = false;
    let mut chars = flags.chars();
    while let Some(c) = chars.next() {
        match c {
            c if c.is_whitespace() => {
                if in_word {
                    words.push(std::mem::take(&mut cur));
                    in_word = false;
                }
            }
            '\'' => {
                in_word = true;
                for c in chars.by_ref() {
                    if c == '\'' {
                        break;
                    }
                    cur.push(c);
                }
            }
            '"' => {
                in_word = true;
                while let Some(c) = chars.next() {
                    match c {
                        '"' => break,
                        '\\' => {
                            if let Some(e) = chars.next() {
                                cur.push(e)
                            }
                        }
                        c => cur.push(c),
                    }
                }
            }
            '\\' => {
                in_word = true;
                if let Some(e) = chars.next() {
                    cur.push(e)
                }
            }
            c => {
                in_word = true;
                cur.push(c);
            }
        }
    }
    if in_word {
        words.push(cur);
    }
    words
        .into_iter()
        .filter_map(|w| {
            let prop = w.strip_prefix("-D")?;
            let (k, v) = prop.split_once('=').unwrap_or((prop, ""));
            (!k.is_empty()).then(|| (k.to_string(), v.to_string()))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_zookeepers_sections() {
        let text = "// users\nServer {\n  org.apache.zookeeper.server.auth.DigestLoginModule required\n  \
                    user_bob=\"bob pw\" /* c */ user_super=\"adm\\\"in\";\n};\n# client\nClient { \
                    org.apache.zookeeper.server.auth.DigestLoginModule Required username=bob password=bobpw; };\n";
        let c = JaasConfig::parse(text).unwrap();
        let server = c.section("Server").unwrap();
        assert_eq!(server.len(), 1);
        assert_eq!(server[0].flag, "required");
        assert_eq!(
            server[0].options,
            vec![("user_bob".into(), "bob pw".into()), ("user_super".into(), "adm\"in".into())]
        );
        let client = c.section("Client").unwrap();
        assert_eq!(client[0].options[1], ("password".into(), "bobpw".into()));
        assert!(c.section("QuorumServer").is_none());
        assert!(!format!("{c:?}").contains("bob pw"), "Debug never shows option values");
        assert_eq!(JaasConfig::parse("Empty { };").unwrap().section("Empty"), Some(vec![]));
    }

    #[test]
    fn errors_name_the_line() {
        let cases = [
            ("Server {\n m required a=\"b\"\n", 2, "';'"),
            ("Server {\n m needed;\n};", 2, "control flag"),
            ("Server {\n m required a=;\n};", 2, "option value"),
            ("Server \n\n m required;\n};", 3, "'{'"),
            ("Server {\n m required a=\"b;\n};", 2, "never closed"),
            ("Server {\n m required;\n}", 3, "';'"),
            ("/*\n\n", 1, "never closed"),
        ];
        for (text, line, what) in cases {
            let (l, m) = JaasConfig::parse(text).unwrap_err();
            assert_eq!(l, line, "{text:?}: {m}");
            assert!(m.contains(what), "{text:?}: {m}");
        }
    }

    #[test]
    fn file_errors_name_file_and_line() {
        let p = Path::new("/etc/zk/jaas.conf");
        let e = JaasConfig::parse_file(p, "Server {\n x required\n y;\n};\n").unwrap_err();
        assert_eq!(e.line, Some(3));
        assert_eq!(e.to_string(), "JAAS file /etc/zk/jaas.conf line 3: expected '=', found ';'");
        let e = JaasError::unreadable(p, "No such file or directory (os error 2)");
        assert_eq!(
            e.to_string(),
            "JAAS file /etc/zk/jaas.conf: cannot be read: No such file or directory (os error 2)"
        );
        assert!(check_file_size(p, MAX_FILE_BYTES).is_ok());
        let e = check_file_size(p, MAX_FILE_BYTES + 1).unwrap_err();
        assert!(e.line.is_none() && e.to_string().contains("1048577 bytes"), "{e}");
    }

    #[test]
    fn jvm_flags_properties() {
        let flags = r#"-Xmx1g -Djava.security.auth.login.config="/etc/zk/my jaas.conf" -Dzookeeper.superUser='bob'
            -Dflag -Dx=a\ b -D -cp /x -Dzookeeper.superUser=alice"#;
        assert_eq!(
            system_properties(flags),
            vec![
                ("java.security.auth.login.config".into(), "/etc/zk/my jaas.conf".into()),
                ("zookeeper.superUser".into(), "bob".into()),
                ("flag".into(), "".into()),
                ("x".into(), "a b".into()),
                ("zookeeper.superUser".into(), "alice".into()),
            ]
        );
        assert!(system_properties("").is_empty());
    }
}
