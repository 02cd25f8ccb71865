//! The JUnit writer: `<testsuites>` with nextest's retry elements for attempts.
//!
//! A test case's attempts are written as few `<testcase>` elements as the retry elements allow:
//! failures followed by a pass (or a skip) become `<flakyFailure>`/`<flakyError>` before that
//! element; a failure followed by more failures becomes `<failure>` plus
//! `<rerunFailure>`/`<rerunError>`. So any case the reader produces (failed attempts, then at
//! most one that did not fail) is one `<testcase>`, and writing then reading gives it back.
//! Attempts after a pass or a skip are no retry of anything: they are written as further
//! `<testcase>`s with the same name, which the reader (like TestGrid) reads as cases of their own,
//! `name [1]` and on.

use std::fmt::Write as _;
use std::io::{self, Write};
use std::path::Path;

use super::{Attempt, Detail, Outcome, Output, Property, Report, Suite, TestCase};

const NO_ATTEMPT: Attempt =
    Attempt { outcome: Outcome::Passed, time: None, timestamp: None, detail: None, system_out: None, system_err: None };

/// Writes the report as JUnit XML.
pub fn write(report: &Report, mut out: impl Write) -> io::Result<()> {
    out.write_all(to_string(report).as_bytes())
}

/// Writes the report to a file (created or truncated).
pub fn write_file(report: &Report, path: &Path) -> io::Result<()> {
    let mut file = io::BufWriter::new(std::fs::File::create(path)?);
    write(report, &mut file)?;
    file.flush()
}

/// The report as JUnit XML.
pub fn to_string(report: &Report) -> String {
    let suites: Vec<(&Suite, Vec<Element<'_>>)> = report.suites.iter().map(|s| (s, suite_elements(s))).collect();
    let total = suites.iter().map(|(_, e)| tally(e)).fold(Tally::default(), Tally::plus);
    let mut xml = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuites");
    if let Some(name) = &report.name {
        attr(&mut xml, "name", name);
    }
    total.attrs(&mut xml);
    xml.push_str(">\n");
    for (suite, elements) in &suites {
        write_suite(&mut xml, suite, elements);
    }
    xml.push_str("</testsuites>\n");
    xml
}

/// One `<testcase>` element: failed attempts before a pass, the main attempt, failed retries.
struct Element<'a> {
    case: &'a TestCase,
    before: &'a [Attempt],
    main: &'a Attempt,
    after: &'a [Attempt],
}

fn suite_elements(suite: &Suite) -> Vec<Element<'_>> {
    suite.cases.iter().flat_map(case_elements).collect()
}

fn case_elements(case: &TestCase) -> Vec<Element<'_>> {
    let attempts = &case.attempts[..];
    if attempts.is_empty() {
        return vec![Element { case, before: &[], main: &NO_ATTEMPT, after: &[] }];
    }
    let mut elements = Vec::new();
    let mut i = 0;
    while i < attempts.len() {
        let j = attempts[i..].iter().position(|a| !a.outcome.is_failure()).map_or(attempts.len(), |p| i + p);
        if j < attempts.len() {
            // Failures, then an attempt that did not fail.
            elements.push(Element { case, before: &attempts[i..j], main: &attempts[j], after: &[] });
            i = j + 1;
        } else {
            // Failures to the end (at least one, as `i < j`).
            elements.push(Element { case, before: &[], main: &attempts[i], after: &attempts[i + 1..j] });
            i = j;
        }
    }
    elements
}

#[derive(Default, Clone, Copy)]
struct Tally {
    tests: usize,
    failures: usize,
    errors: usize,
    skipped: usize,
}

impl Tally {
    fn plus(self, other: Tally) -> Tally {
        Tally {
            tests: self.tests + other.tests,
            failures: self.failures + other.failures,
            errors: self.errors + other.errors,
            skipped: self.skipped + other.skipped,
        }
    }

    fn attrs(&self, xml: &mut String) {
        let _ = write!(
            xml,
            " tests=\"{}\" failures=\"{}\" errors=\"{}\" skipped=\"{}\"",
            self.tests, self.failures, self.errors, self.skipped
        );
    }
}

fn tally(elements: &[Element<'_>]) -> Tally {
    let mut t = Tally { tests: elements.len(), ..Tally::default() };
    for e in elements {
        match e.main.outcome {
            Outcome::Failed => t.failures += 1,
            Outcome::Error => t.errors += 1,
            Outcome::Skipped => t.skipped += 1,
            Outcome::Passed => {}
        }
    }
    t
}

fn write_suite(xml: &mut String, suite: &Suite, elements: &[Element<'_>]) {
    xml.push_str("  <testsuite");
    attr(xml, "name", &suite.name);
    tally(elements).attrs(xml);
    opt_time(xml, suite.time);
    if let Some(ts) = &suite.timestamp {
        attr(xml, "timestamp", ts);
    }
    xml.push_str(">\n");
    write_properties(xml, &suite.properties, "    ");
    for element in elements {
        write_case(xml, element);
    }
    write_output(xml, "system-out", suite.system_out.as_ref(), "    ");
    write_output(xml, "system-err", suite.system_err.as_ref(), "    ");
    xml.push_str("  </testsuite>\n");
}

fn write_properties(xml: &mut String, properties: &[Property], indent: &str) {
    if properties.is_empty() {
        return;
    }
    let _ = writeln!(xml, "{indent}<properties>");
    for p in properties {
        let _ = write!(xml, "{indent}  <property");
        attr(xml, "name", &p.name);
        attr(xml, "value", &p.value);
        xml.push_str("/>\n");
    }
    let _ = writeln!(xml, "{indent}</properties>");
}

fn write_case(xml: &mut String, e: &Element<'_>) {
    xml.push_str("    <testcase");
    attr(xml, "name", &e.case.name);
    if let Some(classname) = &e.case.classname {
        attr(xml, "classname", classname);
    }
    opt_time(xml, e.main.time);
    if let Some(ts) = &e.main.timestamp {
        attr(xml, "timestamp", ts);
    }
    xml.push_str(">\n");
    write_properties(xml, &e.case.properties, "      ");
    for a in e.before {
        write_retry(xml, if a.outcome == Outcome::Error { "flakyError" } else { "flakyFailure" }, a);
    }
    if let Some(name) = outcome_element(e.main.outcome) {
        write_detail(xml, name, e.main.detail.as_ref());
    }
    for a in e.after {
        write_retry(xml, if a.outcome == Outcome::Error { "rerunError" } else { "rerunFailure" }, a);
    }
    write_output(xml, "system-out", e.main.system_out.as_ref(), "      ");
    write_output(xml, "system-err", e.main.system_err.as_ref(), "      ");
    xml.push_str("    </testcase>\n");
}

fn outcome_element(outcome: Outcome) -> Option<&'static str> {
    match outcome {
        Outcome::Passed => None,
        Outcome::Failed => Some("failure"),
        Outcome::Error => Some("error"),
        Outcome::Skipped => Some("skipped"),
    }
}

fn detail_attrs(xml: &mut String, detail: Option<&Detail>) {
    if let Some(d) = detail {
        if let Some(message) = &d.message {
            attr(xml, "message", message);
        }
        if let Some(kind) = &d.kind {
            attr(xml, "type", kind);
        }
    }
}

fn write_detail(xml: &mut String, name: &str, detail: Option<&Detail>) {
    let _ = write!(xml, "      <{name}");
    detail_attrs(xml, detail);
    match detail.map(|d| d.text.text.as_str()).filter(|t| !t.is_empty()) {
        Some(text) => {
            xml.push('>');
            text_into(xml, text);
            let _ = writeln!(xml, "</{name}>");
        }
        None => xml.push_str("/>\n"),
    }
}

/// A retry element keeps its text and outputs inline: whitespace added here would become text.
fn write_retry(xml: &mut String, name: &str, a: &Attempt) {
    let _ = write!(xml, "      <{name}");
    detail_attrs(xml, a.detail.as_ref());
    opt_time(xml, a.time);
    if let Some(ts) = &a.timestamp {
        attr(xml, "timestamp", ts);
    }
    xml.push('>');
    if let Some(d) = &a.detail {
        text_into(xml, &d.text.text);
    }
    write_output(xml, "system-out", a.system_out.as_ref(), "");
    write_output(xml, "system-err", a.system_err.as_ref(), "");
    let _ = writeln!(xml, "</{name}>");
}

fn write_output(xml: &mut String, name: &str, output: Option<&Output>, indent: &str) {
    let Some(output) = output else { return };
    let _ = write!(xml, "{indent}<{name}>");
    text_into(xml, &output.text);
    let _ = write!(xml, "</{name}>");
    if !indent.is_empty() {
        xml.push('\n');
    }
}

fn opt_time(xml: &mut String, time: Option<f64>) {
    if let Some(t) = time {
        let _ = write!(xml, " time=\"{t}\"");
    }
}

fn attr(xml: &mut String, name: &str, value: &str) {
    let _ = write!(xml, " {name}=\"");
    escape_into(xml, value, true);
    xml.push('"');
}

fn text_into(xml: &mut String, text: &str) {
    escape_into(xml, text, false);
}

/// Escapes markup characters, keeps `\r` (and in attributes `\n`, `\t`) through XML's newline and
/// attribute normalisation, and replaces characters XML 1.0 cannot carry (ANSI escapes, NUL) with
/// U+FFFD.
fn escape_into(xml: &mut String, s: &str, attribute: bool) {
    for c in s.chars() {
        match c {
            '&' => xml.push_str("&amp;"),
            '<' => xml.push_str("&lt;"),
            '>' => xml.push_str("&gt;"),
            '"' if attribute => xml.push_str("&quot;"),
            '\r' => xml.push_str("&#13;"),
            '\n' if attribute => xml.push_str("&#10;"),
            '\t' if attribute => xml.push_str("&#9;"),
            c if is_xml_char(c) => xml.push(c),
            _ => xml.push('\u{FFFD}'),
        }
    }
}

fn is_xml_char(c: char) -> bool {
    matches!(c, '\t' | '\n' | '\r' | '\u{20}'..='\u{D7FF}' | '\u{E000}'..='\u{FFFD}' | '\u{10000}'..='\u{10FFFF}')
}
