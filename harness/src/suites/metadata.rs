//! `$ARTIFACTS/metadata.json` when a suite runs as kubetest2's exec tester
//! (`kubetest2 <deployer> --test=exec -- harness suite ...`). kubetest2's ginkgo tester records
//! the tested version as `job-version`, which TestGrid shows as the column's version; its exec
//! tester writes `job-version: ""` before starting the command, so the command fills it in: the
//! version of the server it tested. Every other key is kept as it was.

use std::collections::BTreeMap;
use std::fs;
use std::io;
use std::path::Path;

/// The key TestGrid reads the tested version from.
pub const JOB_VERSION: &str = "job-version";

/// Sets `job-version` to `version` in `<artifacts>/metadata.json` when it is missing or empty;
/// `Ok(false)` when it already names a version (a deployer's or tester's, left alone).
pub fn record_job_version(artifacts: &Path, version: &str) -> io::Result<bool> {
    let file = artifacts.join("metadata.json");
    let mut metadata: BTreeMap<String, serde_json::Value> = match fs::read(&file) {
        Ok(bytes) => serde_json::from_slice(&bytes).map_err(|e| {
            io::Error::new(io::ErrorKind::InvalidData, format!("{} is not a JSON object: {e}", file.display()))
        })?,
        Err(e) if e.kind() == io::ErrorKind::NotFound => BTreeMap::new(),
        Err(e) => return Err(e),
    };
    if metadata.get(JOB_VERSION).and_then(|v| v.as_str()).is_some_and(|v| !v.is_empty()) {
        return Ok(false);
    }
    metadata.insert(JOB_VERSION.into(), serde_json::Value::String(version.into()));
    fs::create_dir_all(artifacts)?;
    let text = serde_json::to_vec(&metadata).expect("a map of JSON values serialises");
    // Written whole and renamed, so a reader never sees half a file.
    let partial = artifacts.join(".metadata.json.partial");
    fs::write(&partial, text)?;
    fs::rename(&partial, &file)?;
    Ok(true)
}

/// The `gitVersion` of the cluster's API server (`v1.37.1`).
pub async fn server_version(kubeconfig: &Path) -> Result<String, String> {
    let client = super::cloud_e2e::client(kubeconfig).await?;
    client.apiserver_version().await.map(|info| info.git_version).map_err(|e| format!("GET /version: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fills_the_empty_job_version_kubetest2s_exec_tester_leaves() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("metadata.json");
        fs::write(&file, r#"{"kubetest-version":"v0.0.1","tester-version":"v0.0.1","job-version":""}"#).unwrap();
        assert!(record_job_version(dir.path(), "v1.37.1").unwrap());
        let written: BTreeMap<String, String> = serde_json::from_slice(&fs::read(&file).unwrap()).unwrap();
        assert_eq!(written.get("job-version").map(String::as_str), Some("v1.37.1"));
        assert_eq!(written.get("kubetest-version").map(String::as_str), Some("v0.0.1"));
        assert_eq!(written.len(), 3);
    }

    #[test]
    fn creates_the_file_and_leaves_a_version_already_there() {
        let dir = tempfile::tempdir().unwrap();
        assert!(record_job_version(&dir.path().join("artifacts"), "v1.36.4").unwrap());
        let file = dir.path().join("artifacts/metadata.json");
        assert_eq!(fs::read_to_string(&file).unwrap(), r#"{"job-version":"v1.36.4"}"#);
        assert!(!record_job_version(&dir.path().join("artifacts"), "v1.37.1").unwrap());
        assert_eq!(fs::read_to_string(&file).unwrap(), r#"{"job-version":"v1.36.4"}"#);
    }

    #[test]
    fn a_file_that_is_not_an_object_is_reported_and_kept() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("metadata.json");
        fs::write(&file, "[1, 2]").unwrap();
        let err = record_job_version(dir.path(), "v1.37.1").unwrap_err();
        assert!(err.to_string().contains("is not a JSON object"), "{err}");
        assert_eq!(fs::read_to_string(&file).unwrap(), "[1, 2]");
    }
}
