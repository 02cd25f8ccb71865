use super::*;

const BOUNDARY: &str = "XyZ-boundary";
const CONTENT_TYPE: &str = "multipart/form-data; boundary=XyZ-boundary";

enum Part<'a> {
    Text(&'a str, &'a str),
    File(&'a str, &'a [u8]),
}

fn body(parts: &[Part]) -> Vec<u8> {
    let mut out = Vec::new();
    for part in parts {
        out.extend_from_slice(format!("--{BOUNDARY}\r\n").as_bytes());
        let (disposition, bytes) = match part {
            Part::Text(name, value) => (format!("form-data; name=\"{name}\""), value.as_bytes()),
            Part::File(path, bytes) => (format!("form-data; name=\"file\"; filename=\"{path}\""), *bytes),
        };
        out.extend_from_slice(format!("Content-Disposition: {disposition}\r\n\r\n").as_bytes());
        out.extend_from_slice(bytes);
        out.extend_from_slice(b"\r\n");
    }
    out.extend_from_slice(format!("--{BOUNDARY}--\r\n").as_bytes());
    out
}

fn build(extra: &[Part]) -> Vec<u8> {
    let mut parts = vec![
        Part::Text("job", "ci-local-e2e"),
        Part::Text("build", "1001"),
        Part::File("started.json", br#"{"timestamp": 1}"#),
    ];
    parts.extend(extra.iter().map(|p| match p {
        Part::Text(a, b) => Part::Text(a, b),
        Part::File(a, b) => Part::File(a, b),
    }));
    body(&parts)
}

fn read(body: &[u8]) -> Result<Upload, UploadError> {
    read_bytes(CONTENT_TYPE, body, &Limits::default())
}

#[test]
fn a_build_is_read_with_its_files_in_order() {
    let upload = read(&build(&[
        Part::File("artifacts/junit_01.xml", b"<testsuite/>"),
        Part::File("finished.json", br#"{"passed": true}"#),
    ]))
    .unwrap();
    assert_eq!((upload.job.as_str(), upload.build.as_str()), ("ci-local-e2e", "1001"));
    assert_eq!((upload.pull, upload.org_repo.as_deref()), (None, None));
    let paths: Vec<&str> = upload.files.iter().map(|f| f.path.as_str()).collect();
    assert_eq!(paths, ["started.json", "artifacts/junit_01.xml", "finished.json"]);
    assert_eq!(&upload.file("finished.json").unwrap().bytes[..], br#"{"passed": true}"#);
}

#[test]
fn a_presubmit_needs_both_its_fields() {
    let upload = read(&build(&[Part::Text("pull", "42"), Part::Text("org_repo", "kubernetes_kubernetes")])).unwrap();
    assert_eq!((upload.pull, upload.org_repo.as_deref()), (Some(42), Some("kubernetes_kubernetes")));
    assert!(matches!(read(&build(&[Part::Text("pull", "42")])), Err(UploadError::HalfPresubmit)));
    assert!(matches!(read(&build(&[Part::Text("pull", "x")])), Err(UploadError::BadPull { .. })));
}

#[test]
fn paths_that_could_leave_the_build_directory_are_refused() {
    for path in ["../../x", "artifacts/../../x", "/etc/passwd", "artifacts//x", "artifacts/./x", "artifacts\\..\\x", ""]
    {
        assert!(matches!(check_path(path), Err(UploadError::BadPath { .. })), "{path:?} got through");
    }
    let refused = read(&build(&[Part::File("../../x", b"owned")])).unwrap_err();
    assert!(matches!(refused, UploadError::BadPath { ref path, .. } if path == "../../x"), "{refused}");
    assert_eq!(refused.status(), 400);
    assert!(refused.to_string().contains("inside the build directory"), "{refused}");
}

#[test]
fn only_files_of_a_prow_build_directory_are_taken() {
    for path in ["started.json", "build-log.txt", "artifacts/junit_runner.xml", "artifacts/sub/dir/a.log"] {
        check_path(path).unwrap();
    }
    for path in ["latest-build.txt", "x.json", "artifactsx/junit.xml", "artifacts"] {
        assert!(check_path(path).is_err(), "{path:?} got through");
    }
}

#[test]
fn limits_are_413_and_the_rest_400() {
    let small = Limits { max_body_bytes: 4096, max_file_bytes: 100, max_files: 2 };
    let big_file = vec![b'x'; 200];
    let err = read_bytes(CONTENT_TYPE, &build(&[Part::File("build-log.txt", &big_file)]), &small).unwrap_err();
    assert!(matches!(err, UploadError::FileTooLarge { ref path, limit: 100 } if path == "build-log.txt"), "{err}");
    assert_eq!(err.status(), 413);

    let huge = vec![b'x'; 8192];
    let roomy_files = Limits { max_file_bytes: 1 << 20, ..small };
    let err = read_bytes(CONTENT_TYPE, &build(&[Part::File("build-log.txt", &huge)]), &roomy_files).unwrap_err();
    assert!(matches!(err, UploadError::TooLarge { limit: 4096 }), "{err}");
    assert_eq!(err.status(), 413);

    let three = build(&[Part::File("artifacts/a", b"1"), Part::File("artifacts/b", b"2")]);
    let err = read_bytes(CONTENT_TYPE, &three, &small).unwrap_err();
    assert!(matches!(err, UploadError::TooManyFiles { limit: 2 }), "{err}");
    assert_eq!(err.status(), 413);
}

#[test]
fn malformed_bodies_get_a_message_not_a_panic() {
    let cases: Vec<(&str, Vec<u8>)> = vec![
        ("truncated", build(&[])[..60].to_vec()),
        ("no closing boundary", b"--XyZ-boundary\r\nContent-Disposition: form-data; name=\"job\"\r\n\r\nx".to_vec()),
        ("garbage", b"\x00\x01 not multipart at all".to_vec()),
        ("empty", Vec::new()),
    ];
    for (what, body) in cases {
        let err = read(&body).unwrap_err();
        assert_eq!(err.status(), 400, "{what}: {err}");
    }
    let err = read_bytes("application/json", b"{}", &Limits::default()).unwrap_err();
    assert_eq!(err.status(), 415, "{err}");
    let err = read_bytes("multipart/form-data", b"", &Limits::default()).unwrap_err();
    assert_eq!(err.status(), 415, "no boundary: {err}");
}

#[test]
fn fields_are_checked() {
    let missing_build = body(&[Part::Text("job", "j"), Part::File("started.json", b"{}")]);
    assert!(matches!(read(&missing_build), Err(UploadError::MissingField { name: "build" })));
    let no_started = body(&[Part::Text("job", "j"), Part::Text("build", "1")]);
    assert!(matches!(read(&no_started), Err(UploadError::MissingStarted)));
    assert!(matches!(read(&build(&[Part::Text("job", "again")])), Err(UploadError::DuplicateField { name: "job" })));
    assert!(matches!(read(&build(&[Part::Text("color", "red")])), Err(UploadError::UnknownField { .. })));
    let twice = build(&[Part::File("started.json", b"{}")]);
    assert!(matches!(read(&twice), Err(UploadError::DuplicateFile { .. })));
    let long = "x".repeat(300);
    assert!(matches!(read(&build(&[Part::Text("org_repo", &long)])), Err(UploadError::BadText { name: "org_repo" })));
}

#[test]
fn a_file_and_a_directory_of_the_same_path_are_refused() {
    let both = build(&[Part::File("artifacts/x/y", b"inside"), Part::File("artifacts/x", b"a file")]);
    let err = read(&both).unwrap_err();
    assert!(
        matches!(err, UploadError::FileAndDirectory { ref file, ref inside } if file == "artifacts/x" && inside == "artifacts/x/y"),
        "{err}"
    );
    assert_eq!(err.status(), 400);
    read(&build(&[Part::File("artifacts/x/y", b"1"), Part::File("artifacts/xy", b"2")])).unwrap();
}
