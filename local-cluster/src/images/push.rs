//! Pushing an image archive to an OCI registry, as the distribution spec pushes: each blob (the
//! layers, then the config), then the manifest under the tag ([oci-client]). Any registry
//! `docker push` reaches: HTTPS by default, plain HTTP when asked (`--plain-http`, as oras names
//! it), with the credentials `docker login` keeps in `$DOCKER_CONFIG/config.json`.
//!
//! Blobs are read from the archive one at a time: the push holds the largest blob in memory.
//! The registry checks each blob against its digest, so a damaged archive is refused, not stored.
//!
//! [oci-client]: https://docs.rs/oci-client

use std::fs;
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

use oci_client::client::{ClientConfig, ClientProtocol};
use oci_client::secrets::RegistryAuth;
use oci_client::{Client, Reference};

use super::oci::{ArchiveLayout, BlobPlace, MANIFEST_MEDIA_TYPE};
use super::{ImageError, Result, io_err};

/// How to reach the registry.
#[derive(Debug, Clone, Default)]
pub struct PushOptions {
    /// Plain HTTP instead of HTTPS (a registry on loopback or in a cluster).
    pub plain_http: bool,
    /// The Docker client's config (`$DOCKER_CONFIG/config.json`, else `~/.docker/config.json`)
    /// whose `auths` entry for the registry, if any, gives the credentials.
    pub docker_config: Option<PathBuf>,
}

/// What was pushed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pushed {
    /// `registry/repository:tag`.
    pub reference: String,
    /// The manifest's digest: `reference@digest` pulls exactly this image.
    pub digest: String,
    /// Blobs sent, the manifest included, and their bytes.
    pub blobs: usize,
    pub bytes: u64,
}

/// The archive's single image: its manifest and the blobs it names, in push order.
#[derive(Debug)]
struct Image {
    manifest_digest: String,
    manifest: Vec<u8>,
    media_type: String,
    blobs: Vec<(String, BlobPlace)>,
}

/// Pushes the image in the archive at `archive` to `target` (`registry/repository:tag`).
pub async fn push(archive: &Path, target: &str, options: &PushOptions) -> Result<Pushed> {
    let failed = |detail: String| ImageError::Push { reference: target.to_string(), detail };
    let reference: Reference =
        target.parse().map_err(|e| failed(format!("not an image reference (registry/repository:tag): {e}")))?;
    let mut file = fs::File::open(archive).map_err(io_err("opening", archive))?;
    let image = read_image(archive, &mut file)?;
    let registry = reference.resolve_registry().to_string();
    let auth = registry_auth(&registry, options.docker_config.as_deref())?;
    let protocol = if options.plain_http { ClientProtocol::Http } else { ClientProtocol::Https };
    let client = Client::new(ClientConfig { protocol, ..Default::default() });
    let refused = |e: oci_client::errors::OciDistributionError| failed(explain(&registry, options.plain_http, e));
    client.auth(&reference, &auth, oci_client::RegistryOperation::Push).await.map_err(refused)?;

    let mut bytes = 0;
    for (digest, place) in &image.blobs {
        let step = cli_support::progress::step(format!("pushing {digest} ({} MiB)", place.size >> 20));
        let data = read_blob(&mut file, archive, *place)?;
        client.push_blob(&reference, &data, digest).await.map_err(refused)?;
        bytes += place.size;
        step.done();
    }
    let content_type = http::HeaderValue::from_str(&image.media_type)
        .map_err(|e| failed(format!("the manifest's media type {:?}: {e}", image.media_type)))?;
    client.push_manifest_raw(&reference, image.manifest.clone(), content_type).await.map_err(refused)?;
    bytes += image.manifest.len() as u64;
    Ok(Pushed { reference: reference.whole(), digest: image.manifest_digest, blobs: image.blobs.len() + 1, bytes })
}

/// The one image of the archive at `archive`, open as `file` (an archive of several is refused:
/// push an archive of the one alone).
fn read_image(archive: &Path, file: &mut fs::File) -> Result<Image> {
    let bad = |detail: String| ImageError::Push { reference: archive.display().to_string(), detail };
    let layout = ArchiveLayout::read(archive)?;
    let manifests = layout.index["manifests"].as_array().cloned().unwrap_or_default();
    let [entry] = manifests.as_slice() else {
        return Err(bad(format!("its index.json names {} images; push an archive of one", manifests.len())));
    };
    let manifest_digest = entry["digest"].as_str().unwrap_or_default().to_string();
    let place = |digest: &str| {
        layout.blobs.get(digest).copied().ok_or_else(|| bad(format!("blob {digest} is named but not in the archive")))
    };
    let manifest = read_blob(file, archive, place(&manifest_digest)?)?;
    let parsed: serde_json::Value =
        serde_json::from_slice(&manifest).map_err(|e| bad(format!("its manifest {manifest_digest}: {e}")))?;
    let media_type = parsed["mediaType"].as_str().or(entry["mediaType"].as_str()).unwrap_or(MANIFEST_MEDIA_TYPE);
    let mut blobs = Vec::new();
    let descriptors = parsed["layers"].as_array().into_iter().flatten().chain([&parsed["config"]]);
    for descriptor in descriptors {
        let digest = descriptor["digest"]
            .as_str()
            .ok_or_else(|| bad(format!("its manifest {manifest_digest} has a descriptor with no digest")))?;
        if !blobs.iter().any(|(d, _)| d == digest) {
            blobs.push((digest.to_string(), place(digest)?));
        }
    }
    Ok(Image { manifest_digest, manifest, media_type: media_type.to_string(), blobs })
}

fn read_blob(file: &mut fs::File, archive: &Path, place: BlobPlace) -> Result<Vec<u8>> {
    let mut data = vec![0; place.size as usize];
    file.seek(SeekFrom::Start(place.offset)).map_err(io_err("reading", archive))?;
    file.read_exact(&mut data).map_err(io_err("reading", archive))?;
    Ok(data)
}

/// What to do about a failed request, said with the registry's answer.
fn explain(registry: &str, plain_http: bool, error: oci_client::errors::OciDistributionError) -> String {
    use oci_client::errors::OciDistributionError as E;
    use oci_client::errors::OciErrorCode as Code;
    let refused = match &error {
        E::AuthenticationFailure(_) | E::UnauthorizedError { .. } | E::ServerError { code: 401 | 403, .. } => true,
        E::RegistryError { envelope, .. } => {
            envelope.errors.iter().any(|e| matches!(e.code, Code::Unauthorized | Code::Denied))
        }
        _ => false,
    };
    let hint = match &error {
        _ if refused => format!(
            ": log in to {registry} (docker login {registry}, which writes the $DOCKER_CONFIG/config.json this reads)"
        ),
        E::RequestError(e) if e.is_connect() && !plain_http => {
            format!(": is {registry} up, and does it serve HTTPS? (--plain-http for a plain HTTP registry)")
        }
        E::RequestError(e) if e.is_connect() => format!(": is {registry} up?"),
        E::RequestError(e) if !plain_http && e.is_request() => {
            format!(": if {registry} serves plain HTTP, add --plain-http")
        }
        _ => String::new(),
    };
    // reqwest's own message hides its cause (connection refused, a TLS record from a plain
    // HTTP server): say each.
    let mut said = error.to_string();
    let mut cause = std::error::Error::source(&error);
    while let Some(source) = cause {
        said = format!("{said}: {source}");
        cause = source.source();
    }
    format!("{registry}: {said}{hint}")
}

/// The credentials `docker login` stored for `registry` in the Docker client's config, or none
/// (anonymous: a registry that needs them says so when pushed to).
fn registry_auth(registry: &str, config: Option<&Path>) -> Result<RegistryAuth> {
    let path = match config {
        Some(path) => path.to_path_buf(),
        None => match std::env::var_os("DOCKER_CONFIG") {
            Some(dir) => PathBuf::from(dir).join("config.json"),
            None => match std::env::var_os("HOME") {
                Some(home) => PathBuf::from(home).join(".docker/config.json"),
                None => return Ok(RegistryAuth::Anonymous),
            },
        },
    };
    let text = match fs::read(&path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(RegistryAuth::Anonymous),
        Err(e) => return Err(ImageError::Io { action: "reading", path, source: e }),
    };
    let bad = |detail: String| ImageError::Push {
        reference: registry.to_string(),
        detail: format!("{}: {detail}", path.display()),
    };
    let config: serde_json::Value = serde_json::from_slice(&text).map_err(|e| bad(format!("not JSON: {e}")))?;
    let entry = config["auths"]
        .as_object()
        .and_then(|auths| auths.iter().find(|(host, _)| auth_host(host) == registry).map(|(_, entry)| entry));
    let Some(entry) = entry else {
        if config["credHelpers"].get(registry).is_some() || config["credsStore"].is_string() {
            return Err(bad(format!(
                "{registry}'s credentials are in a credential helper, which this does not run: write them to auths (docker login with no credsStore)"
            )));
        }
        return Ok(RegistryAuth::Anonymous);
    };
    if let (Some(user), Some(password)) = (entry["username"].as_str(), entry["password"].as_str()) {
        return Ok(RegistryAuth::Basic(user.into(), password.into()));
    }
    let Some(encoded) = entry["auth"].as_str() else {
        return Ok(RegistryAuth::Anonymous);
    };
    use base64::Engine as _;
    let decoded = base64::engine::general_purpose::STANDARD
        .decode(encoded.trim())
        .ok()
        .and_then(|d| String::from_utf8(d).ok())
        .ok_or_else(|| bad(format!("auths.{registry}.auth is not base64 of user:password")))?;
    let (user, password) =
        decoded.split_once(':').ok_or_else(|| bad(format!("auths.{registry}.auth is not base64 of user:password")))?;
    Ok(RegistryAuth::Basic(user.into(), password.into()))
}

/// A key of `auths` as the registry host it names: `https://index.docker.io/v1/` is Docker Hub's,
/// and a scheme or path around a host is dropped, as the Docker client does.
fn auth_host(key: &str) -> &str {
    let host = key.trim_start_matches("https://").trim_start_matches("http://");
    let host = host.split('/').next().unwrap_or(host);
    if host == "index.docker.io" { "docker.io" } else { host }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::images::oci::{digest, files_layer, write_archive};

    fn auth_of(config: &str, registry: &str) -> std::result::Result<RegistryAuth, String> {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("config.json");
        fs::write(&path, config).unwrap();
        registry_auth(registry, Some(&path)).map_err(|e| e.to_string())
    }

    fn basic(auth: std::result::Result<RegistryAuth, String>) -> Option<(String, String)> {
        match auth.unwrap() {
            RegistryAuth::Basic(user, password) => Some((user, password)),
            _ => None,
        }
    }

    #[test]
    fn credentials_come_from_the_docker_config_entry_of_the_registry() {
        // base64("ci:s3cret")
        let config = r#"{"auths": {"https://registry.example:5000/v2/": {"auth": "Y2k6czNjcmV0"},
                         "other.example": {"username": "u", "password": "p"}}}"#;
        assert_eq!(basic(auth_of(config, "registry.example:5000")), Some(("ci".into(), "s3cret".into())));
        assert_eq!(basic(auth_of(config, "other.example")), Some(("u".into(), "p".into())));
        assert_eq!(basic(auth_of(config, "unknown.example")), None, "a registry with no entry is pushed anonymously");
        let hub = r#"{"auths": {"https://index.docker.io/v1/": {"auth": "Y2k6czNjcmV0"}}}"#;
        assert_eq!(basic(auth_of(hub, "docker.io")), Some(("ci".into(), "s3cret".into())));
    }

    #[test]
    fn unreadable_credentials_are_refused_naming_the_file_and_the_registry() {
        let error = auth_of(r#"{"auths": {"r.example": {"auth": "no colon?"}}}"#, "r.example").unwrap_err();
        assert!(error.contains("config.json") && error.contains("auths.r.example.auth"), "{error}");
        let helper = auth_of(r#"{"credsStore": "desktop"}"#, "r.example").unwrap_err();
        assert!(helper.contains("credential helper"), "{helper}");
        let not_json = auth_of("{", "r.example").unwrap_err();
        assert!(not_json.contains("not JSON"), "{not_json}");
        let missing = registry_auth("r.example", Some(Path::new("/no/such/config.json"))).unwrap();
        assert!(matches!(missing, RegistryAuth::Anonymous));
    }

    #[test]
    fn an_archives_image_is_pushed_layers_first_then_its_config_then_its_manifest() {
        let dir = tempfile::tempdir().unwrap();
        let archive = dir.path().join("x.oci.tar");
        let (a, b) = (files_layer(&[("a", b"a", 0o644)]).unwrap(), files_layer(&[("b", b"b", 0o644)]).unwrap());
        write_archive(&archive, "registry.example/x:v1", &[&a, &b], serde_json::json!({})).unwrap();
        let mut file = fs::File::open(&archive).unwrap();
        let image = read_image(&archive, &mut file).unwrap();
        let order: Vec<&str> = image.blobs.iter().map(|(d, _)| d.as_str()).collect();
        assert_eq!(order[..2], [digest(&a), digest(&b)]);
        assert_eq!(order.len(), 3, "two layers and the config");
        for (blob_digest, place) in &image.blobs {
            assert_eq!(&digest(&read_blob(&mut file, &archive, *place).unwrap()), blob_digest);
        }
        assert_eq!(digest(&image.manifest), image.manifest_digest);
        assert_eq!(image.media_type, MANIFEST_MEDIA_TYPE);
    }

    #[test]
    fn an_archive_that_is_no_single_image_is_refused_saying_what_it_holds() {
        let dir = tempfile::tempdir().unwrap();
        let plain = dir.path().join("plain.tar");
        fs::write(&plain, files_layer(&[("a", b"a", 0o644)]).unwrap()).unwrap();
        let error = read_image(&plain, &mut fs::File::open(&plain).unwrap()).unwrap_err().to_string();
        assert!(error.contains("not an OCI image archive"), "{error}");
    }

    #[tokio::test]
    async fn a_reference_that_names_no_image_is_refused_before_anything_is_read() {
        let error = push(Path::new("/no/such.tar"), "UPPER/Case:tag", &PushOptions::default()).await.unwrap_err();
        assert!(error.to_string().contains("not an image reference"), "{error}");
    }
}
