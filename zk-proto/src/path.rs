//! Znode path validation, with the rules Apache ZooKeeper applies.

/// Why a path was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PathError {
    /// Empty path.
    #[error("path length must be > 0")]
    Empty,
    /// Does not begin with '/'.
    #[error("path must start with / character")]
    NotAbsolute,
    /// Ends with '/' (other than the root).
    #[error("path must not end with / character")]
    TrailingSlash,
    /// Contains a NUL character.
    #[error("null character not allowed @{0}")]
    NullChar(usize),
    /// Contains "//".
    #[error("empty node name specified @{0}")]
    EmptyName(usize),
    /// Contains a "." or ".." segment.
    #[error("relative paths not allowed @{0}")]
    Relative(usize),
    /// Contains a control, surrogate-range, private-use or non-BMP character.
    #[error("invalid character @{0}")]
    InvalidChar(usize),
}

fn invalid_char(c: char) -> bool {
    let u = c as u32;
    (0x01..=0x1f).contains(&u)
        || (0x7f..=0x9f).contains(&u)
        || (0xd800..=0xf8ff).contains(&u)
        || (0xfff0..=0xffff).contains(&u)
        // Java sees characters above U+FFFF as surrogate pairs, which fall in the refused range.
        || u > 0xffff
}

/// Checks `path` the way Apache ZooKeeper's `PathUtils.validatePath` does. Positions in errors
/// count characters.
pub fn validate_path(path: &str) -> Result<(), PathError> {
    if path.is_empty() {
        return Err(PathError::Empty);
    }
    if !path.starts_with('/') {
        return Err(PathError::NotAbsolute);
    }
    if path.len() == 1 {
        return Ok(());
    }
    if path.ends_with('/') {
        return Err(PathError::TrailingSlash);
    }
    // One pass with a look-behind of two characters and a look-ahead of one, no allocation: this
    // runs for every write.
    let mut prev2 = '\0';
    let mut prev = '/';
    let mut it = path.chars().skip(1).peekable();
    let mut i = 0usize;
    while let Some(c) = it.next() {
        i += 1;
        let ends_segment = matches!(it.peek(), None | Some('/'));
        if c == '\0' {
            return Err(PathError::NullChar(i));
        } else if c == '/' && prev == '/' {
            return Err(PathError::EmptyName(i));
        } else if c == '.' && ends_segment && (prev == '/' || (prev == '.' && prev2 == '/')) {
            // "." or ".." as a whole segment.
            return Err(PathError::Relative(i));
        } else if invalid_char(c) {
            return Err(PathError::InvalidChar(i));
        }
        prev2 = prev;
        prev = c;
    }
    Ok(())
}

/// Validates a create path, where a sequential node's suffix is appended before checking.
pub fn validate_create_path(path: &str, sequential: bool) -> Result<(), PathError> {
    if sequential {
        validate_path(&format!("{path}1"))
    } else {
        validate_path(path)
    }
}

/// The parent of a valid non-root path ("/" for top-level nodes).
pub fn parent(path: &str) -> &str {
    match path.rfind('/') {
        Some(0) | None => "/",
        Some(i) => &path[..i],
    }
}

/// The last segment of a valid non-root path.
pub fn basename(path: &str) -> &str {
    match path.rfind('/') {
        Some(i) => &path[i + 1..],
        None => path,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_ordinary_paths() {
        for p in ["/", "/a", "/a/b", "/a.b", "/..a", "/a..", "/.a/b", "/zookeeper/quota", "/é"] {
            assert_eq!(validate_path(p), Ok(()), "{p}");
        }
    }

    #[test]
    fn refuses_what_zookeeper_refuses() {
        assert_eq!(validate_path(""), Err(PathError::Empty));
        assert_eq!(validate_path("a"), Err(PathError::NotAbsolute));
        assert_eq!(validate_path("/a/"), Err(PathError::TrailingSlash));
        assert_eq!(validate_path("//a"), Err(PathError::EmptyName(1)));
        assert_eq!(validate_path("/a/./b"), Err(PathError::Relative(3)));
        assert_eq!(validate_path("/a/.."), Err(PathError::Relative(4)));
        assert_eq!(validate_path("/."), Err(PathError::Relative(1)));
        assert_eq!(validate_path("/a\0"), Err(PathError::NullChar(2)));
        assert_eq!(validate_path("/a\u{1}"), Err(PathError::InvalidChar(2)));
        assert_eq!(validate_path("/\u{85}"), Err(PathError::InvalidChar(1)));
        assert_eq!(validate_path("/\u{e000}"), Err(PathError::InvalidChar(1)));
        assert_eq!(validate_path("/\u{fff0}"), Err(PathError::InvalidChar(1)));
        assert_eq!(validate_path("/\u{1f600}"), Err(PathError::InvalidChar(1)));
    }

    #[test]
    fn sequential_prefix_may_end_in_slash() {
        assert_eq!(validate_create_path("/a/", true), Ok(()));
        assert!(validate_create_path("/a/", false).is_err());
    }

    #[test]
    fn parent_and_basename() {
        assert_eq!(parent("/a"), "/");
        assert_eq!(parent("/a/b/c"), "/a/b");
        assert_eq!(basename("/a/b/c"), "c");
    }
}
