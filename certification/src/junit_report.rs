//! `junit_01.xml` read as the submission checks read it: the file upstream `e2e.test` writes with
//! `--report-dir` (a `<testsuites>` root), each `<testcase>` with whether it holds a `<skipped>`,
//! `<failure>` or `<error>`, and the suite's `<properties>` (ginkgo's run configuration:
//! `SkipStrings`, `LabelFilter`, `DryRun`, ...).
//!
//! Read here rather than through the `junit` crate because the rules are about the file's shape
//! (its root element, each element as written), not about test outcomes merged across retries.

use std::collections::BTreeMap;

use quick_xml::events::{BytesStart, Event};
use quick_xml::{Reader, XmlVersion};

/// One `<testcase>`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Case {
    /// The name as written (`[It] [sig-node] ...`), entities resolved.
    pub name: String,
    pub skipped: bool,
    pub failed: bool,
    pub errored: bool,
}

/// What the checks need of the file.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct E2eJunit {
    /// The root element's name (`testsuites` for the file `e2e.test` writes).
    pub root: String,
    /// The properties of every suite, the first value of a name winning.
    pub properties: BTreeMap<String, String>,
    pub cases: Vec<Case>,
}

impl E2eJunit {
    pub fn property(&self, name: &str) -> Option<&str> {
        self.properties.get(name).map(String::as_str)
    }
}

/// Reads the file's text.
pub fn read(text: &str) -> Result<E2eJunit, String> {
    let mut reader = Reader::from_str(text);
    let mut junit = E2eJunit::default();
    let mut case: Option<Case> = None;
    loop {
        let event = reader
            .read_event()
            .map_err(|e| format!("not well-formed XML at byte {}: {e}", reader.buffer_position()))?;
        match event {
            Event::DocType(_) => return Err("has a DOCTYPE, which JUnit files do not".into()),
            Event::Start(e) => start(&mut junit, &mut case, &e, false)?,
            Event::Empty(e) => start(&mut junit, &mut case, &e, true)?,
            Event::End(e) if e.name().as_ref() == "testcase" => junit.cases.extend(case.take()),
            Event::Eof => break,
            _ => {}
        }
    }
    if junit.root.is_empty() {
        return Err("has no root element".into());
    }
    Ok(junit)
}

fn start(junit: &mut E2eJunit, case: &mut Option<Case>, e: &BytesStart<'_>, empty: bool) -> Result<(), String> {
    let name = e.name().as_ref().to_owned();
    if junit.root.is_empty() {
        junit.root = name;
        return Ok(());
    }
    match name.as_str() {
        "testcase" => {
            let opened = Case { name: attribute(e, "name")?.unwrap_or_default(), ..Case::default() };
            if empty {
                junit.cases.push(opened);
            } else {
                *case = Some(opened);
            }
        }
        "skipped" | "failure" | "error" => {
            if let Some(case) = case.as_mut() {
                match name.as_str() {
                    "skipped" => case.skipped = true,
                    "failure" => case.failed = true,
                    _ => case.errored = true,
                }
            }
        }
        "property" if case.is_none() => {
            if let Some(key) = attribute(e, "name")? {
                let value = attribute(e, "value")?.unwrap_or_default();
                junit.properties.entry(key).or_insert(value);
            }
        }
        _ => {}
    }
    Ok(())
}

fn attribute(e: &BytesStart<'_>, key: &str) -> Result<Option<String>, String> {
    for attr in e.attributes() {
        let attr = attr.map_err(|err| format!("bad attribute: {err}"))?;
        if attr.key.as_ref() == key {
            let value =
                attr.normalized_value(XmlVersion::Implicit1_0).map_err(|err| format!("bad attribute {key}: {err}"))?;
            return Ok(Some(value.into_owned()));
        }
    }
    Ok(None)
}

/// A test case's name as the conformance list writes it: without ginkgo's `[It] ` and with the
/// one quoting difference the submission checks forgive (`'cat /tmp/health'` in the JUnit,
/// `"cat /tmp/health"` in the list).
pub fn list_name(case_name: &str) -> String {
    case_name.strip_prefix("[It] ").unwrap_or(case_name).replace("'cat /tmp/health'", "\"cat /tmp/health\"")
}

#[cfg(test)]
mod tests {
    use super::*;

    const FILE: &str = r#"<?xml version="1.0" encoding="UTF-8"?>
<testsuites tests="3" disabled="0" errors="0" failures="1" time="1">
  <testsuite name="Kubernetes e2e suite" tests="3" skipped="1">
    <properties>
      <property name="SkipStrings" value=""></property>
      <property name="FocusStrings" value="\[Conformance\]"></property>
    </properties>
    <testcase name="[It] [sig-x] doesn&#39;t fail [Conformance]" status="passed"></testcase>
    <testcase name="[It] [sig-x] fails &gt; twice [Conformance]" status="failed"><failure message="boom">boom</failure></testcase>
    <testcase name="[It] [sig-x] skipped [Conformance]" status="skipped"><skipped message="skipped"/></testcase>
    <testcase name="[SynchronizedBeforeSuite]" status="passed"/>
  </testsuite>
</testsuites>"#;

    #[test]
    fn reads_cases_and_properties() {
        let junit = read(FILE).unwrap();
        assert_eq!(junit.root, "testsuites");
        assert_eq!(junit.property("SkipStrings"), Some(""));
        assert_eq!(junit.property("FocusStrings"), Some(r"\[Conformance\]"));
        let names: Vec<_> = junit.cases.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "[It] [sig-x] doesn't fail [Conformance]",
                "[It] [sig-x] fails > twice [Conformance]",
                "[It] [sig-x] skipped [Conformance]",
                "[SynchronizedBeforeSuite]"
            ]
        );
        assert!(!junit.cases[0].failed && junit.cases[1].failed && junit.cases[2].skipped);
    }

    #[test]
    fn a_testsuite_root_is_read_and_named() {
        let junit = read(r#"<testsuite name="x"><testcase name="a"/></testsuite>"#).unwrap();
        assert_eq!(junit.root, "testsuite");
        assert_eq!(junit.cases.len(), 1);
    }

    #[test]
    fn broken_files_are_refused() {
        assert!(read("<testsuites><testcase name='a'></testsuites>").is_err());
        assert!(read("").unwrap_err().contains("no root"));
        assert!(read("<!DOCTYPE x [<!ENTITY a 'b'>]><testsuites/>").unwrap_err().contains("DOCTYPE"));
    }

    #[test]
    fn list_names_drop_the_it_and_the_health_quotes() {
        assert_eq!(list_name("[It] a 'cat /tmp/health' b"), "a \"cat /tmp/health\" b");
        assert_eq!(list_name("[SynchronizedBeforeSuite]"), "[SynchronizedBeforeSuite]");
    }
}
