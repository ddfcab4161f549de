//! Which archive URLs name an object store, and how each store is configured: Amazon S3 (or an
//! S3-compatible store), Google Cloud Storage and Azure Blob Storage, all through object_store,
//! each from its provider's usual environment. What is done with the store is the same for all
//! three ([`super::object`]).
//!
//! The URL forms (those object_store's own URL parsers take, less the ones that name no plain
//! bucket or container):
//!
//! - S3: `s3://bucket/prefix`.
//! - Google Cloud Storage: `gs://bucket/prefix`.
//! - Azure Blob Storage: `az://container/prefix` (also `azure://`, and fsspec's `abfs://` and
//!   `abfss://`), Hadoop's `abfss://container@account.dfs.core.windows.net/prefix` (also with
//!   `az://` or `abfs://`), and the account's own URLs,
//!   `https://account.blob.core.windows.net/container/prefix` or `.dfs.core.windows.net`. The
//!   storage account is the URL's where it names one, else the environment's. Left out: Data
//!   Lake Gen1's `adl://` (retired) and Fabric's OneLake URLs (workspaces, not containers).
//!
//! The prefix may be empty; slashes around it are dropped.

use super::BackupError;
use object_store::aws::AmazonS3Builder;
use object_store::azure::MicrosoftAzureBuilder;
use object_store::gcp::GoogleCloudStorageBuilder;
use object_store::ObjectStore;

/// The object stores an archive can live in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Provider {
    /// Amazon S3 or an S3-compatible store.
    S3,
    /// Google Cloud Storage.
    Gcs,
    /// Azure Blob Storage.
    Azure,
}

/// An archive URL taken apart.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoreUrl {
    /// The store.
    pub provider: Provider,
    /// The URL as given up to the bucket or container (`s3://bucket`,
    /// `https://account.blob.core.windows.net/container`): objects are shown under it.
    pub root: String,
    /// The bucket, or Azure's container.
    pub bucket: String,
    /// The Azure storage account the URL names, if it names one.
    pub account: Option<String>,
    /// The prefix the archive's keys go under, without a slash at either end; may be empty.
    pub prefix: String,
}

/// Azure's account host suffixes, for the Hadoop form and for `https://` URLs.
const AZURE_DFS_HOST: &str = ".dfs.core.windows.net";
const AZURE_BLOB_HOST: &str = ".blob.core.windows.net";

impl StoreUrl {
    /// Takes `url` apart: None when it names no object store (a path, or a scheme or host this
    /// build does not know), else the parts or why they do not make an archive URL.
    ///
    /// Errors: a URL of a known store with no bucket or container, or (Azure) with an account
    /// host that is not Azure's.
    pub fn parse(url: &str) -> Option<Result<StoreUrl, BackupError>> {
        let (scheme, rest) = url.split_once("://")?;
        let refuse = |why: String| Err(BackupError::Target { target: url.to_string(), why });
        let split = |rest: &str| -> (String, String) {
            let (first, prefix) = rest.split_once('/').unwrap_or((rest, ""));
            (first.to_string(), prefix.trim_matches('/').to_string())
        };
        let (provider, root, bucket, account, prefix) = match scheme {
            "s3" | "gs" => {
                let (bucket, prefix) = split(rest);
                if bucket.is_empty() {
                    return Some(refuse(format!("no bucket: give {scheme}://bucket/prefix")));
                }
                let provider = if scheme == "s3" { Provider::S3 } else { Provider::Gcs };
                (provider, format!("{scheme}://{bucket}"), bucket, None, prefix)
            }
            "az" | "azure" | "abfs" | "abfss" => {
                let (authority, prefix) = split(rest);
                let (container, account) = match authority.split_once('@') {
                    Some((container, host)) if scheme != "azure" => {
                        let Some(account) = host.strip_suffix(AZURE_DFS_HOST) else {
                            return Some(refuse(format!(
                                "`{host}` is not an Azure Data Lake account host: give \
                                 {scheme}://container@account{AZURE_DFS_HOST}/prefix"
                            )));
                        };
                        (container.to_string(), Some(account.to_string()))
                    }
                    Some(_) => {
                        return Some(refuse(format!("give {scheme}://container/prefix")));
                    }
                    None => (authority.clone(), None),
                };
                if container.is_empty() || account.as_deref() == Some("") {
                    return Some(refuse(format!("no container: give {scheme}://container/prefix")));
                }
                (Provider::Azure, format!("{scheme}://{authority}"), container, account, prefix)
            }
            "https" => {
                let (host, path) = rest.split_once('/').unwrap_or((rest, ""));
                let account = host
                    .strip_suffix(AZURE_BLOB_HOST)
                    .or_else(|| host.strip_suffix(AZURE_DFS_HOST))
                    .filter(|a| !a.is_empty() && !a.contains('.'))?;
                let (container, prefix) = split(path);
                if container.is_empty() {
                    return Some(refuse(format!("no container: give https://{host}/container/prefix")));
                }
                let root = format!("https://{host}/{container}");
                (Provider::Azure, root, container, Some(account.to_string()), prefix)
            }
            _ => return None,
        };
        Some(Ok(StoreUrl { provider, root, bucket, account, prefix }))
    }

    /// A name for this archive's staging directory, unique to its store, bucket and prefix:
    /// for S3 `<bucket>-<prefix>` (as before there were other stores), for the others the
    /// store first (`gs-<bucket>-<prefix>`, `az-<container>-<prefix>`, with an account the URL
    /// names before the container), every character but letters, digits, `-` and `.` as `_`.
    pub fn staging_tag(&self) -> String {
        let tag = match (self.provider, &self.account) {
            (Provider::S3, _) => format!("{}-{}", self.bucket, self.prefix),
            (Provider::Gcs, _) => format!("gs-{}-{}", self.bucket, self.prefix),
            (Provider::Azure, None) => format!("az-{}-{}", self.bucket, self.prefix),
            (Provider::Azure, Some(a)) => format!("az-{a}-{}-{}", self.bucket, self.prefix),
        };
        tag.chars().map(|c| if c.is_ascii_alphanumeric() || c == '-' || c == '.' { c } else { '_' }).collect()
    }

    /// The store, configured from its provider's environment, as object_store reads it:
    ///
    /// - S3: `AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`, `AWS_SESSION_TOKEN`, `AWS_REGION` (or
    ///   `AWS_DEFAULT_REGION`), `AWS_ENDPOINT` (or `AWS_ENDPOINT_URL`), `AWS_ALLOW_HTTP`, ...
    /// - Google Cloud Storage: `GOOGLE_SERVICE_ACCOUNT` (a service account's JSON key file; its
    ///   `gcs_base_url` and `disable_oauth` fields point the client at an emulator),
    ///   `GOOGLE_SERVICE_ACCOUNT_KEY` (the key itself), `GOOGLE_APPLICATION_CREDENTIALS`, else
    ///   gcloud's application-default credentials, else the instance's metadata server.
    /// - Azure: `AZURE_STORAGE_ACCOUNT_NAME` (unless the URL names the account), with
    ///   `AZURE_STORAGE_ACCOUNT_KEY`, `AZURE_STORAGE_SAS_TOKEN`, `AZURE_STORAGE_TOKEN`, a service
    ///   principal (`AZURE_STORAGE_CLIENT_ID`, `AZURE_STORAGE_CLIENT_SECRET`,
    ///   `AZURE_STORAGE_TENANT_ID`), workload identity (`AZURE_FEDERATED_TOKEN_FILE`) or the
    ///   Azure CLI's login (`AZURE_USE_AZURE_CLI=true`), else the managed identity; `AZURE_STORAGE_USE_EMULATOR=true` for Azurite (at
    ///   `AZURITE_BLOB_STORAGE_URL`, default `http://127.0.0.1:10000`), `AZURE_STORAGE_ENDPOINT`
    ///   for another endpoint.
    ///
    /// Errors: object_store's, as text: a configuration it refuses (no region, a credentials
    /// file it cannot read, no account).
    pub fn open_store(&self) -> Result<Box<dyn ObjectStore>, String> {
        let built: Result<Box<dyn ObjectStore>, object_store::Error> = match self.provider {
            Provider::S3 => {
                AmazonS3Builder::from_env().with_bucket_name(&self.bucket).build().map(|s| Box::new(s) as _)
            }
            Provider::Gcs => GoogleCloudStorageBuilder::from_env()
                .with_bucket_name(&self.bucket)
                .build()
                .map(|s| Box::new(s) as _),
            Provider::Azure => {
                let mut b = MicrosoftAzureBuilder::from_env().with_container_name(&self.bucket);
                if let Some(a) = &self.account {
                    b = b.with_account(a);
                }
                b.build().map(|s| Box::new(s) as _)
            }
        };
        built.map_err(|e| e.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parsed(url: &str) -> StoreUrl {
        StoreUrl::parse(url).expect("an object-store URL").unwrap_or_else(|e| panic!("{url}: {e}"))
    }

    fn refused(url: &str) -> String {
        StoreUrl::parse(url).expect("an object-store URL").unwrap_err().to_string()
    }

    #[test]
    fn each_store_takes_its_url_forms() {
        let want = |provider, root: &str, bucket: &str, account: Option<&str>, prefix: &str| StoreUrl {
            provider,
            root: root.into(),
            bucket: bucket.into(),
            account: account.map(Into::into),
            prefix: prefix.into(),
        };
        use Provider::*;
        assert_eq!(parsed("s3://b/cluster-a/"), want(S3, "s3://b", "b", None, "cluster-a"));
        assert_eq!(parsed("s3://b"), want(S3, "s3://b", "b", None, ""));
        assert_eq!(parsed("gs://b/x/y"), want(Gcs, "gs://b", "b", None, "x/y"));
        assert_eq!(parsed("az://c/p"), want(Azure, "az://c", "c", None, "p"));
        assert_eq!(parsed("azure://c"), want(Azure, "azure://c", "c", None, ""));
        assert_eq!(parsed("abfs://c/p/"), want(Azure, "abfs://c", "c", None, "p"));
        assert_eq!(
            parsed("abfss://c@acct.dfs.core.windows.net/p"),
            want(Azure, "abfss://c@acct.dfs.core.windows.net", "c", Some("acct"), "p")
        );
        assert_eq!(
            parsed("https://acct.blob.core.windows.net/c/p/q"),
            want(Azure, "https://acct.blob.core.windows.net/c", "c", Some("acct"), "p/q")
        );
        assert_eq!(
            parsed("https://acct.dfs.core.windows.net/c"),
            want(Azure, "https://acct.dfs.core.windows.net/c", "c", Some("acct"), "")
        );
    }

    #[test]
    fn a_url_without_a_bucket_or_with_a_foreign_host_is_refused_or_not_taken() {
        // The S3 message is the one S3 archives always had.
        assert_eq!(refused("s3:///p"), "archive target s3:///p: no bucket: give s3://bucket/prefix");
        assert!(refused("gs://").contains("no bucket: give gs://bucket/prefix"));
        assert!(refused("az:///p").contains("no container: give az://container/prefix"));
        assert!(refused("abfss://c@example.com/p").contains("not an Azure Data Lake account host"));
        assert!(refused("azure://c@acct.dfs.core.windows.net/p").contains("give azure://container/prefix"));
        assert!(refused("https://acct.blob.core.windows.net/").contains("no container"));
        for other in ["/var/backups", "ftp://h/p", "https://example.com/c/p", "adl://c/p", "archive"] {
            assert!(StoreUrl::parse(other).is_none(), "{other}");
        }
    }

    #[test]
    fn staging_tags_tell_stores_apart_and_keep_s3s() {
        assert_eq!(parsed("s3://b/cluster-a").staging_tag(), "b-cluster-a");
        assert_eq!(parsed("s3://b/x/y").staging_tag(), "b-x_y");
        assert_eq!(parsed("gs://b/cluster-a").staging_tag(), "gs-b-cluster-a");
        assert_eq!(parsed("az://b/cluster-a").staging_tag(), "az-b-cluster-a");
        assert_eq!(
            parsed("https://acct.blob.core.windows.net/b/cluster-a").staging_tag(),
            "az-acct-b-cluster-a"
        );
    }
}
