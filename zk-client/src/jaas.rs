//! JAAS login configuration files (a client's `Client` section) and the `-D` system properties of
//! `CLIENT_JVMFLAGS` / `JVMFLAGS` where operators name them.
//!
//! The parser is zk-proto's ([`zk_proto::jaas`]), shared with the server, and re-exported here;
//! this module adds reading the file ([`JaasFile::read`], [`read`]).

use std::path::Path;

pub use zk_proto::jaas::{
    check_file_size, system_properties, JaasConfig, JaasError, LoginModule, MAX_FILE_BYTES,
};

/// Reads and parses the JAAS file `file` (at most [`MAX_FILE_BYTES`]).
///
/// Errors: the file cannot be read, is too big, or does not parse ([`JaasError`] names the file,
/// and the line where there is one).
pub fn read(file: &Path) -> Result<JaasConfig, JaasError> {
    let meta = std::fs::metadata(file).map_err(|e| JaasError::unreadable(file, e))?;
    check_file_size(file, meta.len())?;
    let text = std::fs::read_to_string(file).map_err(|e| JaasError::unreadable(file, e))?;
    JaasConfig::parse_file(file, &text)
}

/// `JaasConfig::read(file)`, as this crate has offered it since the parser moved to zk-proto:
/// bring this trait into scope (`use zk_client::jaas::{JaasConfig, JaasFile}`) to call it.
pub trait JaasFile: Sized {
    /// Reads and parses `file`, as [`read`] does.
    ///
    /// Errors: as [`read`].
    fn read(file: &Path) -> Result<Self, JaasError>;
}

impl JaasFile for JaasConfig {
    fn read(file: &Path) -> Result<JaasConfig, JaasError> {
        read(file)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn read_names_file_and_line() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("jaas.conf");
        std::fs::write(&p, "Server {\n x required\n y;\n};\n").unwrap();
        let e = JaasConfig::read(&p).unwrap_err();
        assert_eq!(e.line, Some(3));
        assert!(e.to_string().contains(&format!("{} line 3", p.display())), "{e}");
        let missing = read(&dir.path().join("none")).unwrap_err();
        assert!(missing.to_string().contains("cannot be read"), "{missing}");
        std::fs::write(&p, "Client { m required username=bob; };").unwrap();
        assert_eq!(read(&p).unwrap().section("Client").unwrap()[0].options.len(), 1);
    }
}
