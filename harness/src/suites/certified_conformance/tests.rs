//! The `certified-conformance` suite with stand-in `ginkgo` and `e2e.test` (the real ones against
//! a real cluster are in the e2e package's `suites` tests): its command line, the submission it
//! writes, and a run the checks refuse.

use std::fs;
use std::path::Path;
use std::time::Duration;

use super::*;
use config::template::Vars;

fn ctx(root: &Path) -> SuiteContext {
    SuiteContext {
        kubeconfig: root.join("kubeconfig"),
        artifacts: root.join("artifacts"),
        provider: "local".into(),
        kubernetes_version: "v1.37.1".into(),
        vars: Vars::new(),
        timeout: Duration::from_secs(10800),
    }
}

fn product() -> Product {
    Product {
        vendor: "cloud-provider-harness".into(),
        name: "Reference CCM".into(),
        version: "0.1.0".into(),
        website_url: "https://github.com/cloud-provider-harness/cloud-provider-harness".into(),
        repo_url: Some("https://github.com/cloud-provider-harness/cloud-provider-harness".into()),
        documentation_url: "https://github.com/cloud-provider-harness/cloud-provider-harness/blob/main/README.md"
            .into(),
        product_logo_url: None,
        product_type: "installer".into(),
        description: "The reference cloud-controller-manager on a local cluster.".into(),
        contact_email_address: "harness@example.org".into(),
    }
}

fn about() -> About {
    About {
        tool: "cloud-provider-harness 0.1.0 (commit abc1234)".into(),
        cluster: vec!["3 real nodes".into()],
        components: vec![("Kubernetes".into(), "v1.37.1".into())],
        configuration: "name: local\n".into(),
        steps: vec![("Run".into(), "harness run --suites certified-conformance".into())],
    }
}

fn suite() -> CertifiedConformanceSuite {
    CertifiedConformanceSuite::new("certified-conformance", 4, product(), about(), "v1.37".parse().unwrap())
}

const LIST: &str = "- codename: '[sig-a] passes [Conformance]'\n  release: v1.9\n\
                    - codename: '[sig-b] also passes [Conformance]'\n  release: v1.37\n";

/// Stand-ins: `e2e.test --list-conformance-tests` prints [`LIST`]; `ginkgo` prints what a verbose
/// run prints and writes a JUnit whose second case has `second` as its status.
fn fakes(root: &Path, second: &str) -> Binaries {
    let bin = root.join("bin");
    fs::create_dir_all(&bin).unwrap();
    let binaries =
        Binaries { e2e_test: bin.join("e2e.test"), ginkgo: bin.join("ginkgo"), kubectl: bin.join("kubectl") };
    fs::write(root.join("list.yaml"), LIST).unwrap();
    let failure = if second == "failed" { "<failure message=\"x\">x</failure>" } else { "" };
    let junit = format!(
        "<testsuites><testsuite name=\"Kubernetes e2e suite\"><properties>\
         <property name=\"SkipStrings\" value=\"\"></property><property name=\"DryRun\" value=\"false\"></property>\
         </properties><testcase name=\"[It] [sig-a] passes [Conformance]\" status=\"passed\"></testcase>\
         <testcase name=\"[It] [sig-b] also passes [Conformance]\" status=\"{second}\">{failure}</testcase>\
         </testsuite></testsuites>"
    );
    fs::write(root.join("junit.xml"), junit).unwrap();
    let (verdict, passed, failed) = if second == "failed" { ("FAIL!", 1, 1) } else { ("SUCCESS!", 2, 0) };
    let scripts = [
        (
            &binaries.e2e_test,
            format!("#!/bin/sh\n[ \"$1\" = --list-conformance-tests ] && cat {}\n", root.join("list.yaml").display()),
        ),
        (
            &binaries.ginkgo,
            format!(
                "#!/bin/sh\necho \"ginkgo $*\"\nfor a in \"$@\"; do case \"$a\" in --report-dir=*) dir=${{a#--report-dir=}};; esac; done\n\
                 echo 'Nov 28 10:00:00.000: INFO: e2e test version: v1.37.1'\ncp {} \"$dir/junit_01.xml\"\n\
                 echo 'Ran 2 of 3 Specs in 1.000 seconds'\necho '{verdict} -- {passed} Passed | {failed} Failed | 0 Pending | 1 Skipped'\n\
                 exit {failed}\n",
                root.join("junit.xml").display()
            ),
        ),
    ];
    for (file, script) in scripts {
        testing::write_executable(file, &script);
    }
    binaries
}

#[test]
fn runs_ginkgo_as_the_conformance_image_does_with_nothing_skipped() {
    let root = Path::new("/r");
    let binaries = Binaries {
        e2e_test: root.join("bin/e2e.test"),
        ginkgo: root.join("bin/ginkgo"),
        kubectl: root.join("bin/kubectl"),
    };
    let dir = suite().submission_dir(&ctx(root)).unwrap();
    assert_eq!(dir, Path::new("/r/artifacts/k8s-conformance/v1.37/reference-ccm"));
    assert_eq!(
        suite().argv(&ctx(root), &binaries, &dir),
        [
            "/r/bin/ginkgo",
            "--procs=4",
            r"--focus=\[Conformance\]",
            "--no-color",
            "--timeout=10800s",
            "-v",
            "/r/bin/e2e.test",
            "--",
            "--disable-log-dump",
            "--provider=skeleton",
            "--report-dir=/r/artifacts/k8s-conformance/v1.37/reference-ccm",
            "--kubeconfig=/r/kubeconfig",
            "--kubectl-path=/r/bin/kubectl",
        ]
    );
    assert_eq!(
        shell_words(&["a b".into(), r"--focus=\[Conformance\]".into(), "--x=1".into()]),
        r"'a b' '--focus=\[Conformance\]' --x=1"
    );
}

#[tokio::test]
async fn writes_a_submission_of_exactly_four_files_that_passes_every_check() {
    let dir = tempfile::tempdir().unwrap();
    let ctx = ctx(dir.path());
    let suite = suite().with_binaries(fakes(dir.path(), "passed"));
    let outcome = suite.run(&ctx).await.unwrap();
    assert!(outcome.passed, "{outcome:?}");
    let submission = suite.submission_dir(&ctx).unwrap();
    let mut files: Vec<String> =
        fs::read_dir(&submission).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
    files.sort();
    assert_eq!(files, ["PRODUCT.yaml", "README.md", "e2e.log", "junit_01.xml"]);
    let log = fs::read_to_string(submission.join("e2e.log")).unwrap();
    assert!(log.starts_with("ginkgo --procs=4"), "{log}");
    let readme = fs::read_to_string(submission.join("README.md")).unwrap();
    assert!(readme.contains("--disable-log-dump --provider=skeleton"), "{readme}");
    let product = fs::read_to_string(submission.join("PRODUCT.yaml")).unwrap();
    assert!(product.contains("version: 0.1.0") || product.contains("version: '0.1.0'"), "{product}");

    let checks = junit::read_file(&ctx.artifacts.join(CHECKS_JUNIT), &junit::ReadOptions::default()).unwrap();
    let counts = checks.counts();
    assert_eq!((counts.failed, counts.skipped), (0, 1), "{checks:?}");
    assert!(outcome.junit.contains(&submission.join("junit_01.xml")), "{:?}", outcome.junit);
    let text = fs::read_to_string(ctx.artifacts.join(CHECKS_TEXT)).unwrap();
    assert!(
        text.ends_with("0 of 17 checks failed; pull request title: Conformance results for v1.37/reference-ccm\n"),
        "{text}"
    );
}

#[tokio::test]
async fn a_failed_test_fails_the_suite_and_the_checks() {
    let dir = tempfile::tempdir().unwrap();
    let ctx = ctx(dir.path());
    let suite = suite().with_binaries(fakes(dir.path(), "failed"));
    let outcome = suite.run(&ctx).await.unwrap();
    assert!(!outcome.passed);
    assert!(outcome.summary.contains("the submission fails 3 of 17 checks"), "{}", outcome.summary);
    let text = fs::read_to_string(ctx.artifacts.join(CHECKS_TEXT)).unwrap();
    for failed in [
        "FAIL  all tests pass",
        "FAIL  all required conformance tests in the junit_01.xml are present",
        "FAIL  the e2e.log output ends with ginkgo's summary of a run with no failure",
    ] {
        assert!(text.contains(failed), "{failed:?} not in\n{text}");
    }
}
