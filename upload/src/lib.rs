//! The wire format of a build posted to the harness's ingestion API (`POST /api/v1/builds`), and
//! its reader.
//!
//! The body is `multipart/form-data`:
//! - text fields [`JOB`] and [`BUILD`] (Prow's `JOB_NAME` and `BUILD_ID`), and for a presubmit
//!   [`PULL`] and [`ORG_REPO`] (`<org>_<repo>`, as Prow spells it in `pr-logs/pull/`);
//! - one [`FILE`] part per file of the build directory, its file name the path relative to that
//!   directory: `started.json`, `finished.json`, `build-log.txt`, `artifacts/junit_01.xml`, ...
//!
//! The reader enforces [`Limits`] while it streams (a body or a file over its limit stops the read
//! at the limit) and checks every file name with [`check_path`] — a path that could leave the build
//! directory never gets through. Everything is checked before the caller writes anything, so a
//! refused upload leaves nothing behind. Each [`UploadError`] carries the HTTP status it maps to.

use std::collections::BTreeSet;

use bytes::Bytes;
use futures::Stream;

/// The job's name (Prow's `JOB_NAME`).
/// Where the ingestion API takes a build: `POST` a body in this format to it.
pub const PATH: &str = "/api/v1/builds";

pub const JOB: &str = "job";
/// The build's id (Prow's `BUILD_ID`).
pub const BUILD: &str = "build";
/// For a presubmit: the pull request's number.
pub const PULL: &str = "pull";
/// For a presubmit: the repository, `<org>_<repo>`.
pub const ORG_REPO: &str = "org_repo";
/// A file of the build directory; its file name is its path in the directory.
pub const FILE: &str = "file";

/// Files a build directory may hold at its top; everything else goes under `artifacts/`.
/// (`latest-build.txt` is not among them: the service moves it, never the uploader.)
pub const TOP_LEVEL_FILES: &[&str] = &[
    "started.json",
    "finished.json",
    "build-log.txt",
    "prowjob.json",
    "podinfo.json",
    "clone-log.txt",
    "clone-records.json",
];
const ARTIFACTS_DIR: &str = "artifacts/";
const MAX_PATH_BYTES: usize = 512;
const MAX_TEXT_FIELD_BYTES: u64 = 256;

/// What one upload may hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// The whole body, all parts and their headers.
    pub max_body_bytes: u64,
    /// Each file.
    pub max_file_bytes: u64,
    pub max_files: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits { max_body_bytes: 64 * 1024 * 1024, max_file_bytes: 32 * 1024 * 1024, max_files: 1000 }
    }
}

/// A build as uploaded: where it goes and its files, in the order they came.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Upload {
    pub job: String,
    pub build: String,
    pub pull: Option<u64>,
    pub org_repo: Option<String>,
    pub files: Vec<UploadedFile>,
}

impl Upload {
    /// The file at `path`, if it was uploaded.
    pub fn file(&self, path: &str) -> Option<&UploadedFile> {
        self.files.iter().find(|f| f.path == path)
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UploadedFile {
    /// Relative to the build directory, `/`-separated, checked by [`check_path`].
    pub path: String,
    pub bytes: Bytes,
}

#[derive(Debug, thiserror::Error)]
pub enum UploadError {
    #[error("Content-Type is {content_type:?}: send the build as multipart/form-data (harness publish --remote does)")]
    NotMultipart { content_type: String },
    #[error(
        "the upload is larger than the {limit}-byte limit: leave large logs out, or ask the operator to raise --max-upload-bytes"
    )]
    TooLarge { limit: u64 },
    #[error("file {path:?} is larger than the {limit}-byte limit for one file")]
    FileTooLarge { path: String, limit: u64 },
    #[error("the upload has more than {limit} files, the limit for one build")]
    TooManyFiles { limit: usize },
    #[error("malformed multipart body: {0}")]
    Malformed(String),
    #[error("unknown field {name:?}: the fields are {JOB}, {BUILD}, {PULL}, {ORG_REPO} and {FILE}")]
    UnknownField { name: String },
    #[error("field {name:?} is missing")]
    MissingField { name: &'static str },
    #[error("field {name:?} was sent twice")]
    DuplicateField { name: &'static str },
    #[error("field {name:?} is not UTF-8 text of at most {MAX_TEXT_FIELD_BYTES} bytes")]
    BadText { name: &'static str },
    #[error("field {PULL:?} is {value:?}, not a pull request number")]
    BadPull { value: String },
    #[error("{PULL:?} and {ORG_REPO:?} go together: send both for a presubmit, neither for a periodic")]
    HalfPresubmit,
    #[error("a {FILE:?} part has no file name: give each file its path in the build directory")]
    UnnamedFile,
    #[error("file {path:?} was sent twice")]
    DuplicateFile { path: String },
    #[error("{file:?} is sent as a file and as a directory (of {inside:?}): a build directory holds one or the other")]
    FileAndDirectory { file: String, inside: String },
    #[error("file name {path:?} refused: {reason}")]
    BadPath { path: String, reason: &'static str },
    #[error("started.json is missing: every build directory has one")]
    MissingStarted,
}

impl UploadError {
    /// The HTTP status the error is answered with.
    pub fn status(&self) -> u16 {
        match self {
            UploadError::NotMultipart { .. } => 415,
            UploadError::TooLarge { .. } | UploadError::FileTooLarge { .. } | UploadError::TooManyFiles { .. } => 413,
            _ => 400,
        }
    }
}

/// Checks a file's path in the build directory: relative, `/`-separated, no `.` or `..` segment,
/// no empty segment, no control character or backslash, and either a file Prow keeps at the top
/// of a build directory ([`TOP_LEVEL_FILES`]) or under `artifacts/`.
pub fn check_path(path: &str) -> Result<(), UploadError> {
    let refuse = |reason| Err(UploadError::BadPath { path: path.to_owned(), reason });
    if path.is_empty() {
        return refuse("empty");
    }
    if path.len() > MAX_PATH_BYTES {
        return refuse("longer than 512 bytes");
    }
    if path.starts_with('/') {
        return refuse("absolute: give the path relative to the build directory");
    }
    if path.chars().any(|c| c.is_control() || c == '\\') {
        return refuse("holds a control character or a backslash");
    }
    if path.split('/').any(|segment| matches!(segment, "" | "." | "..")) {
        return refuse("has an empty, `.` or `..` segment: it must stay inside the build directory");
    }
    if TOP_LEVEL_FILES.contains(&path) {
        return Ok(());
    }
    if path.starts_with(ARTIFACTS_DIR) {
        return Ok(());
    }
    refuse("not a file of a Prow build directory: use started.json, finished.json, build-log.txt or artifacts/…")
}

/// The boundary of a `multipart/form-data` Content-Type.
pub fn boundary(content_type: &str) -> Result<String, UploadError> {
    let not_multipart = || UploadError::NotMultipart { content_type: content_type.to_owned() };
    if !content_type.trim_start().to_ascii_lowercase().starts_with("multipart/form-data") {
        return Err(not_multipart());
    }
    multer::parse_boundary(content_type).map_err(|_| not_multipart())
}

/// Reads an upload from a body stream under `limits`.
pub async fn read<S, O, E>(content_type: &str, body: S, limits: &Limits) -> Result<Upload, UploadError>
where
    S: Stream<Item = Result<O, E>> + Send + 'static,
    O: Into<Bytes> + 'static,
    E: Into<Box<dyn std::error::Error + Send + Sync>> + 'static,
{
    let boundary = boundary(content_type)?;
    let sizes = multer::SizeLimit::new().whole_stream(limits.max_body_bytes).per_field(limits.max_file_bytes);
    let mut multipart =
        multer::Multipart::with_constraints(body, boundary, multer::Constraints::new().size_limit(sizes));
    let mut fields = Fields::default();
    let mut files = Vec::new();
    let mut paths = BTreeSet::new();
    while let Some(field) = multipart.next_field().await.map_err(|e| multer_error(e, limits))? {
        let name = field.name().unwrap_or_default().to_owned();
        if name == FILE {
            let path = field.file_name().ok_or(UploadError::UnnamedFile)?.to_owned();
            check_path(&path)?;
            if files.len() == limits.max_files {
                return Err(UploadError::TooManyFiles { limit: limits.max_files });
            }
            if !paths.insert(path.clone()) {
                return Err(UploadError::DuplicateFile { path });
            }
            let bytes = field.bytes().await.map_err(|e| match e {
                multer::Error::FieldSizeExceeded { limit, .. } => {
                    UploadError::FileTooLarge { path: path.clone(), limit }
                }
                e => multer_error(e, limits),
            })?;
            files.push(UploadedFile { path, bytes });
        } else {
            let slot = fields.slot(&name)?;
            let bytes = field.bytes().await.map_err(|e| multer_error(e, limits))?;
            slot.set(bytes)?;
        }
    }
    check_files_and_directories(&paths)?;
    fields.into_upload(files)
}

/// Refuses `artifacts/x` beside `artifacts/x/y`: no store holds both as a directory tree.
fn check_files_and_directories(paths: &BTreeSet<String>) -> Result<(), UploadError> {
    for path in paths {
        let mut directories = path.match_indices('/').map(|(at, _)| &path[..at]);
        if let Some(file) = directories.find(|dir| paths.contains(*dir)) {
            return Err(UploadError::FileAndDirectory { file: file.to_owned(), inside: path.clone() });
        }
    }
    Ok(())
}

/// [`read`] over a body in memory (tests and the fuzz target).
pub fn read_bytes(content_type: &str, body: &[u8], limits: &Limits) -> Result<Upload, UploadError> {
    let body = Bytes::copy_from_slice(body);
    let stream = futures::stream::once(async move { Ok::<Bytes, std::io::Error>(body) });
    futures::executor::block_on(read(content_type, stream, limits))
}

fn multer_error(error: multer::Error, limits: &Limits) -> UploadError {
    match error {
        multer::Error::StreamSizeExceeded { .. } => UploadError::TooLarge { limit: limits.max_body_bytes },
        multer::Error::FieldSizeExceeded { field_name, .. } => {
            UploadError::BadText { name: text_field(field_name.as_deref().unwrap_or_default()).unwrap_or(FILE) }
        }
        error => UploadError::Malformed(error.to_string()),
    }
}

fn text_field(name: &str) -> Option<&'static str> {
    [JOB, BUILD, PULL, ORG_REPO].into_iter().find(|known| *known == name)
}

/// The text fields as they arrive.
#[derive(Default)]
struct Fields {
    job: TextField,
    build: TextField,
    pull: TextField,
    org_repo: TextField,
}

#[derive(Default)]
struct TextField {
    name: &'static str,
    value: Option<String>,
}

impl TextField {
    fn set(&mut self, bytes: Bytes) -> Result<(), UploadError> {
        if self.value.is_some() {
            return Err(UploadError::DuplicateField { name: self.name });
        }
        if bytes.len() as u64 > MAX_TEXT_FIELD_BYTES {
            return Err(UploadError::BadText { name: self.name });
        }
        let text = String::from_utf8(bytes.to_vec()).map_err(|_| UploadError::BadText { name: self.name })?;
        self.value = Some(text.trim().to_owned());
        Ok(())
    }
}

impl Fields {
    fn slot(&mut self, name: &str) -> Result<&mut TextField, UploadError> {
        let slot = match text_field(name) {
            Some(JOB) => &mut self.job,
            Some(BUILD) => &mut self.build,
            Some(PULL) => &mut self.pull,
            Some(ORG_REPO) => &mut self.org_repo,
            _ => return Err(UploadError::UnknownField { name: name.chars().take(64).collect() }),
        };
        slot.name = text_field(name).unwrap_or_default();
        Ok(slot)
    }

    fn into_upload(self, files: Vec<UploadedFile>) -> Result<Upload, UploadError> {
        let job = self.job.value.ok_or(UploadError::MissingField { name: JOB })?;
        let build = self.build.value.ok_or(UploadError::MissingField { name: BUILD })?;
        let pull = match self.pull.value {
            Some(value) => Some(value.parse::<u64>().map_err(|_| UploadError::BadPull { value })?),
            None => None,
        };
        if pull.is_some() != self.org_repo.value.is_some() {
            return Err(UploadError::HalfPresubmit);
        }
        if !files.iter().any(|f| f.path == "started.json") {
            return Err(UploadError::MissingStarted);
        }
        Ok(Upload { job, build, pull, org_repo: self.org_repo.value, files })
    }
}

#[cfg(test)]
mod tests;
