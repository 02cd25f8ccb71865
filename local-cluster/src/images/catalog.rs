//! Which conformance tests need an image: the `framework.ConformanceIt` tests of the files of the
//! module's `test/e2e` that name it (`imageutils.<ImageID>`), for errors that say what an image
//! that cannot be built costs, and for the docs' table.

use std::collections::BTreeMap;
use std::fs;
use std::path::Path;

/// `ImageID` → the conformance tests (`<file>: <title>`) of the files under `e2e_dir` that name it.
pub fn conformance_users(e2e_dir: &Path) -> BTreeMap<String, Vec<String>> {
    let title = regex::Regex::new(r#"framework\.ConformanceIt\(\s*"([^"]+)""#).expect("a valid regex");
    let image = regex::Regex::new(r"imageutils\.(\w+)\b").expect("a valid regex");
    let mut users: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let mut files = Vec::new();
    go_files(e2e_dir, &mut files);
    files.sort();
    for file in files {
        let Ok(text) = fs::read_to_string(&file) else { continue };
        let titles: Vec<&str> = title.captures_iter(&text).map(|c| c.get(1).unwrap().as_str()).collect();
        if titles.is_empty() {
            continue;
        }
        let name = file.strip_prefix(e2e_dir).unwrap_or(&file).display().to_string();
        let mut ids: Vec<&str> = image.captures_iter(&text).map(|c| c.get(1).unwrap().as_str()).collect();
        ids.sort();
        ids.dedup();
        for id in ids {
            let id = if id == "GetPauseImageName" { "Pause" } else { id };
            let entry = users.entry(id.to_string()).or_default();
            entry.extend(titles.iter().map(|t| format!("{name}: {t}")));
        }
    }
    users
}

fn go_files(dir: &Path, found: &mut Vec<std::path::PathBuf>) {
    let Ok(entries) = fs::read_dir(dir) else { return };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            go_files(&path, found);
        } else if path.extension().is_some_and(|x| x == "go") {
            found.push(path);
        }
    }
}

/// At most `max` of `tests`, then how many more.
pub fn summary(tests: &[String], max: usize) -> String {
    if tests.is_empty() {
        return "no [Conformance] test names it".into();
    }
    let shown: Vec<&str> = tests.iter().take(max).map(String::as_str).collect();
    match tests.len().saturating_sub(max) {
        0 => shown.join("; "),
        more => format!("{}; and {more} more", shown.join("; ")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_image_is_needed_by_the_conformance_tests_of_the_files_that_name_it() {
        let dir = tempfile::tempdir().unwrap();
        let network = dir.path().join("network");
        fs::create_dir_all(&network).unwrap();
        fs::write(
            network.join("dns.go"),
            r#"
	glibcProber := dnsQuerier{image: imageutils.GlibcDnsTesting}
	framework.ConformanceIt("should provide DNS for the cluster", func(ctx context.Context) {})
	framework.ConformanceIt(
		"should provide DNS for services", func(ctx context.Context) {})
	pod := imageutils.GetE2EImage(imageutils.AgnhostPrev)
"#,
        )
        .unwrap();
        // Named only in a file without conformance tests: no user.
        fs::write(network.join("other.go"), "x := imageutils.Nginx\nf.It(\"is not conformance\")\n").unwrap();
        let users = conformance_users(dir.path());
        assert_eq!(
            users["GlibcDnsTesting"],
            ["network/dns.go: should provide DNS for the cluster", "network/dns.go: should provide DNS for services"]
        );
        assert!(users.contains_key("AgnhostPrev"));
        assert!(!users.contains_key("Agnhost"), "AgnhostPrev is not Agnhost");
        assert!(!users.contains_key("Nginx"));
        assert_eq!(
            summary(&users["GlibcDnsTesting"], 1),
            "network/dns.go: should provide DNS for the cluster; and 1 more"
        );
    }
}
