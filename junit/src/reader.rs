//! The streaming JUnit reader: quick-xml events for markup, raw streamed bytes for character data.

use std::collections::HashMap;
use std::collections::hash_map::Entry;
use std::fs::File;
use std::hash::{DefaultHasher, Hash, Hasher};
use std::io::{self, BufRead, BufReader, Read};
use std::path::{Path, PathBuf};

use memchr::memmem;
use quick_xml::events::{BytesStart, Event};
use quick_xml::{Reader, XmlVersion};

use super::{Attempt, Detail, JunitError, Outcome, Output, Position, Property, ReadOptions, Report, Suite, TestCase};

type Result<T> = std::result::Result<T, JunitError>;

/// ginkgo v2 writes this into a spec's output each time an attempt fails and it retries.
const RETRY_MARKER: &[u8] = b"Failed.  Retrying";

/// Reads a JUnit file, refusing it unread when it is over `opts.max_file_bytes`.
pub fn read_file(path: &Path, opts: &ReadOptions) -> Result<Report> {
    let io_err = |source| JunitError::Io { file: path.to_path_buf(), source };
    let file = File::open(path).map_err(io_err)?;
    let size = file.metadata().map_err(io_err)?.len();
    if size > opts.max_file_bytes {
        return Err(JunitError::TooLarge { file: path.to_path_buf(), size: Some(size), limit: opts.max_file_bytes });
    }
    read_from(file, path, opts).map_err(|e| locate(e, path))
}

/// Reads JUnit XML from any byte source; `file` names it in errors. The size limit is enforced
/// while reading.
pub fn read_from(input: impl Read, file: &Path, opts: &ReadOptions) -> Result<Report> {
    let limited = Limited { inner: input, remaining: opts.max_file_bytes, exceeded: false };
    let buffered = BufReader::with_capacity(64 * 1024, limited);
    let xml = Reader::from_reader(buffered);
    Parser { xml, buf: Vec::new(), file: file.to_path_buf(), opts: *opts, depth: 0 }.document()
}

/// Reads JUnit XML held in memory (an object fetched from a store); `file` names it in errors,
/// which carry line and column like [`read_file`]'s.
pub fn read_bytes(bytes: &[u8], file: &Path, opts: &ReadOptions) -> Result<Report> {
    if bytes.len() as u64 > opts.max_file_bytes {
        let size = Some(bytes.len() as u64);
        return Err(JunitError::TooLarge { file: file.to_path_buf(), size, limit: opts.max_file_bytes });
    }
    read_from(bytes, file, opts).map_err(|mut err| {
        if let Some(at) = err.position_mut() {
            at.line_column = line_column_in(bytes, at.offset).ok();
        }
        err
    })
}

/// Fills in line and column of a positioned error by scanning the file up to the offset.
fn locate(mut err: JunitError, path: &Path) -> JunitError {
    if let Some(at) = err.position_mut() {
        at.line_column = File::open(path).and_then(|f| line_column_in(f, at.offset)).ok();
    }
    err
}

fn line_column_in(input: impl Read, offset: u64) -> io::Result<(u64, u64)> {
    let mut input = BufReader::new(input.take(offset));
    let (mut line, mut line_start, mut seen) = (1u64, 0u64, 0u64);
    loop {
        let chunk = input.fill_buf()?;
        if chunk.is_empty() {
            return Ok((line, offset - line_start + 1));
        }
        for i in memchr::memchr_iter(b'\n', chunk) {
            line += 1;
            line_start = seen + i as u64 + 1;
        }
        let n = chunk.len();
        seen += n as u64;
        input.consume(n);
    }
}

/// Ends the input with an error once more than `remaining` bytes were asked for.
struct Limited<R> {
    inner: R,
    remaining: u64,
    exceeded: bool,
}

impl<R: Read> Read for Limited<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if self.remaining == 0 {
            // The input may end exactly at the limit: only a further byte is too many.
            let mut probe = [0u8; 1];
            if self.inner.read(&mut probe)? == 0 {
                return Ok(0);
            }
            self.exceeded = true;
            return Err(io::Error::other("JUnit file size limit exceeded"));
        }
        let max = buf.len().min(usize::try_from(self.remaining).unwrap_or(usize::MAX));
        let n = self.inner.read(&mut buf[..max])?;
        self.remaining -= n as u64;
        Ok(n)
    }
}

/// The JUnit elements the reader knows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    TestSuites,
    TestSuite,
    TestCase,
    Properties,
    Property,
    Failure,
    Error,
    Skipped,
    SystemOut,
    SystemErr,
    FlakyFailure,
    FlakyError,
    RerunFailure,
    RerunError,
    StackTrace,
    Other,
}

impl Kind {
    fn of(name: &str) -> Kind {
        match name {
            "testsuites" => Kind::TestSuites,
            "testsuite" => Kind::TestSuite,
            "testcase" => Kind::TestCase,
            "properties" => Kind::Properties,
            "property" => Kind::Property,
            "failure" => Kind::Failure,
            "error" => Kind::Error,
            "skipped" => Kind::Skipped,
            "system-out" => Kind::SystemOut,
            "system-err" => Kind::SystemErr,
            "flakyFailure" => Kind::FlakyFailure,
            "flakyError" => Kind::FlakyError,
            "rerunFailure" => Kind::RerunFailure,
            "rerunError" => Kind::RerunError,
            "stackTrace" => Kind::StackTrace,
            _ => Kind::Other,
        }
    }
}

/// The attributes of the elements the reader knows.
#[derive(Debug, Default)]
struct Attrs {
    name: Option<String>,
    classname: Option<String>,
    /// Seconds, parsed at once.
    time: Option<f64>,
    timestamp: Option<String>,
    message: Option<String>,
    kind: Option<String>,
    status: Option<String>,
    value: Option<String>,
}

#[derive(Debug)]
struct Tag {
    kind: Kind,
    /// The element name, kept only for unknown elements.
    other: String,
    attrs: Attrs,
}

impl Tag {
    fn parse(e: &BytesStart<'_>) -> std::result::Result<Tag, quick_xml::Error> {
        let name = e.name();
        let kind = Kind::of(name.as_ref());
        let mut tag = Tag { kind, other: String::new(), attrs: Attrs::default() };
        if kind == Kind::Other {
            tag.other = name.as_ref().to_owned();
            return Ok(tag);
        }
        for attr in e.attributes() {
            let attr = attr?;
            let slot = match attr.key.as_ref() {
                "time" => {
                    tag.attrs.time = attr.normalized_value(XmlVersion::Implicit1_0)?.trim().parse().ok();
                    continue;
                }
                "name" => &mut tag.attrs.name,
                "classname" => &mut tag.attrs.classname,
                "timestamp" => &mut tag.attrs.timestamp,
                "message" => &mut tag.attrs.message,
                "type" => &mut tag.attrs.kind,
                "status" => &mut tag.attrs.status,
                "value" => &mut tag.attrs.value,
                _ => continue,
            };
            *slot = Some(attr.normalized_value(XmlVersion::Implicit1_0)?.into_owned());
        }
        Ok(tag)
    }

    fn time(&self) -> Option<f64> {
        self.attrs.time
    }
}

/// A markup event, owned so that the parser can read on while holding it.
enum Ev {
    Start(Tag),
    Empty(Tag),
    End,
    CData(String),
    Eof,
    Other,
}

/// Collects character data under a cap: keeps a prefix, counts the rest.
struct Sink {
    cap: usize,
    text: String,
    /// Raw bytes of the current run of text (up to the next `<`), entities not yet resolved.
    segment: Vec<u8>,
    segment_cut: bool,
    dropped: u64,
    retries: Option<RetryScan>,
}

impl Sink {
    fn new(cap: usize) -> Sink {
        Sink { cap, text: String::new(), segment: Vec::new(), segment_cut: false, dropped: 0, retries: None }
    }

    fn scanning(mut self) -> Sink {
        self.retries = Some(RetryScan::default());
        self
    }

    fn room(&self) -> usize {
        self.cap.saturating_sub(self.text.len() + self.segment.len())
    }

    fn raw(&mut self, bytes: &[u8]) {
        if let Some(scan) = &mut self.retries {
            scan.feed(bytes);
        }
        let keep = self.room().min(bytes.len());
        self.segment.extend_from_slice(&bytes[..keep]);
        if keep < bytes.len() {
            self.segment_cut = true;
            self.dropped += (bytes.len() - keep) as u64;
        }
    }

    /// Resolves the entities of the finished run of text and appends it.
    fn end_segment(&mut self) -> std::result::Result<(), quick_xml::escape::EscapeError> {
        let mut raw = std::mem::take(&mut self.segment);
        if std::mem::take(&mut self.segment_cut) {
            cut_partial_entity(&mut raw);
        }
        if !raw.is_empty() {
            let text = String::from_utf8_lossy(&raw);
            self.text.push_str(&quick_xml::escape::unescape(&text)?);
        }
        Ok(())
    }

    /// Appends text that needs no entity resolution (CDATA, nested elements).
    fn push_str(&mut self, s: &str) {
        let mut keep = self.room().min(s.len());
        while !s.is_char_boundary(keep) {
            keep -= 1;
        }
        self.text.push_str(&s[..keep]);
        self.dropped += (s.len() - keep) as u64;
    }

    fn trim_end(&mut self) {
        let len = self.text.trim_end().len();
        self.text.truncate(len);
    }

    fn finish(self) -> (Output, usize) {
        let retries = self.retries.map_or(0, |r| r.count);
        (Output { text: self.text, dropped_bytes: self.dropped }, retries)
    }
}

/// Drops what the cap cut in half: a trailing incomplete `&…;` reference or UTF-8 sequence.
fn cut_partial_entity(raw: &mut Vec<u8>) {
    if let Some(amp) = memchr::memrchr(b'&', raw)
        && !raw[amp..].contains(&b';')
    {
        raw.truncate(amp);
    }
    if let Err(e) = std::str::from_utf8(raw)
        && e.error_len().is_none()
    {
        raw.truncate(e.valid_up_to());
    }
}

/// Counts [`RETRY_MARKER`]s in a byte stream that arrives in chunks.
#[derive(Default)]
struct RetryScan {
    count: usize,
    /// The last `RETRY_MARKER.len() - 1` bytes seen, for markers split across chunks.
    tail: Vec<u8>,
}

impl RetryScan {
    fn feed(&mut self, bytes: &[u8]) {
        let keep = RETRY_MARKER.len() - 1;
        let mut joint = std::mem::take(&mut self.tail);
        joint.extend_from_slice(&bytes[..bytes.len().min(keep)]);
        self.count += memmem::find_iter(&joint, RETRY_MARKER).count();
        self.count += memmem::find_iter(bytes, RETRY_MARKER).count();
        let source = if bytes.len() >= keep { bytes } else { &joint[..] };
        self.tail = source[source.len().saturating_sub(keep)..].to_vec();
    }
}

/// What a `<testcase>`'s children say before they are put in order.
#[derive(Default)]
struct CaseParts {
    main: Attempt,
    /// Rank of the child that set `main.outcome`: skipped < error < failure.
    rank: u8,
    before: Vec<Attempt>,
    after: Vec<Attempt>,
    retries: usize,
    properties: Vec<Property>,
    /// A `<skipped>` child TestGrid would drop the case for: no text, no message but "skipped".
    unnamed_skip: bool,
}

struct Parser<R> {
    xml: Reader<BufReader<Limited<R>>>,
    buf: Vec<u8>,
    file: PathBuf,
    opts: ReadOptions,
    /// How many elements are open: checked against [`ReadOptions::max_depth`] at each start tag.
    depth: usize,
}

impl<R: Read> Parser<R> {
    fn document(mut self) -> Result<Report> {
        let (root, empty) = self.root()?;
        let mut report = Report::default();
        match root.kind {
            Kind::TestSuites => {
                report.name = root.attrs.name;
                if !empty {
                    self.testsuites(&mut report)?;
                }
            }
            Kind::TestSuite => self.suite(root, empty, &mut report)?,
            _ => return Err(self.wrong_root(root)),
        }
        Ok(report)
    }

    /// Skips the prolog (declaration, comments) and returns the root element.
    fn root(&mut self) -> Result<(Tag, bool)> {
        loop {
            match self.next()? {
                Ev::Start(tag) => return Ok((tag, false)),
                Ev::Empty(tag) => return Ok((tag, true)),
                Ev::Eof => return Err(JunitError::Empty { file: self.file.clone() }),
                Ev::End | Ev::CData(_) | Ev::Other => {}
            }
        }
    }

    fn testsuites(&mut self, report: &mut Report) -> Result<()> {
        while let Some((child, leaf)) = self.next_child("testsuites")? {
            match child.kind {
                Kind::TestSuite => self.suite(child, leaf, report)?,
                _ if !leaf => self.skip("testsuites")?,
                _ => {}
            }
        }
        Ok(())
    }

    /// The next child element of the open element, skipping text and comments; `None` at its end.
    fn next_child(&mut self, open: &str) -> Result<Option<(Tag, bool)>> {
        loop {
            self.skip_text()?;
            match self.next()? {
                Ev::Start(tag) => return Ok(Some((tag, false))),
                Ev::Empty(tag) => return Ok(Some((tag, true))),
                Ev::End => return Ok(None),
                Ev::Eof => return Err(self.truncated(open)),
                Ev::CData(_) | Ev::Other => {}
            }
        }
    }

    /// Reads a `<testsuite>` into `report`; nested suites follow their parent. The open suites
    /// are kept on a stack of their own, not the call stack: no nesting can overflow it.
    fn suite(&mut self, tag: Tag, empty: bool, report: &mut Report) -> Result<()> {
        let index = push_suite(report, tag);
        if empty {
            return Ok(());
        }
        // Each open suite: its index in `report.suites` and the names of the cases seen in it.
        let mut open = vec![(index, Repeats::default())];
        while let Some((index, repeats)) = open.last_mut() {
            let index = *index;
            let Some((child, leaf)) = self.next_child("testsuite")? else {
                if let Some((index, repeats)) = open.pop() {
                    repeats.name(&mut report.suites[index]);
                }
                continue;
            };
            match child.kind {
                Kind::TestCase => {
                    let (case, dropped) = self.case(child, leaf)?;
                    repeats.add(&mut report.suites[index], case, dropped);
                }
                Kind::TestSuite => {
                    let nested = push_suite(report, child);
                    if !leaf {
                        open.push((nested, Repeats::default()));
                    }
                }
                Kind::Properties => report.suites[index].properties.extend(self.properties(leaf)?),
                Kind::SystemOut => report.suites[index].system_out = Some(self.output(Kind::SystemOut, leaf, false)?.0),
                Kind::SystemErr => report.suites[index].system_err = Some(self.output(Kind::SystemErr, leaf, false)?.0),
                _ if !leaf => self.skip("testsuite")?,
                _ => {}
            }
        }
        Ok(())
    }

    /// A `<testcase>`, and whether TestGrid drops it from its grid (see [`Repeats`]).
    fn case(&mut self, tag: Tag, empty: bool) -> Result<(TestCase, bool)> {
        let time = tag.time();
        let a = tag.attrs;
        let main = Attempt {
            outcome: status_outcome(a.status.as_deref()),
            time,
            timestamp: a.timestamp,
            ..Attempt::default()
        };
        let mut parts = CaseParts { main, ..CaseParts::default() };
        if !empty {
            while let Some((child, leaf)) = self.next_child("testcase")? {
                self.case_child(child, leaf, &mut parts)?;
            }
        }
        if parts.before.is_empty() {
            parts.before = ginkgo_retries(parts.retries);
        }
        let mut attempts = parts.before;
        attempts.push(parts.main);
        attempts.extend(parts.after);
        let case = TestCase {
            name: a.name.unwrap_or_default(),
            classname: a.classname,
            properties: parts.properties,
            attempts,
        };
        Ok((case, parts.unnamed_skip))
    }

    fn case_child(&mut self, tag: Tag, empty: bool, parts: &mut CaseParts) -> Result<()> {
        match tag.kind {
            Kind::Failure | Kind::Error | Kind::Skipped => {
                let tag_kind = tag.kind;
                let (outcome, rank) = match tag.kind {
                    Kind::Failure => (Outcome::Failed, 3),
                    Kind::Error => (Outcome::Error, 2),
                    _ => (Outcome::Skipped, 1),
                };
                let (detail, out, err) = self.detail(tag, empty)?;
                if tag_kind == Kind::Skipped {
                    // TestGrid's updater drops a case whose <skipped> has no text and no message
                    // but "skipped": ginkgo v1's every skip, ginkgo v2's for a spec left out.
                    parts.unnamed_skip = detail.is_bare_skip();
                }
                if rank > parts.rank {
                    parts.rank = rank;
                    parts.main.outcome = outcome;
                    parts.main.detail = detail.said_something();
                }
                parts.main.system_out = parts.main.system_out.take().or(out);
                parts.main.system_err = parts.main.system_err.take().or(err);
            }
            Kind::FlakyFailure | Kind::FlakyError => parts.before.push(self.retry(tag, empty)?),
            Kind::RerunFailure | Kind::RerunError => parts.after.push(self.retry(tag, empty)?),
            Kind::SystemOut | Kind::SystemErr => {
                let (output, retries) = self.output(tag.kind, empty, true)?;
                parts.retries += retries;
                let slot =
                    if tag.kind == Kind::SystemOut { &mut parts.main.system_out } else { &mut parts.main.system_err };
                *slot = Some(output);
            }
            Kind::Properties => parts.properties.extend(self.properties(empty)?),
            _ if !empty => self.skip("testcase")?,
            _ => {}
        }
        Ok(())
    }

    /// A nextest retry element: one failed attempt with its own outputs.
    fn retry(&mut self, tag: Tag, empty: bool) -> Result<Attempt> {
        let outcome = match tag.kind {
            Kind::FlakyError | Kind::RerunError => Outcome::Error,
            _ => Outcome::Failed,
        };
        let time = tag.time();
        let timestamp = tag.attrs.timestamp.clone();
        let (detail, system_out, system_err) = self.detail(tag, empty)?;
        Ok(Attempt { outcome, time, timestamp, detail: detail.said_something(), system_out, system_err })
    }

    /// A failure-like element: its text (with any `<stackTrace>` appended) and nested outputs.
    fn detail(&mut self, tag: Tag, empty: bool) -> Result<(Detail, Option<Output>, Option<Output>)> {
        let open = element_name(tag.kind);
        let mut detail = Detail { message: tag.attrs.message, kind: tag.attrs.kind, text: Output::default() };
        let (mut out, mut err) = (None, None);
        if empty {
            return Ok((detail, out, err));
        }
        let mut sink = Sink::new(self.opts.max_text_bytes);
        let mut seen_child = false;
        loop {
            if seen_child {
                self.text_between_children(&mut sink)?;
            } else {
                self.text(&mut sink)?;
            }
            let event = self.next()?;
            if matches!(event, Ev::Start(_) | Ev::Empty(_)) && !seen_child {
                // The whitespace before a first child element is indentation, not message.
                seen_child = true;
                sink.trim_end();
            }
            match event {
                Ev::Start(child) => match child.kind {
                    Kind::SystemOut => out = Some(self.output(child.kind, false, false)?.0),
                    Kind::SystemErr => err = Some(self.output(child.kind, false, false)?.0),
                    Kind::StackTrace => {
                        let trace = self.output(child.kind, false, false)?.0;
                        sink.push_str("\n");
                        sink.push_str(&trace.text);
                    }
                    _ => self.skip(open)?,
                },
                Ev::CData(text) => sink.push_str(&text),
                Ev::End => break,
                Ev::Eof => return Err(self.truncated(open)),
                Ev::Empty(_) | Ev::Other => {}
            }
        }
        detail.text = sink.finish().0;
        Ok((detail, out, err))
    }

    /// Text after a child element: kept unless it is only indentation.
    fn text_between_children(&mut self, sink: &mut Sink) -> Result<()> {
        let mut between = Sink::new(sink.room());
        self.text(&mut between)?;
        let (text, _) = between.finish();
        if !text.text.trim().is_empty() {
            sink.push_str(&text.text);
        }
        sink.dropped += text.dropped_bytes;
        Ok(())
    }

    /// A text-only element (`<system-out>`, `<stackTrace>`, …), optionally counting ginkgo retries.
    fn output(&mut self, kind: Kind, empty: bool, scan_retries: bool) -> Result<(Output, usize)> {
        let mut sink = Sink::new(self.opts.max_text_bytes);
        if scan_retries {
            sink = sink.scanning();
        }
        if empty {
            return Ok(sink.finish());
        }
        loop {
            self.text(&mut sink)?;
            match self.next()? {
                Ev::CData(text) => sink.push_str(&text),
                Ev::Start(_) => self.skip(element_name(kind))?,
                Ev::End => break,
                Ev::Eof => return Err(self.truncated(element_name(kind))),
                Ev::Empty(_) | Ev::Other => {}
            }
        }
        Ok(sink.finish())
    }

    fn properties(&mut self, empty: bool) -> Result<Vec<Property>> {
        let mut properties = Vec::new();
        if empty {
            return Ok(properties);
        }
        while let Some((tag, leaf)) = self.next_child("properties")? {
            if tag.kind != Kind::Property {
                if !leaf {
                    self.skip("properties")?;
                }
                continue;
            }
            // Some writers put the value in the element's text instead of an attribute.
            let text = self.output(tag.kind, leaf, false)?.0.text;
            let name = tag.attrs.name.unwrap_or_default();
            properties.push(Property { name, value: tag.attrs.value.unwrap_or(text) });
        }
        Ok(properties)
    }

    /// Skips the rest of an element whose start tag was just read.
    fn skip(&mut self, parent: &str) -> Result<()> {
        let mut depth = 1usize;
        while depth > 0 {
            self.skip_text()?;
            match self.next()? {
                Ev::Start(_) => depth += 1,
                Ev::End => depth -= 1,
                Ev::Eof => return Err(self.truncated(parent)),
                Ev::Empty(_) | Ev::CData(_) | Ev::Other => {}
            }
        }
        Ok(())
    }

    fn skip_text(&mut self) -> Result<()> {
        self.text(&mut Sink::new(0))
    }

    /// Streams the character data up to the next `<` into `sink`, never holding more than one
    /// buffer of it unless the sink keeps it.
    fn text(&mut self, sink: &mut Sink) -> Result<()> {
        loop {
            let mut stream = self.xml.stream();
            let chunk = match stream.fill_buf() {
                Ok(chunk) => chunk,
                Err(e) => return Err(self.io_error(e)),
            };
            if chunk.is_empty() {
                return Ok(());
            }
            let end = memchr::memchr(b'<', chunk);
            let n = end.unwrap_or(chunk.len());
            sink.raw(&chunk[..n]);
            stream.consume(n);
            if end.is_some() {
                return sink.end_segment().map_err(|e| self.malformed(e.into(), self.xml.buffer_position()));
            }
        }
    }

    fn next(&mut self) -> Result<Ev> {
        let start = self.xml.buffer_position();
        self.buf.clear();
        let event = match self.xml.read_event_into(&mut self.buf) {
            Ok(event) => event,
            Err(e) => return Err(self.xml_error(e)),
        };
        let ev = match event {
            Event::Start(e) => {
                self.depth += 1;
                if self.depth > self.opts.max_depth {
                    return Err(self.too_deep(start));
                }
                Tag::parse(&e).map(Ev::Start)
            }
            Event::Empty(e) => {
                if self.depth >= self.opts.max_depth {
                    return Err(self.too_deep(start));
                }
                Tag::parse(&e).map(Ev::Empty)
            }
            Event::End(_) => {
                self.depth = self.depth.saturating_sub(1);
                Ok(Ev::End)
            }
            Event::CData(text) => Ok(Ev::CData(text.into_inner().into_owned())),
            // Anywhere in the file, not only in the prolog where XML allows one.
            Event::DocType(_) => return Err(JunitError::Doctype { file: self.file.clone(), at: self.here() }),
            Event::Eof => Ok(Ev::Eof),
            _ => Ok(Ev::Other),
        };
        ev.map_err(|e| self.malformed(e, self.xml.buffer_position()))
    }

    fn here(&self) -> Position {
        Position { offset: self.xml.buffer_position(), line_column: None }
    }

    fn limit_exceeded(&self) -> bool {
        self.xml.get_ref().get_ref().exceeded
    }

    fn too_large(&self) -> JunitError {
        JunitError::TooLarge { file: self.file.clone(), size: None, limit: self.opts.max_file_bytes }
    }

    fn io_error(&self, source: io::Error) -> JunitError {
        if self.limit_exceeded() {
            return self.too_large();
        }
        JunitError::Io { file: self.file.clone(), source }
    }

    fn xml_error(&self, source: quick_xml::Error) -> JunitError {
        match source {
            quick_xml::Error::Io(_) if self.limit_exceeded() => self.too_large(),
            quick_xml::Error::Io(e) => JunitError::Io { file: self.file.clone(), source: io::Error::other(e) },
            source => self.malformed(source, self.xml.error_position()),
        }
    }

    fn malformed(&self, source: quick_xml::Error, offset: u64) -> JunitError {
        JunitError::Malformed { file: self.file.clone(), at: Position { offset, line_column: None }, source }
    }

    /// An element that starts at `offset` and would be one level deeper than the limit.
    fn too_deep(&self, offset: u64) -> JunitError {
        let at = Position { offset, line_column: None };
        JunitError::TooDeep { file: self.file.clone(), at, limit: self.opts.max_depth }
    }

    fn truncated(&self, open: &str) -> JunitError {
        JunitError::Truncated { file: self.file.clone(), at: self.here(), open: open.to_owned() }
    }

    fn wrong_root(&self, root: Tag) -> JunitError {
        let found = if root.kind == Kind::Other { root.other } else { element_name(root.kind).to_owned() };
        JunitError::WrongRoot { file: self.file.clone(), at: self.here(), found }
    }
}

impl Detail {
    /// `None` for an element that carried no message, type or text (`<skipped/>`).
    fn said_something(self) -> Option<Detail> {
        let blank = self.message.is_none() && self.kind.is_none() && self.text.text.is_empty();
        (!blank).then_some(self)
    }
}

/// Appends an empty suite with the attributes of its start tag; returns its index.
fn push_suite(report: &mut Report, tag: Tag) -> usize {
    let time = tag.time();
    let a = tag.attrs;
    report.suites.push(Suite { name: a.name.unwrap_or_default(), timestamp: a.timestamp, time, ..Suite::default() });
    report.suites.len() - 1
}

/// The cases of one suite by name, while the suite is read: which repeats are retries, and the
/// names TestGrid gives the repeats that are not.
///
/// A `<testcase>` with the classname and name of the one just before it in the suite is a retry
/// of it (more attempts of one case) when that attempt failed or errored and this one ran (was
/// not skipped): ginkgo v1's `--flakeAttempts` writes a retried spec that way, each attempt right
/// after the failed one. Any other repeat is a case of its own: two passes, a pass then a failure,
/// two skips, or a failure then a pass of a same-named spec elsewhere in the file (ginkgo v1 files
/// hold distinct specs with one name).
///
/// Repeats are named as TestGrid's updater (`pkg/updater`, `convertResult` then `SplitCells`, with
/// `disable_merged_status`) names the rows of a build: it numbers the `<testcase>` elements of one
/// name in document order, `name`, `name [1]`, `name [2]`, …, skipping those it drops (a
/// `<skipped>` with no text and no message but "skipped"). A case takes the number of its first
/// element (its retries use up the next ones, as TestGrid shows each attempt as a row); cases
/// TestGrid drops take the numbers after all of those. A name that appears once keeps its name.
#[derive(Default)]
struct Repeats {
    /// A hash of each name to the first and the last case with that name.
    names: HashMap<u64, (usize, usize)>,
    /// Per case of the suite, in order.
    meta: Vec<CaseMeta>,
    /// The first case of each name seen more than once.
    repeated: Vec<usize>,
}

#[derive(Clone, Copy)]
struct CaseMeta {
    /// The case's `<testcase>` elements that TestGrid shows.
    shown: usize,
    /// TestGrid drops its first element.
    dropped: bool,
    /// The next case with the same name.
    next: Option<usize>,
}

impl Repeats {
    /// Adds a `<testcase>` to the suite: as attempts of the case before it when it is a retry,
    /// else as a case (named by [`Repeats::name`] once the suite is read).
    fn add(&mut self, suite: &mut Suite, case: TestCase, dropped: bool) {
        let shown = usize::from(!dropped);
        if let Some(last) = suite.cases.last_mut()
            && is_retry(last, &case)
        {
            last.attempts.extend(case.attempts);
            last.properties.extend(case.properties);
            if let Some(meta) = self.meta.last_mut() {
                meta.shown += shown;
            }
            return;
        }
        let index = suite.cases.len();
        let mut hasher = DefaultHasher::new();
        case.name.hash(&mut hasher);
        match self.names.entry(hasher.finish()) {
            Entry::Vacant(entry) => {
                entry.insert((index, index));
            }
            Entry::Occupied(mut entry) => {
                let (first, last) = *entry.get();
                // A 64-bit hash collision between two names leaves the later one alone.
                if suite.cases[first].name == case.name {
                    if first == last {
                        self.repeated.push(first);
                    }
                    self.meta[last].next = Some(index);
                    entry.insert((first, index));
                }
            }
        }
        self.meta.push(CaseMeta { shown, dropped, next: None });
        suite.cases.push(case);
    }

    /// Gives the repeated names of the suite their numbers.
    fn name(self, suite: &mut Suite) {
        for first in self.repeated {
            let mut number = 0;
            let mut dropped = Vec::new();
            let mut at = Some(first);
            while let Some(index) = at {
                let meta = self.meta[index];
                if meta.dropped {
                    dropped.push(index);
                } else {
                    number_case(&mut suite.cases[index], number);
                }
                number += meta.shown;
                at = meta.next;
            }
            for index in dropped {
                number_case(&mut suite.cases[index], number);
                number += 1;
            }
        }
    }
}

/// Whether `case` is a retry of `last`, the case just before it: same test, `last`'s latest
/// attempt failed or errored, and `case` ran.
fn is_retry(last: &TestCase, case: &TestCase) -> bool {
    last.name == case.name
        && last.classname == case.classname
        && last.attempts.last().is_some_and(|a| a.outcome.is_failure())
        && case.attempts.iter().any(|a| a.outcome != Outcome::Skipped)
}

/// TestGrid's name for the `number`th row of a name: `name`, `name [1]`, `name [2]`, ….
fn number_case(case: &mut TestCase, number: usize) {
    if number > 0 {
        case.name = format!("{} [{number}]", case.name);
    }
}

/// ginkgo v2's `status` attribute; child elements, when present, override it.
fn status_outcome(status: Option<&str>) -> Outcome {
    match status {
        Some("failed") => Outcome::Failed,
        Some("panicked" | "interrupted" | "aborted" | "timedout" | "error") => Outcome::Error,
        Some("skipped" | "pending" | "disabled") => Outcome::Skipped,
        _ => Outcome::Passed,
    }
}

/// The failed attempts a ginkgo v2 spec's output records (it has no element for them).
fn ginkgo_retries(count: usize) -> Vec<Attempt> {
    (1..=count)
        .map(|n| Attempt {
            outcome: Outcome::Failed,
            detail: Some(Detail {
                message: Some(format!("attempt {n} failed and ginkgo retried the spec")),
                kind: Some("ginkgo-retry".to_owned()),
                text: Output::default(),
            }),
            ..Attempt::default()
        })
        .collect()
}

fn element_name(kind: Kind) -> &'static str {
    match kind {
        Kind::TestSuites => "testsuites",
        Kind::TestSuite => "testsuite",
        Kind::TestCase => "testcase",
        Kind::Properties => "properties",
        Kind::Property => "property",
        Kind::Failure => "failure",
        Kind::Error => "error",
        Kind::Skipped => "skipped",
        Kind::SystemOut => "system-out",
        Kind::SystemErr => "system-err",
        Kind::FlakyFailure => "flakyFailure",
        Kind::FlakyError => "flakyError",
        Kind::RerunFailure => "rerunFailure",
        Kind::RerunError => "rerunError",
        Kind::StackTrace => "stackTrace",
        Kind::Other => "?",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retry_markers_are_counted_across_chunk_boundaries() {
        let text = b"x Attempt #1 Failed.  Retrying y Attempt #2 Failed.  Retrying z";
        for size in [1, 2, 5, 16, 17, 18, text.len()] {
            let mut scan = RetryScan::default();
            text.chunks(size).for_each(|c| scan.feed(c));
            assert_eq!(scan.count, 2, "chunk size {size}");
        }
    }

    #[test]
    fn a_cut_reference_or_character_is_dropped_not_mangled() {
        let mut raw = b"a &amp; b &am".to_vec();
        cut_partial_entity(&mut raw);
        assert_eq!(raw, b"a &amp; b ");
        let mut raw = "ab\u{e9}".as_bytes()[..3].to_vec();
        cut_partial_entity(&mut raw);
        assert_eq!(raw, b"ab");
    }

    #[test]
    fn the_limit_reader_allows_input_of_exactly_the_limit() {
        let mut exact = Limited { inner: &b"12345"[..], remaining: 5, exceeded: false };
        let mut out = Vec::new();
        exact.read_to_end(&mut out).unwrap();
        assert_eq!(out, b"12345");
        let mut over = Limited { inner: &b"123456"[..], remaining: 5, exceeded: false };
        assert!(over.read_to_end(&mut Vec::new()).is_err());
        assert!(over.exceeded);
    }
}
